"""The data settings of the fine-tuning tasks: the data flags of the run_*.py scripts.

`ClassificationData` (run_classifier.py), `TaggingData` (run_token_classifier.py), `SquadData`
(run_squad.py) and `RaceData` (run_race.py), each read by its task
(`albert_tf.finetune.classification.SentenceClassificationTask`, ...; the task modules re-export
them). This module imports no TensorFlow: the scripts declare their flags from it and check the
input paths it names (`INPUT_PATHS`) before TensorFlow loads.

>>> data = SquadData(train_file="train-v1.1.json", predict_file="dev-v1.1.json")
>>> [flag for flag in INPUT_PATHS if getattr(data, flag, None)]
['train_file', 'predict_file']
"""

import dataclasses
from typing import List, Optional

from albert_tf.data import conll
from albert_tf.settings import setting

# The fields (of any of these classes) that name an input file or directory.
INPUT_PATHS = ("data_dir", "train_file", "dev_file", "test_file", "predict_file")


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
    use_tfds: bool = setting(False, "Read GLUE from prepared TFDS glue/* instead of TSV files.")
    tfds_data_dir: Optional[str] = setting(
        None, "TFDS data directory (default ~/tensorflow_datasets)."
    )
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
        None, "Where the features are cached as TFRecords (default ~/.cache/albert_tf/squad)."
    )


@dataclasses.dataclass
class RaceData:
    """Where the RACE questions come from (the data flags of scripts/run_race.py)."""

    data_dir: Optional[str] = setting(
        None,
        "RACE download root holding RACE/{train,dev,test}/{middle,"
        "high}/*.txt (or the RACE directory itself).",
        required=True,
    )
    high_only: bool = setting(False, "Only the high-school questions.")
    middle_only: bool = setting(False, "Only the middle-school questions.")
    max_qa_length: int = setting(
        128,
        "Pieces kept from the END of each question + option; the "
        "article fills the rest of --max_seq_length.",
    )
