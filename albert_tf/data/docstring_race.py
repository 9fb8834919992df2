"""A built-in offline multiple-choice set in the RACE layout: which code fills the blank.

Articles are docstring paragraphs of the installed packages (the "builtin:docstrings" corpus)
with the backticks dropped, as in `albert_tf.data.docstring_qa`. A question is one of the
article's sentences with a marked code span replaced by "_" (RACE's cloze blank: `read_race`
and the model put each option in its place, so a question keeps no other "_"). Its four options
are the span and three distractors that fit the blank as well as we can make them, and do not
give a sentence of the article; in order of preference:

1. other code spans of the article (same kind first: LIT, API, ARG or CODE as
   `docstring_entities.span_type` says);
2. other words of the article, as many as the span has (`split_words`), of its kind first;
3. code spans of its kind from other articles of the same split.

A distractor never occurs in the question itself, so "the option that is not in the question"
does not help, and the first two kinds occur in the article like the answer does, so "the option
found in the article" does not either (`race_baselines` measures these heuristics). What does
solve it is reading: the right option gives back a sentence of the article.

Splits are by a hash of the article's first sentence (not by `seed`): an article is in the same
split for every `max_articles`, and articles sharing a first sentence (the packages repeat
docstrings) share a split. Dev and test questions whose sentence also occurs in a training
article (the packages share boilerplate sentences) are dropped. The level is "middle" for
articles of at most `high_min_words` words, "high" for longer ones. The answer letters are
balanced: each run of four questions of a split uses A, B, C and D once each, in a seeded
random order.

>>> article, questions = article_questions(["Returns `True` if `x` is 1.", "See `np.sum`."])
>>> article
'Returns True if x is 1. See np.sum.'
>>> for q in questions:
...     print(q.question, q.answer, q.kind, sep=" | ")
Returns _ if x is 1. | True | LIT
Returns True if _ is 1. | x | ARG
See _. | np.sum | API
"""

import dataclasses
import hashlib
import json
import os
import re
import shutil

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.data.docstring_entities import span_type, split_words
from albert_tf.data.docstring_qa import BLANK as QA_BLANK
from albert_tf.data.docstring_qa import paragraph_questions

BLANK = "_"
LETTERS = "ABCD"
SPLITS = ("train", "dev", "test")
_MARK = re.compile(r"``|`")
# Words too common to be a fair distractor ("the" for a blanked `axis`).
_FUNCTION_WORDS = frozenset(
    """a an the of to in on at by for from with as is are be was were been it its this that these
    those and or not no if then else when where which who whose what how than so but can may must
    should will would do does did has have had into over under each all any one only also such
    see e g i ie eg""".split()
)


@dataclasses.dataclass(frozen=True)
class Question:
    question: str  # the sentence with the span replaced by BLANK
    answer: str
    kind: str  # span_type of the answer
    sentence: int  # index of the sentence in the article


def _plain(sentence):
    return "".join(_MARK.split(sentence))


def _words(text):
    return [w.lower() for w, _, _ in split_words(text)]


def _contains(text_words, words):
    n = len(words)
    return any(text_words[i : i + n] == words for i in range(len(text_words) - n + 1))


def article_questions(sentences, max_questions_per_sentence=2):
    """(article, [Question]) of a paragraph given as backtick-marked sentences: the questions of
    `docstring_qa.paragraph_questions` whose sentence has no other "_" than the blank."""
    article, qa = paragraph_questions(sentences, max_questions_per_sentence)
    starts, offset = [], 0
    for sentence in sentences:
        starts.append(offset)
        offset += len(_plain(sentence)) + 1
    questions = []
    for question, answer, start in qa:
        before, after = question.split(QA_BLANK, 1)
        if "_" in before or "_" in after:
            continue
        sentence = max(i for i, s in enumerate(starts) if s <= start)
        questions.append(Question(before + BLANK + after, answer, span_type(answer), sentence))
    return article, questions


