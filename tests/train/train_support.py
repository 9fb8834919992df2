"""Helpers of the training tests: small, learnable pretraining TFRecords, flags, subprocess runs.

The records follow the pretraining schema (albert_tf/data/schema.py names) but are synthetic so
the tests need neither a tokenizer nor the data helper's instance creation: segment A counts up
from a random start, segment B continues the count, and SOP swaps them for label 1.
"""

import os
import subprocess
import sys

import numpy as np

SEQ, PRED, VOCAB = 32, 5, 120
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_records(path, count, seed, seq=SEQ, pred=PRED, vocab=VOCAB):
    """`count` learnable records: B continues A's count; SOP label 1 swaps them."""
    import tensorflow as tf

    from albert_tf.data import schema

    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            len_a, len_b = rng.integers(5, 12), rng.integers(5, 12)
            start = int(rng.integers(0, vocab - 5))
            count_up = [5 + (start + i) % (vocab - 5) for i in range(len_a + len_b)]
            a, b = count_up[:len_a], count_up[len_a:]
            label = int(rng.integers(0, 2))
            first, second = (b, a) if label else (a, b)
            tokens = [2] + first + [3] + second + [3]
            segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            candidates = [i for i, t in enumerate(tokens) if t > 4]
            positions = sorted(
                int(p)
                for p in rng.choice(
                    candidates, size=min(pred, max(1, len(tokens) // 7)), replace=False
                )
            )
            ids = [tokens[p] for p in positions]
            for p in positions:
                tokens[p] = 4
            writer.write(
                schema.encode_instance(
                    tokens,
                    segments,
                    [1] * len(tokens),
                    label,
                    seq,
                    pred,
                    masked_lm_positions=positions,
                    masked_lm_ids=ids,
                )
            )
    return path


def tiny_flags(records, output_dir, **overrides):
    """Command-line flags of scripts/run_pretraining.py for the tiny test run."""
    values = dict(
        albert_config_file=records["config"],
        input_file=records["train"],
        output_dir=output_dir,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        train_batch_size=8,
        eval_batch_size=8,
        learning_rate=0.01,
        num_train_steps=6,
        num_warmup_steps=2,
        save_checkpoints_steps=2,
        steps_per_loop=2,
        export=False,
    )
    values.update(overrides)
    return [
        f"--{k}={v}" if not isinstance(v, bool) else (f"--{k}" if v else f"--no{k}")
        for k, v in values.items()
    ]


def tiny_params(records, output_dir, **overrides):
    """PretrainingParams of a 2-step in-process run on the `records` fixture (no export)."""
    from albert_tf.train.runner import PretrainingParams

    values = dict(
        input_file=records["train"],
        output_dir=output_dir,
        albert_config_file=records["config"],
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        train_batch_size=8,
        eval_batch_size=8,
        num_train_steps=2,
        num_warmup_steps=0,
        save_checkpoints_steps=2,
        steps_per_loop=2,
        export=False,
        jit_compile=False,
    )
    return PretrainingParams(**dict(values, **overrides))


def run_script(args, env=None, timeout=240, **popen):
    """Runs scripts/run_pretraining.py in a fresh process."""
    full_env = dict(
        os.environ,
        KERAS_BACKEND="tensorflow",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=REPO,
        **(env or {}),
    )
    command = [sys.executable, os.path.join(REPO, "scripts", "run_pretraining.py"), *args]
    if popen:
        return subprocess.Popen(command, env=full_env, cwd=REPO, **popen)
    return subprocess.run(
        command, env=full_env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def checkpoint_values(prefix):
    """{variable key: value} of a training checkpoint (model and optimizer)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {
        k: reader.get_tensor(k)
        for k in reader.get_variable_to_shape_map()
        if "/.ATTRIBUTES/VARIABLE_VALUE" in k and "save_counter" not in k
    }


def max_difference(a, b):
    assert sorted(a) == sorted(b)
    return max(
        float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64))))
        for k in a
    )
