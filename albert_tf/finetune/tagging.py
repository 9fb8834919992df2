"""Token classification (NER, chunking, POS tagging) as a `FinetuneTask`.

Examples are sentences of words with one tag each, read from CoNLL-2003 column files or JSON
lines (`albert_tf.data.conll`; IOB1 / IOB2 / IOBES tags become IOB2). Each word is split into
SentencePiece pieces; the first piece of a word carries its tag, the others are ignored in the
loss and the metrics; a sentence longer than the window is covered by sliding windows
(`albert_tf.text.word_windows`, `--stride`), and each word is scored in the window where it has
the most context. Metrics are the CoNLL evaluation's (entity-level precision, recall and F1 with
exact span and type, overall and per type) plus token accuracy; the best checkpoint is chosen by
entity F1 (token accuracy for a plain tag set such as POS tags).

The export tags raw text, split into words by the convention decided from the training words
(`albert_tf.data.word_convention`: "punctuation" when splitting punctuation off gives back at
least 99% of them, else "whitespace"; `--word_split` overrides it), recorded in finetune.json
("word_convention"); and pre-split words (the `words` signature). The served tags are measured
against the runner's own dev predictions (`dev_predictions.txt`; `export_agreement`).

>>> task = TokenClassificationTask(TaggingData(task_name="ner", train_file="train.txt"))
>>> task.name, task.kind
('ner', 'token_classification')
"""

import collections
import os

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.data import conll
from albert_tf.data import word_convention as conventions
from albert_tf.data.docstring_entities import DOCSTRING_CODE, docstring_code_splits
from albert_tf.finetune.task import Features, FinetuneTask, preprocessor_of, write_tsv
from albert_tf.finetune.task_data import TaggingData
from albert_tf.metrics.entity_metrics import entity_scores, most_frequent_tag_baseline
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.settings import InvalidFlagError
from albert_tf.text.word_windows import WordWindows, window_labels, window_sizes, word_logits

PREDICTIONS_FILE = "{split}_predictions.txt"


def _results_precision(run_dir):
    """The precision a run's dev scores and predictions were computed in (eval_results.json's
    "precision"), or None (not recorded: an older run)."""
    import tensorflow as tf

    from albert_tf.finetune.runner import RESULTS_FILE

    path = os.path.join(run_dir or "", RESULTS_FILE)
    if not run_dir or not tf.io.gfile.exists(path):
        return None
    try:
        return files.read_json(path).get("precision")
    except ValueError:
        return None


def _has_entities(labels):
    return any(label[:2] in ("B-", "I-") for label in labels)