def _code_spans(sentences):
    spans = []
    for sentence in sentences:
        parts = _MARK.split(sentence)
        if len(parts) % 2 == 1:
            spans += [p.strip() for p in parts[1::2] if p.strip()]
    return spans


_EDGE_PUNCTUATION = ".,;:!?\"'"


def _trim(run):
    """A run of article words without the punctuation at its ends (brackets only when they
    do not pair up within it)."""
    while True:
        before = run
        run = run.strip(_EDGE_PUNCTUATION)
        if run.count("(") != run.count(")"):
            run = run.strip("()")
        if run.count("[") != run.count("]"):
            run = run.strip("[]")
        if run == before:
            return run


def _article_runs(sentences, n):
    """Runs of `n` whitespace-separated words of one sentence (ends trimmed by `_trim`)."""
    out = []
    for sentence in sentences:
        words = _plain(sentence).split()
        for i in range(len(words) - n + 1):
            run = _trim(" ".join(words[i : i + n]))
            if run:
                out.append(run)
    return out


def _distractors(question, article, sentences, pools, rng):
    """Three distractors for `question` (fewer if no candidate passes), by the module's
    preference order; `pools` maps a kind to code spans of other articles."""
    answer_words = _words(question.answer)
    question_words = _words(question.question)
    article_lower = article.lower()
    chosen, chosen_keys = [], {tuple(answer_words)}

    def take(candidates):
        candidates = list(dict.fromkeys(candidates))
        for index in rng.permutation(len(candidates)):
            if len(chosen) == 3:
                return
            candidate = candidates[index]
            words = _words(candidate)
            key = tuple(words)
            if not words or key in chosen_keys or _contains(question_words, words):
                continue
            if all(w in _FUNCTION_WORDS or not w.isalnum() for w in words):
                continue
            if question.question.replace(BLANK, candidate).lower() in article_lower:
                continue  # it would fill the blank as well as the answer
            chosen.append(candidate)
            chosen_keys.add(key)

    spans = _code_spans(sentences)
    take([s for s in spans if span_type(s) == question.kind])
    take(spans)
    ngrams = _article_runs(sentences, len(question.answer.split()))
    take([g for g in ngrams if span_type(g) == question.kind])
    take(ngrams)
    take(pools.get(question.kind, ()))
    return chosen


def _bucket(text):
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % 100


def split_of(first_sentence, dev_percent=15, test_percent=15):
    """The split ("train", "dev", "test") of an article with this first sentence."""
    bucket = _bucket(first_sentence)
    if bucket < dev_percent:
        return "dev"
    if bucket < dev_percent + test_percent:
        return "test"
    return "train"


