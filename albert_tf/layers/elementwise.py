"""The block's elementwise math (activation, LayerNorm, attention softmax), plain or as XLA kernels.

LayerNorm and softmax compute in float32 and return the input's dtype (bfloat16 under
`mixed_bfloat16`).

Plain (inference graphs, and so exported SavedModels): TF ops with TF's own gradients, which
TF Serving runs without its XLA JIT; GELU is `tf.nn.gelu`, whose ops oneDNN's grappler pass
fuses into the preceding MatMul + BiasAdd on CPU.

`fused=True` (the encoder's training graphs): each function runs as one XLA-compiled kernel (a
nested `tf.function(jit_compile=True)`), even in a graph that is otherwise not compiled: one
pass over memory instead of one per TF op. The block's written-out gradient
(`albert_tf.layers.block`) pairs each with its gradient kernel (`Activation.gradient`,
`normalize_gradient`, `attention_probs_gradient`). Dropout's mask is applied the same way
(`apply_dropout`, `residual_dropout`), and the attention dropout's gradient inside the softmax
gradient kernel (docs/notes/encoder_speed.md has the measurements).

>>> import tensorflow as tf
>>> from albert_tf.layers import elementwise
>>> x = tf.constant([[-1.0, 0.0, 2.0]])
>>> [round(float(v), 4) for v in elementwise.gelu_tanh(x)[0]]
[-0.1588, 0.0, 1.9546]
>>> bool(tf.reduce_all(abs(elementwise.gelu_tanh(x, fused=True) - elementwise.gelu_tanh(x)) < 1e-6))
True
>>> [round(float(v), 4) for v in elementwise.gelu_tanh.gradient(x, tf.ones_like(x))[0]]
[-0.083, 0.5, 1.0861]
"""

import math

import tensorflow as tf

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def xla_kernel(fn):
    """fn as one XLA cluster (inlined when the caller is itself compiled, e.g. on TPU).

    For training graphs only: exported SavedModels must not need XLA."""
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


def _tanh_derivative(x):
    t = tf.tanh(x)
    return 1.0 - t * t


class Activation:
    """An activation `f(x, fused=False)`, with `f.gradient(x, dy)` = dy * f'(x).

    Plain: `plain(x)` in x's dtype with TF's own gradient. Fused: `formula` in float32 inside
    one XLA kernel, cast back to x's dtype. `gradient` is always one XLA kernel (the block's
    written-out gradient calls it), computed in float32 and returned in dy's dtype.
    """

    def __init__(self, name, formula, derivative, plain, doc):
        self.name = name
        self.__doc__ = doc
        self._plain = plain
        self._fused = xla_kernel(lambda x: tf.cast(formula(_f32(x)), x.dtype))
        self._gradient = xla_kernel(lambda x, dy: tf.cast(_f32(dy) * derivative(_f32(x)), dy.dtype))

    def __call__(self, x, fused=False):
        return self._fused(x) if fused else self._plain(x)

    def gradient(self, x, dy):
        """dy * f'(x) as one XLA kernel, in dy's dtype."""
        return self._gradient(x, dy)


gelu_tanh = Activation(
    "gelu_tanh",
    _gelu_tanh,
    _gelu_tanh_derivative,
    lambda x: tf.nn.gelu(x, approximate=True),
    'The original ALBERT/BERT "gelu": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).',
)
gelu_erf = Activation(
    "gelu_erf",
    _gelu_erf,
    _gelu_erf_derivative,
    lambda x: tf.nn.gelu(x, approximate=False),
    'The exact GELU, x Phi(x) (Hugging Face\'s "gelu").',
)
_ACTIVATIONS = {
    a.name: a
    for a in (
        gelu_tanh,
        gelu_erf,
        Activation("relu", tf.nn.relu, lambda x: tf.cast(x > 0, x.dtype), tf.nn.relu, "max(x, 0)."),
        Activation("tanh", tf.tanh, _tanh_derivative, tf.tanh, "tanh(x)."),
        Activation("linear", tf.identity, tf.ones_like, tf.identity, "x."),
    )
}


