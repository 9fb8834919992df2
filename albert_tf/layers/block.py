"""One post-LN transformer block (ALBERT/BERT) as plain math on given weight tensors.

The encoder keeps every group's weights stacked and gathers one group per loop iteration, so
the block cannot own variables: it is a set of functions taking the weights as a dict of
tensors. Layout (as in the original checkpoints and Hugging Face, after transposing PyTorch):

    attention: query_kernel, key_kernel, value_kernel, output_kernel [H, H]; *_bias [H];
               layer_norm_gamma, layer_norm_beta [H]
               (heads are contiguous head_size chunks of the query/key/value output axis)
    ffn:       intermediate_kernel [H, I], intermediate_bias [I], output_kernel [I, H],
               output_bias [H], layer_norm_gamma, layer_norm_beta [H]

(the one table of these names and shapes: `albert_tf.layers.block_weights`)

Softmax and LayerNorm always run in float32 and cast back to the input dtype (bfloat16 under
`mixed_bfloat16`). Dropout is stateless: every site draws its mask from a seed tensor, so the
same seed gives the same masks inside a `tf.while_loop` and in an unrolled Python loop.

>>> import numpy as np, tensorflow as tf
>>> from albert_tf.layers import block
>>> H, I = 8, 16
>>> rng = np.random.default_rng(0)
>>> attention = {n: tf.constant(rng.normal(size=(H, H)), tf.float32) for n in
...              ("query_kernel", "key_kernel", "value_kernel", "output_kernel")}
>>> attention.update({n: tf.zeros([H]) for n in
...                   ("query_bias", "key_bias", "value_bias", "output_bias", "layer_norm_beta")})
>>> attention["layer_norm_gamma"] = tf.ones([H])
>>> ffn = {"intermediate_kernel": tf.ones([H, I]) / H, "intermediate_bias": tf.zeros([I]),
...        "output_kernel": tf.ones([I, H]) / I, "output_bias": tf.zeros([H]),
...        "layer_norm_gamma": tf.ones([H]), "layer_norm_beta": tf.zeros([H])}
>>> settings = block.BlockSettings(num_heads=2, activation="gelu_tanh")
>>> x = tf.random.normal([1, 3, H])
>>> bias = block.attention_bias(tf.constant([[1, 1, 0]]))
>>> block.transformer_block(x, bias, attention, ffn, settings).shape
TensorShape([1, 3, 8])
"""

import dataclasses
import math

import tensorflow as tf

# Added to the attention scores of padded keys (in float32; exp() of it is exactly 0).
MASK_VALUE = -1e9

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _with_derivative(derivative):
    """Decorates f(x) -> elementwise activation whose gradient is dy * derivative(x).

    The backward pass then keeps only x (the FFN's [B, S, I] pre-activation) instead of every
    intermediate of the formula: in the encoder's `tf.while_loop` each kept intermediate is one
    more per-iteration accumulator, and XLA cannot fuse it away across the loop boundary.
    The derivative is computed in float32 (x may be bfloat16).
    """

    def decorate(f):
        @tf.custom_gradient
        def activation(x):
            def grad(dy):
                d = derivative(tf.cast(x, tf.float32))
                return tf.cast(tf.cast(dy, tf.float32) * d, dy.dtype)

            return f(x), grad

        activation.__doc__ = f.__doc__
        activation.__name__ = f.__name__
        return activation

    return decorate


def _gelu_tanh_derivative(x):
    t = tf.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 0.134145 * x * x)


def _gelu_erf_derivative(x):
    return 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0))) + x * tf.exp(-0.5 * x * x) / math.sqrt(
        2.0 * math.pi
    )


