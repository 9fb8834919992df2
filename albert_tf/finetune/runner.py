"""`run_finetuning(params, task)`: fine-tune any `FinetuneTask` with `keras.Model.fit`, resumably.

What it does, in order:
1. checks the settings, creates the strategy, finds the SentencePiece model and checks it
   against the model (vocabulary size, special ids);
2. reads the task's data (`task.load`), logs its length percentiles (and a `--max_seq_length`
   hint when most of each window is padding: `albert_tf.finetune.lengths`) and builds its
   features; off TPU every batch is padded to its longest row only (`inputs.trim_padding`);
3. builds the model (from `init_checkpoint` or a preset) and compiles it with the fine-tuning
   defaults (`--optimizer`, bias-corrected AdamW unless told otherwise, at the learning rate of
   the model's size unless given: `albert_tf.optim.learning_rates`; warmup + linear decay over
   exactly `num_train_steps`; clipping);
4. compares the run with the one recorded in `output_dir/run.json` (every setting that changes
   the result, the train and dev data, the init checkpoint: a difference is refused naming
   them; `MAY_DIFFER` lists the settings that may change) or, with `overwrite_output_dir`,
   removes that run first (`albert_tf.train.run_record`); then restores the newest checkpoint of
   `output_dir/checkpoints` with the evaluation history and best metric saved beside it (exact
   resume: model, optimizer, step, data position, history);
5. trains with `fit` in chunks that end at multiples of `save_checkpoints_steps` (and at
   `num_train_steps`); after each chunk it scores the dev set, keeps the best weights by the
   task's main metric (`best.weights.h5`), rewrites `eval_results.json`, writes TensorBoard
   summaries (`logs/train`: loss, learning rate, examples/s; `logs/eval`: every dev metric) and
   saves a checkpoint;
6. loads the best weights, saves `model.keras` and `finetune.json` (with `spm.model` beside
   it), writes the dev and test predictions, scores a labelled test split once (`"test"` in
   eval_results.json, the unbiased score: the dev score chose the checkpoint) and exports for
   TF Serving.

SIGTERM and Ctrl-C stop training at the next step, save a checkpoint and raise `Preempted`;
re-running the same command continues from it. After SIGKILL the run continues from the last
checkpoint and ends with the same history, best checkpoint and final weights as an uninterrupted
run (tested on CPU with a fixed seed).

>>> from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
>>> params = FinetuneParams(output_dir="/tmp/mrpc", init_checkpoint="pretrained/")  # doctest: +SKIP
>>> data = ClassificationData(task_name="mrpc", data_dir="glue")
>>> task = SentenceClassificationTask(data)  # doctest: +SKIP
>>> run_finetuning(params, task)["best"]  # doctest: +SKIP
{'step': 800, 'metric': 'accuracy', 'value': 0.87}
"""

import dataclasses
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf.finetune import inputs, learning_check, lengths
from albert_tf.finetune.params import FinetuneParams, validate
from albert_tf.finetune.task import SPM_MODEL_KEY, SPM_PROTO_KEY
from albert_tf.logs import show_progress
from albert_tf.settings import InvalidFlagError
from albert_tf.train import checkpointing, run_record, summaries
from albert_tf.train import strategy as strategy_lib
from albert_tf.train.checkpointing import Preempted
from albert_tf.train.training_params import check_batch_sizes

__all__ = ["FinetuneParams", "run_finetuning", "Preempted", "InvalidFlagError"]

