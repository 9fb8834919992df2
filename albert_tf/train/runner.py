"""`run_pretraining`: ALBERT pretraining from flags to exported backbone, under any strategy.

The pieces: `strategy` (which tf.distribute strategy, who is chief), `task` (model, data, MLM +
SOP loss, metrics), `loop` (the strategy-agnostic training loop), `checkpointing`,
`summaries`, `warm_start`. This module wires them together:

1. resolve the strategy and check the batch sizes against its replica count;
2. build the model, LAMB (or AdamW) with the warmup + polynomial-decay schedule, all inside
   `strategy.scope()`, and build the optimizer before anything is restored;
3. restore the newest checkpoint of `output_dir` (exact resume) or else warm-start from
   `init_checkpoint`;
4. train in loops of `steps_per_loop` steps, logging one line per loop, writing TensorBoard
   summaries, saving every `save_checkpoints_steps` and evaluating every `eval_every_steps`;
5. final evaluation (`eval_results.json`, atomically) and the backbone + heads exported for
   fine-tuning to `output_dir/export` (with the SentencePiece model when given).

Input position on resume: the training input is rebuilt with the same seed and skips the
batches that the restored step already consumed (`input_resume="skip"`: exact, so an interrupted
run ends with the same weights as an uninterrupted one; the skip re-reads those records, which
is cheap on CPU/GPU scales). `input_resume="reshuffle"` starts a fresh order seeded by
(seed, step) instead, at no cost, as the original did (its input_fn restarted from scratch).

Outputs under `output_dir`: checkpoints/ (ckpt-N), summaries/{train,eval}/ (TensorBoard),
albert_config.json, eval_results.json, export/.

>>> params = PretrainingParams(input_file="data/train-*.tfrecord", output_dir="/tmp/run",
...                            preset="albert_tiny", max_seq_length=128)  # doctest: +SKIP
>>> result = run_pretraining(params)                                        # doctest: +SKIP
>>> result["global_step"] == params.num_train_steps                          # doctest: +SKIP
True
"""

import dataclasses
import os
import time
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf.config import AlbertConfig, list_presets
from albert_tf.data import input_checks
from albert_tf.logs import show_progress
from albert_tf.optim import WarmupPolynomialDecay, create_optimizer
from albert_tf.settings import InvalidFlagError, setting
from albert_tf.train import checkpointing, summaries
from albert_tf.train import strategy as strategy_lib
from albert_tf.train.checkpointing import Preempted
from albert_tf.train.loop import Trainer
from albert_tf.train.task import PretrainingTask, set_precision
from albert_tf.train.warm_start import warm_start


