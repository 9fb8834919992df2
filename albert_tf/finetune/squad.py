"""SQuAD v1.1 and v2.0 extractive question answering as a `FinetuneTask`.

Examples come from the official SQuAD JSON files (`albert_tf.data.squad_examples`) or, with
`use_tfds`, from TFDS squad/v1.1 or squad/v2.0 written as such files first
(`albert_tf.data.tfds_tasks.write_squad_tfds`, in the feature cache directory), so both give the
same examples, features and scores; the TFDS dev set's file is also copied into the output
directory beside predictions.json, for the official evaluation scripts. Features are
built as the original run_squad (`squad_features`: question cut to `max_query_length`, the
context's pieces aligned to its characters by `squad_alignment`, sliding windows with
`doc_stride`, max-context flags, p_mask) and cached as TFRecords keyed by every setting
(`squad_cache`). The model is `AlbertQuestionAnswerer` (v1.1: start/end
logits) or `AlbertSquadV2Model` (v2.0: the original's answerability head and beam). Dev answers
are scored with the official scripts' definitions (`albert_tf.metrics.squad_metrics`): exact
match and F1 for v1.1; exact, F1, HasAns/NoAns and the best null-score threshold for v2.0 (the
best checkpoint is chosen by F1). predictions.json, nbest_predictions.json and, for v2,
null_odds.json are written for the dev file as the original does.

>>> task = SquadTask(SquadData(train_file="train-v2.0.json", predict_file="dev-v2.0.json",
...                            version_2_with_negative=True))
>>> task.name, task.main_metric
('squad-v2.0', 'f1')
"""

import dataclasses
import functools
import os

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.data import squad_cache, squad_examples, squad_features, tfds_tasks
from albert_tf.finetune import squad_predictions
from albert_tf.finetune.task import (
    Features,
    FinetuneTask,
    describe_spm_model,
    spm_model_of,
    write_tsv,
)
from albert_tf.finetune.task_data import SquadData
from albert_tf.metrics.squad_metrics import exact_match, f1, squad_v1_scores, squad_v2_scores
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.settings import InvalidFlagError


