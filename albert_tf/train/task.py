"""ALBERT's pretraining task: the model, its input data, the MLM + SOP loss and the metrics.

`PretrainingTask` implements `albert_tf.train.task_api.Task` (what the loop and the controller
call) and adds what its runner needs: `build_model`, `dataset` and `stacked_axes`.

The task knows nothing of strategies (the loop in `albert_tf.train.loop` does); it states its
losses as *local sums* divided by *global* normalisers, so a loss summed over replicas is the
loss of the global batch, whatever the number of replicas:

    masked-LM loss  = sum over the global batch of weight * NLL / (global sum of weights + 1e-5)
    SOP loss        = sum over the global batch of NLL / global batch size
    loss            = masked-LM loss + SOP loss         (equally weighted, as the original)

(The original TPU code averaged each core's loss over that core's masked positions and then
averaged the cores' gradients; when cores see different numbers of masked tokens that weights
tokens slightly differently. Normalising by the global count makes one device and N replicas
compute the same update.)

Metrics come from summed statistics (`STAT_KEYS`), so they are exact over any number of steps
and replicas: masked_lm_accuracy and masked_lm_loss per masked token (weighted by
masked_lm_weights), sentence_order_accuracy and sentence_order_loss per example.

>>> from albert_tf.config import AlbertConfig
>>> task = PretrainingTask(AlbertConfig.from_preset("albert_tiny", vocab_size=100))
>>> stats = {"masked_lm_nll": 6.0, "masked_lm_correct": 1.0, "masked_lm_weight": 4.0,
...          "sentence_order_nll": 2.0, "sentence_order_correct": 3.0, "examples": 4.0}
>>> task.metrics(stats)["loss"]
2.0
"""

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.train.task_api import Task

# Local sums each step returns; the loop adds them over replicas and steps.
STAT_KEYS = (
    "masked_lm_nll",
    "masked_lm_correct",
    "masked_lm_weight",
    "sentence_order_nll",
    "sentence_order_correct",
    "examples",
)
MODEL_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
_MLM_EPSILON = 1e-5  # the original's denominator guard


