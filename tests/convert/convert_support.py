"""Shared by the conversion tests: running scripts/convert_checkpoint.py, model inputs from a
fixture, weights by name, reading a Hugging Face directory, optional imports."""

import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "convert_checkpoint.py")


def run_convert(*flags):
    """scripts/convert_checkpoint.py with `flags`; the CompletedProcess (text output)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, SCRIPT, *flags], capture_output=True, text=True, env=env, timeout=300
    )


def fixture_inputs(expected):
    """The model inputs of a fixture's expected.npz (HF names -> albert_tf names)."""
    return {
        "input_word_ids": expected["input_ids"],
        "input_mask": expected["attention_mask"],
        "input_type_ids": expected["token_type_ids"],
    }


def weights_by_name(model):
    """{variable path without the model or backbone prefix: value} (RNG state left out)."""
    prefixes = (model.backbone.name + "/", model.name + "/")
    return {
        next((v.path[len(p) :] for p in prefixes if v.path.startswith(p)), v.path): v.numpy()
        for v in model.weights
        if "seed_generator" not in v.path
    }


def assert_same_weights(model, other, skip=()):
    """Both models hold the same variables with equal values (except the names in `skip`)."""
    ours, theirs = weights_by_name(model), weights_by_name(other)
    assert sorted(ours) == sorted(theirs)
    for name in sorted(set(ours) - set(skip)):
        np.testing.assert_array_equal(theirs[name], ours[name], err_msg=name)


def read_huggingface_dir(directory):
    """(config.json values, {tensor name: array}) of a Hugging Face model directory."""
    from safetensors import numpy as safetensors_numpy

    with open(os.path.join(directory, "config.json")) as f:
        values = json.load(f)
    with open(os.path.join(directory, "model.safetensors"), "rb") as f:
        return values, safetensors_numpy.load(f.read())


def import_or_skip(name):
    """The module, or a skipped test when it is not importable (torch and transformers are
    fixture extras, not test dependencies)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:  # not installed, or broken: only the fixture generator needs it
        pytest.skip(
            f"{name} is not importable ({e}); install the fixture extras (torch, "
            f"transformers) to check that Hugging Face loads the export"
        )