STATE_PREFIX = "state-"
MODEL_FILE = "model.keras"
INFO_FILE = "finetune.json"
RESULTS_FILE = "eval_results.json"
BEST_WEIGHTS = "best.weights.h5"
RUN_FILE = run_record.RUN_FILE
SPM_FILE = "spm.model"  # the run's SentencePiece model, beside finetune.json
RESULT_TABLES = ("dev_results.tsv", "test_results.tsv")  # every task's (`write_predictions`)
# What a run writes into --output_dir (besides its task's `output_files`): what
# --overwrite_output_dir removes. Anything else there (the user's files, a converted
# init_checkpoint, an --export_dir inside it) is kept.
RUN_OUTPUTS = (
    "checkpoints",
    "logs",
    RUN_FILE,
    INFO_FILE,
    RESULTS_FILE,
    BEST_WEIGHTS,
    MODEL_FILE,
    SPM_FILE,
) + RESULT_TABLES
# Settings not recorded in run.json: where the run lives and whether to start it over.
NOT_RECORDED = ("output_dir", "overwrite_output_dir")
# Settings a re-run may change: they choose what an invocation does, how fast it runs or what it
# logs, not what training computes. Every other FinetuneParams field (with num_train_steps and
# warmup_steps resolved), the task's data settings, the model and the content of the train and
# dev data, the init checkpoint and the SentencePiece model must equal run.json's.
# - do_train, do_predict, test_file: whether this invocation trains and what it predicts (the
#   test file's predictions are written by each invocation that predicts);
# - eval_batch_size: batching of evaluation and prediction only;
# - keep_checkpoint_max, verbose, export_dir: what is kept, logged and exported;
# - strategy, tpu, logical_cpus, steps_per_execution, jit_compile, recompute: how the same steps
#   run (speed and memory; float rounding may differ slightly, but moving a run to other
#   hardware, e.g. one device -> mirrored, is a legitimate resume);
# - gradient_accumulation_steps: the same updates in less memory (a run that ran out of memory
#   resumes with a larger N; dropout draws per micro-batch), as in pretraining;
# - num_train_epochs, warmup_proportion: compared as the num_train_steps / warmup_steps they
#   resolve to;
# - feature_cache_dir: where SQuAD caches its features (keyed by their content);
# - tfds_download, tfds_data_dir: how and where TFDS data is prepared (the examples are
#   compared by content).
# - word_split: the words the tagger's export serves (training reads the files' words).
MAY_DIFFER = (
    "do_train",
    "do_predict",
    "test_file",
    "eval_batch_size",
    "keep_checkpoint_max",
    "verbose",
    "export_dir",
    "strategy",
    "tpu",
    "logical_cpus",
    "steps_per_execution",
    "jit_compile",
    "recompute",
    "gradient_accumulation_steps",
    "num_train_epochs",
    "warmup_proportion",
    "feature_cache_dir",
    "tfds_download",
    "tfds_data_dir",
    "word_split",
)


# ----------------------------------------------------------------------------- set-up checks
def resolve_init_checkpoint(params):
    """(params, source): a named --init_checkpoint (a released model, hf://, an address or a TF
    Hub handle) or a local directory in another format (Hugging Face, keras-hub preset, TF Hub
    SavedModel) fetched, converted and cached (`albert_tf.sources`), `params` then naming its
    cached directory, and the `ResolvedModel` (None for an albert_tf directory, used in
    place)."""
    from albert_tf import sources

    if not params.init_checkpoint:
        return params, None
    resolved = sources.resolve(params.init_checkpoint)  # a local directory: used in place
    if resolved.cache is None:
        return params, None
    return dataclasses.replace(params, init_checkpoint=resolved.directory), resolved


def _pretrained_directory(path):
    """`path` if it is a model directory; a one-line error for run directories and the like."""
    from albert_tf.models import model_dir

    if not tf.io.gfile.isdir(path):
        raise InvalidFlagError(
            f"--init_checkpoint={path}: not a directory (expected a model "
            f"directory written by albert_tf.save)"
        )
    present = set(tf.io.gfile.listdir(path))
    present = {name.rstrip("/") for name in present}
    if model_dir.CONFIG_FILE in present:
        return path
    if "export" in present and ("checkpoints" in present or "albert_config.json" in present):
        raise InvalidFlagError(
            f"--init_checkpoint={path} is a run_pretraining output directory; "
            f"use its exported model: --init_checkpoint={path.rstrip('/')}"
            f"/export"
        )
    if INFO_FILE in present:
        raise InvalidFlagError(
            f"--init_checkpoint={path} is a fine-tuning output directory; "
            "start from a pretrained model directory (config.json + weights)"
        )
    raise InvalidFlagError(
        f"--init_checkpoint={path} has no {model_dir.CONFIG_FILE} (found "
        f"{', '.join(sorted(present)) or 'nothing'}); expected a directory "
        "written by albert_tf.save or scripts/convert_checkpoint.py"
    )


def resolve_vocabulary(params, config):
    """The SentencePiece model path, checked against the model's vocabulary
    (`albert_tf.text.vocab_check.check_vocabulary_matches`): its size must equal the config's
    `vocab_size`; when the model directory holds its own spm.model and another file is given,
    the special ids must agree (a different piece table is logged as a warning).
    """
    from albert_tf.models import model_dir
    from albert_tf.text.tokenizer import VocabularyError
    from albert_tf.text.vocab_check import check_vocabulary_matches

    own = model_dir.spm_model_path(params.init_checkpoint) if params.init_checkpoint else None
    path = params.spm_model_file or own
    if path is None:
        raise InvalidFlagError(
            f"--spm_model_file is required: {params.init_checkpoint or 'a preset'} has no spm.model"
        )
    flag = "--spm_model_file" if params.spm_model_file else "--init_checkpoint's spm.model"
    reference = own if own and params.spm_model_file and own != params.spm_model_file else None
    try:
        check_vocabulary_matches(
            path,
            config,
            flag=flag,
            model=params.init_checkpoint or params.preset,
            reference=reference,
        )
    except VocabularyError as e:
        raise InvalidFlagError(str(e)) from None
    return path


