"""tests/harness.py catches the bugs it is meant to catch (on deliberately broken layers)."""

import keras
import numpy as np
import pytest
from harness import run_layer_test

X = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
PACKAGE = "harness_selftest"
OTHER = "not what this test is about"


@keras.saving.register_keras_serializable(package=PACKAGE)
class Scale(keras.layers.Layer):
    """A correct layer: x * w + offset."""

    def __init__(self, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.offset = offset

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return x * self.w + self.offset

    def get_config(self):
        return {**super().get_config(), "offset": self.offset}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ForgetsOffset(Scale):
    def get_config(self):
        return keras.layers.Layer.get_config(self)


@keras.saving.register_keras_serializable(package=PACKAGE)
class SavesNoWeights(Scale):
    def save_own_variables(self, store):
        pass

    def load_own_variables(self, store):
        pass


@keras.saving.register_keras_serializable(package=PACKAGE)
class Bfloat16Weights(Scale):
    def build(self, input_shape):
        self.w = self.add_weight(
            shape=(input_shape[-1],), initializer="ones", name="w", dtype=self.compute_dtype
        )


@keras.saving.register_keras_serializable(package=PACKAGE)
class SharedOutputSpec(Scale):
    """Returns {"a": x * w, "b": x}, but its output spec is one KerasTensor for both keys."""

    def call(self, x):
        return {"a": x * self.w, "b": x}

    def compute_output_spec(self, x):
        spec = keras.KerasTensor(x.shape, dtype=self.compute_dtype)
        return {"a": spec, "b": spec}


def _run(cls, expected_shape=(2, 3), **kwargs):
    return run_layer_test(
        cls,
        dict(offset=0.5),
        X,
        expected_shape,
        expected_output_dtype="float32",
        mixed_output_dtype="bfloat16",
        **kwargs,
    )


def test_a_correct_layer_passes():
    report = _run(Scale)
    assert report.checks == ["config", "saving", "mixed_precision", "symbolic"]


def test_a_missing_config_argument_fails():
    with pytest.raises(AssertionError, match="get_config\\(\\) lacks the argument 'offset'"):
        _run(ForgetsOffset)


def test_weights_lost_by_saving_fail():
    with pytest.raises(AssertionError, match="SavesNoWeights .keras save/load: .*w"):
        _run(SavesNoWeights, skip={"config": OTHER})


def test_bfloat16_variables_fail_and_the_policy_is_restored():
    with pytest.raises(AssertionError, match="variables must stay float32"):
        _run(Bfloat16Weights, skip={"config": OTHER, "saving": OTHER})
    assert keras.mixed_precision.global_policy().name == "float32"


def test_a_shared_output_spec_fails_in_a_functional_model():
    with pytest.raises(AssertionError, match="in a functional model"):
        _run(
            SharedOutputSpec,
            expected_shape={"a": (2, 3), "b": (2, 3)},
            skip={"mixed_precision": OTHER},
        )


def test_skipping_needs_a_reason():
    with pytest.raises(ValueError, match="needs a reason"):
        _run(Scale, skip={"symbolic": ""})
