"""SQuAD answers from model outputs (NumPy), as the original run_squad post-processing.

For each question, every window of its context proposes spans (start <= end, both context
pieces, at most `max_answer_length` pieces, the start piece having its most context in that
window); spans are ranked by score, and the answer is the best one's text: a slice of the
original context between the span's character offsets, stripped of whitespace. The n-best list
drops repeated texts and gives each a softmax probability over the n-best scores.

v1 outputs are start and end logits per position (`v1_predictions`). v2 outputs are the
XLNet-style beam of the original run_squad_v2: the top `start_n_top` starts, for each the top
`end_n_top` ends, and an answerability logit per window (`v2_predictions`); a question's null
score is the lowest answerability logit over its windows, and `apply_null_threshold` turns
the predictions whose null score is above a threshold into "" (no answer).

>>> import numpy as np
>>> from albert_tf.data.squad_examples import SquadExample
>>> from albert_tf.data.squad_features import SquadFeatures

One window "[CLS] where [SEP] In Paris , France. [SEP]":

>>> example = SquadExample("q1", "Where?", "In Paris, France.")
>>> starts = np.array([[-1, -1, -1, 0, 3, 8, 10, -1]])  # character spans of context pieces
>>> ends = np.array([[-1, -1, -1, 2, 8, 9, 17, -1]])
>>> p_mask = np.array([[0, 1, 1, 0, 0, 0, 0, 1]])
>>> features = SquadFeatures(p_mask, p_mask, p_mask, p_mask, p_mask == 0, starts, ends,
...                          *[np.zeros(1, np.int32)] * 4)
>>> logits = np.array([[0.0, 0, 0, 1, 5, 0, 0, 0]])
>>> predictions, nbest = v1_predictions([example], features, logits, logits, n_best_size=2)
>>> predictions, [(e["text"], e["start"], e["end"]) for e in nbest["q1"]]
({'q1': 'Paris'}, [('Paris', 3, 8), ('In Paris', 0, 8)])
"""

import json
import os

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.data.squad_features import EMPTY_SCORE, NO_WINDOW_NULL_SCORE, example_windows
from albert_tf.metrics.squad_metrics import squad_v2_scores

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"


