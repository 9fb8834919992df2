"""Gradient accumulation: N micro-batches make the optimizer update of one N-times-larger batch."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.token_classifier import IGNORE, AlbertTokenClassifier

BATCH, SEQ = 8, 12


def _inputs(rng):
    ids = rng.integers(5, 100, size=(BATCH, SEQ)).astype("int32")
    lengths = rng.integers(4, SEQ + 1, size=BATCH)
    mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": 0 * mask}


def _models(cls, steps, optimizer, **compile_args):
    """Two identical dropout-free models, compiled with 1 and `steps` accumulation steps."""
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=100, num_hidden_layers=2)
    models = []
    for n in (1, steps):
        model = cls(AlbertModel(config), num_classes=3, dropout=0.0)
        if models:
            model.set_weights(models[0].get_weights())
        model.compile(
            optimizer=optimizer,
            learning_rate=1e-3,
            num_train_steps=10,
            warmup_steps=2,
            precision="float32",
            jit_compile=False,
            gradient_accumulation_steps=n,
            **compile_args,
        )
        models.append(model)
    return models


def _assert_same_weights(a, b, atol=1e-6):
    for va, vb in zip(a.trainable_variables, b.trainable_variables):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), atol=atol, rtol=0, err_msg=va.path)


@pytest.mark.parametrize("optimizer", ["adamw", "adamw_original", "lamb"])
def test_accumulated_update_equals_one_large_batch(optimizer):
    rng = np.random.default_rng(0)
    x, y = _inputs(rng), rng.integers(0, 3, size=BATCH).astype("int32")
    # A clip norm far below the gradient norm: clipping acts, on the accumulated gradient.
    big, accumulated = _models(AlbertClassifier, 4, optimizer, global_clipnorm=0.05)
    for step in range(3):  # three updates: the schedule and AdamW's t advance per update
        logs_big = big.train_on_batch(x, y, return_dict=True)
        logs_acc = accumulated.train_on_batch(x, y, return_dict=True)
        assert int(accumulated.optimizer.iterations) == step + 1
        np.testing.assert_allclose(logs_acc["loss"], logs_big["loss"], rtol=1e-5)
        np.testing.assert_allclose(logs_acc["accuracy"], logs_big["accuracy"], rtol=1e-6)
    _assert_same_weights(big, accumulated)
    assert float(accumulated.optimizer.learning_rate) == float(big.optimizer.learning_rate)
    moved = max(
        np.abs(v.numpy() - w).max()
        for v, w in zip(
            big.trainable_variables, _models(AlbertClassifier, 4, optimizer)[0].get_weights()
        )
    )
    assert moved > 1e-4  # the updates were not negligible


def test_clipping_acts_on_the_accumulated_gradient_not_per_micro_batch():
    """Clipping each micro-batch's gradient (Keras' accumulation averages clipped pieces
    differently) would give another update; ours matches the whole batch exactly."""
    rng = np.random.default_rng(1)
    x, y = _inputs(rng), rng.integers(0, 3, size=BATCH).astype("int32")
    big, accumulated = _models(AlbertClassifier, 2, "adamw", global_clipnorm=0.05)
    start = big.get_weights()
    grads = []
    for half in (slice(0, 4), slice(4, 8)):
        with tf.GradientTape() as tape:
            xs = {k: v[half] for k, v in x.items()}
            loss = big.compute_loss(xs, y[half], big(xs, training=True), training=True)
        grads.append(
            [tf.convert_to_tensor(g) for g in tape.gradient(loss, big.trainable_variables)]
        )
    norms = [float(tf.linalg.global_norm(g)) for g in grads]
    whole = float(tf.linalg.global_norm([(a + b) / 2 for a, b in zip(*grads)]))
    assert min(norms) > 0.05 and whole > 0.05 and abs(sum(norms) / 2 - whole) > 1e-3
    for _ in range(2):  # the first update has learning rate 0 (warmup)
        big.train_on_batch(x, y)
        accumulated.train_on_batch(x, y)
    _assert_same_weights(big, accumulated)
    assert any(np.abs(a - b).max() > 0 for a, b in zip(start, big.get_weights()))


def test_token_loss_normalised_over_the_whole_batch():
    """The token loss divides by the labelled positions; micro-batches with very different counts
    are weighted by their share, so the update is still the whole batch's."""
    rng = np.random.default_rng(2)
    x = _inputs(rng)
    y = rng.integers(0, 3, size=(BATCH, SEQ)).astype("int32")
    y[:4, 2:] = IGNORE  # the first micro-batch has 2 labelled positions per row
    y[x["input_mask"] == 0] = IGNORE
    big, accumulated = _models(AlbertTokenClassifier, 2, "adamw", global_clipnorm=None)
    weights = accumulated.micro_batch_weights(tf.reshape(y, [2, 4, SEQ]), None).numpy()
    labelled = (y != IGNORE).reshape(2, -1).sum(1)
    np.testing.assert_allclose(weights, labelled / labelled.sum(), rtol=1e-6)
    assert abs(weights[0] - 0.5) > 0.2  # equal weights would be wrong here
    for _ in range(2):
        logs_big = big.train_on_batch(x, y, return_dict=True)
        logs_acc = accumulated.train_on_batch(x, y, return_dict=True)
        np.testing.assert_allclose(logs_acc["loss"], logs_big["loss"], rtol=1e-5)
        np.testing.assert_allclose(logs_acc["accuracy"], logs_big["accuracy"], rtol=1e-6)
    _assert_same_weights(big, accumulated)


