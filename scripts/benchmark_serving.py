"""Serving speed of the raw-text SavedModels, side by side with Hugging Face torch, in one run.

ALBERT shapes of --preset with random weights (the vocabulary of --spm_model_file), each export
loaded with tf.saved_model.load as TF Serving would. --measure picks:
- peers: one short sentence (p50/p99) and batches of 32 mixed-length texts (texts/s) through
  the float32 and bfloat16 exports and the HF pipeline (AlbertTokenizer on the same
  SentencePiece model + AlbertForSequenceClassification, torch CPU, float32, bf16 autocast and
  bfloat16 weights; skipped with a message unless torch and transformers are installed:
  pip install albert_tf[bench]), in rounds; the ratios to HF's best setting, the compute
  bound (the request's matmul FLOPs over this CPU's measured matmul rate) and the time to read
  the weights once per layer at this CPU's measured read rate;
- profile: where one short request's time goes in each export (matmuls, text ops, the
  encoder loop's control ops, elementwise, and the executor's overhead);
- concurrency: 1, 4 and 16 clients sending single sentences at once, p50/p99 and texts/s,
  without server batching and with each --batching setting (TF Serving's batching emulated in
  the process: albert_tf.benchmarks.concurrency);
- tasks: the token classifier's one-sentence p50 and the SQuAD export's one-question p50 (a
  one-window context) beside the classifier's;
- padding: dynamic padding against padding every request to --fixed_length;
- finetune: keras fit examples/s with and without dynamic padding.

    python scripts/benchmark_serving.py --spm_model_file=30k-clean.model \
        --preset=albert_base_v2 --measure=peers,profile,concurrency,tasks

Texts are docstring paragraphs of numpy (1-6 sentences: a realistic spread of lengths).
"""

import copy
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

MEASURES = ("peers", "profile", "concurrency", "tasks", "padding", "finetune")
FLAGS = flags.FLAGS
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (its size sets the vocab).")
flags.DEFINE_string("preset", "albert_base_v2", "Model shapes (random weights).")
flags.DEFINE_integer("fixed_length", 512, "Fixed padding length to compare against.")
flags.DEFINE_integer("latency_reps", 50, "Single-sentence requests timed per pipeline.")
flags.DEFINE_integer("throughput_batches", 4, "Batches of 32 timed per pipeline.")
flags.DEFINE_integer("profile_calls", 20, "Requests profiled per export (--measure=profile).")
flags.DEFINE_integer(
    "intra_op_threads",
    0,
    "TensorFlow's intra-op threads (TF Serving: --tensorflow_intra_op_parallelism); 0: all cores.",
    lower_bound=0,
)
flags.DEFINE_integer(
    "torch_threads",
    0,
    "torch.set_num_threads for the HF pipelines; 0: torch's default.",
    lower_bound=0,
)
flags.DEFINE_list("clients", ["1", "4", "16"], "Concurrent clients (--measure=concurrency).")
flags.DEFINE_float("client_seconds", 5.0, "Seconds each concurrency setting runs.")
flags.DEFINE_list(
    "batching",
    ["8:1000:1", "16:2000:1", "16:2000:2"],
    "Server batching settings to measure, max_batch_size:batch_timeout_micros:num_batch_threads.",
)
flags.DEFINE_integer("train_max_seq_length", 128, "max_seq_length for the fine-tuning measurement.")
flags.DEFINE_integer("train_batch_size", 16, "Fine-tuning batch size.")
flags.DEFINE_integer("train_steps", 4, "Timed fine-tuning steps per padding mode (after 1 warmup).")
flags.DEFINE_string("work_dir", "/tmp/albert_tf_benchmark_serving", "Where exports are written.")
flags.DEFINE_list("measure", ["peers", "profile", "concurrency", "tasks"], ", ".join(MEASURES))
flags.mark_flag_as_required("spm_model_file")

SHORT_SENTENCE = "How long does a short sentence take?"
QUESTION = "How long does one question take?"
CONTEXT = "One question on a short context takes a few milliseconds on a CPU."
# Rounds of the latency measurement: in each round every pipeline serves an untimed request and
# then latency_reps / ROUNDS timed ones in a row. In a row, as a serving process that answers
# one model's requests does (its weights stay in cache); in rounds, so that a change of load
# on a shared machine hits all pipelines alike.
ROUNDS = 5


def _texts(count, seed=0):
    from albert_tf.data.corpora import iter_documents

    rng = np.random.default_rng(seed)
    texts = []
    for document in iter_documents("builtin:docstrings", packages=("numpy",)):
        texts.append(" ".join(document[: int(rng.integers(1, 7))]))
        if len(texts) >= count:
            break
    return texts


