"""The settings pretraining and fine-tuning share: one declaration each, with its bounds.

`FinetuneParams` and `PretrainingParams` place each shared field among their own with
`shared_setting(name)` (pretraining overriding the defaults and help it words otherwise), so its
bounds are declared once, in `SHARED_SETTINGS`, and checked by `albert_tf.settings.check_bounds`.
(Not a dataclass base class: that would put the shared fields first, and a run's field order is
the order in which a resumed run's refused differences are named.) `validate_training_params`
holds the checks both share; `check_batch_sizes` the one that needs the strategy.

>>> import dataclasses
>>> @dataclasses.dataclass
... class Params:
...     train_batch_size: int = shared_setting("train_batch_size")
...     gradient_accumulation_steps: int = shared_setting("gradient_accumulation_steps")
...     clip_norm: float = shared_setting("clip_norm")
...     weight_decay_rate: float = shared_setting("weight_decay_rate")
...     logical_cpus: int = shared_setting("logical_cpus")
...     strategy: str = shared_setting("strategy")
>>> validate_training_params(Params(train_batch_size=0))
Traceback (most recent call last):
...
albert_tf.settings.InvalidFlagError: --train_batch_size must be >= 1, got 0
"""

from albert_tf.optim.names import OPTIMIZERS
from albert_tf.precision import PRECISIONS
from albert_tf.settings import InvalidFlagError, check_bounds, setting

#: The strategies of one process (Keras `fit` runs no multi-worker strategy).
SINGLE_WORKER_STRATEGIES = ("one_device", "mirrored", "tpu")


#: The declaration (`albert_tf.settings.setting` arguments) of each setting pretraining and
#: fine-tuning share; defaults and help are fine-tuning's.
SHARED_SETTINGS = {
    "output_dir": dict(
        default=None,
        help_text="Checkpoints, TensorBoard logs, eval_results.json, "
        "model.keras; re-running the same command resumes.",
        required=True,
    ),
    "overwrite_output_dir": dict(
        default=False,
        help_text=(
            "Start over: first delete the run in --output_dir (checkpoints/, logs/, run.json, "
            "eval_results.json, best.weights.h5, model.keras, finetune.json and the task's "
            "prediction files; other files stay). Without it a re-run resumes the run there, and "
            "refuses settings that differ from its run.json."
        ),
    ),
    "init_checkpoint": dict(
        default=None,
        help_text=(
            "Pretrained model directory (written by albert_tf.save, run_pretraining's export/ "
            "or convert_checkpoint.py)."
        ),
    ),
    "preset": dict(
        default=None,
        help_text="Start from a randomly initialised preset instead (for smoke tests).",
    ),
    "spm_model_file": dict(
        default=None,
        help_text="SentencePiece model (default: the model directory's spm.model).",
    ),
    "max_seq_length": dict(
        default=512,
        help_text="Maximum tokens per sequence incl. [CLS]/[SEP].",
        bounds="in [3, 512]",
    ),
    "train_batch_size": dict(
        default=32,
        help_text="Global training batch size: the examples of one optimizer update.",
        bounds=">= 1",
    ),
    "gradient_accumulation_steps": dict(
        default=1,
        help_text=(
            "Split each training batch into N micro-batches of train_batch_size / N examples run "
            "one after the other, and make one optimizer update of their gradients (the update of "
            "the whole batch, in the memory of one micro-batch). Steps, schedule and intervals "
            "count updates."
        ),
        bounds=">= 1",
    ),
    "eval_batch_size": dict(
        default=32,
        help_text="Evaluation and prediction batch size.",
        bounds=">= 1",
    ),
    "optimizer": dict(
        default="adamw",
        help_text=(
            "adamw: bias-corrected AdamW (the default, chosen by the study in docs/finetune.md); "
            "adamw_original: the original's AdamWeightDecay (no bias correction, to reproduce the "
            "paper; the original scripts' --optimizer=adamw is this one); lamb: the original's "
            "LAMB. LayerNorm weights and biases get no weight decay."
        ),
        choices=OPTIMIZERS,
    ),
    "learning_rate": dict(
        default=None,
        help_text=(
            "Peak learning rate (linear warmup, then linear decay). Default: by model size and "
            "--optimizer (albert_tf.optim.learning_rates; adamw: 1e-3 below base size, 2e-5 for "
            "base and large, 1e-5 for xlarge and xxlarge), logged."
        ),
        bounds="> 0",
    ),
    "num_train_steps": dict(
        default=1000,
        help_text="Optimizer steps, exactly (Table 14 'Train steps').",
        bounds=">= 1",
    ),
    "weight_decay_rate": dict(
        default=0.01,
        help_text="Decoupled weight decay of the optimizer.",
    ),
    "clip_norm": dict(
        default=1.0,
        help_text="Global-norm gradient clipping.",
    ),
    "save_checkpoints_steps": dict(
        default=1000,
        help_text="Evaluate and checkpoint every N steps.",
        bounds=">= 1",
    ),
    "keep_checkpoint_max": dict(
        default=3,
        help_text="How many recent training checkpoints to keep.",
        bounds=">= 1",
    ),
    "strategy": dict(
        default="one_device",
        help_text="Distribution strategy (Keras fit does not support multi-worker).",
        choices=SINGLE_WORKER_STRATEGIES,
    ),
    "tpu": dict(
        default=None,
        help_text="TPU name or address for --strategy=tpu.",
    ),
    "logical_cpus": dict(
        default=0,
        help_text="Mirror over this many logical CPUs (testing).",
    ),
    "precision": dict(
        default="auto",
        help_text=(
            "Compute dtype policy; auto: mixed_bfloat16 on TPU, on CPUs with AMX/AVX512-BF16 and "
            "on GPUs of compute capability >= 8.0, else float32 (albert_tf.precision)."
        ),
        choices=PRECISIONS,
    ),
    "jit_compile": dict(
        default=None,
        help_text="XLA-compile the train step (default: on GPU and TPU, off on CPU).",
    ),
    "recompute": dict(
        default=False,
        help_text=(
            "Recompute the encoder block in the backward pass instead of keeping its activations "
            "(gradient checkpointing: less memory, about one more forward pass of time)."
        ),
    ),
    "seed": dict(
        default=12345,
        help_text="Random seed (initialisation, dropout, data order).",
    ),
}


