"""Task metrics against hand-computed values (no scipy/sklearn)."""

import math

import numpy as np
import pytest

from albert_tf.metrics import glue_metrics as metrics


def test_accuracy_and_f1_hand_computed():
    preds, labels = [1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 1, 1]
    # TP=3 FP=1 FN=1 TN=1
    assert metrics.accuracy(preds, labels) == pytest.approx(4 / 6)
    assert metrics.f1(preds, labels) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
    assert metrics.f1([0, 0], [1, 0]) == 0.0  # no true positive


def test_matthews_binary_and_multiclass():
    # TP=2 FP=1 TN=2 FN=0 -> (2*2 - 1*0) / sqrt(3*2*3*2) = 4/6
    assert metrics.matthews_corrcoef([1, 1, 0, 0, 1], [1, 0, 0, 0, 1]) == pytest.approx(4 / 6)
    # labels +1,+1,+1,-1 / preds +1,-1,+1,+1: TP=2 FN=1 FP=1 TN=0 -> (0 - 1)/sqrt(3*3*1*1) = -1/3
    assert metrics.matthews_corrcoef([1, -1, 1, 1], [1, 1, 1, -1]) == pytest.approx(-1 / 3)
    # constant prediction: undefined -> 0
    assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0
    # 3 classes, perfect -> 1; Gorodkin R_K by hand for a small confusion matrix
    assert metrics.matthews_corrcoef([0, 1, 2, 2], [0, 1, 2, 2]) == pytest.approx(1.0)
    preds, labels = [0, 1, 2, 0, 1, 2], [0, 1, 2, 1, 2, 0]
    # c=3 correct of n=6; t=p=(2,2,2): (3*6 - 12) / sqrt((36-12)*(36-12)) = 6/24
    assert metrics.matthews_corrcoef(preds, labels) == pytest.approx(0.25)


def test_pearson_spearman_with_ties():
    x, y = [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]
    assert metrics.pearson(x, y) == pytest.approx(6 / math.sqrt(60))
    # ranks of y with ties averaged: [1, 2.5, 4.5, 2.5, 4.5] -> 7 / sqrt(10 * 9)
    assert metrics.spearman(x, y) == pytest.approx(7 / math.sqrt(90))
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_compute_metrics_and_errors():
    out = metrics.compute_metrics(["matthews_corrcoef", "accuracy"], np.array([1, 0]), [1, 1])
    assert list(out) == ["matthews_corrcoef", "accuracy"] and out["accuracy"] == 0.5
    with pytest.raises(ValueError, match=r"unknown metric\(s\) \['auc'\]"):
        metrics.compute_metrics(["auc"], [1], [1])
    with pytest.raises(ValueError, match=r"predictions \(2\) and labels \(3\)"):
        metrics.accuracy([1, 0], [1, 0, 1])
