"""Whether a fine-tuning run learned: a collapse warning during training, a verdict at the end.

A run has collapsed at an evaluation when its dev predictions are one constant answer (the
task's `constant_prediction`: majority class, all-O, empty answers, one option letter) or its
main metric is no better than that of answering every example the same way (the task's
`main_metric_baselines(...)["trivial"]`). Two collapsed evaluations in a row give a warning naming
the likely causes and fixes; at the end, the best score is compared with the strongest simple
baseline. Both go to the log and to eval_results.json ("warnings", "baseline_verdict").

>>> entry = {"step": 100, "collapsed": "label 'other' for every dev example"}
>>> history = [dict(entry, step=50), entry]
>>> print(collapse_warning(history, "adamw_original", 1e-3, 100, 600))  # doctest: +ELLIPSIS
the model learned nothing: label 'other' for every dev example at steps 50 and 100. ...
>>> verdict({"value": 0.61}, {"strongest": {"name": "majority class", "value": 0.5}})
{'beats_baseline': True, 'best': 0.61, 'baseline': 'majority class', 'baseline_value': 0.5, \
'margin': 0.11}
"""

from absl import logging


def collapsed(task, predictions, value, main_baselines):
    """Why this evaluation learned nothing ("label 'other' for every dev example"), or None."""
    constant = task.constant_prediction(predictions)
    if constant is not None:
        return f"{constant} for every dev example"
    trivial = main_baselines.get("trivial")
    if trivial is not None and value <= trivial + 0.01 * max(1.0, abs(trivial)):
        return (
            f"dev {task.main_metric} {value:.4f}, no better than answering every example the "
            f"same way ({trivial:.4f})"
        )
    return None


def collapse_warning(history, optimizer, learning_rate, step, num_train_steps):
    """The warning when the last two evaluations of `history` both collapsed, else None."""
    from albert_tf.models.head_model import MAX_SAFE_LEARNING_RATES

    if len(history) < 2 or not (history[-1].get("collapsed") and history[-2].get("collapsed")):
        return None
    highest = MAX_SAFE_LEARNING_RATES[optimizer]
    causes = []
    if learning_rate > highest:
        causes.append(
            f"--learning_rate={learning_rate:g} is above {highest:g}, the highest rate at which "
            f"--optimizer={optimizer} fine-tuned every task of the study without collapsing: "
            "lower it"
            + (" or use --optimizer=adamw (bias-corrected)" if optimizer != "adamw" else "")
        )
    else:
        causes.append(
            f"the learning rate may still be too high for this model and batch (--optimizer="
            f"{optimizer} --learning_rate={learning_rate:g}): try a third of it"
        )
    if step < num_train_steps:
        causes.append(f"too few steps so far ({step} of {num_train_steps}): it may still recover")
    else:
        causes.append(f"too few steps ({num_train_steps}): raise --num_train_steps")
    causes.append("labels that the text does not predict: check the label column and its values")
    return (
        f"the model learned nothing: {history[-1]['collapsed']} at steps "
        f"{history[-2]['step']} and {history[-1]['step']}. Likely causes: " + "; ".join(causes)
    )


def verdict(best, main_baselines):
    """{"beats_baseline", "best", "baseline", "baseline_value", "margin"} of the best dev score
    against the strongest simple baseline; None without a best score or a baseline."""
    strongest = main_baselines.get("strongest")
    if best is None or strongest is None:
        return None
    margin = best["value"] - strongest["value"]
    return {
        "beats_baseline": bool(margin > 0),
        "best": best["value"],
        "baseline": strongest["name"],
        "baseline_value": strongest["value"],
        "margin": round(margin, 6),
    }


def verdict_warning(result, main_metric):
    """The warning for a run that did not beat its strongest simple baseline, else None."""
    if result is None or result["beats_baseline"]:
        return None
    return (
        f"the run did not beat the strongest simple baseline: best dev {main_metric} "
        f"{result['best']:.4f} vs {result['baseline_value']:.4f} for {result['baseline']}. "
        "This model is no better than that rule: see eval_results.json's history"
    )


def log_warning(message):
    """Logs `message` as a warning that stands out in a long log."""
    logging.warning("*** %s ***", message)
