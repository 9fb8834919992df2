"""Pretraining throughput (examples/s) on this machine, one device vs mirrored, and input wait.

For each strategy it times the real training loop (albert_tf.train.loop.Trainer with LAMB, the
MLM + SOP task and the TFRecord input pipeline) on synthetic records of the chosen shapes, then
the same loop fed one cached batch over and over. The input-wait fraction is
1 - (step time with the cached batch) / (step time with the real pipeline): near zero means the
input pipeline keeps up.

  python scripts/benchmark_pretraining.py --preset=albert_base_v2 --max_seq_length=128 \
      --train_batch_size=8 --steps=6 --strategies=one_device,mirrored --logical_cpus=2
"""

import json
import os
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

F = flags.FLAGS
flags.DEFINE_string(
    "preset", "albert_base_v2", "Model config to measure (albert_tf.config presets)."
)
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("train_batch_size", 8, "Global batch size (divisible by --logical_cpus).")
flags.DEFINE_integer("steps", 6, "Timed steps per measurement (after one untimed compile loop).")
flags.DEFINE_integer("warmup_steps", 2, "Untimed steps that trace and compile.")
flags.DEFINE_list(
    "strategies", ["one_device", "mirrored"], "Strategies to measure (one_device, mirrored)."
)
flags.DEFINE_integer("logical_cpus", 2, "Logical CPU devices for the mirrored strategy.")
flags.DEFINE_bool("jit_compile", True, "XLA-compile the forward/backward pass.")
flags.DEFINE_integer("num_records", 512, "Synthetic records written for the input pipeline.")
flags.DEFINE_string("output_json", None, "Also write the results here as JSON.")


def _write_records(path, count, config, seq, pred, seed=0):
    import numpy as np
    import tensorflow as tf

    from albert_tf.data import schema

    rng = np.random.default_rng(seed)
    length = seq - 1  # one padding position, [CLS] A [SEP] B [SEP]
    middle = length // 2
    segments = [0] * (middle + 1) + [1] * (length - middle - 1)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            tokens = [2] + rng.integers(5, config.vocab_size, length - 2).tolist() + [3]
            tokens[middle] = 3
            positions = sorted(rng.choice(np.arange(1, middle), pred, replace=False).tolist())
            ids = [tokens[p] for p in positions]
            writer.write(
                schema.encode_instance(
                    tokens,
                    segments,
                    [1] * length,
                    int(rng.integers(0, 2)),
                    seq,
                    pred,
                    masked_lm_positions=positions,
                    masked_lm_ids=ids,
                )
            )
    return path


def _measure(trainer, dataset, steps, warmup):
    iterator = iter(dataset)
    trainer.train(iterator, warmup)  # traces and compiles
    began = time.time()
    trainer.train(iterator, steps)
    return (time.time() - began) / steps


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.optim import WarmupPolynomialDecay, create_optimizer
    from albert_tf.train.loop import Trainer
    from albert_tf.train.runner import distributed_dataset
    from albert_tf.train.strategy import configure_logical_cpus
    from albert_tf.train.task import PretrainingTask

    for name in F.strategies:
        if name not in ("one_device", "mirrored"):
            cli.fail(f"--strategies: {name!r} is not one_device or mirrored")
    if "mirrored" in F.strategies and F.train_batch_size % F.logical_cpus:
        cli.fail(
            f"--train_batch_size={F.train_batch_size} is not divisible by "
            f"--logical_cpus={F.logical_cpus}"
        )
    devices = configure_logical_cpus(F.logical_cpus)
    config = AlbertConfig.from_preset(F.preset)
    seq, pred, batch = F.max_seq_length, F.max_predictions_per_seq, F.train_batch_size
    work = tempfile.mkdtemp(prefix="albert_tf_bench_pretrain_")
    files = _write_records(os.path.join(work, "train.tfrecord"), F.num_records, config, seq, pred)
    task = PretrainingTask(config, seq, pred, seed=0)
    rows = []
    for name in F.strategies:
        strategy = (
            tf.distribute.OneDeviceStrategy(devices[0])
            if name == "one_device"
            else tf.distribute.MirroredStrategy(devices)
        )
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = task.build_model()
            optimizer = create_optimizer(
                "lamb", WarmupPolynomialDecay(1e-4, 1000, 10), stacked_axes=task.stacked_axes(model)
            )
        trainer = Trainer(strategy, task, model, optimizer, jit_compile=F.jit_compile)
        real = distributed_dataset(strategy, task, files, batch, True, 0)
        cached = strategy.distribute_datasets_from_function(
            lambda ctx: (
                task.dataset(files, ctx.get_per_replica_batch_size(batch), True, ctx, 0)
                .take(1)
                .cache()
                .repeat()
            )
        )
        step_real = _measure(trainer, real, F.steps, F.warmup_steps)
        step_cached = _measure(trainer, cached, F.steps, F.warmup_steps)
        row = {
            "strategy": name,
            "replicas": strategy.num_replicas_in_sync,
            "examples_per_second": batch / step_real,
            "step_seconds": step_real,
            "step_seconds_cached_input": step_cached,
            "input_wait_fraction": max(0.0, 1.0 - step_cached / step_real),
        }
        logging.info("%s", row)
        rows.append(row)
    header = (
        f"{F.preset}, seq {seq}, global batch {batch}, LAMB, "
        f"XLA {'on' if F.jit_compile else 'off'}, "
        f"{F.steps} timed steps, TF {tf.__version__}, {os.cpu_count()} CPUs"
    )
    lines = [
        header,
        "",
        "| strategy | replicas | examples/s | step s | step s (cached input) | input wait |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['strategy']} | {r['replicas']} | {r['examples_per_second']:.2f} | "
            f"{r['step_seconds']:.3f} | {r['step_seconds_cached_input']:.3f} | "
            f"{100 * r['input_wait_fraction']:.1f}% |"
        )
    print("\n".join(lines))
    if F.output_json:
        with open(F.output_json, "w") as f:
            json.dump({"setup": header, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    cli.run(main)
