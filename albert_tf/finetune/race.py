"""RACE (4-way multiple-choice reading comprehension) as a `FinetuneTask`.

Questions are read from the RACE release (`albert_tf.data.race`) or, with `use_tfds`, from TFDS
race/middle and race/high into the same examples (`albert_tf.data.tfds_tasks`); each becomes four
`[CLS] article [SEP] question+option [SEP]` sequences, built once in Python and kept compact
(ids and two segment lengths per choice; `albert_tf.data.race.model_inputs` expands them in
tf.data). `AlbertMultipleChoice` scores the four choices; the metrics are the accuracy overall
and on the middle- and high-school questions (the paper's Table 10 columns), the best checkpoint
is chosen by the overall accuracy. Test predictions go to predict_results.json (with the test
accuracy when the files have answers, as the original's predict_results.txt); the export answers
raw (article, question, options).

>>> task = RaceTask(RaceData(data_dir="race_data", high_only=True))
>>> task.name, task.kind, task.main_metric
('race', 'race', 'accuracy')
"""

import os
import time

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.data import race
from albert_tf.finetune.task import Features, FinetuneTask, write_tsv
from albert_tf.finetune.task_data import RaceData
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.settings import InvalidFlagError
from albert_tf.text.tokenizer import SentencePieceTokenizer

PREDICTIONS_FILE = "predict_results.json"


def _softmax(logits):
    logits = np.asarray(logits, np.float64).reshape(-1, race.NUM_CHOICES)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def accuracies(answers, labels, levels):
    """{"accuracy", "middle_accuracy", "high_accuracy"} (a level without questions is left out).

    >>> accuracies([0, 1, 2], [0, 1, 3], ["middle", "high", "high"])
    {'accuracy': 0.6666666666666666, 'middle_accuracy': 1.0, 'high_accuracy': 0.5}
    """
    correct = np.asarray(answers) == np.asarray(labels)
    levels = np.asarray(levels)
    results = {"accuracy": float(correct.mean()) if len(correct) else 0.0}
    for level in race.LEVELS:
        chosen = levels == level
        if chosen.any():
            results[f"{level}_accuracy"] = float(correct[chosen].mean())
    return results


