"""`AlbertModel`: the ALBERT backbone (embeddings, shared-weight encoder, pooler), a keras.Model."""

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.layers.embedding import FactorizedEmbedding
from albert_tf.layers.encoder import AlbertEncoder

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def _as_config(config):
    if isinstance(config, AlbertConfig):
        return config
    if isinstance(config, dict):
        return AlbertConfig(**config)
    raise TypeError(f"config must be an AlbertConfig or its dict, got {type(config).__name__}")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertModel(keras.Model):
    """The ALBERT backbone: factorized embedding, one shared-weight encoder loop, tanh pooler.

    Called on a dict of int [batch, seq] tensors {"input_word_ids", "input_mask",
    "input_type_ids"} (other keys are ignored), it returns {"sequence_output" [B, S, H],
    "pooled_output" [B, H]} and, with `output_encoder_outputs=True`, "encoder_outputs"
    [L * inner_group_num, B, S, H]. The model is built on construction, so its weights exist
    (and can be loaded or converted) before the first call.

    Args:
        config: an `albert_tf.config.AlbertConfig` (or its `to_dict()`).
        output_encoder_outputs: also return every block's output.
        unroll: run the encoder as an unrolled Python loop (for measurement; same weights).
        recompute: recompute each encoder block's activations in the backward pass instead of
            keeping them (gradient checkpointing: less memory, more time; see AlbertEncoder).
        serving_layout: the encoder's weights in the layout inference reads fastest on
            bfloat16 (inference only; see AlbertEncoder and `with_serving_layout`).
        dtype: a Keras dtype policy, e.g. "mixed_bfloat16" (default: the global policy).
        name: the model name, which prefixes every variable path (default "albert").

    Variables (`variable.path`; `docs/model.md` lists them all with shapes):
        albert/embeddings/{word,position,token_type}_embeddings, albert/embeddings/layer_norm/*,
        albert/embeddings/embedding_projection/* (only when E != H),
        albert/encoder/attention/* and albert/encoder/ffn/* (stacked [groups, inner, ...]),
        albert/pooler/{kernel,bias}. Python access: `model.embeddings.word_embeddings`,
        `model.encoder.attention_weights["query_kernel"]`, `model.pooler.kernel`, ...

    Example:
        >>> import numpy as np
        >>> from albert_tf.config import AlbertConfig
        >>> from albert_tf.models.backbone import AlbertModel
        >>> config = AlbertConfig.from_preset("albert_tiny", vocab_size=100)
        >>> model = AlbertModel(config)
        >>> inputs = {"input_word_ids": np.array([[2, 15, 27, 3, 0]], "int32"),
        ...           "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        ...           "input_type_ids": np.zeros([1, 5], "int32")}
        >>> outputs = model(inputs)
        >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
        (TensorShape([1, 5, 128]), TensorShape([1, 128]))
    """

    def __init__(
        self,
        config,
        output_encoder_outputs=False,
        unroll=False,
        dtype=None,
        name="albert",
        recompute=False,
        serving_layout=False,
        **kwargs,
    ):
        super().__init__(dtype=dtype, name=name, **kwargs)
        config = _as_config(config)
        self.config = config
        self.output_encoder_outputs = bool(output_encoder_outputs)
        self.unroll = bool(unroll)
        self.embeddings = FactorizedEmbedding(config, dtype=self.dtype_policy, name="embeddings")
        self.encoder = AlbertEncoder(
            config,
            output_encoder_outputs=output_encoder_outputs,
            unroll=unroll,
            recompute=recompute,
            serving_layout=serving_layout,
            dtype=self.dtype_policy,
            name="encoder",
        )
        self.pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
            dtype=self.dtype_policy,
            name="pooler",
        )
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.embeddings.build()
        self.encoder.build()
        self.pooler.build((None, self.config.hidden_size))
        self.built = True

    @property
    def recompute(self):
        """Whether the encoder recomputes its blocks in the backward pass; settable on a built
        (or loaded) model before its train step is traced."""
        return self.encoder.recompute

    @recompute.setter
    def recompute(self, value):
        self.encoder.recompute = bool(value)

    def get_embedding_table(self):
        """The [vocab_size, embedding_size] word embedding variable (tied to the MLM output)."""
        return self.embeddings.word_embeddings

    def _validated_inputs(self, inputs):
        if not isinstance(inputs, dict):
            raise TypeError(
                f"{self.name}: inputs must be a dict with keys {list(INPUT_KEYS)}, "
                f"got {type(inputs).__name__}"
            )
        missing = [k for k in INPUT_KEYS if k not in inputs]
        if missing:
            raise KeyError(
                f"{self.name}: missing input key(s) {missing}; got keys {sorted(inputs)}, "
                f"expected {list(INPUT_KEYS)}"
            )
        tensors = {}
        for key in INPUT_KEYS:
            value = tf.convert_to_tensor(inputs[key])
            if not value.dtype.is_integer:
                raise TypeError(
                    f"{self.name}: input {key!r} must be an integer tensor, "
                    f"got dtype {value.dtype.name}"
                )
            if value.shape.rank is not None and value.shape.rank != 2:
                raise ValueError(
                    f"{self.name}: input {key!r} must have shape [batch, seq], "
                    f"got shape {value.shape}"
                )
            tensors[key] = tf.cast(value, tf.int32)
        shape = tensors["input_word_ids"].shape
        for key in INPUT_KEYS[1:]:
            if not tensors[key].shape.is_compatible_with(shape):
                raise ValueError(
                    f"{self.name}: input {key!r} has shape {tensors[key].shape} "
                    f"but input_word_ids has shape {shape}"
                )
        max_length = self.config.max_position_embeddings
        seq_length = shape[1] if shape.rank == 2 else None
        if seq_length is not None and seq_length > max_length:
            raise ValueError(
                f"{self.name}: sequence length {seq_length} exceeds max_position_embeddings "
                f"{max_length}; truncate the inputs to at most {max_length} tokens"
            )
        if seq_length is None:
            check = tf.debugging.assert_less_equal(
                tf.shape(tensors["input_word_ids"])[1],
                max_length,
                message=f"{self.name}: sequence length exceeds max_position_embeddings "
                f"{max_length}; truncate the inputs",
            )
            with tf.control_dependencies([check]):
                tensors["input_word_ids"] = tf.identity(tensors["input_word_ids"])
        return tensors

    def call(self, inputs, training=False):
        inputs = self._validated_inputs(inputs)
        x = self.embeddings(inputs["input_word_ids"], inputs["input_type_ids"], training=training)
        encoded = self.encoder(x, inputs["input_mask"], training=training)
        sequence_output = encoded["sequence_output"]
        outputs = {
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(sequence_output[:, 0, :]),
        }
        if self.output_encoder_outputs:
            outputs["encoder_outputs"] = encoded["encoder_outputs"]
        return outputs

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "output_encoder_outputs": self.output_encoder_outputs,
            "unroll": self.unroll,
            "recompute": self.recompute,
            "serving_layout": self.encoder.serving_layout,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
