"""The built-in multiple-choice set (albert_tf.data.docstring_race): read back by read_race,
balanced answer letters, splits without shared articles, the right option restoring the
sentence, determinism, atomic writing and the baselines staying far from the reading answer."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import docstring_race
from albert_tf.data.race import LETTERS, SPLITS, qa_texts, read_race

MAX_ARTICLES = 250


def _tree(directory):
    """{relative path: text} of every file under `directory`."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                out[os.path.relpath(path, directory)] = f.read()
    return out


@pytest.fixture(scope="module")
def race_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("docstring_race") / "race")
    counts = docstring_race.write_docstring_race(directory, max_articles=MAX_ARTICLES)
    return directory, counts


@pytest.fixture(scope="module")
def splits(race_dir):
    return {split: read_race(race_dir[0], split) for split in SPLITS}


def test_read_back_by_read_race(race_dir, splits):
    directory, counts = race_dir
    assert sorted(os.listdir(directory)) == sorted(SPLITS)
    for split, examples in splits.items():
        count = counts[split]
        assert len(examples) == count["questions"] > 0
        assert len(examples.articles) == count["articles"] == count["middle"] + count["high"]
        assert set(examples.levels) == {"middle", "high"}
        for options in examples.options:
            assert len(options) == 4 and len({o.lower() for o in options}) == 4
    assert 0.9 * MAX_ARTICLES <= sum(c["articles"] for c in counts.values()) <= MAX_ARTICLES


def test_answer_letters_balanced(splits):
    for examples in splits.values():
        counts = np.bincount(examples.labels, minlength=4)
        assert counts.max() - counts.min() <= 1, counts  # runs of four use each letter once
    assert sum(len(e) for e in splits.values()) >= 300


def test_no_article_or_question_sentence_shared_with_train(splits):
    train_articles = set(splits["train"].articles)
    train_text = " ".join(splits["train"].articles).lower()
    for split in ("dev", "test"):
        examples = splits[split]
        assert not train_articles & set(examples.articles)
        for row, question in enumerate(examples.questions):
            sentence = qa_texts(question, examples.options[row])[examples.labels[row]]
            assert sentence.lower() not in train_text
    assert not set(splits["dev"].articles) & set(splits["test"].articles)


def test_right_option_restores_the_sentence(splits):
    for examples in splits.values():
        for row, question in enumerate(examples.questions):
            assert question.count("_") == 1
            article = examples.articles[examples.article_index[row]].lower()
            filled = [t.lower() in article for t in qa_texts(question, examples.options[row])]
            assert filled == [i == examples.labels[row] for i in range(4)], question


def test_distractors_mostly_from_the_article(splits):
    examples = splits["train"]
    inside = [
        option.lower() in examples.articles[examples.article_index[row]].lower()
        for row, options in enumerate(examples.options)
        for i, option in enumerate(options)
        if i != examples.labels[row]
    ]
    assert np.mean(inside) > 0.8


def test_baselines_far_below_reading(splits):
    scores = docstring_race.race_baselines(splits["train"])
    assert scores["questions"] == len(splits["train"])
    assert scores["fills_article_sentence"] == 1.0
    for name, value in scores.items():
        if name not in ("questions", "chance", "fills_article_sentence"):
            assert value < 0.6, (name, value)


def test_deterministic_for_a_seed(race_dir, tmp_path):
    directory, _ = race_dir
    again = str(tmp_path / "again")
    docstring_race.write_docstring_race(again, max_articles=MAX_ARTICLES)
    assert _tree(again) == _tree(directory)
    other = str(tmp_path / "other")
    docstring_race.write_docstring_race(other, max_articles=MAX_ARTICLES, seed=1)
    first, second = read_race(directory, "dev"), read_race(other, "dev")
    assert first.articles == second.articles and first.questions == second.questions
    assert first.options != second.options


def test_split_is_a_hash_of_the_first_sentence():
    assert docstring_race.split_of("Returns the sum.") == docstring_race.split_of(
        "Returns the sum."
    )
    chosen = [docstring_race.split_of(f"Sentence number {i}.") for i in range(2000)]
    fractions = {s: chosen.count(s) / len(chosen) for s in SPLITS}
    assert 0.1 < fractions["dev"] < 0.2 and 0.1 < fractions["test"] < 0.2


def test_atomic_write(tmp_path, monkeypatch):
    directory = str(tmp_path / "race")
    real_open = tf.io.gfile.GFile
    written = []

    def failing_open(path, mode="r"):
        if "w" in mode:
            written.append(path)
            if len(written) == 20:
                raise OSError("No space left on device")
        return real_open(path, mode)

    monkeypatch.setattr(tf.io.gfile, "GFile", failing_open)
    with pytest.raises(OSError, match="No space"):
        docstring_race.write_docstring_race(directory, max_articles=60)
    assert os.listdir(tmp_path) == []  # neither the directory nor its staging copy
    monkeypatch.undo()

    counts = docstring_race.write_docstring_race(directory, max_articles=60)
    before = _tree(directory)
    assert docstring_race.write_docstring_race(directory, max_articles=60, seed=1) == counts
    assert _tree(directory) != before and os.listdir(tmp_path) == ["race"]  # replaced whole

    with open(os.path.join(directory, "notes.txt"), "w") as f:
        f.write("mine")
    with pytest.raises(FileExistsError, match="more than a RACE layout"):
        docstring_race.write_docstring_race(directory, max_articles=60)
    assert os.path.exists(os.path.join(directory, "notes.txt"))


def test_letters_constant():
    assert docstring_race.LETTERS == LETTERS
