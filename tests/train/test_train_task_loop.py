"""The pretraining task's loss against NumPy, flag validation, warm start, NaN handling (in
process)."""

import os
import types

import numpy as np
import pytest
import tensorflow as tf
from train_support import PRED, SEQ, checkpoint_values, tiny_params

from albert_tf.config import AlbertConfig
from albert_tf.train import runner
from albert_tf.train.task import PretrainingTask
from albert_tf.train.warm_start import copy_weights, warm_start


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_loss_and_metrics_match_numpy(records):
    task = PretrainingTask(AlbertConfig.from_json_file(records["config"]), SEQ, PRED)
    model = task.build_model()
    batch = next(iter(task.dataset(records["eval"], 8, is_training=False)))
    totals = task.normalizers(batch)
    loss, stats = task.loss_and_statistics(model, batch, totals, training=False)
    outputs = model(
        {
            k: batch[k]
            for k in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
        }
    )
    mlm = _log_softmax(outputs["mlm_logits"].numpy().astype(np.float64))
    ids, weights = batch["masked_lm_ids"].numpy(), batch["masked_lm_weights"].numpy()
    nll = -np.take_along_axis(mlm, ids[..., None], -1)[..., 0]
    sop = _log_softmax(outputs["sop_logits"].numpy().astype(np.float64))
    labels = batch["next_sentence_labels"].numpy()
    sop_nll = -sop[np.arange(len(labels)), labels]
    expected = (weights * nll).sum() / (weights.sum() + 1e-5) + sop_nll.mean()
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    metrics = task.metrics({k: v.numpy() for k, v in stats.items()})
    hits = (mlm.argmax(-1) == ids).astype(np.float64)
    assert metrics["masked_lm_accuracy"] == pytest.approx((weights * hits).sum() / weights.sum())
    assert metrics["sentence_order_accuracy"] == pytest.approx(np.mean(sop.argmax(-1) == labels))
    assert weights.sum() < weights.size  # padding positions exist and are excluded


def test_lamb_exclusions_on_the_pretrainer(records):
    from albert_tf.optim import create_optimizer

    task = PretrainingTask(AlbertConfig.from_json_file(records["config"]))
    model = task.build_model()
    optimizer = create_optimizer("lamb", 0.001, stacked_axes=task.stacked_axes(model))
    optimizer.build(model.trainable_variables)
    for v in model.trainable_variables:
        leaf = v.path.rsplit("/", 1)[1]
        is_norm_or_bias = leaf in ("gamma", "beta", "bias") or leaf.endswith(
            ("_bias", "layer_norm_gamma", "layer_norm_beta")
        )
        assert optimizer.uses_weight_decay(v) == (not is_norm_or_bias), v.path
        assert optimizer.uses_layer_adaptation(v) == (not is_norm_or_bias), v.path
    stacked = {
        v.path
        for v in model.trainable_variables
        if optimizer._leading_axes.get(optimizer._var_key(v)) == 2
    }
    assert stacked == {v.path for v in model.trainable_variables if "/encoder/" in v.path}


def _params(records, output_dir, **overrides):
    return tiny_params(
        records, output_dir, **dict(dict(learning_rate=0.01, num_train_steps=4), **overrides)
    )


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(preset="albert_tiny"), "exactly one of --albert_config_file and --preset"),
        (
            dict(albert_config_file=None),
            "exactly one of --albert_config_file and --preset must be given, or neither with "
            "--init_checkpoint",
        ),
        (
            dict(albert_config_file=None, preset="albert_huge"),
            "--preset='albert_huge' is not one of",
        ),
        (
            dict(input_file="/nonexistent/*.tfrecord"),
            "--input_file: no file matches '/nonexistent/*.tfrecord'",
        ),
        (dict(eval_input_files="/nope.tfrecord"), "--eval_input_files: no file matches"),
        (dict(train_batch_size=0), "--train_batch_size must be >= 1"),
        (dict(optimizer="sgd"), "--optimizer='sgd' is not one of adamw, adamw_original, lamb"),
        (
            dict(max_predictions_per_seq=40),
            "--max_predictions_per_seq (40) exceeds --max_seq_length (32)",
        ),
        (dict(dynamic_masking=True), "--dynamic_masking needs --spm_model_file"),
        (dict(logical_cpus=2), "--logical_cpus applies to --strategy=mirrored only"),
        (dict(init_checkpoint="/no/such/dir"), "--init_checkpoint='/no/such/dir': not found"),
    ],
)
def test_invalid_flags_name_the_flag(records, tmp_path, overrides, message):
    with pytest.raises(runner.InvalidFlagError) as error:
        runner.validate_params(_params(records, str(tmp_path), **overrides))
    assert message in str(error.value)
    assert not os.listdir(tmp_path)  # failed before any work


