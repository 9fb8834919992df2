"""SQuAD post-processing against the original ALBERT's write_predictions_v1/v2, on the outputs
recorded in fixtures/squad_original.json (written by fixtures/generate_squad_fixtures.py from
the original code). Equal everywhere but the three documented differences (docs/finetune.md,
"Differences from the original"): a best span of whitespace only, no valid span, and null odds
equal to the threshold."""

import json
import os

import numpy as np
import pytest

from albert_tf.data.squad_examples import SquadExample
from albert_tf.data.squad_features import SquadFeatures
from albert_tf.finetune.squad_predictions import (
    EMPTY_SCORE,
    apply_null_threshold,
    v1_predictions,
    v2_predictions,
)

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "squad_original.json")


@pytest.fixture(scope="module")
def fixture():
    with open(FIXTURE) as f:
        return json.load(f)


def _inputs(case):
    examples = [SquadExample(e["qas_id"], "?", e["context"]) for e in case["examples"]]
    windows = case["windows"]

    def rows(name, dtype=np.int32):
        return np.array([w[name] for w in windows], dtype)

    p_mask = rows("p_mask")
    zeros = np.zeros(len(windows), np.int32)
    features = SquadFeatures(
        np.zeros_like(p_mask),
        np.ones_like(p_mask),
        np.zeros_like(p_mask),
        p_mask,
        rows("token_is_max_context", bool),
        rows("piece_start_char"),
        rows("piece_end_char"),
        zeros,
        zeros,
        zeros,
        rows("example_index"),
    )
    return examples, features, windows


def _assert_same_entries(ours, original, score_names):
    assert [e["text"] for e in ours] == [e["text"] for e in original]
    for mine, theirs in zip(ours, original):
        assert mine[score_names[0]] == theirs["start_log_prob"]
        assert mine[score_names[1]] == theirs["end_log_prob"]
        assert mine["probability"] == pytest.approx(theirs["probability"], rel=1e-12)


def _assert_whitespace_skipped(ours, original, score_names):
    """Ours is the original's list without its "" entry (from the whitespace-only span), the
    probabilities renormalised over the rest; ours may hold one more entry after them."""
    assert original[0]["text"] == ""
    rest = original[1:]
    remaining = sum(e["probability"] for e in rest)
    expected = [dict(e, probability=e["probability"] / remaining) for e in rest]
    assert ours[0]["text"] == rest[0]["text"] != ""
    assert len(ours) in (len(rest), len(rest) + 1)
    if len(ours) == len(rest):
        _assert_same_entries(ours, expected, score_names)
    else:  # the extra entry shares the softmax: compare texts and scores only
        assert [e["text"] for e in ours[: len(rest)]] == [e["text"] for e in rest]
        for mine, theirs in zip(ours, rest):
            assert mine[score_names[0]] == theirs["start_log_prob"]
            assert mine[score_names[1]] == theirs["end_log_prob"]


def test_v1_equals_the_original_but_for_the_documented_cases(fixture):
    case = fixture["v1"]
    examples, features, windows = _inputs(case)
    predictions, nbest = v1_predictions(
        examples,
        features,
        np.array([w["start_logits"] for w in windows]),
        np.array([w["end_logits"] for w in windows]),
        n_best_size=fixture["n_best_size"],
        max_answer_length=fixture["max_answer_length"],
    )
    names = ("start_logit", "end_logit")
    original = case["predictions"]
    for qas_id in ("v1_two_windows", "v1_short"):
        assert predictions[qas_id] == original[qas_id] != ""
        _assert_same_entries(nbest[qas_id], case["nbest"][qas_id], names)
    # (a) the best span is the lone space: the original answers "", ours the next span.
    assert original["v1_whitespace"] == ""
    assert predictions["v1_whitespace"] == case["nbest"]["v1_whitespace"][1]["text"] != ""
    _assert_whitespace_skipped(nbest["v1_whitespace"], case["nbest"]["v1_whitespace"], names)
    # (b) no valid span (or no window): the original's placeholder "empty", ours "".
    for qas_id in ("v1_no_span", "v1_no_window"):
        assert original[qas_id] == "empty"
        assert case["nbest"][qas_id] == [
            {"text": "empty", "probability": 1.0, "start_log_prob": 0.0, "end_log_prob": 0.0}
        ]
        assert predictions[qas_id] == ""
        assert [(e["text"], e["probability"], e["start_logit"]) for e in nbest[qas_id]] == [
            ("", 1.0, EMPTY_SCORE)
        ]


def test_v2_equals_the_original_but_for_the_documented_cases(fixture):
    case = fixture["v2"]
    examples, features, windows = _inputs(case)

    def rows(name):
        return np.array([w[name] for w in windows])

    predictions, nbest, null_odds = v2_predictions(
        examples,
        features,
        rows("start_top_log_probs"),
        rows("start_top_index"),
        rows("end_top_log_probs"),
        rows("end_top_index"),
        rows("cls_logits"),
        n_best_size=fixture["n_best_size"],
        max_answer_length=fixture["max_answer_length"],
        start_n_top=fixture["start_n_top"],
        end_n_top=fixture["end_n_top"],
    )
    names = ("start_log_prob", "end_log_prob")
    assert null_odds == case["unthresholded"]["null_odds"]
    original = case["unthresholded"]["predictions"]
    ordinary = ["v2_two_windows", "v2_short", "v2_no_span", "v2_at_threshold", "v2_above"]
    for qas_id in ordinary:
        assert predictions[qas_id] == original[qas_id]
        _assert_same_entries(nbest[qas_id], case["nbest"][qas_id], names)
    assert predictions["v2_no_span"] == "" and nbest["v2_no_span"][0]["start_log_prob"] == -1e6
    # (a) the best span is the lone space: the original's "" (an abstention), ours the next.
    assert original["v2_whitespace"] == ""
    assert predictions["v2_whitespace"] == case["nbest"]["v2_whitespace"][1]["text"] != ""
    _assert_whitespace_skipped(nbest["v2_whitespace"], case["nbest"]["v2_whitespace"], names)

    threshold = fixture["threshold"]
    final = apply_null_threshold(predictions, null_odds, threshold)
    original = case["thresholded"]["predictions"]
    for qas_id in ordinary:
        if qas_id != "v2_at_threshold":
            assert final[qas_id] == original[qas_id], qas_id
    assert final["v2_above"] == "" and final["v2_short"] != ""
    # (c) null odds equal to the threshold: the original blanks (score_diff < threshold to
    # answer), ours answers, as the threshold search (na_prob > threshold to abstain) counted it.
    assert null_odds["v2_at_threshold"] == threshold
    assert original["v2_at_threshold"] == ""
    assert final["v2_at_threshold"] == predictions["v2_at_threshold"] != ""