def text_settings(params):
    """{"tex_quotes": bool, "lower_case": bool, and "albert_rules" where recorded} of the run:
    what the --init_checkpoint directory records (`albert_tf.models.model_dir.text_settings`:
    tex_quotes True for a model converted from Hugging Face; lower_case and albert_rules False
    for one from a keras-hub preset), the defaults for a --preset; --do_lower_case, when given,
    overrides the recorded lower_case (default True)."""
    from albert_tf.models import model_dir

    if not params.init_checkpoint:
        settings = dict(model_dir.DEFAULT_TEXT_SETTINGS)
    else:
        try:
            settings = model_dir.text_settings(params.init_checkpoint)
        except model_dir.ModelDirectoryError as e:
            raise InvalidFlagError(f"--init_checkpoint: {e}") from None
        if settings != model_dir.DEFAULT_TEXT_SETTINGS:
            logging.info(
                "--init_checkpoint=%s records the text settings %s",
                params.init_checkpoint,
                settings,
            )
    if params.do_lower_case is not None:
        recorded = settings.get("lower_case")
        if recorded is not None and recorded != params.do_lower_case:
            logging.warning(
                "--do_lower_case=%s overrides lower_case=%s recorded by --init_checkpoint=%s",
                params.do_lower_case,
                recorded,
                params.init_checkpoint,
            )
        settings["lower_case"] = params.do_lower_case
    settings.setdefault("lower_case", True)
    return settings


def _load_config(params):
    from albert_tf.config import AlbertConfig, list_presets
    from albert_tf.models import model_dir

    if params.init_checkpoint:
        directory = _pretrained_directory(params.init_checkpoint)
        try:
            return AlbertConfig.from_json_file(f"{directory.rstrip('/')}/{model_dir.CONFIG_FILE}")
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidFlagError(f"--init_checkpoint={directory}: {e}") from None
    if params.preset not in list_presets():
        raise InvalidFlagError(
            f"--preset={params.preset!r} is not one of {', '.join(list_presets())}"
        )
    return None  # the preset's vocabulary size comes from the SentencePiece model


def _backbone(params, vocab_size):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.head_model import load_backbone

    dropout = params.albert_dropout
    if params.init_checkpoint:
        backbone = load_backbone(params.init_checkpoint, dropout, dropout)
    else:
        overrides = {"vocab_size": vocab_size}
        if dropout is not None:
            overrides.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        backbone = AlbertModel(AlbertConfig.from_preset(params.preset, **overrides))
    backbone.recompute = params.recompute
    return backbone


# ----------------------------------------------------------------------------- run state
class RunState:
    """The evaluation history and best result, saved beside each checkpoint (`state-<step>.json`
    in the checkpoint directory) so a restored checkpoint comes with its own history."""

    def __init__(self, directory):
        self.directory = directory
        self.history = []
        self.best = None
        self.warnings = []

    def _path(self, step):
        return os.path.join(self.directory, f"{STATE_PREFIX}{step}.json")

    def restore(self, step):
        values = files.read_json(self._path(step))
        self.history, self.best = values["history"], values["best"]
        self.warnings = values.get("warnings", [])

    def save(self, step, keep_steps):
        """Writes the state of `step` and removes those of checkpoints no longer kept."""
        files.write_json(
            self._path(step),
            {"history": self.history, "best": self.best, "warnings": self.warnings},
        )
        keep = {f"{STATE_PREFIX}{s}.json" for s in keep_steps} | {f"{STATE_PREFIX}{step}.json"}
        for name in tf.io.gfile.listdir(self.directory):
            if name.startswith(STATE_PREFIX) and name.endswith(".json") and name not in keep:
                tf.io.gfile.remove(os.path.join(self.directory, name))


class _StopWhenRequested(keras.callbacks.Callback):
    """Stops `fit` after the current step once SIGTERM or Ctrl-C was received."""

    def __init__(self, watcher):
        super().__init__()
        self.watcher = watcher

    def on_train_batch_end(self, batch, logs=None):
        if self.watcher.requested:
            self.model.stop_training = True


def _checkpoint_steps(checkpointer):
    return [int(path.rsplit("-", 1)[-1]) for path in checkpointer.manager.checkpoints]


def _features_fingerprint(features):
    """'64 rows, sha256 0123456789abcdef' of a split's `Features` (None: not read)."""
    if features is None:
        return None
    hashed = run_record.digest([features.inputs, features.labels])
    return f"{len(features)} rows, sha256 {hashed[:16]}"


