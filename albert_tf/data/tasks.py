"""Sentence(-pair) classification and regression tasks: GLUE and any labelled text file.

A `Task` says where the texts and the label of each example are (per split, for the standard
GLUE TSV directories and for TFDS `glue/*`), which labels exist and which metrics the benchmark
reports. Readers return `Examples` (parallel lists of texts, optional second texts, label ids);
`make_dataset` turns them into a tf.data pipeline of (model inputs, labels) with an
`AlbertPreprocessor` running inside `Dataset.map`.

Errors name the file and line: missing columns, unknown labels, empty lines, malformed rows.

>>> task = get_task("mrpc")
>>> task.labels, task.metrics, task.is_pair
(('0', '1'), ('accuracy', 'f1'), True)
"""
import csv
import dataclasses
import io
import json
import os
from typing import List, Optional, Tuple, Union

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import files

Column = Union[str, int]


@dataclasses.dataclass(frozen=True)
class Task:
    """How to read one task and how to score it.

    Attributes:
        name: canonical task name ("mnli", "sts-b", ...).
        labels: label strings in id order; None for a regression task (one float score).
        metrics: metric names (see `albert_tf.models.metrics.METRICS`); the first selects the
            best checkpoint (the original selects on Matthews for CoLA, Pearson for STS-B,
            accuracy otherwise).
        text_columns: one or two columns holding the text(s): header names or 0-based indices.
        label_column: column of the label (header name or index); None if there is none.
        header: whether the train/dev files start with a header row.
        test_text_columns / test_header: the same for the unlabelled test file.
        glue_dir: directory name in the standard GLUE download (data_dir/<glue_dir>/<split>.tsv).
        files: split name -> file name inside `glue_dir`.
        tfds_name / tfds_text_features / tfds_splits: the TFDS builder, its text features and
            split name map.
    """

    name: str
    labels: Optional[Tuple[str, ...]]
    metrics: Tuple[str, ...]
    text_columns: Tuple[Column, ...]
    label_column: Optional[Column]
    header: bool = True
    test_text_columns: Optional[Tuple[Column, ...]] = None
    test_header: bool = True
    glue_dir: Optional[str] = None
    files: Tuple[Tuple[str, str], ...] = (("train", "train.tsv"), ("dev", "dev.tsv"),
                                          ("test", "test.tsv"))
    tfds_name: Optional[str] = None
    tfds_text_features: Tuple[str, ...] = ()
    tfds_splits: Tuple[Tuple[str, str], ...] = (("train", "train"), ("dev", "validation"),
                                                ("test", "test"))

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def num_classes(self):
        """Width of the model's output: number of labels, or 1 for regression."""
        return 1 if self.labels is None else len(self.labels)

    @property
    def is_pair(self):
        return len(self.text_columns) == 2

    @property
    def main_metric(self):
        return self.metrics[0]

    def file_for(self, split):
        files = dict(self.files)
        if split not in files:
            raise ValueError(f"task {self.name!r} has no split {split!r}; splits: {sorted(files)}")
        return files[split]


@dataclasses.dataclass
class Examples:
    """Parallel lists: texts, optional second texts, label ids (None for unlabelled data)."""

    texts: List[str]
    text_pairs: Optional[List[str]] = None
    labels: Optional[np.ndarray] = None
    source: str = ""

    def __len__(self):
        return len(self.texts)


_GLUE_PAIR = ("sentence1", "sentence2")
_NLI_2 = ("entailment", "not_entailment")

