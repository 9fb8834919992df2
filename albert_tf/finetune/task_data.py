"""The data settings of the fine-tuning tasks: the data flags of the run_*.py scripts.

`ClassificationData` (run_classifier.py), `TaggingData` (run_token_classifier.py), `SquadData`
(run_squad.py) and `RaceData` (run_race.py), each read by its task
(`albert_tf.finetune.classification.SentenceClassificationTask`, ...; the task modules re-export
them). This module imports no TensorFlow: the scripts declare their flags from it and check the
input paths it names (`INPUT_PATHS`) before TensorFlow loads; flags that exclude each other are
refused when the settings are made (InvalidFlagError naming both).

GLUE, SQuAD and RACE can also be read by name through TFDS (`--use_tfds`, `--tfds_data_dir`,
`--tfds_download`; `albert_tf.data.tfds_tasks`), into the same examples as their files.

>>> try:
...     SquadData(use_tfds=True, train_file="train-v1.1.json")
... except InvalidFlagError as e:
...     print(str(e).split(":")[0])
--use_tfds and --train_file exclude each other
"""

import dataclasses
from typing import List, Optional

from albert_tf.data import conll, word_convention
from albert_tf.settings import InvalidFlagError, setting

# The fields (of any of these classes) that name an input file or directory.
INPUT_PATHS = ("data_dir", "train_file", "dev_file", "test_file", "predict_file")

_TFDS_DATA_DIR_HELP = (
    "With --use_tfds: the TFDS data directory, where the datasets are prepared (local or "
    "gs://; default $TFDS_DATA_DIR or ~/tensorflow_datasets)."
)
_TFDS_DOWNLOAD_HELP = (
    "With --use_tfds: download and prepare a dataset that --tfds_data_dir does not hold yet "
    "(TFDS's download_and_prepare, once; its progress is logged). --notfds_download fails "
    "instead, naming the `tfds build` command (TPU runs on data built beforehand)."
)


def _refuse_with_tfds(data, reasons):
    """InvalidFlagError when --use_tfds is on together with a flag of `reasons` ({flag: why})."""
    if not data.use_tfds:
        return
    for flag, why in reasons.items():
        if getattr(data, flag):
            raise InvalidFlagError(f"--use_tfds and --{flag} exclude each other: {why}")


@dataclasses.dataclass
class ClassificationData:
    """Where the examples of a classification task come from (the data flags of
    scripts/run_classifier.py)."""

    task_name: Optional[str] = setting(
        None,
        "GLUE task (cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli), "
        "'docstring-source' (built in), or any name with --train_file.",
        required=True,
    )
    data_dir: Optional[str] = setting(None, "GLUE download root (holding CoLA/, MNLI/, ...).")
    use_tfds: bool = setting(
        False,
        "Read the GLUE task from TFDS glue/* (train, validation, test; mnli: validation_matched "
        "or _mismatched) instead of --data_dir's TSV files: the same examples, in the same order.",
    )
    tfds_data_dir: Optional[str] = setting(None, _TFDS_DATA_DIR_HELP)
    tfds_download: bool = setting(True, _TFDS_DOWNLOAD_HELP)
    train_file: Optional[str] = setting(None, "CSV/TSV/JSONL training file with named columns.")
    dev_file: Optional[str] = setting(None, "Evaluation file (same columns as --train_file).")
    test_file: Optional[str] = setting(
        None,
        "File to predict (the text columns); with the label column it is also scored once "
        "with the chosen model.",
    )
    text_column: str = setting("text", "Column of the first text (files).")
    text_pair_column: Optional[str] = setting(
        None, "Column of the second text (files, pair tasks)."
    )
    label_column: str = setting("label", "Column of the label (files).")
    labels: Optional[List[str]] = setting(
        None, "Label names in id order (files; default: sorted labels found in --train_file)."
    )
    regression: bool = setting(False, "The label is a real number (files).")
    skip_bad_lines: bool = setting(False, "Skip malformed lines (logged) instead of failing.")
    truncation: str = setting(
        "round_robin",
        "How pairs are truncated (round_robin = the original's _truncate_seq_pair).",
        choices=("round_robin", "longest_first"),
    )
    dynamic_padding: Optional[bool] = setting(
        None,
        "Pad each batch to its longest example (multiple of 8) in the preprocessor instead of "
        "to max_seq_length; default: on, except with --strategy=tpu (static shapes). Off TPU "
        "the runner cuts every batch's padding either way.",
    )

    def __post_init__(self):
        why = "--use_tfds reads a GLUE task from TFDS, not from your files"
        _refuse_with_tfds(
            self,
            {
                "data_dir": "--use_tfds reads GLUE from TFDS (kept in --tfds_data_dir), "
                "--data_dir from the TSV files",
                "train_file": why,
                "dev_file": why,
                "test_file": why,
            },
        )


