"""Declarative bounds of settings (`albert_tf.settings.check_bounds`) and the settings that
pretraining and fine-tuning share (`albert_tf.train.training_params`)."""

import dataclasses

import pytest

from albert_tf.finetune.params import FinetuneParams, validate
from albert_tf.settings import InvalidFlagError, check_bounds, setting
from albert_tf.train import training_params
from albert_tf.train.params import PretrainingParams


def _finetune(**values):
    return FinetuneParams(output_dir="/tmp/x", preset="albert_tiny", **values)


def _pretraining(**values):
    return PretrainingParams(input_file="x", output_dir="/tmp/x", preset="albert_tiny", **values)


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(train_batch_size=0), "--train_batch_size must be >= 1, got 0"),
        (dict(keep_checkpoint_max=0), "--keep_checkpoint_max must be >= 1, got 0"),
        (dict(learning_rate=0.0), "--learning_rate must be > 0, got 0.0"),
        (dict(max_seq_length=2), "--max_seq_length must be in [3, 512], got 2"),
        (dict(max_seq_length=513), "--max_seq_length must be in [3, 512], got 513"),
        (dict(warmup_proportion=1.0), "--warmup_proportion must be in [0, 1), got 1.0"),
        (dict(albert_dropout=-0.1), "--albert_dropout must be in [0, 1), got -0.1"),
        (dict(steps_per_execution=0), "--steps_per_execution must be >= 1, got 0"),
        (dict(clip_norm=-1.0), "--clip_norm (-1.0) and --weight_decay_rate (0.01) must be >= 0"),
        (dict(logical_cpus=2), "--logical_cpus applies to --strategy=mirrored only"),
    ],
)
def test_finetuning_bounds_name_the_flag(values, message):
    with pytest.raises(InvalidFlagError) as error:
        validate(_finetune(**values))
    assert str(error.value).startswith(message)


def test_pretraining_keeps_the_shared_bounds_unless_it_declares_its_own():
    # learning_rate is declared with another default and help, without bounds: the shared hold.
    with pytest.raises(InvalidFlagError, match="--learning_rate must be > 0, got 0"):
        check_bounds(_pretraining(learning_rate=0))
    # max_seq_length declares its own: 2 is a valid record length for pretraining ...
    check_bounds(_pretraining(max_seq_length=2))
    with pytest.raises(InvalidFlagError, match=r"--max_seq_length must be >= 1, got 0"):
        check_bounds(_pretraining(max_seq_length=0))
    # ... and logical_cpus is bounded for pretraining only (as before the shared declarations).
    with pytest.raises(InvalidFlagError, match="--logical_cpus must be >= 0, got -1"):
        check_bounds(_pretraining(logical_cpus=-1))
    check_bounds(_finetune(logical_cpus=-1))


def test_shared_settings_are_declared_once():
    for cls in (FinetuneParams, PretrainingParams):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        assert set(training_params.SHARED_SETTINGS) <= set(fields)
    # The fields that keep fine-tuning's declaration are the shared one, field for field.
    finetune = {f.name: f for f in dataclasses.fields(FinetuneParams)}
    for name, declaration in training_params.SHARED_SETTINGS.items():
        assert finetune[name].metadata["help"] == declaration["help_text"]
        assert finetune[name].metadata["bounds"] == declaration.get("bounds")
    from albert_tf.finetune import runner as finetune_runner
    from albert_tf.train import runner as train_runner

    assert finetune_runner.check_batch_sizes is train_runner.check_batch_sizes


def test_malformed_bounds_fail_where_declared():
    with pytest.raises(ValueError, match="bounds '>=1'"):
        setting(1, "Steps.", bounds=">=1")