def test_fit_with_steps_per_execution_and_xla():
    """fit over a dataset, two updates per execution, XLA: still one update per batch."""
    rng = np.random.default_rng(3)
    x, y = _inputs(rng), rng.integers(0, 3, size=BATCH).astype("int32")
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat(4)
    big, accumulated = _models(AlbertClassifier, 2, "adamw")
    for model in (big, accumulated):
        model.compile(
            learning_rate=1e-3,
            num_train_steps=10,
            precision="float32",
            jit_compile=True,
            steps_per_execution=2,
            gradient_accumulation_steps=model.gradient_accumulation_steps,
        )
        model.fit(dataset, epochs=1, steps_per_epoch=4, verbose=0)
        assert int(model.optimizer.iterations) == 4
    _assert_same_weights(big, accumulated, atol=2e-6)


@pytest.mark.parametrize("value", [0, -2, 1.5, True])
def test_compile_rejects_bad_steps(value):
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=100, num_hidden_layers=1)
    model = AlbertClassifier(AlbertModel(config))
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        model.compile(gradient_accumulation_steps=value)


def test_batch_not_divisible_is_refused():
    rng = np.random.default_rng(4)
    x, y = _inputs(rng), rng.integers(0, 3, size=BATCH).astype("int32")
    _, model = _models(AlbertClassifier, 3, "adamw")
    dataset = tf.data.Dataset.from_tensors((x, y))
    with pytest.raises(ValueError, match="gradient_accumulation_steps=3 does not divide"):
        model.fit(dataset, epochs=1, steps_per_epoch=1, verbose=0)


_MIRRORED = """
import json, sys
from albert_tf.train.strategy import configure_logical_cpus, create_strategy
configure_logical_cpus(2)
import numpy as np, tensorflow as tf
sys.path.insert(0, "tests/finetune")
from test_gradient_accumulation import _inputs, _models, AlbertClassifier

rng = np.random.default_rng(5)
x, y = _inputs(rng), rng.integers(0, 3, size=8).astype("int32")
mirrored = create_strategy("mirrored", logical_cpus=2)
out = {}
for clip in (None, 0.05):
    runs = {}
    with mirrored.scope():
        runs["mirrored_1"], runs["mirrored_4"] = _models(AlbertClassifier, 4, "adamw",
                                                         global_clipnorm=clip)
    runs["one_device_1"], _ = _models(AlbertClassifier, 4, "adamw", global_clipnorm=clip)
    for model in runs.values():
        model.set_weights(runs["one_device_1"].get_weights())
        for _ in range(2):
            model.train_on_batch(x, y)
    reference = runs["one_device_1"].get_weights()
    out[str(clip)] = {
        name: max(float(np.abs(a - b).max()) for a, b in zip(reference, model.get_weights()))
        for name, model in runs.items()
    }
    out[str(clip)]["moved"] = max(
        float(np.abs(a - b).max()) for a, b in zip(reference, _models(AlbertClassifier, 1,
                                                   "adamw")[0].get_weights()))
    a, b = runs["mirrored_1"].get_weights(), runs["mirrored_4"].get_weights()
    out[str(clip)]["mirrored_4_vs_1"] = max(float(np.abs(u - v).max()) for u, v in zip(a, b))
print(json.dumps(out))
"""


def test_mirrored_two_cpus():
    """MirroredStrategy over 2 logical CPUs (a subprocess: devices are set before TF starts):
    4 accumulation steps of 1 row per replica make the update of the 8-row batch; without
    clipping it equals one device's."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run(
        [sys.executable, "-c", _MIRRORED],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=root),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    diffs = json.loads(result.stdout.strip().splitlines()[-1])
    print(diffs)
    for clip in ("None", "0.05"):
        assert diffs[clip]["mirrored_4_vs_1"] < 1e-6
        assert diffs[clip]["moved"] > 1e-4
    assert diffs["None"]["mirrored_4"] < 1e-6
