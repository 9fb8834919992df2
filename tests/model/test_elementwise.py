"""The block's elementwise math: written-out gradients (plain and XLA-fused) equal autodiff of
the formulas; bfloat16 stays close; only training graphs use XLA kernels."""

import math

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import elementwise
from albert_tf.models.backbone import AlbertModel

_C = math.sqrt(2 / math.pi)


def _cases(gamma, beta, bias):
    """(name, function under test taking fused=..., the plain formula) triples."""
    return [
        (
            "gelu_tanh",
            elementwise.gelu_tanh,
            lambda x: 0.5 * x * (1 + tf.tanh(_C * (x + 0.044715 * x**3))),
        ),
        (
            "gelu_erf",
            elementwise.gelu_erf,
            lambda x: 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2.0))),
        ),
        (
            "layer_norm",
            lambda x, fused: elementwise.layer_norm(x, gamma, beta, 1e-12, fused=fused),
            lambda x: (
                (x - tf.reduce_mean(x, -1, keepdims=True))
                * tf.math.rsqrt(tf.math.reduce_variance(x, -1, keepdims=True) + 1e-12)
                * gamma
                + beta
            ),
        ),
        (
            "attention_probs",
            lambda x, fused: elementwise.attention_probs(x, bias, 0.25, fused=fused),
            lambda x: tf.nn.softmax(x * 0.25 + bias, -1),
        ),
    ]


def _values_and_gradients(f, x, w, watched):
    with tf.GradientTape() as tape:
        tape.watch(watched)
        y = f(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
    return y, tape.gradient(loss, watched)


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_written_out_gradients_match_autodiff(fused):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(3, 5, 16)) * 2, tf.float32)
    w = tf.constant(rng.normal(size=(3, 5, 16)), tf.float32)
    gamma = tf.constant(rng.normal(size=16), tf.float32)
    beta = tf.constant(rng.normal(size=16), tf.float32)
    bias = tf.constant(np.where(rng.random((3, 1, 16)) < 0.3, -1e9, 0.0), tf.float32)
    for name, written, formula in _cases(gamma, beta, bias):
        y, grads = _values_and_gradients(lambda x: written(x, fused=fused), x, w, [x, gamma, beta])
        y_ref, grads_ref = _values_and_gradients(formula, x, w, [x, gamma, beta])
        np.testing.assert_allclose(y.numpy(), y_ref.numpy(), rtol=0, atol=2e-5, err_msg=name)
        for a, b in zip(grads, grads_ref):
            if b is None:
                assert a is None or not np.any(a.numpy()), name
            else:
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=2e-5, err_msg=name)


def test_fused_bfloat16_stays_close_to_float32():
    # bfloat16 in, bfloat16 out, float32 inside: one rounding of the result (8-bit mantissa).
    rng = np.random.default_rng(1)
    x32 = tf.constant(rng.normal(size=(4, 8, 32)), tf.float32)
    w = tf.constant(rng.normal(size=(4, 8, 32)), tf.float32)
    x16 = tf.cast(x32, tf.bfloat16)
    gamma, beta = tf.ones([32]), tf.zeros([32])
    bias = tf.zeros([4, 1, 32])
    x_ref = tf.cast(x16, tf.float32)  # the same values in float32
    for name, written, _ in _cases(gamma, beta, bias):
        y16, (g16,) = _values_and_gradients(lambda x: written(x, fused=True), x16, w, [x16])
        y32, (g32,) = _values_and_gradients(lambda x: written(x, fused=False), x_ref, w, [x_ref])
        assert y16.dtype == tf.bfloat16 and g16.dtype == tf.bfloat16, name
        for got, want in ((y16, y32), (g16, g32)):
            scale = float(tf.reduce_max(tf.abs(want)))
            np.testing.assert_allclose(
                tf.cast(got, tf.float32).numpy(),
                want.numpy(),
                rtol=0,
                atol=scale / 128,
                err_msg=name,
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
