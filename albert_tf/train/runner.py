"""`run_pretraining`: ALBERT pretraining from flags to exported backbone, under any strategy.

The pieces: `strategy` (which tf.distribute strategy, who is chief), `task` (model, data, MLM +
SOP loss, metrics), `loop` (the strategy-agnostic training steps), `controller` (the outer loop:
logs, summaries, evaluation, checkpoints, preemption), `checkpointing`, `summaries`,
`warm_start`. This module wires them together:

1. resolve the strategy and check the batch sizes against its replica count;
2. compare the run with the one recorded in `output_dir/run.json` (every setting that changes
   the weights, the input files, the init checkpoint: a difference is refused naming them;
   `MAY_DIFFER` lists the settings that may change) or, with `overwrite_output_dir`, remove that
   run first (`albert_tf.train.run_record`);
3. build the model, LAMB (or AdamW) with the warmup + polynomial-decay schedule, all inside
   `strategy.scope()`, and build the optimizer before anything is restored; restore the newest
   checkpoint of `output_dir` (exact resume) or else warm-start from `init_checkpoint`;
4. train with the `Controller` in loops of `steps_per_loop` steps, logging one line per loop,
   writing TensorBoard summaries, saving every `save_checkpoints_steps` and evaluating every
   `eval_every_steps`;
5. final evaluation (`eval_results.json`, atomically) and the backbone + heads exported for
   fine-tuning to `output_dir/export` (with the SentencePiece model when given).

Input position on resume: the training input is rebuilt with the same seed and skips the
batches that the restored step already consumed (`input_resume="skip"`: exact, so an interrupted
run ends with the same weights as an uninterrupted one; the skip re-reads those records, which
is cheap on CPU/GPU scales). `input_resume="reshuffle"` starts a fresh order seeded by
(seed, step) instead, at no cost, as the original did (its input_fn restarted from scratch).

Outputs under `output_dir`: checkpoints/ (ckpt-N), summaries/{train,eval}/ (TensorBoard),
albert_config.json, eval_results.json, export/, run.json (`RUN_OUTPUTS`).

>>> params = PretrainingParams(input_file="data/train-*.tfrecord", output_dir="/tmp/run",
...                            preset="albert_tiny", max_seq_length=128)  # doctest: +SKIP
>>> result = run_pretraining(params)                                        # doctest: +SKIP
>>> result["global_step"] == params.num_train_steps                          # doctest: +SKIP
True
"""

import dataclasses
import os
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf import precision as precision_lib
from albert_tf.config import AlbertConfig, list_presets
from albert_tf.data import input_checks
from albert_tf.logs import show_progress
from albert_tf.optim import OPTIMIZERS, WarmupPolynomialDecay, create_optimizer
from albert_tf.precision import PRECISIONS
from albert_tf.settings import InvalidFlagError, setting
from albert_tf.train import checkpointing, run_record, summaries
from albert_tf.train import strategy as strategy_lib
from albert_tf.train.controller import Controller, NonFiniteLossError
from albert_tf.train.loop import Trainer
from albert_tf.train.task import PretrainingTask
from albert_tf.train.warm_start import warm_start

