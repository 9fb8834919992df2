"""One test harness for every public Keras layer and model of albert_tf.

`run_layer_test` puts a layer class through the checks every layer must pass, `run_model_test`
adds the model-only ones. Each check builds its own instances from `init_kwargs`, so a test
states only the class, its arguments, some input data and what the output must look like.

First the object is built by a call on the data, its float variables get random values (so a
weight that fails to load or copy cannot hide behind its zero or unit initial value), the output
must have the expected shapes (None in an expected shape accepts any size) and dtypes, and a
second call must return the same. Then the checks, by name as in `Report.checks` and `skip`:

- "config": `get_config()` is plain JSON and holds every constructor argument with its value
  (layers nested in it are checked by their own tests); `from_config` and
  `keras.saving.deserialize_keras_object(serialize_keras_object(...))` give an object of the same
  class with an equal config, the same variables (paths, shapes, dtypes) and, with the original's
  weights, equal outputs.
- "saving": `.keras` save and `keras.saving.load_model` in the same process give the same class,
  an equal config, equal weights and equal outputs (atol 1e-6).
- "mixed_precision": built under the global dtype policy "mixed_bfloat16", the object computes
  in bfloat16, keeps float32 variables, returns the stated output dtypes, finite, close to the
  float32 outputs of the same weights (integer outputs identical), and its config keeps the
  policy when rebuilt under float32. The global policy is always restored.
- "symbolic": called on KerasTensors shaped like the data, a fresh (unbuilt) object returns
  KerasTensors of the expected shapes and dtypes without running anything; a functional
  `keras.Model` on batch-agnostic `keras.Input`s around the tested object returns the outputs
  of calling it directly.
- models only, "predict": `model.predict` equals a direct call.
- models only, "fit" (when `fit_data` is given): `compile` + one `fit` step on tiny data gives a
  finite loss and changes every trainable variable; the fitted, compiled model saved as `.keras`
  loads with its optimizer step, equal outputs and an equal `evaluate` loss.

A check is skipped only with a stated reason: `skip={"symbolic": "why"}`.
"""

import contextlib
import dataclasses
import json
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

LAYER_CHECKS = ("config", "saving", "mixed_precision", "symbolic")
MODEL_CHECKS = LAYER_CHECKS + ("predict", "fit")
MIXED = "mixed_bfloat16"
# Eager calls and traced ones (predict, a functional model) may round differently.
GRAPH_TOLERANCE = 1e-5
_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclasses.dataclass
class Report:
    """What a harness run did: the checks run (in order) and the skipped ones with reasons."""

    checks: list
    skipped: dict


