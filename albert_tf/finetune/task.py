"""`FinetuneTask`: what `run_finetuning` needs to know about a task, and nothing about strategies,
checkpoints or schedules.

A task reads its examples from files, turns each split into in-memory `Features` (arrays with
one row per model input; a task whose preprocessing runs in the graph gives raw strings and an
`input_transform`), puts its head on an `AlbertModel`, says which metric selects the best
checkpoint, turns the model's outputs back into predictions, scores them, writes them and exports
the trained model for serving. Loss and Keras metrics are the head model's `compile` defaults.

The runner calls, in order: `configure_text(...)`, `load(splits)`, `sequence_lengths(split)`
(the length statistics it logs, and how far it may cut each evaluation batch's padding),
`build_model(backbone)`, `features(split)` and `input_transform()`, then during training
`postprocess` + `evaluate` on the dev split, and at the end `write_predictions` (the chosen
model's, on the dev and test splits; `evaluate` on a test split that `is_labelled`) and
`export` (the SavedModel of the task's `serving_spec`). `describe()` is stored in the output
directory's finetune.json, with the SentencePiece model as a file beside it (`SPM_MODEL_KEY`);
`task_from_description` rebuilds the task from it (for exporting later from a finished run).

Every task writes `<split>_results.tsv`, a table with a header row for reading the predictions
(`write_tsv`): one row per example with its id or text, the gold answer (when the split has
one) and the prediction, with label names rather than ids.
"""

import abc
import base64
import dataclasses
import os
import re
from typing import Dict, Optional

import numpy as np

