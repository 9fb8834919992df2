"""--gradient_accumulation_steps: N micro-batches make the optimizer update of the whole batch
(LAMB and AdamW, clipping active, MLM loss over the whole batch's masked positions); steps count
updates; resume is exact; bad values name the flag. (Mirrored: test_train_distributed.py.)"""

import logging
import os
import shutil
import types

import pytest
import tensorflow as tf
from train_support import PRED, SEQ, checkpoint_values, max_difference, tiny_params

from albert_tf.config import AlbertConfig
from albert_tf.train import runner
from albert_tf.train.task import PretrainingTask

STEPS = 3


def _run(records, out, **overrides):
    # clip_norm far below the gradient norm: clipping acts at every step, on the accumulated
    # gradient (clipping each micro-batch would give another update).
    settings = dict(
        num_train_steps=STEPS,
        num_warmup_steps=1,
        steps_per_loop=STEPS,
        save_checkpoints_steps=STEPS,
        learning_rate=0.01,
        clip_norm=0.05,
        precision="float32",
    )
    return runner.run_pretraining(tiny_params(records, out, **dict(settings, **overrides)))


@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_accumulated_update_equals_the_whole_batch(records, tmp_path, optimizer, monkeypatch):
    whole = _run(records, str(tmp_path / "whole"), optimizer=optimizer)
    rows = []  # the batch sizes the loss is traced with
    original = PretrainingTask.loss_and_statistics

    def spy(self, model, batch, totals, training=True):
        rows.append(batch["input_word_ids"].shape[0])
        return original(self, model, batch, totals, training)

    monkeypatch.setattr(PretrainingTask, "loss_and_statistics", spy)
    micro = _run(
        records, str(tmp_path / "micro"), optimizer=optimizer, gradient_accumulation_steps=4
    )
    assert set(rows) == {2}  # micro-batches of 8 / 4 rows
    assert whole["global_step"] == micro["global_step"] == STEPS  # steps count updates
    a = checkpoint_values(os.path.join(tmp_path, "whole", "checkpoints", f"ckpt-{STEPS}"))
    b = checkpoint_values(os.path.join(tmp_path, "micro", "checkpoints", f"ckpt-{STEPS}"))
    iterations = [k for k in a if k.startswith("optimizer/_iterations")]
    assert iterations and all(int(b[k]) == STEPS for k in iterations)
    assert max_difference(a, b) < 1e-5
    for key, value in whole["train"].items():  # statistics of the whole batch, per example
        assert micro["train"][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_micro_batches_hold_different_masked_counts(records):
    """The MLM loss divides by the masked positions of the WHOLE batch: the test data gives
    micro-batches of 2 rows different counts (equal micro-batch weights would be wrong)."""
    task = PretrainingTask(AlbertConfig.from_json_file(records["config"]), SEQ, PRED)
    batch = next(iter(task.dataset(records["train"], 8, seed=1)))
    counts = tf.reduce_sum(tf.reshape(batch["masked_lm_weights"], [4, -1]), 1).numpy()
    assert len(set(counts.tolist())) > 1, counts


def test_resume_with_accumulation_is_exact(records, tmp_path, caplog):
    out = str(tmp_path / "run")
    overrides = dict(
        num_train_steps=4, save_checkpoints_steps=2, steps_per_loop=2, keep_checkpoint_max=5
    )
    _run(records, out, gradient_accumulation_steps=2, **overrides)
    resumed = str(tmp_path / "resumed")
    shutil.copytree(out, resumed)
    directory = os.path.join(resumed, "checkpoints")
    for name in os.listdir(directory):
        if name.startswith("ckpt-4."):
            os.remove(os.path.join(directory, name))
    with open(os.path.join(directory, "checkpoint"), "w") as f:  # ckpt-2 is the newest
        f.write('model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-2"\n')
    with caplog.at_level(logging.INFO, logger="absl"):
        result = _run(records, resumed, gradient_accumulation_steps=2, **overrides)
    assert result["global_step"] == 4
    assert "at step 2" in caplog.text and "Skipping the 2 batches per replica" in caplog.text
    final = checkpoint_values(os.path.join(directory, "ckpt-4"))
    assert max_difference(final, checkpoint_values(os.path.join(out, "checkpoints", "ckpt-4"))) == 0


@pytest.mark.parametrize(
    "steps,batch,message",
    [
        (0, 8, "--gradient_accumulation_steps must be >= 1, got 0"),
        (3, 8, "--gradient_accumulation_steps=3 must divide --train_batch_size=8"),
    ],
)
def test_bad_values_name_the_flag(records, tmp_path, steps, batch, message):
    params = tiny_params(
        records, str(tmp_path), gradient_accumulation_steps=steps, train_batch_size=batch
    )
    with pytest.raises(runner.InvalidFlagError) as error:
        runner.validate_params(params)
    assert message in str(error.value)


def test_micro_batch_must_split_over_replicas(records, tmp_path):
    params = tiny_params(records, str(tmp_path), train_batch_size=12, gradient_accumulation_steps=4)
    runner.validate_params(params)  # 4 divides 12, but not 12 / 2 replicas
    with pytest.raises(
        runner.InvalidFlagError,
        match=r"^--train_batch_size=12 is not divisible by --gradient_accumulation_steps=4 x "
        r"the 2 replicas of --strategy=one_device$",
    ):
        runner.check_batch_sizes(params, types.SimpleNamespace(num_replicas_in_sync=2))
