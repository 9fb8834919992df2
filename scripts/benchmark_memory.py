"""Peak memory and step time of one training step, with and without `recompute`, and keras-hub's.

Each configuration runs in its own Python process (so that one's memory cannot hide in
another's peak): it builds the model, runs --steps training steps (forward, backward, SGD
update of every weight; dropout on) and reports its peak resident set size (ru_maxrss), the
resident size just before the first step (weights, TensorFlow's runtime), their difference (what
the step itself needed: activations kept for the backward pass, gradients, workspace), and the
median step time. Configurations:

    albert_tf             AlbertModel(config), the `tf.while_loop` encoder
    albert_tf+recompute   AlbertModel(config, recompute=True)
    keras-hub             keras_hub.models.AlbertBackbone with the same shapes (skipped with a
                          message if keras_hub is not installed: the `bench` extra)
    classifier            a fine-tuning step of AlbertClassifier (`train_on_batch`: AdamW,
                          clipping) with compile(gradient_accumulation_steps=
                          --gradient_accumulation_steps): --batch_size is the batch of one
                          update, run as micro-batches of batch_size / N

The table gives each one's figures and ratios to albert_tf without recompute.

    python scripts/benchmark_memory.py --preset=albert_large_v2 --layers=24 \\
        --batch_size=2 --max_seq_length=512 --steps=2
    python scripts/benchmark_memory.py --preset=albert_tiny --layers=2 --batch_size=2 \\
        --max_seq_length=32 --steps=1     # a smoke run
    python scripts/benchmark_memory.py --preset=albert_base_v2 --layers=12 --batch_size=128 \\
        --gradient_accumulation_steps=16 --max_seq_length=512 --steps=1 --configurations=classifier
"""

import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_large_v2", "AlbertConfig preset giving the shapes.")
flags.DEFINE_integer("layers", 24, "num_hidden_layers.", lower_bound=1)
flags.DEFINE_integer("batch_size", 2, "Batch size.", lower_bound=1)
flags.DEFINE_integer(
    "max_seq_length",
    512,
    "Length of the input sequences (no padding: all real ids).",
    lower_bound=1,
)
flags.DEFINE_integer(
    "steps", 2, "Training steps per configuration (the first traces).", lower_bound=1
)
flags.DEFINE_float("dropout", 0.1, "Hidden and attention dropout.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the step.")
flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16"], "Keras dtype policy.")
flags.DEFINE_integer(
    "gradient_accumulation_steps", 1, "Micro-batches per update (classifier only).", lower_bound=1
)

CONFIGURATIONS = ("albert_tf", "albert_tf+recompute", "keras-hub", "classifier")
flags.DEFINE_list(
    "configurations", ",".join(CONFIGURATIONS[:3]), f"Which to run, of {', '.join(CONFIGURATIONS)}."
)
flags.DEFINE_enum("child", None, list(CONFIGURATIONS), "Internal: run one.")
BASELINE = "albert_tf"  # ratios are to it when it runs


def _rss_bytes():
    """The current resident set size (Linux /proc; 0 where it is not available)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _peak_rss_bytes():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def _model_and_inputs(name, config, batch_size, max_seq_length, dtype):
    """(model, inputs, name of its sequence output) for one configuration."""
    import numpy as np

    rng = np.random.default_rng(0)
    shape = [batch_size, max_seq_length]
    ids = rng.integers(5, config.vocab_size, shape).astype("int32")
    mask, types = np.ones(shape, "int32"), np.zeros(shape, "int32")
    if name == "keras-hub":
        import keras_hub

        model = keras_hub.models.AlbertBackbone(
            vocabulary_size=config.vocab_size,
            num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads,
            num_groups=config.num_hidden_groups,
            num_inner_repetitions=config.inner_group_num,
            embedding_dim=config.embedding_size,
            hidden_dim=config.hidden_size,
            intermediate_dim=config.intermediate_size,
            dropout=config.hidden_dropout_prob,
            max_sequence_length=config.max_position_embeddings,
            num_segments=config.type_vocab_size,
            dtype=dtype,
        )
        return model, {"token_ids": ids, "segment_ids": types, "padding_mask": mask}

    from albert_tf.models.backbone import AlbertModel

    model = AlbertModel(config, recompute=name.endswith("+recompute"), dtype=dtype)
    return model, {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def run_child(name):
    """Runs one configuration in this process and prints its figures as one JSON line."""

    from albert_tf.config import AlbertConfig

    config = AlbertConfig.from_preset(
        FLAGS.preset,
        num_hidden_layers=FLAGS.layers,
        hidden_dropout_prob=FLAGS.dropout,
        attention_probs_dropout_prob=FLAGS.dropout,
    )
    model, inputs = _model_and_inputs(
        "albert_tf" if name == "classifier" else name,
        config,
        FLAGS.batch_size,
        FLAGS.max_seq_length,
        FLAGS.dtype,
    )
    if name == "classifier":
        step = _classifier_step(model, inputs)

    else:
        step = _backbone_step(model)
    before = _rss_bytes()
    seconds = []
    for _ in range(FLAGS.steps):
        start = time.perf_counter()
        float(step(inputs))
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"before": before, "peak": _peak_rss_bytes(), "seconds": seconds}))


def _classifier_step(backbone, inputs):
    """A fine-tuning step (train_on_batch) of an AlbertClassifier on `backbone`; its variables
    and the optimizer's exist before the first step."""
    import numpy as np

    from albert_tf.models.classifier import AlbertClassifier

    model = AlbertClassifier(backbone, num_classes=3)
    model.compile(
        precision=FLAGS.dtype,
        jit_compile=FLAGS.jit_compile,
        num_train_steps=10,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
    )
    model.build_optimizer()
    labels = np.arange(FLAGS.batch_size, dtype="int32") % 3
    return lambda inputs: model.train_on_batch(inputs, labels, return_dict=True)["loss"]


