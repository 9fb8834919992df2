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
from albert_tf.optim.names import OPTIMIZERS
from albert_tf.precision import FLOAT16_PRECISIONS
from albert_tf.settings import InvalidFlagError, setting

# The tf.distribute strategies of `albert_tf.train.strategy.create_strategy`.
STRATEGIES = ("tpu", "multi_worker", "mirrored", "one_device")


@dataclasses.dataclass
class PretrainingParams:
    """Every setting of a pretraining run; scripts/run_pretraining.py declares one flag per field
    (`albert_tf.settings.define_flags`). `seed=None` runs unseeded (the flag's --seed=-1)."""

    # --- model and data (original names)
    input_file: str = setting(
        None,
        "Training TFRecords from create_pretraining_data.py: globs or "
        "a comma-separated list (gs:// allowed).",
        required=True,
    )
    output_dir: str = setting(
        None,
        "Where checkpoints/, summaries/, eval_results.json and export/ "
        "go (gs:// allowed). A run restarted with the same --output_dir "
        "resumes.",
        required=True,
    )
    overwrite_output_dir: bool = setting(
        False,
        "Start over: first delete the run in --output_dir (checkpoints/, summaries/, "
        "albert_config.json, eval_results.json, export/, run.json; other files stay). Without "
        "it a re-run resumes the run there, and refuses settings that differ from its run.json. "
        "Leave it out of a command that is re-run after preemption.",
    )
    albert_config_file: Optional[str] = setting(
        None,
        "albert_config.json of the model to pretrain (original or Hugging Face dialect). "
        "Exactly one of --albert_config_file and --preset.",
    )
    preset: Optional[str] = setting(
        None,
        "Named model config instead of --albert_config_file, e.g. albert_base_v2, "
        "albert_tiny (see albert_tf.config.list_presets()).",
    )
    init_checkpoint: Optional[str] = setting(
        None,
        "Warm start: a saved albert_tf model directory (e.g. a converted release) or a "
        "training checkpoint (ckpt-N prefix or its directory). Ignored when --output_dir already "
        "holds a checkpoint.",
    )
    init_from_group0: bool = setting(
        False,
        "With --init_checkpoint: copy the source's group 0 "
        "into every group of a model with more groups.",
    )
    spm_model_file: Optional[str] = setting(
        None,
        "SentencePiece model: copied into the export (so fine-tuning finds the vocabulary) "
        "and used by --dynamic_masking.",
    )
    max_seq_length: int = setting(512, "Sequence length of the records (must match the data).")
    max_predictions_per_seq: int = setting(
        20, "Masked positions per sequence (must match the data)."
    )
    dynamic_masking: bool = setting(
        False,
        "Mask on the fly (fresh masks every epoch) instead of "
        "reading the records' masks; needs --spm_model_file.",
    )
    # --- optimisation (original names)
    train_batch_size: int = setting(
        4096, "Global training batch size: the examples of one optimizer update."
    )
    gradient_accumulation_steps: int = setting(
        1,
        "Split each replica's share of --train_batch_size into N micro-batches run one after the "
        "other, and make one optimizer update of their summed gradients (the update of the whole "
        "batch, in the memory of one micro-batch). Steps, schedule and checkpoints count updates.",
    )
    eval_batch_size: int = setting(64, "Global evaluation batch size.")
    optimizer: str = setting(
        "lamb",
        "lamb: the original's LAMB; adamw_original: the original's AdamWeightDecay (no bias "
        "correction); adamw: bias-corrected AdamW.",
        choices=OPTIMIZERS,
    )
    learning_rate: float = setting(0.00176, "Peak learning rate.")
    poly_power: float = setting(
        1.0, "Power of the polynomial decay after warmup (1.0 = linear to 0)."
    )
    num_train_steps: int = setting(125000, "Total training steps.")
    num_warmup_steps: int = setting(3125, "Linear warmup steps (0: none).")
    start_warmup_step: int = setting(
        0, "Step at which warmup starts (the decay uses the raw step)."
    )
    clip_norm: float = setting(
        1.0, "Clip the all-reduced gradient to this global norm (0: no clipping)."
    )
    weight_decay_rate: float = setting(
        0.01, "Decoupled weight decay (LayerNorm and biases excluded)."
    )
    # --- checkpoints, evaluation, loop
    save_checkpoints_steps: int = setting(
        5000, "Save a checkpoint every this many steps (and at the end)."
    )
    keep_checkpoint_max: int = setting(5, "How many recent checkpoints to keep.")
    steps_per_loop: int = setting(
        1000,
        "Steps per host loop (one tf.function call; the "
        "original's iterations_per_loop). One log line and summary "
        "per loop.",
    )
    eval_input_files: Optional[str] = setting(
        None, "Held-out TFRecords for evaluation (globs or comma list)."
    )
    eval_every_steps: int = setting(0, "Evaluate every this many steps (0: only at the end).")
    max_eval_steps: int = setting(100, "At most this many eval batches per evaluation.")
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
    )
    profile_steps: Optional[str] = setting(
        None,
        "A,B: write a TensorBoard profiler trace of steps A to B (1-based) to "
        "<output_dir>/summaries/profile.",
    )
    # --- distribution
    strategy: str = setting(
        "one_device",
        "tf.distribute strategy: tpu (TPUStrategy), multi_worker "
        "(MultiWorkerMirroredStrategy, cluster from TF_CONFIG), mirrored (local GPUs or "
        "--logical_cpus), one_device.",
        choices=STRATEGIES,
    )
    tpu: Optional[str] = setting(
        None,
        "TPU name or grpc:// address for --strategy=tpu (default "
        "$TPU_NAME, else 'local', i.e. this TPU VM).",
    )
    logical_cpus: int = setting(
        0,
        "With --strategy=mirrored on a CPU host: mirror over this many "
        "logical CPU devices (testing and benchmarking).",
    )
    precision: str = setting(
        "auto",
        "Compute precision; auto: mixed_bfloat16 on TPU, on CPUs with AMX/AVX512-BF16 and on "
        "GPUs of compute capability >= 8.0, mixed_float16 on GPUs of compute capability 7.x, "
        "else float32 (albert_tf.precision). Both mixed policies keep float32 variables, "
        "LayerNorm, softmax and losses; mixed_float16 scales the loss dynamically (overflow "
        "steps are skipped and counted) and is not for TPUs.",
        choices=FLOAT16_PRECISIONS,
    )
    jit_compile: Optional[bool] = setting(
        None,
        "XLA-compile the forward/backward pass off TPU (default: on GPU, off on CPU, where "
        "oneDNN is faster).",
    )
    recompute: bool = setting(
        False,
        "Recompute the encoder block in the backward pass instead of keeping its activations "
        "(gradient checkpointing: less memory, about one more forward pass of time).",
    )
    # --- seed, resume, export
    seed: Optional[int] = setting(
        12345, "Seed of the initial weights and the input order (-1: unseeded)."
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
    if bool(p.albert_config_file) == bool(p.preset):
        raise InvalidFlagError(
            "exactly one of --albert_config_file and --preset must be given "
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
    input_paths.check_fields(
        p, ("spm_model_file", "init_checkpoint"), checkpoints=("init_checkpoint",)
    )
    if p.dynamic_masking and not p.spm_model_file:
        raise InvalidFlagError("--dynamic_masking needs --spm_model_file (its vocabulary)")
    positive = (
        "max_seq_length",
        "max_predictions_per_seq",
        "train_batch_size",
        "gradient_accumulation_steps",
        "eval_batch_size",
        "num_train_steps",
        "save_checkpoints_steps",
        "keep_checkpoint_max",
        "steps_per_loop",
        "max_eval_steps",
    )
    for flag in positive:
        if getattr(p, flag) < 1:
            raise InvalidFlagError(f"--{flag} must be >= 1, got {getattr(p, flag)}")
    for flag in ("num_warmup_steps", "start_warmup_step", "eval_every_steps", "logical_cpus"):
        if getattr(p, flag) < 0:
            raise InvalidFlagError(f"--{flag} must be >= 0, got {getattr(p, flag)}")
    for flag in ("learning_rate", "poly_power"):
        if not getattr(p, flag) > 0:
            raise InvalidFlagError(f"--{flag} must be > 0, got {getattr(p, flag)}")
    if p.clip_norm < 0 or p.weight_decay_rate < 0:
        raise InvalidFlagError(
            f"--clip_norm ({p.clip_norm}) and --weight_decay_rate "
            f"({p.weight_decay_rate}) must be >= 0"
        )
    if p.train_batch_size % p.gradient_accumulation_steps:
        raise InvalidFlagError(
            f"--gradient_accumulation_steps={p.gradient_accumulation_steps} must divide "
            f"--train_batch_size={p.train_batch_size}"
        )
    if p.max_loss is not None and not p.max_loss > 0:
        raise InvalidFlagError(f"--max_loss must be > 0 when given, got {p.max_loss}")
    if p.max_consecutive_recoveries < 0:
        raise InvalidFlagError(
            f"--max_consecutive_recoveries must be >= 0, got {p.max_consecutive_recoveries}"
        )
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
    if p.logical_cpus and p.strategy != "mirrored":
        raise InvalidFlagError(
            f"--logical_cpus applies to --strategy=mirrored only (got --strategy={p.strategy})"
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
