"""SQuAD scores as the official evaluation scripts define them (v1.1 and v2.0).

An answer is normalised (lower-cased; punctuation removed; the articles a, an, the removed;
whitespace collapsed) and compared with every gold answer: exact match (0 or 1) and F1 of the
bag of normalised words, keeping the best over the gold answers. Scores are percentages.

v1.1 (`squad_v1_scores`): every gold question counts; one without a prediction scores 0.
v2.0 (`squad_v2_scores`): an unanswerable question's only gold answer is "" and an empty
prediction means "no answer"; gold answers that normalise to "" are ignored; questions without
a prediction are left out. With no-answer scores (`na_probs`), a prediction whose score is
above `na_prob_thresh` counts as "no answer", and the best threshold is searched.

>>> normalize_answer("The  Eiffel-Tower!")
'eiffeltower'
>>> squad_v1_scores({"q1": ["Paris", "in Paris"], "q2": ["1889"]}, {"q1": "Paris", "q2": "1887"})
{'exact_match': 50.0, 'f1': 50.0}
>>> scores = squad_v2_scores({"q1": ["Paris"], "q2": []}, {"q1": "Paris", "q2": ""})
>>> scores["exact"], scores["HasAns_total"], scores["NoAns_exact"]
(100.0, 1, 100.0)
"""

import collections
import re
import string

from absl import logging

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace.

    >>> normalize_answer("  An apple, the PEAR;  a-b ")
    'apple pear ab'
    """
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold_answers):
    """1 if `prediction` normalises to any of `gold_answers`, else 0 (0 for no gold answers).

    >>> exact_match("the Paris", ["Paris.", "Lyon"])
    1
    """
    return max(
        (int(normalize_answer(prediction) == normalize_answer(g)) for g in gold_answers), default=0
    )


def f1(prediction, gold_answers, empty_matches_empty=False):
    """The best word-overlap F1 of `prediction` against `gold_answers`.

    F1 = 2PR / (P + R) with P = common words / predicted words and R = common words / gold
    words, counting repeated words as many times as both sides have them. With
    `empty_matches_empty` (the v2.0 rule), an empty side scores 1 if the other is empty too;
    otherwise (v1.1) it scores 0.

    >>> round(f1("in Paris France", ["Paris"]), 4)  # P = 1/3, R = 1/1
    0.5
    """
    return max((_f1_one(prediction, g, empty_matches_empty) for g in gold_answers), default=0)


def _f1_one(prediction, gold, empty_matches_empty):
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    if empty_matches_empty and (not predicted or not expected):
        return int(predicted == expected)
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def gold_answers_by_id(examples_or_gold):
    """{question id: list of gold texts} from such a dict or from examples with `qas_id` and
    `gold_answers` attributes (e.g. `albert_tf.data.squad_examples.SquadExample`)."""
    if isinstance(examples_or_gold, dict):
        return {str(k): list(v) for k, v in examples_or_gold.items()}
    return {example.qas_id: list(example.gold_answers) for example in examples_or_gold}


def squad_v1_scores(examples_or_gold, predictions):
    """The official v1.1 {"exact_match": %, "f1": %} over all gold questions.

    Args:
        examples_or_gold: {question id: gold texts} or examples (see `gold_answers_by_id`).
        predictions: {question id: predicted text}; a missing question scores 0 (logged).
    """
    gold = gold_answers_by_id(examples_or_gold)
    if not gold:
        raise ValueError("no gold questions to score")
    missing = [qid for qid in gold if qid not in predictions]
    if missing:
        logging.warning(
            "SQuAD v1.1 scores: %d of %d questions have no prediction and score 0 (e.g. %s)",
            len(missing),
            len(gold),
            ", ".join(missing[:5]),
        )
    em = sum(exact_match(predictions[q], g) for q, g in gold.items() if q in predictions)
    f = sum(f1(predictions[q], g) for q, g in gold.items() if q in predictions)
    return {"exact_match": 100.0 * em / len(gold), "f1": 100.0 * f / len(gold)}


def squad_v2_scores(gold, predictions, na_probs=None, na_prob_thresh=1.0):
    """The official v2.0 scores.

    Args:
        gold: {question id: gold texts ([] for an unanswerable question)} or examples.
        predictions: {question id: text}; "" means "no answer". Questions without a prediction
            are left out of every total (logged).
        na_probs: optional {question id: no-answer score}, e.g. null odds; a question whose
            score is above `na_prob_thresh` is scored as if "" had been predicted.
        na_prob_thresh: see `na_probs`.

    Returns:
        {"exact", "f1", "total"} over the scored questions, the same with the prefixes
        "HasAns_" and "NoAns_" when such questions exist, and with `na_probs` the best
        threshold search: "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"
        (scores when every question above the threshold predicts "no answer").
    """
    gold = gold_answers_by_id(gold)
    has_answer = {}
    exact_raw, f1_raw = {}, {}
    missing = []
    for qid, texts in gold.items():
        texts = [t for t in texts if normalize_answer(t)] or [""]
        has_answer[qid] = texts != [""]
        if qid not in predictions:
            missing.append(qid)
            continue
        exact_raw[qid] = exact_match(predictions[qid], texts)
        f1_raw[qid] = f1(predictions[qid], texts, empty_matches_empty=True)
    if missing:
        logging.warning(
            "SQuAD v2.0 scores: %d of %d questions have no prediction and are not scored (e.g. %s)",
            len(missing),
            len(gold),
            ", ".join(missing[:5]),
        )
    if not exact_raw:
        raise ValueError("no predictions for any gold question")
    probs = {qid: 0.0 for qid in exact_raw} if na_probs is None else na_probs
    without = [qid for qid in exact_raw if qid not in probs]
    if without:
        raise ValueError(
            f"na_probs has no score for {len(without)} predicted questions "
            f"(e.g. {', '.join(without[:5])})"
        )
    exact_final = _apply_no_answer_threshold(exact_raw, probs, has_answer, na_prob_thresh)
    f1_final = _apply_no_answer_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    scores = _totals(exact_final, f1_final, list(exact_raw))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [qid for qid in exact_raw if has_answer[qid] == wanted]
        if ids:
            scores.update(
                {f"{prefix}_{k}": v for k, v in _totals(exact_final, f1_final, ids).items()}
            )
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
            scores[f"best_{name}"], scores[f"best_{name}_thresh"] = best, threshold
    return scores


def _apply_no_answer_threshold(raw, na_probs, has_answer, threshold):
    return {
        qid: float(not has_answer[qid]) if na_probs[qid] > threshold else score
        for qid, score in raw.items()
    }


def _totals(exact_scores, f1_scores, ids):
    return {
        "exact": 100.0 * sum(exact_scores[q] for q in ids) / len(ids),
        "f1": 100.0 * sum(f1_scores[q] for q in ids) / len(ids),
        "total": len(ids),
    }


def _best_threshold(predictions, raw, na_probs, has_answer):
    """The official `find_best_thresh`: start from "no answer everywhere" (the no-answer
    questions score), then lower the threshold past each question in increasing no-answer
    score, keeping the best total; returns (best %, its threshold)."""
    score = best = sum(not v for v in has_answer.values())  # over all gold, as the script
    threshold = 0.0
    for qid in sorted(na_probs, key=na_probs.get):
        if qid not in raw:
            continue
        if has_answer[qid]:
            score += raw[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(raw), threshold
