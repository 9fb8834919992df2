"""`AlbertPretrainer`: an AlbertModel plus the masked-LM and sentence-order heads."""

import keras

from albert_tf.layers.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.models.backbone import INPUT_KEYS, AlbertModel


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(keras.Model):
    """ALBERT's pretraining model: backbone + MLM head (tied to the word table) + SOP head.

    Called on the backbone's input dict plus "masked_lm_positions" (int [B, P]), it returns
    {"mlm_logits" float32 [B, P, V], "sop_logits" float32 [B, 2]}. Losses are not part of the
    model (the pretraining task computes them from these logits). Built on construction.

    Args:
        backbone: an `AlbertModel`.
        name: model name, prefix of the head variables (default "pretrainer").

    Attributes: `backbone`, `masked_lm` (MaskedLMHead), `sentence_order` (SentenceOrderHead).

    Example:
        >>> import numpy as np
        >>> from albert_tf.config import AlbertConfig
        >>> from albert_tf.models.backbone import AlbertModel
        >>> from albert_tf.models.pretrainer import AlbertPretrainer
        >>> config = AlbertConfig.from_preset("albert_tiny", vocab_size=100)
        >>> model = AlbertPretrainer(AlbertModel(config))
        >>> outputs = model({"input_word_ids": np.array([[2, 4, 9, 3]], "int32"),
        ...                  "input_mask": np.ones([1, 4], "int32"),
        ...                  "input_type_ids": np.zeros([1, 4], "int32"),
        ...                  "masked_lm_positions": np.array([[1, 0]], "int32")})
        >>> outputs["mlm_logits"].shape, outputs["sop_logits"].shape
        (TensorShape([1, 2, 100]), TensorShape([1, 2]))
    """

    def __init__(self, backbone, name="pretrainer", **kwargs):
        if not isinstance(backbone, AlbertModel):
            raise TypeError(
                f"AlbertPretrainer needs an AlbertModel backbone, got {type(backbone).__name__}"
            )
        kwargs.setdefault("dtype", backbone.dtype_policy)
        super().__init__(name=name, **kwargs)
        self.backbone = backbone
        config = backbone.config
        self.masked_lm = MaskedLMHead(
            config.vocab_size,
            config.embedding_size,
            activation=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=self.dtype_policy,
            name="masked_lm",
        )
        self.sentence_order = SentenceOrderHead(
            initializer_range=config.initializer_range,
            dtype=self.dtype_policy,
            name="sentence_order",
        )
        self.build()

    @property
    def config(self):
        return self.backbone.config

    def build(self, input_shape=None):
        if self.built:
            return
        hidden = self.backbone.config.hidden_size
        self.masked_lm.build((None, None, hidden))
        self.sentence_order.build((None, hidden))
        self.built = True

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or "masked_lm_positions" not in inputs:
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise KeyError(
                f"{self.name}: missing input key 'masked_lm_positions'; got {got}, "
                f"expected {list(INPUT_KEYS) + ['masked_lm_positions']}"
            )
        outputs = self.backbone(
            {k: inputs[k] for k in INPUT_KEYS if k in inputs}, training=training
        )
        return {
            "mlm_logits": self.masked_lm(
                outputs["sequence_output"],
                inputs["masked_lm_positions"],
                self.backbone.get_embedding_table(),
            ),
            "sop_logits": self.sentence_order(outputs["pooled_output"]),
        }

    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