class TokenClassificationTask(FinetuneTask):
    """Tagging of words (see the module docstring).

    Args:
        data: a `TaggingData` (files, tag column and scheme, labels, stride).
        seed: unused (the files fix the splits); kept for the runner's interface.
        labels: known tag names (when rebuilding a finished task; no data is read then).
    """

    kind = "token_classification"
    data_type = TaggingData
    output_files = tuple(PREDICTIONS_FILE.format(split=s) for s in ("dev", "test"))
    export_compute_dtypes = ("float32", "bfloat16")
    export_word_split = True

    def __init__(self, data, seed=0, labels=None):
        self.data = data
        self.labels = list(labels) if labels else (list(data.labels) if data.labels else None)
        self.sentences = {}
        self.windows = {}
        self.tag_ids = {}
        # The word convention's decision record (`word_convention.choose`): made from the
        # training words when they are read, or read from finetune.json.
        self.word_decision = None
        self.dev_predictions = None  # the runner's dev tags (`write_predictions`)
        self.dev_predictions_dir = None  # where they were written
        self.run_dir = None  # the output directory a rebuilt task was described in

    # ------------------------------------------------------------------ description
    @property
    def name(self):
        return self.data.task_name

    @property
    def main_metric(self):
        if self.labels is not None and not _has_entities(self.labels):
            return "token_accuracy"
        return "f1"

    @property
    def loaded_splits(self):
        return tuple(self.sentences)

    def configure_text(
        self,
        spm_model,
        lower_case=True,
        max_seq_length=512,
        static_shapes=False,
        tex_quotes=False,
        albert_rules=True,
    ):
        try:
            window_sizes(max_seq_length, self.data.stride)
        except ValueError as e:
            raise InvalidFlagError(f"--{e}") from None
        super().configure_text(
            spm_model, lower_case, max_seq_length, static_shapes, tex_quotes, albert_rules
        )

    def _read(self, split, path):
        flag = f"--{split}_file"
        if not path:
            raise InvalidFlagError(f"{flag} is required (its split is requested)")
        labelled = split != "test" or conll.has_tags(path, self.data.tag_column, self.data.tags_key)
        return conll.read_tagged(
            path,
            self.data.tag_column,
            scheme=self.data.tag_scheme,
            labelled=labelled,
            tokens_key=self.data.tokens_key,
            tags_key=self.data.tags_key,
        )

    def _builtin_splits(self, splits):
        documents = docstring_code_splits()
        out = {}
        for split in splits:
            sentences = [s for document in documents[split] for s in document]
            out[split] = conll.TaggedSentences(
                [w for w, _ in sentences],
                [t for _, t in sentences],
                f"builtin:docstrings ({DOCSTRING_CODE}) {split}",
                list(range(1, len(sentences) + 1)),
                scheme="iob2",
                word_per_line=False,
            )
        return out

    def load(self, splits):
        paths = {
            "train": self.data.train_file,
            "dev": self.data.dev_file,
            "test": self.data.test_file,
        }
        if self.name == DOCSTRING_CODE and not any(paths.values()):
            self.sentences = self._builtin_splits(
                [s for s in ("train", "dev", "test") if s in splits]
            )
        for split in ("train", "dev", "test"):
            if split in splits and split not in self.sentences:
                self.sentences[split] = self._read(split, paths[split])
        if self.labels is None:
            if "train" not in self.sentences:
                raise InvalidFlagError(
                    "--labels is required without --do_train (the tags "
                    "come from --train_file otherwise)"
                )
            self.labels = conll.tag_vocabulary(self.sentences["train"].tags)
        if len(set(self.labels)) != len(self.labels):
            raise InvalidFlagError(f"--labels has duplicates: {self.labels}")
        if "train" in self.sentences and self.word_decision is None:
            self.word_decision = conventions.decide(
                self.sentences["train"].words, self.data.word_split
            )
        for split, sentences in self.sentences.items():
            if sentences.tags is not None:
                self.tag_ids[split] = conll.tags_to_ids(sentences.tags, self.labels, sentences)
            windows = WordWindows.build(
                sentences.words,
                self.preprocessor,
                self.preprocessor.max_seq_length,
                self.data.stride,
            )
            self.windows[split] = windows
            logging.info(
                "%s: %d sentences, %d words from %s (%s tags); %d windows of %d "
                "pieces, %d sentences longer than one window",
                split,
                len(sentences),
                int(windows.words_per_sentence.sum()),
                sentences.source,
                sentences.scheme or "no",
                windows.num_windows,
                windows.max_seq_length,
                windows.num_long_sentences,
            )
        logging.info("Tags (%d): %s", len(self.labels), ", ".join(self.labels))

    def build_model(self, backbone, dropout=0.1):
        return AlbertTokenClassifier(
            backbone, num_classes=len(self.labels), dropout=dropout, labels=self.labels
        )

    # ------------------------------------------------------------------ data
    def features(self, split):
        windows = self.windows[split]
        labels = window_labels(windows, self.tag_ids[split]) if split in self.tag_ids else None
        return Features(windows.inputs, labels)

    def sequence_lengths(self, split):
        """Per sentence, its longest window's pieces with [CLS]/[SEP] (at most max_seq_length)."""
        windows = self.windows[split]
        longest = np.zeros(len(self.sentences[split]), np.int64)
        np.maximum.at(longest, windows.window_sentence, windows.input_mask.sum(axis=-1))
        return longest

    def is_labelled(self, split):
        return split in self.tag_ids

    def baselines(self):
        train, dev = self.sentences.get("train"), self.sentences.get("dev")
        if train is None or dev is None or dev.tags is None:
            return {}
        predicted = most_frequent_tag_baseline(train.words, train.tags).predict(dev.words)
        scores = self._scores(dev.tags, predicted)
        return {
            f"dev_most_frequent_tag_{k}": scores[k] for k in ("f1", "token_accuracy") if k in scores
        }

    def main_metric_baselines(self, baselines):
        dev = self.sentences.get("dev")
        if dev is None or dev.tags is None:
            return {}
        if self.main_metric == "f1":
            trivial = 0.0  # tagging every word O finds no entity
        else:
            counts = collections.Counter(t for tags in dev.tags for t in tags)
            trivial = max(counts.values()) / max(sum(counts.values()), 1)
        values = {"trivial": trivial}
        strongest = baselines.get(f"dev_most_frequent_tag_{self.main_metric}")
        if strongest is not None:
            name = "each word's most frequent training tag"
            values["strongest"] = {"name": name, "value": strongest}
        return values

    def constant_prediction(self, predictions):
        tags = {t for sentence in predictions["tags"] for t in sentence}
        return f"tag {next(iter(tags))!r}" if len(tags) == 1 else None

    # ------------------------------------------------------------------ outputs
    def postprocess(self, outputs, split):
        windows, outputs = self.windows[split], np.asarray(outputs)
        missing = windows.max_seq_length - outputs.shape[1]  # batches cut to the split's longest
        if missing > 0:
            outputs = np.pad(outputs, [(0, 0), (0, missing), (0, 0)])
        per_sentence = word_logits(windows, outputs)
        tags, scores = [], []
        for logits in per_sentence:
            logits = np.asarray(logits, np.float64)
            shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
            probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
            tags.append([self.labels[i] for i in probabilities.argmax(axis=-1)])
            scores.append(probabilities.max(axis=-1))
        return {"tags": tags, "scores": scores}

    def _scores(self, gold, predicted):
        if _has_entities(self.labels):
            return entity_scores(gold, predicted)
        correct = sum(g == p for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps))
        total = sum(len(gs) for gs in gold)
        return {"token_accuracy": correct / max(total, 1)}

    def evaluate(self, predictions, split):
        results = self._scores(self.sentences[split].tags, predictions["tags"])
        results["num_sentences"] = len(self.sentences[split])
        return results

    def headline_metrics(self, metrics):
        """Overall scores only (the per-type ones are in eval_results.json and TensorBoard)."""
        return {
            k: v for k, v in metrics.items() if k in ("precision", "recall", "f1", "token_accuracy")
        }

    def write_predictions(self, predictions, split, output_dir):
        """<split>_predictions.txt: CoNLL columns "word<TAB>tag", a blank line after each
        sentence; <split>_results.tsv: a header row, then one row per word: its sentence
        (0-based), the word, its gold tag (when the split has tags) and the predicted one."""
        sentences = self.sentences[split]
        lines = []
        for words, tags in zip(sentences.words, predictions["tags"]):
            lines.extend(f"{w}\t{t}" for w, t in zip(words, tags))
            lines.append("")
        path = os.path.join(output_dir, PREDICTIONS_FILE.format(split=split))
        files.write_atomic(path, "\n".join(lines) + "\n")
        if split == "dev":  # what the export is measured against
            self.dev_predictions = [list(tags) for tags in predictions["tags"]]
            self.dev_predictions_dir = output_dir
        gold = sentences.tags
        header = ["sentence", "word"] + (["label"] if gold is not None else []) + ["prediction"]
        rows = [
            [i, word] + ([gold[i][j]] if gold is not None else []) + [tag]
            for i, (words, tags) in enumerate(zip(sentences.words, predictions["tags"]))
            for j, (word, tag) in enumerate(zip(words, tags))
        ]
        write_tsv(os.path.join(output_dir, f"{split}_results.tsv"), header, rows)
        logging.info("Wrote tags of %d %s sentences to %s", len(predictions["tags"]), split, path)

    def word_record(self):
        """The word convention's decision record (`word_convention.choose`); without training
        words read or a recorded one, `--word_split`'s (or the default)."""
        if self.word_decision is None:
            self.word_decision = conventions.choose(None, self.data.word_split)
        return self.word_decision

    @property
    def word_convention(self):
        """The recorded word convention: "whitespace" or "punctuation"."""
        return self.word_record()["convention"]

    def export_word_convention(self, word_split="auto"):
        """The word convention an export serves: the recorded one for "auto", else
        `word_split`, with a WARNING when the recorded measurement says otherwise."""
        if word_split == "auto":
            return self.word_convention
        recorded = conventions.measured_part(self.word_record())
        return conventions.choose(recorded, word_split)["convention"]

    def _sentences_of(self, split):
        """The `TaggedSentences` of `split`, read (without windows) when not loaded."""
        if split not in self.sentences:
            paths = {"dev": self.data.dev_file, "train": self.data.train_file}
            if self.name == DOCSTRING_CODE and not any(paths.values()):
                return self._builtin_splits([split])[split]
            return self._read(split, paths[split])
        return self.sentences[split]

    def dev_reference(self, limit=None):
        """The `token_classifier_serving.DevReference` (words, the runner's predicted tags,
        gold tags or None, the precision the runner computed them in) of the first `limit` dev
        sentences (default `token_classifier_serving.AGREEMENT_SENTENCES`), which the export's
        agreement is measured on; None (said in one log line) when the runner's dev
        predictions are not known: neither written by this task nor in the output directory
        of a rebuilt one (dev_predictions.txt), or the dev file is gone or differs."""
        import tensorflow as tf

        from albert_tf.export.token_classifier_serving import AGREEMENT_SENTENCES, DevReference

        limit = limit or AGREEMENT_SENTENCES
        predicted = self.dev_predictions
        path = os.path.join(self.run_dir or "", PREDICTIONS_FILE.format(split="dev"))
        try:
            if predicted is None:
                if not self.run_dir or not tf.io.gfile.exists(path):
                    where = f"in {self.run_dir}" if self.run_dir else "from this run"
                    logging.info(
                        "No dev predictions %s (%s): the served tags are not compared with "
                        "the runner's",
                        where,
                        PREDICTIONS_FILE.format(split="dev"),
                    )
                    return None
                predicted = conll.read_conll(path, scheme="plain").tags
            dev = self._sentences_of("dev")
        except (OSError, ValueError) as e:  # a missing or bad file (DataError is a ValueError)
            logging.info(
                "The served tags are not compared with the runner's dev predictions: %s", e
            )
            return None
        if [len(t) for t in predicted] != [len(w) for w in dev.words]:
            logging.info(
                "The served tags are not compared with the runner's dev predictions: %s does "
                "not hold one tag per word of %s",
                path,
                dev.source,
            )
            return None
        gold = None if dev.tags is None else dev.tags[:limit]
        precision = _results_precision(self.run_dir or self.dev_predictions_dir)
        return DevReference(dev.words[:limit], predicted[:limit], gold, precision)

    def serving_spec(self, model, max_seq_length=None):
        """The model's `ServingSpec`: its SavedModel
        (`token_classifier_serving.token_classifier_spec`) and LiteRT (`litert.text_spec`)
        exports, with the recorded word convention (or option `word_split`), measured against
        the runner's dev predictions (`dev_reference`; `export_agreement`)."""
        from albert_tf.export import litert, token_classifier_serving
        from albert_tf.export.serving_spec import ServingSpec

        def texts(split, limit):
            if split not in self.loaded_splits:
                self.load(["train", "dev"])
            words = self.sentences[split].words
            return litert.sentence_columns(words, self.tag_ids.get(split), limit)

        def saved(word_split="auto", **options):
            spec = token_classifier_serving.token_classifier_spec(
                model,
                self.preprocessor,
                max_seq_length or self.preprocessor.max_seq_length,
                self.data.stride if not max_seq_length else None,
                self.labels,
                word_convention=self.export_word_convention(word_split),
                dev_reference=self.dev_reference(),
                **options,
            )
            self.export_agreement = spec.description.get("agreement_with_dev_predictions")
            return spec

        def lite(word_split="auto", **options):
            return litert.text_spec(
                model,
                self.preprocessor,
                texts,
                self.kind,
                self.name,
                False,
                max_seq_length,
                word_convention=self.export_word_convention(word_split),
                dev_reference=self.dev_reference(),
                **options,
            )

        return ServingSpec(self.kind, saved, lite)

    def describe(self):
        return {
            **super().describe(),
            "labels": list(self.labels),
            "word_convention": dict(self.word_record()),
        }

    @classmethod
    def from_description(cls, description, directory=None):
        """The task of a description; one written before the word convention was recorded
        serves "punctuation" (`word_convention.recorded`)."""
        task = cls(TaggingData(**description["data"]), labels=description["labels"])
        task.preprocessor = preprocessor_of(description, directory)
        task.word_decision = conventions.recorded(description)
        task.run_dir = directory
        return task
