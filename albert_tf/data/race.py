"""RACE (reading comprehension, 4-way multiple choice): reading the release and building inputs.

Layout: `<data_dir>/RACE/{train,dev,test}/{middle,high}/*.txt` (`<data_dir>` may also be the
RACE directory itself), each file one JSON article {"article", "questions": [...],
"options": [[4 strings], ...], "answers": ["A".."D"], "id"}. A level directory holding the
original code's `all.txt` (one such JSON per line) is read from that file only. TFDS race/middle
and race/high give the same `RaceExamples` (`albert_tf.data.tfds_tasks.read_race_tfds`).

Inputs as the original `run_race.py` builds them: article, question and options go through
`preprocess_text`; each option is joined with its question (it replaces every "_" of a cloze
question, else "question option"); each choice is `[CLS] article [SEP] qa [SEP]` where the qa
keeps its LAST `max_qa_length` pieces and the article is cut to fill `max_seq_length`.

>>> qa_texts("the cat sat on the _ .", ["mat", "dog", "sun", "roof"])[0]
'the cat sat on the mat .'
>>> qa_texts("where did the cat sit?", ["mat", "dog", "sun", "roof"])[1]
'where did the cat sit? dog'
>>> pack_choice([10, 11, 12, 13], [20, 21, 22], max_seq_length=8, max_qa_length=2, cls_id=2,
...             sep_id=3)
([2, 10, 11, 12, 3, 21, 22, 3], 5)
"""

import dataclasses
import json
import os
from typing import List, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data.task_spec import DataError
from albert_tf.text.normalize import preprocess_text

LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
NUM_CHOICES = 4
LETTERS = "ABCD"
ALL_FILE = "all.txt"


@dataclasses.dataclass
class RaceExamples:
    """One split: one row per question. Articles are stored once (`article_index` points in).

    `labels` is int32 [N] (0-3), or None when no file of the split has answers.
    """

    articles: List[str]
    article_index: np.ndarray
    example_ids: List[str]
    question_index: np.ndarray
    levels: np.ndarray
    questions: List[str]
    options: List[List[str]]
    labels: Optional[np.ndarray]
    source: str

    def __len__(self):
        return len(self.questions)


def qa_texts(question, options):
    """The original's question-option join: the option replaces each "_" of a cloze question,
    otherwise "question option"."""
    if "_" in question:
        return [question.replace("_", option) for option in options]
    return [f"{question} {option}" for option in options]


def pack_choice(article_ids, qa_ids, max_seq_length, max_qa_length, cls_id, sep_id):
    """([CLS] article [SEP] qa [SEP] ids, length of "[CLS] article [SEP]"): the qa keeps its last
    `max_qa_length` ids, the article its first ones that fit."""
    qa_ids = list(qa_ids)[-max_qa_length:]
    article_ids = list(article_ids)[: max_seq_length - 3 - len(qa_ids)]
    return [cls_id] + article_ids + [sep_id] + qa_ids + [sep_id], len(article_ids) + 2


def check_lengths(max_seq_length, max_qa_length):
    """ValueError unless 1 <= max_qa_length <= max_seq_length - 3 (room for the specials)."""
    if not 1 <= max_qa_length <= max_seq_length - 3:
        raise ValueError(
            f"max_qa_length must be in [1, max_seq_length - 3 = {max_seq_length - 3}], "
            f"got {max_qa_length}"
        )


# ----------------------------------------------------------------------------- reading
def file_order_key(name):
    """The order of a level's files: numbered names (``12.txt``) by number, then the others by
    name; also the order of TFDS's `example_id`s without their level prefix."""
    stem = os.path.splitext(os.path.basename(name))[0]
    return (0, int(stem), "") if stem.isdigit() else (1, 0, stem)


def _split_dir(data_dir, split):
    candidates = [os.path.join(data_dir, "RACE", split), os.path.join(data_dir, split)]
    for candidate in candidates:
        if tf.io.gfile.isdir(candidate):
            return candidate
    raise FileNotFoundError(
        f"{candidates[0]}: no such directory (expected the RACE release "
        f"layout <data_dir>/RACE/{{train,dev,test}}/{{middle,high}}/*.txt)"
    )


def _decode(raw, path):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _parse(text, where, line=None):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        position = f"{line}:{e.colno}" if line is not None else f"{e.lineno}:{e.colno}"
        raise DataError(f"{where}:{position}: invalid JSON ({e.msg})") from None


def _strings(record, key, where):
    values = record[key]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DataError(f"{where}: {key!r} must be a list of strings")
    return values


