"""Pretraining step time of albert_tf beside Hugging Face torch and the original TF1 code, in
one run; albert_tf's tokens/s over sequence lengths and gradient accumulation; one device
against mirrored.

--mode=peers (the default) times one pretraining step (masked-LM + sentence-order loss,
backward pass, optimizer update) of each library at the same shapes (random weights from the
same ALBERT config, no downloads), each at its own best setting:

    albert_tf   the training step `run_pretraining` builds (`albert_tf.train.runner.
                build_training`: PretrainingTask, LAMB, the Trainer's loop, clipping to 1.0,
                the TFRecord input pipeline on synthetic records), one step per call, at
                --precision=auto as `run_pretraining` resolves it here (dtype policy and XLA:
                `albert_tf.precision`) and at float32 (XLA as `run_pretraining` sets it)
    HF torch    transformers' AlbertForPreTraining, eager, float32 and the forward pass under
                torch.autocast(bfloat16), `loss.backward()`, torch AdamW step (its masked-LM
                head predicts every position, labels -100 off the masked ones: its API)
    original    google-research/albert's AlbertModel, get_masked_lm_output,
                get_sentence_order_output and optimization.create_optimizer (LAMB) in a
                tf.compat.v1 graph and session, float32 (the only precision its code has),
                loaded at run time from the checkout given by --original_code_dir, with
                stand-ins for the few tensorflow.contrib symbols it imports
                (`albert_tf.benchmarks.original_albert` says how). It is a benchmark peer,
                never a dependency: without the flag it is skipped.

It reports the first step (tracing and compilation included) and the median of --steps steady
steps, which alternate between the libraries, each after a 1 s pause (`albert_tf.benchmarks.
timing`), tokens/s (batch x sequence length / steady step), and the ratios: albert_tf's
default / the best peer, default / original, float32 / original float32.

--mode=throughput times albert_tf alone at its default precision for each of --max_seq_lengths
and --accumulation_steps (the batch split into that many micro-batches, one update).

--mode=strategies times the training loop on one device and mirrored over --logical_cpus
logical CPUs, with the real input pipeline and with one cached batch (input wait: 1 - cached /
real step time).

The peers' packages are the `bench` extra (`pip install -e .[bench]`: torch and transformers,
pinned); the original's code is a checkout of its repository:

    git clone https://github.com/google-research/albert /tmp/albert_original
    python scripts/benchmark_pretraining.py --original_code_dir=/tmp/albert_original --steps=5
    python scripts/benchmark_pretraining.py --mode=throughput --max_seq_lengths=128,512 \\
        --accumulation_steps=1,4 --steps=3
    python scripts/benchmark_pretraining.py --mode=strategies --train_batch_size=8 --steps=6 \\
        --logical_cpus=2
    python scripts/benchmark_pretraining.py --preset=albert_tiny --max_seq_length=32 \\
        --max_predictions_per_seq=4 --train_batch_size=4 --steps=2   # a smoke run
"""

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli  # noqa: E402
from albert_tf.benchmarks import timing  # noqa: E402

MODES = ("peers", "throughput", "strategies")
LIBRARIES = ("albert_tf", "torch", "original")
TITLES = {"albert_tf": "albert_tf", "torch": "HF torch", "original": "original (TF1)"}
NEEDS = {"torch": ("torch", "transformers")}
# The steady-step goals of the comparison (issue 28): (row, against, at most).
GOALS = (
    ("albert_tf default", "best peer", 0.7),
    ("albert_tf default", "original float32", 0.5),
    ("albert_tf float32", "original float32", 0.8),
)