def test_batch_must_split_over_replicas(records, tmp_path):
    two_replicas = types.SimpleNamespace(num_replicas_in_sync=2)
    with pytest.raises(
        runner.InvalidFlagError,
        match=r"--train_batch_size=7 is not divisible by the 2 "
        r"replicas of --strategy=mirrored",
    ):
        runner.check_batch_sizes(
            _params(records, str(tmp_path), train_batch_size=7, strategy="mirrored"), two_replicas
        )


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(records, tmp_path):
    params = _params(
        records,
        str(tmp_path),
        learning_rate=1e30,
        num_train_steps=6,
        save_checkpoints_steps=1,
        steps_per_loop=1,
        clip_norm=0.0,
    )
    with pytest.raises(runner.NonFiniteLossError, match=r"NaN or Inf at step \d+") as error:
        runner.run_pretraining(params)
    latest = tf.train.latest_checkpoint(os.path.join(tmp_path, "checkpoints"))
    assert latest is not None and str(error.value).count(latest) == 1
    values = checkpoint_values(latest)
    assert all(np.all(np.isfinite(v)) for v in values.values())
    assert int(latest.rsplit("-", 1)[1]) < 6


def test_warm_start_from_export_and_group0(records, tmp_path):
    from albert_tf.models import model_dir

    config = AlbertConfig.from_json_file(records["config"])
    source = PretrainingTask(config).build_model()
    model_dir.save(source, str(tmp_path / "source"))
    grouped = AlbertConfig.from_dict(dict(config.to_dict(), num_hidden_groups=2), "original")
    target = PretrainingTask(grouped).build_model()
    build = lambda c: PretrainingTask(c).build_model()  # noqa: E731
    with pytest.raises(ValueError, match="--init_from_group0"):
        warm_start(target, str(tmp_path / "source"), build)
    copied = warm_start(target, str(tmp_path / "source"), build, init_from_group0=True)
    assert copied and all("/encoder/" in p for p in copied)
    by_path = {v.path: v.numpy() for v in source.variables}
    for v in target.variables:
        value = v.numpy()
        if v.path in copied:
            for g in range(value.shape[0]):
                np.testing.assert_array_equal(value[g], by_path[v.path][0])
        else:
            np.testing.assert_array_equal(value, by_path[v.path])
    assert copy_weights(source, PretrainingTask(config).build_model()) == []


def test_run_resume_warm_start_from_training_checkpoint(records, tmp_path):
    """A finished run is not retrained on restart; its output dir warm-starts another model."""
    out = str(tmp_path / "run")
    first = runner.run_pretraining(_params(records, out, eval_input_files=records["eval"]))
    assert first["global_step"] == 4 and first["train"] is not None
    again = runner.run_pretraining(_params(records, out))
    assert again["global_step"] == 4 and again["train"] is None
    target = PretrainingTask(AlbertConfig.from_json_file(records["config"])).build_model()
    warm_start(target, out, lambda c: PretrainingTask(c).build_model())
    final = {v.path: v.numpy() for v in first["model"].variables}
    assert max(np.abs(v.numpy() - final[v.path]).max() for v in target.variables) == 0.0


def test_mixed_bfloat16_run(records, tmp_path):
    import keras

    result = runner.run_pretraining(
        _params(records, str(tmp_path), precision="mixed_bfloat16", num_train_steps=2)
    )
    model = result["model"]
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert np.isfinite(result["train"]["loss"]) and result["global_step"] == 2
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