GLUE_TASKS = {
    # CoLA train/dev have no header: source, label, original label, sentence.
    "cola": Task("cola", ("0", "1"), ("matthews_corrcoef", "accuracy"), (3,), 1, header=False,
                 test_text_columns=("sentence",), glue_dir="CoLA", tfds_name="glue/cola",
                 tfds_text_features=("sentence",)),
    "sst-2": Task("sst-2", ("0", "1"), ("accuracy",), ("sentence",), "label", glue_dir="SST-2",
                  tfds_name="glue/sst2", tfds_text_features=("sentence",)),
    "mrpc": Task("mrpc", ("0", "1"), ("accuracy", "f1"), ("#1 String", "#2 String"), "Quality",
                 glue_dir="MRPC", tfds_name="glue/mrpc", tfds_text_features=_GLUE_PAIR),
    "sts-b": Task("sts-b", None, ("pearson", "spearman"), _GLUE_PAIR, "score", glue_dir="STS-B",
                  tfds_name="glue/stsb", tfds_text_features=_GLUE_PAIR),
    "qqp": Task("qqp", ("0", "1"), ("accuracy", "f1"), ("question1", "question2"), "is_duplicate",
                glue_dir="QQP", tfds_name="glue/qqp", tfds_text_features=("question1", "question2")),
    "mnli": Task("mnli", ("contradiction", "entailment", "neutral"), ("accuracy",), _GLUE_PAIR,
                 "gold_label", glue_dir="MNLI",
                 files=(("train", "train.tsv"), ("dev", "dev_matched.tsv"),
                        ("test", "test_matched.tsv")),
                 tfds_name="glue/mnli", tfds_text_features=("premise", "hypothesis"),
                 tfds_splits=(("train", "train"), ("dev", "validation_matched"),
                              ("test", "test_matched"))),
    "mnli-mm": Task("mnli-mm", ("contradiction", "entailment", "neutral"), ("accuracy",),
                    _GLUE_PAIR, "gold_label", glue_dir="MNLI",
                    files=(("train", "train.tsv"), ("dev", "dev_mismatched.tsv"),
                           ("test", "test_mismatched.tsv")),
                    tfds_name="glue/mnli", tfds_text_features=("premise", "hypothesis"),
                    tfds_splits=(("train", "train"), ("dev", "validation_mismatched"),
                                 ("test", "test_mismatched"))),
    "qnli": Task("qnli", _NLI_2, ("accuracy",), ("question", "sentence"), "label",
                 glue_dir="QNLI", tfds_name="glue/qnli", tfds_text_features=("question", "sentence")),
    "rte": Task("rte", _NLI_2, ("accuracy",), _GLUE_PAIR, "label", glue_dir="RTE",
                tfds_name="glue/rte", tfds_text_features=_GLUE_PAIR),
    "wnli": Task("wnli", ("0", "1"), ("accuracy",), _GLUE_PAIR, "label", glue_dir="WNLI",
                 tfds_name="glue/wnli", tfds_text_features=_GLUE_PAIR),
}

_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mismnli": "mnli-mm",
            "mnli-m": "mnli", "mnli_matched": "mnli", "mnli_mismatched": "mnli-mm"}


def get_task(name):
    """The GLUE task called `name` (case-insensitive; "sst2", "stsb", "mismnli" are accepted)."""
    key = name.lower().strip()
    key = _ALIASES.get(key, key)
    if key not in GLUE_TASKS:
        raise ValueError(f"unknown task {name!r}; GLUE tasks: {', '.join(sorted(GLUE_TASKS))} "
                         "(for any other data give train/eval files with named columns)")
    return GLUE_TASKS[key]


def custom_task(name, text_column, text_pair_column=None, label_column="label", labels=None,
                regression=False, metrics=None):
    """A task over CSV/TSV/JSONL files with named columns.

    `labels` lists the label strings in id order; if None they are taken from the training file
    (sorted) by `read_file_examples(..., infer_labels=True)`. Metrics default to accuracy (plus
    F1 for two labels), or Pearson/Spearman for regression.
    """
    if regression and labels:
        raise ValueError("a regression task has no label list; drop `labels` or `regression`")
    if metrics is None:
        if regression:
            metrics = ("pearson", "spearman")
        else:
            metrics = ("accuracy", "f1") if labels is not None and len(labels) == 2 else ("accuracy",)
    columns = (text_column,) if not text_pair_column else (text_column, text_pair_column)
    return Task(name, None if regression else (tuple(str(l) for l in labels) if labels else ()),
                tuple(metrics), columns, label_column, test_text_columns=columns)


# ----------------------------------------------------------------------------- parsing
class DataError(ValueError):
    """Bad input data; the message names the file and line."""


def _raw_label(value, where):
    """Label parser used when inferring a label list: the stripped label string."""
    return str(value).strip()


def label_parser(task):
    """Returns parse(value, where) -> label id (or float score), raising DataError at `where`."""
    return lambda value, where: _label_id(task, value, where)


def _label_id(task, value, where):
    if task.is_regression:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise DataError(f"{where}: regression label {value!r} is not a number") from None
    text = str(value).strip()
    try:
        return task.labels.index(text)
    except ValueError:
        raise DataError(f"{where}: unknown label {text!r}; task {task.name!r} has labels "
                        f"{list(task.labels)}") from None


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


def _read_text(path):
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig")  # drops the byte-order mark MRPC's files start with
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None


