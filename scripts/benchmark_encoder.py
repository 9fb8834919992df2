"""Forward + backward time of the `tf.while_loop` encoder against the unrolled one, in one run.

For each depth in --layers and each XLA setting in --xla, builds the backbone twice with the
same weights (the `tf.while_loop` encoder, and `unroll=True`: a Python loop over the same
block), plus `recompute=True` with --recompute, and times one tf.function computing the loss
and the gradients of every weight (no optimizer: the encoder's cost alone), for each dropout
rate in --dropout (0 is the v2 presets' setting, 0.1 v1's and BERT's: with dropout each block
draws its masks, which the unrolled encoder and the loop schedule differently). It reports the
first call (tracing, XLA compilation and one step) and the median of --steps steady steps after
a warm-up round, as wall time and as process CPU time (the sum over threads: steadier than wall
time on a loaded machine), and each mode's ratio to the unrolled encoder. Steady steps
alternate between the modes so that load changes hit all alike, and the last column pairs each
round's steps: the median of the per-round wall-time ratios and their range, which shows how
far the host's noise reaches (on a 2-core VM, runs of 6 steps of the same code differ by about
2 points).

    python scripts/benchmark_encoder.py --preset=albert_base_v2 --layers=12,24 \\
        --batch_size=8 --max_seq_length=128 --steps=3 --xla=off,on
    python scripts/benchmark_encoder.py --preset=albert_tiny --layers=2 --batch_size=2 \\
        --max_seq_length=16 --steps=1     # a smoke run
"""

import itertools
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_base_v2", "AlbertConfig preset giving the shapes.")
flags.DEFINE_list("layers", ["12", "24"], "Depths (num_hidden_layers) to measure.")
flags.DEFINE_integer("batch_size", 8, "Batch size.", lower_bound=1)
flags.DEFINE_integer(
    "max_seq_length",
    128,
    "Length of the input sequences (no padding: all real ids).",
    lower_bound=1,
)
flags.DEFINE_integer("steps", 3, "Timed steady steps per mode (after a warm-up).", lower_bound=1)
flags.DEFINE_list("xla", ["off", "on"], "XLA settings to measure: off (graph), on (jit_compile).")
flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16"], "Keras dtype policy.")
flags.DEFINE_list(
    "dropout", ["0", "0.1"], "Hidden and attention dropout rates to measure (each in [0, 1))."
)
flags.DEFINE_bool("recompute", False, "Also measure the loop with recompute=True.")

BASELINE = "unrolled"


def _modes(recompute):
    """{mode: AlbertModel keyword arguments}."""
    modes = {"while_loop": {}, BASELINE: {"unroll": True}}
    if recompute:
        modes["while_loop+recompute"] = {"recompute": True}
    return modes


def _inputs(config, batch_size, max_seq_length):
    import numpy as np

    rng = np.random.default_rng(0)
    shape = [batch_size, max_seq_length]
    return {
        "input_word_ids": rng.integers(5, config.vocab_size, shape).astype("int32"),
        "input_mask": np.ones(shape, "int32"),
        "input_type_ids": np.zeros(shape, "int32"),
    }


