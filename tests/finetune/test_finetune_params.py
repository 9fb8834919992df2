"""FinetuneParams: flag validation, and --num_train_epochs turned into exact steps."""

import numpy as np
import pytest

from albert_tf.finetune.params import FinetuneParams, validate
from albert_tf.finetune.runner import _steps_from_epochs
from albert_tf.finetune.task import Features
from albert_tf.settings import InvalidFlagError


class _Rows:
    """Just enough of a task for the step count: `rows` training rows."""

    def __init__(self, rows):
        self.rows = rows

    def features(self, split):
        return Features({"x": np.zeros([self.rows])}, np.zeros([self.rows]))


def test_epochs_become_steps_as_the_original():
    params = FinetuneParams(
        output_dir="/tmp/x", preset="albert_tiny", train_batch_size=48, num_train_epochs=2.0
    )
    # int(88641 / 48 * 2.0) = 3693 (the original's num_train_steps for SQuAD v1.1 train, 2 epochs)
    assert _steps_from_epochs(params, _Rows(88641)).num_train_steps == 3693
    params.steps_per_execution, params.save_checkpoints_steps = 100, 500
    assert _steps_from_epochs(params, _Rows(88641)).num_train_steps == 3600
    params.do_train = False
    assert _steps_from_epochs(params, _Rows(88641)).num_train_steps == 1000  # untouched


def test_validation_names_the_flag():
    with pytest.raises(InvalidFlagError, match="--num_train_epochs must be > 0, got 0"):
        validate(FinetuneParams(output_dir="/tmp/x", preset="albert_tiny", num_train_epochs=0))
    with pytest.raises(InvalidFlagError, match="give exactly one of --init_checkpoint"):
        validate(FinetuneParams(output_dir="/tmp/x"))
    with pytest.raises(
        InvalidFlagError, match="--steps_per_execution=3 must divide --save_checkpoints_steps=1000"
    ):
        validate(FinetuneParams(output_dir="/tmp/x", preset="albert_tiny", steps_per_execution=3))


@pytest.mark.parametrize(
    "steps, batch, message",
    [
        (0, 32, "--gradient_accumulation_steps must be >= 1, got 0"),
        (-1, 32, "--gradient_accumulation_steps must be >= 1, got -1"),
        (3, 32, "--gradient_accumulation_steps=3 must divide --train_batch_size=32"),
    ],
)
def test_gradient_accumulation_steps_validated(steps, batch, message):
    params = FinetuneParams(
        output_dir="/tmp/x",
        preset="albert_tiny",
        train_batch_size=batch,
        gradient_accumulation_steps=steps,
    )
    with pytest.raises(InvalidFlagError, match=message):
        validate(params)
    params.gradient_accumulation_steps = 4
    validate(params)  # 32 = 4 micro-batches of 8