def docstring_race(
    max_articles=2000,
    seed=0,
    max_sentences=4,
    min_sentences=2,
    max_article_chars=400,
    max_questions=4,
    high_min_words=45,
    dev_percent=15,
    test_percent=15,
    packages=("tensorflow", "keras", "numpy"),
    cache_dir=None,
):
    """{split: [RACE record with an extra "level" key]} from the built-in docstrings corpus:
    up to `max_articles` articles (all splits together, corpus order) of `min_sentences` to
    `max_sentences` leading sentences of a document, at most `max_article_chars` characters.
    """
    from albert_tf.data.corpora import iter_documents  # the corpus scraper imports the packages

    rng = np.random.default_rng(seed)
    articles = {split: [] for split in SPLITS}  # (article, sentences, [Question])
    seen, total = set(), 0
    for document in iter_documents("builtin:docstrings", packages=packages, cache_dir=cache_dir):
        sentences = list(document[:max_sentences])
        while len(sentences) > min_sentences and len(" ".join(sentences)) > max_article_chars:
            sentences.pop()
        if len(sentences) < min_sentences or len(" ".join(sentences)) > max_article_chars:
            continue
        article, questions = article_questions(sentences)
        if not questions or article in seen:
            continue
        seen.add(article)
        first = _plain(sentences[0])
        articles[split_of(first, dev_percent, test_percent)].append(
            (article, sentences, questions[:max_questions])
        )
        total += 1
        if total >= max_articles:
            break
    train_text = "\n".join(article.lower() for article, _, _ in articles["train"])
    out = {}
    for split in SPLITS:
        pools = {}
        for _, _, questions in articles[split]:
            for q in questions:
                pools.setdefault(q.kind, []).append(q.answer)
        records, letters = [], []
        for article, sentences, questions in articles[split]:
            record = {"article": article, "questions": [], "options": [], "answers": []}
            for q in questions:
                sentence = q.question.replace(BLANK, q.answer).lower()
                if split != "train" and sentence in train_text:
                    continue
                distractors = _distractors(q, article, sentences, pools, rng)
                if len(distractors) < 3:
                    continue
                if not letters:
                    letters = list(rng.permutation(4))
                position = int(letters.pop())
                options = [distractors[i] for i in rng.permutation(3)]
                options.insert(position, q.answer)
                record["questions"].append(q.question)
                record["options"].append(options)
                record["answers"].append(LETTERS[position])
            if record["questions"]:
                record["level"] = "high" if len(article.split()) > high_min_words else "middle"
                records.append(record)
        out[split] = records
    return out


def _write_tree(root, dataset):
    import tensorflow as tf

    counts = {}
    for split, records in dataset.items():
        numbers = {"middle": 0, "high": 0}
        for record in records:
            level = record["level"]
            numbers[level] += 1
            name = f"{numbers[level]}.txt"
            values = {k: v for k, v in record.items() if k != "level"}
            values["id"] = f"{level}{name}"
            directory = os.path.join(root, split, level)
            tf.io.gfile.makedirs(directory)
            with tf.io.gfile.GFile(os.path.join(directory, name), "w") as f:
                f.write(json.dumps(values, ensure_ascii=False))
        for level, number in numbers.items():
            if not number:
                raise ValueError(
                    f"the {split} split has no {level} article (read_race needs both levels): "
                    "raise max_articles"
                )
        counts[split] = {
            "articles": len(records),
            "questions": sum(len(r["questions"]) for r in records),
            **numbers,
        }
    return counts


def _publish(staging, directory):
    """Renames the staged tree to `directory`, replacing an earlier set written here."""
    import tensorflow as tf

    if not tf.io.gfile.exists(directory):
        tf.io.gfile.rename(staging, directory)
        return
    other = sorted(
        n.rstrip("/")
        for n in tf.io.gfile.listdir(directory)
        if n.rstrip("/") not in SPLITS and not n.startswith(files.TEMPORARY_PREFIX)
    )
    if other or not tf.io.gfile.isdir(directory):
        raise FileExistsError(
            f"{directory} exists and holds more than a RACE layout ({', '.join(other[:5])}); "
            "write to a new directory"
        )
    if "://" not in directory and files.exchange_paths(staging, directory):
        aside = staging
    else:
        aside = files.temporary_path(directory)
        tf.io.gfile.rename(directory, aside)
        try:
            tf.io.gfile.rename(staging, directory)
        except BaseException:
            tf.io.gfile.rename(aside, directory)
            raise
    tf.io.gfile.rmtree(aside)