def _forward_backward(model, jit_compile):
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile)
    def step(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(tf.square(tf.cast(out["sequence_output"], tf.float32)))
        grads = tape.gradient(loss, model.trainable_variables)
        # The pooler gets no gradient from this loss.
        return loss, tf.add_n(
            [tf.reduce_sum(tf.cast(g, tf.float32)) for g in grads if g is not None]
        )

    return step


def _timed(fn, inputs):
    """(wall seconds, process CPU seconds) of one call, waiting for its results."""
    wall, cpu = time.perf_counter(), time.process_time()
    loss, _ = fn(inputs)
    float(loss)
    return time.perf_counter() - wall, time.process_time() - cpu


def benchmark(preset, depths, xla_settings, batch_size, max_seq_length, steps, dtype, rates, modes):
    """{(depth, dropout, xla, mode): {"first": (wall, cpu), "steps": [(wall, cpu), ...]}}."""
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel

    results = {}
    for depth, dropout in itertools.product(depths, rates):
        config = AlbertConfig.from_preset(
            preset,
            num_hidden_layers=depth,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        )
        inputs = _inputs(config, batch_size, max_seq_length)
        for xla in xla_settings:
            fns, weights = {}, None
            for mode, kwargs in modes.items():
                keras.utils.set_random_seed(0)
                model = AlbertModel(config, dtype=dtype, **kwargs)
                if weights is None:
                    weights = model.get_weights()
                model.set_weights(weights)
                fns[mode] = _forward_backward(model, jit_compile=(xla == "on"))
                first = _timed(fns[mode], inputs)
                key = (depth, dropout, xla, mode)
                logging.info("%s: first call %.2f s", key, first[0])
                results[key] = {"first": first, "steps": []}
            for fn in fns.values():  # a warm-up round: the first calls after another
                _timed(fn, inputs)  # model's still set up (slower once, seen at tiny sizes)
            for i in range(steps):
                for mode, fn in fns.items():
                    seconds = _timed(fn, inputs)
                    key = (depth, dropout, xla, mode)
                    results[key]["steps"].append(seconds)
                    logging.info("%s: step %d %.3f s", key, i, seconds[0])
    return results


def _median(values, index):
    return statistics.median(v[index] for v in values)


def _paired(steps, base_steps):
    """ "1.02x (0.99-1.05x)": the median and range of the per-round wall-time ratios."""
    ratios = sorted(mine[0] / theirs[0] for mine, theirs in zip(steps, base_steps))
    return f"{statistics.median(ratios):.3f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x)"


def markdown(results):
    lines = [
        "| Layers | Dropout | XLA | Encoder | First call (s) | Steady wall (s) | Steady CPU (s) | "
        "First vs unrolled | Steady wall vs unrolled | Steady CPU vs unrolled | "
        "Per-round wall ratio: median (range) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (depth, dropout, xla, mode), r in results.items():
        base = results[(depth, dropout, xla, BASELINE)]
        wall, cpu = _median(r["steps"], 0), _median(r["steps"], 1)
        lines.append(
            f"| {depth} | {dropout:g} | {xla} | {mode} | {r['first'][0]:.2f} | {wall:.3f} | "
            f"{cpu:.3f} | "
            f"{r['first'][0] / base['first'][0]:.2f}x | "
            f"{wall / _median(base['steps'], 0):.2f}x | {cpu / _median(base['steps'], 1):.2f}x | "
            f"{_paired(r['steps'], base['steps'])} |"
        )
    return "\n".join(lines)


def _dropout_rates(values):
    """--dropout as floats in [0, 1), or the one-line error naming the flag."""
    try:
        rates = [float(value) for value in values]
    except ValueError:
        rates = []
    if not rates or not all(0 <= rate < 1 for rate in rates):
        cli.fail(f"--dropout must be a comma list of rates in [0, 1), got {','.join(values)!r}")
    return rates


def main(argv):
    del argv
    depths = cli.positive_ints("layers", FLAGS.layers)
    if not FLAGS.xla or set(FLAGS.xla) - {"off", "on"}:
        cli.fail(f"--xla must be a comma list of off and on, got {FLAGS.xla}")
    rates = _dropout_rates(FLAGS.dropout)
    import tensorflow as tf

    load_before = os.getloadavg()
    results = benchmark(
        FLAGS.preset,
        depths,
        FLAGS.xla,
        FLAGS.batch_size,
        FLAGS.max_seq_length,
        FLAGS.steps,
        FLAGS.dtype,
        rates,
        _modes(FLAGS.recompute),
    )
    load_after = os.getloadavg()
    print(
        f"{FLAGS.preset} shapes, batch {FLAGS.batch_size} x seq {FLAGS.max_seq_length}, "
        f"{FLAGS.dtype}, forward + backward (gradients of every "
        f"weight), median of {FLAGS.steps} steady steps; TF {tf.__version__}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after\n"
    )
    print(markdown(results))


if __name__ == "__main__":
    cli.run(main)
