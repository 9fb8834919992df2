"""The block's elementwise math: plain and XLA-fused forms agree with the formulas, the gradient
kernels equal autodiff of the formulas, bfloat16 stays close, and only training graphs use XLA
kernels."""

import math

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import elementwise
from albert_tf.models.backbone import AlbertModel

_C = math.sqrt(2 / math.pi)
FORMULAS = {
    "gelu_tanh": lambda x: 0.5 * x * (1 + tf.tanh(_C * (x + 0.044715 * x**3))),
    "gelu_erf": lambda x: 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2.0))),
    "relu": lambda x: tf.maximum(x, 0.0),
    "tanh": tf.tanh,
    "linear": lambda x: x,
}


def _layer_norm_formula(x, gamma, beta):
    mean = tf.reduce_mean(x, -1, keepdims=True)
    variance = tf.math.reduce_variance(x, -1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta


def _autodiff(formula, w, *inputs):
    """(formula(*inputs), d sum(formula * w) / d inputs)."""
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = formula(*inputs)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
    return y, tape.gradient(loss, inputs)


def _close(got, want, atol, name):
    np.testing.assert_allclose(
        tf.cast(got, tf.float32).numpy(), tf.cast(want, tf.float32).numpy(), 0, atol, err_msg=name
    )


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    shape = (3, 5, 16)
    return dict(
        x=tf.constant(rng.normal(size=shape) * 2, tf.float32),
        w=tf.constant(rng.normal(size=shape), tf.float32),
        gamma=tf.constant(rng.normal(size=16), tf.float32),
        beta=tf.constant(rng.normal(size=16), tf.float32),
        bias=tf.constant(np.where(rng.random((3, 1, 16)) < 0.3, -1e9, 0.0), tf.float32),
    )


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_activation_and_its_gradient_kernel(data, name):
    x, w = data["x"], data["w"]
    activation = elementwise.get_activation(name)
    want, (dx,) = _autodiff(FORMULAS[name], w, x)
    for fused in (False, True):
        _close(activation(x, fused=fused), want, 2e-5, f"{name} fused={fused}")
    _close(activation.gradient(x, w), dx, 2e-5, name)


def test_layer_norm_and_its_gradient_kernel(data):
    x, w, gamma, beta = data["x"], data["w"], data["gamma"], data["beta"]
    want, grads = _autodiff(_layer_norm_formula, w, x, gamma, beta)
    for fused in (False, True):
        y, mean, rstd = elementwise.normalize(x, gamma, beta, 1e-12, fused=fused)
        _close(y, want, 2e-5, f"fused={fused}")
        _close(mean, tf.reduce_mean(x, -1, keepdims=True), 1e-6, "mean")
    for got, want_grad in zip(elementwise.normalize_gradient(x, gamma, mean, rstd, w), grads):
        _close(got, want_grad, 5e-5, "layer norm gradient")


def test_attention_probs_and_its_gradient_kernel(data):
    scores, w, bias = data["x"], data["w"], data["bias"]
    want, (dscores,) = _autodiff(lambda s: tf.nn.softmax(s * 0.25 + bias, -1), w, scores)
    for fused in (False, True):
        _close(elementwise.attention_probs(scores, bias, 0.25, fused=fused), want, 2e-6, "probs")
    _close(elementwise.attention_probs_gradient(want, w, 0.25), dscores, 2e-6, "gradient")


def test_dropout_kernels_and_the_softmax_gradient_through_dropout(data):
    x, w, bias = data["x"], data["w"], data["bias"]  # x is also the attention scores
    keep = tf.constant(np.random.default_rng(1).random(x.shape) >= 0.3)
    want = np.where(keep.numpy(), x.numpy() / 0.7, 0.0)
    for fused in (False, True):
        _close(elementwise.apply_dropout(x, keep, 0.3, fused=fused), want, 1e-6, f"fused={fused}")
        _close(elementwise.residual_dropout(w, x, keep, 0.3, fused), w + want, 1e-6, "residual")
    # The gradient of softmax then dropout, given the dropped probabilities' gradient.
    _, (dscores,) = _autodiff(
        lambda s: elementwise.apply_dropout(tf.nn.softmax(s * 0.25 + bias, -1), keep, 0.3),
        w,
        x,
    )
    probs = elementwise.attention_probs(x, bias, 0.25)
    got = elementwise.attention_probs_gradient(probs, w, 0.25, keep, 0.3)
    _close(got, dscores, 2e-6, "gradient through dropout")
    assert np.abs(got - elementwise.attention_probs_gradient(probs, w, 0.25)).max() > 0.01


def test_bfloat16_kernels_stay_close_to_float32(data):
    # bfloat16 in, bfloat16 out, float32 inside: one rounding of the result (8-bit mantissa).
    x32 = tf.cast(tf.cast(data["x"], tf.bfloat16), tf.float32)  # values representable in both
    w32 = tf.cast(tf.cast(data["w"], tf.bfloat16), tf.float32)
    x16, w16 = tf.cast(x32, tf.bfloat16), tf.cast(w32, tf.bfloat16)
    gamma, beta, bias = data["gamma"], data["beta"], data["bias"]

    def check(got, want, name):
        assert got.dtype == tf.bfloat16, name
        _close(got, want, float(tf.reduce_max(tf.abs(want))) / 128, name)

    for name in ("gelu_tanh", "gelu_erf"):
        activation = elementwise.get_activation(name)
        check(activation(x16, fused=True), activation(x32), name)
        check(activation.gradient(x16, w16), activation.gradient(x32, w32), name)
    y16, mean16, rstd16 = elementwise.normalize(x16, gamma, beta, 1e-12, fused=True)
    y32, mean32, rstd32 = elementwise.normalize(x32, gamma, beta, 1e-12)
    check(y16, y32, "layer norm")
    check(
        elementwise.normalize_gradient(x16, gamma, mean16, rstd16, w16)[0],
        elementwise.normalize_gradient(x32, gamma, mean32, rstd32, w32)[0],
        "layer norm gradient",
    )
    p16 = elementwise.attention_probs(x16, bias, 0.25, fused=True)
    p32 = elementwise.attention_probs(x32, bias, 0.25)
    check(p16, p32, "probs")
    check(
        elementwise.attention_probs_gradient(p16, w16, 0.25),
        elementwise.attention_probs_gradient(p32, w32, 0.25),
        "probs gradient",
    )


def _xla_functions(concrete):
    library = concrete.graph.as_graph_def().library.function
    return sum(f.attr["_XlaMustCompile"].b for f in library)


def test_only_training_graphs_use_xla_kernels(tiny_config, make_inputs):
    model = AlbertModel(tiny_config())
    inputs = make_inputs(lengths=[4, 3])
    model(inputs)
    specs = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
    graphs = {}
    for training in (False, True):
        call = tf.function(lambda x, training=training: model(x, training=training))
        graphs[training] = _xla_functions(call.get_concrete_function(specs))
    assert graphs[False] == 0
    assert graphs[True] >= 3  # GELU, LayerNorm, softmax (forward kernels at least)


def test_gradient_kernels_accept_any_rank_and_width():
    # The kernels retrace with reduce_retracing: after calls of several shapes their traced
    # shapes are generalized (unknown rank and sizes), which must still work.
    for shape in ([2, 3, 4], [5, 8], [2, 2, 2, 6], [3, 7]):
        x = tf.random.normal(shape)
        gamma = tf.random.normal(shape[-1:])
        _, mean, rstd = elementwise.normalize(x, gamma, gamma, 1e-12, fused=True)
        dx, dgamma, dbeta = elementwise.normalize_gradient(x, gamma, mean, rstd, tf.ones_like(x))
        assert dx.shape == shape and dgamma.shape == dbeta.shape == shape[-1:]
        _close(dbeta, tf.fill(shape[-1:], float(np.prod(shape[:-1]))), 1e-4, "dbeta")
        probs = elementwise.attention_probs(x, tf.zeros(shape[-1:]), 0.5, fused=True)
        assert elementwise.attention_probs_gradient(probs, x, 0.5).shape == shape
        assert elementwise.gelu_erf.gradient(x, x).shape == shape
