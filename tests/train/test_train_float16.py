"""--precision=mixed_float16 on CPU (the policy forced): dynamic loss scaling keeps a short run
within tolerance of float32, its state is checkpointed and restored, an overflow step is skipped
and halves the scale; refused on TPU."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from train_support import PRED, SEQ, checkpoint_values, tiny_params

from albert_tf.config import AlbertConfig
from albert_tf.optim import create_optimizer
from albert_tf.optim.loss_scale import DynamicLossScale
from albert_tf.train import runner
from albert_tf.train.loop import Trainer
from albert_tf.train.task import PretrainingTask


def _run(records, out, precision):
    params = tiny_params(
        records,
        out,
        precision=precision,
        num_train_steps=4,
        num_warmup_steps=1,
        learning_rate=0.01,
        save_checkpoints_steps=4,
    )
    return runner.run_pretraining(params)


def test_float16_run_is_within_tolerance_of_float32(records, tmp_path):
    full = _run(records, str(tmp_path / "float32"), "float32")
    half = _run(records, str(tmp_path / "float16"), "mixed_float16")
    assert half["model"].dtype_policy.name == "mixed_float16"
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    for key in ("loss", "masked_lm_loss", "sentence_order_loss", "gradient_norm"):
        assert half["train"][key] == pytest.approx(full["train"][key], rel=1e-3), key
    a = checkpoint_values(os.path.join(tmp_path, "float32", "checkpoints", "ckpt-4"))
    b = checkpoint_values(os.path.join(tmp_path, "float16", "checkpoints", "ckpt-4"))
    scale = {k.split("/")[1]: v for k, v in b.items() if k.startswith("loss_scale/")}
    assert scale == {"scale": 2.0**15, "good_steps": 4, "skipped_steps": 0}
    assert max(np.abs(a[k] - b[k]).max() for k in a) < 2e-3


def test_overflow_step_is_skipped_and_the_scale_halves(records):
    task = PretrainingTask(AlbertConfig.from_json_file(records["config"]), SEQ, PRED, seed=1)
    strategy = tf.distribute.get_strategy()
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        model = task.build_model()
    finally:
        keras.config.set_dtype_policy(previous)
    optimizer = create_optimizer("lamb", 0.01, stacked_axes=task.stacked_axes(model))
    # 2^100 times the loss overflows float16 in the backward pass (float32 holds the loss).
    scale = DynamicLossScale(initial_scale=2.0**100)
    trainer = Trainer(strategy, task, model, optimizer, jit_compile=False, loss_scale=scale)
    before = [v.numpy() for v in model.trainable_variables]
    iterator = iter(task.dataset(records["train"], 8, seed=1))
    result = trainer.train(iterator, 1)
    assert result.summaries == {"loss_scale": 2.0**99, "skipped_steps": 1}
    assert result.first_nonfinite_step is None  # an overflow is not a divergence
    assert np.isfinite(result.stats["masked_lm_nll"])
    assert trainer.step == 1  # the step counts (data position and schedule advance)
    for value, variable in zip(before, model.trainable_variables):
        np.testing.assert_array_equal(value, variable.numpy())
    moments = [v for v in optimizer.variables if "adam_m" in v.path]
    assert moments and not any(np.any(v.numpy()) for v in moments)
    scale.scale.assign(2.0**10)
    result = trainer.train(iterator, 1)
    assert result.summaries == {"loss_scale": 2.0**10, "skipped_steps": 0}
    assert int(scale.skipped_steps.numpy()) == 1 and int(scale.good_steps.numpy()) == 1
    assert any(
        np.any(value != variable.numpy())
        for value, variable in zip(before, model.trainable_variables)
    )


def test_the_loss_scale_resumes_from_the_checkpoint(records, tmp_path):
    from albert_tf.train.checkpointing import Checkpointer

    def state(scale_value):
        model = PretrainingTask(AlbertConfig.from_json_file(records["config"])).build_model()
        optimizer = create_optimizer("adamw", 0.01)
        optimizer.build(model.trainable_variables)
        scale = DynamicLossScale(initial_scale=scale_value)
        extra = {"loss_scale": scale}
        return Checkpointer(str(tmp_path), model, optimizer, extra=extra), scale

    saved, scale = state(2.0**15)
    scale.update(tf.constant(False))
    scale.update(tf.constant(True))
    saved.save()
    restored, scale = state(1.0)
    assert restored.restore_latest()
    assert (float(scale.scale), int(scale.good_steps), int(scale.skipped_steps)) == (2.0**14, 1, 1)


def test_float16_on_tpu_is_refused(records, tmp_path):
    params = tiny_params(records, str(tmp_path), precision="mixed_float16", strategy="tpu")
    with pytest.raises(runner.InvalidFlagError, match=r"^--precision=mixed_float16 is not for "):
        runner.validate_params(params)