def _read_delimited(path, parse_label, text_columns, label_column, header_present, delimiter,
                    skip_bad_lines):
    rows = _rows_from_text(path, _read_text(path), delimiter)
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
            raise DataError(f"{where}: expected at least {max(indices) + 1} {kind} fields, "
                            f"found {len(fields)}")
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
            raise DataError(f"{where}: missing column(s) {missing}; the record has {sorted(record)}")
        for column in text_columns:
            if not isinstance(record[column], str):
                raise DataError(f"{where}: column {column!r} must be a string, found "
                                f"{type(record[column]).__name__}")
        return [record[c] for c in wanted]

    lines = enumerate(io.StringIO(_read_text(path)), start=1)
    records = ((f"{path}:{number}", lambda w, l=line: values(w, l)) for number, line in lines)
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


def _examples(task, texts, pairs, labels, labelled, source):
    if not texts:
        raise DataError(f"{source}: no examples")
    dtype = np.float32 if task.is_regression else np.int32
    return Examples(texts=texts, text_pairs=pairs if task.is_pair else None,
                    labels=np.asarray(labels, dtype=dtype) if labelled else None, source=source)


def read_glue_examples(task, data_dir, split, skip_bad_lines=False):
    """Reads `data_dir/<GLUE dir>/<split file>` (or `data_dir/<split file>` if that exists).

    Args:
        task: a `Task` or task name.
        data_dir: the GLUE download root (holding CoLA/, MNLI/, ...) or the task's own directory.
        split: "train", "dev" or "test" (test has no labels).
        skip_bad_lines: log and skip malformed lines instead of raising.
    """
    task = get_task(task) if isinstance(task, str) else task
    name = task.file_for(split)
    path = os.path.join(data_dir, name)
    if not tf.io.gfile.exists(path):
        path = os.path.join(data_dir, task.glue_dir, name)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{split} data of task {task.name!r} not found: looked for "
                                f"{os.path.join(data_dir, task.glue_dir, name)} and "
                                f"{os.path.join(data_dir, name)}")
    test = split == "test"
    columns = (task.test_text_columns or task.text_columns) if test else task.text_columns
    header = task.test_header if test else task.header
    texts, pairs, labels = _read_delimited(path, label_parser(task), columns,
                                           None if test else task.label_column, header, "\t",
                                           skip_bad_lines)
    return _examples(task, texts, pairs, labels, not test, path)


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
        _, _, raw = _read_any(kind, path, _raw_label, task.text_columns, label_column,
                              skip_bad_lines)
        names = tuple(sorted(set(raw)))
        if len(names) < 2:
            raise DataError(f"{path}: found {len(names)} distinct label(s) {list(names)} in column "
                            f"{label_column!r}; classification needs at least 2")
        metrics = ("accuracy", "f1") if task.metrics == ("accuracy",) and len(names) == 2 else (
            task.metrics)
        task = dataclasses.replace(task, labels=names, metrics=metrics)
        logging.info("%s: labels %s", path, list(names))
    texts, pairs, labels = _read_any(kind, path, label_parser(task), task.text_columns,
                                     label_column, skip_bad_lines)
    return _examples(task, texts, pairs, labels, labelled, path), task


def _read_any(kind, path, parse_label, text_columns, label_column, skip_bad_lines):
    if kind == "jsonl":
        return _read_jsonl(path, parse_label, text_columns, label_column, skip_bad_lines)
    return _read_delimited(path, parse_label, text_columns, label_column, True, kind,
                           skip_bad_lines)


def read_tfds_examples(task, split, data_dir=None):
    """Reads a prepared TFDS `glue/*` split (never downloads; prepare it with `tfds build`)."""
    import tensorflow_datasets as tfds

    task = get_task(task) if isinstance(task, str) else task
    splits = dict(task.tfds_splits)
    if task.tfds_name is None or split not in splits:
        raise ValueError(f"task {task.name!r} has no TFDS split {split!r}")
    try:
        builder = tfds.builder(task.tfds_name, data_dir=data_dir)
        dataset = builder.as_dataset(split=splits[split])
    except Exception as e:  # tfds raises several types for "not prepared"
        raise FileNotFoundError(
            f"TFDS dataset {task.tfds_name} split {splits[split]} is not prepared under "
            f"{data_dir or '~/tensorflow_datasets'}: {e}. Prepare it with "
            f"`tfds build {task.tfds_name} --data_dir=...` or use the GLUE TSV files.") from None
    names = None if task.is_regression else builder.info.features["label"].names
    texts, pairs, labels = [], [], []
    unlabelled = 0
    for record in tfds.as_numpy(dataset):
        values = [record[f].decode("utf-8") for f in task.tfds_text_features]
        texts.append(values[0])
        if task.is_pair:
            pairs.append(values[1])
        raw = record["label"]
        if task.is_regression:
            labels.append(float(raw))
        elif raw < 0:
            unlabelled += 1
        else:
            # TFDS names some labels ("entailment") and numbers others ("equivalent" is GLUE's
            # "1"): map by name when the task knows it, else by the class index.
            name = str(names[raw])
            labels.append(task.labels.index(name if name in task.labels else str(raw)))
    labelled = unlabelled == 0
    if unlabelled and unlabelled != len(texts):
        raise DataError(f"{task.tfds_name}/{splits[split]}: {unlabelled} of {len(texts)} examples "
                        "have no label (-1)")
    return _examples(task, texts, pairs, labels, labelled, f"tfds:{task.tfds_name}/{splits[split]}")


