"""Every task kind learns: a tiny ALBERT from random init, fine-tuned with the library's
defaults (bias-corrected AdamW, warmup, linear decay, clipping) for a few hundred steps on
held-out data built from the installed packages' docstrings, beats the strongest simple baseline
on its dev set and does not collapse (docs/finetune.md, "Proof on held-out tasks", has the same
runs from the pretrained demo model at full size).

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


def _assert_learned(results, margin):
    verdict = results["baseline_verdict"]
    assert verdict is not None
    assert not results["warnings"], results["warnings"]
    assert not results["history"][-1].get("collapsed"), results["history"][-1]
    print(verdict)
    assert verdict["margin"] >= margin, verdict


def test_sentence_classification_learns(spm_model_file, tmp_path):
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask

    task = SentenceClassificationTask(ClassificationData(task_name="docstring-source"))
    results = _finetune(
        task,
        tmp_path,
        spm_model_file,
        max_seq_length=64,
        num_train_steps=200,
        save_checkpoints_steps=100,
    )
    _assert_learned(results, margin=0.10)  # accuracy points above the majority class (1/3)


def test_token_classification_learns(spm_model_file, tmp_path):
    from albert_tf.finetune.tagging import TaggingData, TokenClassificationTask

    task = TokenClassificationTask(TaggingData(task_name="docstring-code"))
    results = _finetune(
        task,
        tmp_path,
        spm_model_file,
        max_seq_length=64,
        num_train_steps=300,
        save_checkpoints_steps=150,
    )
    _assert_learned(results, margin=0.05)  # entity F1 above each word's most frequent tag


@pytest.mark.parametrize("version_2", [False])
def test_squad_learns(version_2, spm_model_file, tmp_path):
    from albert_tf.data.docstring_qa import write_docstring_squad
    from albert_tf.finetune.squad import SquadData, SquadTask

    train, dev = str(tmp_path / "train.json"), str(tmp_path / "dev.json")
    write_docstring_squad(train, dev, max_paragraphs=600, version_2_with_negative=version_2)
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
        max_seq_length=128,
        num_train_steps=300,
        save_checkpoints_steps=150,
        classifier_dropout=0.0,
    )
    _assert_learned(results, margin=5.0)  # F1 points above the context's first words