def write_docstring_race(directory, max_articles=2000, seed=0, **options):
    """Writes `docstring_race(max_articles, seed, **options)` as
    `directory/{train,dev,test}/{middle,high}/<n>.txt` (`read_race(directory, split)` and
    `run_race.py --data_dir=directory` read it) and returns
    {split: {"articles", "questions", "middle", "high"}}.

    The tree is written under a hidden name beside `directory` and renamed into place (an
    earlier set there is swapped out), so a failed or killed run leaves no half-written
    `directory`. On a local disk the rename is atomic; on an object store (gs://) it copies
    file by file, so a crash there can leave a partial tree under the hidden name only.
    """
    import tensorflow as tf

    dataset = docstring_race(max_articles=max_articles, seed=seed, **options)
    directory = directory.rstrip("/") or directory
    parent = os.path.dirname(directory)
    if parent:
        tf.io.gfile.makedirs(parent)
    files.remove_stale_temporaries(directory)
    staging = files.temporary_path(directory)
    try:
        counts = _write_tree(staging, dataset)
        _publish(staging, directory)
    except BaseException:
        if tf.io.gfile.exists(staging):
            if "://" in staging:
                tf.io.gfile.rmtree(staging)
            else:
                shutil.rmtree(staging, ignore_errors=True)
        raise
    for split, count in counts.items():
        logging.info("docstring RACE %s: %s", split, count)
    return counts


# ----------------------------------------------------------------------------- baselines
def _overlap(option, article_words):
    words = [w for w in _words(option) if w.isalnum()]
    return sum(w in article_words for w in words)


def _pick(scores, label):
    """Expected accuracy of taking the best score, ties broken uniformly."""
    scores = np.asarray(scores, np.float64)
    best = np.flatnonzero(scores == scores.max())
    return float(label in best) / len(best)


def _code_likeness(option):
    """How much an option looks like code: its characters other than letters, digits and
    spaces, plus one for a kind other than a plain word."""
    return sum(not (c.isalnum() or c.isspace()) for c in option) + (
        span_type(option) != "ARG" or not option.isalpha()
    )


def race_baselines(examples, train_labels=None):
    """Accuracies of simple heuristics on `RaceExamples`, ties broken uniformly at random (as
    an expectation): "chance"; "most_frequent_letter" (the most frequent answer of
    `train_labels`, else of `examples`); the option with the most ("word_overlap") or fewest
    ("least_word_overlap") words in the article; the longest and shortest option; the option
    that looks most like code ("most_code_like"); the option absent from the question
    ("not_in_question"); the option that makes the question a sentence of the article
    ("fills_article_sentence": what reading the article finds).
    """
    from albert_tf.data.race import qa_texts

    labels = np.asarray(examples.labels)
    reference = labels if train_labels is None else np.asarray(train_labels)
    letter = int(np.bincount(reference, minlength=4).argmax())
    names = (
        "word_overlap",
        "least_word_overlap",
        "longest_option",
        "shortest_option",
        "most_code_like",
        "not_in_question",
        "fills_article_sentence",
    )
    totals = dict.fromkeys(names, 0.0)
    for row, label in enumerate(labels):
        article = examples.articles[int(examples.article_index[row])]
        article_words = set(_words(article))
        options = examples.options[row]
        question = examples.questions[row]
        question_words = _words(question)
        overlap = [_overlap(o, article_words) for o in options]
        totals["word_overlap"] += _pick(overlap, label)
        totals["least_word_overlap"] += _pick([-x for x in overlap], label)
        totals["longest_option"] += _pick([len(o) for o in options], label)
        totals["shortest_option"] += _pick([-len(o) for o in options], label)
        totals["most_code_like"] += _pick([_code_likeness(o) for o in options], label)
        totals["not_in_question"] += _pick(
            [not _contains(question_words, _words(o)) for o in options], label
        )
        filled = [t.lower() in article.lower() for t in qa_texts(question, options)]
        totals["fills_article_sentence"] += _pick(filled, label)
    n = max(len(labels), 1)
    return {
        "questions": len(labels),
        "chance": 0.25,
        "most_frequent_letter": float(np.mean(labels == letter)) if len(labels) else 0.0,
        **{name: total / n for name, total in totals.items()},
    }


def docstring_race_baselines(directory, split="dev"):
    """`race_baselines` of `split` of a set written by `write_docstring_race` (the most
    frequent letter taken from the training split)."""
    from albert_tf.data.race import read_race

    train = read_race(directory, "train")
    return race_baselines(read_race(directory, split), train_labels=train.labels)