F = flags.FLAGS
flags.DEFINE_enum("mode", "peers", MODES, "What to measure (see the docstring).")
flags.DEFINE_string(
    "preset", "albert_base_v2", "Model config to measure (albert_tf.config presets)."
)
flags.DEFINE_integer("max_seq_length", 128, "Sequence length (peers and strategies).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("train_batch_size", 16, "Global batch size.", lower_bound=1)
flags.DEFINE_integer("steps", 5, "Timed steady steps (after the first).", lower_bound=1)
flags.DEFINE_list("libraries", list(LIBRARIES), "--mode=peers: the libraries to run.")
flags.DEFINE_string(
    "original_code_dir",
    None,
    "--mode=peers: a checkout of google-research/albert (modeling.py, lamb_optimizer.py, "
    "optimization.py, run_pretraining.py); without it the original is skipped.",
)
flags.DEFINE_list(
    "max_seq_lengths", ["128", "512"], "--mode=throughput: the max_seq_length values."
)
flags.DEFINE_list(
    "accumulation_steps", ["1", "4"], "--mode=throughput: gradient accumulation steps."
)
flags.DEFINE_list(
    "strategies", ["one_device", "mirrored"], "--mode=strategies: one_device and/or mirrored."
)
flags.DEFINE_integer("logical_cpus", 2, "--mode=strategies: logical CPUs to mirror over.")
flags.DEFINE_integer("num_records", 256, "Synthetic records written for the input pipeline.")


# ----------------------------------------------------------------------------- inputs
def _write_records(path, count, vocab_size, seq, pred, seed=0):
    """`count` pretraining records of random pieces ([CLS] A [SEP] B [SEP], one padding
    position, `pred` masked positions in segment A); returns `path`."""
    import numpy as np
    import tensorflow as tf

    from albert_tf.data import schema

    rng = np.random.default_rng(seed)
    length = seq - 1
    middle = length // 2
    segments = [0] * (middle + 1) + [1] * (length - middle - 1)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            tokens = [2] + rng.integers(5, vocab_size, length - 2).tolist() + [3]
            tokens[middle] = 3
            positions = sorted(rng.choice(np.arange(1, middle), pred, replace=False).tolist())
            writer.write(
                schema.encode_instance(
                    tokens,
                    segments,
                    [1] * length,
                    int(rng.integers(0, 2)),
                    seq,
                    pred,
                    masked_lm_positions=positions,
                    masked_lm_ids=[tokens[p] for p in positions],
                )
            )
    return path


def _records(work, config, seq, pred):
    name = os.path.join(work, f"train-{seq}-{pred}.tfrecord")
    if not os.path.exists(name):
        _write_records(name, F.num_records, config.vocab_size, seq, pred)
    return name


def _first_batch(task, files, batch_size):
    """albert_tf's first training batch of `files`, as numpy arrays."""
    batch = next(iter(task.dataset(files, batch_size, is_training=True, seed=0)))
    return {name: value.numpy() for name, value in batch.items()}


# ----------------------------------------------------------------------------- albert_tf
def _albert_tf(files, seq, pred, batch, precision="auto", accumulation=1, strategy=None):
    """(resolved params, `build_training`'s Training) as `run_pretraining` makes them."""
    import keras

    from albert_tf import precision as precision_lib
    from albert_tf.train import strategy as strategy_lib
    from albert_tf.train.params import PretrainingParams
    from albert_tf.train.runner import build_training

    params = PretrainingParams(
        input_file=files,
        output_dir=os.path.dirname(files),
        preset=F.preset,
        max_seq_length=seq,
        max_predictions_per_seq=pred,
        train_batch_size=batch,
        gradient_accumulation_steps=accumulation,
        precision=precision,
    )
    strategy = strategy or strategy_lib.create_strategy(params.strategy)
    params, previous = precision_lib.apply_to_params(params, strategy, float16=True)
    try:
        keras.utils.set_random_seed(params.seed)
        training = build_training(params, strategy)
    finally:
        keras.config.set_dtype_policy(previous)
    return params, training


def _setting(params):
    return f"{params.precision}, XLA {'on' if params.jit_compile else 'off'}"


def _albert_tf_step(files, seq, pred, batch, precision="auto", accumulation=1):
    """A builder of (one-step function, note) for `timing.measure`."""
    from albert_tf.train.runner import distributed_dataset

    params, training = _albert_tf(files, seq, pred, batch, precision, accumulation)
    strategy = training.trainer.strategy
    iterator = iter(distributed_dataset(strategy, training.task, files, batch, True, params.seed))
    return (lambda: training.trainer.train(iterator, 1)), f"{_setting(params)}, LAMB"


# ----------------------------------------------------------------------------- peers
def _torch_step(config, features, bfloat16):
    import numpy as np

    from albert_tf.benchmarks import torch_peer

    labels = np.full_like(features["input_word_ids"], -100)
    rows = np.arange(labels.shape[0])[:, None]
    ids = np.where(features["masked_lm_weights"] > 0, features["masked_lm_ids"], -100)
    labels[rows, features["masked_lm_positions"]] = ids
    inputs = {
        "input_ids": features["input_word_ids"],
        "attention_mask": features["input_mask"],
        "token_type_ids": features["input_type_ids"],
        "labels": labels,
        "sentence_order_label": features["next_sentence_labels"],
    }
    model = torch_peer.huggingface_model("AlbertForPreTraining", config)
    note = f"eager, {'bf16 autocast' if bfloat16 else 'float32'}, AdamW"
    return torch_peer.train_step(model, inputs, bfloat16=bfloat16), note


def _original_step(original, config, features):
    from albert_tf.benchmarks import original_albert

    names = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
    inputs = {
        name: features[names.get(name, name)].astype(dtype.as_numpy_dtype)
        for name, dtype in original_albert.FEATURES.items()
    }
    step = original_albert.pretraining_step(original, config, inputs)
    return step, "float32, tf.compat.v1 graph and session, LAMB"


def _peer_runs(libraries, config, files, features):
    seq, pred, batch = F.max_seq_length, F.max_predictions_per_seq, F.train_batch_size
    runs = {}
    if "albert_tf" in libraries:
        runs["albert_tf default"] = lambda: _albert_tf_step(files, seq, pred, batch)
        runs["albert_tf float32"] = lambda: _albert_tf_step(files, seq, pred, batch, "float32")
    if "torch" in libraries:
        runs["HF torch float32"] = lambda: _torch_step(config, features, False)
        runs["HF torch bf16 autocast"] = lambda: _torch_step(config, features, True)
    if "original" in libraries:
        from albert_tf.benchmarks import original_albert

        original = original_albert.load(F.original_code_dir)
        runs["original float32"] = lambda: _original_step(original, config, features)
    return runs


def _goal_lines(results):
    steady = {name: timing.steady(r) for name, r in results.items()}
    peers = [n for n in steady if not n.startswith("albert_tf") and steady[n]]
    against = {
        "best peer": min((steady[n] for n in peers), default=None),
        "original float32": steady.get("original float32"),
    }
    lines = []
    for mine, other, goal in GOALS:
        if not (steady.get(mine) and against[other]):
            lines.append(f"- {mine} / {other}: not measured (goal <= {goal}x)")
            continue
        value = steady[mine] / against[other]
        met = "met" if value <= goal else "not met"
        lines.append(f"- {mine} / {other}: {value:.2f}x (goal <= {goal}x: {met})")
    return lines


def _table(results, tokens):
    """Markdown rows of `results` (`tokens`: {run: tokens per step}) and their error notes."""
    lines = [
        "| run | setting | first step | steady step | tokens/s |",
        "|---|---|---|---|---|",
    ]
    notes = []
    for name, result in results.items():
        if "error" in result:
            notes.append(f"- {name}: {result['error']}")
        median = timing.steady(result)
        rate = f"{tokens[name] / median:.0f}" if median else ""
        first = timing.seconds(result["first"]) if "first" in result else "failed"
        steady = timing.seconds(median) if median else "-"
        lines.append(f"| {name} | {result.get('note') or ''} | {first} | {steady} | {rate} |")
    return lines + notes


def _peers(config, work):
    from albert_tf.train.task import PretrainingTask

    libraries = timing.installed(F.libraries, NEEDS, TITLES)
    if "original" in libraries and not F.original_code_dir:
        print("original (TF1): skipped, no --original_code_dir (a google-research/albert checkout)")
        libraries.remove("original")
    seq, pred, batch = F.max_seq_length, F.max_predictions_per_seq, F.train_batch_size
    files = _records(work, config, seq, pred)
    features = _first_batch(PretrainingTask(config, seq, pred), files, batch)
    results = timing.measure(_peer_runs(libraries, config, files, features), F.steps)
    names = ["tensorflow", "keras"] + (["torch", "transformers"] if "torch" in libraries else [])
    header = (
        f"{F.preset} pretraining step (masked-LM + SOP, backward, optimizer update), batch "
        f"{batch} x seq {seq}, {pred} masked positions; first step / median of {F.steps} "
        f"steady steps, alternating; {timing.versions(names)}"
    )
    tokens = {name: batch * seq for name in results}
    return header, _table(results, tokens) + [""] + _goal_lines(results)


def _throughput(config, work):
    max_seq_lengths = cli.positive_ints("max_seq_lengths", F.max_seq_lengths)
    accumulation = cli.positive_ints("accumulation_steps", F.accumulation_steps)
    batch, pred = F.train_batch_size, F.max_predictions_per_seq
    runs, tokens = {}, {}
    for seq in max_seq_lengths:
        files = _records(work, config, seq, pred)
        for steps in accumulation:
            name = f"seq {seq}, batch {batch} = {steps} x {batch // steps}"
            runs[name] = lambda f=files, s=seq, a=steps: _albert_tf_step(
                f, s, pred, batch, "auto", a
            )
            tokens[name] = batch * seq
    results = timing.measure(runs, F.steps)
    header = (
        f"albert_tf {F.preset} pretraining step at --precision=auto, {pred} masked positions, "
        f"first step / median of {F.steps} steady steps, alternating"
    )
    return header, _table(results, tokens)


def _strategies(config, work):
    import time

    import tensorflow as tf

    from albert_tf.train.runner import distributed_dataset
    from albert_tf.train.strategy import configure_logical_cpus

    devices = configure_logical_cpus(F.logical_cpus)
    seq, pred, batch = F.max_seq_length, F.max_predictions_per_seq, F.train_batch_size
    files = _records(work, config, seq, pred)
    lines = [
        "| strategy | replicas | setting | examples/s | step s | step s (cached input) | "
        "input wait |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in F.strategies:
        strategy = (
            tf.distribute.OneDeviceStrategy(devices[0])
            if name == "one_device"
            else tf.distribute.MirroredStrategy(devices)
        )
        params, training = _albert_tf(files, seq, pred, batch, strategy=strategy)
        trainer, task = training.trainer, training.task
        real = distributed_dataset(strategy, task, files, batch, True, 0)
        cached = strategy.distribute_datasets_from_function(
            lambda ctx: (
                task.dataset(files, ctx.get_per_replica_batch_size(batch), True, ctx, 0)
                .take(1)
                .cache()
                .repeat()
            )
        )
        times = []
        for dataset in (real, cached):
            iterator = iter(dataset)
            trainer.train(iterator, 1)  # traces and compiles
            began = time.perf_counter()
            trainer.train(iterator, F.steps)
            times.append((time.perf_counter() - began) / F.steps)
        wait = max(0.0, 1.0 - times[1] / times[0])
        lines.append(
            f"| {name} | {strategy.num_replicas_in_sync} | {_setting(params)} | "
            f"{batch / times[0]:.2f} | {times[0]:.3f} | {times[1]:.3f} | {100 * wait:.1f}% |"
        )
    header = f"{F.preset}, seq {seq}, global batch {batch}, LAMB, {F.steps} timed steps"
    return header, lines


def main(argv):
    del argv
    from albert_tf.config import AlbertConfig, list_presets
    from albert_tf.input_paths import check_exists

    if F.preset not in list_presets():
        cli.fail(f"--preset={F.preset!r} is not one of {', '.join(list_presets())}")
    for flag, allowed in (("libraries", LIBRARIES), ("strategies", ("one_device", "mirrored"))):
        unknown = [v for v in getattr(F, flag) if v not in allowed]
        if unknown or not getattr(F, flag):
            cli.fail(
                f"--{flag}={','.join(getattr(F, flag))}: expected some of {', '.join(allowed)}"
            )
    if (
        F.mode == "strategies"
        and "mirrored" in F.strategies
        and F.train_batch_size % F.logical_cpus
    ):
        cli.fail(
            f"--train_batch_size={F.train_batch_size} is not divisible by "
            f"--logical_cpus={F.logical_cpus}"
        )
    config = AlbertConfig.from_preset(F.preset)
    lengths = [F.max_seq_length]
    if F.mode == "throughput":
        lengths = cli.positive_ints("max_seq_lengths", F.max_seq_lengths)
        for steps in cli.positive_ints("accumulation_steps", F.accumulation_steps):
            if F.train_batch_size % steps:
                cli.fail(
                    f"--train_batch_size={F.train_batch_size} is not divisible by "
                    f"--accumulation_steps={steps}"
                )
    if max(lengths) > config.max_position_embeddings:
        cli.fail(
            f"sequence length {max(lengths)} is above {F.preset}'s max_position_embeddings "
            f"({config.max_position_embeddings})"
        )
    if F.original_code_dir:
        check_exists("original_code_dir", F.original_code_dir)
    cli.load_tensorflow()
    import tensorflow as tf

    from albert_tf import precision as precision_lib

    tf.get_logger().setLevel("ERROR")  # each new model retraces: TF's warning says nothing new
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="albert_tf_bench_pretrain_") as work:
        measure = {"peers": _peers, "throughput": _throughput, "strategies": _strategies}
        header, lines = measure[F.mode](config, work)
    load_after = os.getloadavg()
    print(
        f"\n{header}; {timing.cpu_name()}, {os.cpu_count()} CPUs; auto here: "
        f"{precision_lib.resolve(log=False).log_line()}; load average {load_before[0]:.1f} "
        f"before, {load_after[0]:.1f} after\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    cli.run(main)
