"""Task metrics as GLUE defines them, in plain NumPy (no scipy, no sklearn): accuracy, binary
F1 of the positive class (label id 1: MRPC's and QQP's "1"), Matthews correlation (CoLA),
Pearson and Spearman correlation (STS-B).

>>> import numpy as np
>>> compute_metrics(["accuracy", "f1"], np.array([1, 0, 1, 1]), np.array([1, 0, 0, 1]))
{'accuracy': 0.75, 'f1': 0.8}
"""

import math

import numpy as np


def accuracy(predictions, labels):
    """Fraction of predictions equal to the labels."""
    predictions, labels = _check_pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1(predictions, labels, positive=1):
    """F1 of the positive class: 2PR / (P + R); 0.0 when there are no true positives."""
    predictions, labels = _check_pair(predictions, labels)
    tp = float(np.sum((predictions == positive) & (labels == positive)))
    fp = float(np.sum((predictions == positive) & (labels != positive)))
    fn = float(np.sum((predictions != positive) & (labels == positive)))
    if tp == 0.0:
        return 0.0
    return 2.0 * tp / (2.0 * tp + fp + fn)


def matthews_corrcoef(predictions, labels):
    """Matthews correlation for any number of classes (Gorodkin's R_K); 0.0 when undefined."""
    predictions, labels = _check_pair(predictions, labels)
    classes = np.union1d(predictions, labels)
    index = {c: i for i, c in enumerate(classes.tolist())}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for p, t in zip(predictions.tolist(), labels.tolist()):
        confusion[index[t], index[p]] += 1
    n = confusion.sum()
    correct = np.trace(confusion)
    true_counts = confusion.sum(axis=1)
    pred_counts = confusion.sum(axis=0)
    numerator = correct * n - np.dot(true_counts, pred_counts)
    denominator = math.sqrt(n * n - np.dot(pred_counts, pred_counts)) * math.sqrt(
        n * n - np.dot(true_counts, true_counts)
    )
    return 0.0 if denominator == 0.0 else float(numerator / denominator)


def pearson(predictions, labels):
    """Pearson correlation coefficient; 0.0 when either side is constant."""
    x, y = _check_pair(predictions, labels, dtype=np.float64)
    x = x - x.mean()
    y = y - y.mean()
    denominator = math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
    return 0.0 if denominator == 0.0 else float(np.dot(x, y) / denominator)


def spearman(predictions, labels):
    """Spearman rank correlation: Pearson of the ranks, ties sharing their average rank."""
    x, y = _check_pair(predictions, labels, dtype=np.float64)
    return pearson(_average_ranks(x), _average_ranks(y))


METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def compute_metrics(names, predictions, labels):
    """Returns {name: value} for the named metrics (keys of `METRICS`), in the given order.

    `predictions` are class ids for classification metrics and scores for correlations.
    """
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known: {sorted(METRICS)}")
    return {name: METRICS[name](predictions, labels) for name in names}


def _check_pair(predictions, labels, dtype=None):
    predictions = np.asarray(predictions, dtype=dtype).reshape(-1)
    labels = np.asarray(labels, dtype=dtype).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(
            f"predictions ({predictions.shape[0]}) and labels ({labels.shape[0]}) "
            "must have the same length"
        )
    if predictions.size == 0:
        raise ValueError("cannot compute a metric on zero examples")
    return predictions, labels


def _average_ranks(values):
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks
