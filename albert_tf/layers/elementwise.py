"""The block's elementwise math (GELU, LayerNorm, attention softmax), plain or XLA-fused.

LayerNorm and softmax compute in float32 and return the input's dtype (bfloat16 under
`mixed_bfloat16`).

With `fused=True` (the encoder's training graphs) the forward and the gradient of each
function run as one XLA-compiled kernel (a nested `tf.function(jit_compile=True)`), even in a
graph that is otherwise not compiled: one pass over memory instead of one per TF op. On a
2-core AVX512-BF16 CPU this cuts the GELU of an ALBERT-base FFN ([2048, 3072] bfloat16,
forward and backward) from 16.8 to 3.5 ms. The gradients are written out, so that a
`tf.while_loop`'s backward pass keeps only each function's input (or output) instead of every
intermediate of its formula (in the loop each kept intermediate is one more per-iteration
accumulator).

Plain (inference graphs, and so exported SavedModels): the same formulas as TF ops with TF's
own gradients, which TF Serving runs without its XLA JIT; GELU is `tf.nn.gelu`, whose ops
oneDNN's grappler pass fuses into the preceding MatMul + BiasAdd on CPU.

>>> import tensorflow as tf
>>> from albert_tf.layers import elementwise
>>> x = tf.constant([[-1.0, 0.0, 2.0]])
>>> [round(float(v), 4) for v in elementwise.gelu_tanh(x)[0]]
[-0.1588, 0.0, 1.9546]
>>> bool(tf.reduce_all(abs(elementwise.gelu_tanh(x, fused=True) - elementwise.gelu_tanh(x)) < 1e-6))
True
"""

import math

import tensorflow as tf

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _xla(fn):
    """fn as one XLA cluster (inlined when the caller is itself compiled, e.g. on TPU)."""
    return tf.function(fn, jit_compile=True, autograph=False, reduce_retracing=True)


def _f32(x):
    return tf.cast(x, tf.float32)


# ----------------------------------------------------------------------------- activations
def _gelu_tanh(x):
    return 0.5 * x * (1.0 + tf.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


def _gelu_tanh_derivative(x):
    t = tf.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 0.134145 * x * x)


def _gelu_erf(x):
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def _gelu_erf_derivative(x):
    return 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0))) + x * tf.exp(-0.5 * x * x) / math.sqrt(
        2.0 * math.pi
    )


def _activation(formula, derivative, plain, doc):
    """f(x, fused=False): `formula` elementwise.

    Fused: the formula and its gradient dy * derivative(x), each in float32 inside one XLA
    kernel. Plain: `plain(x)` in x's dtype with TF's own gradient (`tf.nn.gelu`, whose graph
    oneDNN's grappler pass fuses into the preceding MatMul + BiasAdd on CPU)."""

    fused_forward = _xla(lambda x: tf.cast(formula(_f32(x)), x.dtype))
    fused_grad = _xla(lambda x, dy: tf.cast(_f32(dy) * derivative(_f32(x)), dy.dtype))

    @tf.custom_gradient
    def fused_activation(x):
        return fused_forward(x), lambda dy: fused_grad(x, dy)

    def activation(x, fused=False):
        return fused_activation(x) if fused else plain(x)

    activation.__doc__ = doc
    return activation


gelu_tanh = _activation(
    _gelu_tanh,
    _gelu_tanh_derivative,
    lambda x: tf.nn.gelu(x, approximate=True),
    'The original ALBERT/BERT "gelu": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).',
)
gelu_erf = _activation(
    _gelu_erf,
    _gelu_erf_derivative,
    lambda x: tf.nn.gelu(x, approximate=False),
    'The exact GELU, x Phi(x) (Hugging Face\'s "gelu").',
)


def _without_fusion(f):
    return lambda x, fused=False: f(x)


_ACTIVATIONS = {
    "gelu_tanh": gelu_tanh,
    "gelu_erf": gelu_erf,
    "relu": _without_fusion(tf.nn.relu),
    "tanh": _without_fusion(tf.tanh),
    "linear": _without_fusion(tf.identity),
}


def get_activation(name):
    """The activation f(x, fused=False) for an `AlbertConfig.hidden_act` name."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


# ----------------------------------------------------------------------------- LayerNorm
def _normalize(x, gamma, beta, eps):
    x32 = _f32(x)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    rstd = tf.math.rsqrt(variance + eps)
    y = (x32 - mean) * rstd * _f32(gamma) + _f32(beta)
    return tf.cast(y, x.dtype), mean, rstd


_fused_normalize = _xla(_normalize)


@_xla
def _fused_normalize_grad(x, gamma, beta, mean, rstd, dy):
    dy = _f32(dy)
    xhat = (_f32(x) - mean) * rstd
    axes = list(range(x.shape.rank - 1))
    dxhat = dy * _f32(gamma)
    dx = rstd * (
        dxhat
        - tf.reduce_mean(dxhat, -1, keepdims=True)
        - xhat * tf.reduce_mean(dxhat * xhat, -1, keepdims=True)
    )
    dgamma = tf.reduce_sum(dy * xhat, axes)
    dbeta = tf.reduce_sum(dy, axes)
    return tf.cast(dx, x.dtype), tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)


def layer_norm(x, gamma, beta, eps, fused=False):
    """LayerNorm over the last axis in float32 (biased variance), cast back to x's dtype.

    Fused: one XLA kernel each way, the written-out gradient keeping only x and two [..., 1]
    statistics. Plain: TF ops with TF's own gradient."""
    if not fused:
        return _normalize(x, gamma, beta, eps)[0]

    @tf.custom_gradient
    def normalize(x, gamma, beta):
        y, mean, rstd = _fused_normalize(x, gamma, beta, eps)
        return y, lambda dy: _fused_normalize_grad(x, gamma, beta, mean, rstd, dy)

    return normalize(x, gamma, beta)


# ----------------------------------------------------------------------------- softmax
def _scores_to_probs(scores, bias, scale):
    return tf.cast(tf.nn.softmax(_f32(scores) * scale + bias, axis=-1), scores.dtype)


def _scores_to_probs_grad(probs, dprobs, scale):
    p, dp = _f32(probs), _f32(dprobs)
    return tf.cast(p * (dp - tf.reduce_sum(dp * p, -1, keepdims=True)) * scale, probs.dtype)


_fused_scores_to_probs = _xla(_scores_to_probs)
_fused_scores_to_probs_grad = _xla(_scores_to_probs_grad)


def attention_probs(scores, bias, scale, fused=False):
    """softmax(scores * scale + bias) over the last axis in float32, in scores' dtype.

    `bias` (float32, broadcast to scores) gets no gradient. Fused: the written-out gradient
    keeps only the probabilities."""
    if not fused:
        return _scores_to_probs(scores, bias, scale)

    @tf.custom_gradient
    def softmax(scores):
        probs = _fused_scores_to_probs(scores, bias, scale)
        return probs, lambda dprobs: _fused_scores_to_probs_grad(probs, dprobs, scale)

    return softmax(scores)
