"""The word convention a tagger serves, decided from its training words (pure Python)."""

import logging

import pytest

from albert_tf.data import word_convention

# Tokens that hold punctuation, as technical and news CoNLL data has them.
HOLDING = [
    ["Press", "CTRL-W", "or", "<Esc>", "to", "close", "the", "window", "."],
    ["The", "U.S.", "team", "won", "1-0", "."],
    ["Send", "an", "e-mail", "to", "http://x.org/a?b=1", "."],
]
# CoNLL-like tokens: punctuation split off, one character a word.
SPLIT = [
    ["Paris", ",", "the", "capital", "(", "of", "France", ")", "."],
    ["Grüße", "aus", "Köln", "—", "sagt", "Jürgen", "!"],
    ["東京", "is", "big", "."],
]


def test_the_rule_on_hand_made_sentences(caplog):
    caplog.set_level(logging.INFO, logger="absl")
    holding = word_convention.decide(HOLDING)
    assert holding["convention"] == "whitespace" and holding["chosen_by"] == "training data"
    assert holding["words"] == 21
    assert holding["punctuation_reproduces"] == pytest.approx(15 / 21)
    assert set(holding["examples"]) == {"CTRL-W", "<Esc>", "U.S.", "1-0", "e-mail"}
    assert "warning" not in holding
    line = next(r.getMessage() for r in caplog.records if "word convention" in r.getMessage())
    assert line.startswith("word convention: whitespace (training data; the punctuation split ")
    assert "reproduces 71.4% of 21 training words: tokens such as 'CTRL-W'" in line
    split = word_convention.decide(SPLIT)
    assert split["convention"] == "punctuation" and split["punctuation_reproduces"] == 1.0
    # Measured per word: one holding token in 100 words is 99%, still "punctuation".
    many = [["word"] * 99 + ["U.S."]]
    assert word_convention.decide(many)["convention"] == "punctuation"
    assert word_convention.decide([["word"] * 98 + ["U.S.", "e-mail"]])["convention"] == (
        "whitespace"
    )
    assert word_convention.decide([])["convention"] == "punctuation"  # nothing to measure


def test_overrides_and_old_records(caplog):
    forced = word_convention.decide(HOLDING, "punctuation")
    assert forced["convention"] == "punctuation" and forced["chosen_by"] == "--word_split"
    assert "--word_split=punctuation contradicts the training data" in forced["warning"]
    assert "reproduces 71.4% of 21 training words" in forced["warning"]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [forced["warning"]]
    agreeing = word_convention.decide(HOLDING, "whitespace")
    assert agreeing["convention"] == "whitespace" and "warning" not in agreeing
    assert "contradicts" in word_convention.decide(SPLIT, "whitespace")["warning"]
    # A description written before the convention existed served "punctuation".
    assert word_convention.recorded({"labels": ["O"]})["convention"] == "punctuation"
    assert word_convention.measured_part(word_convention.recorded({})) is None
    again = word_convention.choose(word_convention.measured_part(forced), "auto")
    assert again["convention"] == "whitespace"
    with pytest.raises(ValueError, match="word_split must be one of auto, whitespace"):
        word_convention.decide(SPLIT, "bogus")


def test_the_python_split_is_the_graphs():
    import tensorflow as tf

    from albert_tf.text.graph_words import split_words

    texts = [" ".join(s) for s in HOLDING + SPLIT] + ["a\u00a0b\tc.d ", "", "x\u3000y"]
    for convention in word_convention.CONVENTIONS:
        graph = split_words(tf.constant(texts), convention)
        for i, text in enumerate(texts):
            words = word_convention.split(text, convention)
            assert [w for w, _, _ in words] == [w.decode() for w in graph["words"][i].numpy()]
            assert [s for _, s, _ in words] == graph["start"][i].numpy().tolist()
