"""LAMB / AdamW against an independent NumPy transcription of the original update, and the
schedule."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.optim import (
    AdamW,
    AdamWeightDecay,
    Lamb,
    WarmupPolynomialDecay,
    clip_by_global_norm,
    create_optimizer,
    global_norm,
)

EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def _excluded(name):
    import re

    return any(re.search(p, name) for p in EXCLUDE)


def numpy_original(
    params,
    grads_per_step,
    lr,
    layer_adaptation,
    wd=0.01,
    b1=0.9,
    b2=0.999,
    eps=1e-6,
    stacked=None,
    bias_correction=False,
):
    """The original lamb_optimizer.py / AdamWeightDecayOptimizer in float64 NumPy; with
    `bias_correction`, torch.optim.AdamW's update (decay lr * wd * w from the old weights, then
    lr * m_hat / (sqrt(v_hat) + eps))."""
    params = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v_ = {k: np.zeros_like(v) for k, v in params.items()}
    stacked = stacked or {}
    for t, grads in enumerate(grads_per_step, start=1):
        for name, g in grads.items():
            g = g.astype(np.float64)
            m[name] = b1 * m[name] + (1 - b1) * g
            v_[name] = b2 * v_[name] + (1 - b2) * g * g
            if bias_correction:
                m_hat, v_hat = m[name] / (1 - b1**t), v_[name] / (1 - b2**t)
            else:
                m_hat, v_hat = m[name], v_[name]
            update = m_hat / (np.sqrt(v_hat) + eps)
            if not _excluded(name):
                update = update + wd * params[name]
            if layer_adaptation and not _excluded(name):
                w = params[name]
                if name in stacked:  # the original's separate per-group variables
                    ratio = np.ones_like(w)
                    for i in range(w.shape[0]):
                        wn, un = np.linalg.norm(w[i]), np.linalg.norm(update[i])
                        ratio[i] = wn / un if wn > 0 and un > 0 else 1.0
                else:
                    wn, un = np.linalg.norm(w), np.linalg.norm(update)
                    ratio = wn / un if wn > 0 and un > 0 else 1.0
                update = ratio * update
            params[name] = params[name] - lr * update
    return params


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    params = {
        "dense/kernel": rng.normal(size=(4, 3)).astype(np.float32),
        "dense/bias": rng.normal(size=(3,)).astype(np.float32),
        "LayerNorm/gamma": (1 + 0.1 * rng.normal(size=(3,))).astype(np.float32),
        "zero_init/kernel": np.zeros((3, 2), np.float32),  # ||w|| = 0 -> ratio 1
        "stacked/kernel": rng.normal(size=(2, 3, 3)).astype(np.float32),
    }
    steps = []
    for step in range(4):
        grads = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in params.items()}
        if step == 1:
            grads["dense/kernel"][:] = 0.0  # zero gradient on a variable with moments
        steps.append(grads)
    return params, steps


@pytest.mark.parametrize("cls,adapt", [(Lamb, True), (AdamWeightDecay, False), (AdamW, False)])
def test_matches_numpy_original(cls, adapt):
    params, steps = _problem()
    variables = {k: keras.Variable(v, name=k.replace("/", "_")) for k, v in params.items()}
    lr = 0.01
    kwargs = dict(stacked_axes={"stacked": 1}) if cls is Lamb else {}
    # Paths are "<variable name>", so the exclusion must match the same strings as the reference.
    opt = cls(
        learning_rate=lr, exclude_from_weight_decay=("LayerNorm", "layer_norm", "bias"), **kwargs
    )
    names = list(params)
    var_list = [variables[n] for n in names]
    for grads in steps:
        opt.apply([tf.constant(grads[n]) for n in names], var_list)
    expected = numpy_original(
        params,
        steps,
        lr,
        adapt,
        stacked={"stacked/kernel"} if adapt else None,
        bias_correction=cls is AdamW,
    )
    for n in names:
        np.testing.assert_allclose(
            variables[n].numpy(), expected[n], atol=1e-6, rtol=1e-6, err_msg=n
        )
    # The excluded variable really skipped decay and adaptation; the zero-norm one still moved.
    assert not opt.uses_weight_decay(variables["LayerNorm/gamma"])
    assert opt.uses_weight_decay(variables["dense/kernel"])
    assert np.abs(variables["zero_init/kernel"].numpy()).max() > 0


def test_default_exclusions_match_keras_layer_norm_and_bias():
    layer_norm = keras.layers.LayerNormalization(name="attention_output_norm")
    dense = keras.layers.Dense(3, name="dense")
    layer_norm.build((None, 4))
    dense.build((None, 4))
    opt = Lamb(learning_rate=0.1)
    opt.build(layer_norm.trainable_variables + dense.trainable_variables)
    decided = {
        v.path: (opt.uses_weight_decay(v), opt.uses_layer_adaptation(v))
        for v in layer_norm.trainable_variables + dense.trainable_variables
    }
    assert decided == {
        "attention_output_norm/gamma": (False, False),
        "attention_output_norm/beta": (False, False),
        "dense/kernel": (True, True),
        "dense/bias": (False, False),
    }


def test_optimizer_errors_and_config_round_trip():
    with pytest.raises(ValueError, match="weight_decay_rate"):
        Lamb(learning_rate=0.1, weight_decay=0.01)
    with pytest.raises(ValueError, match="exclude_from_weight_decay: '\\(' is not a valid"):
        AdamWeightDecay(exclude_from_weight_decay=["("])
    with pytest.raises(ValueError, match="'sgd': expected one of adamw, adamw_original, lamb"):
        create_optimizer("sgd", 0.1)
    schedule = WarmupPolynomialDecay(0.00176, decay_steps=125000, warmup_steps=3125)
    opt = create_optimizer("lamb", schedule, stacked_axes={"encoder/": 2})
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert isinstance(clone, Lamb)
    assert clone.get_config() == opt.get_config()


def test_schedule_matches_original_formula():
    init, total, warm, start, power = 1e-3, 50, 10, 5, 2.0
    schedule = WarmupPolynomialDecay(
        init, decay_steps=total, warmup_steps=warm, start_warmup_step=start, power=power
    )
    for t in range(0, 70):
        decayed = init * (1 - min(t, total) / total) ** power
        s = t - start
        expected = init * max(s, 0) / warm if s < warm else decayed
        assert float(schedule(t)) == pytest.approx(expected, rel=1e-5, abs=1e-12), t
    # Bit for bit in float32: the original computes lr * (step / warmup), not (lr * step) / warmup.
    lr, warm = np.float32(0.00176), np.float32(3125)
    schedule = WarmupPolynomialDecay(float(lr), decay_steps=125000, warmup_steps=3125)
    steps = np.arange(3125, dtype=np.float32)
    expected = lr * (steps / warm)
    assert np.any(expected != (lr * steps) / warm)  # the two orders do differ at some steps
    np.testing.assert_array_equal(schedule(tf.constant(steps)).numpy(), expected)
    # The optimizer reads the schedule at its own step counter, before incrementing it (as the
    # original, whose first update at global_step 0 has lr 0 under warmup).
    v = keras.Variable(np.ones(3, np.float32), name="w")
    opt = AdamWeightDecay(learning_rate=WarmupPolynomialDecay(0.1, decay_steps=10, warmup_steps=2))
    opt.apply([tf.ones(3)], [v])
    np.testing.assert_array_equal(v.numpy(), np.ones(3))


def test_clip_by_global_norm_matches_tensorflow():
    rng = np.random.default_rng(3)
    grads = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in [(4, 3), (3,), (2, 2, 5)]]
    sparse = tf.IndexedSlices(
        tf.constant(rng.normal(size=(2, 3)).astype(np.float32)), tf.constant([1, 1]), [4, 3]
    )
    for clip in (0.5, 100.0):  # clipped and left alone
        tensors = grads + [sparse, None]
        dense = grads + [tf.convert_to_tensor(sparse)]
        expected, expected_norm = tf.clip_by_global_norm(dense, clip)
        clipped, norm = clip_by_global_norm(tensors, clip)
        assert float(norm) == pytest.approx(float(expected_norm), rel=1e-6)
        assert float(global_norm(tensors)) == pytest.approx(float(expected_norm), rel=1e-6)
        assert clipped[-1] is None
        for got, want in zip(clipped, expected):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    for bad in (np.inf, np.nan):  # a norm that is not finite poisons every gradient
        clipped, norm = clip_by_global_norm([tf.constant([1.0, bad]), tf.constant([2.0])], 1.0)
        assert not np.isfinite(float(norm))
        assert all(np.isnan(t.numpy()).all() for t in clipped)


def test_global_clipnorm_is_one_reduction_under_xla():
    """AdamWeightDecay/Lamb clip through `clipping.clip_by_global_norm` (Keras' `_clip_gradients`
    hook): the same update as clipping first, and one reduction however many variables (Keras'
    own clipping compiles one per variable)."""
    import re

    def reductions(count):
        variables = [keras.Variable(np.ones((4, 3), "float32"), name=f"k{i}") for i in range(count)]
        opt = AdamWeightDecay(1e-3, global_clipnorm=1.0)
        opt.build(variables)

        @tf.function(jit_compile=True)
        def step(gradients):
            opt.apply(gradients, variables)

        hlo = step.experimental_get_compiler_ir([tf.ones((4, 3))] * count)(stage="optimized_hlo")
        return len(re.findall(r" reduce\(", hlo))

    assert reductions(2) == reductions(12) == 1

    rng = np.random.default_rng(4)
    grads = [tf.constant(rng.normal(size=(4, 3)).astype(np.float32)) for _ in range(3)]
    for cls in (AdamWeightDecay, Lamb):
        hooked = [keras.Variable(np.ones((4, 3), "float32"), name=f"w{i}") for i in range(3)]
        plain = [keras.Variable(np.ones((4, 3), "float32"), name=f"w{i}") for i in range(3)]
        cls(1e-2, global_clipnorm=0.1).apply(grads, hooked)
        cls(1e-2).apply(tf.clip_by_global_norm(grads, 0.1)[0], plain)
        for a, b in zip(hooked, plain):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