def default_cache_dir():
    """~/.cache/albert_tf/squad (or $XDG_CACHE_HOME/albert_tf/squad)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "albert_tf", "squad")


def answer_scores(examples, answers, version_2):
    """{"exact_match", "f1"} (%) of `answers` (one per example) against the gold answers, with
    the official SQuAD v1.1 / v2.0 metric."""
    predictions = {e.qas_id: str(a) for e, a in zip(examples, answers)}
    if version_2:
        scores = squad_v2_scores(examples, predictions)
        return {"exact_match": float(scores["exact"]), "f1": float(scores["f1"])}
    scores = squad_v1_scores(examples, predictions)
    return {"exact_match": float(scores["exact_match"]), "f1": float(scores["f1"])}


def _preprocessor(spm_model, settings):
    """The task's `AlbertPreprocessor`: `settings`' casing and window length."""
    return AlbertPreprocessor(
        spm_model,
        lower_case=settings.lower_case,
        max_seq_length=settings.max_seq_length,
        tex_quotes=settings.tex_quotes,
    )


class SquadTask(FinetuneTask):
    """SQuAD (see the module docstring).

    Args:
        data: a `SquadData`.
        seed: unused (the files fix the splits); kept for the runner's interface.
    """

    kind = "squad"
    export_compute_dtypes = ("float32", "bfloat16")

    def __init__(self, data, seed=0):
        self.data = data
        self.settings = None
        self.preprocessor = None  # vocabulary and casing, as the other tasks keep them
        self.examples = {}
        self.squad_features = {}
        self.null_threshold = 0.0  # v2: the chosen model's best dev threshold (adopt_dev_metrics)
        self.tfds_files = {}  # "train"/"dev" -> the SQuAD JSON written from TFDS (use_tfds)

    # ------------------------------------------------------------------ description
    @property
    def version_2(self):
        return self.data.version_2_with_negative

    @property
    def name(self):
        return "squad-v2.0" if self.version_2 else "squad-v1.1"

    @property
    def main_metric(self):
        return "f1"

    @property
    def dev_from_tfds(self):
        """Whether the questions to answer are TFDS's dev set (--use_tfds, no --predict_file)."""
        return bool(self.data.use_tfds and not self.data.predict_file)

    @property
    def output_files(self):
        """predictions.json, nbest_predictions.json, null_odds.json and, when the dev set comes
        from TFDS, its official JSON (dev-v1.1.json / dev-v2.0.json)."""
        names = (
            squad_predictions.PREDICTIONS_FILE,
            squad_predictions.NBEST_FILE,
            squad_predictions.NULL_ODDS_FILE,
        )
        if self.dev_from_tfds:
            names += (tfds_tasks.squad_file_name("dev", self.version_2),)
        return names

    @property
    def vocab_size(self):
        return self.preprocessor.vocab_size

    @property
    def spm_model(self):
        """The SentencePiece model: its file, or its bytes when it came as bytes."""
        return self.preprocessor.source or self.preprocessor.model_proto

    @property
    def loaded_splits(self):
        return tuple(self.examples)

    def configure_text(
        self,
        spm_model,
        lower_case=True,
        max_seq_length=384,
        static_shapes=False,
        tex_quotes=False,
        albert_rules=True,
    ):
        d = self.data
        if not albert_rules:
            raise InvalidFlagError(
                "--init_checkpoint records albert_rules=false (a model converted from a "
                "keras-hub preset, whose tokenizer keeps accents and whitespace): SQuAD's "
                "answer alignment follows ALBERT's text rules and does not support it yet"
            )
        for flag in (
            "doc_stride",
            "max_query_length",
            "n_best_size",
            "max_answer_length",
            "start_n_top",
            "end_n_top",
        ):
            if getattr(d, flag) < 1:
                raise InvalidFlagError(f"--{flag} must be >= 1, got {getattr(d, flag)}")
        try:
            self.settings = squad_features.FeatureSettings(
                max_seq_length, d.doc_stride, d.max_query_length, lower_case, tex_quotes
            )
        except ValueError as e:
            raise InvalidFlagError(f"--max_seq_length / --max_query_length: {e}") from None
        self.preprocessor = _preprocessor(spm_model, self.settings)

    def _path(self, split):
        """The SQuAD JSON of `split`: --train_file or --predict_file, or with --use_tfds the
        file written from TFDS (train; dev without --predict_file)."""
        flag = "train_file" if split == "train" else "predict_file"
        if self.data.use_tfds and (split == "train" or self.dev_from_tfds):
            return self._tfds_file("train" if split == "train" else "dev")
        path = getattr(self.data, flag)
        if not path:
            raise InvalidFlagError(f"--{flag} is required (its split is requested), or --use_tfds")
        return path

    def _tfds_file(self, split):
        """`tfds_tasks.write_squad_tfds` of `split` into FEATURE_CACHE_DIR/tfds (once per task)."""
        if split not in self.tfds_files:
            d = self.data
            directory = f"{(d.feature_cache_dir or default_cache_dir()).rstrip('/')}/tfds"
            self.tfds_files[split] = tfds_tasks.write_squad_tfds(
                directory, split, self.version_2, d.tfds_data_dir, d.tfds_download
            )
        return self.tfds_files[split]

    def load(self, splits):
        """Reads "train" (--train_file) and, for "dev" or "test" (--do_eval or --do_predict,
        as the original's --do_predict), --predict_file: "dev" when it has answers (scored
        every checkpoint and answered), else "test" (answered with the best weights). With
        --use_tfds, TFDS's train split replaces --train_file and, without --predict_file, its
        validation split is "dev", both read as the SQuAD JSON files written from them."""
        cache_dir = self.data.feature_cache_dir or default_cache_dir()
        wanted = ["train"] if "train" in splits else []
        if "dev" in splits or "test" in splits:
            labelled = squad_examples.has_answers(self._path("dev"))
            if not labelled:
                logging.info(
                    "--predict_file=%s has no answers: it is answered, not scored",
                    self.data.predict_file,
                )
            wanted.append("dev" if labelled else "test")
        for split in wanted:
            path = self._path(split)
            labelled = split != "test"
            skip = split == "train"  # dev keeps mismatched answers: their gold texts still score
            self.examples[split] = squad_examples.read_squad_examples(
                path, self.version_2, labelled=labelled, skip_mismatched=skip
            )
            features = squad_cache.cached_features(
                path,
                self.spm_model,
                self.settings,
                labelled,
                cache_dir,
                version_2_with_negative=self.version_2,
                skip_mismatched=skip,
            )
            self.squad_features[split] = features
            stats = features.stats
            logging.info(
                "%s: %d questions from %s -> %d windows (%d with the answer); %d "
                "answers not at their answer_start skipped, %d contexts not aligned",
                split,
                len(self.examples[split]),
                path,
                len(features),
                stats.num_windows_with_answer,
                len(stats.answer_mismatches)
                if isinstance(stats.answer_mismatches, (list, tuple))
                else stats.answer_mismatches,
                len(stats.alignment_failures),
            )

    def build_model(self, backbone, dropout=0.1):
        from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

        if self.version_2:
            return AlbertSquadV2Model(
                backbone,
                start_n_top=self.data.start_n_top,
                end_n_top=self.data.end_n_top,
                dropout=dropout,
            )
        return AlbertQuestionAnswerer(backbone, dropout=dropout)

    # ------------------------------------------------------------------ data
    def features(self, split):
        features = self.squad_features[split]
        inputs = features.model_inputs()
        if self.version_2:
            inputs["p_mask"] = features.p_mask
        labels = None
        if split == "train":
            labels = {
                "start_positions": features.start_positions,
                "end_positions": features.end_positions,
            }
            if self.version_2:
                labels["is_impossible"] = features.is_impossible
        return Features(inputs, labels)

    def sequence_lengths(self, split):
        """Per question, its longest window's pieces with [CLS]/[SEP]: question + context when
        they fit in one window, else --max_seq_length (the context is windowed)."""
        features = self.squad_features[split]
        longest = np.zeros(len(self.examples[split]), np.int64)
        np.maximum.at(longest, features.example_index, features.input_mask.sum(axis=-1))
        return longest

    def baselines(self):
        """EM and F1 of the best "first k words of the context" answer to every dev question
        (k from 1 to 10, the best by F1; a trivial baseline), the best EM of any such k, and the
        median number of words of the training answers."""
        train, dev = self.examples.get("train"), self.examples.get("dev")
        if not train or not dev:
            return {}
        lengths = [len(e.answer_text.split()) for e in train if e.answer_text.split()]
        best, best_exact = None, 0.0
        for k in range(1, 11):
            guesses = [" ".join(e.context_text.split()[:k]) for e in dev]
            scores = answer_scores(dev, guesses, self.version_2)
            best_exact = max(best_exact, scores["exact_match"])
            if best is None or scores["f1"] > best[1]["f1"]:
                best = (k, scores)
        k, scores = best
        return {
            "train_median_answer_words": int(np.median(lengths)) if lengths else 0,
            "dev_first_words": k,
            "dev_first_words_exact_match": float(scores["exact_match"]),
            "dev_first_words_f1": float(scores["f1"]),
            "dev_first_k_words_best_exact_match": best_exact,
        }

    def main_metric_baselines(self, baselines):
        dev = self.examples.get("dev")
        if not dev:
            return {}
        # Empty answers score F1 0 on answerable questions and 100 on unanswerable ones.
        empty = 100.0 * sum(bool(e.is_impossible) for e in dev) / len(dev)
        values = {"trivial": empty if self.version_2 else 0.0}
        first = baselines
        if first:
            name = f"the context's first {first['dev_first_words']} word(s)"
            values["strongest"] = {"name": name, "value": first["dev_first_words_f1"]}
        if self.version_2 and empty > values.get("strongest", {}).get("value", -1.0):
            values["strongest"] = {"name": "an empty answer to every question", "value": empty}
        return values

    def constant_prediction(self, predictions):
        answers = set(predictions["predictions"].values())
        if len(answers) != 1 or len(predictions["predictions"]) < 2:
            return None
        answer = next(iter(answers))
        return f"the answer {answer!r}" if answer else "an empty answer"

    # ------------------------------------------------------------------ outputs
    def postprocess(self, outputs, split):
        examples, features, d = self.examples[split], self.squad_features[split], self.data
        if not self.version_2:
            width = features.input_mask.shape[1]  # batches may be cut to the split's longest
            start_logits, end_logits = (
                np.pad(
                    np.asarray(logits),
                    [(0, 0), (0, width - np.shape(logits)[1])],
                    constant_values=squad_predictions.EMPTY_SCORE,
                )
                for logits in (outputs["start_logits"], outputs["end_logits"])
            )
            predictions, nbest = squad_predictions.v1_predictions(
                examples,
                features,
                start_logits,
                end_logits,
                d.n_best_size,
                d.max_answer_length,
            )
            return {"predictions": predictions, "nbest": nbest, "null_odds": None}
        predictions, nbest, null_odds = squad_predictions.v2_predictions(
            examples,
            features,
            outputs["start_top_log_probs"],
            outputs["start_top_index"],
            outputs["end_top_log_probs"],
            outputs["end_top_index"],
            outputs["cls_logits"],
            d.n_best_size,
            d.max_answer_length,
            d.start_n_top,
            d.end_n_top,
        )
        return {"predictions": predictions, "nbest": nbest, "null_odds": null_odds}

    def evaluate(self, predictions, split):
        """Scores only (v2: "null_score_diff_threshold" among them; `adopt_dev_metrics` keeps
        the chosen model's)."""
        examples = self.examples[split]
        if not self.version_2:
            scores = squad_v1_scores(examples, predictions["predictions"])
        else:
            scores, _ = squad_predictions.evaluate_v2(
                examples, predictions["predictions"], predictions["null_odds"]
            )
        scores = {k: float(v) for k, v in scores.items() if isinstance(v, (int, float))}
        scores["num_questions"] = len(examples)
        return scores

    def adopt_dev_metrics(self, metrics):
        """v2: the chosen model's dev null-score threshold answers and exports from now on."""
        if self.version_2:
            self.null_threshold = float(metrics["null_score_diff_threshold"])

    def headline_metrics(self, metrics):
        keys = ("exact_match", "exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1")
        return {k: metrics[k] for k in keys if k in metrics}

    def write_predictions(self, predictions, split, output_dir):
        """predictions.json, nbest_predictions.json and (v2) null_odds.json, as the original
        (v2: the answers with the dev set's best null-score threshold applied), and
        <split>_results.tsv; for a dev set read from TFDS also its official JSON
        (dev-v1.1.json / dev-v2.0.json, the file scored), for the official evaluation script."""
        answers = predictions["predictions"]
        if self.version_2:
            answers = squad_predictions.apply_null_threshold(
                answers, predictions["null_odds"], self.null_threshold
            )
        squad_predictions.write_prediction_files(
            output_dir, answers, predictions["nbest"], predictions["null_odds"]
        )
        labelled = self.is_labelled(split)
        header = ["id", "question"] + (["label"] if labelled else []) + ["prediction"]
        rows = []
        for example in self.examples[split]:
            answer = answers.get(example.qas_id, "")
            row = [example.qas_id, example.question_text]
            if labelled:
                gold = list(example.gold_answers) or [""]
                row.append(" | ".join(gold))
                scores = [exact_match(answer, gold), f1(answer, gold, self.version_2)]
            rows.append(row + [answer] + (scores if labelled else []))
        write_tsv(
            os.path.join(output_dir, f"{split}_results.tsv"),
            header + (["exact_match", "f1"] if labelled else []),
            rows,
        )
        if split == "dev" and self.dev_from_tfds:
            self._write_dev_file(output_dir)

    def _write_dev_file(self, output_dir):
        """Copies the dev set's SQuAD JSON written from TFDS (the file scored) into
        `output_dir` (atomically), for the official evaluation script beside predictions.json."""
        import tensorflow as tf

        source = self._path("dev")
        target = f"{output_dir.rstrip('/')}/{tfds_tasks.squad_file_name('dev', self.version_2)}"
        with tf.io.gfile.GFile(source, "rb") as f:
            files.write_atomic(target, f.read())
        logging.info(
            "Wrote the dev questions (TFDS) as %s, the file scored: the official evaluation "
            "script scores predictions.json on it",
            target,
        )

    def serving_spec(self, model, max_seq_length=None):
        """The model's `ServingSpec`: its SavedModel (`export_question_answerer`) and LiteRT
        (`litert_qa`) exports; LiteRT measures on the loaded examples, else on those read
        from the task's files (no features are built)."""
        from albert_tf.export import litert_qa
        from albert_tf.export.serving_spec import ServingSpec
        from albert_tf.export.squad_serving import question_answerer_spec

        settings = self.settings
        if max_seq_length:
            settings = dataclasses.replace(settings, max_seq_length=int(max_seq_length))
        options = dict(
            n_best_size=self.data.n_best_size,
            max_answer_length=self.data.max_answer_length,
            null_threshold=self.null_threshold,
        )

        def saved_model(compute_dtype="float32"):
            return question_answerer_spec(
                model, self.preprocessor, settings, **options, compute_dtype=compute_dtype
            )

        def examples(split, limit):
            loaded = self.examples.get(split)
            if loaded is None:
                loaded = squad_examples.read_squad_examples(
                    self._path(split), self.version_2, skip_mismatched=split == "train"
                )
            return list(loaded)[:limit]

        def litert(**litert_options):
            return litert_qa.litert_spec(
                model,
                self.preprocessor,
                settings,
                examples,
                self.name,
                saved_model,
                functools.partial(answer_scores, version_2=self.version_2),
                **options,
                **litert_options,
            )

        return ServingSpec(self.kind, saved_model, litert)

    def describe(self):
        return {
            "kind": self.kind,
            "name": self.name,
            "data": dataclasses.asdict(self.data),
            "settings": dataclasses.asdict(self.settings),
            **describe_spm_model(self.spm_model),  # the vocabulary travels with the run
            "null_threshold": self.null_threshold,
        }

    @classmethod
    def from_description(cls, description, directory=None):
        task = cls(SquadData(**description["data"]))
        task.settings = squad_features.FeatureSettings(**description["settings"])
        task.preprocessor = _preprocessor(spm_model_of(description, directory), task.settings)
        task.null_threshold = float(description.get("null_threshold", 0.0))
        return task
