"""`AlbertClassifier`: pooled output -> dropout -> dense, for classification or regression.

A plain keras.Model (see `albert_tf.models.head_model` for the shared fine-tuning defaults):
compile it and `fit` it on a tf.data.Dataset of (inputs, labels) where inputs are the backbone's
id dict (an `AlbertPreprocessor` makes them from raw text in `Dataset.map`), or, with a
preprocessor attached (`from_pretrained` attaches one), on raw text directly. `num_classes=1` is
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
import numpy as np

from albert_tf.models.head_model import AlbertHeadModel
from albert_tf.models.text_inputs import TextForm, label_ids


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

    Raw text (with a preprocessor): `fit`, `evaluate` and `predict` take a list of texts, a
    list of [text, text_pair] rows, a NumPy array [N] or [N, 2], a dict {"text", "text_pair"}
    or a batched tf.data.Dataset of these (with the labels in it for fit / evaluate). Labels
    are class ids or, with `labels`, their names. `predict` on text returns the SavedModel's
    serving_default outputs (`albert_tf.export.saved_model.classifier_body`): "probabilities"
    [N, C], "logits" [N, C], "label" [N] and, with label names, "label_name" [N]; regression:
    "score" [N].

    Example (raw text; `AlbertClassifier.from_pretrained("pretrained/", labels=[...])`
    attaches the directory's preprocessor):
        >>> from albert_tf.config import AlbertConfig
        >>> from albert_tf.models.backbone import AlbertModel
        >>> from albert_tf.models.preprocessor import AlbertPreprocessor
        >>> model = AlbertClassifier(
        ...     AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=1000)),
        ...     labels=["no", "ok"],
        ...     preprocessor=AlbertPreprocessor("30k-clean.model", max_seq_length=16))
        >>> out = model.predict(["a great film", "dull"], verbose=0)
        >>> out["probabilities"].shape, out["label_name"].shape
        ((2, 2), (2,))
        >>> model.compile()                                            # doctest: +SKIP
        >>> model.fit(["great film", "dull"], ["ok", "no"], epochs=3)  # doctest: +SKIP
    """

    default_name = "albert_classifier"
    text_form = TextForm(
        ("text", "text_pair"),
        required=1,
        expected="texts of shape [batch] or pairs [batch, 2] (or a dict {'text', 'text_pair'})",
    )

    @property
    def is_regression(self):
        return self.num_classes == 1

    def head_input(self, backbone_outputs):
        return backbone_outputs["pooled_output"]

    def text_labels(self, y, columns, options=None):
        if self.is_regression:
            return np.asarray(y, np.float32)
        return super().text_labels(y, columns, options)

    def encode_text(self, options):
        preprocessor, labels = self.preprocessor, self.labels

        def encode(columns, y):
            if y is not None and not self.is_regression:
                y = label_ids(y, labels)
            return preprocessor(columns), y

        return encode

    def text_predict_function(self, options):
        from albert_tf.export.saved_model import classifier_body

        preprocessor = self.preprocessor
        head = classifier_body(self, length_chunked=preprocessor.dynamic_padding)
        return lambda columns: head(preprocessor(columns))

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
