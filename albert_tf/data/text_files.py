r"""Labelled text files with named columns: CSV (.csv), TSV (.tsv, .txt) and JSON lines (.jsonl).

Errors name the file and line: missing columns, unknown labels, empty lines, malformed rows,
invalid UTF-8 (`DataError`); `skip_bad_lines` logs and skips such lines instead.

>>> import os, tempfile
>>> from albert_tf.data.task_spec import custom_task
>>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
>>> _ = open(path, "w").write("review,stars\nGreat!,good\nMeh.,bad\n")
>>> examples, spec = read_file_examples(custom_task("reviews", "review", label_column="stars"),
...                                     path, infer_labels=True)
>>> examples.texts, examples.labels.tolist(), spec.labels
(['Great!', 'Meh.'], [1, 0], ('bad', 'good'))
"""

import csv
import dataclasses
import io
import json

from absl import logging

from albert_tf.data.task_spec import DataError, label_parser, make_examples


def _raw_label(value, where):
    """Label parser used when inferring a label list: the stripped label string."""
    return str(value).strip()


def _resolve_columns(columns, header, path):
    """Header names -> indices (ints pass through); raises naming the missing column."""
    resolved = []
    for column in columns:
        if isinstance(column, int):
            resolved.append(column)
            continue
        if header is None:
            raise DataError(f"{path}: column {column!r} is named but the file has no header")
        if column not in header:
            raise DataError(f"{path}:1: missing column {column!r}; the header has {header}")
        resolved.append(header.index(column))
    return resolved


def _rows_from_text(path, text, delimiter):
    """Yields (line_number, fields) for a delimited file; TSV is split on tabs, no quoting."""
    if delimiter == "\t":
        for number, line in enumerate(io.StringIO(text), start=1):
            line = line.rstrip("\r\n")
            yield number, (None if not line.strip() else line.split("\t"))
    else:
        reader = csv.reader(io.StringIO(text, newline=""))
        number = 1
        for fields in reader:
            yield number, (None if not any(f.strip() for f in fields) else fields)
            number = reader.line_num + 1


def read_text(path):
    """The text of a UTF-8 file (a byte-order mark is dropped); DataError naming the line of bad
    bytes."""
    import tensorflow as tf  # imported on use: conll.SCHEMES (the --tag_scheme choices) stays light

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig")  # drops the byte-order mark MRPC's files start with
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None


def read_delimited(
    path, parse_label, text_columns, label_column, header_present, delimiter, skip_bad_lines
):
    """(texts, pairs, labels) of a tab- or comma-separated file; GLUE's TSVs are read with it."""
    rows = _rows_from_text(path, read_text(path), delimiter)
    header = None
    if header_present:
        first = next(rows, None)
        if first is None or first[1] is None:
            raise DataError(f"{path}:1: expected a header row, found an empty line")
        header = [h.strip() for h in first[1]]
    wanted = list(text_columns) + ([label_column] if label_column is not None else [])
    indices = _resolve_columns(wanted, header, path)
    kind = "tab-separated" if delimiter == "\t" else "comma-separated"

    def values(where, fields):
        if fields is None:
            raise DataError(f"{where}: empty line")
        if max(indices) >= len(fields):
            raise DataError(
                f"{where}: expected at least {max(indices) + 1} {kind} fields, found {len(fields)}"
            )
        return [fields[i] for i in indices]

    records = ((f"{path}:{number}", lambda w, f=fields: values(w, f)) for number, fields in rows)
    return _collect(path, records, parse_label, len(text_columns), label_column, skip_bad_lines)


