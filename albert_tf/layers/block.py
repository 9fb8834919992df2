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
input dtype (bfloat16 under `mixed_bfloat16`). Dropout is stateless: a block's masks are its
pieces of one random stream per site (`albert_tf.layers.dropout`), so the same seed gives the
same masks inside a `tf.while_loop`, in an unrolled Python loop and when recomputed.

Training graphs (`BlockSettings(fused=True)`, set by the encoder) run the block with a
written-out gradient (`_written_gradient`): the elementwise math runs as XLA kernels both ways,
and the backward pass keeps only the block input, the query/key/value heads, the attention
probabilities, the context, the two LayerNorm inputs with their statistics, the FFN
pre-activation and the dropout masks (bool); the first LayerNorm's output and the activation's
output are recomputed from them (one elementwise pass each). In a `tf.while_loop` every kept
tensor is one more per-iteration stack, written in the forward loop and read back in the
backward one: with the two hidden dropout sites on, TF's autodiff of the same ops keeps 29
tensors per iteration, this gradient 15 (13 and the two masks; tests/model). See
docs/model.md for what it saves. Inference graphs (and so exported SavedModels) are the plain
TF ops with TF's own gradients.

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
from typing import Optional

import tensorflow as tf

from albert_tf.layers import block_weights, dropout, elementwise

# Added to the attention scores of padded keys (in float32; exp() of it is exactly 0).
MASK_VALUE = -1e9
QKV_NAMES = block_weights.QKV_NAMES
# Dropout sites of a block (see dropout.BlockMasks): the attention probabilities, the attention
# sublayer's output, the FFN sublayer's output.
ATTENTION_PROBS_SITE, ATTENTION_OUTPUT_SITE, FFN_OUTPUT_SITE = 0, 1, 2
# Served inputs of at most this many tokens (batch x sequence) multiply weights first; larger
# ones activations first, which oneDNN runs faster on large products (docs/benchmarks.md,
# serving: batches of 32 texts).
SERVING_WEIGHTS_FIRST_TOKENS = 128
SERVING_PRODUCTS = (None, "weights_first", "activations_first")
# Served products are split on the weights' output axis into this many independent MatMuls
# (with their bias and activation), which TensorFlow's executor runs on separate inter-op
# threads: with one intra-op thread per op (TF Serving's --tensorflow_intra_op_parallelism=1),
# a single request's MatMuls use two cores instead of one (docs/benchmarks.md, serving).
SERVING_MATMUL_PARTS = 2


@dataclasses.dataclass(frozen=True)
class BlockSettings:
    """Static (non-weight) settings of a block; `from_config` reads them from an AlbertConfig."""

    num_heads: int
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-12
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    fused: bool = False  # training graphs: XLA kernels and the written gradient (see above)
    # Inference on weights in block_weights' serving layout (kernels [out, in], query/key/value
    # fused): None (the training layout), "weights_first" (kernel @ x^T: oneDNN reads bfloat16
    # weights as stored, fastest for few tokens) or "activations_first" (x @ kernel^T: the
    # weight reorder of each call pays off in large products; see SERVING_WEIGHTS_FIRST_TOKENS).
    serving_product: Optional[str] = None

    def __post_init__(self):
        if self.serving_product not in SERVING_PRODUCTS:
            raise ValueError(
                f"serving_product={self.serving_product!r}: expected one of {SERVING_PRODUCTS}"
            )

    @classmethod
    def from_config(cls, config):
        return cls(
            num_heads=config.num_attention_heads,
            activation=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            attention_dropout=config.attention_probs_dropout_prob,
            hidden_dropout=config.hidden_dropout_prob,
        )


def dropout_rates(settings, training):
    """{site: rate} of the block's active dropout sites (none unless training)."""
    rates = {
        ATTENTION_PROBS_SITE: settings.attention_dropout,
        ATTENTION_OUTPUT_SITE: settings.hidden_dropout,
        FFN_OUTPUT_SITE: settings.hidden_dropout,
    }
    return {site: rate for site, rate in rates.items() if training and rate}


def mask_shapes(batch, seq, hidden, settings):
    """{site: shape} of the block's dropout masks for an input [batch, seq, hidden]: the
    attention probabilities [B, heads, S, S], the sublayer outputs [B * S, H]."""
    return {
        ATTENTION_PROBS_SITE: tf.stack([batch, settings.num_heads, seq, seq]),
        ATTENTION_OUTPUT_SITE: tf.stack([batch * seq, hidden]),
        FFN_OUTPUT_SITE: tf.stack([batch * seq, hidden]),
    }