class NonFiniteLossError(RuntimeError):
    """The loss or gradient norm became NaN or Inf; the newest checkpoint is the last good one."""


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
        "lamb", "The original's LAMB or AdamWeightDecay.", choices=("lamb", "adamw")
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
        "float32",
        "Compute precision; mixed_bfloat16 keeps float32 variables, LayerNorm, softmax and losses.",
        choices=("float32", "mixed_bfloat16"),
    )
    jit_compile: bool = setting(True, "XLA-compile the forward/backward pass off TPU.")
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
        self.workers = strategy_lib.num_workers(strategy)
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
        restored = self.checkpointer.restore_latest(what)
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

    # ------------------------------------------------------------------ loop pieces
    def _any_worker(self, flag):
        """True when `flag` is set on any worker (one tiny all-reduce under multi-worker)."""
        if self.workers <= 1:
            return flag
        if not hasattr(self, "_flag_sum"):
            self._flag_sum = tf.function(
                lambda x: self.strategy.reduce(
                    tf.distribute.ReduceOp.SUM, self.strategy.run(tf.identity, args=(x,)), axis=None
                )
            )
        return float(self._flag_sum(tf.constant(float(flag)))) > 0

    def _save(self):
        if not self.trainer.weights_are_finite():
            raise NonFiniteLossError(
                f"model weights are NaN or Inf at step {self.trainer.step}; not saving. The newest "
                f"checkpoint ({self.checkpointer.latest()}) is the last good one"
            )
        return self.checkpointer.save()

    def _evaluate(self, eval_dataset):
        start = time.time()
        result = self.trainer.evaluate(eval_dataset, self.p.max_eval_steps)
        metrics = self.task.eval_metrics(result.stats)
        metrics["eval_steps"] = result.steps
        metrics["global_step"] = self.trainer.step
        self.eval_writer.scalars(
            self.trainer.step,
            {
                k: metrics[k]
                for k in (
                    "loss",
                    "masked_lm_loss",
                    "masked_lm_accuracy",
                    "sentence_order_loss",
                    "sentence_order_accuracy",
                )
            },
        )
        logging.info(
            "eval at step %d (%d batches, %.0f masked tokens, %.1fs): mlm_acc %.2f%% (majority "
            "baseline %.2f%%), sop_acc %.2f%% (majority baseline %.2f%%), mlm_loss %.3f, sop_loss %.3f",
            self.trainer.step,
            result.steps,
            metrics["masked_tokens"],
            time.time() - start,
            100 * metrics["masked_lm_accuracy"],
            100 * metrics["masked_lm_majority_baseline"],
            100 * metrics["sentence_order_accuracy"],
            100 * metrics["sentence_order_majority_baseline"],
            metrics["masked_lm_loss"],
            metrics["sentence_order_loss"],
        )
        return metrics

    def _next_boundary(self, step, every):
        return (step // every + 1) * every if every else self.p.num_train_steps

    def train(self, eval_dataset):
        p = self.p
        start_step = step = self.trainer.step
        if step >= p.num_train_steps:
            logging.info(
                "Step %d >= --num_train_steps=%d: nothing to train", step, p.num_train_steps
            )
            return None
        iterator = iter(self._train_dataset(start_step))
        logging.info(
            "Training steps %d -> %d, global batch %d over %d replica(s)",
            step,
            p.num_train_steps,
            p.train_batch_size,
            self.strategy.num_replicas_in_sync,
        )
        last_metrics, seconds_per_step = None, None
        with checkpointing.PreemptionWatcher() as watcher:
            while step < p.num_train_steps:
                n = min(
                    p.steps_per_loop,
                    p.num_train_steps - step,
                    self._next_boundary(step, p.save_checkpoints_steps) - step,
                    self._next_boundary(step, p.eval_every_steps if eval_dataset else 0) - step,
                )
                began = time.time()
                result = self.trainer.train(iterator, n)
                elapsed = time.time() - began
                if result.first_nonfinite_step is not None:
                    bad = step + result.first_nonfinite_step + 1
                    raise NonFiniteLossError(
                        f"the loss or gradient norm became NaN or Inf at step {bad}; stopping. The "
                        f"newest checkpoint ({self.checkpointer.latest()}) is the last good one. "
                        "Lower --learning_rate, check --clip_norm, or inspect the input data"
                    )
                step = self.trainer.step
                learning_rate = float(self.schedule(step))
                # The first loop includes tracing and compilation: keep it out of the ETA.
                if seconds_per_step is None or step - n > start_step:
                    recent = elapsed / n
                    seconds_per_step = (
                        recent
                        if seconds_per_step is None
                        else (0.7 * seconds_per_step + 0.3 * recent)
                    )
                metrics = self.task.metrics(result.stats)
                examples_per_second = n * p.train_batch_size / max(elapsed, 1e-9)
                logging.info(
                    summaries.format_progress(
                        step,
                        p.num_train_steps,
                        metrics,
                        learning_rate,
                        result.gradient_norm,
                        examples_per_second,
                        seconds_per_step * (p.num_train_steps - step),
                    )
                )
                self.train_writer.scalars(
                    step,
                    {
                        **metrics,
                        "learning_rate": learning_rate,
                        "gradient_norm": result.gradient_norm,
                        "examples_per_second": examples_per_second,
                    },
                )
                last_metrics = dict(metrics, gradient_norm=result.gradient_norm)
                # Evaluate before saving: a run killed in between resumes before this step and
                # evaluates it again, instead of resuming after it with the evaluation lost.
                if (
                    eval_dataset is not None
                    and p.eval_every_steps
                    and (step % p.eval_every_steps == 0)
                    and step < p.num_train_steps
                ):
                    self._evaluate(eval_dataset)
                if step % p.save_checkpoints_steps == 0 or step == p.num_train_steps:
                    self._save()
                if self._any_worker(watcher.requested):
                    path = self._save()
                    raise Preempted(step, path)
        return last_metrics

    def finish(self, eval_dataset, train_metrics):
        p = self.p
        result = {
            "global_step": self.trainer.step,
            "train": train_metrics,
            "model": self.model,
            "checkpoint": self.checkpointer.latest(),
            "summaries": os.path.join(p.output_dir, "summaries"),
        }
        if eval_dataset is not None:
            metrics = self._evaluate(eval_dataset)
            result["eval"] = metrics
            if self.chief:
                files.write_json(os.path.join(p.output_dir, "eval_results.json"), metrics)
        if p.export and self.chief:
            from albert_tf.models import model_dir

            export_dir = os.path.join(p.output_dir, "export")
            model_dir.save(self.model, export_dir, spm_model_file=p.spm_model_file)
            logging.info("Exported the pretrained model to %s", export_dir)
            result["export"] = export_dir
        return result

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
    previous_policy = keras.config.dtype_policy()
    set_precision(params.precision)
    if params.seed is not None:
        keras.utils.set_random_seed(params.seed)
    tf.io.gfile.makedirs(params.output_dir)
    try:
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
        try:
            train_metrics = runner.train(eval_dataset)
            return runner.finish(eval_dataset, train_metrics)
        except tf.errors.DataLossError:
            input_checks.locate_data_loss(sources)  # raises a DataError naming the file
            raise
    finally:
        runner.close()
