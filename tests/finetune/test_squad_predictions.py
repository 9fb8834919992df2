"""From model outputs back to answers: perfect outputs give the gold answers, the span rules,
v2 null odds and threshold, and the prediction files."""

import json
import os

import numpy as np
import pytest
from test_squad_data import SETTINGS, v1_dataset, v2_dataset, write_squad

from albert_tf.data import squad_examples, squad_features
from albert_tf.finetune import squad_predictions as sp
from albert_tf.metrics.squad_metrics import normalize_answer, squad_v1_scores

HIGH = 10.0


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model_file)


# Windows of 32 positions hold ~20 context pieces, so a long answer may not fit in the window
# where its first piece has the most context: no prediction can recover it (the original's
# rule). Windows of 64 positions hold every answer of the test data that way.
WIDE = squad_features.FeatureSettings(max_seq_length=64, doc_stride=8, max_query_length=10)


def _features(tmp_path_factory, tokenizer, dataset, settings, **reading):
    path = write_squad(tmp_path_factory.mktemp("squad") / "dev.json", dataset)
    examples = squad_examples.read_squad_examples(path, **reading)
    return examples, squad_features.build_features(examples, tokenizer, settings)


@pytest.fixture(scope="module")
def v1(tmp_path_factory, tokenizer):
    return _features(tmp_path_factory, tokenizer, v1_dataset(), SETTINGS, skip_mismatched=False)


@pytest.fixture(scope="module")
def v1_wide(tmp_path_factory, tokenizer):
    return _features(tmp_path_factory, tokenizer, v1_dataset(), WIDE, skip_mismatched=False)


@pytest.fixture(scope="module")
def v2(tmp_path_factory, tokenizer):
    return _features(tmp_path_factory, tokenizer, v2_dataset(), WIDE, version_2_with_negative=True)


def perfect_logits(features):
    """One-hot start/end logits at the labels (at [CLS] for windows without the answer)."""
    start = np.zeros(features.input_word_ids.shape, np.float32)
    end = np.zeros_like(start)
    rows = np.arange(len(features))
    start[rows, features.start_positions] = HIGH
    end[rows, features.end_positions] = HIGH
    return start, end


def recoverable(examples, features):
    """Ids of the questions whose answer fits the window where its first piece has the most
    context."""
    rows = np.flatnonzero(features.is_impossible == 0)
    rows = rows[features.token_is_max_context[rows, features.start_positions[rows]]]
    return {examples[i].qas_id for i in features.example_index[rows]}


def check_round_trip(examples, features):
    """Perfect logits give exactly the (stripped) answers and their offsets: EM and F1 100."""
    predictions, nbest = sp.v1_predictions(examples, features, *perfect_logits(features))
    ids = recoverable(examples, features)
    for example in examples:
        if example.qas_id not in ids:
            continue
        text = example.answer_text.strip()
        assert predictions[example.qas_id] == text, example.qas_id
        best = nbest[example.qas_id][0]
        start = example.answer_start + example.answer_text.index(text)
        assert (best["start"], best["end"]) == (start, start + len(text))
        assert best["start_logit"] == best["end_logit"] == HIGH
    chosen = [e for e in examples if e.qas_id in ids]
    assert squad_v1_scores(chosen, predictions)["exact_match"] == 100.0
    # v1.1's F1 is 0 for an answer that normalises to "" (e.g. "the" or "»."), even when exact.
    worded = [e for e in chosen if normalize_answer(e.answer_text)]
    assert len(worded) < len(chosen)
    assert squad_v1_scores(worded, predictions) == {"exact_match": 100.0, "f1": 100.0}
    return ids


def test_perfect_logits_give_the_gold_answers(v1_wide):
    examples, features = v1_wide
    ids = check_round_trip(examples, features)
    # All but the question whose answer_start does not match (it has no label).
    assert ids == {e.qas_id for e in examples} - {"bad-start"}


def test_perfect_logits_in_small_windows(v1):
    examples, features = v1
    ids = check_round_trip(examples, features)
    assert len(ids) >= 0.9 * len(examples)


