"""Pretraining heads: the masked-LM head tied to the word table, and the sentence-order head."""

import keras
import tensorflow as tf

from albert_tf.layers import elementwise


def _truncated_normal(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Masked-LM logits at given positions, with the output matrix tied to the word table.

    As the original `cls/predictions`: gather the hidden states at `masked_lm_positions`,
    dense H -> E with the encoder's activation, LayerNorm(eps=layer_norm_eps) in float32, then
    `logits = x @ word_table^T + output_bias` in float32.

    Call: `head(sequence_output [B, S, H], masked_lm_positions int [B, P],
    embedding_table [V, E])` -> float32 logits [B, P, V].

    Example:
        >>> import tensorflow as tf
        >>> head = MaskedLMHead(vocab_size=10, embedding_size=4)
        >>> table = tf.random.normal([10, 4])
        >>> head(tf.random.normal([2, 6, 8]), tf.constant([[1, 2], [0, 5]]), table).shape
        TensorShape([2, 2, 10])
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        activation="gelu_tanh",
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.activation = activation
        self.activation_fn = elementwise.get_activation(activation)
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            embedding_size,
            kernel_initializer=_truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="layer_norm"
        )
        self.output_bias = None
        # Keras would autocast every float argument to the compute dtype, the tied embedding
        # table included (bfloat16 under mixed_bfloat16); `__call__` converts the arguments and
        # `call` casts them itself, so that the output matmul uses the float32 table.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True  # the table may be a keras.Variable

    def build(self, sequence_output_shape=None, *args, **kwargs):
        if self.built:
            return
        hidden_size = sequence_output_shape[-1] if sequence_output_shape else None
        if hidden_size is None:
            raise ValueError(
                "MaskedLMHead.build needs the hidden size (last axis of sequence_output)"
            )
        self.dense.build((None, None, hidden_size))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(
            shape=(self.vocab_size,), initializer="zeros", name="output_bias", autocast=False
        )
        self.built = True

    def __call__(self, sequence_output, masked_lm_positions, embedding_table, **kwargs):
        def as_tensor(x):  # no cast; KerasTensors and variables as they are
            if isinstance(x, (keras.KerasTensor, keras.Variable)) or tf.is_tensor(x):
                return x
            return tf.convert_to_tensor(x)

        return super().__call__(
            as_tensor(sequence_output),
            as_tensor(masked_lm_positions),
            as_tensor(embedding_table),
            **kwargs,
        )

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        sequence_output = tf.cast(sequence_output, self.compute_dtype)
        positions = tf.cast(masked_lm_positions, tf.int32)
        gathered = tf.gather(sequence_output, positions, batch_dims=1)  # [B, P, H]
        x = self.layer_norm(self.activation_fn(self.dense(gathered)))  # float32 [B, P, E]
        table = tf.cast(embedding_table, tf.float32)
        return tf.matmul(x, table, transpose_b=True) + self.output_bias.value

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "activation": self.activation,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
        }


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(keras.layers.Layer):
    """Sentence-order (or NSP) logits from the pooled output: dense H -> 2, float32.

    Class 0 = segments in order, 1 = swapped (the original's convention).

    Example:
        >>> import tensorflow as tf
        >>> SentenceOrderHead()(tf.random.normal([3, 8])).shape
        TensorShape([3, 2])
    """

    def __init__(self, num_classes=2, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=_truncated_normal(initializer_range),
            dtype="float32",
            name="dense",
        )

    def build(self, pooled_output_shape=None):
        if self.built:
            return
        self.dense.build((None, pooled_output_shape[-1]))
        self.built = True

    def call(self, pooled_output):
        return self.dense(pooled_output)

    def get_config(self):
        return {
            **super().get_config(),
            "num_classes": self.num_classes,
            "initializer_range": self.initializer_range,
        }