# ----------------------------------------------------------------------------- the runner
class _Finetuner:
    """State of one run; `run_finetuning` is the public entry point."""

    def __init__(self, params, task, strategy, spm_model, init_source=None):
        self.p = params
        self.init_source = init_source  # a fetched --init_checkpoint (sources.ResolvedModel)
        self.task = task
        self.strategy = strategy
        self.spm_model = spm_model
        self.tpu = strategy_lib.is_tpu(strategy)
        self.data = self.describe_data()
        self.transform = task.input_transform()
        self.dev = self.dev_features = None
        if "dev" in task.loaded_splits:
            self.dev_features, self.dev = self.eval_split("dev")
        self.test_metrics = None  # of a labelled test split, scored once at the end
        self.train_features = task.features("train") if params.do_train else None
        self.baselines = task.baselines() if self.dev is not None else {}
        self.main_baselines = {}
        if self.dev is not None:
            self.main_baselines = task.main_metric_baselines(self.baselines)
        self.best_dev_predictions = None  # of the best evaluation made by this process
        for name, value in self.baselines.items():
            logging.info("%s: %s", name.replace("_", " "), value)
        strongest = self.main_baselines.get("strongest")
        if strongest:
            logging.info(
                "strongest simple baseline on dev %s: %.4f (%s); a run must beat it",
                task.main_metric,
                strongest["value"],
                strongest["name"],
            )
        self.checkpointer = None
        self.recorded = None  # run_record.claim's answer
        self.state = RunState(os.path.join(params.output_dir, "checkpoints"))

    def describe_data(self):
        """Logs the padding rule and the length percentiles of the first loaded split (train,
        else dev, else test) with a `--max_seq_length` hint when most of each window is padding;
        returns them for eval_results.json and finetune.json ("data")."""
        p = self.p
        if self.tpu:
            padding = f"every batch to --max_seq_length={p.max_seq_length} (TPU: static shapes)"
        else:
            padding = (
                f"each batch to its longest sequence (a multiple of {inputs.BUCKET}, at "
                f"most --max_seq_length={p.max_seq_length}); evaluation batches to their "
                "split's longest"
            )
        logging.info("padding: %s", padding)
        data = {"padding": padding}
        split = next((s for s in ("train", "dev", "test") if s in self.task.loaded_splits), None)
        found = self.task.sequence_lengths(split) if split else None
        if found is not None:
            data["lengths"] = lengths.length_summary(found, p.max_seq_length, split)
            logging.info("%s", lengths.describe(data["lengths"]))
            data["hint"] = lengths.hint(data["lengths"])
            if data["hint"]:
                logging.info("%s", data["hint"])
        return data

    def eval_split(self, split):
        """(features, dataset) of an evaluation split; off TPU its batches are cut to the
        split's longest sequence."""
        features = self.task.features(split)
        length = None
        if not self.tpu:
            length = lengths.padded_length(
                self.task.sequence_lengths(split), self.p.max_seq_length, inputs.BUCKET
            )
        dataset = inputs.eval_dataset(
            features, self.p.eval_batch_size, self.transform, pad_to_batch=self.tpu, length=length
        )
        return features, dataset

    def build(self, vocab_size):
        from albert_tf.models.head_model import warmup_step_count

        p = self.p
        with self.strategy.scope():
            self.model = self.task.build_model(
                _backbone(p, vocab_size), dropout=p.classifier_dropout
            )
            self.model.compile(
                optimizer=p.optimizer,
                learning_rate=p.learning_rate,
                num_train_steps=p.num_train_steps,
                warmup_steps=p.warmup_steps,
                weight_decay_rate=p.weight_decay_rate,
                global_clipnorm=p.clip_norm,
                steps_per_execution=p.steps_per_execution,
                precision=p.precision,
                gradient_accumulation_steps=p.gradient_accumulation_steps,
                jit_compile=p.jit_compile and not self.tpu,  # TPUStrategy compiles the step
            )
            self.model.build_optimizer()
        self.optimizer = self.model.optimizer
        logging.info(
            "optimizer: %s (%s), peak learning rate %g, warmup %d steps, linear decay to step "
            "%d, global-norm clipping %g, weight decay %g",
            p.optimizer,
            type(self.optimizer).__name__,
            p.learning_rate,
            warmup_step_count(p.num_train_steps, p.warmup_steps),
            p.num_train_steps,
            p.clip_norm,
            p.weight_decay_rate,
        )

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def record(self, spm_model):
        """The run record of this run (`albert_tf.train.run_record`): model, task, settings and
        fingerprints of the train and dev data, the init checkpoint and the vocabulary."""
        from albert_tf.models.head_model import warmup_step_count

        p, data = self.p, self.task.data
        settings = run_record.settings_of(
            p, *([data] if dataclasses.is_dataclass(data) else []), skip=NOT_RECORDED
        )
        settings["warmup_steps"] = warmup_step_count(p.num_train_steps, p.warmup_steps)
        if p.num_train_epochs and not p.do_train:  # steps from epochs need the training rows
            del settings["num_train_steps"], settings["warmup_steps"]
        init = p.init_checkpoint
        data_record = {}
        if self.init_source is not None:  # the name as given; where it came from
            settings["init_checkpoint"] = self.init_source.spec
            source = self.init_source.record()
            data_record["init_checkpoint_source"] = {k: source[k] for k in ("source", "conversion")}
        return {
            "version": run_record.VERSION,
            "model": self.model.backbone.config.to_dict(),
            "task": self.task.name,
            "num_classes": int(self.model.num_classes),
            "settings": settings,
            "data": {
                "train_data": _features_fingerprint(self.train_features),
                "dev_data": _features_fingerprint(self.dev_features),
                "init_checkpoint_content": (
                    run_record.files_fingerprint(run_record.directory_files(init)) if init else None
                ),
                "spm_model_content": run_record.files_fingerprint([spm_model]),
                **data_record,
            },
        }

    def claim(self, spm_model):
        """Compares this run with the run recorded in --output_dir (InvalidFlagError on a
        difference) or, with --overwrite_output_dir, removes that run; before anything is
        written there."""
        p, data = self.p, self.task.data
        defaults = [FinetuneParams] + ([type(data)] if dataclasses.is_dataclass(data) else [])
        self.recorded = run_record.claim(
            p.output_dir,
            self.record(spm_model),
            may_differ=MAY_DIFFER,
            defaults=run_record.defaults_of(*defaults),
            overwrite=p.overwrite_output_dir,
            outputs=RUN_OUTPUTS + tuple(self.task.output_files),
        )

    def restore(self):
        self.checkpointer = checkpointing.Checkpointer(
            os.path.join(self.p.output_dir, "checkpoints"),
            self.model,
            self.optimizer,
            max_to_keep=self.p.keep_checkpoint_max,
        )
        path = self.checkpointer.latest()
        what = f"--output_dir={self.p.output_dir}"
        if path:
            try:
                self.checkpointer.restore_latest(what)  # names the settings that differ
            except InvalidFlagError:
                raise
            except (AssertionError, ValueError, tf.errors.OpError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise InvalidFlagError(
                    f"{what}: cannot resume from {path} ({first[:200]}); it "
                    "holds a run of another model: use a new --output_dir"
                ) from None
        if not path:
            return None
        try:
            self.state.restore(self.step)
        except FileNotFoundError:
            raise InvalidFlagError(
                f"--output_dir={self.p.output_dir}: {path} has no "
                f"{STATE_PREFIX}{self.step}.json beside it (written by an "
                "older albert_tf?); use a new --output_dir"
            ) from None
        if self.recorded == "unrecorded":  # finetune.json and eval_results.json say so
            warning = (
                "the settings of this run's earlier steps were not recorded (an older albert_tf): "
                "finetune.json's params are those of the latest invocation, unchecked"
            )
            if all(w["warning"] != warning for w in self.state.warnings):
                self.state.warnings.append({"step": self.step, "warning": warning})
        logging.info(
            "Resuming from %s at step %d (%d evaluations so far)",
            path,
            self.step,
            len(self.state.history),
        )
        return path

    # ------------------------------------------------------------------ evaluation
    def predict(self, split, features, dataset):
        outputs = self.model.predict(dataset, verbose=0)  # an array or a dict of arrays
        outputs = keras.tree.map_structure(lambda a: np.asarray(a)[: len(features)], outputs)
        return self.task.postprocess(outputs, split)

    def evaluate(self, step, writer):
        began = time.time()
        predictions = self.predict("dev", self.dev_features, self.dev)
        metrics = self.task.evaluate(predictions, "dev")
        main = self.task.main_metric
        value = float(metrics[main])
        state = self.state
        improved = state.best is None or value > state.best["value"]
        if improved:
            state.best = {"step": int(step), "metric": main, "value": value}
            self.best_dev_predictions = predictions  # written at the end, without a new pass
            files.save_atomic(
                os.path.join(self.p.output_dir, BEST_WEIGHTS),
                self.model.save_weights,
                suffix=".weights.h5",
            )
        entry = {"step": int(step), **{f"eval_{k}": v for k, v in metrics.items()}}
        reason = learning_check.collapsed(self.task, predictions, value, self.main_baselines)
        if reason:
            entry["collapsed"] = reason
        state.history.append(entry)
        warning = learning_check.collapse_warning(
            state.history, self.p.optimizer, self.p.learning_rate, int(step), self.p.num_train_steps
        )
        if warning:
            learning_check.log_warning(warning)
            state.warnings.append({"step": int(step), "warning": warning})
        self.write_results()
        writer.scalars(step, {k: v for k, v in metrics.items() if isinstance(v, (int, float))})
        shown = self.task.headline_metrics(metrics)
        logging.info(
            "eval at step %d: %s (computed in %s, %.1fs)%s",
            step,
            ", ".join(f"{k} {v:.4f}" for k, v in shown.items() if isinstance(v, float)),
            self.model.dtype_policy.name,
            time.time() - began,
            " new best" if improved else "",
        )
        return metrics

    def selection(self):
        """How the reported dev score was chosen (eval_results.json "selection"), or None
        before the first evaluation."""
        history, metric = self.state.history, self.task.main_metric
        if not history:
            return None
        steps = [h["step"] for h in history]
        if len(history) == 1:
            return (
                f"the dev {metric} of the one evaluation (step {steps[0]}): no checkpoint was "
                "chosen by it"
            )
        unbiased = (
            "'test' is the chosen checkpoint's score on the labelled test split, scored once"
            if self.test_metrics is not None
            else "score a labelled test split (--test_file or the task's test files with "
            "--do_predict) for an unbiased estimate"
        )
        return (
            f"best dev {metric} over {len(history)} evaluations (steps {steps[0]} to "
            f"{steps[-1]}): the checkpoint was chosen on the dev set it is reported on, so the "
            f"dev score under 'best' is optimistic; {unbiased}"
        )

    def write_results(self, final=False):
        """eval_results.json: the best evaluation and how it was selected, the baselines, the
        comparison of the best with the strongest baseline, warnings, the history, the data's
        lengths and the test split's scores (rewritten atomically). `final` adds the end-of-run
        warning when the best did not beat the strongest baseline."""
        state = self.state
        result = learning_check.verdict(state.best, self.main_baselines)
        warning = learning_check.verdict_warning(result, self.task.main_metric) if final else None
        if warning and all(w["warning"] != warning for w in state.warnings):
            learning_check.log_warning(warning)
            state.warnings.append({"step": self.step, "warning": warning})
        values = {
            "best": state.best,
            # The dev (and test) scores are the model's outputs in this precision.
            "precision": self.model.dtype_policy.name,
            "selection": self.selection(),
            "baselines": self.baselines,
            "main_metric_baselines": self.main_baselines,
            "baseline_verdict": result,
            "warnings": state.warnings,
            "history": state.history,
            "data": self.data,
        }
        if self.test_metrics is not None:
            values["test"] = self.test_metrics
        files.write_json(os.path.join(self.p.output_dir, RESULTS_FILE), values)
        return result

    def save(self):
        step = self.step
        self.state.save(step, _checkpoint_steps(self.checkpointer) + [step])
        path = self.checkpointer.save()
        self.state.save(step, _checkpoint_steps(self.checkpointer))
        return path

    # ------------------------------------------------------------------ training
    def train(self, train_writer, eval_writer):
        p = self.p
        step = start = self.step
        if step >= p.num_train_steps:
            logging.info(
                "Step %d >= --num_train_steps=%d: training is complete", step, p.num_train_steps
            )
            return
        replicas = self.strategy.num_replicas_in_sync
        accumulation = p.gradient_accumulation_steps
        logging.info(
            "Training steps %d -> %d: %d training rows, effective batch %d (micro-batch %d x "
            "%d accumulation step(s) x %d replica(s)), evaluation and checkpoint every %d steps",
            step,
            p.num_train_steps,
            len(self.train_features),
            p.train_batch_size,
            p.train_batch_size // (accumulation * replicas),
            accumulation,
            replicas,
            p.save_checkpoints_steps,
        )
        timer = summaries.StepTimer(start)  # the latest chunk's pace
        with checkpointing.PreemptionWatcher(signals=checkpointing.STOP_SIGNALS) as watcher:
            while step < p.num_train_steps:
                boundary = min(
                    (step // p.save_checkpoints_steps + 1) * p.save_checkpoints_steps,
                    p.num_train_steps,
                )
                dataset = inputs.train_dataset(
                    self.train_features,
                    p.train_batch_size,
                    p.seed,
                    start_step=step,
                    transform=self.transform,
                    trim=not self.tpu,
                )
                began = time.time()
                history = self.model.fit(
                    dataset,
                    epochs=1,
                    steps_per_epoch=boundary - step,
                    verbose=p.verbose,
                    shuffle=False,
                    callbacks=[_StopWhenRequested(watcher)],
                )
                elapsed = time.time() - began
                done = self.step - step
                step = self.step
                timer.update(step, done, elapsed)
                loss = (
                    float(history.history["loss"][-1])
                    if history.history.get("loss")
                    else float("nan")
                )
                learning_rate = float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))
                rate = done * p.train_batch_size / max(elapsed, 1e-9)
                fields = [f"loss {loss:.4f}", f"lr {learning_rate:.2e}", f"{rate:.1f} examples/s"]
                eta = timer.eta(p.num_train_steps - step)
                logging.info(summaries.format_progress(step, p.num_train_steps, fields, eta))
                if not np.isfinite(loss):
                    raise FloatingPointError(
                        f"the training loss is {loss} at step {step}; the newest checkpoint "
                        f"({self.checkpointer.latest()}) is the last good one. Lower "
                        "--learning_rate or check the data"
                    )
                train_writer.scalars(
                    step,
                    {"loss": loss, "learning_rate": learning_rate, "examples_per_second": rate},
                )
                if step == boundary and self.dev is not None:
                    self.evaluate(step, eval_writer)
                path = self.save()
                if watcher.requested:
                    raise Preempted(step, path)

    # ------------------------------------------------------------------ outputs
    def score_test(self, step):
        """Predicts the test split, writes the predictions and, when it has gold answers,
        scores it once with the chosen model (logged; "test" in eval_results.json)."""
        features, dataset = self.eval_split("test")
        predictions = self.predict("test", features, dataset)
        self.task.write_predictions(predictions, "test", self.p.output_dir)
        if not self.task.is_labelled("test"):
            return
        metrics = self.task.evaluate(predictions, "test")
        chosen = self.state.best["step"] if self.state.best else step
        self.test_metrics = {"step": chosen, **metrics}
        shown = self.task.headline_metrics(metrics)
        logging.info(
            "test, scored once with the model of step %d: %s",
            chosen,
            ", ".join(f"{k} {v:.4f}" for k, v in shown.items() if isinstance(v, float)),
        )

    def describe_task(self):
        """The task's description with its SentencePiece model copied beside finetune.json
        (once) and named by its file name, not embedded."""
        from albert_tf.text.tokenizer import read_model_proto

        target = os.path.join(self.p.output_dir, SPM_FILE)
        proto = read_model_proto(self.spm_model)
        if not tf.io.gfile.exists(target) or read_model_proto(target) != proto:
            files.write_atomic(target, proto)
        description = dict(self.task.describe())
        description.pop(SPM_PROTO_KEY, None)
        description[SPM_MODEL_KEY] = SPM_FILE
        return description

    def finish(self, eval_writer):
        p = self.p
        state = self.state
        step = self.step  # loading the best weights below also loads their optimizer step
        if self.dev is not None and not state.history:
            self.evaluate(self.step, eval_writer)  # --do_train=false: score the given model
        best_path = os.path.join(p.output_dir, BEST_WEIGHTS)
        if state.best is not None and tf.io.gfile.exists(best_path):
            self.model.load_weights(best_path)
            logging.info(
                "Loaded the best weights: %s %.4f at step %d",
                state.best["metric"],
                state.best["value"],
                state.best["step"],
            )
        files.save_atomic(os.path.join(p.output_dir, MODEL_FILE), self.model.save, suffix=".keras")
        info_path = os.path.join(p.output_dir, INFO_FILE)
        info = {
            "task": None,  # described once the task has adopted the chosen model's dev metrics
            "step": step,
            "best": state.best,
            "params": dataclasses.asdict(p),
            "data": self.data,
        }
        if self.init_source is not None:
            info["params"]["init_checkpoint"] = self.init_source.spec
            info["init_checkpoint_source"] = self.init_source.record()
        results = {
            "global_step": step,
            "best": state.best,
            "history": state.history,
            "model": self.model,
            "output_dir": p.output_dir,
            "main_metric_baselines": self.main_baselines,
            "data": self.data,
        }
        if self.dev is not None:  # the chosen model's dev predictions, as files
            predictions = self.best_dev_predictions
            if predictions is None:  # its evaluation ran before a restart
                predictions = self.predict("dev", self.dev_features, self.dev)
            # What a task derives from the chosen model's dev scores (SQuAD v2: the null-score
            # threshold) is what it writes and exports with.
            self.task.adopt_dev_metrics(self.task.evaluate(predictions, "dev"))
            self.task.write_predictions(predictions, "dev", p.output_dir)
        info["task"] = self.describe_task()
        if "test" in self.task.loaded_splits:
            self.score_test(step)
        results["test"] = self.test_metrics
        if self.dev is not None or self.test_metrics is not None:
            verdict = self.write_results(final=True)
            if self.dev is not None:
                results["baseline_verdict"] = info["baseline_verdict"] = verdict
            selection = self.selection()
            if selection:
                logging.info("selection: %s", selection)
        results["warnings"] = info["warnings"] = [w["warning"] for w in state.warnings]
        if p.export_dir:
            previous = files.read_json(info_path) if tf.io.gfile.exists(info_path) else {}
            exported = previous.get("export")
            # The served outputs measured against the runner's (`FinetuneTask.export_agreement`).
            agreement = previous.get("export_agreement")
            if (
                exported
                and previous.get("step") == step
                and previous.get("best") == state.best
                and tf.io.gfile.exists(exported)
            ):
                logging.info("This model was already exported to %s", exported)
            else:
                exported = self.task.export(self.model, p.export_dir)
                logging.info("SavedModel for TF Serving: %s", exported)
                agreement = self.task.export_agreement
            info["export"] = results["export"] = exported
            if agreement:
                info["export_agreement"] = results["export_agreement"] = agreement
                results["warnings"].extend(agreement.get("warnings", []))
        files.write_json(info_path, info)
        return results