def _timed(predicts, texts, one=(SHORT_SENTENCE,)):
    """{name: p50/p99 ms of one request and texts/s in batches of 32} for `predicts`,
    {name: predict(list of requests)}; without `texts`, latency only."""
    one = list(one)
    batches = [texts[i * 32 : (i + 1) * 32] for i in range(FLAGS.throughput_batches)]
    batches = batches if texts else []
    for predict in predicts.values():
        for _ in range(3):
            predict(one)
        if batches:
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
    results = {}
    for name in predicts:
        results[name] = {
            "p50_ms": 1e3 * float(np.percentile(latencies[name], 50)),
            "p99_ms": 1e3 * float(np.percentile(latencies[name], 99)),
        }
        if batches:
            results[name]["batch32_texts_per_s"] = 32 * len(batches) / elapsed[name]
    return results


def _serve(path, signature="serving_default"):
    import tensorflow as tf

    return tf.saved_model.load(path).signatures[signature]


def _classify(path):
    import tensorflow as tf

    serve = _serve(path)
    return lambda texts: serve(text=tf.constant(texts))["probabilities"].numpy()


def _hf_pipelines(spm_model_file, config, max_length):
    """({name: predict} of the HF pipeline with random weights of `config`'s shapes in float32,
    under bf16 autocast and with bfloat16 weights, tokenizer, versions), or None when torch or
    transformers is missing."""
    try:
        import torch
        import transformers
    except ImportError as e:
        logging.warning("HF torch pipeline skipped (%s): pip install albert_tf[bench]", e)
        return None
    from albert_tf.benchmarks.torch_peer import huggingface_model

    try:
        tokenizer = transformers.AlbertTokenizerFast(vocab_file=spm_model_file, do_lower_case=True)
    except Exception as e:  # the conversion needs protobuf/sentencepiece; fall back to slow
        logging.warning("AlbertTokenizerFast conversion failed (%s): AlbertTokenizer (slow)", e)
        tokenizer = transformers.AlbertTokenizer(vocab_file=spm_model_file, do_lower_case=True)
    if FLAGS.torch_threads:
        torch.set_num_threads(FLAGS.torch_threads)
    model = huggingface_model("AlbertForSequenceClassification", config, num_labels=2).eval()
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)

    def pipeline(model, autocast=False):
        def predict(texts):
            with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
                inputs = tokenizer(
                    texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                return torch.softmax(model(**inputs).logits.float(), -1).numpy()

        return predict

    pipelines = {
        "hf_torch_float32": pipeline(model),
        "hf_torch_bf16_autocast": pipeline(model, autocast=True),
        "hf_torch_bfloat16_weights": pipeline(bf16_model),
    }
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    return pipelines, tokenizer, versions


def _exports(model, preprocessor, texts, results):
    """{compute dtype: export path} of the classifier in float32 and bfloat16."""
    from albert_tf.export.saved_model import export_classifier

    paths = {}
    for dtype in ("float32", "bfloat16"):
        paths[dtype] = export_classifier(
            model,
            preprocessor,
            f"{FLAGS.work_dir}/{dtype}",
            write_warmup=False,
            compute_dtype=dtype,
            agreement_texts=texts if dtype != "float32" else None,
        )
        with open(os.path.join(paths[dtype], "assets.extra", "albert_tf.json")) as f:
            description = json.load(f)
        if "agreement_with_float32" in description:
            results["bfloat16_agreement_with_float32"] = description["agreement_with_float32"]
    return paths


def _peers(paths, preprocessor, config, texts, results):
    """albert_tf's float32 and bfloat16 exports and the HF pipelines, side by side."""
    import tensorflow as tf

    from albert_tf.benchmarks import compute_bound

    served = {f"albert_tf_{dtype}": _classify(path) for dtype, path in paths.items()}
    hf = _hf_pipelines(FLAGS.spm_model_file, config, FLAGS.fixed_length)
    if hf is not None:
        pipelines, tokenizer, versions = hf
        served.update(pipelines)
        results["hf_tokenizer"], results["hf_versions"] = type(tokenizer).__name__, versions
        ours = preprocessor({"text": tf.constant(texts)})
        ours = [
            row[mask == 1].tolist()
            for row, mask in zip(ours["input_word_ids"].numpy(), ours["input_mask"].numpy())
        ]
        theirs = tokenizer(texts, truncation=True, max_length=FLAGS.fixed_length)["input_ids"]
        results["hf_same_ids_fraction"] = float(np.mean([a == b for a, b in zip(ours, theirs)]))
    for name, figures in _timed(served, texts).items():
        results[f"serving_{name}"] = figures
        logging.info("serving %s: %s", name, figures)
    # the positions the model computes: the pieces with [CLS] and [SEP]
    tokens = int(tf.reduce_sum(preprocessor({"text": tf.constant([SHORT_SENTENCE])})["input_mask"]))
    flops = compute_bound.forward_flops(config, tokens)
    bound = {}
    read_rate = compute_bound.read_rate()
    for dtype in paths:
        rate = compute_bound.matmul_rate(dtype)
        weights = compute_bound.weight_bytes(config, 2 if dtype == "bfloat16" else 4)
        bound[dtype] = {
            "matmul_gflop_per_s": rate / 1e9,
            "bound_ms": 1e3 * flops / rate,
            "weight_read_ms": 1e3 * weights / read_rate,
        }
        p50 = results[f"serving_albert_tf_{dtype}"]["p50_ms"]
        bound[dtype]["p50_over_bound"] = p50 / bound[dtype]["bound_ms"]
        bound[dtype]["p50_over_weight_read"] = p50 / bound[dtype]["weight_read_ms"]
    results["compute_bound"] = {
        "tokens": tokens,
        "gflop": flops / 1e9,
        "read_gb_per_s": read_rate / 1e9,
        **bound,
    }
    if hf is not None:
        hf_names = [name for name in served if name.startswith("hf_")]
        best_p50 = min(results[f"serving_{n}"]["p50_ms"] for n in hf_names)
        best_rate = max(results[f"serving_{n}"]["batch32_texts_per_s"] for n in hf_names)
        results["ratios_vs_hf_best"] = {
            f"albert_tf_{dtype}": {
                "p50": results[f"serving_albert_tf_{dtype}"]["p50_ms"] / best_p50,
                "batch32_texts_per_s": results[f"serving_albert_tf_{dtype}"]["batch32_texts_per_s"]
                / best_rate,
            }
            for dtype in paths
        }


def _profile(paths, results):
    """Where one short request's time goes in each export."""
    import tensorflow as tf

    from albert_tf.benchmarks import op_profile

    for dtype, path in paths.items():
        serve = _serve(path)
        profile = op_profile.profile_calls(
            serve, kwargs={"text": tf.constant([SHORT_SENTENCE])}, calls=FLAGS.profile_calls
        )
        results[f"profile_{dtype}"] = profile.to_dict()
        print(f"\none short request, {dtype} export:\n{profile.table()}")


def _batching_settings():
    """{label: Batcher keyword arguments or None} of --batching (None: no server batching)."""
    settings = {"no batching": None}
    for setting in FLAGS.batching:
        size, timeout, threads = (int(v) for v in setting.split(":"))
        settings[f"batching {setting}"] = dict(
            max_batch_size=size, batch_timeout_micros=timeout, num_batch_threads=threads
        )
    return settings


def _concurrency(paths, results):
    """Concurrent single-sentence clients without and with server batching."""
    from albert_tf.benchmarks import concurrency

    for dtype, path in paths.items():
        predict = _classify(path)
        for size in (1, 2, 4, 8, 16, 32):  # every batch shape's first call is slower
            predict([SHORT_SENTENCE] * size)
        for label, parameters in _batching_settings().items():
            batcher = concurrency.Batcher(predict, **parameters) if parameters else None
            for clients in (int(c) for c in FLAGS.clients):
                figures = concurrency.measure_clients(
                    batcher.submit if batcher else predict,
                    [SHORT_SENTENCE],
                    clients=clients,
                    duration_s=FLAGS.client_seconds,
                )
                results[f"concurrency_{dtype}_{label}_{clients}_clients"] = figures
                logging.info("%s export, %s, %d clients: %s", dtype, label, clients, figures)
            if batcher:
                batcher.close()


def _tasks(model, paths, preprocessor, results):
    """The token classifier's and the SQuAD exports' one-request p50 beside the classifier's, in
    float32 and bfloat16 (SQuAD v1 pads its windows to max_seq_length, v2 to the longest)."""
    import tensorflow as tf

    from albert_tf.data.squad_features import FeatureSettings
    from albert_tf.export.squad_serving import export_question_answerer
    from albert_tf.export.token_classifier_serving import export_token_classifier
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    models = {
        "token_classifier": AlbertTokenClassifier(model.backbone, labels=["O", "B-X", "I-X"]),
        "squad_v1": AlbertQuestionAnswerer(model.backbone),
        "squad_v2": AlbertSquadV2Model(model.backbone),
    }
    settings = FeatureSettings(max_seq_length=384, doc_stride=128, max_query_length=64)
    served = {}
    for dtype in ("float32", "bfloat16"):
        served[f"classifier_{dtype}"] = _classify(paths[dtype])
        tag = _serve(
            export_token_classifier(
                models["token_classifier"], preprocessor, f"{FLAGS.work_dir}/tagger_{dtype}",
                max_seq_length=128, write_warmup=False, compute_dtype=dtype,
            )
        )  # fmt: skip
        served[f"token_classifier_{dtype}"] = lambda texts, tag=tag: tag(text=tf.constant(texts))
        for kind in ("squad_v1", "squad_v2"):
            answer = _serve(
                export_question_answerer(
                    models[kind], FLAGS.spm_model_file, f"{FLAGS.work_dir}/{kind}_{dtype}",
                    settings, write_warmup=False, compute_dtype=dtype,
                )
            )  # fmt: skip
            served[f"{kind}_{dtype}"] = lambda texts, answer=answer: answer(
                question=tf.constant([QUESTION] * len(texts)), context=tf.constant(texts)
            )
    # one short text: the sentence to classify or tag, the context to answer from
    for name, figures in _timed(served, [], one=(CONTEXT,)).items():
        results[f"task_{name}"] = figures
        logging.info("%s: %s", name, figures)


def _padding(model, fixed, texts, results):
    from albert_tf.export.saved_model import export_classifier

    served = {}
    for name, dynamic in (("dynamic", True), (f"fixed_{FLAGS.fixed_length}", False)):
        path = export_classifier(
            model, fixed, f"{FLAGS.work_dir}/{name}", dynamic_padding=dynamic, write_warmup=False
        )
        served[name] = _classify(path)
    for name, figures in _timed(served, texts).items():
        results[f"padding_{name}"] = figures
        logging.info("serving %s: %s", name, figures)


def _finetune(config, texts, results):
    from albert_tf.finetune.inputs import train_dataset
    from albert_tf.finetune.task import Features
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.preprocessor import AlbertPreprocessor

    labels = np.arange(len(texts), dtype=np.int32) % 2
    features = Features({"text": np.asarray(texts, dtype=object)}, labels)
    for name, dynamic in (("dynamic", True), (f"fixed_{FLAGS.train_max_seq_length}", False)):
        model = AlbertClassifier(AlbertModel(config), num_classes=2)
        model.compile(num_train_steps=100)
        pre = AlbertPreprocessor(
            FLAGS.spm_model_file, max_seq_length=FLAGS.train_max_seq_length, dynamic_padding=dynamic
        )
        dataset = train_dataset(features, FLAGS.train_batch_size, seed=0, transform=pre)
        model.fit(dataset, epochs=1, steps_per_epoch=1, verbose=0)  # trace + warm up
        start = time.perf_counter()
        model.fit(dataset, epochs=1, steps_per_epoch=FLAGS.train_steps, verbose=0)
        rate = FLAGS.train_batch_size * FLAGS.train_steps / (time.perf_counter() - start)
        results[f"finetune_{name}_examples_per_s"] = rate
        logging.info("fine-tuning %s: %.2f examples/s", name, rate)


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.measure) - set(MEASURES))
    if unknown or not FLAGS.measure:
        cli.fail(f"--measure: expected some of {', '.join(MEASURES)}, got {FLAGS.measure}")
    for setting in FLAGS.batching:
        parts = setting.split(":")
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or "0" in (parts[0], parts[2]):
            cli.fail(
                "--batching: expected max_batch_size:batch_timeout_micros:num_batch_threads "
                f"(positive sizes), got {setting!r}"
            )
    if not all(c.isdigit() and int(c) > 0 for c in FLAGS.clients):
        cli.fail(f"--clients: expected positive integers, got {FLAGS.clients}")
    import keras
    import tensorflow as tf

    if FLAGS.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    from albert_tf.benchmarks.timing import cpu_name
    from albert_tf.config import AlbertConfig
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
        "cpu": cpu_name(),
        "intra_op_threads": FLAGS.intra_op_threads or "all cores",
        "torch_threads": FLAGS.torch_threads or "default",
        "vocab_size": fixed.vocab_size,
        "pieces_per_text": {
            "mean": float(lengths.mean()),
            "p50": float(np.percentile(lengths, 50)),
            "max": int(lengths.max()),
        },
    }
    if "padding" in FLAGS.measure:
        _padding(model, fixed, texts, results)
    if {"peers", "profile", "concurrency", "tasks"} & set(FLAGS.measure):
        paths = _exports(model, fixed, texts, results)
        if "peers" in FLAGS.measure:
            _peers(paths, fixed, config, texts, results)
        if "profile" in FLAGS.measure:
            _profile(paths, results)
        if "concurrency" in FLAGS.measure:
            _concurrency(paths, results)
        if "tasks" in FLAGS.measure:
            _tasks(model, paths, fixed, results)
    if "finetune" in FLAGS.measure:
        _finetune(config, texts, results)
    results["tf_version"] = tf.__version__
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    cli.run(main)
