"""The Keras behaviour `albert_tf.keras_internals` relies on, checked against the installed Keras:
a failure here means a Keras upgrade changed it, and the module (and the code it names) must be
revisited."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import keras_internals


class Holder(keras.layers.Layer):
    """A plain layer holding layers in an attribute and in a list."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.Dense(2, name="inner")
        self.stack = [keras.layers.Dense(2, name=f"stacked_{i}") for i in range(2)]

    def call(self, x):
        for layer in [self.inner, *self.stack]:
            x = layer(x)
        return x


def test_sublayers_walks_plain_layers_recursively():
    model = keras.Sequential([Holder(name="holder")], name="outer")
    names = [layer.name for layer in keras_internals.sublayers(model, include_self=True)]
    assert names[0] == "outer"
    assert sorted(names[1:]) == ["holder", "inner", "stacked_0", "stacked_1"]
    assert "outer" not in [layer.name for layer in keras_internals.sublayers(model)]


def test_loss_tracker_is_the_loss_fit_reports():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones([4, 3], "float32"), np.zeros([4, 1], "float32")
    reported = model.train_on_batch(x, y, return_dict=True)["loss"]
    assert float(keras_internals.loss_tracker(model).result()) == pytest.approx(reported)


def test_loss_tracker_needs_a_compiled_model():
    with pytest.raises(ValueError, match="was it compiled"):
        keras_internals.loss_tracker(keras.Sequential([keras.layers.Dense(1)]))


class LabelConditioned(keras.Model):
    """Outputs "conditioned" only when the labels ride in the inputs (as AlbertSquadV2Model's
    gold-start end logits); records the output keys `compute_loss` receives."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1)
        self.seen = []

    def call(self, inputs):
        out = {"free": self.dense(inputs["x"])}
        if "label" in inputs:
            out["conditioned"] = out["free"] + tf.cast(inputs["label"], "float32")
        return out

    def train_step(self, data):
        x, y = data
        return super().train_step(({**x, "label": y["conditioned"]}, y))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        self.seen.append(sorted(y_pred))
        if "conditioned" not in y_pred:
            y_pred = {**y_pred, "conditioned": y_pred["free"]}
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)


@pytest.mark.parametrize("strategy", [None, "one_device"])
def test_symbolic_build_passes_outputs_computed_without_labels(strategy):
    """Under a distribute strategy (and only there) Keras passes `compute_loss` the outputs of
    the model called on x alone before training: what `AlbertSquadV2Model._align` handles."""
    scope = tf.distribute.OneDeviceStrategy("/cpu:0") if strategy else tf.distribute.get_strategy()
    with scope.scope():
        model = LabelConditioned()
        model.compile(optimizer="sgd", loss={"free": "mse", "conditioned": "mse"})
    x = {"x": np.ones([4, 3], "float32")}
    y = {"free": np.zeros([4, 1], "float32"), "conditioned": np.ones([4, 1], "float32")}
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    label_free = [keys for keys in model.seen if "conditioned" not in keys]
    assert model.seen[-1] == ["conditioned", "free"]
    assert label_free == ([["free"]] if strategy else []), (
        f"Keras {keras.version()} (albert_tf.keras_internals was written against "
        f"{keras_internals.WRITTEN_AGAINST}) changed its symbolic build: review "
        "AlbertSquadV2Model._align"
    )