def block_masks(x, settings, seed):
    """The `dropout.BlockMasks` of blocks on x [B, S, H] with dropout from `seed`."""
    shape = tf.shape(x)
    shapes = mask_shapes(shape[0], shape[1], x.shape[-1], settings)
    return dropout.BlockMasks(seed, dropout_rates(settings, True), shapes)


def attention_bias(input_mask):
    """[B, S] 1/0 key mask -> additive float32 bias [B, 1, 1, S].

    0 for kept keys, MASK_VALUE for padded ones."""
    mask = tf.cast(input_mask, tf.float32)
    return (1.0 - mask)[:, tf.newaxis, tf.newaxis, :] * MASK_VALUE


def fuse_query_key_value(weights):
    """Attention weights with the query/key/value kernels and biases concatenated on their
    output axis into `qkv_kernel` [..., H, 3H] and `qkv_bias` [..., 3H]: one MatMul and one
    head transpose instead of three each (the encoder fuses once per call, outside its loop)."""
    if "qkv_kernel" in weights:
        return weights
    fused = {k: v for k, v in weights.items() if not k.startswith(QKV_NAMES)}
    for part in ("kernel", "bias"):
        fused[f"qkv_{part}"] = tf.concat([weights[f"{n}_{part}"] for n in QKV_NAMES], -1)
    return fused


def _dense(x, kernel, bias, activation=None, serving_product=None):
    """activation(x [T, in] @ kernel [in, out] + bias): a 2-D MatMul + BiasAdd (+ the activation
    on the 2-D result), which oneDNN fuses into one op (a 3-D x would make a broadcasting
    BatchMatMul and a separate add, slower on CPU). With a `serving_product`, see
    `_serving_dense`."""
    if serving_product:
        return _serving_dense(x, kernel, bias, activation, serving_product)
    y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
    return y if activation is None else activation(y)


def _serving_dense(x, kernel, bias, activation, serving_product):
    """`_dense` on a kernel [out, in] (block_weights' serving layout): the product is
    (kernel @ x^T)^T ("weights_first") or x @ kernel^T ("activations_first"), the bias and
    activation in float32 (as oneDNN's fused MatMul computes them). It runs as
    SERVING_MATMUL_PARTS independent pieces, each on a slice of the output axis (a split on a
    kernel's first axis shares its buffer: no copy), joined at the end."""
    out = kernel.shape[0]
    parts = SERVING_MATMUL_PARTS if out % SERVING_MATMUL_PARTS == 0 else 1
    pieces = []
    for part, part_bias in zip(tf.split(kernel, parts), tf.split(bias, parts)):
        if serving_product == "weights_first":
            y = tf.transpose(tf.matmul(part, x, transpose_b=True))
        else:
            y = tf.matmul(x, part, transpose_b=True)
        y = tf.cast(y, tf.float32) + tf.cast(part_bias, tf.float32)
        pieces.append(tf.cast(y if activation is None else activation(y), x.dtype))
    return pieces[0] if parts == 1 else tf.concat(pieces, -1)


def _dense_gradient(x, kernel, dy):
    """(dx, dkernel, dbias) of `_dense` without activation, as TF's own gradient ops."""
    return (
        tf.matmul(dy, kernel, transpose_b=True),
        tf.matmul(x, dy, transpose_a=True),
        tf.raw_ops.BiasAddGrad(out_backprop=dy),
    )


def _split_heads(x, batch, seq, num_heads, parts=1):
    """[B * S, parts * H] -> [B, N, S, D], or a list of `parts` of them (one transpose)."""
    width = x.shape[-1] // (parts * num_heads)
    if parts == 1:
        return tf.transpose(tf.reshape(x, [batch, seq, num_heads, width]), [0, 2, 1, 3])
    x = tf.reshape(x, [batch, seq, parts, num_heads, width])
    return tf.unstack(tf.transpose(x, [2, 0, 3, 1, 4]))


def _merge_heads(x):
    """`_split_heads` inverted: [B, N, S, D], or a list of them -> [B * S, parts * N * D]."""
    if isinstance(x, list):
        x = tf.transpose(tf.stack(x), [1, 3, 0, 2, 4])  # [B, S, parts, N, D]
    else:
        x = tf.transpose(x, [0, 2, 1, 3])  # [B, S, N, D]
    return tf.reshape(x, [-1, math.prod(x.shape[2:])])


