"""The block's written-out gradient (training graphs) equals TF's autodiff of the same block,
with and without XLA, dropout and padding, and keeps fewer tensors per loop iteration."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import block

H, INTERMEDIATE, HEADS = 16, 24, 2


def _weights(rng, dtype):
    def t(*shape, scale=0.3):
        return tf.constant(rng.normal(size=shape) * scale, dtype)

    attention = {f"{n}_kernel": t(H, H) for n in ("query", "key", "value", "output")}
    attention.update({f"{n}_bias": t(H) for n in ("query", "key", "value", "output")})
    ffn = {"intermediate_kernel": t(H, INTERMEDIATE), "intermediate_bias": t(INTERMEDIATE)}
    ffn.update({"output_kernel": t(INTERMEDIATE, H), "output_bias": t(H)})
    for weights in (attention, ffn):  # LayerNorm parameters stay float32
        weights["layer_norm_gamma"] = tf.constant(1 + rng.normal(size=H) * 0.3, tf.float32)
        weights["layer_norm_beta"] = tf.constant(rng.normal(size=H) * 0.3, tf.float32)
    return attention, ffn


def _inputs(dtype=tf.float32):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(2, 7, H)), dtype)
    bias = block.attention_bias(tf.constant([[1] * 7, [1] * 4 + [0] * 3]))
    attention, ffn = _weights(rng, dtype)
    w = tf.constant(rng.normal(size=(2, 7, H)), tf.float32)
    return x, bias, attention, ffn, w


def _value_and_gradients(fused, activation, dropout, jit_compile=False, dtype=tf.float32):
    x, bias, attention, ffn, w = _inputs(dtype)
    settings = block.BlockSettings(
        num_heads=HEADS,
        activation=activation,
        attention_dropout=dropout,
        hidden_dropout=dropout,
        fused=fused,
    )

    @tf.function(jit_compile=jit_compile)
    def run(x, attention, ffn):
        with tf.GradientTape() as tape:
            tape.watch((x, attention, ffn))
            masks = block.block_masks(x, settings, tf.constant([4, 2])).at(0)
            y = block.transformer_block(
                x, bias, attention, ffn, settings, training=True, masks=masks
            )
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * w)
        return y, tape.gradient(loss, (x, attention, ffn))

    y, grads = run(x, attention, ffn)
    return y, tf.nest.flatten(grads), tf.nest.flatten((x, attention, ffn))


@pytest.mark.parametrize(
    "activation,dropout,jit_compile",
    [
        ("gelu_tanh", 0.0, False),
        ("gelu_tanh", 0.3, False),
        ("gelu_erf", 0.3, True),
        ("relu", 0.0, True),
        ("tanh", 0.3, False),
        ("linear", 0.0, False),
    ],
)
def test_written_gradient_equals_autodiff(activation, dropout, jit_compile):
    y, grads, inputs = _value_and_gradients(True, activation, dropout, jit_compile)
    # The reference under the same compiler: XLA draws other dropout masks from a seed.
    y_ref, grads_ref, _ = _value_and_gradients(False, activation, dropout, jit_compile)
    np.testing.assert_allclose(y.numpy(), y_ref.numpy(), rtol=0, atol=1e-5)
    assert len(grads) == len(grads_ref) == 17  # x + 10 attention + 6 FFN weights
    for got, want, value in zip(grads, grads_ref, inputs):
        assert got.shape == value.shape and got.dtype == value.dtype
        assert np.abs(want.numpy()).max() > 0
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=2e-5)


def test_written_gradient_under_bfloat16_stays_close_to_autodiff():
    y, grads, inputs = _value_and_gradients(True, "gelu_tanh", 0.1, dtype=tf.bfloat16)
    y_ref, grads_ref, _ = _value_and_gradients(False, "gelu_tanh", 0.1, dtype=tf.bfloat16)
    _, grads32, _ = _value_and_gradients(False, "gelu_tanh", 0.1)
    assert y.dtype == tf.bfloat16
    for got, want, want32, value in zip(grads, grads_ref, grads32, inputs):
        assert got.dtype == value.dtype
        # As close to float32 as bfloat16 autodiff is (both round the same ops' results).
        error = np.abs(tf.cast(got, tf.float32).numpy() - want32.numpy()).max()
        error_ref = np.abs(tf.cast(want, tf.float32).numpy() - want32.numpy()).max()
        scale = np.abs(want32.numpy()).max()
        assert error <= max(2 * error_ref, scale / 64), (error, error_ref, scale)


def _kept_per_iteration(fused):
    """Accumulators of a 3-iteration tf.while_loop over the block in a gradient-taking graph."""
    x, bias, attention, ffn, w = _inputs()
    attention = block.fuse_query_key_value(attention)
    settings = block.BlockSettings(num_heads=HEADS, hidden_dropout=0.1, fused=fused)

    @tf.function
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            masks = block.block_masks(x, settings, tf.constant([1, 2]))

            def body(i, h):
                return i + 1, block.transformer_block(
                    h, bias, attention, ffn, settings, training=True, masks=masks.at(i)
                )

            _, y = tf.while_loop(lambda i, h: i < 3, body, (0, x), maximum_iterations=3)
            loss = tf.reduce_sum(y * w)
        return tape.gradient(loss, x)

    graph = run.get_concrete_function(x).graph
    loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    (forward,) = [op for op in loops if "gradient" not in op.name]
    # while_v2 adds one loop variable per kept tensor, an EmptyTensorList that each
    # iteration pushes to.
    return sum(t.op.type == "EmptyTensorList" for t in forward.inputs)


def test_loop_keeps_only_what_the_written_gradient_needs():
    written, autodiff = _kept_per_iteration(True), _kept_per_iteration(False)
    # Kept: h, q, k, v, the probabilities, the context, both LayerNorm inputs with their mean
    # and rstd, the pre-activation (13), and the masks of the two hidden dropout sites.
    assert written == 13 + 2, written
    assert written < autodiff, (written, autodiff)
