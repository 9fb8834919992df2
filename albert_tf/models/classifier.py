"""`AlbertClassifier`: pooled output -> dropout -> dense, for classification or regression.

A plain keras.Model (see `albert_tf.models.head_model` for the shared fine-tuning defaults):
compile it and `fit` it on a tf.data.Dataset of (inputs, labels) where inputs are the backbone's
id dict (an `AlbertPreprocessor` makes them from raw text in `Dataset.map`). `num_classes=1` is
regression (MSE, one score per example).

>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models.backbone import AlbertModel
>>> model = AlbertClassifier(AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)),
...                          num_classes=3)
>>> inputs = {"input_word_ids": np.array([[2, 7, 3]], "int32"),
...           "input_mask": np.ones([1, 3], "int32"),
...           "input_type_ids": np.zeros([1, 3], "int32")}
>>> model(inputs).shape
TensorShape([1, 3])
"""

import keras

from albert_tf.models.head_model import AlbertHeadModel


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(AlbertHeadModel):
    """ALBERT with a classification (or regression) head on the pooled [CLS] output.

    Called on {"input_word_ids", "input_mask", "input_type_ids"} (int [B, S]) it returns
    float32 logits [B, num_classes] ([B, 1] scores for regression).

    Args:
        backbone: an `AlbertModel`.
        num_classes: number of labels; 1 means regression. Defaults to len(labels) or 2.
        dropout: dropout on the pooled output (the original hard-codes 0.1).
        labels: optional label names in id order; kept in the config and used by the export.
        name: model name.

    `compile()` defaults: the original AdamW with warmup and linear decay (see
    `albert_tf.models.head_model`), sparse categorical cross-entropy from logits and accuracy,
    or MSE and mean absolute error for regression.

    Example:
        >>> model = AlbertClassifier.from_pretrained("pretrained/", num_classes=2)  # doctest: +SKIP
        >>> model.compile(num_train_steps=1000)                                    # doctest: +SKIP
        >>> model.fit(train_ds, epochs=1, steps_per_epoch=1000)                     # doctest: +SKIP
    """

    default_name = "albert_classifier"

    @property
    def is_regression(self):
        return self.num_classes == 1

    def head_input(self, backbone_outputs):
        return backbone_outputs["pooled_output"]

    def default_loss(self):
        return (
            keras.losses.MeanSquaredError()
            if self.is_regression
            else keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )

    def default_metrics(self):
        return (
            [keras.metrics.MeanAbsoluteError(name="mae")]
            if self.is_regression
            else [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        )
