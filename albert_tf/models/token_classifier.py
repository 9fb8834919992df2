"""`AlbertTokenClassifier`: sequence output -> dropout -> dense, one label per token (NER, tagging).

Labels are int [B, S] with `IGNORE` (-1) where a position carries no label: [CLS], [SEP],
padding, the second and later SentencePiece pieces of a word, and the context positions of a
sliding window. The default loss is the cross-entropy averaged over the labelled positions,
the default metric the accuracy over them (`TokenAccuracy`).

>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models.backbone import AlbertModel
>>> model = AlbertTokenClassifier(
...     AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)),
...     labels=["O", "B-PER", "I-PER"])
>>> inputs = {"input_word_ids": np.array([[2, 7, 9, 3]], "int32"),
...           "input_mask": np.ones([1, 4], "int32"), "input_type_ids": np.zeros([1, 4], "int32")}
>>> model(inputs).shape
TensorShape([1, 4, 3])
>>> loss = model.default_loss()
>>> logits = np.log(np.array([[[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]], "float32"))
>>> round(float(loss(np.array([[0, -1]]), logits)), 4)  # only position 0 counts: -log(0.5)
0.6931
"""

import warnings

import keras
import tensorflow as tf
from keras import ops

from albert_tf.models.head_model import AlbertHeadModel

IGNORE = -1

# The tagging head reads the sequence output: the backbone's pooler gets no gradient, by design.
warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables .*pooler")


@keras.saving.register_keras_serializable(package="albert_tf")
class TokenAccuracy(keras.metrics.Mean):
    """Accuracy over the labelled positions (label >= 0) of [B, S] labels and [B, S, C] logits."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        if len(y_true.shape) == len(y_pred.shape):
            y_true = ops.squeeze(y_true, axis=-1)
        correct = ops.cast(
            ops.equal(y_true, ops.cast(ops.argmax(y_pred, axis=-1), "int32")), self.dtype
        )
        weight = ops.cast(ops.greater_equal(y_true, 0), self.dtype)
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, self.dtype)
        return super().update_state(correct, sample_weight=weight)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(AlbertHeadModel):
    """ALBERT with a tagging head on every position of the sequence output.

    Called on {"input_word_ids", "input_mask", "input_type_ids"} (int [B, S]) it returns float32
    logits [B, S, num_classes].

    Args:
        backbone: an `AlbertModel`.
        num_classes: number of tags. Defaults to len(labels) or 2.
        dropout: dropout on the sequence output (0.1 as Hugging Face's
            AlbertForTokenClassification).
        labels: tag names in id order (e.g. ["O", "B-LOC", "I-LOC", ...]); kept in the config
            and used by the export to name entities.
        name: model name.

    `compile()` defaults: the original AdamW with warmup and linear decay (see
    `albert_tf.models.head_model`), cross-entropy over positions with label >= 0 and
    `TokenAccuracy`.
    """

    default_name = "albert_token_classifier"

    def head_input(self, backbone_outputs):
        return backbone_outputs["sequence_output"]

    def default_loss(self):
        # ignore_class masks the positions; mean_with_sample_weight divides by their count.
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=IGNORE, reduction="mean_with_sample_weight"
        )

    def default_metrics(self):
        return [TokenAccuracy(name="accuracy")]

    def micro_batch_weights(self, y, sample_weight):
        """Each micro-batch's share of the labelled positions (times their sample weights): the
        default loss divides by that count, so an accumulated update equals the whole batch's
        even when the micro-batches hold different numbers of labelled positions."""
        counts = tf.cast(tf.not_equal(y, IGNORE), tf.float32)
        if sample_weight is not None:
            weight = tf.cast(sample_weight, tf.float32)
            weight = tf.reshape(
                weight,
                tf.concat(
                    [tf.shape(weight), tf.ones([counts.shape.rank - weight.shape.rank], tf.int32)],
                    0,
                ),
            )
            counts = counts * weight
        counts = tf.reduce_sum(tf.reshape(counts, [tf.shape(counts)[0], -1]), axis=1)
        return tf.math.divide_no_nan(counts, tf.reduce_sum(counts))
