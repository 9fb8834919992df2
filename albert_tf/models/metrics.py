"""Task metrics as GLUE defines them, and the Keras callback that evaluates them during `fit`.

The metric functions are plain NumPy (no scipy, no sklearn): accuracy, binary F1 of the positive
class (MRPC, QQP), Matthews correlation (CoLA), Pearson and Spearman correlation (STS-B).
`TaskEvaluator` runs the model on a dev set after every Keras epoch (the runner makes an "epoch"
one checkpoint interval), computes the task's metrics, appends them to `eval_results.json`
(written atomically) and keeps the best weights by the task's main metric.

>>> import numpy as np
>>> compute_metrics(["accuracy", "f1"], np.array([1, 0, 1, 1]), np.array([1, 0, 0, 1]))
{'accuracy': 0.75, 'f1': 0.8}
"""
import math
import os
import time
import uuid

import numpy as np
import tensorflow as tf
from absl import logging

import keras

from albert_tf import files


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
        n * n - np.dot(true_counts, true_counts))
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


def majority_baseline(train_labels, eval_labels):
    """Accuracy on `eval_labels` of always predicting the most frequent training label."""
    values, counts = np.unique(np.asarray(train_labels).reshape(-1), return_counts=True)
    return accuracy(np.full(len(eval_labels), values[np.argmax(counts)]), eval_labels)


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
        raise ValueError(f"predictions ({predictions.shape[0]}) and labels ({labels.shape[0]}) "
                         "must have the same length")
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
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


class TaskEvaluator(keras.callbacks.Callback):
    """Scores a classifier on a dev set at the end of every epoch and keeps the best weights.

    Args:
        dataset: a finite tf.data.Dataset of (features, labels) batches (may end with padding
            examples, cut off by `num_examples`).
        metric_names: metrics to compute (keys of `METRICS`); the first one selects the best
            weights unless `main_metric` is given.
        output_dir: where `eval_results.json` and `best.weights.h5` are written (or None).
        regression: the model outputs one score per example instead of logits.
        main_metric: the metric that selects the best weights (higher is better).
        steps_per_epoch: training steps per Keras epoch, to report the global step.
        labels: the dev labels (NumPy); default: collected from `dataset`.
        num_examples: number of real examples (default: all predictions).
        baseline: extra numbers stored in eval_results.json (e.g. {"majority_baseline": 0.5}).
        prefix: key prefix in the logs and results ("eval" -> "eval_accuracy").

    Example:
        >>> evaluator = TaskEvaluator(dev_ds, ["accuracy", "f1"], "/tmp/out")  # doctest: +SKIP
        >>> model.fit(train_ds, epochs=3, callbacks=[evaluator])  # doctest: +SKIP
    """

    def __init__(self, dataset, metric_names, output_dir=None, regression=False, main_metric=None,
                 steps_per_epoch=None, labels=None, num_examples=None, baseline=None,
                 prefix="eval"):
        super().__init__()
        compute_metrics(metric_names, [0], [0])  # validates the names early
        self.dataset = dataset
        self.metric_names = list(metric_names)
        self.main_metric = main_metric or self.metric_names[0]
        if self.main_metric not in self.metric_names:
            raise ValueError(f"main_metric {self.main_metric!r} is not among {self.metric_names}")
        self.output_dir = output_dir
        self.regression = regression
        self.steps_per_epoch = steps_per_epoch
        self.labels = None if labels is None else np.asarray(labels)
        self.num_examples = num_examples
        self.prefix = prefix
        self.baseline = dict(baseline or {})
        self.history = []
        self.best = None

    @property
    def best_weights_path(self):
        return None if self.output_dir is None else os.path.join(self.output_dir, "best.weights.h5")

    def evaluate(self):
        """Predicts the dataset (under the model's strategy) and returns {metric: value}."""
        outputs = np.asarray(self.model.predict(self.dataset, verbose=0), dtype=np.float64)
        labels = self.labels
        if labels is None:
            labels = np.concatenate([np.asarray(y) for _, y in self.dataset], axis=0)
        n = self.num_examples or len(labels)
        outputs, labels = outputs[:n], labels[:n]
        predictions = outputs.reshape(-1) if self.regression else outputs.argmax(axis=-1)
        results = compute_metrics(self.metric_names, predictions, labels)
        results["num_examples"] = int(n)
        return results

    def record(self, step):
        """Evaluates, appends to the history, saves best weights, rewrites eval_results.json."""
        start = time.time()
        results = self.evaluate()
        record = {"step": int(step), **{f"{self.prefix}_{k}": v for k, v in results.items()}}
        value = results[self.main_metric]
        improved = self.best is None or value > self.best["value"]
        if improved:
            self.best = {"step": int(step), "metric": self.main_metric, "value": value}
            if self.best_weights_path:
                tmp = f"{self.best_weights_path[:-len('.weights.h5')]}-{uuid.uuid4().hex}.weights.h5"
                self.model.save_weights(tmp)
                tf.io.gfile.rename(tmp, self.best_weights_path, overwrite=True)
        self.history.append(record)
        logging.info("step %d: %s (%.1fs)%s", step,
                     ", ".join(f"{k}={results[k]:.4f}" for k in self.metric_names),
                     time.time() - start, " new best" if improved else "")
        if self.output_dir:
            files.write_json(os.path.join(self.output_dir, "eval_results.json"),
                              {"best": self.best, **self.baseline, "history": self.history})
        return results

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.steps_per_epoch if self.steps_per_epoch else epoch + 1
        results = self.record(step)
        if logs is not None:
            logs.update({f"{self.prefix}_{k}": results[k] for k in self.metric_names})