# ----------------------------------------------------------------------------- tf.data
def _features(examples, start=0, end=None):
    features = {"text": np.asarray(examples.texts[start:end], dtype=object)}
    if examples.text_pairs is not None:
        features["text_pair"] = np.asarray(examples.text_pairs[start:end], dtype=object)
    return features


def make_dataset(examples, preprocessor, batch_size, training=False, seed=None,
                 pad_to_batch=False, with_labels=True):
    """A tf.data pipeline of (model inputs, labels) batches, or model inputs only.

    Args:
        examples: `Examples`.
        preprocessor: an `AlbertPreprocessor` (runs in `Dataset.map` on string batches).
        batch_size: examples per batch (per step, across replicas).
        training: shuffle (reshuffling each pass), repeat forever and drop the last partial
            batch.
        seed: shuffle seed.
        pad_to_batch: for evaluation on TPUs: append empty examples so every batch is full;
            callers cut predictions back to `len(examples)`.
        with_labels: yield (inputs, labels); needs labelled examples.
    """
    if with_labels and examples.labels is None:
        raise ValueError(f"{examples.source}: examples have no labels")
    features = _features(examples)
    labels = examples.labels
    n = len(examples)
    if pad_to_batch and not training and n % batch_size:
        extra = batch_size - n % batch_size
        features = {k: np.concatenate([v, np.asarray([""] * extra, dtype=object)])
                    for k, v in features.items()}
        if labels is not None:
            labels = np.concatenate([labels, np.zeros([extra], dtype=labels.dtype)])
    ds = tf.data.Dataset.from_tensor_slices((features, labels) if with_labels else features)
    if training:
        ds = ds.shuffle(min(n, 100_000), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=training or pad_to_batch)
    if with_labels:
        ds = ds.map(lambda x, y: (preprocessor(x), y), num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(preprocessor, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def count_truncated(examples, preprocessor, batch_size=1024):
    """Number of examples whose [CLS] a [SEP] (b [SEP]) is longer than the preprocessor's seq_length."""
    specials = 3 if examples.text_pairs is not None else 2
    truncated = 0
    for start in range(0, len(examples), batch_size):
        features = _features(examples, start, start + batch_size)
        total = preprocessor.token_lengths(features["text"])
        if "text_pair" in features:
            total = total + preprocessor.token_lengths(features["text_pair"])
        truncated += int(np.sum(total.numpy() + specials > preprocessor.seq_length))
    return truncated


# ----------------------------------------------------------------------------- built-in task
DOCSTRING_SOURCE = "docstring-source"


def docstring_source_splits(packages=("tensorflow", "keras", "numpy"), per_class=500,
                            dev_fraction=0.2, min_words=12, max_sentences=3, seed=0,
                            cache_dir=None):
    """A real, offline classification task: which library a docstring paragraph comes from.

    Documents of `albert_tf.data.corpora`'s "builtin:docstrings" corpus are read one package at a
    time (that is the provenance); each becomes one example (its first `max_sentences`
    sentences, at least `min_words` words). Texts found in more than one package are dropped,
    then up to `per_class` examples per package are drawn and split into train and dev.

    Returns (task, {"train": Examples, "dev": Examples}).
    """
    from albert_tf.data.corpora import iter_documents

    by_package = {}
    for package in packages:
        texts = []
        for document in iter_documents("builtin:docstrings", packages=(package,),
                                       cache_dir=cache_dir):
            text = " ".join(document[:max_sentences])
            if len(text.split()) >= min_words:
                texts.append(text)
        by_package[package] = sorted(set(texts))
        logging.info("%s: %d %s docstring paragraphs", DOCSTRING_SOURCE, len(texts), package)
    seen = {}
    for package, texts in by_package.items():
        for text in texts:
            seen[text] = seen.get(text, 0) + 1
    rng = np.random.default_rng(seed)
    splits = {"train": ([], []), "dev": ([], [])}
    for label, package in enumerate(packages):
        texts = [t for t in by_package[package] if seen[t] == 1]
        chosen = rng.permutation(len(texts))[:per_class]
        n_dev = max(1, int(round(dev_fraction * len(chosen))))
        for i, index in enumerate(chosen):
            split = "dev" if i < n_dev else "train"
            splits[split][0].append(texts[index])
            splits[split][1].append(label)
    task = Task(DOCSTRING_SOURCE, tuple(packages), ("accuracy",), ("text",), "label")
    out = {}
    for split, (texts, labels) in splits.items():
        order = rng.permutation(len(texts))
        out[split] = Examples(texts=[texts[i] for i in order],
                              labels=np.asarray(labels, np.int32)[order],
                              source=f"builtin:docstrings ({', '.join(packages)}) {split}")
    return task, out


def load_task_splits(task_name, data_dir=None, use_tfds=False, tfds_data_dir=None,
                     train_file=None, dev_file=None, test_file=None, text_column="text",
                     text_pair_column=None, label_column="label", labels=None, regression=False,
                     skip_bad_lines=False, wanted=("train", "dev"), seed=0):
    """Reads the `wanted` splits of a task; returns (task, {split: Examples}).

    Files (`train_file`/`dev_file`/`test_file`) make a custom task named `task_name` (labels
    from `labels` or the training file); "docstring-source" is the built-in task; any other
    name is a GLUE task read from `data_dir` TSVs or, with `use_tfds`, prepared TFDS data.
    """
    if train_file or dev_file or test_file:
        task = custom_task(task_name, text_column, text_pair_column, label_column, labels,
                           regression)
        files = {"train": train_file, "dev": dev_file, "test": test_file}
        missing = [s for s in wanted if not files[s]]
        if missing:
            raise ValueError(f"task {task_name!r} from files: no file for split(s) {missing} "
                             f"(--{missing[0]}_file)")
        splits = {}
        for split in ("train", "dev", "test"):
            if split in wanted:
                splits[split], task = read_file_examples(
                    task, files[split], labelled=split != "test", skip_bad_lines=skip_bad_lines,
                    infer_labels=not task.is_regression and not task.labels)
        return task, splits
    if task_name.lower().replace("_", "-") == DOCSTRING_SOURCE:
        task, splits = docstring_source_splits(seed=seed)
        if "test" in wanted:
            raise ValueError(f"{DOCSTRING_SOURCE} has no test split")
        return task, {s: splits[s] for s in wanted}
    task = get_task(task_name)
    if use_tfds:
        return task, {s: read_tfds_examples(task, s, tfds_data_dir) for s in wanted}
    if data_dir is None:
        raise ValueError(f"GLUE task {task.name!r} needs data_dir (or use_tfds)")
    return task, {s: read_glue_examples(task, data_dir, s, skip_bad_lines) for s in wanted}


def write_predictions(model, examples, preprocessor, task, output_dir, batch_size=32):
    """Writes test_results.tsv (per-class probabilities, or the score) and submit_results.tsv
    ("index<TAB>prediction" with label names, the GLUE submission format)."""
    dataset = make_dataset(examples, preprocessor, batch_size, with_labels=False)
    outputs = np.asarray(model.predict(dataset, verbose=0), dtype=np.float64)[:len(examples)]
    if task.is_regression:
        scores = outputs.reshape(-1)
        results = [f"{s:.6f}" for s in scores]
        submit = results
    else:
        shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
        results = ["\t".join(f"{p:.6f}" for p in row) for row in probabilities]
        submit = [task.labels[i] for i in probabilities.argmax(axis=-1)]
    files.write_atomic(os.path.join(output_dir, "test_results.tsv"), "\n".join(results) + "\n")
    submit_lines = ["index\tprediction"] + [f"{i}\t{p}" for i, p in enumerate(submit)]
    files.write_atomic(os.path.join(output_dir, "submit_results.tsv"), "\n".join(submit_lines) + "\n")
    logging.info("Wrote %d test predictions to %s", len(examples), output_dir)
