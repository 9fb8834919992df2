"""What a sentence(-pair) classification or regression task is: columns, labels, metrics.

A `TaskSpec` says where the texts and the label of each example are (per split, for the standard
GLUE TSV directories and for TFDS `glue/*`), which labels exist and which metrics the benchmark
reports. Readers (`albert_tf.data.glue`, `albert_tf.data.text_files`) return `Examples`:
parallel lists of texts, optional second texts and label ids.

>>> spec = custom_task("reviews", "review", label_column="stars", labels=["bad", "good"])
>>> spec.labels, spec.metrics, spec.is_pair, spec.num_classes
(('bad', 'good'), ('accuracy', 'f1'), False, 2)
"""

import dataclasses
from typing import List, Optional, Tuple, Union

import numpy as np

from albert_tf.errors import UserError

Column = Union[str, int]


class DataError(UserError, ValueError):
    """Bad input data; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """How to read one task and how to score it.

    Attributes:
        name: canonical task name ("mnli", "sts-b", ...).
        labels: label strings in id order; None for a regression task (one float score).
        metrics: metric names (see `albert_tf.metrics.glue_metrics.METRICS`); the first selects the
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
    files: Tuple[Tuple[str, str], ...] = (
        ("train", "train.tsv"),
        ("dev", "dev.tsv"),
        ("test", "test.tsv"),
    )
    tfds_name: Optional[str] = None
    tfds_text_features: Tuple[str, ...] = ()
    tfds_splits: Tuple[Tuple[str, str], ...] = (
        ("train", "train"),
        ("dev", "validation"),
        ("test", "test"),
    )

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


def custom_task(
    name,
    text_column,
    text_pair_column=None,
    label_column="label",
    labels=None,
    regression=False,
    metrics=None,
):
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
            metrics = (
                ("accuracy", "f1") if labels is not None and len(labels) == 2 else ("accuracy",)
            )
    columns = (text_column,) if not text_pair_column else (text_column, text_pair_column)
    return TaskSpec(
        name,
        None if regression else (tuple(str(label) for label in labels) if labels else ()),
        tuple(metrics),
        columns,
        label_column,
        test_text_columns=columns,
    )


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
        raise DataError(
            f"{where}: unknown label {text!r}; task {task.name!r} has labels {list(task.labels)}"
        ) from None


def make_examples(task, texts, pairs, labels, labelled, source):
    """`Examples` of `task` from parallel lists; DataError when there are none."""
    if not texts:
        raise DataError(f"{source}: no examples")
    dtype = np.float32 if task.is_regression else np.int32
    return Examples(
        texts=texts,
        text_pairs=pairs if task.is_pair else None,
        labels=np.asarray(labels, dtype=dtype) if labelled else None,
        source=source,
    )