def _steps_from_epochs(params, task):
    """`params` with num_train_steps from num_train_epochs (when given and training)."""
    if not (params.do_train and params.num_train_epochs):
        return params
    rows = len(task.features("train"))
    steps = int(rows / params.train_batch_size * params.num_train_epochs)
    steps -= steps % params.steps_per_execution
    steps = max(steps, params.steps_per_execution)
    logging.info(
        "--num_train_epochs=%g: %d training rows / batch %d -> %d steps",
        params.num_train_epochs,
        rows,
        params.train_batch_size,
        steps,
    )
    params = dataclasses.replace(params, num_train_steps=steps)
    validate(params)
    return params


def _learning_rate_of_size(params, config):
    """`params` with the default learning rate of the model's size and optimizer when none was
    given (`albert_tf.optim.learning_rates`; logged with the reason)."""
    from albert_tf.config import AlbertConfig
    from albert_tf.optim.learning_rates import default_learning_rate

    if params.learning_rate is not None:
        return params
    hidden_size = (config or AlbertConfig.from_preset(params.preset)).hidden_size
    rate, why = default_learning_rate(hidden_size, params.optimizer)
    logging.info(
        "--learning_rate=%g: the default for --optimizer=%s at %s", rate, params.optimizer, why
    )
    return dataclasses.replace(params, learning_rate=rate)


