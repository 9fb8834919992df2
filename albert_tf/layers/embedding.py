"""ALBERT's factorized embedding: V x E lookup tables, LayerNorm, dropout, then E -> H."""

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.layers import dropout


@keras.saving.register_keras_serializable(package="albert_tf")
class FactorizedEmbedding(keras.layers.Layer):
    """Word + position + token-type embeddings of size E, LayerNorm, dropout, projection to H.

    Exactly the original's embedding path: the three tables are summed (positions 0..S-1),
    normalized with LayerNorm(eps=config.layer_norm_eps, float32) over E, dropped out with
    `hidden_dropout_prob` (stateless masks as in the encoder, seeded by `seed`), and mapped to
    H by a dense layer with bias, which exists only when E != H
    (`config.has_embedding_projection`). Lookups and the LayerNorm run in float32; the output
    has the layer's compute dtype.

    Variables (paths relative to the parent): `embeddings/word_embeddings` [V, E],
    `embeddings/position_embeddings` [P, E], `embeddings/token_type_embeddings` [T, E],
    `embeddings/layer_norm/{gamma,beta}` [E], `embeddings/embedding_projection/{kernel [E, H],
    bias [H]}`.

    Example:
        >>> import tensorflow as tf
        >>> from albert_tf.config import AlbertConfig
        >>> config = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16,
        ...                       num_attention_heads=2, intermediate_size=32)
        >>> layer = FactorizedEmbedding(config)
        >>> ids = tf.constant([[2, 7, 3]])
        >>> layer(ids, tf.zeros_like(ids)).shape
        TensorShape([1, 3, 16])
    """

    def __init__(self, config, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig(**config)
        self.config = config
        self.word_embeddings = None
        self.position_embeddings = None
        self.token_type_embeddings = None
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_eps, dtype="float32", name="layer_norm"
        )
        self.seed = seed
        self.seed_generator = None
        if config.hidden_dropout_prob:
            self.seed_generator = keras.random.SeedGenerator(seed, name="dropout_seed")
        self.projection = None
        if config.has_embedding_projection:
            self.projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=self._initializer(),
                dtype=self.dtype_policy,
                name="embedding_projection",
            )

    def _initializer(self):
        return keras.initializers.TruncatedNormal(stddev=self.config.initializer_range)

    def build(self, input_shape=None):
        c = self.config
        table = dict(initializer=self._initializer(), autocast=False)
        self.word_embeddings = self.add_weight(
            shape=(c.vocab_size, c.embedding_size), name="word_embeddings", **table
        )
        self.position_embeddings = self.add_weight(
            shape=(c.max_position_embeddings, c.embedding_size), name="position_embeddings", **table
        )
        self.token_type_embeddings = self.add_weight(
            shape=(c.type_vocab_size, c.embedding_size), name="token_type_embeddings", **table
        )
        self.layer_norm.build((None, None, c.embedding_size))
        if self.projection is not None:
            self.projection.build((None, None, c.embedding_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=False):
        """int [B, S] ids and token types -> [B, S, H] (or [B, S, E] when E == H)."""
        words = tf.gather(self.word_embeddings.value, input_word_ids)
        types = tf.gather(self.token_type_embeddings.value, input_type_ids)
        seq_length = tf.shape(input_word_ids)[1]
        positions = self.position_embeddings.value[tf.newaxis, :seq_length]
        x = self.layer_norm(words + types + positions)
        x = tf.cast(x, self.compute_dtype)
        if training and self.seed_generator is not None:
            x = dropout.dropout(x, self.config.hidden_dropout_prob, self.seed_generator.next())
        if self.projection is not None:
            x = self.projection(x)
        return x

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict(), "seed": self.seed}
