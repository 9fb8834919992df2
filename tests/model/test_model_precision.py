"""Mixed precision (mixed_bfloat16) and XLA (jit_compile=True) forward and backward passes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer


@pytest.fixture
def pretrain_inputs(make_inputs):
    inputs = make_inputs(lengths=[7, 4])
    inputs["masked_lm_positions"] = np.array([[1, 2, 5], [1, 2, 0]], np.int32)
    return inputs


def _ops(graph):
    """(op type, T attribute or None) of every node in a graph and its function library."""
    graph_def = graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return {
        (n.op, tf.dtypes.as_dtype(n.attr["T"].type) if n.attr["T"].type else None) for n in nodes
    }


def test_mixed_bfloat16(tiny_config, pretrain_inputs):
    config = tiny_config(num_hidden_groups=2, inner_group_num=2)
    reference = AlbertPretrainer(AlbertModel(config, output_encoder_outputs=True))
    mixed = AlbertPretrainer(
        AlbertModel(config, output_encoder_outputs=True, dtype="mixed_bfloat16")
    )
    mixed.set_weights(reference.get_weights())
    assert {v.dtype for v in mixed.weights} == {"float32"}
    out = mixed.backbone(pretrain_inputs)
    assert {k: v.dtype for k, v in out.items()} == {
        "sequence_output": tf.bfloat16,
        "pooled_output": tf.bfloat16,
        "encoder_outputs": tf.bfloat16,
    }
    logits, ref_logits = mixed(pretrain_inputs), reference(pretrain_inputs)
    assert {k: v.dtype for k, v in logits.items()} == {
        "mlm_logits": tf.float32,
        "sop_logits": tf.float32,
    }
    np.testing.assert_allclose(
        out["sequence_output"].numpy().astype(np.float32),
        reference.backbone(pretrain_inputs)["sequence_output"].numpy(),
        atol=0.1,
    )
    np.testing.assert_allclose(
        logits["mlm_logits"].numpy(), ref_logits["mlm_logits"].numpy(), atol=0.05
    )
    # LayerNorm and softmax run in float32 even though the matmuls run in bfloat16.
    graph = tf.function(mixed).get_concrete_function(pretrain_inputs).graph
    ops = _ops(graph)
    assert ("BatchMatMulV2", tf.bfloat16) in ops or ("MatMul", tf.bfloat16) in ops
    assert {t for op, t in ops if op in ("Softmax", "Rsqrt")} == {tf.float32}
    json_config = mixed.backbone.get_config()
    assert AlbertModel.from_config(json_config).dtype_policy.name == "mixed_bfloat16"


@pytest.fixture
def global_mixed_policy():
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_global_policy(previous)


def _train_step(model, inputs, jit, repeat=1):
    """Loss and gradients of a masked-LM + SOP-like loss; jit=None runs eagerly. With repeat > 1,
    the list of every call's result of the same (compiled) function."""

    def step(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=inputs["input_word_ids"][:, :3], logits=out["mlm_logits"]
                )
            )
            loss += tf.reduce_mean(out["sop_logits"] ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    fn = step if jit is None else tf.function(step, jit_compile=jit)
    return fn(inputs) if repeat == 1 else [fn(inputs) for _ in range(repeat)]


def test_jit_compile_forward_and_backward(tiny_config, pretrain_inputs):
    # No dropout here: XLA's stateless RNG draws other masks than the CPU kernels for the same
    # seed; dropout under XLA is exercised by the mixed-precision test below.
    model = AlbertPretrainer(AlbertModel(tiny_config(num_hidden_groups=2, inner_group_num=2)))
    loss_xla, grads_xla = _train_step(model, pretrain_inputs, jit=True)
    loss, grads = _train_step(model, pretrain_inputs, jit=None)  # eager reference
    np.testing.assert_allclose(loss_xla.numpy(), loss.numpy(), rtol=1e-5)
    scale = max(float(np.abs(g).max()) for g in grads)
    for var, a, b in zip(model.trainable_variables, grads_xla, grads):
        assert np.abs(b.numpy()).max() > 0, var.path
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5 * scale, err_msg=var.path)


def test_jit_compile_under_global_mixed_bfloat16(tiny_config, pretrain_inputs, global_mixed_policy):
    config = tiny_config(
        num_hidden_groups=2, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1
    )
    model = AlbertPretrainer(AlbertModel(config))
    assert model.backbone.dtype_policy.name == "mixed_bfloat16"
    (loss, grads), (loss_2, grads_2) = _train_step(model, pretrain_inputs, jit=True, repeat=2)
    assert loss.dtype == tf.float32 and np.isfinite(loss.numpy())
    assert {g.dtype for g in grads} == {tf.float32}
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    assert all(np.abs(g.numpy()).max() > 0 for g in grads)
    # Dropout is active under XLA: the second step (same weights) draws new masks. Compared on
    # the gradients: at random init the loss is near ln(vocab) whatever the masks.
    moved = max(float(np.abs(a.numpy() - b.numpy()).max()) for a, b in zip(grads, grads_2))
    scale = max(float(np.abs(g.numpy()).max()) for g in grads)
    assert moved > 1e-2 * scale, (moved, scale, float(loss), float(loss_2))


def test_fine_tuned_model_loads_in_the_precision_asked_for(tiny_config, make_inputs, tmp_path):
    from albert_tf.convert.checkpoint import load_head_model
    from albert_tf.export.saved_model import float32_copy
    from albert_tf.models.classifier import AlbertClassifier

    trained = AlbertClassifier(AlbertModel(tiny_config(), dtype="mixed_bfloat16"), num_classes=3)
    inputs = make_inputs(lengths=[7, 4])
    trained(inputs)
    path = str(tmp_path / "model.keras")
    trained.save(path)
    reference = float32_copy(trained)(inputs).numpy()
    bf16 = trained(inputs).numpy()
    scale = np.abs(reference).max()
    assert np.abs(bf16 - reference).max() > 1e-3 * scale  # bfloat16 noise, which float32 lacks

    model = load_head_model(path)  # float32 unless asked, whatever it was trained in
    assert model.dtype_policy.name == model.backbone.dtype_policy.name == "float32"
    np.testing.assert_allclose(model(inputs).numpy(), reference, atol=1e-6 * scale)
    asked = load_head_model(str(tmp_path), dtype="mixed_bfloat16")
    assert asked.backbone.dtype_policy.name == "mixed_bfloat16"
    np.testing.assert_allclose(asked(inputs).numpy(), bf16, atol=1e-6 * scale)
    again = AlbertClassifier.from_pretrained(str(tmp_path), preprocessor=None)
    assert again.backbone.dtype_policy.name == "float32"