def test_nbest_lists(v1):
    examples, features = v1
    rng = np.random.default_rng(0)
    start_logits = rng.normal(size=features.input_word_ids.shape)
    end_logits = rng.normal(size=features.input_word_ids.shape)
    predictions, nbest = sp.v1_predictions(
        examples, features, start_logits, end_logits, n_best_size=5, max_answer_length=4
    )
    assert set(predictions) == {e.qas_id for e in examples}
    for example in examples:
        entries = nbest[example.qas_id]
        assert 1 <= len(entries) <= 5 and predictions[example.qas_id] == entries[0]["text"]
        assert list(entries[0]) == [
            "text",
            "probability",
            "start_logit",
            "end_logit",
            "start",
            "end",
        ]
        texts = [e["text"] for e in entries]
        assert len(set(texts)) == len(texts)  # repeated texts are dropped
        totals = [e["start_logit"] + e["end_logit"] for e in entries]
        assert totals == sorted(totals, reverse=True)
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
        for e in entries:
            assert example.context_text[e["start"] : e["end"]] == e["text"]
            assert e["text"] and e["text"] == e["text"].strip()


def test_span_rules(v1):
    """Spans starting in the question or at [CLS], reversed, too long, or starting at a piece
    without its most context in the window are never chosen."""
    examples, features = v1
    # A middle window of a long context: pieces at its edges have more context elsewhere.
    row = next(
        r
        for r in range(len(features))
        if features.token_is_max_context[r].sum() >= 4
        and not features.token_is_max_context[r, features.p_mask[r] == 0][1:3].any()
    )
    qas_id = examples[features.example_index[row]].qas_id
    context = np.flatnonzero((features.p_mask[row] == 0) & (features.piece_start_char[row] >= 0))
    edge = context[0]  # not its max-context window
    first = np.flatnonzero(features.token_is_max_context[row])[0]
    # Only the windows of that question (the others then answer "").
    rows = np.flatnonzero(features.example_index == features.example_index[row])
    window = squad_features.SquadFeatures(
        **{k: v[rows] for k, v in features.arrays().items()}, stats=features.stats
    )

    def best_total(settings, max_answer_length=30):
        """The best n-best score when all logits are -100 but `settings` (position: logit)."""
        start = np.full(features.input_word_ids.shape, -100.0)
        end = np.full(features.input_word_ids.shape, -100.0)
        for (which, position), value in settings.items():
            (start if which == "start" else end)[row, position] = value
        _, nbest = sp.v1_predictions(
            examples,
            window,
            start[rows],
            end[rows],
            n_best_size=32,
            max_answer_length=max_answer_length,
        )
        return nbest[qas_id][0]["start_logit"] + nbest[qas_id][0]["end_logit"]

    # A valid span of score 20 beats higher-scored invalid ones.
    valid = {("start", first): 10, ("end", first): 10}
    assert best_total({**valid, ("start", 1): 50, ("end", 1): 50}) == 20  # question
    assert best_total({**valid, ("start", 0): 50, ("end", 0): 50}) == 20  # [CLS]
    assert best_total({**valid, ("start", first + 2): 50, ("end", first + 1): 50}) == (
        10 + 50
    )  # the reversed pair loses; (first, first + 1) is valid
    # Four pieces: allowed with max_answer_length 4, not with 3.
    long_span = {("start", first): 30, ("end", first + 3): 30}
    assert best_total(long_span, max_answer_length=4) == 60
    assert best_total(long_span, max_answer_length=3) == 30 - 100
    # Starting at the edge piece is not allowed; ending there is.
    assert best_total({("start", edge): 50, ("end", edge): 50}) == -200
    assert edge > 0 and best_total({("end", context[-1]): 50}) == -100 + 50


def test_question_without_windows_answers_empty(v1):
    examples, features = v1
    keep = features.example_index != 0
    trimmed = squad_features.SquadFeatures(
        **{k: v[keep] for k, v in features.arrays().items()}, stats=features.stats
    )
    logits = np.zeros(trimmed.input_word_ids.shape)
    predictions, nbest = sp.v1_predictions(examples, trimmed, logits, logits)
    assert predictions[examples[0].qas_id] == ""
    assert nbest[examples[0].qas_id] == [
        {
            "text": "",
            "probability": 1.0,
            "start_logit": -1e6,
            "end_logit": -1e6,
            "start": -1,
            "end": -1,
        }
    ]


def test_outputs_must_match_features_and_examples(v1):
    examples, features = v1
    logits = np.zeros(features.input_word_ids.shape)
    with pytest.raises(ValueError, match="do not match"):
        sp.v1_predictions(examples, features, logits[1:], logits[1:])
    with pytest.raises(ValueError, match="built from .* examples but 3 were given"):
        sp.v1_predictions(examples[:3], features, logits, logits)