def _warmup_from_proportion(params):
    """`params` with warmup_steps from warmup_proportion (when given), once the steps are known.

    >>> p = FinetuneParams(output_dir="o", preset="albert_tiny", warmup_proportion=0.25)
    >>> _warmup_from_proportion(dataclasses.replace(p, num_train_steps=90)).warmup_steps
    22
    """
    if params.warmup_proportion is None:
        return params
    warmup = int(params.num_train_steps * params.warmup_proportion)
    logging.info(
        "--warmup_proportion=%g of %d steps -> %d warmup steps",
        params.warmup_proportion,
        params.num_train_steps,
        warmup,
    )
    return dataclasses.replace(params, warmup_steps=warmup, warmup_proportion=None)


def run_finetuning(params, task, strategy=None):
    """Fine-tunes (or resumes fine-tuning) `task` as `params` say; returns a results dict.

    Keys: global_step, best ({"step", "metric", "value"} or None), history (one dict per
    evaluation), model (the keras.Model with the best weights loaded), output_dir, export (the
    SavedModel version path, with `export_dir`), main_metric_baselines and baseline_verdict
    (`albert_tf.finetune.learning_check`), warnings (texts), data (padding and length
    percentiles, `albert_tf.finetune.lengths`), test (the labelled test split's metrics, scored
    once, or None).

    Raises InvalidFlagError (settings, naming the flag), DataError / FileNotFoundError (data,
    naming the file and line), StrategyError, and Preempted after saving a checkpoint on SIGTERM
    or Ctrl-C.
    """
    show_progress()
    from albert_tf.precision import apply_to_params

    validate(params)
    params, init_source = resolve_init_checkpoint(params)
    config = _load_config(params)
    spm_model = resolve_vocabulary(params, config)
    if strategy is None:
        strategy = strategy_lib.create_strategy(
            params.strategy, tpu=params.tpu, logical_cpus=params.logical_cpus
        )
    check_batch_sizes(params, strategy)
    # Seed before any tokenizer exists: tf.random.set_seed clears TF's kernel cache, which
    # deletes the SentencePiece resources of tokenizers created earlier.
    keras.utils.set_random_seed(params.seed)
    task.configure_text(
        spm_model,
        max_seq_length=params.max_seq_length,
        static_shapes=strategy_lib.is_tpu(strategy),
        **text_settings(params),
    )
    wanted = [
        s
        for s, on in (
            ("train", params.do_train),
            ("dev", params.do_eval),
            ("test", params.do_predict),
        )
        if on
    ]
    task.load(wanted)  # the data's errors come before any log line of the model's
    params = _learning_rate_of_size(params, config)
    params = _warmup_from_proportion(_steps_from_epochs(params, task))
    tf.io.gfile.makedirs(params.output_dir)
    params, previous_policy = apply_to_params(params, strategy)  # logs the choice
    try:
        runner = _Finetuner(params, task, strategy, spm_model, init_source)
        runner.build(task.vocab_size)
    finally:
        keras.config.set_dtype_policy(previous_policy)  # the model keeps its own policy
    runner.claim(spm_model)  # compare with (or remove) the run there, before any write
    logs = os.path.join(params.output_dir, "logs")
    train_writer = summaries.SummaryWriter(logs, "train")
    eval_writer = summaries.SummaryWriter(logs, "eval")
    try:
        runner.restore()
        if params.do_train:
            runner.train(train_writer, eval_writer)
        return runner.finish(eval_writer)
    finally:
        train_writer.close()
        eval_writer.close()
        if runner.checkpointer is not None:
            runner.checkpointer.close()