#: The key of `describe()` naming the SentencePiece model file (a path; relative to the
#: directory of finetune.json when read from one).
SPM_MODEL_KEY = "spm_model_file"
#: The key of a description embedding the model instead (base64; finetune.json files of older
#: versions, or a task configured from bytes).
SPM_PROTO_KEY = "spm_model_proto"


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
    """The task interface of `albert_tf.finetune.run_finetuning` (see the module docstring).

    A task must define `load`, `build_model`, `features`, `postprocess`, `evaluate`,
    `write_predictions` and `serving_spec`, and set `kind` and `data_type`. Everything else has a
    default for the common layout: `data` holds the task's settings (a `data_type` dataclass),
    `configure_text` sets `preprocessor` (an `AlbertPreprocessor`), `load` fills `examples`
    ({split: that split's examples}); the name is `kind`, the best checkpoint is chosen by
    "accuracy". A task rebuilt from finetune.json (exporting a finished run) is also listed in
    `TASK_KINDS`. A minimal task, "is the text longer than 40 characters?":

    >>> from albert_tf.finetune.task_data import ClassificationData
    >>> from albert_tf.metrics.glue_metrics import accuracy
    >>> class LongTextTask(FinetuneTask):
    ...     kind = "long_text"
    ...     data_type = ClassificationData
    ...
    ...     def __init__(self, data, seed=0):
    ...         self.data, self.examples = data, {}
    ...
    ...     def load(self, splits):
    ...         texts = ["a short one", "a text that goes on for quite a few more words"]
    ...         self.examples = {split: texts for split in splits}
    ...
    ...     def build_model(self, backbone, dropout=0.1):
    ...         from albert_tf.models.classifier import AlbertClassifier
    ...
    ...         return AlbertClassifier(backbone, num_classes=2, dropout=dropout)
    ...
    ...     def features(self, split):
    ...         texts = self.examples[split]
    ...         labels = np.array([int(len(text) > 40) for text in texts])
    ...         return Features({"text": np.asarray(texts, dtype=object)}, labels)
    ...
    ...     def input_transform(self):
    ...         return self.preprocessor  # raw strings -> token ids in tf.data
    ...
    ...     def postprocess(self, outputs, split):
    ...         return np.argmax(outputs, axis=-1)
    ...
    ...     def evaluate(self, predictions, split):
    ...         return {"accuracy": accuracy(predictions, self.features(split).labels)}
    ...
    ...     def write_predictions(self, predictions, split, output_dir):
    ...         path = os.path.join(output_dir, f"{split}_results.tsv")
    ...         write_tsv(path, ["index", "prediction"], enumerate(predictions))
    ...
    ...     def serving_spec(self, model, max_seq_length=None):
    ...         import functools
    ...
    ...         from albert_tf.export.saved_model import classifier_spec
    ...         from albert_tf.export.serving_spec import ServingSpec
    ...
    ...         saved = functools.partial(classifier_spec, model, self.preprocessor)
    ...         return ServingSpec(self.kind, saved)  # no LiteRT export
    >>> task = LongTextTask(ClassificationData())
    >>> task.load(["train", "dev"])
    >>> task.name, task.main_metric, task.loaded_splits, task.evaluate(np.array([0, 1]), "dev")
    ('long_text', 'accuracy', ('train', 'dev'), {'accuracy': 1.0})
    """

    #: "classification", "token_classification", ...: selects the task class when rebuilding,
    #: and the default `name`.
    kind = None
    #: The dataclass of `data`: `from_description` rebuilds `data` with it.
    data_type = None
    #: The task's data settings (a `data_type` instance such as `ClassificationData`): recorded
    #: in the output directory's run.json and compared when a run is resumed.
    data = None
    #: The `AlbertPreprocessor` that `configure_text` sets (None for a task tokenizing otherwise).
    preprocessor = None
    #: Names of the files `write_predictions` may write into the output directory: removed
    #: with the rest of a run by --overwrite_output_dir.
    output_files = ()
    #: The dev metric (higher is better) that selects the best checkpoint: a key of `evaluate`'s
    #: results (a property where it depends on the data).
    main_metric = "accuracy"
    #: The `compute_dtype`s `export` accepts: "bfloat16" (bfloat16 weights and matmuls, float32
    #: outputs) where the SavedModel maker of `serving_spec` takes `compute_dtype`.
    export_compute_dtypes = ("float32",)
    #: Whether `export` takes `agreement_texts` (held-out texts a bfloat16 export is compared
    #: with float32 on; classification only, pairs where its `spec.is_pair`).
    export_agreement_texts = False
    #: Whether `export` (and the LiteRT spec) take `word_split` (a word convention of
    #: `albert_tf.data.word_convention`, overriding the recorded one; token classification).
    export_word_split = False
    #: What the last `export` measured of the served model against the runner's own dev
    #: predictions (a JSON-serialisable dict with a "warnings" list; the runner stores it in
    #: finetune.json as "export_agreement"), or None.
    export_agreement = None

    @property
    def name(self):
        """The task's name (logs, finetune.json)."""
        return self.kind

    def configure_text(
        self,
        spm_model,
        lower_case=True,
        max_seq_length=512,
        static_shapes=False,
        tex_quotes=False,
        albert_rules=True,
    ):
        """Sets the tokenizer (a SentencePiece model path or bytes, `lower_case`, `tex_quotes`,
        `albert_rules` as `SentencePieceTokenizer`'s) and sequence length; `static_shapes`
        (TPU) forbids padding a batch to less than `max_seq_length`. The default sets
        `preprocessor`."""
        from albert_tf.models.preprocessor import AlbertPreprocessor

        self.preprocessor = AlbertPreprocessor(
            spm_model,
            lower_case=lower_case,
            max_seq_length=max_seq_length,
            tex_quotes=tex_quotes,
            albert_rules=albert_rules,
        )

    @property
    def vocab_size(self):
        """The configured tokenizer's vocabulary size."""
        return self.preprocessor.vocab_size

    @property
    def loaded_splits(self):
        """Names of the splits `load` read (the default: the keys of `examples`)."""
        return tuple(self.examples)

    @abc.abstractmethod
    def load(self, splits):
        """Reads the examples of `splits` (a subset of "train", "dev", "test"); raises
        DataError / FileNotFoundError naming the file and line."""

    def sequence_lengths(self, split):
        """int array, one entry per example of a loaded split: its length in SentencePiece
        pieces with [CLS]/[SEP] (the longest of its model rows where the task truncates or
        windows it, so at most the configured max_seq_length); None when the task cannot tell.
        Must not be below the real length of any of the split's model rows: the runner pads
        evaluation batches to the split's longest."""
        return None

    def is_labelled(self, split):
        """Whether a loaded split has gold answers, so that `evaluate` can score it (a test file
        with labels is scored once, at the end, on the chosen checkpoint)."""
        return split != "test"

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

    def adopt_dev_metrics(self, metrics):
        """Keeps what the task derives from the chosen model's dev `evaluate` metrics for
        writing predictions and exporting (default: nothing; SQuAD v2: its null-score
        threshold). `evaluate` itself changes nothing."""

    def headline_metrics(self, metrics):
        """The part of `evaluate`'s metrics worth a log line (all are in eval_results.json and
        TensorBoard)."""
        return metrics

    @abc.abstractmethod
    def write_predictions(self, predictions, split, output_dir):
        """Writes the predictions of `split` into `output_dir` (atomically)."""

    @abc.abstractmethod
    def serving_spec(self, model, max_seq_length=None):
        """The `albert_tf.export.serving_spec.ServingSpec` of the trained `model`: its raw-text
        SavedModel (and LiteRT) exports, with `max_seq_length` tokens at most per sequence
        (default: the training length)."""

    def word_split_options(self, word_split="auto"):
        """The export options of the scripts' `--word_split`: {"word_split": it} where
        `export_word_split`; else {} for "auto" and an InvalidFlagError for another value."""
        if self.export_word_split:
            return {"word_split": word_split}
        if word_split != "auto":
            from albert_tf.settings import InvalidFlagError

            raise InvalidFlagError(
                f"--word_split applies to a token classification run, not to a {self.kind} one"
            )
        return {}

    def export(
        self, model, export_dir, version=None, max_seq_length=None, write_warmup="auto", **options
    ):
        """Exports `model` for TF Serving (EXPORT_DIR/<version>: `saved_model.build` of
        `serving_spec`'s SavedModel, made with `options`: `compute_dtype`, one of
        `export_compute_dtypes`, and `agreement_texts` where `export_agreement_texts`); returns
        the version path."""
        from albert_tf.export import saved_model

        compute_dtype = options.get("compute_dtype", "float32")
        if compute_dtype not in self.export_compute_dtypes:
            raise ValueError(
                f"compute_dtype={compute_dtype!r}: a {self.kind} export computes in "
                f"{' or '.join(self.export_compute_dtypes)}"
            )
        if compute_dtype == "float32":  # every maker's default (RACE's takes no compute_dtype)
            options.pop("compute_dtype", None)
        spec = self.serving_spec(model, max_seq_length).saved_model(**options)
        return saved_model.build(spec, export_dir, version, write_warmup)

    def describe(self):
        """A JSON-serialisable description, enough for `from_description` to rebuild the task
        for exporting and predicting (no data is re-read); the SentencePiece model is named by
        `describe_spm_model`'s entry, which the runner points at the copy beside finetune.json.
        The default: `kind`, `name`, `data` and `describe_preprocessor(preprocessor)`."""
        return {
            "kind": self.kind,
            "name": self.name,
            "data": dataclasses.asdict(self.data),
            **describe_preprocessor(self.preprocessor),
        }

    @classmethod
    def from_description(cls, description, directory=None):
        """The task `describe()` described; `directory` is where the description was read from
        (relative file names in it are resolved against it). The default: the task of a
        `data_type` made from "data", with its `preprocessor`."""
        task = cls(cls.data_type(**description["data"]))
        task.preprocessor = preprocessor_of(description, directory)
        return task


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


