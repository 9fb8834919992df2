"""`PretrainingParams`: every setting of a pretraining run, and `validate_params`.

scripts/run_pretraining.py declares one flag per field (`albert_tf.settings.define_flags`) and
validates them, input paths included, before TensorFlow loads: this module imports none of it
(`albert_tf.train.runner` re-exports both names).

>>> params = PretrainingParams(input_file="train-*", output_dir="/tmp/run", preset="nope")
>>> validate_params(params)
Traceback (most recent call last):
...
albert_tf.settings.InvalidFlagError: --preset='nope' is not one of ...
"""

import dataclasses
from typing import Optional

from albert_tf import input_paths
from albert_tf.config import list_presets
from albert_tf.precision import FLOAT16_PRECISIONS
from albert_tf.settings import InvalidFlagError, setting
from albert_tf.train.training_params import shared_setting, validate_training_params

# The tf.distribute strategies of `albert_tf.train.strategy.create_strategy`.
STRATEGIES = ("tpu", "multi_worker", "mirrored", "one_device")


@dataclasses.dataclass
class PretrainingParams:
    """Every setting of a pretraining run; scripts/run_pretraining.py declares one flag per field
    (`albert_tf.settings.define_flags`). `seed=None` runs unseeded (the flag's --seed=-1).
    `shared_setting` fields are the ones fine-tuning has too (`albert_tf.train.training_params`:
    their bounds, unless declared here)."""

    # --- model and data (original names)
    input_file: str = setting(
        None,
        "Training TFRecords from create_pretraining_data.py: globs or "
        "a comma-separated list (gs:// allowed).",
        required=True,
    )
    output_dir: str = shared_setting(
        "output_dir",
        help_text="Where checkpoints/, summaries/, eval_results.json and export/ "
        "go (gs:// allowed). A run restarted with the same --output_dir "
        "resumes.",
    )
    overwrite_output_dir: bool = shared_setting(
        "overwrite_output_dir",
        help_text="Start over: first delete the run in --output_dir (checkpoints/, summaries/, "
        "albert_config.json, eval_results.json, export/, run.json; other files stay). Without "
        "it a re-run resumes the run there, and refuses settings that differ from its run.json. "
        "Leave it out of a command that is re-run after preemption.",
    )
    albert_config_file: Optional[str] = setting(
        None,
        "albert_config.json of the model to pretrain (original or Hugging Face dialect). "
        "Exactly one of --albert_config_file and --preset, or neither with --init_checkpoint "
        "(continued pretraining: its model's config).",
    )
    preset: Optional[str] = shared_setting(
        "preset",
        help_text="Named model config instead of --albert_config_file, e.g. albert_base_v2, "
        "albert_tiny (see albert_tf.config.list_presets()).",
    )
    init_checkpoint: Optional[str] = shared_setting(
        "init_checkpoint",
        help_text="Warm start: a saved albert_tf model directory, a model by name (albert_base_v2, "
        "hf://<repo_id>, an https:// or gs:// address, a TF Hub handle; fetched and cached) or a "
        "training checkpoint (ckpt-N prefix or its directory). Ignored when --output_dir already "
        "holds a checkpoint.",
    )
    init_from_group0: bool = setting(
        False,
        "With --init_checkpoint: copy the source's group 0 "
        "into every group of a model with more groups.",
    )
    spm_model_file: Optional[str] = shared_setting(
        "spm_model_file",
        help_text=(
            "SentencePiece model: copied into the export (so fine-tuning finds the vocabulary) "
            "and used by --dynamic_masking."
        ),
    )
    max_seq_length: int = shared_setting(
        "max_seq_length",
        help_text="Sequence length of the records (must match the data).",
        bounds=">= 1",
    )
    max_predictions_per_seq: int = setting(
        20, "Masked positions per sequence (must match the data).", bounds=">= 1"
    )
    dynamic_masking: bool = setting(
        False,
        "Mask on the fly (fresh masks every epoch) instead of "
        "reading the records' masks; needs --spm_model_file.",
    )
    # --- optimisation (original names)
    train_batch_size: int = shared_setting("train_batch_size", default=4096)
    gradient_accumulation_steps: int = shared_setting(
        "gradient_accumulation_steps",
        help_text=(
            "Split each replica's share of --train_batch_size into N micro-batches run one after "
            "the other, and make one optimizer update of their summed gradients (the update of the "
            "whole batch, in the memory of one micro-batch). Steps, schedule and checkpoints count "
            "updates."
        ),
    )
    eval_batch_size: int = shared_setting(
        "eval_batch_size", default=64, help_text="Global evaluation batch size."
    )
    optimizer: str = shared_setting(
        "optimizer",
        default="lamb",
        help_text=(
            "lamb: the original's LAMB; adamw_original: the original's AdamWeightDecay (no bias "
            "correction); adamw: bias-corrected AdamW."
        ),
    )
    learning_rate: float = shared_setting(
        "learning_rate", default=0.00176, help_text="Peak learning rate."
    )
    poly_power: float = setting(
        1.0, "Power of the polynomial decay after warmup (1.0 = linear to 0).", bounds="> 0"
    )
    num_train_steps: int = shared_setting(
        "num_train_steps", default=125000, help_text="Total training steps."
    )
    num_warmup_steps: int = setting(3125, "Linear warmup steps (0: none).", bounds=">= 0")
    start_warmup_step: int = setting(
        0, "Step at which warmup starts (the decay uses the raw step).", bounds=">= 0"
    )
    clip_norm: float = shared_setting(
        "clip_norm", help_text="Clip the all-reduced gradient to this global norm (0: no clipping)."
    )
    weight_decay_rate: float = shared_setting(
        "weight_decay_rate", help_text="Decoupled weight decay (LayerNorm and biases excluded)."
    )
    # --- checkpoints, evaluation, loop
    save_checkpoints_steps: int = shared_setting(
        "save_checkpoints_steps",
        default=5000,
        help_text="Save a checkpoint every this many steps (and at the end).",
    )
    keep_checkpoint_max: int = shared_setting(
        "keep_checkpoint_max", default=5, help_text="How many recent checkpoints to keep."
    )
    steps_per_loop: int = setting(
        1000,
        "Steps per host loop (one tf.function call; the "
        "original's iterations_per_loop). One log line and summary "
        "per loop.",
        bounds=">= 1",
    )
    eval_input_files: Optional[str] = setting(
        None, "Held-out TFRecords for evaluation (globs or comma list)."
    )
    eval_every_steps: int = setting(
        0, "Evaluate every this many steps (0: only at the end).", bounds=">= 0"
    )
    max_eval_steps: int = setting(
        100, "At most this many eval batches per evaluation.", bounds=">= 1"
    )
    # --- divergence recovery and profiling
    max_loss: Optional[float] = setting(
        None,
        "Treat a host loop whose mean loss exceeds this as a divergence, like a NaN/Inf loss "
        "(default: only NaN/Inf).",
    )
    max_consecutive_recoveries: int = setting(
        3,
        "On a divergence, restore the newest checkpoint, skip the batches read since and go "
        "on, at most this many times with no checkpoint saved in between; then stop (exit 3). "
        "0: stop at the first.",
        bounds=">= 0",
    )
    profile_steps: Optional[str] = setting(
        None,
        "A,B: write a TensorBoard profiler trace of steps A to B (1-based) to "
        "<output_dir>/summaries/profile.",
    )
    # --- distribution
    strategy: str = shared_setting(
        "strategy",
        help_text="tf.distribute strategy: tpu (TPUStrategy), multi_worker "
        "(MultiWorkerMirroredStrategy, cluster from TF_CONFIG), mirrored (local GPUs or "
        "--logical_cpus), one_device.",
        choices=STRATEGIES,
    )
    tpu: Optional[str] = shared_setting(
        "tpu",
        help_text="TPU name or grpc:// address for --strategy=tpu (default "
        "$TPU_NAME, else 'local', i.e. this TPU VM).",
    )
    logical_cpus: int = shared_setting(
        "logical_cpus",
        help_text="With --strategy=mirrored on a CPU host: mirror over this many "
        "logical CPU devices (testing and benchmarking).",
        bounds=">= 0",
    )
    precision: str = shared_setting(
        "precision",
        help_text=(
            "Compute precision; auto: mixed_bfloat16 on TPU, on CPUs with AMX/AVX512-BF16 and on "
            "GPUs of compute capability >= 8.0, mixed_float16 on GPUs of compute capability 7.x, "
            "else float32 (albert_tf.precision). Both mixed policies keep float32 variables, "
            "LayerNorm, softmax and losses; mixed_float16 scales the loss dynamically (overflow "
            "steps are skipped and counted) and is not for TPUs."
        ),
        choices=FLOAT16_PRECISIONS,
    )
    jit_compile: Optional[bool] = shared_setting(
        "jit_compile",
        help_text=(
            "XLA-compile the forward/backward pass off TPU (default: on GPU, off on CPU, where "
            "oneDNN is faster)."
        ),
    )
    recompute: bool = shared_setting("recompute")
    # --- seed, resume, export
    seed: Optional[int] = shared_setting(
        "seed", help_text="Seed of the initial weights and the input order (-1: unseeded)."
    )
    input_resume: str = setting(
        "skip",
        "On resume, skip the input already consumed (exact) or start a fresh order "
        "seeded by the step (no re-reading; for huge runs).",
        choices=("skip", "reshuffle"),
    )
    export: bool = setting(
        True, "Save the pretrained model for fine-tuning to <output_dir>/export at the end."
    )