def _read_jsonl(path, parse_label, text_columns, label_column, skip_bad_lines):
    wanted = list(text_columns) + ([label_column] if label_column is not None else [])

    def values(where, line):
        if not line.strip():
            raise DataError(f"{where}: empty line")
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: invalid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object, found {type(record).__name__}")
        missing = [c for c in wanted if c not in record]
        if missing:
            raise DataError(
                f"{where}: missing column(s) {missing}; the record has {sorted(record)}"
            )
        for column in text_columns:
            if not isinstance(record[column], str):
                raise DataError(
                    f"{where}: column {column!r} must be a string, found "
                    f"{type(record[column]).__name__}"
                )
        return [record[c] for c in wanted]

    lines = enumerate(io.StringIO(read_text(path)), start=1)
    records = ((f"{path}:{number}", lambda w, text=line: values(w, text)) for number, line in lines)
    return _collect(path, records, parse_label, len(text_columns), label_column, skip_bad_lines)


def _collect(path, records, parse_label, num_texts, label_column, skip_bad_lines):
    """Runs each record's value extractor; returns (texts, pairs, labels), skipping or raising."""
    texts, pairs, labels = [], [], []
    skipped = 0
    for where, extract in records:
        try:
            values = extract(where)
            label = parse_label(values[-1], where) if label_column is not None else None
        except DataError as e:
            if not skip_bad_lines:
                raise
            skipped += 1
            logging.warning("skipping %s", e)
            continue
        texts.append(values[0])
        if num_texts == 2:
            pairs.append(values[1])
        if label is not None:
            labels.append(label)
    if skipped:
        logging.warning("%s: skipped %d bad line(s)", path, skipped)
    return texts, pairs, labels


def file_columns(path):
    """The column names of a CSV/TSV file's header row or of a JSON-lines file's first record
    (what `read_file_examples` can read from it).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "test.tsv")
    >>> _ = open(path, "w").write("review\\tstars\\nGreat!\\tgood\\n")
    >>> file_columns(path)
    ['review', 'stars']
    """
    lower = path.lower()
    text = read_text(path)
    if lower.endswith((".jsonl", ".json")):
        for line in io.StringIO(text):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    return []
                return sorted(record) if isinstance(record, dict) else []
        return []
    delimiter = "," if lower.endswith(".csv") else "\t"
    first = next(_rows_from_text(path, text, delimiter), None)
    return [h.strip() for h in first[1]] if first and first[1] else []


def read_file_examples(task, path, labelled=True, skip_bad_lines=False, infer_labels=False):
    """Reads a CSV (.csv), TSV (.tsv, .txt) or JSON-lines (.jsonl, .json) file with named columns.

    Returns (examples, task): when `infer_labels` is set and the task has no label list, the
    sorted distinct labels of this file become the task's labels.
    """
    lower = path.lower()
    if lower.endswith((".jsonl", ".json")):
        kind = "jsonl"
    elif lower.endswith(".csv"):
        kind = ","
    elif lower.endswith((".tsv", ".txt")):
        kind = "\t"
    else:
        raise ValueError(f"{path}: unknown file type; use .csv, .tsv or .jsonl")
    label_column = task.label_column if labelled else None
    if infer_labels and not task.is_regression and not task.labels:
        _, _, raw = _read_any(
            kind, path, _raw_label, task.text_columns, label_column, skip_bad_lines
        )
        names = tuple(sorted(set(raw)))
        if len(names) < 2:
            raise DataError(
                f"{path}: found {len(names)} distinct label(s) {list(names)} in column "
                f"{label_column!r}; classification needs at least 2"
            )
        metrics = (
            ("accuracy", "f1")
            if task.metrics == ("accuracy",) and len(names) == 2
            else (task.metrics)
        )
        task = dataclasses.replace(task, labels=names, metrics=metrics)
        logging.info("%s: labels %s", path, list(names))
    texts, pairs, labels = _read_any(
        kind, path, label_parser(task), task.text_columns, label_column, skip_bad_lines
    )
    return make_examples(task, texts, pairs, labels, labelled, path), task


def _read_any(kind, path, parse_label, text_columns, label_column, skip_bad_lines):
    if kind == "jsonl":
        return _read_jsonl(path, parse_label, text_columns, label_column, skip_bad_lines)
    return read_delimited(path, parse_label, text_columns, label_column, True, kind, skip_bad_lines)
