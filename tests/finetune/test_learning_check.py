"""A run that learns nothing says so: each task's constant-prediction and baseline rules, the
collapse warning after two collapsed evaluations, the verdict against the strongest baseline, the
learning-rate warning, and a real run at a rate that collapses."""

import json
import os

import numpy as np
import pytest
from finetune_support import classifier_flags, script, write_tsv_splits

from albert_tf.data.squad_examples import SquadExample
from albert_tf.data.task_spec import TaskSpec
from albert_tf.finetune import learning_check
from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
from albert_tf.finetune.race import RaceData, RaceTask
from albert_tf.finetune.squad import SquadData, SquadTask
from albert_tf.finetune.tagging import TaggingData, TokenClassificationTask
from albert_tf.models.head_model import warn_if_unsafe_learning_rate


class _Split:
    def __init__(self, labels):
        self.labels = np.asarray(labels)


def _classifier(dev_labels):
    task = SentenceClassificationTask(
        ClassificationData(task_name="t", train_file="x"),
        spec=TaskSpec("t", ("no", "yes", "maybe"), ("accuracy",), ("text",), "label"),
    )
    task.splits = {"dev": _Split(dev_labels)}
    return task


def test_classification_rules():
    task = _classifier([0, 0, 0, 1])
    assert task.main_metric_baselines(task.baselines()) == {
        "trivial": 0.75,
        "strongest": {"name": "always the dev set's majority class 'no'", "value": 0.75},
    }
    assert task.constant_prediction({"labels": np.array([1, 1, 1, 1])}) == "label 'yes'"
    assert task.constant_prediction({"labels": np.array([1, 0, 1, 1])}) is None
    # A constant answer, or a score no better than the majority class, is a collapse.
    baselines = task.main_metric_baselines(task.baselines())
    one_label = {"labels": np.array([0, 0, 0, 0])}
    assert learning_check.collapsed(task, one_label, 0.75, baselines) == (
        "label 'no' for every dev example"
    )
    mixed = {"labels": np.array([0, 1, 0, 0])}
    assert "no better than answering every example the same way (0.7500)" in (
        learning_check.collapsed(task, mixed, 0.75, baselines)
    )
    assert learning_check.collapsed(task, mixed, 0.9, baselines) is None


def test_tagging_rules():
    task = TokenClassificationTask(TaggingData(), labels=["O", "B-X", "I-X"])

    class Sentences:
        words = [["a", "b"], ["c"]]
        tags = [["O", "B-X"], ["O"]]

    task.sentences = {"train": Sentences(), "dev": Sentences()}
    values = task.main_metric_baselines(task.baselines())
    assert values["trivial"] == 0.0  # all O finds no entity
    assert values["strongest"]["name"] == "each word's most frequent training tag"
    assert values["strongest"]["value"] == pytest.approx(1.0)  # the words repeat exactly
    assert task.constant_prediction({"tags": [["O", "O"], ["O"]]}) == "tag 'O'"
    assert task.constant_prediction({"tags": [["O", "B-X"], ["O"]]}) is None


def test_squad_rules():
    task = SquadTask(SquadData(version_2_with_negative=True))
    dev = [
        SquadExample("a", "q", "It is in Paris.", "Paris", 9, gold_answers=["Paris"]),
        SquadExample("b", "q", "No answer here.", is_impossible=True),
        SquadExample("c", "q", "Nor here.", is_impossible=True),
        SquadExample("d", "q", "Again nothing.", is_impossible=True),
    ]
    task.examples = {"dev": dev}
    # v2: empty answers score 100 on the 3 unanswerable questions of 4.
    assert task.main_metric_baselines(task.baselines()) == {
        "trivial": 75.0,
        "strongest": {"name": "an empty answer to every question", "value": 75.0},
    }
    assert task.constant_prediction({"predictions": dict.fromkeys("abcd", "")}) == (
        "an empty answer"
    )
    assert task.constant_prediction({"predictions": dict.fromkeys("abcd", "x")}) == (
        "the answer 'x'"
    )
    assert task.constant_prediction({"predictions": {"a": "Paris", "b": ""}}) is None
    v1 = SquadTask(SquadData())
    v1.examples = {"dev": dev[:1]}
    assert v1.main_metric_baselines(v1.baselines()) == {"trivial": 0.0}


