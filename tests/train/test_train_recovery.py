"""Divergence recovery through run_pretraining: a training file with one record whose masked-LM
weight is NaN (the loss of its batch is NaN) is recovered from, counted, and each bad batch
skipped."""

import json
import os

import tensorflow as tf
from train_support import checkpoint_values, tiny_params

from albert_tf.train import runner


def _poisoned_copy(source, path, index):
    """`source`'s records with a NaN masked_lm_weights[0] in record `index`."""
    records = [r.numpy() for r in tf.data.TFRecordDataset(source)]
    example = tf.train.Example.FromString(records[index])
    example.features.feature["masked_lm_weights"].float_list.value[0] = float("nan")
    records[index] = example.SerializeToString()
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    return path


def test_a_nan_record_is_recovered_from_and_counted(records, tmp_path):
    train = _poisoned_copy(records["train"].split(",")[0], str(tmp_path / "train.tfrecord"), 40)
    out = str(tmp_path / "run")
    params = tiny_params(
        records,
        out,
        input_file=train,
        eval_input_files=records["eval"],
        max_eval_steps=1,
        num_train_steps=12,  # one pass over the 96 records
        save_checkpoints_steps=3,
        steps_per_loop=3,
    )
    result = runner.run_pretraining(params)
    # The shuffle buffer (1000) holds several epochs of the 96 records, so the bad record may
    # come more than once: each time the batches since the last checkpoint (at most 3) are
    # skipped.
    recoveries = result["eval"]["recoveries"]
    assert result["global_step"] == 12 and recoveries >= 1
    with open(os.path.join(out, "eval_results.json")) as f:
        assert json.load(f)["recoveries"] == recoveries
    final = checkpoint_values(os.path.join(out, "checkpoints", "ckpt-12"))
    assert recoveries <= int(final["skipped_batches/.ATTRIBUTES/VARIABLE_VALUE"]) <= 3 * recoveries
    assert int(final["recoveries/.ATTRIBUTES/VARIABLE_VALUE"]) == recoveries
