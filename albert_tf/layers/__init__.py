"""albert_tf.layers: the Keras layers of the ALBERT model.

- `embedding.FactorizedEmbedding`: V x E tables, LayerNorm, dropout, projection E -> H.
- `block`: one post-LN transformer block as math on given weights.
- `encoder.AlbertEncoder`: stacked group weights applied by one `tf.while_loop`.
- `heads.MaskedLMHead`, `heads.SentenceOrderHead`: pretraining heads.
"""

from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
