"""Every task kind learns: a tiny ALBERT from random init, fine-tuned for a few hundred steps
on held-out data built from the installed packages' docstrings, does not collapse and beats a
simple baseline on its dev set by a margin (docs/finetune.md, "Proof on held-out tasks", has the
runs from the pretrained demo model with the defaults, and this smoke setting).

These fail when a change stops a task from learning (an optimizer, a loss, a label mapping, a
post-processing step), which no mechanical test notices.
"""

import pytest

from albert_tf.finetune.params import FinetuneParams
from albert_tf.finetune.runner import run_finetuning

# The smoke setting of docs/finetune.md: albert_tiny from random init, lr 1e-3, batch 32.
SMOKE = dict(
    preset="albert_tiny",
    learning_rate=1e-3,
    train_batch_size=32,
    eval_batch_size=128,
    keep_checkpoint_max=1,
    precision="float32",
    verbose=0,
)


def _finetune(task, output_dir, spm_model_file, **overrides):
    params = FinetuneParams(
        output_dir=str(output_dir), spm_model_file=spm_model_file, **{**SMOKE, **overrides}
    )
    return run_finetuning(params, task)


def _assert_learned(results, margin, over="strongest"):
    """No collapse warning, the last evaluation not collapsed, and the best dev score `margin`
    above the strongest simple baseline (`over="trivial"`: above answering all alike)."""
    assert not results["history"][-1].get("collapsed"), results["history"][-1]
    collapse = [w for w in results["warnings"] if "learned nothing" in w]
    assert not collapse, collapse
    verdict = results["baseline_verdict"]
    reference = verdict["baseline_value"]
    if over == "trivial":
        reference = results["main_metric_baselines"]["trivial"]
    assert results["best"]["value"] >= reference + margin, (results["best"], verdict)


def test_sentence_classification_learns(spm_model_file, tmp_path):
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask

    task = SentenceClassificationTask(ClassificationData(task_name="docstring-source"))
    results = _finetune(
        task,
        tmp_path,
        spm_model_file,
        max_seq_length=64,
        num_train_steps=150,
        save_checkpoints_steps=150,
    )
    _assert_learned(results, margin=0.10)  # accuracy points above the majority class (1/3)


def test_token_classification_learns(spm_model_file, tmp_path):
    from albert_tf.finetune.tagging import TaggingData, TokenClassificationTask

    task = TokenClassificationTask(TaggingData(task_name="docstring-code"))
    # From random init AdamW stays at the tag prior for hundreds of steps (the study in
    # docs/finetune.md); LAMB, the pretraining optimizer, gets out of it.
    results = _finetune(
        task,
        tmp_path,
        spm_model_file,
        optimizer="lamb",
        learning_rate=5e-3,
        max_seq_length=64,
        num_train_steps=400,
        save_checkpoints_steps=400,
    )
    _assert_learned(results, margin=0.05, over="trivial")  # entity F1 above tagging all O


@pytest.mark.parametrize("version_2", [False])
def test_squad_learns(version_2, spm_model_file, tmp_path):
    from albert_tf.data.docstring_qa import write_docstring_squad
    from albert_tf.finetune.squad import SquadData, SquadTask

    train, dev = str(tmp_path / "train.json"), str(tmp_path / "dev.json")
    write_docstring_squad(train, dev, max_paragraphs=500, version_2_with_negative=version_2)
    data = SquadData(
        train_file=train,
        predict_file=dev,
        version_2_with_negative=version_2,
        doc_stride=64,
        max_query_length=48,
        feature_cache_dir=str(tmp_path / "cache"),
    )
    results = _finetune(
        SquadTask(data),
        tmp_path / "run",
        spm_model_file,
        max_seq_length=96,
        num_train_steps=150,
        save_checkpoints_steps=150,
        classifier_dropout=0.0,
    )
    _assert_learned(results, margin=5.0)  # F1 points above the context's first words


def test_multiple_choice_learns(spm_model_file, tmp_path):
    from albert_tf.data.docstring_race import write_docstring_race
    from albert_tf.finetune.race import RaceData, RaceTask

    write_docstring_race(str(tmp_path / "race"), max_articles=2000)
    task = RaceTask(RaceData(data_dir=str(tmp_path / "race"), max_qa_length=48))
    results = _finetune(
        task,
        tmp_path / "run",
        spm_model_file,
        learning_rate=1e-4,
        max_seq_length=96,
        train_batch_size=16,
        num_train_steps=60,
        save_checkpoints_steps=60,
    )
    _assert_learned(results, margin=0.08)  # accuracy above the most frequent letter (~1/4)