def test_race_rules():
    task = RaceTask(RaceData())
    task.examples = {"dev": _Split([0, 1, 1, 1, 2, 3, 1, 0])}
    assert task.main_metric_baselines(task.baselines()) == {
        "trivial": 0.5,
        "strongest": {"name": "always option B (chance: 1/4)", "value": 0.5},
    }
    assert task.constant_prediction({"answers": np.array([2, 2, 2])}) == "option C"
    assert task.constant_prediction({"answers": np.array([2, 1, 2])}) is None


def test_collapse_warning_needs_two_in_a_row():
    one = {"step": 100, "collapsed": "tag 'O' for every dev example"}
    fine = {"step": 200}
    assert learning_check.collapse_warning([one], "adamw", 1e-3, 100, 300) is None
    assert learning_check.collapse_warning([one, fine], "adamw", 1e-3, 200, 300) is None
    warning = learning_check.collapse_warning(
        [one, dict(one, step=200)], "adamw_original", 1e-3, 200, 300
    )
    assert warning.startswith(
        "the model learned nothing: tag 'O' for every dev example at steps 100 and 200."
    )
    assert "--learning_rate=0.001 is above 0.0001" in warning
    assert "--optimizer=adamw (bias-corrected)" in warning
    assert "too few steps so far (200 of 300)" in warning
    assert "labels" in warning
    within = learning_check.collapse_warning([one, dict(one, step=300)], "adamw", 1e-4, 300, 300)
    assert "try a third of it" in within and "raise --num_train_steps" in within


def test_verdict():
    baselines = {"strongest": {"name": "first words", "value": 12.0}}
    won = learning_check.verdict({"value": 20.0}, baselines)
    assert won["beats_baseline"] and won["margin"] == 8.0
    lost = learning_check.verdict({"value": 12.0}, baselines)
    assert not lost["beats_baseline"]
    assert "did not beat the strongest simple baseline: best dev f1 12.0000 vs 12.0000 for " in (
        learning_check.verdict_warning(lost, "f1")
    )
    assert learning_check.verdict_warning(won, "f1") is None
    assert learning_check.verdict(None, baselines) is None
    assert learning_check.verdict({"value": 1.0}, {"trivial": 0.0}) is None


def test_learning_rate_warning():
    assert warn_if_unsafe_learning_rate("adamw", 1e-3) is None
    assert warn_if_unsafe_learning_rate("adamw_original", 1e-4) is None
    message = warn_if_unsafe_learning_rate("adamw", 5e-3)
    assert message.startswith("learning_rate=0.005 is above 0.001, the highest rate at which adamw")


def test_a_collapsing_run_says_so(tmp_path, corpus_file, spm_model_file):
    """adamw_original at lr 0.05 sends a tiny classifier to one label; the run warns, records
    the collapse and the lost verdict in eval_results.json, and prints them at the end."""

    paths, _ = write_tsv_splits(str(tmp_path), corpus_file)
    out = str(tmp_path / "out")
    args = classifier_flags(
        paths,
        spm_model_file,
        out,
        optimizer="adamw_original",
        learning_rate=0.05,
        num_train_steps=12,
        save_checkpoints_steps=4,
        warmup_steps=0,
        precision="float32",
    )
    result = script("run_classifier.py", args)
    assert result.returncode == 0, result.stderr[-2000:]
    with open(os.path.join(out, "eval_results.json")) as f:
        results = json.load(f)
    assert all(h.get("collapsed") for h in results["history"]), results["history"]
    assert results["baseline_verdict"]["beats_baseline"] is False
    texts = [w["warning"] for w in results["warnings"]]
    assert any(t.startswith("the model learned nothing: label ") for t in texts), texts
    assert any("did not beat the strongest simple baseline" in t for t in texts), texts
    assert "WARNING: the model learned nothing" in result.stderr
    assert "learning_rate=0.05 is above 0.0001" in result.stderr
