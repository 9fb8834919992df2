"""Serving and fine-tuning speed on this machine: dynamic padding vs fixed padding.

Measures, for a randomly initialised classifier with the shapes of --preset:
1. the exported SavedModel (raw text in, loaded with tf.saved_model.load as TF Serving would):
   latency p50/p99 of one short sentence, and throughput of batches of 32 mixed-length texts,
   with dynamic padding vs the same model padding every request to --fixed_length tokens;
2. fine-tuning (keras fit) examples/s on the same length mix with and without dynamic padding.

    python scripts/benchmark_serving.py --spm_model_file=tiny.model --preset=albert_base_v2

Texts are docstring paragraphs of numpy (1-6 sentences: a realistic spread of lengths).
"""

import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py

import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (its size sets the vocab).")
flags.DEFINE_string("preset", "albert_base_v2", "Model shapes (random weights).")
flags.DEFINE_integer("fixed_length", 512, "Fixed padding length to compare against.")
flags.DEFINE_integer("latency_reps", 50, "Single-sentence requests timed.")
flags.DEFINE_integer("throughput_batches", 4, "Batches of 32 timed per padding mode.")
flags.DEFINE_integer("train_seq_length", 128, "max_seq_length for the fine-tuning measurement.")
flags.DEFINE_integer("train_batch_size", 16, "Fine-tuning batch size.")
flags.DEFINE_integer("train_steps", 4, "Timed fine-tuning steps per padding mode (after 1 warmup).")
flags.DEFINE_string("work_dir", "/tmp/albert_tf_benchmark_serving", "Where exports are written.")
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


def _serving(path, texts):
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    one = tf.constant(["How long does a short sentence take?"])
    for _ in range(3):
        serve(text=one)
    latencies = []
    for _ in range(FLAGS.latency_reps):
        start = time.perf_counter()
        serve(text=one)["probabilities"].numpy()
        latencies.append(time.perf_counter() - start)
    batches = [tf.constant(texts[i * 32 : (i + 1) * 32]) for i in range(FLAGS.throughput_batches)]
    serve(text=batches[0])
    start = time.perf_counter()
    for batch in batches:
        serve(text=batch)["probabilities"].numpy()
    elapsed = time.perf_counter() - start
    return {
        "p50_ms": 1e3 * float(np.percentile(latencies, 50)),
        "p99_ms": 1e3 * float(np.percentile(latencies, 99)),
        "batch32_texts_per_s": 32 * len(batches) / elapsed,
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
    import keras
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_classifier
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.preprocessor import AlbertPreprocessor

    keras.utils.set_random_seed(0)
    texts = _texts(max(32 * FLAGS.throughput_batches, FLAGS.train_batch_size * 8))
    fixed = AlbertPreprocessor(FLAGS.spm_model_file, seq_length=FLAGS.fixed_length)
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
    for name, dynamic in (("dynamic", True), (f"fixed_{FLAGS.fixed_length}", False)):
        path = export_classifier(
            model, fixed, f"{FLAGS.work_dir}/{name}", dynamic_padding=dynamic, write_warmup=False
        )
        results[f"serving_{name}"] = _serving(path, texts)
        logging.info("serving %s: %s", name, results[f"serving_{name}"])
    for name, dynamic in (("dynamic", True), (f"fixed_{FLAGS.train_seq_length}", False)):
        train_model = AlbertClassifier(AlbertModel(config), num_classes=2)
        train_model.compile(num_train_steps=100)
        pre = AlbertPreprocessor(
            FLAGS.spm_model_file, seq_length=FLAGS.train_seq_length, dynamic_padding=dynamic
        )
        results[f"finetune_{name}_examples_per_s"] = _finetune(train_model, pre, texts)
        logging.info(
            "fine-tuning %s: %.2f examples/s", name, results[f"finetune_{name}_examples_per_s"]
        )
    results["tf_version"] = tf.__version__
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    cli.run(main)
