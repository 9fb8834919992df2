"""The GLUE benchmark: its nine tasks (plus MNLI mismatched) as `TaskSpec`s, read from the
standard GLUE TSV directories or from TFDS `glue/*` datasets (downloaded and prepared on first
use; `albert_tf.data.tfds_tasks`), both into the same `Examples`.

>>> task = get_task("mrpc")
>>> task.labels, task.metrics, task.is_pair
(('0', '1'), ('accuracy', 'f1'), True)
"""

import os

import tensorflow as tf

from albert_tf.data.task_spec import DataError, TaskSpec, label_parser, make_examples
from albert_tf.data.text_files import read_delimited

_GLUE_PAIR = ("sentence1", "sentence2")
_NLI_2 = ("entailment", "not_entailment")

GLUE_TASKS = {
    # CoLA train/dev have no header: source, label, original label, sentence.
    "cola": TaskSpec(
        "cola",
        ("0", "1"),
        ("matthews_corrcoef", "accuracy"),
        (3,),
        1,
        header=False,
        test_text_columns=("sentence",),
        glue_dir="CoLA",
        tfds_name="glue/cola",
        tfds_text_features=("sentence",),
    ),
    "sst-2": TaskSpec(
        "sst-2",
        ("0", "1"),
        ("accuracy",),
        ("sentence",),
        "label",
        glue_dir="SST-2",
        tfds_name="glue/sst2",
        tfds_text_features=("sentence",),
    ),
    "mrpc": TaskSpec(
        "mrpc",
        ("0", "1"),
        ("accuracy", "f1"),
        ("#1 String", "#2 String"),
        "Quality",
        glue_dir="MRPC",
        tfds_name="glue/mrpc",
        tfds_text_features=_GLUE_PAIR,
    ),
    "sts-b": TaskSpec(
        "sts-b",
        None,
        ("pearson", "spearman"),
        _GLUE_PAIR,
        "score",
        glue_dir="STS-B",
        tfds_name="glue/stsb",
        tfds_text_features=_GLUE_PAIR,
    ),
    "qqp": TaskSpec(
        "qqp",
        ("0", "1"),
        ("accuracy", "f1"),
        ("question1", "question2"),
        "is_duplicate",
        glue_dir="QQP",
        tfds_name="glue/qqp",
        tfds_text_features=("question1", "question2"),
    ),
    "mnli": TaskSpec(
        "mnli",
        ("contradiction", "entailment", "neutral"),
        ("accuracy",),
        _GLUE_PAIR,
        "gold_label",
        glue_dir="MNLI",
        files=(("train", "train.tsv"), ("dev", "dev_matched.tsv"), ("test", "test_matched.tsv")),
        tfds_name="glue/mnli",
        tfds_text_features=("premise", "hypothesis"),
        tfds_splits=(("train", "train"), ("dev", "validation_matched"), ("test", "test_matched")),
    ),
    "mnli-mm": TaskSpec(
        "mnli-mm",
        ("contradiction", "entailment", "neutral"),
        ("accuracy",),
        _GLUE_PAIR,
        "gold_label",
        glue_dir="MNLI",
        files=(
            ("train", "train.tsv"),
            ("dev", "dev_mismatched.tsv"),
            ("test", "test_mismatched.tsv"),
        ),
        tfds_name="glue/mnli",
        tfds_text_features=("premise", "hypothesis"),
        tfds_splits=(
            ("train", "train"),
            ("dev", "validation_mismatched"),
            ("test", "test_mismatched"),
        ),
    ),
    "qnli": TaskSpec(
        "qnli",
        _NLI_2,
        ("accuracy",),
        ("question", "sentence"),
        "label",
        glue_dir="QNLI",
        tfds_name="glue/qnli",
        tfds_text_features=("question", "sentence"),
    ),
    "rte": TaskSpec(
        "rte",
        _NLI_2,
        ("accuracy",),
        _GLUE_PAIR,
        "label",
        glue_dir="RTE",
        tfds_name="glue/rte",
        tfds_text_features=_GLUE_PAIR,
    ),
    "wnli": TaskSpec(
        "wnli",
        ("0", "1"),
        ("accuracy",),
        _GLUE_PAIR,
        "label",
        glue_dir="WNLI",
        tfds_name="glue/wnli",
        tfds_text_features=_GLUE_PAIR,
    ),
}

_ALIASES = {
    "sst2": "sst-2",
    "stsb": "sts-b",
    "sts": "sts-b",
    "mismnli": "mnli-mm",
    "mnli-m": "mnli",
    "mnli_matched": "mnli",
    "mnli_mismatched": "mnli-mm",
}


def get_task(name):
    """The GLUE task called `name` (case-insensitive; "sst2", "stsb", "mismnli" are accepted)."""
    key = name.lower().strip()
    key = _ALIASES.get(key, key)
    if key not in GLUE_TASKS:
        raise ValueError(
            f"unknown task {name!r}; GLUE tasks: {', '.join(sorted(GLUE_TASKS))} "
            "(for any other data give train/eval files with named columns)"
        )
    return GLUE_TASKS[key]


def read_glue_examples(task, data_dir, split, skip_bad_lines=False):
    """Reads `data_dir/<GLUE dir>/<split file>` (or `data_dir/<split file>` if that exists).

    Args:
        task: a `TaskSpec` or task name.
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
        raise FileNotFoundError(
            f"{split} data of task {task.name!r} not found: looked for "
            f"{os.path.join(data_dir, task.glue_dir, name)} and "
            f"{os.path.join(data_dir, name)}"
        )
    test = split == "test"
    columns = (task.test_text_columns or task.text_columns) if test else task.text_columns
    header = task.test_header if test else task.header
    texts, pairs, labels = read_delimited(
        path,
        label_parser(task),
        columns,
        None if test else task.label_column,
        header,
        "\t",
        skip_bad_lines,
    )
    return make_examples(task, texts, pairs, labels, not test, path)


def read_tfds_examples(task, split, data_dir=None, download=True):
    """Reads a TFDS `glue/*` split in the order of the GLUE TSV file (TFDS's `idx`), with the
    labels of `read_glue_examples`.

    Args:
        task: a `TaskSpec` or task name.
        split: "train", "dev" or "test" (test has no labels).
        data_dir: the TFDS data directory (local or gs://; default $TFDS_DATA_DIR or
            ~/tensorflow_datasets).
        download: download and prepare the dataset there when it is not prepared yet; False
            raises `albert_tf.data.tfds_tasks.NotPreparedError` instead (one line naming the
            directory and the `tfds build` command).
    """
    from albert_tf.data import tfds_tasks

    task = get_task(task) if isinstance(task, str) else task
    splits = dict(task.tfds_splits)
    if task.tfds_name is None or split not in splits:
        raise ValueError(f"task {task.name!r} has no TFDS split {split!r}")
    builder = tfds_tasks.prepared_builder(task.tfds_name, data_dir, download)
    rows = sorted(tfds_tasks.records(builder, splits[split]), key=lambda row: row["idx"])
    names = None if task.is_regression else builder.info.features["label"].names
    texts, pairs, labels = [], [], []
    unlabelled = 0
    for row in rows:
        values = [row[f] for f in task.tfds_text_features]
        texts.append(values[0])
        if task.is_pair:
            pairs.append(values[1])
        raw = row["label"]
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
        raise DataError(
            f"{task.tfds_name}/{splits[split]}: {unlabelled} of {len(texts)} examples "
            "have no label (-1)"
        )
    return make_examples(
        task, texts, pairs, labels, labelled, f"tfds:{task.tfds_name}/{splits[split]}"
    )