def task_from_description(description, directory=None):
    """Rebuilds a task from finetune.json's "task" entry (any kind in `TASK_KINDS`); pass the
    directory of finetune.json as `directory` (its SentencePiece model is the file beside it)."""
    return task_class(description.get("kind")).from_description(description, directory=directory)


# ----------------------------------------------------------------------------- descriptions
def describe_spm_model(spm_model):
    """The description entry of a SentencePiece model: {SPM_MODEL_KEY: path} for a file,
    {SPM_PROTO_KEY: base64} for bytes.

    >>> describe_spm_model("/models/spm.model")
    {'spm_model_file': '/models/spm.model'}
    >>> describe_spm_model(b"proto")
    {'spm_model_proto': 'cHJvdG8='}
    """
    if isinstance(spm_model, (bytes, bytearray)):
        return {SPM_PROTO_KEY: base64.b64encode(bytes(spm_model)).decode("ascii")}
    return {SPM_MODEL_KEY: str(spm_model)}


def spm_model_of(description, directory=None):
    """The SentencePiece model a description names: its file (a relative name resolved against
    `directory`) or the bytes it embeds.

    >>> spm_model_of({"spm_model_file": "spm.model"}, "/runs/mrpc")
    '/runs/mrpc/spm.model'
    >>> spm_model_of({"spm_model_proto": "cHJvdG8="})
    b'proto'
    """
    if description.get(SPM_MODEL_KEY):
        path = description[SPM_MODEL_KEY]
        if directory and "://" not in path and not os.path.isabs(path):
            path = os.path.join(directory, path)
        return path
    if description.get(SPM_PROTO_KEY):
        return base64.b64decode(description[SPM_PROTO_KEY])
    raise ValueError(f"the description names no SentencePiece model ({SPM_MODEL_KEY})")


def describe_preprocessor(preprocessor):
    """{"preprocessor": its settings, **describe_spm_model(its file or bytes)}: the model
    travels as a file name, not inside the settings."""
    settings = dict(preprocessor.get_config())
    settings.pop("spm_model", None)
    return {
        "preprocessor": settings,
        **describe_spm_model(preprocessor.source or preprocessor.model_proto),
    }


def preprocessor_of(description, directory=None):
    """The `AlbertPreprocessor` `describe_preprocessor` described (also the entry of older
    finetune.json files: a serialized layer embedding the model)."""
    import keras

    from albert_tf.models.preprocessor import AlbertPreprocessor
    from albert_tf.text.preprocessing_layers import renamed_config

    entry = description["preprocessor"]
    if "class_name" in entry:  # a serialized layer, the model inside
        return keras.saving.deserialize_keras_object(entry)
    settings = renamed_config(entry)  # older files say "seq_length"
    return AlbertPreprocessor(**{**settings, "spm_model": spm_model_of(description, directory)})


# ----------------------------------------------------------------------------- result tables
def tsv_field(value):
    r"""A value as one TSV field: tabs and line breaks become spaces, floats get 6 decimals.

    >>> tsv_field("two\tlines\n"), tsv_field(0.5), tsv_field(None)
    ('two lines ', '0.500000', '')
    """
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6f}"
    return re.sub(r"[\t\r\n]", " ", str(value))


def write_tsv(path, header, rows):
    """Writes a header row and `rows` (sequences of values, `tsv_field` each) atomically."""
    from albert_tf import files

    lines = ["\t".join(tsv_field(v) for v in row) for row in [header, *rows]]
    files.write_atomic(path, "\n".join(lines) + "\n")
