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
   `strategy.scope()` (`build_training`, which scripts/benchmark_pretraining.py times too),
   and build the optimizer before anything is restored; restore the newest
   checkpoint of `output_dir` (exact resume) or else warm-start from `init_checkpoint`;
4. train with the `Controller` in loops of `steps_per_loop` steps, logging one line per loop,
   writing TensorBoard summaries, saving every `save_checkpoints_steps` and evaluating every
   `eval_every_steps`;
5. final evaluation (`eval_results.json`, atomically) and the backbone + heads exported for
   fine-tuning to `output_dir/export` (with the SentencePiece model when given).

Input position on resume: the training input is rebuilt with the same seed and skips the
batches that the restored step already consumed (plus those skipped by divergence recoveries,
which the checkpoint counts) (`input_resume="skip"`: exact, so an interrupted
run ends with the same weights as an uninterrupted one; the skip re-reads those records, which
is cheap on CPU/GPU scales). `input_resume="reshuffle"` starts a fresh order seeded by
(seed, step) instead, at no cost, as the original did (its input_fn restarted from scratch).

Outputs under `output_dir`: checkpoints/ (ckpt-N), summaries/{train,eval}/ (TensorBoard;
summaries/profile/ with --profile_steps), albert_config.json, eval_results.json (with the run's
divergence `recoveries`), export/, run.json (`RUN_OUTPUTS`).

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
from albert_tf.config import AlbertConfig
from albert_tf.data import input_checks
from albert_tf.logs import show_progress
from albert_tf.optim import WarmupPolynomialDecay, create_optimizer
from albert_tf.optim.loss_scale import DynamicLossScale
from albert_tf.settings import InvalidFlagError  # noqa: F401  (re-exported: runner.InvalidFlagError)
from albert_tf.train import checkpointing, run_record, summaries
from albert_tf.train import strategy as strategy_lib
from albert_tf.train.controller import Controller, NonFiniteLossError
from albert_tf.train.loop import Trainer
from albert_tf.train.params import PretrainingParams, parse_profile_steps, validate_params
from albert_tf.train.task import PretrainingTask
from albert_tf.train.training_params import check_batch_sizes
from albert_tf.train.warm_start import warm_start

__all__ = [
    "PretrainingParams",
    "run_pretraining",
    "NonFiniteLossError",
    "Training",
    "build_training",
]


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
#   is a legitimate resume);
# - gradient_accumulation_steps: the same updates of the same batches, in less memory (to float
#   rounding, as the strategy);
# - max_loss, max_consecutive_recoveries, profile_steps: what counts as a divergence and how
#   often to recover (a run stopped with exit 3 may be re-run with other bounds), profiling.
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
    "gradient_accumulation_steps",
    "max_loss",
    "max_consecutive_recoveries",
    "profile_steps",
)


def load_config(params):
    """The config of --albert_config_file, --preset or else of the --init_checkpoint model
    (continued pretraining; `warm_start.source_config`)."""
    if params.albert_config_file:
        return AlbertConfig.from_json_file(params.albert_config_file)
    if params.preset:
        return AlbertConfig.from_preset(params.preset)
    from albert_tf.train.warm_start import source_config

    return source_config(params.init_checkpoint)


def _init_checkpoint_fingerprint(path):
    """The content fingerprint of --init_checkpoint: a model directory's files, or a training
    checkpoint's index (which holds a checksum of every tensor)."""
    from albert_tf.train.warm_start import checkpoint_prefix

    prefix = checkpoint_prefix(path)
    if prefix is not None:
        return run_record.files_fingerprint([prefix + ".index"])
    return run_record.files_fingerprint(run_record.directory_files(path))


def resolve_init_checkpoint(params):
    """(params, spec): a named --init_checkpoint (a released model, hf://, an address or a TF
    Hub handle: `albert_tf.sources`) fetched, converted and cached, `params` then naming its
    cached directory, and the name as given (None when --init_checkpoint is a path)."""
    from albert_tf import sources

    init = params.init_checkpoint
    if not init:
        return params, None
    from albert_tf.train.warm_start import checkpoint_prefix

    in_place = not sources.is_named(init) or init.startswith("gs://")
    if in_place and checkpoint_prefix(init) is not None:
        return params, None  # a training checkpoint (local or gs://), read in place
    resolved = sources.resolve(init)  # a local albert_tf directory: used in place
    if resolved.cache is None:
        return params, None
    return dataclasses.replace(params, init_checkpoint=resolved.directory), init