def _backbone_step(model):
    import tensorflow as tf

    @tf.function(jit_compile=FLAGS.jit_compile)
    def step(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(tf.square(tf.cast(out["sequence_output"], tf.float32)))
            loss += tf.reduce_mean(tf.cast(out["pooled_output"], tf.float32))
        grads = tape.gradient(loss, model.trainable_variables)
        for variable, grad in zip(model.trainable_variables, grads):
            variable.assign_sub(1e-4 * tf.cast(tf.convert_to_tensor(grad), variable.dtype))
        return loss

    return step


def _measure(name):
    """Runs one configuration in a subprocess; its figures, or None with the reason logged."""
    if name == "keras-hub" and importlib.util.find_spec("keras_hub") is None:
        logging.warning("keras-hub: keras_hub is not installed (pip install -e .[bench]); skipped")
        return None
    passed = [
        f"--{f}={getattr(FLAGS, f)}"
        for f in (
            "preset",
            "layers",
            "batch_size",
            "max_seq_length",
            "steps",
            "dropout",
            "dtype",
            "gradient_accumulation_steps",
        )
    ]
    passed.append(f"--jit_compile={FLAGS.jit_compile}")
    command = [sys.executable, os.path.abspath(__file__), f"--child={name}"] + passed
    logging.info("running %s", name)
    result = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode or not lines:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        logging.warning("%s failed (exit code %d): %s", name, result.returncode, tail)
        return None
    figures = json.loads(lines[-1])
    logging.info("%s: %s", name, figures)
    return figures


def _step_seconds(figures):
    """The median of the steady steps (all steps if there is only one)."""
    steady = figures["seconds"][1:] or figures["seconds"]
    return statistics.median(steady)


def markdown(results):
    mib = 2.0**20
    lines = [
        "| Configuration | Peak RSS (MiB) | RSS before the step (MiB) | Step's own (MiB) | "
        "Step (s) | Peak vs albert_tf | Step's own vs albert_tf | Step time vs albert_tf |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = results.get(BASELINE)
    for name, r in results.items():
        own = r["peak"] - r["before"]
        row = f"| {name} | {r['peak'] / mib:.0f} | {r['before'] / mib:.0f} | {own / mib:.0f} | "
        row += f"{_step_seconds(r):.2f} | "
        if base:
            row += (
                f"{r['peak'] / base['peak']:.2f}x | {own / (base['peak'] - base['before']):.2f}x | "
                f"{_step_seconds(r) / _step_seconds(base):.2f}x |"
            )
        else:
            row += "| | |"
        lines.append(row)
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.child:
        run_child(FLAGS.child)
        return
    load_before = os.getloadavg()
    results = {}
    unknown = sorted(set(FLAGS.configurations) - set(CONFIGURATIONS))
    if unknown:
        raise SystemExit(f"--configurations: unknown {', '.join(unknown)}")
    for name in FLAGS.configurations:
        figures = _measure(name)
        if figures:
            results[name] = figures
    load_after = os.getloadavg()
    print(
        f"{FLAGS.preset} shapes, {FLAGS.layers} layers, batch {FLAGS.batch_size} x seq "
        f"{FLAGS.max_seq_length}, {FLAGS.dtype}, dropout {FLAGS.dropout}, jit_compile="
        f"{FLAGS.jit_compile}, training step (forward, backward, SGD; classifier: AdamW, "
        f"{FLAGS.gradient_accumulation_steps} micro-batch(es) per update), {FLAGS.steps} steps, "
        f"one process per configuration; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after\n"
    )
    print(markdown(results))


if __name__ == "__main__":
    cli.run(main)
