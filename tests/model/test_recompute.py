"""recompute=True (gradient checkpointing of the shared block): same gradients, less kept."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.backbone import AlbertModel

DROPOUT = dict(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)


def _models(config, dtype=None, seed=3):
    """The same weights and dropout seed without and with recompute."""
    models = []
    for recompute in (False, True):
        keras.utils.set_random_seed(seed)
        models.append(AlbertModel(config, recompute=recompute, dtype=dtype))
    models[1].set_weights(models[0].get_weights())
    return models


def _step(model, jit_compile=False):
    """A tf.function returning (loss, gradients) of a loss on both outputs, with dropout."""

    @tf.function(jit_compile=jit_compile)
    def step(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            sequence = tf.cast(out["sequence_output"], tf.float32)
            loss = tf.reduce_sum(tf.square(sequence)) + tf.reduce_sum(
                tf.cast(out["pooled_output"], tf.float32)
            )
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    return step


def _assert_same_gradients(plain, recomputed, inputs, atol, jit_compile=False):
    (loss_p, grads_p), (loss_r, grads_r) = (
        _step(m, jit_compile)(inputs) for m in (plain, recomputed)
    )
    np.testing.assert_allclose(float(loss_r), float(loss_p), rtol=atol)
    scale = max(1.0, max(float(np.abs(g).max()) for g in grads_p))
    for var, gp, gr in zip(plain.trainable_variables, grads_p, grads_r):
        assert np.abs(gp.numpy()).max() > 0, var.path
        np.testing.assert_allclose(
            gr.numpy(), gp.numpy(), rtol=0, atol=atol * scale, err_msg=var.path
        )


@pytest.mark.parametrize("groups,inner", [(1, 1), (2, 2)])
def test_same_gradients_with_dropout(tiny_config, make_inputs, randomize, groups, inner):
    config = tiny_config(num_hidden_groups=groups, inner_group_num=inner, **DROPOUT)
    plain, recomputed = _models(config)
    randomize(plain)
    recomputed.set_weights(plain.get_weights())
    _assert_same_gradients(plain, recomputed, make_inputs(lengths=[7, 5]), atol=1e-6)


def test_same_gradients_under_xla(tiny_config, make_inputs):
    plain, recomputed = _models(tiny_config(**DROPOUT))
    _assert_same_gradients(plain, recomputed, make_inputs(), atol=1e-6, jit_compile=True)


def test_same_gradients_under_mixed_bfloat16(tiny_config, make_inputs):
    # Both run the same bfloat16 ops in the same order: equal up to bfloat16 rounding of
    # reductions that may differ in order between the two backward graphs.
    plain, recomputed = _models(tiny_config(**DROPOUT), dtype="mixed_bfloat16")
    _assert_same_gradients(plain, recomputed, make_inputs(), atol=1e-2)


def _forward_loop(model, inputs):
    """The encoder's forward While op in a gradient-taking graph."""
    graph = _step(model).get_concrete_function(inputs).graph
    loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    forward = [op for op in loops if "gradient" not in op.name]
    assert len(forward) == 1, [op.name for op in loops]
    return forward[0]


def test_recompute_keeps_fewer_tensors(tiny_config, make_inputs):
    plain, recomputed = _models(tiny_config(**DROPOUT))
    inputs = make_inputs()
    # Outputs of the forward loop: its loop state plus one accumulator per tensor the backward
    # pass keeps from each iteration.
    kept_plain = len(_forward_loop(plain, inputs).outputs)
    kept_recomputed = len(_forward_loop(recomputed, inputs).outputs)
    assert kept_recomputed + 10 < kept_plain, (kept_recomputed, kept_plain)


def test_recompute_runs_one_backward_iteration_at_a_time(tiny_config, make_inputs):
    plain, recomputed = _models(tiny_config())
    inputs = make_inputs()
    # Else the backward loop would run several recomputations at once and hold them all; the
    # plain loop overlaps two iterations' weight gradients, as an unrolled graph does.
    assert _forward_loop(recomputed, inputs).get_attr("parallel_iterations") == 1
    assert _forward_loop(plain, inputs).get_attr("parallel_iterations") == 2


def test_recompute_keeps_the_input_and_the_dropout_masks_packed(tiny_config, make_inputs):
    (recomputed,) = _models(tiny_config(**DROPOUT))[1:]
    forward = _forward_loop(recomputed, make_inputs())
    kept = [
        t.op.get_attr("element_dtype") for t in forward.inputs if t.op.type == "EmptyTensorList"
    ]
    # The block's input and the three dropout sites' masks, 8 to a byte.
    assert sorted(dtype.name for dtype in kept) == ["float32", "uint8", "uint8", "uint8"], kept


def test_recompute_is_in_the_config(tiny_config):
    model = AlbertModel(tiny_config(), recompute=True)
    assert model.encoder.recompute
    assert AlbertModel.from_config(model.get_config()).encoder.recompute


def test_finetuning_setting_reaches_the_backbone(tmp_path):
    from albert_tf.finetune.params import FinetuneParams
    from albert_tf.finetune.runner import _backbone

    for recompute in (False, True):
        params = FinetuneParams(output_dir=str(tmp_path), preset="albert_tiny", recompute=recompute)
        assert _backbone(params, vocab_size=50).encoder.recompute is recompute
