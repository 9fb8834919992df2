"""Fixtures of the training tests: small, learnable pretraining TFRecords and a tiny config.

The records follow the pretraining schema (albert_tf/data/schema.py names) but are synthetic so
the tests need neither a tokenizer nor the data helper's instance creation: segment A counts up
from a random start, segment B continues the count, and SOP swaps them for label 1.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

SEQ, PRED, VOCAB = 32, 5, 120
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_records(path, count, seed, seq=SEQ, pred=PRED, vocab=VOCAB):
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(count):
            len_a, len_b = rng.integers(5, 12), rng.integers(5, 12)
            start = rng.integers(5, vocab - 30)
            a = [5 + (start + i - 5) % (vocab - 5) for i in range(len_a)]
            b = [5 + (start + len_a + i - 5) % (vocab - 5) for i in range(len_b)]
            label = int(rng.integers(0, 2))
            first, second = (b, a) if label else (a, b)
            tokens = [2] + first + [3] + second + [3]
            segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            length = len(tokens)
            candidates = [i for i, t in enumerate(tokens) if t > 4]
            positions = sorted(rng.choice(candidates, size=min(pred, max(1, length // 7)), replace=False))
            ids = [tokens[p] for p in positions]
            masked = list(tokens)
            for p in positions:
                masked[p] = 4
            pad = seq - length
            n = len(positions)
            feature = {
                "input_ids": ints(masked + [0] * pad), "input_mask": ints([1] * length + [0] * pad),
                "segment_ids": ints(segments + [0] * pad), "token_boundary": ints([1] * seq),
                "masked_lm_positions": ints(list(positions) + [0] * (pred - n)),
                "masked_lm_ids": ints(ids + [0] * (pred - n)),
                "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
                    value=[1.0] * n + [0.0] * (pred - n))),
                "next_sentence_labels": ints([label]),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


@pytest.fixture(scope="session")
def records(tmp_path_factory):
    """{"train": two training files, "eval": one held-out file, "config": a tiny config JSON}."""
    directory = tmp_path_factory.mktemp("train_records")
    train = [write_records(str(directory / f"train-{i}.tfrecord"), 96, seed=i) for i in range(2)]
    held_out = write_records(str(directory / "eval.tfrecord"), 48, seed=99)
    config = directory / "albert_config.json"
    config.write_text(json.dumps({
        "vocab_size": VOCAB, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
        "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}))
    return {"train": ",".join(train), "eval": held_out, "config": str(config), "dir": str(directory)}


def tiny_flags(records, output_dir, **overrides):
    """Command-line flags of scripts/run_pretraining.py for the tiny test run."""
    values = dict(albert_config_file=records["config"], input_file=records["train"], output_dir=output_dir,
                  max_seq_length=SEQ, max_predictions_per_seq=PRED, train_batch_size=8, eval_batch_size=8,
                  learning_rate=0.01, num_train_steps=6, num_warmup_steps=2, save_checkpoints_steps=2,
                  steps_per_loop=2, export=False)
    values.update(overrides)
    return [f"--{k}={v}" if not isinstance(v, bool) else (f"--{k}" if v else f"--no{k}")
            for k, v in values.items()]


def run_script(args, env=None, timeout=240, **popen):
    """Runs scripts/run_pretraining.py in a fresh process."""
    full_env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2",
                    PYTHONPATH=REPO, **(env or {}))
    command = [sys.executable, os.path.join(REPO, "scripts", "run_pretraining.py"), *args]
    if popen:
        return subprocess.Popen(command, env=full_env, cwd=REPO, **popen)
    return subprocess.run(command, env=full_env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