def shared_setting(name, **overrides):
    """The dataclass field of the shared setting `name`, with `overrides` of its `setting`
    arguments (default, help_text, choices, required, bounds); unless overridden, the bounds
    are the shared ones.

    >>> shared_setting("train_batch_size", default=4096).metadata["bounds"]
    '>= 1'
    """
    return setting(**{**SHARED_SETTINGS[name], **overrides})


def validate_training_params(params):
    """Checks the bounds of every field and the rules between shared fields; raises
    InvalidFlagError naming the flag."""
    p = params
    check_bounds(p)
    if p.train_batch_size % p.gradient_accumulation_steps:
        raise InvalidFlagError(
            f"--gradient_accumulation_steps={p.gradient_accumulation_steps} must divide "
            f"--train_batch_size={p.train_batch_size}"
        )
    if p.clip_norm < 0 or p.weight_decay_rate < 0:
        raise InvalidFlagError(
            f"--clip_norm ({p.clip_norm}) and --weight_decay_rate "
            f"({p.weight_decay_rate}) must be >= 0"
        )
    if p.logical_cpus and p.strategy != "mirrored":
        raise InvalidFlagError(
            f"--logical_cpus applies to --strategy=mirrored only (got --strategy={p.strategy})"
        )


def check_batch_sizes(params, strategy):
    """Batch sizes must split evenly over the replicas of `strategy` (and the training batch of
    each replica over the accumulation steps)."""
    replicas = strategy.num_replicas_in_sync
    for flag in ("train_batch_size", "eval_batch_size"):
        if getattr(params, flag) % replicas:
            raise InvalidFlagError(
                f"--{flag}={getattr(params, flag)} is not divisible by the "
                f"{replicas} replicas of --strategy={params.strategy}"
            )
    steps = params.gradient_accumulation_steps
    if params.train_batch_size % (replicas * steps):
        raise InvalidFlagError(
            f"--train_batch_size={params.train_batch_size} is not divisible by "
            f"--gradient_accumulation_steps={steps} x the {replicas} replicas of "
            f"--strategy={params.strategy}"
        )