@contextlib.contextmanager
def global_dtype_policy(name):
    """Sets the global Keras dtype policy inside the block; the previous one is always restored."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def run_layer_test(
    cls,
    init_kwargs,
    input_data,
    expected_output_shape=None,
    *,
    expected_output_dtype=None,
    mixed_output_dtype=None,
    call_kwargs=None,
    call_fn=None,
    stored_differently=None,
    skip=None,
    atol=1e-6,
    mixed_tolerance=0.05,
):
    """Runs the layer checks (see the module doc) on `cls`; returns a `Report`.

    Args:
        cls: the layer class.
        init_kwargs: constructor keyword arguments, or a function returning them (needed when
            they hold layers, so that the mixed-precision check builds those under its policy).
        input_data: the call's input; a tuple means several positional arguments.
        expected_output_shape: the output shape, or {output key: shape} for dict outputs.
        expected_output_dtype: the output dtype (one for all outputs, or a dict) in float32.
        mixed_output_dtype: the same under "mixed_bfloat16" (required unless that check is
            skipped).
        call_kwargs: keyword arguments of every call.
        call_fn: `call_fn(obj, *args) -> outputs` instead of `obj(*args, **call_kwargs)`,
            for objects that are not called (it must also build them).
        stored_differently: {constructor argument: reason} for arguments that `get_config`
            stores in another form or under another name (e.g. a file path as its bytes).
        skip: {check name: reason} for checks that do not apply.
        atol: tolerance of the round-trip comparisons.
        mixed_tolerance: bfloat16 outputs may differ from float32 ones by this times
            max(1, max |float32 output|).
    """
    harness = _Harness(
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        expected_output_dtype,
        mixed_output_dtype,
        call_kwargs,
        call_fn,
        skip,
        atol,
        mixed_tolerance,
        LAYER_CHECKS,
        stored_differently=stored_differently,
    )
    return harness.run()


def run_model_test(
    cls,
    init_kwargs,
    input_data,
    expected_output_shape=None,
    *,
    expected_output_dtype=None,
    mixed_output_dtype=None,
    fit_data=None,
    compile_kwargs=None,
    unused_variables=(),
    call_kwargs=None,
    skip=None,
    atol=1e-6,
    mixed_tolerance=0.05,
):
    """`run_layer_test` for a keras.Model, plus "predict" and "fit" (see the module doc).

    fit_data: (x, y) for one `fit` step with batch size len(y); compile_kwargs: the arguments
    of `compile` (default: none, for models whose `compile()` has defaults). Without fit_data
    the "fit" check must be skipped with a reason. unused_variables: paths of the trainable
    variables the loss does not depend on, which the step must leave unchanged (all others must
    change).
    """
    skip = dict(skip or {})
    if fit_data is None and "fit" not in skip:
        raise ValueError("run_model_test: pass fit_data or skip={'fit': reason}")
    harness = _Harness(
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        expected_output_dtype,
        mixed_output_dtype,
        call_kwargs,
        None,
        skip,
        atol,
        mixed_tolerance,
        MODEL_CHECKS,
        fit_data=fit_data,
        compile_kwargs=compile_kwargs,
        unused_variables=unused_variables,
    )
    return harness.run()


# ---------------------------------------------------------------------------------- structures
def _leaves(structure, prefix=""):
    """{path: leaf} of nested dicts / lists / tuples ("" for a single leaf)."""
    if isinstance(structure, dict):
        items = sorted(structure.items())
    elif isinstance(structure, (list, tuple)):
        items = list(enumerate(structure))
    else:
        return {prefix: structure}
    leaves = {}
    for key, value in items:
        leaves.update(_leaves(value, f"{prefix}/{key}" if prefix else str(key)))
    return leaves


def _per_output(expected, outputs, what):
    """{output path: expected value} for one value (applied to every output) or a dict."""
    paths = sorted(_leaves(outputs))
    if isinstance(expected, dict):
        if sorted(expected) != paths:
            raise AssertionError(f"{what}: outputs are {paths}, expected {sorted(expected)}")
        return dict(expected)
    return {path: expected for path in paths}


def _arrays(outputs):
    """{path: numpy array}; a RaggedTensor gives its flat values and every row_splits."""
    arrays = {}
    for path, value in _leaves(outputs).items():
        if isinstance(value, tf.RaggedTensor):
            arrays[f"{path}:flat_values"] = value.flat_values.numpy()
            for i, splits in enumerate(value.nested_row_splits):
                arrays[f"{path}:row_splits_{i}"] = splits.numpy()
        else:
            arrays[path] = keras.ops.convert_to_numpy(value)
    return arrays


def _dtype_name(value):
    return keras.backend.standardize_dtype(value.dtype)


def _is_float(array):
    return np.asarray(array).dtype.kind == "f" or str(np.asarray(array).dtype) == "bfloat16"


def assert_outputs_close(actual, expected, atol, what):
    """Same output paths, shapes and dtypes; values within atol (integers and strings equal)."""
    actual, expected = _arrays(actual), _arrays(expected)
    assert sorted(actual) == sorted(expected), (
        f"{what}: outputs {sorted(actual)} != {sorted(expected)}"
    )
    for path in expected:
        a, b = actual[path], expected[path]
        assert a.shape == b.shape, f"{what}: {path!r} has shape {a.shape}, expected {b.shape}"
        assert a.dtype == b.dtype, f"{what}: {path!r} has dtype {a.dtype}, expected {b.dtype}"
        if _is_float(b):
            np.testing.assert_allclose(
                a.astype(np.float64),
                b.astype(np.float64),
                rtol=0,
                atol=atol,
                err_msg=f"{what}: {path!r}",
            )
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: {path!r}")


def _variables(obj):
    return [(v.path, tuple(v.shape), v.dtype) for v in obj.weights]


def _assert_same_weights(actual, expected, what):
    assert _variables(actual) == _variables(expected), f"{what}: variables differ"
    for a, b in zip(actual.weights, expected.weights):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(a),
            keras.ops.convert_to_numpy(b),
            err_msg=f"{what}: {a.path}",
        )


def _string_like(value):
    return (isinstance(value, (tf.Tensor, tf.RaggedTensor)) and value.dtype == tf.string) or (
        isinstance(value, np.ndarray) and value.dtype.kind in "OSU"
    )


def _symbolic(value, batch_agnostic, name=None):
    """A KerasTensor (or keras.Input when batch_agnostic) shaped and typed like `value`."""
    ragged = isinstance(value, tf.RaggedTensor)
    dtype = (
        "string"
        if _string_like(value)
        else _dtype_name(value if ragged or isinstance(value, tf.Tensor) else np.asarray(value))
    )
    shape = tuple(value.shape) if ragged or isinstance(value, tf.Tensor) else np.shape(value)
    shape = tuple(None if d is None else int(d) for d in shape)
    if batch_agnostic:
        return keras.Input(batch_shape=(None,) + shape[1:], dtype=dtype, ragged=ragged, name=name)
    return keras.KerasTensor(shape, dtype=dtype, ragged=ragged)


def _symbolic_inputs(structure, batch_agnostic, name=None):
    """`_symbolic` over dicts (keras.Inputs named by their keys), lists and tuples."""
    if isinstance(structure, dict):
        return {k: _symbolic_inputs(v, batch_agnostic, k) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)):
        return type(structure)(_symbolic_inputs(v, batch_agnostic) for v in structure)
    return _symbolic(structure, batch_agnostic, name)


def _batch_size(structure):
    first = next(iter(_leaves(structure).values()))
    return int(first.shape[0]) if hasattr(first, "shape") else len(first)


# ------------------------------------------------------------------------------------- harness
class _Harness:
    def __init__(
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        expected_output_dtype,
        mixed_output_dtype,
        call_kwargs,
        call_fn,
        skip,
        atol,
        mixed_tolerance,
        known_checks,
        fit_data=None,
        compile_kwargs=None,
        unused_variables=(),
        stored_differently=None,
    ):
        self.cls = cls
        self.init_kwargs = init_kwargs
        self.args = list(input_data) if isinstance(input_data, tuple) else [input_data]
        self.expected_shape = expected_output_shape
        self.expected_dtype = expected_output_dtype
        self.mixed_dtype = mixed_output_dtype
        self.call_kwargs = dict(call_kwargs or {})
        self.call_fn = call_fn
        self.atol = atol
        self.mixed_tolerance = mixed_tolerance
        self.fit_data = fit_data
        self.compile_kwargs = dict(compile_kwargs or {})
        self.unused_variables = sorted(unused_variables)
        self.stored_differently = dict(stored_differently or {})
        self.skip = dict(skip or {})
        unknown = sorted(set(self.skip) - set(known_checks))
        if unknown:
            raise ValueError(f"unknown checks to skip {unknown}; checks are {known_checks}")
        for name, reason in self.skip.items():
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"skipping {name!r} needs a reason")
        if "mixed_precision" not in self.skip and mixed_output_dtype is None:
            raise ValueError("state mixed_output_dtype, or skip the mixed_precision check")
        self.known_checks = known_checks
        self.name = cls.__name__

    # -------------------------------------------------------------------- helpers
    def make(self):
        kwargs = self.init_kwargs() if callable(self.init_kwargs) else dict(self.init_kwargs)
        return self.cls(**kwargs)

    def call(self, obj, args=None):
        args = self.args if args is None else args
        if self.call_fn is not None:
            return self.call_fn(obj, *args)
        return obj(*args, **self.call_kwargs)

    def check_shapes(self, outputs, what, batch_agnostic=False):
        if self.expected_shape is None:
            return
        expected = (
            _per_output(self.expected_shape, outputs, what)
            if isinstance(self.expected_shape, dict)
            else {"": self.expected_shape}
        )
        actual = _leaves(outputs)
        assert sorted(actual) == sorted(expected), (
            f"{what}: outputs {sorted(actual)}, expected {sorted(expected)}"
        )
        for path, shape in expected.items():
            got = tuple(actual[path].shape)
            want = tuple(shape)
            if batch_agnostic:
                want = (None,) + want[1:]
            # None in `want` accepts any size; with batch_agnostic, None in `got` matches too.
            ok = len(got) == len(want) and all(
                w is None or g == w or (batch_agnostic and g is None) for g, w in zip(got, want)
            )
            assert ok, f"{what}: output {path!r} has shape {got}, expected {want}"

    def check_dtypes(self, outputs, expected, what):
        if expected is None:
            return
        for path, dtype in _per_output(expected, outputs, what).items():
            got = _dtype_name(_leaves(outputs)[path])
            assert got == dtype, f"{what}: output {path!r} has dtype {got}, expected {dtype}"

    # -------------------------------------------------------------------- checks
    def run(self):
        reference = self.make()
        self.call(reference)  # builds it
        randomize_weights(reference)
        outputs = self.call(reference)
        self.check_shapes(outputs, f"{self.name} eager call")
        self.check_dtypes(outputs, self.expected_dtype, f"{self.name} eager call")
        assert_outputs_close(self.call(reference), outputs, 0.0, f"{self.name} second call")
        report = Report(checks=[], skipped={})
        for check in self.known_checks:
            if check in self.skip:
                report.skipped[check] = self.skip[check]
                continue
            getattr(self, f"check_{check}")(reference, outputs)
            report.checks.append(check)
        return report

    def check_config(self, reference, outputs):
        config = reference.get_config()
        json.dumps(config)  # plain JSON, as a .keras file stores it
        kwargs = self.init_kwargs() if callable(self.init_kwargs) else self.init_kwargs
        for key, value in kwargs.items():
            if key in self.stored_differently or isinstance(value, keras.layers.Layer):
                continue
            assert key in config, f"{self.name}.get_config() lacks the argument {key!r}"
            assert _plain(config[key]) == _plain(value), (
                f"{self.name}.get_config()[{key!r}] is {config[key]!r}, constructed with {value!r}"
            )
        serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(reference)))
        for how, clone in (
            ("from_config", self.cls.from_config(config)),
            ("deserialize_keras_object", keras.saving.deserialize_keras_object(serialized)),
        ):
            what = f"{self.name} {how}"
            assert type(clone) is self.cls, f"{what}: got {type(clone).__name__}"
            assert clone.get_config() == config, (
                f"{what}: configs differ:\n{clone.get_config()}\n{config}"
            )
            self.call(clone)  # builds it
            assert _variables(clone) == _variables(reference), f"{what}: variables differ"
            clone.set_weights(reference.get_weights())
            assert_outputs_close(self.call(clone), outputs, self.atol, what)

    def check_saving(self, reference, outputs):
        loaded = _save_and_load(reference)
        what = f"{self.name} .keras save/load"
        assert type(loaded) is self.cls, f"{what}: got {type(loaded).__name__}"
        assert loaded.get_config() == reference.get_config(), f"{what}: configs differ"
        _assert_same_weights(loaded, reference, what)
        assert_outputs_close(self.call(loaded), outputs, self.atol, what)

    def check_mixed_precision(self, reference, outputs):
        what = f"{self.name} under {MIXED}"
        if not callable(self.init_kwargs) and any(
            isinstance(v, keras.layers.Layer) for v in self.init_kwargs.values()
        ):
            raise ValueError(
                f"{what}: init_kwargs holds layers built under float32; pass a "
                "function returning init_kwargs"
            )
        with global_dtype_policy(MIXED):
            mixed = self.make()
            self.call(mixed)  # builds it
            mixed.set_weights(reference.get_weights())
            mixed_outputs = self.call(mixed)
            config = mixed.get_config()
        assert mixed.dtype_policy.name == MIXED, f"{what}: policy {mixed.dtype_policy.name}"
        assert mixed.compute_dtype == "bfloat16", f"{what}: computes in {mixed.compute_dtype}"
        wrong = [
            (v.path, v.dtype)
            for v in mixed.weights
            if v.dtype in _FLOAT_DTYPES and v.dtype != "float32"
        ]
        assert not wrong, f"{what}: variables must stay float32: {wrong}"
        self.check_shapes(mixed_outputs, what)
        self.check_dtypes(mixed_outputs, self.mixed_dtype, what)
        got, want = _arrays(mixed_outputs), _arrays(outputs)
        assert sorted(got) == sorted(want), f"{what}: outputs differ"
        for path, value in got.items():
            if _is_float(value):
                value = value.astype(np.float64)
                assert np.isfinite(value).all(), f"{what}: {path!r} is not finite"
                scale = max(1.0, float(np.abs(want[path]).max(initial=0.0)))
                error = float(np.abs(value - want[path]).max(initial=0.0))
                assert error <= self.mixed_tolerance * scale, (
                    f"{what}: {path!r} differs from float32 by {error} (scale {scale})"
                )
            else:
                np.testing.assert_array_equal(value, want[path], err_msg=f"{what}: {path!r}")
        rebuilt = self.cls.from_config(config)  # under the restored (float32) policy
        assert rebuilt.dtype_policy.name == MIXED, (
            f"{what}: from_config lost the policy ({rebuilt.dtype_policy.name})"
        )

    def check_symbolic(self, reference, outputs):
        what = f"{self.name} symbolic call"
        fresh = self.make()
        specs = _symbolic_inputs(self.args, batch_agnostic=False)
        symbolic = self.call(fresh, specs)
        for path, value in _leaves(symbolic).items():
            assert isinstance(value, keras.KerasTensor), (
                f"{what}: output {path!r} is a {type(value).__name__}, not a KerasTensor"
            )
        self.check_shapes(symbolic, what)
        self.check_dtypes(symbolic, self.expected_dtype, what)
        inputs = _symbolic_inputs(self.args, batch_agnostic=True)
        symbolic = self.call(reference, inputs)
        self.check_shapes(symbolic, f"{what} on keras.Input", batch_agnostic=True)
        functional = keras.Model(inputs[0] if len(inputs) == 1 else inputs, symbolic)
        data = self.args[0] if len(self.args) == 1 else self.args
        # Graph execution may round differently from eager execution.
        assert_outputs_close(
            functional(data), outputs, GRAPH_TOLERANCE, f"{self.name} in a functional model"
        )

    def check_predict(self, reference, outputs):
        batch = _batch_size(self.args[0])
        predicted = reference.predict(self.args[0], batch_size=batch, verbose=0)
        outputs = keras.tree.map_structure(keras.ops.convert_to_numpy, outputs)
        assert_outputs_close(predicted, outputs, GRAPH_TOLERANCE, f"{self.name} predict")

    def check_fit(self, reference, outputs):
        what = f"{self.name} fit"
        x, y = self.fit_data
        batch = _batch_size(y)
        model = self.make()
        model.compile(**self.compile_kwargs)
        before = {v.path: v.numpy() for v in model.trainable_variables}
        history = model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
        loss = history.history["loss"][0]
        assert np.isfinite(loss), f"{what}: loss {loss}"
        assert int(model.optimizer.iterations) == 1, f"{what}: {model.optimizer.iterations} steps"
        unchanged = [
            v.path for v in model.trainable_variables if np.array_equal(v.numpy(), before[v.path])
        ]
        assert sorted(unchanged) == self.unused_variables, (
            f"{what}: one step left {unchanged} unchanged, expected {self.unused_variables}"
        )
        loaded = _save_and_load(model)
        what = f"{self.name} .keras save/load after fit"
        assert int(loaded.optimizer.iterations) == 1, f"{what}: optimizer step lost"
        _assert_same_weights(loaded, model, what)
        assert_outputs_close(self.call(loaded), self.call(model), self.atol, what)
        expected = model.evaluate(x, y, batch_size=batch, verbose=0, return_dict=True)
        got = loaded.evaluate(x, y, batch_size=batch, verbose=0, return_dict=True)
        assert sorted(got) == sorted(expected), f"{what}: metrics {sorted(got)}"
        for name in expected:
            np.testing.assert_allclose(
                got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=f"{what}: evaluate {name}"
            )


def randomize_weights(obj, seed=0):
    """Gives every float variable random values (LayerNorm gammas around 1), so that a check
    cannot pass because a weight that failed to load kept its zero or unit initial value."""
    rng = np.random.default_rng(seed)
    for v in obj.weights:
        if v.dtype in _FLOAT_DTYPES:
            base = 1.0 if "gamma" in v.name else 0.0
            v.assign(base + 0.3 * rng.standard_normal(tuple(v.shape)).astype(np.float32))


def _plain(value):
    """A config value as JSON would store it (AlbertConfig as its dict, tuples as lists)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _save_and_load(obj):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "object.keras")
        keras.saving.save_model(obj, path)
        return keras.saving.load_model(path)
