"""Helpers of the fine-tuning tests: small labelled files from the shared corpus, script runs."""

import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sentence_task(corpus_file, limit=256):
    """A small real task from the corpus: does the sentence mention "file"? (texts, labels)."""
    with open(corpus_file, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    positives = [s for s in sentences if " file" in s.lower()][: limit // 2]
    negatives = [s for s in sentences if "file" not in s.lower()][: limit // 2]
    texts = positives + negatives
    labels = np.array([1] * len(positives) + [0] * len(negatives), np.int32)
    order = np.random.default_rng(0).permutation(len(texts))
    return [texts[i] for i in order], labels[order]


def write_tsv_splits(directory, corpus_file, train=64, limit=96):
    """train.tsv / dev.tsv with columns sentence, label (yes/no); returns (paths, labels)."""
    texts, labels = sentence_task(corpus_file, limit)
    paths = {}
    for split, rows in (("train", slice(0, train)), ("dev", slice(train, None))):
        paths[split] = os.path.join(directory, f"{split}.tsv")
        with open(paths[split], "w", encoding="utf-8") as f:
            f.write(
                "sentence\tlabel\n"
                + "".join(
                    f"{t}\t{'yes' if y else 'no'}\n" for t, y in zip(texts[rows], labels[rows])
                )
            )
    return paths, labels


def classifier_flags(paths, spm_model_file, output_dir, **overrides):
    """run_classifier.py flags for a tiny preset model on `write_tsv_splits` files."""
    values = dict(
        task_name="mentions-file",
        preset="albert_tiny",
        spm_model_file=spm_model_file,
        train_file=paths["train"],
        dev_file=paths["dev"],
        text_column="sentence",
        max_seq_length=32,
        train_batch_size=8,
        eval_batch_size=16,
        num_train_steps=4,
        save_checkpoints_steps=2,
        output_dir=output_dir,
        verbose=0,
        learning_rate=5e-4,
    )
    values.update(overrides)
    return [f"--{k}={v}" for k, v in values.items() if v is not None]


def script(name, args, **kwargs):
    """Runs scripts/<name> with `args` in a subprocess (Popen if `wait=False`)."""
    wait = kwargs.pop("wait", True)
    command = [sys.executable, os.path.join("scripts", name)] + list(args)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if wait:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=kwargs.pop("timeout", 600),
            **kwargs,
        )
    return subprocess.Popen(command, cwd=REPO, env=env, **kwargs)


def checkpoint_values(prefix):
    """{variable name: array} of a TF checkpoint (optimizer slots and step included; not the
    checkpoint's own `save_counter`, which counts saves: a run stopped by SIGTERM saves once more
    than an uninterrupted one when the signal lands between two checkpoint steps)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if not name.startswith(("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter"))
    }