@dataclasses.dataclass
class TaggingData:
    """Where the tagged sentences come from (the data flags of scripts/run_token_classifier.py)."""

    task_name: str = setting(
        "ner",
        "Name of the task (logs, finetune.json); 'docstring-code' "
        "without files is the built-in task (find the code in docstrings "
        "of the installed packages).",
    )
    train_file: Optional[str] = setting(
        None,
        "Training file: CoNLL columns (word first, blank "
        "lines between sentences) or .jsonl with tokens/tags.",
    )
    dev_file: Optional[str] = setting(None, "Evaluation file (same format).")
    test_file: Optional[str] = setting(
        None,
        "File to tag (CoNLL: words in column 0; JSONL: tokens); with tags, it is also scored "
        "once with the chosen model.",
    )
    tag_column: int = setting(
        -1,
        "CoNLL files: the column of the tag (0 is the word; -1 the "
        "last, as CoNLL-2003's NER column).",
    )
    tag_scheme: str = setting(
        "auto",
        "Tag scheme of the files (converted to IOB2); auto detects it per file.",
        choices=conll.SCHEMES + ("auto",),
    )
    tokens_key: str = setting("tokens", "JSONL files: the key of the word list.")
    tags_key: str = setting("tags", "JSONL files: the key of the tag list.")
    labels: Optional[List[str]] = setting(
        None, "Tag names in id order (default: the tags of --train_file, O first)."
    )
    stride: Optional[int] = setting(
        None,
        "Pieces between the starts of the sliding windows over "
        "a sentence longer than max_seq_length - 2 (default: half "
        "a window).",
    )
    word_split: str = setting(
        "auto",
        "The words the export cuts raw text into: whitespace (only), punctuation (whitespace, "
        "and each punctuation character a word), or auto: punctuation when that split gives "
        "back at least 99% of the training words, else whitespace (albert_tf.data."
        "word_convention). Training reads the files' words either way.",
        choices=word_convention.CHOICES,
    )


@dataclasses.dataclass
class SquadData:
    """The SQuAD files and settings (the data flags of scripts/run_squad.py; the original's
    names and defaults)."""

    train_file: Optional[str] = setting(
        None, "SQuAD JSON for training (train-v1.1.json, train-v2.0.json)."
    )
    predict_file: Optional[str] = setting(
        None,
        "SQuAD JSON scored during training and answered at the end (dev-v1.1.json, dev-v2.0.json).",
    )
    version_2_with_negative: bool = setting(
        False, "SQuAD 2.0: questions may have no answer (the answerability head)."
    )
    doc_stride: int = setting(128, "Context pieces between the starts of two windows.")
    max_query_length: int = setting(64, "Question pieces kept (the rest is cut).")
    n_best_size: int = setting(20, "Candidate answers kept per question (nbest_predictions).")
    max_answer_length: int = setting(30, "Longest answer, in pieces.")
    start_n_top: int = setting(5, "v2: start positions in the beam.")
    end_n_top: int = setting(5, "v2: end positions per start in the beam.")
    feature_cache_dir: Optional[str] = setting(
        None,
        "Where the features are cached as TFRecords (default ~/.cache/albert_tf/squad); with "
        "--use_tfds also the SQuAD JSON files written from TFDS (tfds/squad/...).",
    )
    use_tfds: bool = setting(
        False,
        "Read SQuAD from TFDS squad/v1.1 (squad/v2.0 with --version_2_with_negative): its train "
        "split instead of --train_file and, without --predict_file, its validation split, "
        "written as the official dev-v1.1.json / dev-v2.0.json (scored as that file, and "
        "copied into --output_dir beside predictions.json for the official evaluation script).",
    )
    tfds_data_dir: Optional[str] = setting(None, _TFDS_DATA_DIR_HELP)
    tfds_download: bool = setting(True, _TFDS_DOWNLOAD_HELP)

    def __post_init__(self):
        _refuse_with_tfds(
            self,
            {
                "train_file": "--use_tfds trains on TFDS squad's train split (--predict_file "
                "may still name a file to answer)"
            },
        )


@dataclasses.dataclass
class RaceData:
    """Where the RACE questions come from (the data flags of scripts/run_race.py)."""

    data_dir: Optional[str] = setting(
        None,
        "RACE download root holding RACE/{train,dev,test}/{middle,"
        "high}/*.txt (or the RACE directory itself); required unless --use_tfds.",
    )
    high_only: bool = setting(False, "Only the high-school questions.")
    middle_only: bool = setting(False, "Only the middle-school questions.")
    max_qa_length: int = setting(
        128,
        "Pieces kept from the END of each question + option; the "
        "article fills the rest of --max_seq_length.",
    )
    use_tfds: bool = setting(
        False,
        "Read RACE from TFDS race/middle and race/high (train, dev, test) instead of "
        "--data_dir: the same questions, ids, option order and labels.",
    )
    tfds_data_dir: Optional[str] = setting(None, _TFDS_DATA_DIR_HELP)
    tfds_download: bool = setting(True, _TFDS_DOWNLOAD_HELP)

    def __post_init__(self):
        _refuse_with_tfds(
            self,
            {
                "data_dir": "--use_tfds reads TFDS race/middle and race/high (kept in "
                "--tfds_data_dir), --data_dir the release's files"
            },
        )
