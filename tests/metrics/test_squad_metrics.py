"""The official SQuAD v1.1 / v2.0 scores, pinned on hand-computed cases."""

import pytest

from albert_tf.data.squad_examples import SquadExample
from albert_tf.metrics import squad_metrics as m


def test_normalize_answer():
    assert m.normalize_answer("The Eiffel Tower.") == "eiffel tower"
    assert m.normalize_answer("  A  cat,\tAN owl; the\nend!  ") == "cat owl end"
    # Articles only as whole words; punctuation goes before articles are matched.
    assert m.normalize_answer("theory of an-the") == "theory of anthe"
    assert m.normalize_answer("Crème brûlée") == "crème brûlée"
    assert m.normalize_answer("a the an ...") == ""


def test_exact_match_and_f1_hand_computed():
    assert m.exact_match("the Nile", ["Nile", "River Nile"]) == 1
    assert m.exact_match("Nile river", ["Nile"]) == 0
    # pred "in north eastern africa" (4 words) vs gold "north eastern africa" (3 words):
    # common 3, P = 3/4, R = 3/3, F1 = 2 * 0.75 * 1 / 1.75 = 6/7.
    assert m.f1("in north eastern Africa", ["north eastern Africa"]) == pytest.approx(6 / 7)
    # Repeated words count as often as both sides have them: pred "paris paris" vs gold
    # "paris": common 1, P = 1/2, R = 1, F1 = 2/3.
    assert m.f1("Paris Paris", ["Paris"]) == pytest.approx(2 / 3)
    # Max over gold answers: vs "1887" 0; vs "1887 and 1889" common 1, P = 1, R = 1/3,
    # F1 = 2 * (1/3) / (4/3) = 0.5.
    assert m.f1("1889", ["1887", "1887 and 1889"]) == pytest.approx(0.5)
    # v1.1: an empty side scores 0, even against empty; v2.0: 1 if both are empty.
    assert m.f1("", [""]) == 0 and m.f1("", [""], empty_matches_empty=True) == 1
    assert m.f1("the", ["a"], empty_matches_empty=True) == 1  # both normalise to ""
    assert m.f1("Paris", [""], empty_matches_empty=True) == 0


def test_squad_v1_scores():
    gold = {
        "q1": ["Paris", "in Paris"],
        "q2": ["north eastern Africa"],
        "q3": ["1889"],
        "q4": ["Gustave Eiffel"],
    }
    predictions = {
        "q1": "the Paris",
        "q2": "in north eastern Africa",
        "q3": "1887",
        "extra": "ignored",
    }  # q4 has no prediction: scores 0
    # EM: q1 1, others 0 -> 1/4 = 25%. F1: q1 1 + q2 6/7 + q3 0 + q4 0 -> (13/7)/4.
    scores = m.squad_v1_scores(gold, predictions)
    assert scores == {"exact_match": pytest.approx(25.0), "f1": pytest.approx(100 * 13 / 7 / 4)}
    examples = [SquadExample(q, "?", "ctx", gold_answers=g) for q, g in gold.items()]
    assert m.squad_v1_scores(examples, predictions) == scores
    with pytest.raises(ValueError, match="no gold questions"):
        m.squad_v1_scores({}, {})


# Gold of the v2.0 cases: two answerable, two unanswerable questions.
V2_GOLD = {"a1": ["Paris"], "a2": ["north eastern Africa"], "n1": [], "n2": ["  . "]}
V2_PREDICTIONS = {"a1": "Paris", "a2": "eastern Africa", "n1": "", "n2": "1930"}


def test_squad_v2_scores_without_no_answer_probabilities():
    # a1: EM 1, F1 1. a2: EM 0, F1: common 2, P = 2/2, R = 2/3 -> 0.8. n1: "" vs [""] -> 1, 1.
    # n2: its only gold normalises to "", so it is unanswerable; "1930" -> 0, 0.
    scores = m.squad_v2_scores(V2_GOLD, V2_PREDICTIONS)
    assert scores == {
        "exact": pytest.approx(100 * 2 / 4),
        "f1": pytest.approx(100 * 2.8 / 4),
        "total": 4,
        "HasAns_exact": pytest.approx(50.0),
        "HasAns_f1": pytest.approx(90.0),
        "HasAns_total": 2,
        "NoAns_exact": pytest.approx(50.0),
        "NoAns_f1": pytest.approx(50.0),
        "NoAns_total": 2,
    }


def test_squad_v2_scores_with_threshold_and_best_threshold_search():
    na_probs = {"a1": 0.1, "a2": 0.6, "n1": 0.3, "n2": 0.9}
    # With the default threshold 1.0 nothing changes: the same exact/f1 as above.
    scores = m.squad_v2_scores(V2_GOLD, V2_PREDICTIONS, na_probs)
    assert scores["exact"] == pytest.approx(50.0) and scores["f1"] == pytest.approx(70.0)
    # Threshold 0.5: a2 (0.6) and n2 (0.9) count as "no answer": a2 -> 0, 0; n2 -> 1, 1.
    # exact = a1 1 + a2 0 + n1 1 + n2 1 = 3 -> 75%; f1 = 1 + 0 + 1 + 1 = 3 -> 75%.
    low = m.squad_v2_scores(V2_GOLD, V2_PREDICTIONS, na_probs, na_prob_thresh=0.5)
    assert low["exact"] == pytest.approx(75.0) and low["f1"] == pytest.approx(75.0)
    assert low["HasAns_exact"] == pytest.approx(50.0) and low["NoAns_exact"] == 100.0
    # Search, in increasing na_prob: start at 2 (the no-answer questions), threshold 0.0.
    # exact: a1 (0.1) +1 -> 3, best, thresh 0.1; n1 (0.3) pred "" +0 -> 3; a2 (0.6) +0 -> 3;
    #        n2 (0.9) pred "1930" -1 -> 2. best 3/4 = 75% at 0.1.
    # f1:    a1 +1 -> 3 (thresh 0.1); n1 +0; a2 +0.8 -> 3.8, best, thresh 0.6; n2 -1 -> 2.8.
    #        best 3.8/4 = 95% at 0.6.
    assert scores["best_exact"] == pytest.approx(75.0) and scores["best_exact_thresh"] == 0.1
    assert scores["best_f1"] == pytest.approx(95.0) and scores["best_f1_thresh"] == 0.6


def test_squad_v2_scores_missing_predictions_and_examples():
    examples = [
        SquadExample("a1", "?", "c", gold_answers=["Paris"]),
        SquadExample("n1", "?", "c", is_impossible=True),
        SquadExample("a3", "?", "c", gold_answers=["Nile"]),
    ]
    # a3 has no prediction: left out of every total (the official script skips it).
    scores = m.squad_v2_scores(examples, {"a1": "paris", "n1": "Lyon"})
    assert scores["total"] == 2 and scores["exact"] == pytest.approx(50.0)
    assert scores["HasAns_total"] == 1 and scores["NoAns_exact"] == 0.0
    assert "best_f1" not in scores  # only with no-answer probabilities
    only_answerable = m.squad_v2_scores({"a1": ["Paris"]}, {"a1": "Paris"})
    assert "NoAns_total" not in only_answerable and only_answerable["HasAns_total"] == 1
    with pytest.raises(ValueError, match="no score for 1 predicted"):
        m.squad_v2_scores({"a1": ["Paris"]}, {"a1": "Paris"}, na_probs={})
    with pytest.raises(ValueError, match="no predictions"):
        m.squad_v2_scores({"a1": ["Paris"]}, {})