class RaceTask(FinetuneTask):
    """RACE multiple choice (see the module docstring).

    Args:
        data: a `RaceData` (directory, level filters, max_qa_length).
        seed: unused (the release fixes the splits); kept for the runner's interface.
    """

    kind = "race"
    data_type = RaceData
    output_files = ("dev_results.json", PREDICTIONS_FILE)

    def __init__(self, data, seed=0):
        self.data = data
        self.examples = {}
        self.packed = {}

    # ------------------------------------------------------------------ description
    def configure_text(
        self,
        spm_model,
        lower_case=True,
        max_seq_length=512,
        static_shapes=False,
        tex_quotes=False,
        albert_rules=True,
    ):
        if self.data.high_only and self.data.middle_only:
            raise InvalidFlagError("--high_only and --middle_only exclude each other")
        try:
            race.check_lengths(max_seq_length, self.data.max_qa_length)
        except ValueError:
            raise InvalidFlagError(
                f"--max_qa_length={self.data.max_qa_length} must be in [1, "
                f"--max_seq_length - 3 = {max_seq_length - 3}]"
            ) from None
        super().configure_text(
            spm_model, lower_case, max_seq_length, static_shapes, tex_quotes, albert_rules
        )

    def read_split(self, split):
        """The `RaceExamples` of `split`: from --data_dir's files or, with --use_tfds, from TFDS
        (the same examples); the test split may lack answers."""
        d = self.data
        labelled = split != "test"
        if d.use_tfds:
            from albert_tf.data import tfds_tasks

            return tfds_tasks.read_race_tfds(
                split, d.high_only, d.middle_only, labelled, d.tfds_data_dir, d.tfds_download
            )
        return race.read_race(d.data_dir, split, d.high_only, d.middle_only, labelled=labelled)

    def load(self, splits):
        if not self.data.data_dir and not self.data.use_tfds:
            raise InvalidFlagError("--data_dir is required (the RACE download root), or --use_tfds")
        tokenizer = SentencePieceTokenizer(
            self.preprocessor.model_proto,
            lower_case=self.preprocessor.lower_case,
            tex_quotes=self.preprocessor.tex_quotes,
            albert_rules=self.preprocessor.albert_rules,
        )
        max_seq_length = self.preprocessor.max_seq_length
        for split in ("train", "dev", "test"):
            if split not in splits:
                continue
            examples = self.read_split(split)
            began = time.time()
            packed = race.build_inputs(examples, tokenizer, max_seq_length, self.data.max_qa_length)
            choices = len(examples) * race.NUM_CHOICES
            logging.info(
                "%s: %d questions (%d middle, %d high) on %d articles from %s; of %d "
                "choices, %d (%.1f%%) cut the article to fit max_seq_length=%d and %d "
                "cut the question+option to its last %d pieces (%.1fs)",
                split,
                len(examples),
                int(np.sum(examples.levels == "middle")),
                int(np.sum(examples.levels == "high")),
                len(examples.articles),
                examples.source,
                choices,
                packed.truncated_articles,
                100.0 * packed.truncated_articles / max(choices, 1),
                max_seq_length,
                packed.truncated_qas,
                self.data.max_qa_length,
                time.time() - began,
            )
            self.examples[split], self.packed[split] = examples, packed

    def build_model(self, backbone, dropout=0.1):
        return AlbertMultipleChoice(backbone, num_choices=race.NUM_CHOICES, dropout=dropout)

    # ------------------------------------------------------------------ data
    def features(self, split):
        return Features(self.packed[split].inputs(), self.examples[split].labels)

    def input_transform(self):
        return race.model_inputs

    def sequence_lengths(self, split):
        """Per question, its longest choice's pieces with [CLS]/[SEP] (after truncation)."""
        return self.packed[split].segment_lengths[..., 1].max(axis=-1).astype(np.int64)

    def is_labelled(self, split):
        return self.examples[split].labels is not None

    def baselines(self):
        dev = self.examples.get("dev")
        if dev is None or dev.labels is None:
            return {}
        counts = np.bincount(dev.labels, minlength=race.NUM_CHOICES)
        return {
            "dev_majority_answer": race.LETTERS[int(counts.argmax())],
            "dev_majority_answer_rate": float(counts.max() / counts.sum()),
        }

    def main_metric_baselines(self, baselines):
        values = baselines
        if not values:
            return {}
        rate = values["dev_majority_answer_rate"]
        name = f"always option {values['dev_majority_answer']} (chance: 1/{race.NUM_CHOICES})"
        return {"trivial": rate, "strongest": {"name": name, "value": rate}}

    def constant_prediction(self, predictions):
        answers = np.unique(predictions["answers"])
        return f"option {race.LETTERS[int(answers[0])]}" if len(answers) == 1 else None

    # ------------------------------------------------------------------ outputs
    def postprocess(self, outputs, split):
        probabilities = _softmax(outputs)
        return {"probabilities": probabilities, "answers": probabilities.argmax(axis=-1)}

    def evaluate(self, predictions, split):
        examples = self.examples[split]
        results = accuracies(predictions["answers"], examples.labels, examples.levels)
        results["num_examples"] = len(examples)
        return results

    def write_predictions(self, predictions, split, output_dir):
        """predict_results.json (dev_results.json for the dev split): {"metrics": accuracies
        (when the split has answers) or null,
        "predictions": [{"id", "question", "level", "answer" (letter), "probabilities"}]}
        ("question" is the question's 0-based index in its article); <split>_results.tsv: a
        header row, then per question its id, index in the article, text, level, gold letter
        (when the split has answers), predicted letter and each option's probability."""
        examples = self.examples[split]
        gold = examples.labels
        header = ["id", "question_index", "question", "level"]
        header += (["label"] if gold is not None else []) + ["prediction"]
        header += [f"probability_{letter}" for letter in race.LETTERS[: race.NUM_CHOICES]]
        write_tsv(
            os.path.join(output_dir, f"{split}_results.tsv"),
            header,
            [
                [
                    examples.example_ids[i],
                    int(examples.question_index[i]),
                    examples.questions[i],
                    str(examples.levels[i]),
                    *([race.LETTERS[int(gold[i])]] if gold is not None else []),
                    race.LETTERS[int(predictions["answers"][i])],
                    *map(float, predictions["probabilities"][i]),
                ]
                for i in range(len(examples))
            ],
        )
        rows = [
            {
                "id": examples.example_ids[i],
                "question": int(examples.question_index[i]),
                "level": str(examples.levels[i]),
                "answer": race.LETTERS[int(predictions["answers"][i])],
                "probabilities": [round(float(p), 6) for p in predictions["probabilities"][i]],
            }
            for i in range(len(examples))
        ]
        metrics = None
        if examples.labels is not None:
            metrics = self.evaluate(predictions, split)
            logging.info(
                "%s accuracy: %s",
                split,
                ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float)),
            )
        path = os.path.join(
            output_dir, PREDICTIONS_FILE if split == "test" else f"{split}_results.json"
        )
        files.write_json(path, {"split": split, "metrics": metrics, "predictions": rows})
        logging.info("Wrote %d %s predictions to %s", len(rows), split, path)

    def serving_spec(self, model, max_seq_length=None):
        """The model's `ServingSpec`: its SavedModel
        (`multiple_choice_serving.multiple_choice_spec`); RACE has no LiteRT export."""
        import functools

        from albert_tf.export.multiple_choice_serving import multiple_choice_spec
        from albert_tf.export.serving_spec import ServingSpec

        max_seq_length = max_seq_length or self.preprocessor.max_seq_length
        try:
            race.check_lengths(max_seq_length, self.data.max_qa_length)
        except ValueError:
            raise InvalidFlagError(
                f"--max_seq_length={max_seq_length} leaves no room for the "
                f"training's max_qa_length={self.data.max_qa_length} "
                "(+3 special pieces)"
            ) from None
        saved = functools.partial(
            multiple_choice_spec, model, self.preprocessor, self.data.max_qa_length, max_seq_length
        )
        return ServingSpec(self.kind, saved)
