"""The encoder loop: NumPy reference forward pass, loop == unroll, padding, dropout, graph size."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import block
from albert_tf.models.backbone import AlbertModel

# ------------------------------------------------------------------ independent NumPy reference

_erf = np.vectorize(math.erf)


def _act(name, x):
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name == "gelu_erf":
        return 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    raise ValueError(name)


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_forward(model, inputs):
    """The original modeling.py forward pass in float64 NumPy, reading the model's variables.

    Returns (every block's output, pooled output). Group choice follows the original code:
    group = int(layer / L * number_of_groups), separately for the attention and FFN stacks.
    """
    c = model.config
    w = {v.path: np.asarray(v.numpy(), np.float64) for v in model.weights}
    ids, mask, types = (inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids"))
    seq = ids.shape[1]
    x = (
        w["albert/embeddings/word_embeddings"][ids]
        + w["albert/embeddings/token_type_embeddings"][types]
        + w["albert/embeddings/position_embeddings"][:seq][None]
    )
    x = _layer_norm(
        x,
        w["albert/embeddings/layer_norm/gamma"],
        w["albert/embeddings/layer_norm/beta"],
        c.layer_norm_eps,
    )
    if c.embedding_size != c.hidden_size:
        x = (
            x @ w["albert/embeddings/embedding_projection/kernel"]
            + w["albert/embeddings/embedding_projection/bias"]
        )
    adder = (1.0 - mask[:, None, None, :]) * -10000.0
    n, d = c.num_attention_heads, c.hidden_size // c.num_attention_heads

    def att(name, g, k):
        return w[f"albert/encoder/attention/{name}"][g, k]

    def ffn(name, g, k):
        return w[f"albert/encoder/ffn/{name}"][g, k]

    def heads(t):
        return t.reshape(t.shape[0], seq, n, d).transpose(0, 2, 1, 3)

    n_att = w["albert/encoder/attention/query_kernel"].shape[0]
    n_ffn = w["albert/encoder/ffn/intermediate_kernel"].shape[0]
    L = c.num_hidden_layers
    outputs = []
    for layer in range(L):
        ga, gf = int(layer / L * n_att), int(layer / L * n_ffn)
        for k in range(c.inner_group_num):
            q = heads(x @ att("query_kernel", ga, k) + att("query_bias", ga, k))
            kk = heads(x @ att("key_kernel", ga, k) + att("key_bias", ga, k))
            v = heads(x @ att("value_kernel", ga, k) + att("value_bias", ga, k))
            probs = _softmax(q @ kk.transpose(0, 1, 3, 2) / math.sqrt(d) + adder)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
            a = ctx @ att("output_kernel", ga, k) + att("output_bias", ga, k)
            x = _layer_norm(
                x + a,
                att("layer_norm_gamma", ga, k),
                att("layer_norm_beta", ga, k),
                c.layer_norm_eps,
            )
            h = _act(
                c.hidden_act,
                x @ ffn("intermediate_kernel", gf, k) + ffn("intermediate_bias", gf, k),
            )
            f = h @ ffn("output_kernel", gf, k) + ffn("output_bias", gf, k)
            x = _layer_norm(
                x + f,
                ffn("layer_norm_gamma", gf, k),
                ffn("layer_norm_beta", gf, k),
                c.layer_norm_eps,
            )
            outputs.append(x)
    pooled = np.tanh(x[:, 0] @ w["albert/pooler/kernel"] + w["albert/pooler/bias"])
    return outputs, pooled


@pytest.mark.parametrize("sharing,activation", [("all", "gelu_erf"), ("attention", "gelu_tanh")])
def test_matches_numpy_reference(tiny_config, make_inputs, randomize, sharing, activation):
    # 2 groups x 2 inner sublayers over 4 layers: layers 0-1 use group 0, layers 2-3 group 1.
    config = tiny_config(
        num_hidden_groups=2, inner_group_num=2, sharing=sharing, hidden_act=activation
    )
    model = randomize(AlbertModel(config, output_encoder_outputs=True))
    inputs = make_inputs(batch=3, seq=6, lengths=[6, 4, 2])
    out = model(inputs)
    ref_blocks, ref_pooled = reference_forward(model, inputs)
    assert out["encoder_outputs"].shape == (8, 3, 6, 16)
    np.testing.assert_allclose(out["encoder_outputs"].numpy(), np.stack(ref_blocks), atol=1e-5)
    np.testing.assert_allclose(out["sequence_output"].numpy(), ref_blocks[-1], atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"].numpy(), ref_pooled, atol=1e-5)
    # The activation matters at this tolerance: the other GELU is measurably different.
    other = "gelu_tanh" if activation == "gelu_erf" else "gelu_erf"
    model.config.hidden_act = other
    other_blocks, _ = reference_forward(model, inputs)
    assert np.abs(other_blocks[-1] - ref_blocks[-1]).max() > 1e-4


# ------------------------------------------------------------------ while_loop vs unrolled


def assert_close_to_scale(actual, desired, tol, name="", scale=None):
    """|actual - desired| <= tol * max(1, scale), scale defaulting to max|desired|: the two
    graphs sum the same float32 terms in different orders (rounding ~1e-7 relative per op)."""
    scale = max(1.0, float(np.abs(desired).max()) if scale is None else scale)
    np.testing.assert_allclose(actual, desired, rtol=0, atol=tol * scale, err_msg=name)


def _loss_and_grads(model, inputs, training=False, traced=True):
    """Outputs and gradients of a fixed linear loss; traced=True runs them as a tf.function
    (the encoder then is a real While op), else eagerly (an unrolled model needs no tracing).
    Returns ((outputs, gradients), graph or None)."""
    weights = tf.constant(np.random.default_rng(1).standard_normal([2, 7, 16]), tf.float32)

    def run(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=training)
            loss = tf.reduce_sum(out["sequence_output"] * weights) + tf.reduce_sum(
                out["pooled_output"]
            )
        grads = tape.gradient(loss, model.trainable_variables)
        return out, [tf.convert_to_tensor(g) for g in grads]

    if not traced:
        return run(inputs), None
    function = tf.function(run)
    return function(inputs), function.get_concrete_function(inputs).graph


@pytest.mark.parametrize(
    "sharing,groups,inner",
    [("all", 1, 1), ("attention", 1, 1), ("ffn", 1, 1), ("none", 1, 1), ("all", 2, 2)],
)
def test_loop_equals_unroll(tiny_config, make_inputs, randomize, sharing, groups, inner):
    config = tiny_config(sharing=sharing, num_hidden_groups=groups, inner_group_num=inner)
    loop = randomize(AlbertModel(config, output_encoder_outputs=True))
    unrolled = AlbertModel(config, output_encoder_outputs=True, unroll=True)
    unrolled.set_weights(loop.get_weights())
    inputs = make_inputs(lengths=[7, 5])
    (out_l, grads_l), graph_l = _loss_and_grads(loop, inputs)
    (out_u, grads_u), _ = _loss_and_grads(unrolled, inputs, traced=False)
    for key in out_l:
        assert_close_to_scale(out_l[key].numpy(), out_u[key].numpy(), 1e-6, key)
    scale = max(float(np.abs(g).max()) for g in grads_u)  # relative to the largest gradient
    for var, gl, gu in zip(loop.trainable_variables, grads_l, grads_u):
        assert np.abs(gl.numpy()).max() > 0, var.path  # every variable gets a gradient
        assert_close_to_scale(gl.numpy(), gu.numpy(), 1e-6, var.path, scale)
    assert {op.type for op in graph_l.get_operations()} & {"While", "StatelessWhile"}


def test_an_unknown_serving_product_is_refused():
    with pytest.raises(ValueError, match=r"^serving_product='weights': expected one of \(None, "):
        block.BlockSettings(num_heads=2, serving_product="weights")


@pytest.mark.parametrize("product", ["weights_first", "activations_first"])
@pytest.mark.parametrize("sharing,groups,inner", [("all", 1, 1), ("none", 1, 1), ("all", 2, 2)])
def test_serving_layout_equals_training_layout(
    tiny_config, make_inputs, randomize, monkeypatch, sharing, groups, inner, product
):
    # inputs of at most SERVING_WEIGHTS_FIRST_TOKENS tokens multiply weights first, larger ones
    # activations first: the threshold puts these inputs (14 tokens) on either side
    threshold = 14 if product == "weights_first" else 13
    monkeypatch.setattr(block, "SERVING_WEIGHTS_FIRST_TOKENS", threshold)
    config = tiny_config(sharing=sharing, num_hidden_groups=groups, inner_group_num=inner)
    trained = randomize(AlbertModel(config, output_encoder_outputs=True))
    served = AlbertModel(config, output_encoder_outputs=True, serving_layout=True)
    kernel = served.encoder.attention.qkv_kernel
    assert tuple(kernel.shape[2:]) == (3 * config.hidden_size, config.hidden_size)
    served.embeddings.set_weights(trained.embeddings.get_weights())
    served.pooler.set_weights(trained.pooler.get_weights())
    served.encoder.load_training_layout(trained.encoder)
    inputs = make_inputs(lengths=[7, 5])
    expected = trained(inputs, training=False)
    actual = tf.function(lambda x: served(x, training=False))(inputs)
    for key in expected:
        assert_close_to_scale(expected[key].numpy(), actual[key].numpy(), 1e-6, key)
    with pytest.raises(ValueError, match="serving layout only infers"):
        served(inputs, training=True)
    with pytest.raises(ValueError, match="training-layout encoder into a serving-layout"):
        trained.encoder.load_training_layout(served.encoder)


def _matmul_count(graph):
    graph_def = graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return sum(node.op == "MatMul" for node in nodes)


@pytest.mark.parametrize("intermediate_size", [24, 25])
def test_served_products_run_in_parts(
    tiny_config, make_inputs, randomize, monkeypatch, intermediate_size
):
    # each served product is SERVING_MATMUL_PARTS MatMuls on slices of the kernel's output axis
    # (an output axis that does not divide, here the FFN's intermediate 25, stays one MatMul)
    config = tiny_config(intermediate_size=intermediate_size)
    trained = randomize(AlbertModel(config))
    served = AlbertModel(config, serving_layout=True)
    served.embeddings.set_weights(trained.embeddings.get_weights())
    served.pooler.set_weights(trained.pooler.get_weights())
    served.encoder.load_training_layout(trained.encoder)
    inputs = make_inputs(lengths=[7, 5])
    outputs, matmuls = {}, {}
    for parts in (1, 2):
        monkeypatch.setattr(block, "SERVING_MATMUL_PARTS", parts)
        fn = tf.function(lambda x: served(x, training=False)["sequence_output"])
        matmuls[parts] = _matmul_count(fn.get_concrete_function(inputs).graph)
        outputs[parts] = fn(inputs).numpy()
    assert_close_to_scale(outputs[1], outputs[2], 1e-6)
    assert_close_to_scale(trained(inputs)["sequence_output"].numpy(), outputs[2], 1e-6)
    split = 4 if intermediate_size % 2 == 0 else 3  # of the block's 4 products
    # one more MatMul per split product, in each of the two products' loops (weights first and
    # activations first)
    assert matmuls[2] == matmuls[1] + 2 * split


def test_graph_size_does_not_grow_with_depth(tiny_config, make_inputs):
    inputs = make_inputs()

    def graph_size(layers, unroll=False):
        model = AlbertModel(tiny_config(num_hidden_layers=layers), unroll=unroll)
        fn = tf.function(lambda x: model(x)["sequence_output"])
        graph = fn.get_concrete_function(inputs).graph.as_graph_def()
        return len(graph.node) + sum(len(f.node_def) for f in graph.library.function)

    assert graph_size(1) == graph_size(8)
    assert graph_size(2, unroll=True) > graph_size(1, unroll=True) + 50  # one block = many ops


def test_dropout_is_stateless_and_identical_in_loop_and_unroll(tiny_config, make_inputs):
    config = tiny_config(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)
    keras.utils.set_random_seed(7)
    loop = AlbertModel(config)
    keras.utils.set_random_seed(7)
    unrolled = AlbertModel(config, unroll=True)
    unrolled.set_weights(loop.get_weights())
    inputs = make_inputs()
    (out_l, grads_l), _ = _loss_and_grads(loop, inputs, training=True)
    (out_u, grads_u), _ = _loss_and_grads(unrolled, inputs, training=True, traced=False)
    assert_close_to_scale(out_l["sequence_output"].numpy(), out_u["sequence_output"].numpy(), 1e-6)
    scale = max(float(np.abs(g).max()) for g in grads_u)
    for gl, gu in zip(grads_l, grads_u):
        assert_close_to_scale(gl.numpy(), gu.numpy(), 1e-6, scale=scale)
    inference = loop(inputs, training=False)["sequence_output"].numpy()
    first = loop(inputs, training=True)["sequence_output"].numpy()
    second = loop(inputs, training=True)["sequence_output"].numpy()
    assert np.abs(first - inference).max() > 1e-3
    assert np.abs(first - second).max() > 1e-3  # a new mask every step
    np.testing.assert_array_equal(inference, loop(inputs)["sequence_output"].numpy())


@pytest.mark.parametrize("unroll", [False, True])
def test_padding_content_does_not_change_valid_positions(
    tiny_config, make_inputs, randomize, unroll
):
    model = randomize(AlbertModel(tiny_config(num_hidden_groups=2), unroll=unroll))
    inputs = make_inputs(lengths=[7, 4])
    noisy = {k: v.copy() for k, v in inputs.items()}
    noisy["input_word_ids"][1, 4:] = [9, 17, 33]
    noisy["input_type_ids"][1, 4:] = [1, 0, 1]
    a, b = model(inputs), model(noisy)
    np.testing.assert_allclose(
        a["sequence_output"][:, :4].numpy(), b["sequence_output"][:, :4].numpy(), atol=1e-6
    )
    np.testing.assert_allclose(
        a["sequence_output"][0].numpy(), b["sequence_output"][0].numpy(), atol=1e-6
    )
    np.testing.assert_allclose(a["pooled_output"].numpy(), b["pooled_output"].numpy(), atol=1e-6)
    # ... whereas a valid token does change them.
    noisy["input_word_ids"][1, 2] = 11 if inputs["input_word_ids"][1, 2] != 11 else 12
    c = model(noisy)
    assert (
        np.abs(c["sequence_output"][1, :4].numpy() - a["sequence_output"][1, :4].numpy()).max()
        > 1e-3
    )


def test_unknown_batch_and_sequence_length(tiny_config, make_inputs):
    model = AlbertModel(
        tiny_config(num_hidden_groups=2, inner_group_num=2), output_encoder_outputs=True
    )
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in make_inputs()}
    fn = tf.function(lambda x: model(x), input_signature=[spec])
    concrete = fn.get_concrete_function()
    assert concrete.structured_outputs["sequence_output"].shape.as_list() == [None, None, 16]
    assert concrete.structured_outputs["encoder_outputs"].shape.as_list() == [8, None, None, 16]
    for batch, seq in [(1, 3), (3, 9)]:
        inputs = make_inputs(batch=batch, seq=seq)
        traced, eager = fn(inputs), model(inputs)
        np.testing.assert_allclose(
            traced["sequence_output"].numpy(), eager["sequence_output"].numpy(), atol=1e-6
        )
        np.testing.assert_allclose(
            traced["encoder_outputs"][-1].numpy(), traced["sequence_output"].numpy()
        )
