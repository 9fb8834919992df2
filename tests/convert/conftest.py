"""Fixtures for the conversion tests: the committed HF/TF1 parity fixtures and ways to edit copies.

The fixtures in fixtures/ were written by fixtures/generate_parity_fixtures.py with transformers
4.57.6 (PyTorch); these tests need neither torch nor transformers.
"""

import json
import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
HF_FIXTURES = ("hf_shared_tanh", "hf_groups_erf", "hf_unshared", "hf_masked_lm", "hf_model_only")
ORIGINAL_FIXTURE = "original_groups"
ORIGINAL_PREFIX = os.path.join(FIXTURES, ORIGINAL_FIXTURE, "model.ckpt-7")
TOLERANCE = 1e-5


def fixture_path(name):
    return os.path.join(FIXTURES, name)


def expected_outputs(name):
    with np.load(os.path.join(FIXTURES, name, "expected.npz")) as data:
        return dict(data)


def model_inputs(expected):
    return {
        "input_word_ids": expected["input_ids"],
        "input_mask": expected["attention_mask"],
        "input_type_ids": expected["token_type_ids"],
        "masked_lm_positions": expected["masked_positions"],
    }


def outputs_of(pretrainer, expected):
    """Our outputs under HF's names: sequence, pooled, MLM logits at the positions, SOP logits."""
    inputs = model_inputs(expected)
    backbone = pretrainer.backbone(inputs)
    heads = pretrainer(inputs)
    return {
        "last_hidden_state": backbone["sequence_output"].numpy(),
        "pooler_output": backbone["pooled_output"].numpy(),
        "prediction_logits": heads["mlm_logits"].numpy(),
        "sop_logits": heads["sop_logits"].numpy(),
    }


def assert_parity(pretrainer, expected):
    """Every output HF produced for the fixture agrees with ours to 1e-5."""
    ours = outputs_of(pretrainer, expected)
    valid = expected["attention_mask"].astype(bool)
    np.testing.assert_allclose(
        ours["last_hidden_state"][valid],
        expected["last_hidden_state"][valid],
        rtol=0,
        atol=TOLERANCE,
        err_msg="sequence_output (valid positions)",
    )
    compared = []
    for key in ("last_hidden_state", "pooler_output", "prediction_logits", "sop_logits"):
        if key in expected:
            np.testing.assert_allclose(
                ours[key], expected[key], rtol=0, atol=TOLERANCE, err_msg=key
            )
            compared.append(key)
    return compared


def read_tf1(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="session")
def fx():
    """The fixture files and the parity helpers, as one namespace."""
    return types.SimpleNamespace(
        path=fixture_path,
        expected=expected_outputs,
        inputs=model_inputs,
        outputs=outputs_of,
        assert_parity=assert_parity,
        read_tf1=read_tf1,
        hf_names=HF_FIXTURES,
        original_prefix=ORIGINAL_PREFIX,
        original_dir=fixture_path(ORIGINAL_FIXTURE),
    )


@pytest.fixture
def hf_copy(tmp_path):
    """hf_copy(name, edit_tensors=None, edit_config=None) -> a copy of an HF fixture directory.

    edit_tensors(dict of np arrays) and edit_config(dict) modify the copy in place.
    """

    def make(name, edit_tensors=None, edit_config=None):
        directory = tmp_path / name
        shutil.copytree(fixture_path(name), directory)
        if edit_tensors is not None:
            path = directory / "model.safetensors"
            tensors = safetensors_numpy.load(path.read_bytes())
            edit_tensors(tensors)
            path.write_bytes(safetensors_numpy.save(tensors, metadata={"format": "pt"}))
        if edit_config is not None:
            path = directory / "config.json"
            values = json.loads(path.read_text())
            edit_config(values)
            path.write_text(json.dumps(values))
        return str(directory)

    return make


@pytest.fixture
def original_copy(tmp_path):
    """original_copy(edit_arrays=None, edit_config=None, rename=None) -> (prefix, config path).

    A rewritten copy of the TF1 fixture (optimizer slots included) with edits applied.
    """
    from albert_tf.convert.original import write_tf1_checkpoint

    def make(edit_arrays=None, edit_config=None, rename=None):
        arrays = read_tf1(ORIGINAL_PREFIX)
        if edit_arrays is not None:
            edit_arrays(arrays)
        if rename is not None:
            arrays = {rename(k): v for k, v in arrays.items()}
        directory = tmp_path / "original"
        directory.mkdir(exist_ok=True)
        prefix = str(directory / "model.ckpt-7")
        write_tf1_checkpoint(prefix, arrays)
        with open(os.path.join(FIXTURES, ORIGINAL_FIXTURE, "albert_config.json")) as f:
            values = json.load(f)
        if edit_config is not None:
            edit_config(values)
        config_path = directory / "albert_config.json"
        config_path.write_text(json.dumps(values))
        return prefix, str(config_path)

    return make