def article_questions(record, where, default_id):
    """[(id, question number, article, question, options, label)] of one JSON article
    ({"article", "questions", "options", "answers" (optional), "id" (else `default_id`)});
    label -1 without answers. DataError names `where` and the question."""
    if not isinstance(record, dict):
        raise DataError(
            f"{where}: expected a JSON object (article, questions, options, "
            f"answers), got {type(record).__name__}"
        )
    for key in ("article", "questions", "options"):
        if key not in record:
            raise DataError(f"{where}: missing key {key!r}; the record has {sorted(record)}")
    article = record["article"]
    if not isinstance(article, str) or not article.strip():
        raise DataError(f"{where}: empty article")
    questions = _strings(record, "questions", where)
    options = record["options"]
    if not isinstance(options, list):
        raise DataError(f"{where}: 'options' must be a list of 4-option lists")
    answers = _strings(record, "answers", where) if "answers" in record else None
    counts = [len(questions), len(options)] + ([len(answers)] if answers is not None else [])
    if len(set(counts)) != 1:
        raise DataError(
            f"{where}: {len(questions)} questions, {len(options)} options lists"
            + (f" and {len(answers)} answers" if answers is not None else "")
            + " (they must match)"
        )
    if not questions:
        raise DataError(f"{where}: no questions")
    example_id = record.get("id", default_id)
    out = []
    for i, question in enumerate(questions):
        number = i + 1
        choices = options[i]
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise DataError(f"{where}: question {number}: options must be a list of strings")
        if len(choices) != NUM_CHOICES:
            raise DataError(
                f"{where}: question {number}: {len(choices)} options, expected {NUM_CHOICES}"
            )
        if not question.strip():
            raise DataError(f"{where}: question {number} is empty")
        label = -1
        if answers is not None:
            if answers[i] not in tuple(LETTERS):
                raise DataError(
                    f"{where}: question {number}: answer {answers[i]!r} is not one "
                    f"of {', '.join(LETTERS)}"
                )
            label = LETTERS.index(answers[i])
        out.append((str(example_id), i, article, question, choices, label))
    return out


def _read_level(directory):
    """([(id, question number, article, question, options, label)], what was read) of one
    level directory."""
    every = tf.io.gfile.glob(os.path.join(directory, "*.txt"))
    combined = [p for p in every if os.path.basename(p) == ALL_FILE]
    examples = []
    if combined:
        path = combined[0]
        with tf.io.gfile.GFile(path, "rb") as f:
            lines = _decode(f.read(), path).splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip():
                examples += article_questions(
                    _parse(line, path, number), f"{path}:{number}", f"{ALL_FILE}:{number}"
                )
        if not examples:
            raise DataError(f"{path}:1: no articles; the file is empty")
        return examples, f"1 file(s) in {directory}"
    if not every:
        raise DataError(f"{directory}: no *.txt files (one JSON article per file)")
    for path in sorted(every, key=file_order_key):
        with tf.io.gfile.GFile(path, "rb") as f:
            record = _parse(_decode(f.read(), path), path)
        examples += article_questions(record, path, os.path.basename(path))
    return examples, f"{len(every)} file(s) in {directory}"


