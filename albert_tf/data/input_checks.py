"""Checks of pretraining TFRecords before training, and the file to blame after a DataLossError.

`check_pretraining_inputs` looks at every file the flags' globs match, cheaply: the summary JSON
files that create_pretraining_data writes beside its records are left out (with a warning) and
read for their settings, and the first record of each file is read (one parallel tf.data pass) and
compared with --max_seq_length and --max_predictions_per_seq. A file whose first record cannot be
read, or that holds no pretraining records, raises a DataError naming it and its flag; records of
another shape raise an InvalidFlagError naming the flag, the file and what it holds.

`locate_data_loss` runs after a DataLossError in the middle of training: it reads the files
through and raises a DataError naming the corrupt or truncated one and the record's index.

>>> sources = {"input_file": "data/train-*", "eval_input_files": None}
>>> check_pretraining_inputs(sources, max_seq_length=512,
...                          max_predictions_per_seq=20)  # doctest: +SKIP
"""

import os
import re

import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf.data import pipeline, writer
from albert_tf.data.task_spec import DataError
from albert_tf.settings import InvalidFlagError

_REQUIRED = ("input_ids", "input_mask", "segment_ids", "next_sentence_labels")
_PARALLEL_READS = 16


def _reason(error):
    """TensorFlow's message without the op decorations: 'corrupted record at 0 (...)'."""
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", error.message)
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", message, flags=re.S).strip()


def _summaries(record_files):
    """{record file: (summary path, summary)} from the summaries in the records' directories."""
    found = {}
    for directory in sorted({os.path.dirname(path) for path in record_files}):
        for path in tf.io.gfile.glob(os.path.join(directory, "*" + writer.SUMMARY_SUFFIX)):
            try:
                summary = files.read_json(path)
            except ValueError as e:
                logging.warning("Ignoring %s: %s", path, e)
                continue
            for output in summary.get("outputs") or {}:
                found[os.path.join(directory, os.path.basename(output))] = (path, summary)
    return found


def _first_records(record_files, flag):
    """{file: its first record} for the files that hold one; DataError naming a file that
    cannot be read. One parallel pass; file by file only to find the one that failed it."""
    dataset = tf.data.Dataset.from_tensor_slices(record_files).interleave(
        lambda path: tf.data.TFRecordDataset(path).take(1).map(lambda record: (path, record)),
        cycle_length=_PARALLEL_READS,
        num_parallel_calls=_PARALLEL_READS,
        deterministic=False,
    )
    try:
        return {path.numpy().decode(): record.numpy() for path, record in dataset}
    except tf.errors.OpError:
        pass
    first = {}
    for path in record_files:
        try:
            for record in tf.data.TFRecordDataset(path).take(1):
                first[path] = record.numpy()
        except tf.errors.OpError as e:
            raise DataError(
                f"{path} (--{flag}) is not a TFRecord file of create_pretraining_data: "
                f"its first record cannot be read: {_reason(e)}"
            ) from None
    return first


def _settings_note(summary):
    if summary is None:
        return ""
    path, values = summary
    return (
        f" (its summary {path}: max_seq_length={values.get('max_seq_length')}, "
        f"max_predictions_per_seq={values.get('max_predictions_per_seq')})"
    )


def _record_shape(path, record, flag, dynamic_masking):
    """(sequence length, masked positions or None) of one record; DataError when it is not a
    pretraining record the training input can read."""
    try:
        features = tf.train.Example.FromString(record).features.feature
    except Exception:  # google.protobuf.message.DecodeError
        raise DataError(
            f"{path} (--{flag}) is not a file of pretraining records: its first record "
            "is not a tf.train.Example"
        ) from None
    missing = [name for name in _REQUIRED if name not in features]
    if missing:
        raise DataError(
            f"{path} (--{flag}) holds records without {', '.join(missing)}: not "
            "pretraining records of create_pretraining_data"
        )
    masked = "masked_lm_positions" in features
    if not masked and not dynamic_masking:
        raise DataError(
            f"{path} (--{flag}) holds unmasked records (create_pretraining_data "
            "--no_masking): train on them with --dynamic_masking"
        )
    if dynamic_masking and "token_boundary" not in features:
        raise DataError(
            f"{path} (--{flag}) has no token_boundary feature: --dynamic_masking needs "
            "the word boundaries that albert_tf's create_pretraining_data writes"
        )
    predictions = len(features["masked_lm_positions"].int64_list.value) if masked else None
    return len(features["input_ids"].int64_list.value), predictions