def validate_params(params):
    """Checks values that need no strategy; raises InvalidFlagError naming the flag."""
    p = params
    if (p.albert_config_file and p.preset) or not (
        p.albert_config_file or p.preset or p.init_checkpoint
    ):
        raise InvalidFlagError(
            "exactly one of --albert_config_file and --preset must be given, or neither with "
            "--init_checkpoint (its model's config) "
            f"(got --albert_config_file={p.albert_config_file!r}, --preset={p.preset!r})"
        )
    if p.preset and p.preset not in list_presets():
        raise InvalidFlagError(f"--preset={p.preset!r} is not one of {', '.join(list_presets())}")
    if p.albert_config_file:
        input_paths.check_exists("albert_config_file", p.albert_config_file)
    for flag in ("input_file", "output_dir"):
        if not getattr(p, flag):
            raise InvalidFlagError(f"--{flag} is required")
    for flag in ("input_file", "eval_input_files"):
        input_paths.check_matches(flag, getattr(p, flag) or "")
    input_paths.check_fields(p, ("spm_model_file",))
    if p.init_checkpoint:  # a name, address or handle is fetched once TensorFlow loads
        from albert_tf import sources

        sources.check_spec("init_checkpoint", p.init_checkpoint, checkpoint=True)
    if p.dynamic_masking and not p.spm_model_file:
        raise InvalidFlagError("--dynamic_masking needs --spm_model_file (its vocabulary)")
    validate_training_params(p)
    if p.max_loss is not None and not p.max_loss > 0:
        raise InvalidFlagError(f"--max_loss must be > 0 when given, got {p.max_loss}")
    parse_profile_steps(p.profile_steps, p.num_train_steps)
    if p.max_predictions_per_seq > p.max_seq_length:
        raise InvalidFlagError(
            f"--max_predictions_per_seq ({p.max_predictions_per_seq}) exceeds "
            f"--max_seq_length ({p.max_seq_length})"
        )
    choices = {
        f.name: f.metadata["choices"]
        for f in dataclasses.fields(PretrainingParams)
        if f.metadata["choices"]
    }
    for flag, allowed in choices.items():
        if getattr(p, flag) not in allowed:
            raise InvalidFlagError(
                f"--{flag}={getattr(p, flag)!r} is not one of {', '.join(allowed)}"
            )
    if p.precision == "mixed_float16" and p.strategy == "tpu":
        raise InvalidFlagError(
            "--precision=mixed_float16 is not for --strategy=tpu (TPUs compute in bfloat16: use "
            "mixed_bfloat16 or auto)"
        )


def parse_profile_steps(text, num_train_steps):
    """--profile_steps "A,B" as (A, B) with 1 <= A <= B <= num_train_steps; None for None or "".

    >>> parse_profile_steps("5,8", 10)
    (5, 8)
    >>> parse_profile_steps("8,5", 10)
    Traceback (most recent call last):
    ...
    albert_tf.settings.InvalidFlagError: --profile_steps='8,5' must be A,B with 1 <= A <= B <= ...
    """
    if not text:
        return None
    parts = text.split(",")
    try:
        first, last = (int(part) for part in parts)
    except ValueError:
        first, last = 0, -1
    if not 1 <= first <= last <= num_train_steps:
        raise InvalidFlagError(
            f"--profile_steps={text!r} must be A,B with 1 <= A <= B <= --num_train_steps "
            f"({num_train_steps})"
        )
    return first, last