__all__ = ["PretrainingParams", "run_pretraining", "NonFiniteLossError"]


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
    train_batch_size: int = setting(4096, "Global training batch size (split over the replicas).")
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
    # --- distribution
    strategy: str = setting(
        "one_device",
        "tf.distribute strategy: tpu (TPUStrategy), multi_worker "
        "(MultiWorkerMirroredStrategy, cluster from TF_CONFIG), mirrored (local GPUs or "
        "--logical_cpus), one_device.",
        choices=strategy_lib.STRATEGIES,
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
        "GPUs of compute capability >= 8.0, else float32 (albert_tf.precision). mixed_bfloat16 "
        "keeps float32 variables, LayerNorm, softmax and losses.",
        choices=PRECISIONS,
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


# What a run writes into --output_dir: what --overwrite_output_dir removes (other files stay).
RUN_OUTPUTS = (
    "checkpoints",
    "summaries",
    "albert_config.json",
    "eval_results.json",
    "export",
    run_record.RUN_FILE,
)
# Settings not recorded in run.json: where the run lives and whether to start it over.
NOT_RECORDED = ("output_dir", "overwrite_output_dir")
# Settings a re-run may change: they do not change the trained weights. Every other
# PretrainingParams field, the model config and the input files (names and sizes), the init
# checkpoint and the SentencePiece model (contents) must equal run.json's.
# - eval_input_files, eval_batch_size, eval_every_steps, max_eval_steps: evaluation only (the
#   final evaluation, eval_results.json, is made again by every invocation);
# - save_checkpoints_steps, keep_checkpoint_max, steps_per_loop, export: when checkpoints, log
#   lines and summaries are written, how many are kept, whether the model is exported;
# - strategy, tpu, logical_cpus, jit_compile, recompute: how the same steps run (speed and
#   memory; float rounding may differ slightly, but moving a preempted run to other hardware
#   is a legitimate resume).
MAY_DIFFER = (
    "eval_input_files",
    "eval_batch_size",
    "eval_every_steps",
    "max_eval_steps",
    "save_checkpoints_steps",
    "keep_checkpoint_max",
    "steps_per_loop",
    "export",
    "strategy",
    "tpu",
    "logical_cpus",
    "jit_compile",
    "recompute",
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
    if p.albert_config_file and not tf.io.gfile.exists(p.albert_config_file):
        raise InvalidFlagError(f"--albert_config_file={p.albert_config_file!r}: file not found")
    for flag in ("input_file", "output_dir"):
        if not getattr(p, flag):
            raise InvalidFlagError(f"--{flag} is required")
    for flag in ("input_file", "eval_input_files"):
        value = getattr(p, flag)
        for pattern in [s.strip() for s in (value or "").split(",") if s.strip()]:
            if not tf.io.gfile.glob(pattern):
                raise InvalidFlagError(f"--{flag}: no file matches {pattern!r}")
    for flag in ("spm_model_file", "init_checkpoint"):
        value = getattr(p, flag)
        if value and not tf.io.gfile.exists(value) and not tf.io.gfile.exists(value + ".index"):
            raise InvalidFlagError(f"--{flag}={value!r}: not found")
    if p.dynamic_masking and not p.spm_model_file:
        raise InvalidFlagError("--dynamic_masking needs --spm_model_file (its vocabulary)")
    positive = (
        "max_seq_length",
        "max_predictions_per_seq",
        "train_batch_size",
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
    if p.logical_cpus and p.strategy != "mirrored":
        raise InvalidFlagError(
            f"--logical_cpus applies to --strategy=mirrored only (got --strategy={p.strategy})"
        )


def check_batch_sizes(params, strategy):
    """Batch sizes must split evenly over the replicas."""
    replicas = strategy.num_replicas_in_sync
    for flag in ("train_batch_size", "eval_batch_size"):
        if getattr(params, flag) % replicas:
            raise InvalidFlagError(
                f"--{flag}={getattr(params, flag)} is not divisible by the "
                f"{replicas} replicas of --strategy={params.strategy}"
            )


def load_config(params):
    if params.albert_config_file:
        return AlbertConfig.from_json_file(params.albert_config_file)
    return AlbertConfig.from_preset(params.preset)


def _init_checkpoint_fingerprint(path):
    """The content fingerprint of --init_checkpoint: a model directory's files, or a training
    checkpoint's index (which holds a checksum of every tensor)."""
    from albert_tf.train.warm_start import checkpoint_prefix

    prefix = checkpoint_prefix(path)
    if prefix is not None:
        return run_record.files_fingerprint([prefix + ".index"])
    return run_record.files_fingerprint(run_record.directory_files(path))


def run_record_of(params, config):
    """The run record (`albert_tf.train.run_record`) of a run: its model config, settings
    (`params` with the precision resolved) and the fingerprints of its input files (names and
    sizes: they are too large to read at every start), init checkpoint and SentencePiece model."""
    from albert_tf.data.pipeline import list_files

    p = params
    return {
        "version": run_record.VERSION,
        "model": config.to_dict(),
        "settings": run_record.settings_of(p, skip=NOT_RECORDED),
        "data": {
            "input_files": run_record.files_fingerprint(list_files(p.input_file), content=False),
            "init_checkpoint_content": (
                _init_checkpoint_fingerprint(p.init_checkpoint) if p.init_checkpoint else None
            ),
            "spm_model_content": (
                run_record.files_fingerprint([p.spm_model_file]) if p.spm_model_file else None
            ),
        },
    }


def distributed_dataset(strategy, task, files, global_batch, is_training, seed, skip_steps=0):
    """`task.dataset` split over the replicas (per-replica batch from the global one), skipping
    the batches of the first `skip_steps` steps."""

    def dataset_fn(context):
        dataset = task.dataset(
            files,
            context.get_per_replica_batch_size(global_batch),
            is_training=is_training,
            input_context=context,
            seed=seed,
        )
        if skip_steps:
            # Each step takes one batch per replica fed by this pipeline.
            dataset = dataset.skip(
                skip_steps * (context.num_replicas_in_sync // context.num_input_pipelines)
            )
        return dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


class _Runner:
    """State of one run; `run_pretraining` is the public entry point."""

    def __init__(self, params, strategy):
        self.p = params
        self.strategy = strategy
        self.chief = strategy_lib.is_chief(strategy)
        self.config = load_config(params)
        if params.spm_model_file:  # before any work: a vocabulary of another model fails now
            from albert_tf.models.model_dir import spm_model_path
            from albert_tf.text.vocab_check import check_vocabulary_matches

            own = spm_model_path(params.init_checkpoint) if params.init_checkpoint else None
            check_vocabulary_matches(
                params.spm_model_file,
                self.config,
                flag="--spm_model_file",
                model=params.albert_config_file or f"--preset={params.preset}",
                reference=own,
            )
        self.task = PretrainingTask(
            self.config,
            params.max_seq_length,
            params.max_predictions_per_seq,
            seed=params.seed,
            dynamic_masking=params.dynamic_masking,
            spm_model_file=params.spm_model_file,
        )
        with strategy.scope():
            self.model = self.task.build_model()
            self.model.backbone.recompute = params.recompute
            self.schedule = WarmupPolynomialDecay(
                params.learning_rate,
                decay_steps=params.num_train_steps,
                warmup_steps=params.num_warmup_steps,
                start_warmup_step=params.start_warmup_step,
                power=params.poly_power,
            )
            self.optimizer = create_optimizer(
                params.optimizer,
                self.schedule,
                weight_decay_rate=params.weight_decay_rate,
                stacked_axes=self.task.stacked_axes(self.model),
            )
        self.trainer = Trainer(
            strategy,
            self.task,
            self.model,
            self.optimizer,
            clip_norm=params.clip_norm,
            jit_compile=params.jit_compile,
        )
        self.checkpointer = checkpointing.Checkpointer(
            os.path.join(params.output_dir, "checkpoints"),
            self.model,
            self.optimizer,
            max_to_keep=params.keep_checkpoint_max,
            chief=self.chief,
        )
        summary_dir = os.path.join(params.output_dir, "summaries")
        self.train_writer = summaries.SummaryWriter(summary_dir, "train", chief=self.chief)
        self.eval_writer = summaries.SummaryWriter(summary_dir, "eval", chief=self.chief)

    # ------------------------------------------------------------------ setup
    def restore_or_warm_start(self):
        """Resumes from the newest checkpoint of --output_dir (after checking that it holds a run
        of this model: the albert_config.json written there, then the variables' shapes) or
        warm-starts from --init_checkpoint."""
        what = f"--output_dir={self.p.output_dir}"
        stored = os.path.join(self.p.output_dir, "albert_config.json")
        if self.checkpointer.latest() and tf.io.gfile.exists(stored):
            checkpointing.check_same_settings(
                AlbertConfig.from_json_file(stored).to_dict(), self.config.to_dict(), what
            )
        # Started over: the chief removed the earlier run, which no process may restore.
        restored = None if self.p.overwrite_output_dir else self.checkpointer.restore_latest(what)
        if restored:
            logging.info("Resuming from %s at step %d", restored, self.trainer.step)
        elif self.p.init_checkpoint:

            def build(config):
                return PretrainingTask(config).build_model()

            with self.strategy.scope():
                warm_start(
                    self.model,
                    self.p.init_checkpoint,
                    build,
                    init_from_group0=self.p.init_from_group0,
                )
        if self.chief:
            self.config.to_json_file(os.path.join(self.p.output_dir, "albert_config.json"))
        return restored

    def _train_dataset(self, start_step):
        p = self.p
        seed, skip = p.seed, 0
        if start_step and p.seed is not None:
            if p.input_resume == "skip":
                skip = start_step
                logging.info(
                    "Skipping the %d batches per replica consumed before step %d",
                    start_step,
                    start_step,
                )
            else:
                seed = p.seed + start_step
        return distributed_dataset(
            self.strategy, self.task, p.input_file, p.train_batch_size, True, seed, skip
        )

    # ------------------------------------------------------------------ loop
    def controller(self, eval_dataset):
        """The `Controller` of this run: checkpoints, evaluation, summaries, preemption."""
        p = self.p
        return Controller(
            self.trainer,
            self.checkpointer,
            total_steps=p.num_train_steps,
            steps_per_loop=p.steps_per_loop,
            global_batch_size=p.train_batch_size,
            learning_rate=self.schedule,
            save_every=p.save_checkpoints_steps,
            train_writer=self.train_writer,
            eval_writer=self.eval_writer,
            eval_dataset=eval_dataset,
            eval_every=p.eval_every_steps,
            max_eval_steps=p.max_eval_steps,
        )

    def train(self, controller):
        """Trains to --num_train_steps; returns the metrics of the last loop (None: nothing to
        train)."""
        return controller.train(lambda step: iter(self._train_dataset(step)))

    def finish(self, controller, train_metrics):
        """The final evaluation (eval_results.json) and export; returns run_pretraining's dict."""
        p = self.p
        result = {
            "global_step": self.trainer.step,
            "train": train_metrics,
            "model": self.model,
            "checkpoint": self.checkpointer.latest(),
            "summaries": os.path.join(p.output_dir, "summaries"),
        }
        if controller.eval_dataset is not None:
            metrics = controller.evaluate()
            result["eval"] = metrics
            if self.chief:
                files.write_json(os.path.join(p.output_dir, "eval_results.json"), metrics)
        if p.export and self.chief:
            result["export"] = self.export()
        return result

    def export(self):
        """Saves the backbone + heads (and the SentencePiece model) to output_dir/export."""
        from albert_tf.models import model_dir

        export_dir = os.path.join(self.p.output_dir, "export")
        # tex_quotes=False: create_pretraining_data tokenizes as the original (TeX quotes kept).
        model_dir.save(
            self.model, export_dir, spm_model_file=self.p.spm_model_file, tex_quotes=False
        )
        logging.info("Exported the pretrained model to %s", export_dir)
        return export_dir

    def close(self):
        self.train_writer.close()
        self.eval_writer.close()
        self.checkpointer.close()


def run_pretraining(params, strategy=None):
    """Runs (or resumes) pretraining; returns a dict of the final step, metrics and output paths.

    Keys: global_step, train (metrics of the last loop, or None when there was nothing to
    train), eval (when eval files were given), model (the trained AlbertPretrainer),
    checkpoint, summaries, export.

    Raises InvalidFlagError for invalid settings (naming the flag) or input records of another
    shape, DataError for an input file that is not pretraining records (checked before training,
    `albert_tf.data.input_checks`) or has a corrupt record (found mid-run), StrategyError when the
    strategy cannot be created (no TPU, no TF_CONFIG), NonFiniteLossError when the loss diverges
    and Preempted after saving on SIGTERM.
    """
    show_progress()
    validate_params(params)
    if strategy is None:
        strategy = strategy_lib.create_strategy(
            params.strategy, tpu=params.tpu, logical_cpus=params.logical_cpus
        )
    check_batch_sizes(params, strategy)
    sources = {"input_file": params.input_file, "eval_input_files": params.eval_input_files}
    input_checks.check_pretraining_inputs(
        sources, params.max_seq_length, params.max_predictions_per_seq, params.dynamic_masking
    )
    params, previous_policy = precision_lib.apply_to_params(params, strategy)  # logs the choice
    if params.seed is not None:
        keras.utils.set_random_seed(params.seed)
    tf.io.gfile.makedirs(params.output_dir)
    try:
        # Before any write to --output_dir: refuse a run of other settings there, or remove it.
        run_record.claim(
            params.output_dir,
            run_record_of(params, load_config(params)),
            may_differ=MAY_DIFFER,
            defaults=run_record.defaults_of(PretrainingParams),
            overwrite=params.overwrite_output_dir,
            outputs=RUN_OUTPUTS,
            chief=strategy_lib.is_chief(strategy),
        )
        runner = _Runner(params, strategy)
    finally:
        keras.config.set_dtype_policy(previous_policy)  # the model keeps its own policy
    try:
        runner.restore_or_warm_start()
        eval_dataset = None
        if params.eval_input_files:
            eval_dataset = distributed_dataset(
                strategy,
                runner.task,
                params.eval_input_files,
                params.eval_batch_size,
                False,
                params.seed,
            )
        controller = runner.controller(eval_dataset)
        try:
            train_metrics = runner.train(controller)
            return runner.finish(controller, train_metrics)
        except tf.errors.DataLossError:
            input_checks.locate_data_loss(sources)  # raises a DataError naming the file
            raise
    finally:
        runner.close()