def run_record_of(params, config, init_spec=None):
    """The run record (`albert_tf.train.run_record`) of a run: its model config, settings
    (`params` with the precision resolved) and the fingerprints of its input files (names and
    sizes: they are too large to read at every start), init checkpoint and SentencePiece model."""
    from albert_tf.data.pipeline import list_files

    p = params
    return {
        "version": run_record.VERSION,
        "model": config.to_dict(),
        "settings": {
            **run_record.settings_of(p, skip=NOT_RECORDED),
            **({"init_checkpoint": init_spec} if init_spec else {}),
        },
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


@dataclasses.dataclass
class Training:
    """What `build_training` makes."""

    task: PretrainingTask
    model: keras.Model  # an AlbertPretrainer
    schedule: WarmupPolynomialDecay
    optimizer: keras.optimizers.Optimizer
    loss_scale: Optional[DynamicLossScale]  # mixed_float16 only
    trainer: Trainer


def build_training(params, strategy, config=None):
    """The task, model, learning-rate schedule, optimizer, loss scale and `Trainer` of a run
    (`config`: the model's, default `load_config(params)`), built in `strategy.scope()` as
    `run_pretraining` builds them. `params` must hold a resolved precision and the global dtype
    policy be set (`albert_tf.precision.apply_to_params`); the variables are not restored."""
    config = config or load_config(params)
    task = PretrainingTask(
        config,
        params.max_seq_length,
        params.max_predictions_per_seq,
        seed=params.seed,
        dynamic_masking=params.dynamic_masking,
        spm_model=params.spm_model_file,
    )
    with strategy.scope():
        model = task.build_model()
        model.backbone.recompute = params.recompute
        schedule = WarmupPolynomialDecay(
            params.learning_rate,
            decay_steps=params.num_train_steps,
            warmup_steps=params.num_warmup_steps,
            start_warmup_step=params.start_warmup_step,
            power=params.poly_power,
        )
        optimizer = create_optimizer(
            params.optimizer,
            schedule,
            weight_decay_rate=params.weight_decay_rate,
            stacked_axes=task.stacked_axes(model),
        )
        loss_scale = DynamicLossScale() if params.precision == "mixed_float16" else None
    trainer = Trainer(
        strategy,
        task,
        model,
        optimizer,
        clip_norm=params.clip_norm,
        jit_compile=params.jit_compile,
        gradient_accumulation_steps=params.gradient_accumulation_steps,
        loss_scale=loss_scale,
    )
    return Training(task, model, schedule, optimizer, loss_scale, trainer)


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
        t = build_training(params, strategy, self.config)
        self.task, self.model, self.schedule = t.task, t.model, t.schedule
        self.optimizer, self.loss_scale, self.trainer = t.optimizer, t.loss_scale, t.trainer
        self.checkpointer = checkpointing.Checkpointer(
            os.path.join(params.output_dir, "checkpoints"),
            self.model,
            self.optimizer,
            max_to_keep=params.keep_checkpoint_max,
            chief=self.chief,
            extra=None if self.loss_scale is None else {"loss_scale": self.loss_scale},
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

    def _train_dataset(self, position):
        """The training input from batch `position` on (the step plus the batches skipped by
        divergence recoveries)."""
        p = self.p
        seed, skip = p.seed, 0
        if position and p.seed is not None:
            if p.input_resume == "skip":
                skip = position
                logging.info(
                    "Skipping the %d batches per replica consumed before step %d",
                    position,
                    self.trainer.step,
                )
            else:
                seed = p.seed + position
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
            max_loss=p.max_loss,
            max_consecutive_recoveries=p.max_consecutive_recoveries,
            profile_steps=parse_profile_steps(p.profile_steps, p.num_train_steps),
            profile_dir=os.path.join(p.output_dir, "summaries", "profile"),
        )

    def train(self, controller):
        """Trains to --num_train_steps; returns the metrics of the last loop (None: nothing to
        train)."""
        return controller.train(lambda position: iter(self._train_dataset(position)))

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
            metrics["recoveries"] = controller.recoveries
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
        model_dir.save(self.model, export_dir, spm_model=self.p.spm_model_file, tex_quotes=False)
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
    replicas, steps = strategy.num_replicas_in_sync, params.gradient_accumulation_steps
    logging.info(
        "Batch %d per update: micro-batch %d x %d accumulation step(s) x %d replica(s)",
        params.train_batch_size,
        params.train_batch_size // (steps * replicas),
        steps,
        replicas,
    )
    sources = {"input_file": params.input_file, "eval_input_files": params.eval_input_files}
    input_checks.check_pretraining_inputs(
        sources, params.max_seq_length, params.max_predictions_per_seq, params.dynamic_masking
    )
    params, previous_policy = precision_lib.apply_to_params(  # logs the choice
        params, strategy, float16=True
    )
    if params.seed is not None:
        keras.utils.set_random_seed(params.seed)
    tf.io.gfile.makedirs(params.output_dir)
    params, init_spec = resolve_init_checkpoint(params)
    try:
        # Before any write to --output_dir: refuse a run of other settings there, or remove it.
        run_record.claim(
            params.output_dir,
            run_record_of(params, load_config(params), init_spec),
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