def _check_shape(path, flag, found, summary, max_seq_length, max_predictions_per_seq, empty=False):
    """InvalidFlagError when `found` = (length, predictions or None) differs from the flags
    (`empty`: the file holds no record, `found` comes from its summary)."""
    length, predictions = found
    holds = f"{path} (--{flag}) " + (
        "is empty; its summary gives records" if empty else "holds records"
    )
    note = _settings_note(summary)
    if length != max_seq_length:
        raise InvalidFlagError(
            f"--max_seq_length={max_seq_length} but {holds} of length {length}"
            f"{note}; pass --max_seq_length={length} or recreate the records"
        )
    if predictions is not None and predictions != max_predictions_per_seq:
        raise InvalidFlagError(
            f"--max_predictions_per_seq={max_predictions_per_seq} but {holds} with "
            f"{predictions} masked positions{note}; pass --max_predictions_per_seq={predictions} "
            "or recreate the records"
        )


def check_pretraining_inputs(
    sources, max_seq_length, max_predictions_per_seq, dynamic_masking=False
):
    """Checks the files of `sources` ({flag name: comma-separated globs or None}) before training.

    Returns {flag: [record files]}. Raises InvalidFlagError (a glob matching no record file, or
    records of another shape than the flags) or DataError (a file that is not pretraining
    records), each naming the file and the flag.
    """
    checked = {}
    for flag, patterns in sources.items():
        if not patterns:
            continue
        try:
            record_files, side_files = pipeline.match_files(patterns)
        except FileNotFoundError as e:
            raise InvalidFlagError(f"--{flag}: {e}") from None
        for path in side_files:
            logging.warning(
                "--%s: skipping %s, written beside the records (not records)", flag, path
            )
        summaries = _summaries(record_files)
        first = _first_records(record_files, flag)
        masked_files = {}
        for path in record_files:
            summary = summaries.get(path)
            if path in first:
                found = _record_shape(path, first[path], flag, dynamic_masking)
            else:
                logging.warning("--%s: %s holds no record", flag, path)
                if summary is None:
                    continue
                found = tuple(
                    summary[1].get(key) for key in ("max_seq_length", "max_predictions_per_seq")
                )
            _check_shape(
                path,
                flag,
                found,
                summary,
                max_seq_length,
                max_predictions_per_seq,
                empty=path not in first,
            )
            masked_files.setdefault(found[1] is not None, path)
        if len(masked_files) > 1:
            raise DataError(
                f"--{flag} mixes masked records ({masked_files[True]}) and unmasked "
                f"ones ({masked_files[False]}); give files of one kind"
            )
        checked[flag] = record_files
    return checked


def locate_data_loss(sources):
    """After a tf.errors.DataLossError: reads the files of `sources` ({flag: globs or None}) and
    raises DataError naming the first corrupt or truncated one and the index of its bad record.
    Returns when every file reads through (the error came from elsewhere)."""
    for flag, patterns in sources.items():
        if not patterns:
            continue
        for path in pipeline.list_files(patterns):
            try:
                tf.data.TFRecordDataset(path).reduce(0, lambda count, _: count + 1)
                continue
            except tf.errors.DataLossError:
                pass
            index = 0
            try:
                for _ in tf.data.TFRecordDataset(path):
                    index += 1
            except tf.errors.DataLossError as e:
                raise DataError(
                    f"{path} (--{flag}): record {index} is corrupt or truncated "
                    f"({_reason(e)}); recreate the file or leave it out of --{flag}"
                ) from None
