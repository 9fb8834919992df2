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

Softmax and LayerNorm (`albert_tf.layers.elementwise`) run in float32 and cast back to the
input dtype (bfloat16 under `mixed_bfloat16`); with `BlockSettings(fused=True)` they and GELU
run as XLA kernels (the encoder's training graphs). Dropout is stateless: every site draws its
mask from a seed tensor, so the same seed gives the same masks inside a `tf.while_loop` and in
an unrolled Python loop.

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

from albert_tf.layers import elementwise

# Added to the attention scores of padded keys (in float32; exp() of it is exactly 0).
MASK_VALUE = -1e9


@dataclasses.dataclass(frozen=True)
class BlockSettings:
    """Static (non-weight) settings of a block; `from_config` reads them from an AlbertConfig."""

    num_heads: int
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-12
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    fused: bool = False  # elementwise math as XLA kernels (see elementwise.py)

    @classmethod
    def from_config(cls, config):
        return cls(
            num_heads=config.num_attention_heads,
            activation=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            attention_dropout=config.attention_probs_dropout_prob,
            hidden_dropout=config.hidden_dropout_prob,
        )


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


def _dense(x, kernel, bias, activation=None):
    """activation(x [..., in] @ kernel [in, out] + bias) as one 2-D MatMul + BiasAdd (+ the
    activation on the 2-D result), which oneDNN fuses into one op (a 3-D x would make a
    broadcasting BatchMatMul and a separate add: ~10% slower on CPU)."""
    y = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel), bias)
    if activation is not None:
        y = activation(y)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(kernel)[-1:]], 0))


def _residual_norm(x, out, weights, settings, training, seed, site):
    """LayerNorm(x + Dropout(out)), the dropout mask from site `site` of `seed`."""
    if training and settings.hidden_dropout:
        out = dropout(out, settings.hidden_dropout, sub_seed(seed, site))
    return elementwise.layer_norm(
        x + out,
        weights["layer_norm_gamma"],
        weights["layer_norm_beta"],
        settings.layer_norm_eps,
        fused=settings.fused,
    )


QKV_NAMES = ("query", "key", "value")


def fuse_query_key_value(weights):
    """Attention weights with the query/key/value kernels and biases concatenated on their
    output axis into `qkv_kernel` [..., H, 3H] and `qkv_bias` [..., 3H]: one MatMul and one
    head transpose instead of three each (the encoder fuses once per call, outside its loop)."""
    fused = {k: v for k, v in weights.items() if not k.startswith(QKV_NAMES)}
    for part in ("kernel", "bias"):
        fused[f"qkv_{part}"] = tf.concat([weights[f"{n}_{part}"] for n in QKV_NAMES], -1)
    return fused


def _query_key_value(x, weights, num_heads):
    """(q, k, v), each [B, N, S, D], from separate or fused (`fuse_query_key_value`) weights."""
    if "qkv_kernel" not in weights:
        weights = fuse_query_key_value(weights)
    batch, seq, hidden = tf.shape(x)[0], tf.shape(x)[1], x.shape[-1]
    qkv = _dense(x, weights["qkv_kernel"], weights["qkv_bias"])  # [B, S, 3H]
    qkv = tf.reshape(qkv, [batch, seq, 3, num_heads, hidden // num_heads])
    return tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # 3 x [B, N, S, D]


def attention_sublayer(x, bias, weights, settings, training=False, seed=None):
    """LayerNorm(x + Dropout(Attention(x) W_o + b_o)) with a key-padding `bias` from attention_bias.

    `seed` (an int [2] tensor) is needed only when training with dropout; sites 0 and 1 of it
    are used.
    """
    hidden = x.shape[-1]
    if hidden % settings.num_heads:
        raise ValueError(f"hidden size {hidden} is not divisible by num_heads {settings.num_heads}")
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    q, k, v = _query_key_value(x, weights, settings.num_heads)
    scale = 1.0 / math.sqrt(hidden // settings.num_heads)
    probs = elementwise.attention_probs(
        tf.matmul(q, k, transpose_b=True), bias, scale, fused=settings.fused
    )
    if training and settings.attention_dropout:
        probs = dropout(probs, settings.attention_dropout, sub_seed(seed, 0))
    context = tf.matmul(probs, v)  # [B, N, S, D]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch, seq, hidden])
    out = _dense(context, weights["output_kernel"], weights["output_bias"])
    return _residual_norm(x, out, weights, settings, training, seed, site=1)


def ffn_sublayer(x, weights, settings, training=False, seed=None):
    """LayerNorm(x + Dropout(act(x W_1 + b_1) W_2 + b_2)); dropout site 2 of `seed`."""
    activation = elementwise.get_activation(settings.activation)
    h = _dense(
        x,
        weights["intermediate_kernel"],
        weights["intermediate_bias"],
        lambda y: activation(y, fused=settings.fused),
    )
    out = _dense(h, weights["output_kernel"], weights["output_bias"])
    return _residual_norm(x, out, weights, settings, training, seed, site=2)


def transformer_block(x, bias, attention_weights, ffn_weights, settings, training=False, seed=None):
    """One post-LN block: the attention sublayer, then the feed-forward sublayer."""
    x = attention_sublayer(x, bias, attention_weights, settings, training=training, seed=seed)
    return ffn_sublayer(x, ffn_weights, settings, training=training, seed=seed)