def get_activation(name):
    """The Activation for an `AlbertConfig.hidden_act` name."""
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


_fused_normalize = xla_kernel(_normalize)


def normalize(x, gamma, beta, eps, fused=False):
    """LayerNorm over the last axis in float32 (biased variance), cast back to x's dtype.

    Returns (y, mean, rstd), the two float32 statistics [..., 1] being what
    `normalize_gradient` needs besides x."""
    return (_fused_normalize if fused else _normalize)(x, gamma, beta, eps)


@xla_kernel
def normalize_gradient(x, gamma, mean, rstd, dy):
    """(dx, dgamma, dbeta) of `normalize` from its input, statistics and output gradient, as
    one XLA kernel: dx in x's dtype, dgamma and dbeta in gamma's."""
    dy = _f32(dy)
    xhat = (_f32(x) - mean) * rstd
    dxhat = dy * _f32(gamma)
    dx = rstd * (
        dxhat
        - tf.reduce_mean(dxhat, -1, keepdims=True)
        - xhat * tf.reduce_mean(dxhat * xhat, -1, keepdims=True)
    )
    # Summed over every axis but the last, whatever the rank: a retrace under reduce_retracing
    # may leave ranks and sizes unknown (XLA knows them when it compiles).
    width = tf.shape(dy)[-1]
    dgamma = tf.reduce_sum(tf.reshape(dy * xhat, [-1, width]), 0)
    dbeta = tf.reduce_sum(tf.reshape(dy, [-1, width]), 0)
    return tf.cast(dx, x.dtype), tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, gamma.dtype)


# ----------------------------------------------------------------------------- softmax
def _scores_to_probs(scores, bias, scale):
    return tf.cast(tf.nn.softmax(_f32(scores) * scale + bias, axis=-1), scores.dtype)


_fused_scores_to_probs = xla_kernel(_scores_to_probs)


def attention_probs(scores, bias, scale, fused=False):
    """softmax(scores * scale + bias) over the last axis in float32, in scores' dtype.

    `bias` is float32, broadcast to scores."""
    return (_fused_scores_to_probs if fused else _scores_to_probs)(scores, bias, scale)


def _attention_probs_gradient(probs, dprobs, scale, keep, rate):
    if keep is not None:  # dprobs is the gradient of the dropped probabilities
        dprobs = _apply_dropout(dprobs, keep, rate)
    p, dp = _f32(probs), _f32(dprobs)
    return tf.cast(p * (dp - tf.reduce_sum(dp * p, -1, keepdims=True)) * scale, probs.dtype)


_attention_probs_gradient_kernel = xla_kernel(_attention_probs_gradient)


def attention_probs_gradient(probs, dprobs, scale, keep=None, rate=0.0):
    """The gradient of `attention_probs` with respect to its scores, from its output, as one
    XLA kernel (in probs' dtype).

    With `keep` (the mask of the probabilities' dropout at `rate`), dprobs is the gradient of
    `apply_dropout(probs, keep, rate)`, and the dropout's gradient runs in the same kernel."""
    return _attention_probs_gradient_kernel(probs, dprobs, scale, keep, rate)


# ----------------------------------------------------------------------------- dropout
def _apply_dropout(x, keep, rate):
    return tf.where(keep, x / tf.cast(1.0 - rate, x.dtype), tf.zeros_like(x))


def _residual_dropout(residual, x, keep, rate):
    return residual + _apply_dropout(x, keep, rate)


_fused_apply_dropout = xla_kernel(_apply_dropout)
_fused_residual_dropout = xla_kernel(_residual_dropout)


def apply_dropout(x, keep, rate, fused=False):
    """Inverted dropout with a given mask: x / (1 - rate) where `keep` (bool), else 0.

    Linear in x: with the same mask it is also its own gradient. `rate` is a Python float."""
    return (_fused_apply_dropout if fused else _apply_dropout)(x, keep, rate)


def residual_dropout(residual, x, keep, rate, fused=False):
    """residual + apply_dropout(x, keep, rate): a sublayer's output added to its input."""
    return (_fused_residual_dropout if fused else _residual_dropout)(residual, x, keep, rate)
