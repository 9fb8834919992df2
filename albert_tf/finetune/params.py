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

from albert_tf.optim.names import OPTIMIZERS
from albert_tf.precision import PRECISIONS
from albert_tf.settings import InvalidFlagError, setting

STRATEGIES = ("one_device", "mirrored", "tpu")


@dataclasses.dataclass
class FinetuneParams:
    """Model, optimization, schedule, distribution and output settings (see each field's help)."""

    output_dir: Optional[str] = setting(
        None,
        "Checkpoints, TensorBoard logs, eval_results.json, "
        "model.keras; re-running the same command resumes.",
        required=True,
    )
    overwrite_output_dir: bool = setting(
        False,
        "Start over: first delete the run in --output_dir (checkpoints/, logs/, run.json, "
        "eval_results.json, best.weights.h5, model.keras, finetune.json and the task's "
        "prediction files; other files stay). Without it a re-run resumes the run there, and "
        "refuses settings that differ from its run.json.",
    )
    init_checkpoint: Optional[str] = setting(
        None,
        "Pretrained model directory (written by albert_tf.save, run_pretraining's export/ "
        "or convert_checkpoint.py).",
    )
    preset: Optional[str] = setting(
        None, "Start from a randomly initialised preset instead (for smoke tests)."
    )
    spm_model_file: Optional[str] = setting(
        None, "SentencePiece model (default: the model directory's spm.model)."
    )
    do_lower_case: bool = setting(True, "Lowercase text (True for the released models).")
    max_seq_length: int = setting(512, "Maximum tokens per sequence incl. [CLS]/[SEP].")
    do_train: bool = setting(True, "Fine-tune.")
    do_eval: bool = setting(
        True, "Score the dev set every --save_checkpoints_steps and at the end."
    )
    do_predict: bool = setting(False, "Predict the test set.")
    train_batch_size: int = setting(
        32, "Global training batch size: the examples of one optimizer update."
    )
    gradient_accumulation_steps: int = setting(
        1,
        "Split each training batch into N micro-batches of train_batch_size / N examples run "
        "one after the other, and make one optimizer update of their gradients (the update of the "
        "whole batch, in the memory of one micro-batch). Steps, schedule and intervals count "
        "updates.",
    )
    eval_batch_size: int = setting(32, "Evaluation and prediction batch size.")
    optimizer: str = setting(
        "adamw",
        "adamw: bias-corrected AdamW (the default, chosen by the study in docs/finetune.md); "
        "adamw_original: the original's AdamWeightDecay (no bias correction, to reproduce the "
        "paper; the original scripts' --optimizer=adamw is this one); lamb: the original's LAMB. "
        "LayerNorm weights and biases get no weight decay.",
        choices=OPTIMIZERS,
    )
    learning_rate: Optional[float] = setting(
        None,
        "Peak learning rate (linear warmup, then linear decay). Default: by model size and "
        "--optimizer (albert_tf.optim.learning_rates; adamw: 1e-3 below base size, 2e-5 for "
        "base and large, 1e-5 for xlarge and xxlarge), logged.",
    )
    num_train_steps: int = setting(1000, "Optimizer steps, exactly (Table 14 'Train steps').")
    num_train_epochs: Optional[float] = setting(
        None,
        "Instead of --num_train_steps: passes over the training rows (steps = int(rows / "
        "train_batch_size * epochs), as the original run_squad).",
    )
    warmup_steps: Optional[int] = setting(None, "Linear warmup steps (default 10% of training).")
    warmup_proportion: Optional[float] = setting(
        None,
        "Instead of --warmup_steps: this fraction of the training steps (warmup = int(steps * "
        "proportion), as the original run_squad); default 0.1.",
    )
    classifier_dropout: float = setting(0.1, "Dropout before the task head.")
    albert_dropout: Optional[float] = setting(
        None,
        "Override the backbone's hidden and attention dropout (Table 14 'ALBERT DR'); "
        "default: the config's.",
    )
    weight_decay_rate: float = setting(0.01, "Decoupled weight decay of the optimizer.")
    clip_norm: float = setting(1.0, "Global-norm gradient clipping.")
    save_checkpoints_steps: int = setting(1000, "Evaluate and checkpoint every N steps.")
    keep_checkpoint_max: int = setting(3, "How many recent training checkpoints to keep.")
    steps_per_execution: int = setting(
        1,
        "Steps per tf.function call (tens-hundreds on TPU); must divide --save_checkpoints_steps.",
    )
    strategy: str = setting(
        "one_device",
        "Distribution strategy (Keras fit does not support multi-worker).",
        choices=STRATEGIES,
    )
    tpu: Optional[str] = setting(None, "TPU name or address for --strategy=tpu.")
    logical_cpus: int = setting(0, "Mirror over this many logical CPUs (testing).")
    precision: str = setting(
        "auto",
        "Compute dtype policy; auto: mixed_bfloat16 on TPU, on CPUs with AMX/AVX512-BF16 and on "
        "GPUs of compute capability >= 8.0, else float32 (albert_tf.precision).",
        choices=PRECISIONS,
    )
    jit_compile: Optional[bool] = setting(
        None, "XLA-compile the train step (default: on GPU and TPU, off on CPU)."
    )
    recompute: bool = setting(
        False,
        "Recompute the encoder block in the backward pass instead of keeping its activations "
        "(gradient checkpointing: less memory, about one more forward pass of time).",
    )
    seed: int = setting(12345, "Random seed (initialisation, dropout, data order).")
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
    for flag in (
        "train_batch_size",
        "gradient_accumulation_steps",
        "eval_batch_size",
        "num_train_steps",
        "save_checkpoints_steps",
        "steps_per_execution",
        "keep_checkpoint_max",
    ):
        if getattr(p, flag) < 1:
            raise InvalidFlagError(f"--{flag} must be >= 1, got {getattr(p, flag)}")
    if p.train_batch_size % p.gradient_accumulation_steps:
        raise InvalidFlagError(
            f"--gradient_accumulation_steps={p.gradient_accumulation_steps} must divide "
            f"--train_batch_size={p.train_batch_size}"
        )
    if p.num_train_epochs is not None and not p.num_train_epochs > 0:
        raise InvalidFlagError(f"--num_train_epochs must be > 0, got {p.num_train_epochs}")
    if p.learning_rate is not None and not p.learning_rate > 0:
        raise InvalidFlagError(f"--learning_rate must be > 0, got {p.learning_rate}")
    if not 3 <= p.max_seq_length <= 512:
        raise InvalidFlagError(f"--max_seq_length must be in [3, 512], got {p.max_seq_length}")
    if p.warmup_steps is not None and not 0 <= p.warmup_steps < p.num_train_steps:
        raise InvalidFlagError(
            f"--warmup_steps must be in [0, --num_train_steps), got {p.warmup_steps}"
        )
    if p.warmup_proportion is not None:
        if p.warmup_steps is not None:
            raise InvalidFlagError("give one of --warmup_steps and --warmup_proportion, not both")
        if not 0.0 <= p.warmup_proportion < 1.0:
            raise InvalidFlagError(
                f"--warmup_proportion must be in [0, 1), got {p.warmup_proportion}"
            )
    for flag in ("classifier_dropout", "albert_dropout"):
        value = getattr(p, flag)
        if value is not None and not 0.0 <= value < 1.0:
            raise InvalidFlagError(f"--{flag} must be in [0, 1), got {value}")
    if p.clip_norm < 0 or p.weight_decay_rate < 0:
        raise InvalidFlagError(
            f"--clip_norm ({p.clip_norm}) and --weight_decay_rate "
            f"({p.weight_decay_rate}) must be >= 0"
        )
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
    if p.logical_cpus and p.strategy != "mirrored":
        raise InvalidFlagError(
            f"--logical_cpus applies to --strategy=mirrored only (got --strategy={p.strategy})"
        )
    if p.verbose not in (0, 1, 2):
        raise InvalidFlagError(f"--verbose must be 0, 1 or 2, got {p.verbose}")
    if not (p.do_train or p.do_eval or p.do_predict):
        raise InvalidFlagError(
            "nothing to do: --do_train, --do_eval and --do_predict are all false"
        )