def beam_outputs(features, start_n_top=2, end_n_top=3):
    """The v2 head's outputs when it is right: the gold start first, its gold end first, and
    cls_logits -5 for windows holding the answer, +5 for the others."""
    n = len(features)
    start_log_probs = np.tile(np.array([-0.1, -3.0]), (n, 1))
    start_index = np.zeros((n, start_n_top), np.int32)
    end_log_probs = np.tile(np.array([-0.2, -4.0, -5.0, -6.0, -7.0, -8.0]), (n, 1))
    end_index = np.zeros((n, start_n_top * end_n_top), np.int32)
    start_index[:, 0] = features.start_positions
    end_index[:, 0] = features.end_positions
    cls_logits = np.where(features.is_impossible == 1, 5.0, -5.0)
    return start_log_probs, start_index, end_log_probs, end_index, cls_logits


def test_v2_predictions_null_odds_and_threshold(v2):
    examples, features = v2
    predictions, nbest, null_odds = sp.v2_predictions(
        examples,
        features,
        *beam_outputs(features),
        n_best_size=5,
        max_answer_length=30,
        start_n_top=2,
        end_n_top=3,
    )
    by_id = {e.qas_id: e for e in examples}
    for qid, example in by_id.items():
        # The null score is the lowest cls_logits over the question's windows.
        assert null_odds[qid] == (5.0 if example.is_impossible else -5.0)
        if example.is_impossible:
            assert predictions[qid] == "" and nbest[qid][0]["start_log_prob"] == -1e6
        else:
            assert predictions[qid] == example.answer_text
            assert nbest[qid][0]["start_log_prob"] == pytest.approx(-0.1)
            assert list(nbest[qid][0]) == [
                "text",
                "probability",
                "start_log_prob",
                "end_log_prob",
                "start",
                "end",
            ]
    assert sp.apply_null_threshold(predictions, null_odds, 0.0) == predictions
    # Spans are always predicted; the threshold search decides which become "".
    spans = dict(predictions, rings="two")
    scores, final = sp.evaluate_v2(examples, spans, null_odds)
    assert final["rings"] == "" and final["moons"] == "Phobos and Deimos"
    assert scores["exact"] == scores["f1"] == 100.0
    assert scores["null_score_diff_threshold"] == scores["best_f1_thresh"] == -5.0
    assert scores["best_f1"] == 100.0 and scores["HasAns_total"] == 4
    # The task's evaluate returns the threshold and changes nothing; the runner hands the
    # chosen model's metrics to adopt_dev_metrics, after which answers and exports use it.
    from albert_tf.finetune.squad import SquadData, SquadTask

    task = SquadTask(SquadData(version_2_with_negative=True))
    task.examples["dev"] = examples
    metrics = task.evaluate({"predictions": spans, "null_odds": null_odds}, "dev")
    assert metrics["null_score_diff_threshold"] == -5.0 and task.null_threshold == 0.0
    task.adopt_dev_metrics(metrics)
    assert task.null_threshold == -5.0


def test_v2_output_shapes_are_checked(v2):
    examples, features = v2
    outputs = beam_outputs(features)
    with pytest.raises(ValueError, match="expected 2 starts and 4 ends"):
        sp.v2_predictions(examples, features, *outputs, start_n_top=2, end_n_top=2)
    with pytest.raises(ValueError, match="cls_logits"):
        sp.v2_predictions(
            examples, features, *outputs[:4], outputs[4][1:], start_n_top=2, end_n_top=3
        )


def test_prediction_files(tmp_path):
    predictions = {"q1": "Zürich", "q2": ""}
    nbest = {"q1": [{"text": "Zürich", "probability": 1.0}], "q2": []}
    paths = sp.write_prediction_files(
        str(tmp_path / "out"), predictions, nbest, {"q1": -2.5, "q2": 3.0}
    )
    assert sorted(os.listdir(tmp_path / "out")) == [
        "nbest_predictions.json",
        "null_odds.json",
        "predictions.json",
    ]
    with open(paths[0], encoding="utf-8") as f:
        assert json.load(f) == predictions
    with open(tmp_path / "out" / "null_odds.json", encoding="utf-8") as f:
        assert json.load(f) == {"q1": -2.5, "q2": 3.0}
    sp.write_prediction_files(str(tmp_path / "v1"), predictions, nbest)
    assert sorted(os.listdir(tmp_path / "v1")) == ["nbest_predictions.json", "predictions.json"]
