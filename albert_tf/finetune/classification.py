"""Sentence(-pair) classification and regression as a `FinetuneTask`: GLUE, any labelled
CSV/TSV/JSONL file, and the built-in "docstring-source" task.

Raw strings are the features; the `AlbertPreprocessor` turns each batch into token ids inside
tf.data (and inside the exported SavedModel, so training and serving tokenize identically).
Metrics are GLUE's (`albert_tf.metrics.glue_metrics`); the best checkpoint is chosen by the task's
first metric (Matthews for CoLA, Pearson for STS-B, accuracy otherwise).

>>> task = SentenceClassificationTask(ClassificationData(task_name="mrpc", data_dir="glue"))
>>> task.name, task.main_metric
('mrpc', 'accuracy')
"""

import dataclasses
import os

import numpy as np
from absl import logging

from albert_tf.data import glue
from albert_tf.data.docstring_task import DOCSTRING_SOURCE, docstring_source_splits
from albert_tf.data.task_spec import TaskSpec, custom_task
from albert_tf.data.text_files import file_columns, read_file_examples
from albert_tf.finetune.task import (
    Features,
    FinetuneTask,
    preprocessor_of,
    write_tsv,
)
from albert_tf.finetune.task_data import ClassificationData
from albert_tf.metrics.glue_metrics import compute_metrics
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.settings import InvalidFlagError


def _is_docstring_task(name):
    return name.lower().replace("_", "-") == DOCSTRING_SOURCE


def load_task_splits(data, wanted=("train", "dev"), seed=0):
    """Reads the `wanted` splits; returns (TaskSpec, {split: Examples}).

    Files (`train_file`/`dev_file`/`test_file`) make a custom task named `task_name` (labels
    from `labels` or the training file; the test file's labels are read when it has the label
    column); "docstring-source" is the built-in task; any other name is a GLUE task read from
    `data_dir` TSVs or, with `use_tfds`, from TFDS `glue/*` in `tfds_data_dir` (downloaded and
    prepared there first unless `tfds_download` is off), into the same examples.
    """
    if data.train_file or data.dev_file or data.test_file:
        spec = custom_task(
            data.task_name,
            data.text_column,
            data.text_pair_column,
            data.label_column,
            data.labels,
            data.regression,
        )
        paths = {"train": data.train_file, "dev": data.dev_file, "test": data.test_file}
        missing = [s for s in wanted if not paths[s]]
        if missing:
            raise InvalidFlagError(
                f"task {data.task_name!r} from files: no file for split(s) "
                f"{missing} (--{missing[0]}_file)"
            )
        splits = {}
        for split in ("train", "dev", "test"):
            if split in wanted:
                labelled = split != "test" or spec.label_column in file_columns(paths[split])
                splits[split], spec = read_file_examples(
                    spec,
                    paths[split],
                    labelled=labelled,
                    skip_bad_lines=data.skip_bad_lines,
                    infer_labels=not spec.is_regression and not spec.labels,
                )
        return spec, splits
    if _is_docstring_task(data.task_name):
        if data.use_tfds:
            raise InvalidFlagError(
                f"--use_tfds reads GLUE tasks; --task_name={DOCSTRING_SOURCE} is built in"
            )
        if "test" in wanted:
            raise InvalidFlagError(
                f"--task_name={DOCSTRING_SOURCE} has no test split (--do_predict)"
            )
        spec, splits = docstring_source_splits(seed=seed)
        return spec, {s: splits[s] for s in wanted}
    try:
        spec = glue.get_task(data.task_name)
    except ValueError as e:
        raise InvalidFlagError(f"--task_name: {e}") from None
    if data.use_tfds:
        return spec, {
            s: glue.read_tfds_examples(spec, s, data.tfds_data_dir, data.tfds_download)
            for s in wanted
        }
    if data.data_dir is None:
        raise InvalidFlagError(f"GLUE task {spec.name!r} needs --data_dir (or --use_tfds)")
    return spec, {
        s: glue.read_glue_examples(spec, data.data_dir, s, data.skip_bad_lines) for s in wanted
    }


def _text_inputs(examples):
    inputs = {"text": np.asarray(examples.texts, dtype=object)}
    if examples.text_pairs is not None:
        inputs["text_pair"] = np.asarray(examples.text_pairs, dtype=object)
    return inputs


