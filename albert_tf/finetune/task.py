"""`FinetuneTask`: what `run_finetuning` needs to know about a task, and nothing about strategies,
checkpoints or schedules.

A task reads its examples from files, turns each split into in-memory `Features` (arrays with
one row per model input; a task whose preprocessing runs in the graph gives raw strings and an
`input_transform`), puts its head on an `AlbertModel`, says which metric selects the best
checkpoint, turns the model's outputs back into predictions, scores them, writes them and exports
the trained model for serving. Loss and Keras metrics are the head model's `compile` defaults.

The runner calls, in order: `configure_text(...)`, `load(splits)`, `build_model(backbone)`,
`features(split)` and `input_transform()`, then during training `postprocess` + `evaluate` on
the dev split, and at the end `write_predictions` (the chosen model's, on the dev and test
splits) and `export`. `describe()` is stored in the output directory's finetune.json;
`task_from_description` rebuilds the task from it (for exporting later from a finished run).
"""

import abc
import dataclasses
from typing import Dict, Optional

import numpy as np


@dataclasses.dataclass
class Features:
    """One split as model inputs: `inputs` maps names to arrays with one row per model input;
    `labels` (an array, a dict of arrays, or None) has the same number of rows. Rows may be more
    than examples (a long sentence becomes several windows): the task maps outputs back in
    `postprocess`."""

    inputs: Dict[str, np.ndarray]
    labels: Optional[np.ndarray] = None

    def __len__(self):
        return len(next(iter(self.inputs.values())))


class FinetuneTask(abc.ABC):
    """The task interface of `albert_tf.finetune.run_finetuning` (see the module docstring)."""

    #: "classification", "token_classification", ...: selects the task class when rebuilding.
    kind = None
    #: The task's data settings (a dataclass such as `ClassificationData`): recorded in the
    #: output directory's run.json and compared when a run is resumed.
    data = None
    #: Names of the files `write_predictions` may write into the output directory: removed
    #: with the rest of a run by --overwrite_output_dir.
    output_files = ()

    @property
    @abc.abstractmethod
    def name(self):
        """The task's name (logs, finetune.json)."""

    @property
    @abc.abstractmethod
    def main_metric(self):
        """The dev metric (higher is better) that selects the best checkpoint."""

    @abc.abstractmethod
    def configure_text(
        self, spm_model, lower_case=True, seq_length=512, static_shapes=False, tex_quotes=False
    ):
        """Sets the tokenizer (a SentencePiece model path or bytes, `lower_case`, `tex_quotes`
        as `SentencePieceTokenizer`'s) and sequence length; `static_shapes` (TPU) forbids
        padding a batch to less than `seq_length`."""

    @property
    @abc.abstractmethod
    def vocab_size(self):
        """The configured tokenizer's vocabulary size."""

    @property
    @abc.abstractmethod
    def loaded_splits(self):
        """Names of the splits `load` read."""

    @abc.abstractmethod
    def load(self, splits):
        """Reads the examples of `splits` (a subset of "train", "dev", "test"); raises
        DataError / FileNotFoundError naming the file and line."""

    @abc.abstractmethod
    def build_model(self, backbone, dropout=0.1):
        """The task's keras.Model around `backbone` (an AlbertModel; `dropout` before the head),
        not compiled."""

    @abc.abstractmethod
    def features(self, split):
        """`Features` of a loaded split (labels None for an unlabelled split)."""

    def input_transform(self):
        """A function applied to each batch of `Features.inputs` in tf.data (e.g. raw strings ->
        token ids), or None when the features already are the model inputs."""
        return None

    def baselines(self):
        """Reference numbers for the dev set (e.g. the majority-class rate), stored in
        eval_results.json beside the history."""
        return {}

    def main_metric_baselines(self, baselines):
        """The dev set's reference points on the main metric's scale, from `baselines` (what
        `baselines()` returned; not computed again): {"trivial": the score of
        answering every example the same way (majority class, all-O, empty answers, one option
        letter), "strongest": {"name", "value"} of the strongest simple baseline}; either key
        may be missing. `albert_tf.finetune.learning_check` warns when a run stays at the
        trivial score and reports whether it beat the strongest."""
        return {}

    def constant_prediction(self, predictions):
        """What every example got when `predictions` (of `postprocess`) are all the same answer
        ("label 'other'", "tag 'O'", "an empty answer"); None otherwise."""
        return None

    @abc.abstractmethod
    def postprocess(self, outputs, split):
        """Predictions of `split`'s examples from the model's outputs on its features (NumPy,
        one row per feature row)."""

    @abc.abstractmethod
    def evaluate(self, predictions, split):
        """{metric name: float} of the predictions against the split's labels; must contain
        `main_metric`."""

    def headline_metrics(self, metrics):
        """The part of `evaluate`'s metrics worth a log line (all are in eval_results.json and
        TensorBoard)."""
        return metrics

    @abc.abstractmethod
    def write_predictions(self, predictions, split, output_dir):
        """Writes the predictions of `split` into `output_dir` (atomically)."""

    @abc.abstractmethod
    def export(self, model, export_dir, version=None, seq_length=None, write_warmup="auto"):
        """Exports `model` for TF Serving with raw-text signatures (EXPORT_DIR/<version>, with
        `seq_length` tokens at most per sequence: default the training length); returns the
        version path."""

    @abc.abstractmethod
    def describe(self):
        """A JSON-serialisable description, enough for `from_description` to rebuild the task
        for exporting and predicting (no data is re-read)."""

    @classmethod
    @abc.abstractmethod
    def from_description(cls, description):
        """The task `describe()` described."""


# kind -> the module and class implementing it (imported only when that kind is rebuilt).
TASK_KINDS = {
    "classification": ("albert_tf.finetune.classification", "SentenceClassificationTask"),
    "token_classification": ("albert_tf.finetune.tagging", "TokenClassificationTask"),
    "squad": ("albert_tf.finetune.squad", "SquadTask"),
    "race": ("albert_tf.finetune.race", "RaceTask"),
}


def task_class(kind):
    """The `FinetuneTask` class of `kind` (a key of `TASK_KINDS`), its module imported now."""
    import importlib

    if kind not in TASK_KINDS:
        raise ValueError(f"unknown task kind {kind!r}; known: {sorted(TASK_KINDS)}")
    module, name = TASK_KINDS[kind]
    return getattr(importlib.import_module(module), name)


def task_from_description(description):
    """Rebuilds a task from finetune.json's "task" entry (any kind in `TASK_KINDS`)."""
    return task_class(description.get("kind")).from_description(description)