class PretrainingTask(Task):
    """Masked-LM + sentence-order prediction on an `AlbertPretrainer`.

    Args:
        config: the `AlbertConfig` of the model to pretrain.
        max_seq_length, max_predictions_per_seq: shapes of the pretraining records.
        seed: seed of the input order (and of dynamic masks).
        dynamic_masking: read unmasked records and mask on the fly (needs `spm_model`).
        spm_model: SentencePiece model (for dynamic masking's vocabulary).

    Example:
        >>> task = PretrainingTask(AlbertConfig.from_preset("albert_tiny"))
        >>> model = task.build_model()
        >>> sorted(task.stacked_axes(model).values())
        [2, 2]
    """

    stat_keys = STAT_KEYS

    def __init__(
        self,
        config,
        max_seq_length=512,
        max_predictions_per_seq=20,
        seed=None,
        dynamic_masking=False,
        spm_model=None,
    ):
        if not isinstance(config, AlbertConfig):
            raise TypeError(f"PretrainingTask needs an AlbertConfig, got {type(config).__name__}")
        self.config = config
        self.max_seq_length = int(max_seq_length)
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.seed = seed
        self.dynamic_masking = bool(dynamic_masking)
        self.spm_model = spm_model

    # ------------------------------------------------------------------ model
    def build_model(self):
        """A fresh `AlbertPretrainer` for the config (under the current dtype policy)."""
        from albert_tf.models.backbone import AlbertModel
        from albert_tf.models.pretrainer import AlbertPretrainer

        return AlbertPretrainer(AlbertModel(self.config))

    @staticmethod
    def stacked_axes(model):
        """{regex: 2} for the encoder's stacked [groups, inner, ...] weights (for LAMB's trust
        ratio): `albert_tf.layers.encoder.stacked_axes`."""
        from albert_tf.layers.encoder import stacked_axes

        return stacked_axes(model)

    # ------------------------------------------------------------------ data
    def dataset(self, file_patterns, batch_size, is_training=True, input_context=None, seed=None):
        """Per-replica batches of `batch_size` from pretraining TFRecords."""
        from albert_tf.data import pipeline

        common = dict(
            batch_size=batch_size,
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq,
            is_training=is_training,
            input_context=input_context,
            seed=seed,
        )
        if self.dynamic_masking:
            return pipeline.dynamic_masking_dataset(
                file_patterns, spm_model=self.spm_model, **common
            )
        return pipeline.pretraining_dataset(file_patterns, **common)

    # ------------------------------------------------------------------ loss
    @staticmethod
    def normalizers(batch):
        """Local counts whose sum over replicas normalises the losses."""
        return {
            "masked_lm_weight": tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
            "examples": tf.cast(tf.shape(batch["next_sentence_labels"])[0], tf.float32),
        }

    @staticmethod
    def _statistics(outputs, batch):
        """Per-batch local sums of STAT_KEYS from the model's logits."""
        mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
        ids = tf.cast(batch["masked_lm_ids"], tf.int32)
        weights = tf.cast(batch["masked_lm_weights"], tf.float32)
        mlm_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)
        mlm_hit = tf.cast(
            tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32
        )
        sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
        labels = tf.cast(batch["next_sentence_labels"], tf.int32)
        sop_nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=sop_logits)
        sop_hit = tf.cast(
            tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), labels), tf.float32
        )
        return {
            "masked_lm_nll": tf.reduce_sum(weights * mlm_nll),
            "masked_lm_correct": tf.reduce_sum(weights * mlm_hit),
            "masked_lm_weight": tf.reduce_sum(weights),
            "sentence_order_nll": tf.reduce_sum(sop_nll),
            "sentence_order_correct": tf.reduce_sum(sop_hit),
            "examples": tf.cast(tf.shape(labels)[0], tf.float32),
        }

    def loss_and_statistics(self, model, batch, totals, training=True):
        """(this replica's share of the global loss, local sums of STAT_KEYS)."""
        outputs = model({k: batch[k] for k in MODEL_INPUT_KEYS}, training=training)
        stats = self._statistics(outputs, batch)
        loss = (
            stats["masked_lm_nll"] / (totals["masked_lm_weight"] + _MLM_EPSILON)
            + stats["sentence_order_nll"] / totals["examples"]
        )
        return loss, stats

    def eval_statistics(self, model, batch):
        """STAT_KEYS sums plus target histograms, for the chance baselines of `eval_metrics`."""
        outputs = model({k: batch[k] for k in MODEL_INPUT_KEYS}, training=False)
        stats = self._statistics(outputs, batch)
        weights = tf.reshape(tf.cast(batch["masked_lm_weights"], tf.float32), [-1])
        ids = tf.reshape(tf.cast(batch["masked_lm_ids"], tf.int32), [-1])
        stats["masked_lm_target_counts"] = tf.math.unsorted_segment_sum(
            weights, ids, self.config.vocab_size
        )
        # (one_hot, not bincount: XLA would recompile bincount for every batch)
        stats["sentence_order_label_counts"] = tf.reduce_sum(
            tf.one_hot(tf.cast(batch["next_sentence_labels"], tf.int32), 2, dtype=tf.float32),
            axis=0,
        )
        return stats

    # ------------------------------------------------------------------ metrics
    @staticmethod
    def metrics(stats):
        """Python floats from summed statistics (any mapping of STAT_KEYS to numbers)."""
        s = {k: float(np.asarray(stats[k])) for k in STAT_KEYS}
        weight, examples = max(s["masked_lm_weight"], 1e-12), max(s["examples"], 1e-12)
        out = {
            "masked_lm_loss": s["masked_lm_nll"] / weight,
            "masked_lm_accuracy": s["masked_lm_correct"] / weight,
            "sentence_order_loss": s["sentence_order_nll"] / examples,
            "sentence_order_accuracy": s["sentence_order_correct"] / examples,
        }
        out["loss"] = out["masked_lm_loss"] + out["sentence_order_loss"]
        return out

    def eval_metrics(self, stats):
        """`metrics` plus measured chance levels of the evaluated data.

        masked_lm_majority_baseline: accuracy of always predicting the most frequent masked
        target; masked_lm_uniform_baseline: 1 / vocab_size; sentence_order_majority_baseline:
        accuracy of always predicting the more frequent SOP label (about 0.5).
        """
        out = self.metrics(stats)
        targets = np.asarray(stats["masked_lm_target_counts"], np.float64)
        labels = np.asarray(stats["sentence_order_label_counts"], np.float64)
        out["masked_lm_majority_baseline"] = float(targets.max() / max(targets.sum(), 1e-12))
        out["masked_lm_uniform_baseline"] = 1.0 / self.config.vocab_size
        out["sentence_order_majority_baseline"] = float(labels.max() / max(labels.sum(), 1e-12))
        out["masked_tokens"] = float(np.asarray(stats["masked_lm_weight"]))
        out["examples"] = float(np.asarray(stats["examples"]))
        return out

    # ------------------------------------------------------------------ log text
    @staticmethod
    def format_progress(metrics):
        """'loss 5.123 | mlm_acc 21.34% | sop_acc 61.00%'."""
        return (
            f"loss {metrics['loss']:.3f} | mlm_acc {100 * metrics['masked_lm_accuracy']:.2f}% | "
            f"sop_acc {100 * metrics['sentence_order_accuracy']:.2f}%"
        )

    @staticmethod
    def format_eval_size(metrics, steps):
        """'3 batches, 52 masked tokens'."""
        return f"{steps} batches, {metrics['masked_tokens']:.0f} masked tokens"

    @staticmethod
    def format_eval(metrics):
        """Accuracies beside the majority baselines of the evaluated data, then the losses."""
        return (
            f"mlm_acc {100 * metrics['masked_lm_accuracy']:.2f}% (majority baseline "
            f"{100 * metrics['masked_lm_majority_baseline']:.2f}%), "
            f"sop_acc {100 * metrics['sentence_order_accuracy']:.2f}% (majority baseline "
            f"{100 * metrics['sentence_order_majority_baseline']:.2f}%), "
            f"mlm_loss {metrics['masked_lm_loss']:.3f}, "
            f"sop_loss {metrics['sentence_order_loss']:.3f}"
        )
