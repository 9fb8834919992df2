"""Pretraining inputs are checked before training (summaries skipped, shapes against the flags,
unreadable files named), and a corrupt record found mid-run is blamed on its file."""

import json
import logging
import shutil

import pytest
import tensorflow as tf
from train_support import PRED, SEQ, write_records

from albert_tf.data import input_checks, pipeline
from albert_tf.data.task_spec import DataError
from albert_tf.settings import InvalidFlagError
from albert_tf.train import runner


@pytest.fixture(scope="module")
def data_dir(records, tmp_path_factory):
    """Two shards and the summary create_pretraining_data writes beside them."""
    directory = tmp_path_factory.mktemp("inputs")
    names = ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    for name, source in zip(names, records["train"].split(",")):
        shutil.copy(source, directory / name)
    (directory / "train.summary.json").write_text(
        json.dumps(
            {
                "outputs": {f"data/{name}": 96 for name in names},
                "max_seq_length": SEQ,
                "max_predictions_per_seq": PRED,
                "masked": True,
            }
        )
    )
    return directory


def _check(input_file, eval_input_files=None, seq=SEQ, pred=PRED, dynamic=False):
    return input_checks.check_pretraining_inputs(
        {"input_file": input_file, "eval_input_files": eval_input_files}, seq, pred, dynamic
    )


def test_summaries_are_skipped_and_the_records_read(data_dir, caplog):
    caplog.set_level(logging.WARNING)
    checked = _check(str(data_dir / "*"))
    shards = [str(data_dir / f"train-0000{i}-of-00002.tfrecord") for i in range(2)]
    assert checked == {"input_file": shards}
    assert f"--input_file: skipping {data_dir / 'train.summary.json'}" in caplog.text
    batch = next(iter(pipeline.pretraining_dataset(str(data_dir / "*"), 8, SEQ, PRED, seed=1)))
    assert batch["input_word_ids"].shape == (8, SEQ)
    with pytest.raises(InvalidFlagError, match=r"--input_file: no TFRecord file matches .*\(only "):
        _check(str(data_dir / "*.json"))


def test_records_of_another_shape_name_the_flag_and_the_file(data_dir):
    shard = data_dir / "train-00000-of-00002.tfrecord"
    summary = (
        f"(its summary {data_dir / 'train.summary.json'}: max_seq_length={SEQ}, "
        f"max_predictions_per_seq={PRED})"
    )
    with pytest.raises(InvalidFlagError) as error:
        _check(str(data_dir / "train-*"), seq=64)
    assert str(error.value) == (
        f"--max_seq_length=64 but {shard} (--input_file) holds records of "
        f"length {SEQ} {summary}; pass --max_seq_length={SEQ} or recreate "
        "the records"
    )
    with pytest.raises(InvalidFlagError) as error:
        _check(str(data_dir / "train-*"), pred=3)
    assert str(error.value).startswith(
        f"--max_predictions_per_seq=3 but {shard} (--input_file) "
        f"holds records with {PRED} masked positions {summary}"
    )


def test_files_that_are_not_pretraining_records_are_named(data_dir, tmp_path, records):
    config = tmp_path / "albert_config.json"
    shutil.copy(records["config"], config)
    with pytest.raises(DataError) as error:
        _check(str(data_dir / "train-*"), eval_input_files=f"{config}")
    assert str(error.value).startswith(
        f"{config} (--eval_input_files) is not a TFRecord file of create_pretraining_data: its "
        "first record cannot be read: corrupted record at 0"
    )
    unmasked = tmp_path / "raw.tfrecord"
    with tf.io.TFRecordWriter(str(unmasked)) as writer:
        example = tf.train.Example()
        for name in ("input_ids", "input_mask", "segment_ids", "next_sentence_labels"):
            example.features.feature[name].int64_list.value.extend([1] * SEQ)
        writer.write(example.SerializeToString())
    with pytest.raises(DataError, match=f"{unmasked} \\(--input_file\\) holds unmasked records"):
        _check(str(unmasked))
    with pytest.raises(DataError, match=f"{unmasked} \\(--input_file\\) has no token_boundary"):
        _check(str(unmasked), dynamic=True)
    example.features.feature["token_boundary"].int64_list.value.extend([1] * SEQ)
    with tf.io.TFRecordWriter(str(unmasked)) as writer:
        writer.write(example.SerializeToString())
    assert _check(str(unmasked), dynamic=True) == {"input_file": [str(unmasked)]}
    shard = data_dir / "train-00000-of-00002.tfrecord"
    with pytest.raises(
        DataError,
        match=f"--input_file mixes masked records \\({shard}\\) and unmasked ones \\({unmasked}\\)",
    ):
        _check(f"{unmasked},{shard}", dynamic=True)


def test_a_corrupt_record_found_mid_run_names_its_file(records, tmp_path):
    good = write_records(str(tmp_path / "train-0.tfrecord"), 24, seed=0)
    full = write_records(str(tmp_path / "full.tfrecord"), 24, seed=1)
    data = open(full, "rb").read()
    lengths = [len(r.numpy()) + 16 for r in tf.data.TFRecordDataset(full)]  # + framing
    bad = tmp_path / "train-1.tfrecord"
    bad.write_bytes(data[: sum(lengths[:3]) + 20])  # 3 whole records, then a cut one
    params = runner.PretrainingParams(
        input_file=f"{good},{bad}",
        output_dir=str(tmp_path / "out"),
        albert_config_file=records["config"],
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        train_batch_size=8,
        num_train_steps=2,
        steps_per_loop=2,
        save_checkpoints_steps=2,
        num_warmup_steps=0,
        export=False,
        jit_compile=False,
    )
    with pytest.raises(DataError) as error:
        runner.run_pretraining(params)
    assert str(error.value).startswith(
        f"{bad} (--input_file): record 3 is corrupt or truncated (truncated record at "
        f"{sum(lengths[:3])}"
    )