@_with_derivative(_gelu_tanh_derivative)
def gelu_tanh(x):
    """The original ALBERT/BERT "gelu": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + tf.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


@_with_derivative(_gelu_erf_derivative)
def gelu_erf(x):
    """The exact GELU, x Phi(x) (Hugging Face's "gelu")."""
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def _linear(x):
    return x


_ACTIVATIONS = {
    "gelu_tanh": gelu_tanh,
    "gelu_erf": gelu_erf,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": _linear,
}


def get_activation(name):
    """The activation function for an `AlbertConfig.hidden_act` name."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


@dataclasses.dataclass(frozen=True)
class BlockSettings:
    """Static (non-weight) settings of a block; `from_config` reads them from an AlbertConfig."""

    num_heads: int
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-12
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0

    @classmethod
    def from_config(cls, config):
        return cls(
            num_heads=config.num_attention_heads,
            activation=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            attention_dropout=config.attention_probs_dropout_prob,
            hidden_dropout=config.hidden_dropout_prob,
        )


def layer_norm(x, gamma, beta, eps):
    """LayerNorm over the last axis in float32 (biased variance), cast back to x's dtype.

    Its gradient is written out, so that the backward pass keeps x and two [..., 1] statistics
    rather than every intermediate of the formula (see `_with_derivative`).
    """

    @tf.custom_gradient
    def normalize(x, gamma, beta):
        x32 = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
        rstd = tf.math.rsqrt(variance + eps)
        y = (x32 - mean) * rstd * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)

        def grad(dy):
            dy = tf.cast(dy, tf.float32)
            xhat = (tf.cast(x, tf.float32) - mean) * rstd
            axes = list(range(x.shape.rank - 1))
            dxhat = dy * tf.cast(gamma, tf.float32)
            dx = rstd * (
                dxhat
                - tf.reduce_mean(dxhat, -1, keepdims=True)
                - xhat * tf.reduce_mean(dxhat * xhat, -1, keepdims=True)
            )
            dgamma = tf.reduce_sum(dy * xhat, axes)
            dbeta = tf.reduce_sum(dy, axes)
            return tf.cast(dx, x.dtype), tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)

        return tf.cast(y, x.dtype), grad

    return normalize(x, gamma, beta)


def dropout(x, rate, seed):
    """Inverted dropout with a stateless mask drawn from `seed` (int32/int64 [2]).

    Rate 0 is a no-op."""
    if not rate:
        return x
    # Philox named, not "auto_select": the same masks as before off XLA (where auto_select is
    # Philox), and under XLA:CPU auto_select inside a tf.while_loop ran ~2.5x slower than
    # unrolled (Philox: equal).
    keep = tf.random.stateless_uniform(tf.shape(x), seed=seed, dtype=tf.float32, alg="philox")
    keep = keep >= rate
    return tf.where(keep, x / tf.cast(1.0 - rate, x.dtype), tf.zeros_like(x))


def sub_seed(seed, index):
    """A distinct seed per dropout site: `index` may be a Python int or a scalar tensor."""
    return tf.random.experimental.stateless_fold_in(seed, tf.cast(index, tf.int32))


def attention_bias(input_mask):
    """[B, S] 1/0 key mask -> additive float32 bias [B, 1, 1, S].

    0 for kept keys, MASK_VALUE for padded ones."""
    mask = tf.cast(input_mask, tf.float32)
    return (1.0 - mask)[:, tf.newaxis, tf.newaxis, :] * MASK_VALUE


def _dense(x, kernel, bias):
    """x [..., in] @ kernel [in, out] + bias as one 2-D MatMul + BiasAdd, which oneDNN fuses
    (a 3-D x would make a broadcasting BatchMatMul and a separate add: ~10% slower on CPU)."""
    y = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel), bias)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(kernel)[-1:]], 0))


def _split_heads(x, num_heads):
    # [B, S, H] -> [B, N, S, D]; head n is the contiguous chunk [n*D, (n+1)*D) of the H axis.
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    head_size = x.shape[-1] // num_heads
    x = tf.reshape(x, [batch, seq, num_heads, head_size])
    return tf.transpose(x, [0, 2, 1, 3])


def attention_sublayer(x, bias, weights, settings, training=False, seed=None):
    """LayerNorm(x + Dropout(Attention(x) W_o + b_o)) with a key-padding `bias` from attention_bias.

    `seed` (an int [2] tensor) is needed only when training with dropout; sites 0 and 1 of it
    are used.
    """
    hidden = x.shape[-1]
    if hidden % settings.num_heads:
        raise ValueError(f"hidden size {hidden} is not divisible by num_heads {settings.num_heads}")
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    q = _split_heads(_dense(x, weights["query_kernel"], weights["query_bias"]), settings.num_heads)
    k = _split_heads(_dense(x, weights["key_kernel"], weights["key_bias"]), settings.num_heads)
    v = _split_heads(_dense(x, weights["value_kernel"], weights["value_bias"]), settings.num_heads)
    scale = 1.0 / math.sqrt(hidden // settings.num_heads)
    scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) * scale + bias
    probs = tf.nn.softmax(scores, axis=-1)
    if training and settings.attention_dropout:
        probs = dropout(probs, settings.attention_dropout, sub_seed(seed, 0))
    context = tf.matmul(tf.cast(probs, x.dtype), v)  # [B, N, S, D]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch, seq, hidden])
    out = _dense(context, weights["output_kernel"], weights["output_bias"])
    if training and settings.hidden_dropout:
        out = dropout(out, settings.hidden_dropout, sub_seed(seed, 1))
    return layer_norm(
        x + out, weights["layer_norm_gamma"], weights["layer_norm_beta"], settings.layer_norm_eps
    )


def ffn_sublayer(x, weights, settings, training=False, seed=None):
    """LayerNorm(x + Dropout(act(x W_1 + b_1) W_2 + b_2)); dropout site 2 of `seed`."""
    h = get_activation(settings.activation)(
        _dense(x, weights["intermediate_kernel"], weights["intermediate_bias"])
    )
    out = _dense(h, weights["output_kernel"], weights["output_bias"])
    if training and settings.hidden_dropout:
        out = dropout(out, settings.hidden_dropout, sub_seed(seed, 2))
    return layer_norm(
        x + out, weights["layer_norm_gamma"], weights["layer_norm_beta"], settings.layer_norm_eps
    )


def transformer_block(x, bias, attention_weights, ffn_weights, settings, training=False, seed=None):
    """One post-LN block: the attention sublayer, then the feed-forward sublayer."""
    x = attention_sublayer(x, bias, attention_weights, settings, training=training, seed=seed)
    return ffn_sublayer(x, ffn_weights, settings, training=training, seed=seed)