def chosen_levels(split, high_only=False, middle_only=False):
    """The levels a reading of `split` covers, middle school first (ValueError for a bad split
    or both filters)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if high_only and middle_only:
        raise ValueError("high_only and middle_only exclude each other")
    return [
        level
        for level in LEVELS
        if not (high_only and level == "middle") and not (middle_only and level == "high")
    ]


def read_race(data_dir, split, high_only=False, middle_only=False, labelled=True):
    """The questions of `split` ("train", "dev" or "test"): middle school first, then high.

    Raises FileNotFoundError for a missing directory and DataError (naming the file, line or
    question) for bad records. `labelled=False` allows files without "answers".
    """
    levels = chosen_levels(split, high_only, middle_only)
    root = _split_dir(data_dir, split)

    def level_rows(level):
        directory = os.path.join(root, level)
        if not tf.io.gfile.isdir(directory):
            other = "--high_only" if level == "middle" else "--middle_only"
            raise FileNotFoundError(
                f"{directory}: no such directory (to read one level only, use {other})"
            )
        return _read_level(directory)

    return collect_examples(split, levels, level_rows, root, labelled)


def collect_examples(split, levels, level_rows, source, labelled=True):
    """`RaceExamples` of `split` from `level_rows(level)` -> ([(id, question number, article,
    question, options, label)], what was read, for the log) for each of `levels` in order: the
    one assembly of every reader (files, TFDS). `source` names the data in errors and in
    `RaceExamples.source`."""
    articles, article_index, ids, numbers, level_of, questions, options, labels = (
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
    )
    seen = {}
    for level in levels:
        rows, read = level_rows(level)
        for example_id, number, article, question, choices, label in rows:
            key = (level, example_id, article)
            if key not in seen:
                seen[key] = len(articles)
                articles.append(article)
            article_index.append(seen[key])
            ids.append(example_id)
            numbers.append(number)
            level_of.append(level)
            questions.append(question)
            options.append(choices)
            labels.append(label)
        logging.info(
            "RACE %s/%s: %d questions on %d articles from %s",
            split,
            level,
            len(rows),
            len({(r[0], r[2]) for r in rows}),
            read,
        )
    labels = np.asarray(labels, np.int32)
    missing = int(np.sum(labels < 0))
    if labelled and missing:
        first = ids[int(np.argmax(labels < 0))]
        raise DataError(
            f"{source}: article {first!r} has no 'answers' ({missing} questions of the "
            f"{split} split have none)"
        )
    if missing and missing != len(labels):
        raise DataError(
            f"{source}: {missing} of {len(labels)} questions have no answers; give "
            "answers for all or none"
        )
    return RaceExamples(
        articles,
        np.asarray(article_index, np.int64),
        ids,
        np.asarray(numbers, np.int32),
        np.asarray(level_of),
        questions,
        options,
        None if missing else labels,
        source,
    )


# ----------------------------------------------------------------------------- inputs
@dataclasses.dataclass
class PackedChoices:
    """Compact model inputs of a split: `word_ids` [N, 4, S] (uint16 when the vocabulary fits,
    else int32) and `segment_lengths` int32 [N, 4, 2] = (len("[CLS] article [SEP]"), total);
    `model_inputs` expands them. Counts of the truncated articles and qas are for the logs."""

    word_ids: np.ndarray
    segment_lengths: np.ndarray
    truncated_articles: int
    truncated_qas: int

    def inputs(self):
        return {"word_ids": self.word_ids, "segment_lengths": self.segment_lengths}


def build_inputs(examples, tokenizer, max_seq_length, max_qa_length=128):
    """`PackedChoices` of `examples` with a `SentencePieceTokenizer` (its `lower_case` applies).

    >>> tokenizer = SentencePieceTokenizer("30k-clean.model")  # doctest: +SKIP
    >>> packed = build_inputs(examples, tokenizer, 512)  # doctest: +SKIP
    >>> packed.word_ids.shape  # doctest: +SKIP
    (4887, 4, 512)
    """
    check_lengths(max_seq_length, max_qa_length)
    lower = tokenizer.lower_case
    dtype = np.uint16 if tokenizer.vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    n = len(examples)
    word_ids = np.full([n, NUM_CHOICES, max_seq_length], tokenizer.pad_id, dtype)
    lengths = np.zeros([n, NUM_CHOICES, 2], np.int32)
    article_ids = {}
    truncated_articles = truncated_qas = 0
    for row in range(n):
        index = int(examples.article_index[row])
        if index not in article_ids:
            article_ids[index] = tokenizer.encode_ids(
                preprocess_text(examples.articles[index], lower=lower)
            )
        article = article_ids[index]
        question = preprocess_text(examples.questions[row], lower=lower)
        options = [preprocess_text(option, lower=lower) for option in examples.options[row]]
        for choice, qa in enumerate(qa_texts(question, options)):
            qa_ids = tokenizer.encode_ids(qa)
            ids, first = pack_choice(
                article, qa_ids, max_seq_length, max_qa_length, tokenizer.cls_id, tokenizer.sep_id
            )
            truncated_qas += len(qa_ids) > max_qa_length
            truncated_articles += first - 2 < len(article)
            word_ids[row, choice, : len(ids)] = ids
            lengths[row, choice] = (first, len(ids))
    return PackedChoices(word_ids, lengths, truncated_articles, truncated_qas)


def model_inputs(batch):
    """{"word_ids", "segment_lengths"} (a `PackedChoices` batch) -> the model's int32
    {input_word_ids, input_mask, input_type_ids} [B, 4, S] (a tf.data map function).

    >>> out = model_inputs({"word_ids": np.array([[[2, 9, 3, 7, 3, 0]]], np.uint16),
    ...                     "segment_lengths": np.array([[[3, 5]]], np.int32)})
    >>> out["input_mask"].numpy().tolist(), out["input_type_ids"].numpy().tolist()
    ([[[1, 1, 1, 1, 1, 0]]], [[[0, 0, 0, 1, 1, 0]]])
    """
    word_ids = tf.cast(batch["word_ids"], tf.int32)
    lengths = tf.cast(batch["segment_lengths"], tf.int32)
    positions = tf.range(tf.shape(word_ids)[-1], dtype=tf.int32)
    mask = positions < lengths[..., 1:]
    second = (positions >= lengths[..., :1]) & mask
    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.cast(second, tf.int32),
    }
