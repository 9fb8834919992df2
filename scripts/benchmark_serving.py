"""Serving and fine-tuning speed on this machine: padding, precision, and HF torch side by side.

Measures, for a randomly initialised classifier with the shapes of --preset (--measure picks):
- padding: the exported SavedModel (raw text in, loaded with tf.saved_model.load as TF Serving
  would): latency p50/p99 of one short sentence, and throughput of batches of 32 mixed-length
  texts, with dynamic padding vs the same model padding every request to --fixed_length tokens;
- precision: the same with the bfloat16 export (`compute_dtype="bfloat16"`), its agreement with
  float32 on the texts (top-1 agreement, max probability difference), and the HF transformers
  pipeline on the same texts and random weights (AlbertTokenizerFast converted from the same
  SentencePiece model + AlbertForSequenceClassification, torch CPU, float32 and bf16 autocast;
  skipped with a message unless torch and transformers are installed: pip install
  albert_tf[bench]), with the ratios albert_tf / HF;
- finetune: keras fit examples/s on the same length mix with and without dynamic padding.

    python scripts/benchmark_serving.py --spm_model_file=tiny.model --preset=albert_base_v2 \
        --measure=precision

Texts are docstring paragraphs of numpy (1-6 sentences: a realistic spread of lengths).
"""

import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (its size sets the vocab).")
flags.DEFINE_string("preset", "albert_base_v2", "Model shapes (random weights).")
flags.DEFINE_integer("fixed_length", 512, "Fixed padding length to compare against.")
flags.DEFINE_integer("latency_reps", 50, "Single-sentence requests timed.")
flags.DEFINE_integer("throughput_batches", 4, "Batches of 32 timed per padding mode.")
flags.DEFINE_integer("train_max_seq_length", 128, "max_seq_length for the fine-tuning measurement.")
flags.DEFINE_integer("train_batch_size", 16, "Fine-tuning batch size.")
flags.DEFINE_integer("train_steps", 4, "Timed fine-tuning steps per padding mode (after 1 warmup).")
flags.DEFINE_string("work_dir", "/tmp/albert_tf_benchmark_serving", "Where exports are written.")
flags.DEFINE_list(
    "measure",
    ["padding", "precision", "finetune"],
    "What to measure: padding, precision, finetune.",
)
flags.mark_flag_as_required("spm_model_file")


def _texts(count, seed=0):
    from albert_tf.data.corpora import iter_documents

    rng = np.random.default_rng(seed)
    texts = []
    for document in iter_documents("builtin:docstrings", packages=("numpy",)):
        texts.append(" ".join(document[: int(rng.integers(1, 7))]))
        if len(texts) >= count:
            break
    return texts


SHORT_SENTENCE = "How long does a short sentence take?"


# Rounds of the latency measurement: in each round every pipeline serves an untimed request and
# then latency_reps / ROUNDS timed ones in a row. In a row, as a serving process that answers
# one model's requests does (its weights stay in cache; requests alternating between models, or
# spaced by pauses, measured every pipeline slower); in rounds, so that a change of load
# on a shared machine hits all pipelines alike.
ROUNDS = 5


