"""`FinetuneParams`: every setting of a fine-tuning run that does not depend on the task.

The scripts declare their flags from it (`albert_tf.settings.define_flags`), so each name,
default and help text is written once. Task settings (data files, columns, labels, window
stride) live in the task's own dataclass (`ClassificationData`, `TaggingData`).

>>> params = FinetuneParams(output_dir="/tmp/run", preset="albert_tiny")
>>> validate(params)
>>> params.learning_rate, params.num_train_steps  # None: the default of the model's size
(None, 1000)
"""

import dataclasses
from typing import Optional

from albert_tf.settings import InvalidFlagError, setting
from albert_tf.train.training_params import (
    SINGLE_WORKER_STRATEGIES,
    shared_setting,
    validate_training_params,
)

STRATEGIES = SINGLE_WORKER_STRATEGIES  # the --strategy choices


@dataclasses.dataclass
class FinetuneParams:
    """Model, optimization, schedule, distribution and output settings (see each field's help;
    `shared_setting` fields are declared, with their bounds, in
    `albert_tf.train.training_params`)."""

    output_dir: Optional[str] = shared_setting("output_dir")
    overwrite_output_dir: bool = shared_setting("overwrite_output_dir")
    init_checkpoint: Optional[str] = shared_setting("init_checkpoint")
    preset: Optional[str] = shared_setting("preset")
    spm_model_file: Optional[str] = shared_setting("spm_model_file")
    do_lower_case: Optional[bool] = setting(
        None,
        "Lowercase text; default: what --init_checkpoint's text.json records (false for a "
        "keras-hub preset), else true (the released models are uncased).",
    )
    max_seq_length: int = shared_setting("max_seq_length")
    do_train: bool = setting(True, "Fine-tune.")
    do_eval: bool = setting(
        True, "Score the dev set every --save_checkpoints_steps and at the end."
    )
    do_predict: bool = setting(False, "Predict the test set.")
    train_batch_size: int = shared_setting("train_batch_size")
    gradient_accumulation_steps: int = shared_setting("gradient_accumulation_steps")
    eval_batch_size: int = shared_setting("eval_batch_size")
    optimizer: str = shared_setting("optimizer")
    learning_rate: Optional[float] = shared_setting("learning_rate")
    num_train_steps: int = shared_setting("num_train_steps")
    num_train_epochs: Optional[float] = setting(
        None,
        "Instead of --num_train_steps: passes over the training rows (steps = int(rows / "
        "train_batch_size * epochs), as the original run_squad).",
        bounds="> 0",
    )
    warmup_steps: Optional[int] = setting(None, "Linear warmup steps (default 10% of training).")
    warmup_proportion: Optional[float] = setting(
        None,
        "Instead of --warmup_steps: this fraction of the training steps (warmup = int(steps * "
        "proportion), as the original run_squad); default 0.1.",
        bounds="in [0, 1)",
    )
    classifier_dropout: float = setting(0.1, "Dropout before the task head.", bounds="in [0, 1)")
    albert_dropout: Optional[float] = setting(
        None,
        "Override the backbone's hidden and attention dropout (Table 14 'ALBERT DR'); "
        "default: the config's.",
        bounds="in [0, 1)",
    )
    weight_decay_rate: float = shared_setting("weight_decay_rate")
    clip_norm: float = shared_setting("clip_norm")
    save_checkpoints_steps: int = shared_setting("save_checkpoints_steps")
    keep_checkpoint_max: int = shared_setting("keep_checkpoint_max")
    steps_per_execution: int = setting(
        1,
        "Steps per tf.function call (tens-hundreds on TPU); must divide --save_checkpoints_steps.",
        bounds=">= 1",
    )
    strategy: str = shared_setting("strategy")
    tpu: Optional[str] = shared_setting("tpu")
    logical_cpus: int = shared_setting("logical_cpus")
    precision: str = shared_setting("precision")
    jit_compile: Optional[bool] = shared_setting("jit_compile")
    recompute: bool = shared_setting("recompute")
    seed: int = shared_setting("seed")
    export_dir: Optional[str] = setting(
        None, "Export the best model here for TF Serving (EXPORT_DIR/<version>)."
    )
    verbose: int = setting(
        1,
        "Keras progress output inside each checkpoint interval: 0 "
        "silent (one log line per interval), 1 progress bar, 2 lines.",
    )


def validate(params):
    """Checks values that need no data or strategy; raises InvalidFlagError naming the flag."""
    p = params
    if not p.output_dir:
        raise InvalidFlagError("--output_dir is required")
    if bool(p.init_checkpoint) == bool(p.preset):
        raise InvalidFlagError(
            "give exactly one of --init_checkpoint (a pretrained model directory) and --preset"
        )
    validate_training_params(p)
    if p.warmup_steps is not None and not 0 <= p.warmup_steps < p.num_train_steps:
        raise InvalidFlagError(
            f"--warmup_steps must be in [0, --num_train_steps), got {p.warmup_steps}"
        )
    if p.warmup_proportion is not None and p.warmup_steps is not None:
        raise InvalidFlagError("give one of --warmup_steps and --warmup_proportion, not both")
    if p.save_checkpoints_steps % p.steps_per_execution:
        raise InvalidFlagError(
            f"--steps_per_execution={p.steps_per_execution} must divide "
            f"--save_checkpoints_steps={p.save_checkpoints_steps}"
        )
    if p.num_train_steps % p.steps_per_execution:
        raise InvalidFlagError(
            f"--steps_per_execution={p.steps_per_execution} must divide "
            f"--num_train_steps={p.num_train_steps}"
        )
    if p.strategy == "mirrored" and p.steps_per_execution > 1:
        raise InvalidFlagError(
            "--steps_per_execution > 1 fails under --strategy=mirrored with "
            "Keras 3.15 (placeholder error in the multi-step loop); use 1"
        )
    if p.verbose not in (0, 1, 2):
        raise InvalidFlagError(f"--verbose must be 0, 1 or 2, got {p.verbose}")
    if not (p.do_train or p.do_eval or p.do_predict):
        raise InvalidFlagError(
            "nothing to do: --do_train, --do_eval and --do_predict are all false"
        )
