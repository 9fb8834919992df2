"""Train-step time and first-step (trace + XLA compile) time: while_loop encoder vs unrolled.

For each depth, builds the same model twice (the `tf.while_loop` encoder and `unroll=True`),
runs a jit-compiled train step (forward, backward, SGD update) on static shapes, and prints a
markdown table. Steady-state steps alternate between the two models so that load changes on a
shared machine hit both alike.

    python scripts/benchmark_model.py --preset=albert_base_v2 --layers=12,24 \\
        --batch_size=8 --seq_length=128 --steps=5
"""

import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_base_v2", "AlbertConfig preset giving the shapes.")
flags.DEFINE_list("layers", ["12", "24"], "Depths (num_hidden_layers) to measure.")
flags.DEFINE_integer("batch_size", 8, "Batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("steps", 5, "Timed steady-state steps per model (after one warm-up step).")
flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16"], "Keras dtype policy.")
flags.DEFINE_float("learning_rate", 1e-4, "SGD learning rate of the benchmark step.")


def _make_step(model, learning_rate):
    import tensorflow as tf

    @tf.function(jit_compile=True)
    def step(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(
                tf.square(tf.cast(out["sequence_output"], tf.float32))
            ) + tf.reduce_mean(tf.cast(out["pooled_output"], tf.float32))
        grads = tape.gradient(loss, model.trainable_variables)
        for var, grad in zip(model.trainable_variables, grads):
            var.assign_sub(learning_rate * tf.convert_to_tensor(grad))
        return loss

    return step


def _inputs(config, batch_size, seq_length):
    import numpy as np

    rng = np.random.default_rng(0)
    return {
        "input_word_ids": rng.integers(5, config.vocab_size, [batch_size, seq_length]).astype(
            "int32"
        ),
        "input_mask": np.ones([batch_size, seq_length], "int32"),
        "input_type_ids": np.zeros([batch_size, seq_length], "int32"),
    }


def _timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    float(result)  # wait for the computation
    return time.perf_counter() - start


def benchmark(preset, depths, batch_size, seq_length, steps, dtype, learning_rate):
    """{(depth, mode): {"trace": s, "first": s, "steps": [s, ...]}} for mode in loop/unrolled.

    "trace" is the Python tracing of the step (get_concrete_function); "first" the first call
    (XLA compilation + one step).
    """
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel

    results = {}
    for depth in depths:
        config = AlbertConfig.from_preset(preset, num_hidden_layers=depth)
        inputs = _inputs(config, batch_size, seq_length)
        fns = {}
        for mode in ("loop", "unrolled"):
            model = AlbertModel(config, unroll=(mode == "unrolled"), dtype=dtype)
            fns[mode] = _make_step(model, learning_rate)
            start = time.perf_counter()
            fns[mode].get_concrete_function(inputs)
            trace = time.perf_counter() - start
            first = _timed(fns[mode], inputs)
            logging.info(
                "L=%d %s: trace %.2f s, first call (compile + run) %.2f s",
                depth,
                mode,
                trace,
                first,
            )
            _timed(fns[mode], inputs)  # one more warm-up step
            results[(depth, mode)] = {"trace": trace, "first": first, "steps": []}
        for i in range(steps):
            for mode in ("loop", "unrolled"):
                seconds = _timed(fns[mode], inputs)
                results[(depth, mode)]["steps"].append(seconds)
                logging.info("L=%d %s: step %d %.3f s", depth, mode, i + 1, seconds)
    return results


def markdown(results):
    lines = [
        "| Layers | Encoder | Trace (s) | First call: compile + run (s) | "
        "Trace + compile = trace + first call - median step (s) | Steady step, median (s) | "
        "Steady step, min (s) | Trace + compile vs unrolled | Median step vs unrolled |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def overhead(r):
        return r["trace"] + r["first"] - statistics.median(r["steps"])

    for (depth, mode), r in results.items():
        base = results[(depth, "unrolled")]
        median = statistics.median(r["steps"])
        lines.append(
            f"| {depth} | {mode} | {r['trace']:.1f} | {r['first']:.1f} | "
            f"{overhead(r):.1f} | {median:.3f} | {min(r['steps']):.3f} | "
            f"{overhead(r) / overhead(base):.2f}x | "
            f"{median / statistics.median(base['steps']):.3f}x |"
        )
    return "\n".join(lines)


def main(argv):
    del argv
    try:
        depths = [int(d) for d in FLAGS.layers]
    except ValueError:
        cli.fail(f"--layers must be a comma list of integers, got {FLAGS.layers}")
    if not depths or min(depths) < 1:
        cli.fail(f"--layers must be positive, got {FLAGS.layers}")
    for name in ("batch_size", "seq_length", "steps"):
        if getattr(FLAGS, name) < 1:
            cli.fail(f"--{name} must be >= 1, got {getattr(FLAGS, name)}")
    import tensorflow as tf

    load_before = os.getloadavg()
    results = benchmark(
        FLAGS.preset,
        depths,
        FLAGS.batch_size,
        FLAGS.seq_length,
        FLAGS.steps,
        FLAGS.dtype,
        FLAGS.learning_rate,
    )
    load_after = os.getloadavg()
    print(
        f"{FLAGS.preset} shapes, batch {FLAGS.batch_size} x seq {FLAGS.seq_length}, "
        f"{FLAGS.dtype}, jit_compile=True train step (forward + backward + SGD), "
        f"{FLAGS.steps} timed steps; TF {tf.__version__}, "
        f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after\n"
    )
    print(markdown(results))


if __name__ == "__main__":
    cli.run(main)