def _forward(x, bias, attention, ffn, settings, rates, masks, fused):
    """The block on x [B, S, H] -> (output [B, S, H], kept), `kept` holding what the written
    gradient needs. `rates` and `masks` map the active dropout sites to their rates and their
    bool keep masks."""

    def drop(t, site):
        if site not in rates:
            return t
        return elementwise.apply_dropout(t, masks[site], rates[site], fused)

    def add_dropped(residual, t, site):  # residual + drop(t, site), one kernel when fused
        if site not in rates:
            return residual + t
        return elementwise.residual_dropout(residual, t, masks[site], rates[site], fused)

    batch, seq, hidden = tf.shape(x)[0], tf.shape(x)[1], x.shape[-1]
    if hidden % settings.num_heads:
        raise ValueError(f"hidden size {hidden} is not divisible by num_heads {settings.num_heads}")
    x2 = tf.reshape(x, [-1, hidden])
    first = settings.serving_product
    qkv = _dense(x2, attention["qkv_kernel"], attention["qkv_bias"], serving_product=first)
    q, k, v = _split_heads(qkv, batch, seq, settings.num_heads, parts=3)
    scale = 1.0 / math.sqrt(hidden // settings.num_heads)
    probs = elementwise.attention_probs(tf.matmul(q, k, transpose_b=True), bias, scale, fused)
    context = _merge_heads(tf.matmul(drop(probs, ATTENTION_PROBS_SITE), v))
    out = _dense(
        context, attention["output_kernel"], attention["output_bias"], serving_product=first
    )
    s1 = add_dropped(x2, out, ATTENTION_OUTPUT_SITE)
    eps = settings.layer_norm_eps
    y1, mean1, rstd1 = elementwise.normalize(
        s1, attention["layer_norm_gamma"], attention["layer_norm_beta"], eps, fused
    )
    activation = elementwise.get_activation(settings.activation)
    if fused:  # the pre-activation is kept
        pre = _dense(y1, ffn["intermediate_kernel"], ffn["intermediate_bias"])
        act = activation(pre, fused=True)
    else:  # activation on the 2-D MatMul + BiasAdd result, for oneDNN's fusion
        pre = None
        act = _dense(y1, ffn["intermediate_kernel"], ffn["intermediate_bias"], activation, first)
    out = _dense(act, ffn["output_kernel"], ffn["output_bias"], serving_product=first)
    s2 = add_dropped(y1, out, FFN_OUTPUT_SITE)
    y2, mean2, rstd2 = elementwise.normalize(
        s2, ffn["layer_norm_gamma"], ffn["layer_norm_beta"], eps, fused
    )
    kept = dict(
        q=q, k=k, v=v, probs=probs, context=context, s1=s1, mean1=mean1, rstd1=rstd1, pre=pre,
        s2=s2, mean2=mean2, rstd2=rstd2, masks=masks,
    )  # fmt: skip
    return tf.reshape(y2, tf.shape(x)), kept


def _backward(dy, x, kept, attention, ffn, settings, rates):
    """(dx, dattention, dffn) of `_forward(fused=True)` from its output gradient dy [B, S, H].

    Shapes come from dy: a shape computed in the forward pass and read here would be one more
    per-iteration stack in a `tf.while_loop`, and not a compile-time constant under XLA."""
    batch, seq, hidden = tf.shape(dy)[0], tf.shape(dy)[1], dy.shape[-1]
    eps = settings.layer_norm_eps
    dy = tf.reshape(dy, [-1, hidden])

    masks = kept["masks"]  # the forward pass's (kept: drawing them again costs more)

    def drop(t, site):
        return elementwise.apply_dropout(t, masks[site], rates[site], True) if site in rates else t

    # FFN sublayer: s2 = y1 + drop(act(y1 W1 + b1) W2 + b2), y2 = LayerNorm(s2).
    ds2, dgamma2, dbeta2 = elementwise.normalize_gradient(
        kept["s2"], ffn["layer_norm_gamma"], kept["mean2"], kept["rstd2"], dy
    )
    activation = elementwise.get_activation(settings.activation)
    act = activation(kept["pre"], fused=True)  # recomputed
    dact, dffn_out_kernel, dffn_out_bias = _dense_gradient(
        act, ffn["output_kernel"], drop(ds2, FFN_OUTPUT_SITE)
    )
    dpre = activation.gradient(kept["pre"], dact)
    y1 = elementwise.normalize(
        kept["s1"], attention["layer_norm_gamma"], attention["layer_norm_beta"], eps, True
    )[0]  # recomputed
    dy1, dintermediate_kernel, dintermediate_bias = _dense_gradient(
        y1, ffn["intermediate_kernel"], dpre
    )
    # Attention sublayer: s1 = x + drop(context Wo + bo), y1 = LayerNorm(s1).
    ds1, dgamma1, dbeta1 = elementwise.normalize_gradient(
        kept["s1"], attention["layer_norm_gamma"], kept["mean1"], kept["rstd1"], ds2 + dy1
    )
    dcontext, dout_kernel, dout_bias = _dense_gradient(
        kept["context"], attention["output_kernel"], drop(ds1, ATTENTION_OUTPUT_SITE)
    )
    dcontext = _split_heads(dcontext, batch, seq, settings.num_heads)
    q, k, v, probs = kept["q"], kept["k"], kept["v"], kept["probs"]
    dv = tf.matmul(drop(probs, ATTENTION_PROBS_SITE), dcontext, transpose_a=True)
    dprobs = tf.matmul(dcontext, v, transpose_b=True)  # of the dropped probabilities
    scale = 1.0 / math.sqrt(hidden // settings.num_heads)
    dscores = elementwise.attention_probs_gradient(
        probs, dprobs, scale, masks.get(ATTENTION_PROBS_SITE), rates.get(ATTENTION_PROBS_SITE, 0.0)
    )
    dq = tf.matmul(dscores, k)
    dk = tf.matmul(dscores, q, transpose_a=True)
    dx, dqkv_kernel, dqkv_bias = _dense_gradient(
        tf.reshape(x, [-1, hidden]), attention["qkv_kernel"], _merge_heads([dq, dk, dv])
    )
    dattention = {
        "qkv_kernel": dqkv_kernel,
        "qkv_bias": dqkv_bias,
        "output_kernel": dout_kernel,
        "output_bias": dout_bias,
        "layer_norm_gamma": dgamma1,
        "layer_norm_beta": dbeta1,
    }
    dffn = {
        "intermediate_kernel": dintermediate_kernel,
        "intermediate_bias": dintermediate_bias,
        "output_kernel": dffn_out_kernel,
        "output_bias": dffn_out_bias,
        "layer_norm_gamma": dgamma2,
        "layer_norm_beta": dbeta2,
    }
    return tf.reshape(ds1 + dx, [batch, seq, hidden]), dattention, dffn


def _written_gradient(x, bias, attention, ffn, settings, rates, masks):
    """`_forward(fused=True)` with `_backward` as its gradient (`bias` gets none)."""

    @tf.custom_gradient
    def run(x, attention, ffn):
        y, kept = _forward(x, bias, attention, ffn, settings, rates, masks, fused=True)
        return y, lambda dy: _backward(dy, x, kept, attention, ffn, settings, rates)

    return run(x, attention, ffn)


def transformer_block(
    x, bias, attention_weights, ffn_weights, settings, training=False, masks=None
):
    """One post-LN block: LayerNorm(x + Dropout(Attention(x))), then
    LayerNorm(h + Dropout(act(h W1 + b1) W2 + b2)).

    x [B, S, H]; `bias` from attention_bias; weights as in the module docstring (query/key/value
    separate or fused by fuse_query_key_value); `masks`, {site: bool keep mask}
    (`block_masks(x, settings, seed).at(i)` for block i), is needed only when training with
    dropout. With `settings.fused` the block has the written-out gradient; with
    `settings.serving_product` it takes weights in block_weights' serving layout (inference
    only)."""
    rates = dropout_rates(settings, training)
    if settings.serving_product and (settings.fused or training):
        raise ValueError("weights in the serving layout are for inference only (training=False)")
    if set(rates) - set(masks or {}):
        raise ValueError("transformer_block with dropout in training needs its dropout masks")
    attention_weights = fuse_query_key_value(attention_weights)
    if settings.fused:
        return _written_gradient(x, bias, attention_weights, ffn_weights, settings, rates, masks)
    return _forward(x, bias, attention_weights, ffn_weights, settings, rates, masks, False)[0]