def _timed(predicts, texts):
    """{name: latency of one short sentence and throughput of batches of 32} for `predicts`,
    {name: predict(list of str) -> float32 probabilities [B, C] (a numpy array)}."""
    one = [SHORT_SENTENCE]
    batches = [texts[i * 32 : (i + 1) * 32] for i in range(FLAGS.throughput_batches)]
    for predict in predicts.values():
        for _ in range(3):
            predict(one)
        predict(batches[0])
    latencies = {name: [] for name in predicts}
    elapsed = dict.fromkeys(predicts, 0.0)
    for round_index in range(ROUNDS):
        for name, predict in predicts.items():
            predict(one)
            for _ in range(max(1, FLAGS.latency_reps // ROUNDS)):
                start = time.perf_counter()
                predict(one)
                latencies[name].append(time.perf_counter() - start)
            for batch in batches[round_index::ROUNDS]:
                start = time.perf_counter()
                predict(batch)
                elapsed[name] += time.perf_counter() - start
    return {
        name: {
            "p50_ms": 1e3 * float(np.percentile(latencies[name], 50)),
            "p99_ms": 1e3 * float(np.percentile(latencies[name], 99)),
            "batch32_texts_per_s": 32 * len(batches) / elapsed[name],
        }
        for name in predicts
    }


def _saved_model_predict(path):
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    return lambda texts: serve(text=tf.constant(texts))["probabilities"].numpy()


def _hf_predict(spm_model_file, config, max_length):
    """(predict float32, predict bf16 autocast, tokenizer, versions) of the HF pipeline with
    random weights of `config`'s shapes, or None when torch or transformers is missing."""
    try:
        import torch
        import transformers
    except ImportError as e:
        logging.warning("HF torch pipeline skipped (%s): pip install albert_tf[bench]", e)
        return None
    from albert_tf.convert.huggingface import huggingface_config

    try:
        tokenizer = transformers.AlbertTokenizerFast(vocab_file=spm_model_file, do_lower_case=True)
    except Exception as e:  # the conversion needs protobuf/sentencepiece; fall back to slow
        logging.warning("AlbertTokenizerFast conversion failed (%s): AlbertTokenizer (slow)", e)
        tokenizer = transformers.AlbertTokenizer(vocab_file=spm_model_file, do_lower_case=True)
    torch.manual_seed(0)
    model = transformers.AlbertForSequenceClassification(
        transformers.AlbertConfig(**huggingface_config(config), num_labels=2)
    ).eval()

    def predict(texts, bf16=False):
        with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            inputs = tokenizer(
                texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
            return torch.softmax(model(**inputs).logits.float(), -1).numpy()

    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    return predict, lambda texts: predict(texts, bf16=True), tokenizer, versions


def _precision(model, fixed, config, texts, results):
    """albert_tf float32 and bfloat16 exports and the HF pipeline, side by side."""
    import tensorflow as tf

    from albert_tf.export.saved_model import export_classifier

    served = {}
    for dtype in ("float32", "bfloat16"):
        path = export_classifier(
            model,
            fixed,
            f"{FLAGS.work_dir}/{dtype}",
            write_warmup=False,
            compute_dtype=dtype,
            agreement_texts=texts if dtype != "float32" else None,
        )
        with open(os.path.join(path, "assets.extra", "albert_tf.json")) as f:
            description = json.load(f)
        if "agreement_with_float32" in description:
            results["bfloat16_agreement_with_float32"] = description["agreement_with_float32"]
        served[f"albert_tf_{dtype}"] = _saved_model_predict(path)
    hf = _hf_predict(FLAGS.spm_model_file, config, FLAGS.fixed_length)
    if hf is not None:
        served["hf_torch_float32"], served["hf_torch_bf16_autocast"], tokenizer, versions = hf
        results["hf_tokenizer"], results["hf_versions"] = type(tokenizer).__name__, versions
        ours = fixed({"text": tf.constant(texts)})
        ours = [
            row[mask == 1].tolist()
            for row, mask in zip(ours["input_word_ids"].numpy(), ours["input_mask"].numpy())
        ]
        theirs = tokenizer(texts, truncation=True, max_length=FLAGS.fixed_length)["input_ids"]
        results["hf_same_ids_fraction"] = float(np.mean([a == b for a, b in zip(ours, theirs)]))
    for name, figures in _timed(served, texts).items():
        results[f"serving_{name}"] = figures
        logging.info("serving %s: %s", name, figures)
    if hf is not None:
        ours = {k: results[f"serving_albert_tf_{k}"] for k in ("float32", "bfloat16")}
        peer = results["serving_hf_torch_float32"]
        results["ratios_vs_hf_torch_float32"] = {
            f"albert_tf_{k}": {
                "p50": v["p50_ms"] / peer["p50_ms"],
                "p99": v["p99_ms"] / peer["p99_ms"],
                "batch32_texts_per_s": v["batch32_texts_per_s"] / peer["batch32_texts_per_s"],
            }
            for k, v in ours.items()
        }


def _finetune(model, preprocessor, texts):
    from albert_tf.finetune.inputs import train_dataset
    from albert_tf.finetune.task import Features

    labels = np.arange(len(texts), dtype=np.int32) % 2
    features = Features({"text": np.asarray(texts, dtype=object)}, labels)
    dataset = train_dataset(features, FLAGS.train_batch_size, seed=0, transform=preprocessor)
    model.fit(dataset, epochs=1, steps_per_epoch=1, verbose=0)  # trace + warm up
    start = time.perf_counter()
    model.fit(dataset, epochs=1, steps_per_epoch=FLAGS.train_steps, verbose=0)
    return FLAGS.train_batch_size * FLAGS.train_steps / (time.perf_counter() - start)


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.measure) - {"padding", "precision", "finetune"})
    if unknown or not FLAGS.measure:
        cli.fail(f"--measure: expected some of padding, precision, finetune, got {FLAGS.measure}")
    import keras
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_classifier
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.preprocessor import AlbertPreprocessor

    keras.utils.set_random_seed(0)
    texts = _texts(max(32 * FLAGS.throughput_batches, FLAGS.train_batch_size * 8))
    # Hugging Face's TeX-quote rule, so that the ids compare with its AlbertTokenizer's.
    fixed = AlbertPreprocessor(
        FLAGS.spm_model_file, max_seq_length=FLAGS.fixed_length, tex_quotes=True
    )
    lengths = fixed.token_lengths(texts).numpy()
    config = AlbertConfig.from_preset(FLAGS.preset, vocab_size=fixed.vocab_size)
    model = AlbertClassifier(AlbertModel(config), num_classes=2)
    results = {
        "preset": FLAGS.preset,
        "vocab_size": fixed.vocab_size,
        "pieces_per_text": {
            "mean": float(lengths.mean()),
            "p50": float(np.percentile(lengths, 50)),
            "max": int(lengths.max()),
        },
    }
    paddings = (("dynamic", True), (f"fixed_{FLAGS.fixed_length}", False))
    served = {}
    for name, dynamic in paddings if "padding" in FLAGS.measure else ():
        path = export_classifier(
            model, fixed, f"{FLAGS.work_dir}/{name}", dynamic_padding=dynamic, write_warmup=False
        )
        served[name] = _saved_model_predict(path)
    if served:
        for name, figures in _timed(served, texts).items():
            results[f"serving_{name}"] = figures
            logging.info("serving %s: %s", name, figures)
    if "precision" in FLAGS.measure:
        _precision(model, fixed, config, texts, results)
    paddings = (("dynamic", True), (f"fixed_{FLAGS.train_max_seq_length}", False))
    for name, dynamic in paddings if "finetune" in FLAGS.measure else ():
        train_model = AlbertClassifier(AlbertModel(config), num_classes=2)
        train_model.compile(num_train_steps=100)
        pre = AlbertPreprocessor(
            FLAGS.spm_model_file, max_seq_length=FLAGS.train_max_seq_length, dynamic_padding=dynamic
        )
        results[f"finetune_{name}_examples_per_s"] = _finetune(train_model, pre, texts)
        logging.info(
            "fine-tuning %s: %.2f examples/s", name, results[f"finetune_{name}_examples_per_s"]
        )
    results["tf_version"] = tf.__version__
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    cli.run(main)