def sequence_lengths(examples, preprocessor, batch_size=1024):
    """Length of each example's [CLS] a [SEP] (b [SEP]) in pieces, before truncation (int
    array)."""
    specials = 3 if examples.text_pairs is not None else 2
    found = []
    for start in range(0, len(examples), batch_size):
        total = preprocessor.token_lengths(examples.texts[start : start + batch_size]).numpy()
        if examples.text_pairs is not None:
            pairs = examples.text_pairs[start : start + batch_size]
            total = total + preprocessor.token_lengths(pairs).numpy()
        found.append(total.astype(np.int64) + specials)
    return np.concatenate(found) if found else np.zeros([0], np.int64)


def majority_rate(labels):
    """(label id, fraction) of the most frequent label: the accuracy of always predicting it."""
    values, counts = np.unique(np.asarray(labels).reshape(-1), return_counts=True)
    return int(values[np.argmax(counts)]), float(counts.max() / counts.sum())


class SentenceClassificationTask(FinetuneTask):
    """Classification or regression of single texts or text pairs (see the module docstring).

    Args:
        data: a `ClassificationData` (task name, files or GLUE directory, columns, labels).
        seed: seed of the built-in task's train/dev split.
        spec: a known `TaskSpec` (when rebuilding a finished task; no data is read then).
    """

    kind = "classification"
    data_type = ClassificationData
    output_files = ("submit_results.tsv",)
    export_compute_dtypes = ("float32", "bfloat16")
    export_agreement_texts = True

    def __init__(self, data, seed=0, spec=None):
        self.data = data
        self.seed = seed
        self.spec = spec
        self.splits = {}
        self.lengths = {}

    # ------------------------------------------------------------------ description
    @property
    def name(self):
        return self.spec.name if self.spec else self.data.task_name

    @property
    def main_metric(self):
        if self.spec is not None:
            return self.spec.main_metric
        if self.data.regression:
            return "pearson"
        if self.data.train_file or self.data.dev_file or _is_docstring_task(self.data.task_name):
            return "accuracy"
        return glue.get_task(self.data.task_name).main_metric

    @property
    def loaded_splits(self):
        return tuple(self.splits)

    def configure_text(
        self,
        spm_model,
        lower_case=True,
        max_seq_length=512,
        static_shapes=False,
        tex_quotes=False,
        albert_rules=True,
    ):
        if static_shapes and self.data.dynamic_padding:
            raise InvalidFlagError(
                "--dynamic_padding needs dynamic shapes: not with --strategy=tpu"
            )
        dynamic = self.data.dynamic_padding
        self.preprocessor = AlbertPreprocessor(
            spm_model,
            lower_case=lower_case,
            max_seq_length=max_seq_length,
            truncation=self.data.truncation,
            dynamic_padding=not static_shapes if dynamic is None else dynamic,
            tex_quotes=tex_quotes,
            albert_rules=albert_rules,
        )

    def load(self, splits):
        self.spec, self.splits = load_task_splits(self.data, splits, self.seed)
        for split, examples in self.splits.items():
            self.lengths[split] = sequence_lengths(examples, self.preprocessor)
            truncated = int(np.sum(self.lengths[split] > self.preprocessor.max_seq_length))
            logging.info(
                "%s: %d examples from %s; %d (%.1f%%) longer than max_seq_length=%d are truncated",
                split,
                len(examples),
                examples.source,
                truncated,
                100.0 * truncated / len(examples),
                self.preprocessor.max_seq_length,
            )

    def build_model(self, backbone, dropout=0.1):
        return AlbertClassifier(
            backbone, num_classes=self.spec.num_classes, dropout=dropout, labels=self.spec.labels
        )

    # ------------------------------------------------------------------ data
    def features(self, split):
        examples = self.splits[split]
        return Features(_text_inputs(examples), examples.labels)

    def input_transform(self):
        return self.preprocessor

    def sequence_lengths(self, split):
        return self.lengths.get(split)

    def is_labelled(self, split):
        return self.splits[split].labels is not None

    def baselines(self):
        dev = self.splits.get("dev")
        if dev is None or dev.labels is None or self.spec.is_regression:
            return {}
        label, rate = majority_rate(dev.labels)
        values = {"dev_majority_class_rate": rate, "dev_majority_class": self.spec.labels[label]}
        if "f1" in self.spec.metrics:
            values["f1_positive_class"] = self.spec.labels[1]
        return values

    def main_metric_baselines(self, baselines):
        dev = self.splits.get("dev")
        if dev is None or dev.labels is None:
            return {}
        if self.main_metric != "accuracy":  # Matthews, Pearson: a constant prediction scores 0
            return {"trivial": 0.0}
        rate = baselines["dev_majority_class_rate"]
        name = f"always the dev set's majority class {baselines['dev_majority_class']!r}"
        return {"trivial": rate, "strongest": {"name": name, "value": rate}}

    def constant_prediction(self, predictions):
        if self.spec.is_regression:
            scores = np.asarray(predictions["scores"])
            if len(scores) > 1 and np.ptp(scores) <= 1e-6 * max(1.0, float(np.abs(scores).max())):
                return f"the score {float(scores[0]):.4g}"
            return None
        labels = np.unique(predictions["labels"])
        return f"label {self.spec.labels[int(labels[0])]!r}" if len(labels) == 1 else None

    # ------------------------------------------------------------------ outputs
    def postprocess(self, outputs, split):
        outputs = np.asarray(outputs, dtype=np.float64)
        if self.spec.is_regression:
            return {"scores": outputs.reshape(-1)}
        shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
        return {"probabilities": probabilities, "labels": probabilities.argmax(axis=-1)}

    def evaluate(self, predictions, split):
        labels = self.splits[split].labels
        predicted = predictions["scores"] if self.spec.is_regression else predictions["labels"]
        results = compute_metrics(self.spec.metrics, predicted, labels)
        results["num_examples"] = int(len(labels))
        return results

    def write_predictions(self, predictions, split, output_dir):
        """<split>_results.tsv: a header row, then per example its index, text(s), gold label
        (when the split has labels) and predicted label by name with each label's probability
        (regression: the gold and predicted scores); for the test split also submit_results.tsv
        ("index<TAB>prediction" with label names, the GLUE submission format)."""
        examples = self.splits[split]
        pair = examples.text_pairs is not None
        header = ["index", "text"] + (["text_pair"] if pair else [])
        gold = examples.labels
        if self.spec.is_regression:
            header += (["label"] if gold is not None else []) + ["prediction"]
            submit = [f"{s:.6f}" for s in predictions["scores"]]
            extra = [[float(s)] for s in predictions["scores"]]
        else:
            names = list(self.spec.labels)
            header += (["label"] if gold is not None else []) + ["prediction"]
            header += [f"probability_{name}" for name in names]
            submit = [names[int(i)] for i in predictions["labels"]]
            extra = [
                [submit[i], *map(float, row)] for i, row in enumerate(predictions["probabilities"])
            ]
        rows = []
        for i in range(len(examples)):
            row = [i, examples.texts[i]] + ([examples.text_pairs[i]] if pair else [])
            if gold is not None:
                row.append(
                    float(gold[i]) if self.spec.is_regression else self.spec.labels[int(gold[i])]
                )
            rows.append(row + extra[i])
        write_tsv(os.path.join(output_dir, f"{split}_results.tsv"), header, rows)
        if split == "test":
            write_tsv(
                os.path.join(output_dir, "submit_results.tsv"),
                ["index", "prediction"],
                list(enumerate(submit)),
            )
        logging.info("Wrote %d %s predictions to %s", len(submit), split, output_dir)

    def serving_spec(self, model, max_seq_length=None):
        """The model's `ServingSpec`: its SavedModel (`saved_model.classifier_spec`; options
        compute_dtype, agreement_texts) and LiteRT (`litert.text_spec`) exports."""
        import functools

        from albert_tf.export import litert, saved_model
        from albert_tf.export.serving_spec import ServingSpec

        preprocessor = self.preprocessor
        served = preprocessor
        if max_seq_length:
            served = preprocessor.with_padding(preprocessor.dynamic_padding, max_seq_length)

        def texts(split, limit):
            if split not in self.loaded_splits:
                self.load(["train", "dev"])
            features = self.features(split)
            return litert.text_columns(features.inputs, features.labels, limit)

        pair = self.spec.is_pair
        # Serving pads each request batch to its longest text whatever training did.
        saved = functools.partial(saved_model.classifier_spec, model, served, pair, True)
        lite = functools.partial(
            litert.text_spec, model, preprocessor, texts, self.kind, self.name, pair, max_seq_length
        )
        return ServingSpec(self.kind, saved, lite)

    def describe(self):
        return {
            **super().describe(),
            "spec": dataclasses.asdict(self.spec),
            "seed": self.seed,  # the built-in task's split: its dev set is the run's dev set
            "pair": self.spec.is_pair,
            "labels": list(self.spec.labels or []) or None,
            "regression": self.spec.is_regression,
        }

    @classmethod
    def from_description(cls, description, directory=None):
        values = dict(description["spec"])
        for key, value in values.items():
            if isinstance(value, list):
                values[key] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        spec = TaskSpec(**values)
        # (a finetune.json without "seed" predates it: its split was rebuilt with seed 0)
        task = cls(
            ClassificationData(**description["data"]), seed=description.get("seed", 0), spec=spec
        )
        task.preprocessor = preprocessor_of(description, directory)
        return task