def v1_predictions(
    examples, features, start_logits, end_logits, n_best_size=20, max_answer_length=30
):
    """Answers from start/end logits [N, S] on `features` (rows of `SquadFeatures`).

    Returns:
        (predictions {qas_id: text}, nbest {qas_id: [{"text", "probability", "start_logit",
        "end_logit", "start", "end"}]}) where start/end are the answer's character offsets
        in the context (end exclusive; -1 for the placeholder "" of a question without a
        valid span).
    """
    start_logits, end_logits = _check_outputs(examples, features, start_logits, end_logits)
    predictions, nbest = {}, {}
    for example, rows in _rows_of_examples(examples, features):
        candidates = []
        for row in rows:
            starts = _top(start_logits[row], n_best_size)[:, None]
            ends = _top(end_logits[row], n_best_size)[None, :]
            starts, ends = np.broadcast_arrays(starts, ends)
            valid = _valid_spans(features, row, starts, ends, max_answer_length)
            for start, end in zip(starts[valid].tolist(), ends[valid].tolist()):
                candidates.append((start_logits[row, start], end_logits[row, end], row, start, end))
        entries = _nbest(example, features, candidates, n_best_size, ("start_logit", "end_logit"))
        predictions[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
    return predictions, nbest


def v2_predictions(
    examples,
    features,
    start_top_log_probs,
    start_top_index,
    end_top_log_probs,
    end_top_index,
    cls_logits,
    n_best_size=20,
    max_answer_length=30,
    start_n_top=5,
    end_n_top=5,
):
    """Answers from the v2 head's beam outputs on `features`.

    Args:
        start_top_log_probs / start_top_index: [N, start_n_top] the best starts per window.
        end_top_log_probs / end_top_index: [N, start_n_top * end_n_top]; entry
            ``i * end_n_top + j`` is the j-th best end after the i-th start.
        cls_logits: [N] answerability logits (higher: more likely unanswerable).

    Returns:
        (predictions {qas_id: best span text}, nbest {qas_id: [{"text", "probability",
        "start_log_prob", "end_log_prob", "start", "end"}]}, null_odds {qas_id: the lowest
        cls_logits over the question's windows}). Predictions are always spans; see
        `apply_null_threshold` and `evaluate_v2`.
    """
    start_top_log_probs, start_top_index = _check_outputs(
        examples, features, start_top_log_probs, start_top_index
    )
    end_top_log_probs, end_top_index = _check_outputs(
        examples, features, end_top_log_probs, end_top_index
    )
    cls_logits = np.asarray(cls_logits, np.float64).reshape(-1)
    if start_top_index.shape[1] != start_n_top or end_top_index.shape[1] != (
        start_n_top * end_n_top
    ):
        raise ValueError(
            f"expected {start_n_top} starts and {start_n_top * end_n_top} ends per "
            f"window (start_n_top={start_n_top}, end_n_top={end_n_top}), got "
            f"{start_top_index.shape[1]} and {end_top_index.shape[1]}"
        )
    if len(cls_logits) != len(features):
        raise ValueError(f"{len(cls_logits)} cls_logits for {len(features)} feature rows")
    predictions, nbest, null_odds = {}, {}, {}
    for example, rows in _rows_of_examples(examples, features):
        candidates = []
        null_score = NO_WINDOW_NULL_SCORE
        for row in rows:
            null_score = min(null_score, float(cls_logits[row]))
            starts = np.repeat(start_top_index[row], end_n_top).astype(np.int64)
            ends = end_top_index[row].astype(np.int64)  # entry i * end_n_top + j
            valid = _valid_spans(features, row, starts, ends, max_answer_length)
            for k in np.flatnonzero(valid).tolist():
                candidates.append(
                    (
                        start_top_log_probs[row, k // end_n_top],
                        end_top_log_probs[row, k],
                        row,
                        int(starts[k]),
                        int(ends[k]),
                    )
                )
        entries = _nbest(
            example, features, candidates, n_best_size, ("start_log_prob", "end_log_prob")
        )
        predictions[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
        null_odds[example.qas_id] = null_score
    return predictions, nbest, null_odds


def apply_null_threshold(predictions, null_odds, threshold):
    """`predictions` with "" for every question whose null odds are above `threshold`.

    >>> apply_null_threshold({"a": "Paris", "b": "1889"}, {"a": -2.0, "b": 0.5}, 0.0)
    {'a': 'Paris', 'b': ''}
    """
    return {qid: "" if null_odds[qid] > threshold else text for qid, text in predictions.items()}


def evaluate_v2(examples, predictions, null_odds):
    """The original evaluate_v2: searches the null threshold with the best F1 on these
    examples (so the scores are optimistic), applies it, and scores the result.

    Returns:
        (scores, thresholded predictions): `squad_v2_scores` of the thresholded predictions
        plus the search's "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh" and
        "null_score_diff_threshold" (= best_f1_thresh).

    >>> from albert_tf.data.squad_examples import SquadExample
    >>> examples = [SquadExample("a", "?", "x", gold_answers=["Paris"]),
    ...             SquadExample("b", "?", "x", is_impossible=True)]
    >>> scores, final = evaluate_v2(examples, {"a": "Paris", "b": "1889"}, {"a": -1.0, "b": 2.0})
    >>> scores["null_score_diff_threshold"], final, scores["exact"]
    (-1.0, {'a': 'Paris', 'b': ''}, 100.0)
    """
    search = squad_v2_scores(examples, predictions, na_probs=null_odds)
    threshold = search["best_f1_thresh"]
    final = apply_null_threshold(predictions, null_odds, threshold)
    scores = squad_v2_scores(examples, final)
    scores.update(
        {k: search[k] for k in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")}
    )
    scores["null_score_diff_threshold"] = threshold
    return scores, final


def write_prediction_files(output_dir, predictions, nbest, null_odds=None):
    """predictions.json, nbest_predictions.json and (v2) null_odds.json in `output_dir`,
    each written atomically; returns their paths."""
    import tensorflow as tf

    tf.io.gfile.makedirs(output_dir)
    contents = [(PREDICTIONS_FILE, predictions), (NBEST_FILE, nbest)]
    if null_odds is not None:
        contents.append((NULL_ODDS_FILE, null_odds))
    paths = []
    for name, values in contents:
        path = f"{output_dir.rstrip('/')}/{name}"
        files.write_atomic(path, json.dumps(values, indent=2, ensure_ascii=False) + "\n")
        paths.append(path)
    logging.info(
        "Wrote answers to %d questions to %s",
        len(predictions),
        ", ".join(os.path.basename(p) for p in paths),
    )
    return paths


def _check_outputs(examples, features, first, second):
    """The two [N, ...] output arrays as NumPy, checked against the features and examples."""
    first, second = np.asarray(first), np.asarray(second)
    if first.ndim != 2 or first.shape[0] != len(features) or second.shape[0] != len(features):
        raise ValueError(
            f"model outputs of shapes {first.shape} and {second.shape} do not "
            f"match {len(features)} feature rows"
        )
    stats_examples = features.stats.num_examples
    too_high = len(features) and features.example_index.max() >= len(examples)
    if too_high or (stats_examples and stats_examples != len(examples)):
        raise ValueError(
            f"the features were built from {stats_examples or 'more'} examples "
            f"but {len(examples)} were given; read them with the same flags"
        )
    return first, second


def _rows_of_examples(examples, features):
    """(example, its feature rows) for every example; rows empty for one without windows."""
    rows = dict(example_windows(features))
    missing = [e.qas_id for i, e in enumerate(examples) if i not in rows]
    if missing:
        logging.warning(
            "%d questions have no windows (their context could not be aligned) "
            'and get the answer "": %s',
            len(missing),
            ", ".join(missing[:5]),
        )
    return [(example, rows.get(i, ())) for i, example in enumerate(examples)]


def _top(scores, count):
    """Indices of the `count` highest scores, best first (the earlier index on ties)."""
    return np.argsort(-scores, kind="stable")[:count]


def valid_spans(is_context, max_context, starts, ends, max_answer_length):
    """bool, the shape of `starts`: which (start, end) positions of one window may be answers:
    both context pieces, in order, at most `max_answer_length` pieces, the start with its most
    context in this window (`is_context`, `max_context`: bool [S]). The graphs' twin is
    `export.squad_serving.valid_spans`.

    >>> context = np.array([False, True, True, True])
    >>> valid_spans(context, context, np.array([1, 2, 0]), np.array([2, 1, 1]), 30).tolist()
    [True, False, False]
    """
    width = len(is_context)
    inside = (starts >= 0) & (ends < width) & (starts <= ends)
    starts, ends = np.where(inside, starts, 0), np.where(inside, ends, 0)
    return (
        inside
        & (ends - starts + 1 <= max_answer_length)
        & is_context[starts]
        & is_context[ends]
        & max_context[starts]
    )


def _valid_spans(features, row, starts, ends, max_answer_length):
    """`valid_spans` of window `row` of `features`."""
    is_context = (features.p_mask[row] == 0) & (features.piece_start_char[row] >= 0)
    max_context = features.token_is_max_context[row].astype(bool)
    return valid_spans(is_context, max_context, starts, ends, max_answer_length)


def _nbest(example, features, candidates, n_best_size, score_names):
    """The n-best list of one example from (start score, end score, row, start, end)."""
    candidates.sort(key=lambda c: c[0] + c[1], reverse=True)
    entries, seen = [], set()
    context = example.context_text
    for start_score, end_score, row, start, end in candidates:
        if len(entries) >= n_best_size:
            break
        begin = int(features.piece_start_char[row, start])
        finish = int(features.piece_end_char[row, end])
        raw = context[begin:finish]
        text = raw.strip()
        if not text or text in seen:  # a span of whitespace only is no answer
            continue
        seen.add(text)
        begin += len(raw) - len(raw.lstrip())
        entries.append(
            {
                "text": text,
                score_names[0]: float(start_score),
                score_names[1]: float(end_score),
                "start": begin,
                "end": begin + len(text),
            }
        )
    if not entries:
        entries.append(
            {
                "text": "",
                score_names[0]: EMPTY_SCORE,
                score_names[1]: EMPTY_SCORE,
                "start": -1,
                "end": -1,
            }
        )
    totals = np.array([e[score_names[0]] + e[score_names[1]] for e in entries], np.float64)
    probabilities = np.exp(totals - totals.max())
    probabilities /= probabilities.sum()
    for entry, probability in zip(entries, probabilities):
        entry["probability"] = float(probability)
    return [
        {key: e[key] for key in ("text", "probability") + score_names + ("start", "end")}
        for e in entries
    ]
