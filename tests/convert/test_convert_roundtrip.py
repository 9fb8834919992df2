"""Round trips: HF -> albert_tf -> HF and TF1 -> albert_tf -> TF1 give identical tensors and config;
albert_tf -> HF -> albert_tf keeps every weight, including the cases HF expresses differently."""

import json
import os

import keras
import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy

from albert_tf.config import AlbertConfig
from albert_tf.convert import (
    ConversionError,
    from_huggingface,
    from_original,
    to_huggingface,
    to_original,
)
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer

MODEL_KEYS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)


def _safetensors(directory):
    with open(os.path.join(directory, "model.safetensors"), "rb") as f:
        return safetensors_numpy.load(f.read())


def _json(path):
    with open(path) as f:
        return json.load(f)


def _assert_same_tensors(actual, expected):
    assert sorted(actual) == sorted(expected)
    for name, array in expected.items():
        assert actual[name].dtype == array.dtype, name
        np.testing.assert_array_equal(actual[name], array, err_msg=name)


@pytest.mark.parametrize("name", ["hf_groups_erf", "hf_unshared"])
def test_huggingface_round_trip_is_identical(name, fx, tmp_path):
    to_huggingface(from_huggingface(fx.path(name)), str(tmp_path))
    _assert_same_tensors(_safetensors(tmp_path), _safetensors(fx.path(name)))
    original = _json(os.path.join(fx.path(name), "config.json"))
    exported = _json(tmp_path / "config.json")
    assert {k: exported[k] for k in MODEL_KEYS + ("layer_norm_eps",)} == {
        k: original[k] for k in MODEL_KEYS + ("layer_norm_eps",)
    }
    assert exported["model_type"] == "albert"
    assert exported["architectures"] == ["AlbertForPreTraining"]


def test_huggingface_model_only_exports_pretraining_layout(fx, tmp_path):
    """AlbertModel layout in, AlbertForPreTraining layout out (backbone identical, heads new)."""
    to_huggingface(from_huggingface(fx.path("hf_model_only")), str(tmp_path))
    exported = _safetensors(tmp_path)
    stored = _safetensors(fx.path("hf_model_only"))
    _assert_same_tensors(
        {k[len("albert.") :]: v for k, v in exported.items() if k.startswith("albert.")}, stored
    )
    heads = sorted(k for k in exported if not k.startswith("albert."))
    assert heads == [
        "predictions.LayerNorm.bias",
        "predictions.LayerNorm.weight",
        "predictions.bias",
        "predictions.dense.bias",
        "predictions.dense.weight",
        "sop_classifier.classifier.bias",
        "sop_classifier.classifier.weight",
    ]


def test_original_round_trip_is_identical(fx, tmp_path):
    pretrainer = from_original(fx.original_prefix)
    prefix = to_original(pretrainer, str(tmp_path))
    stored = {
        k: v
        for k, v in fx.read_tf1(fx.original_prefix).items()
        if not k.endswith(("adam_m", "adam_v", "global_step"))
    }
    _assert_same_tensors(fx.read_tf1(prefix), stored)
    original = _json(os.path.join(fx.original_dir, "albert_config.json"))
    exported = _json(tmp_path / "albert_config.json")
    assert {k: exported[k] for k in MODEL_KEYS} == {k: original[k] for k in MODEL_KEYS}
    fx.assert_parity(from_original(prefix), fx.expected("original_groups"))


def _random_pretrainer(seed, **overrides):
    config = AlbertConfig(
        **{
            **dict(
                vocab_size=50,
                embedding_size=16,
                hidden_size=16,
                num_hidden_layers=3,
                num_attention_heads=2,
                intermediate_size=24,
                max_position_embeddings=12,
            ),
            **overrides,
        }
    )
    keras.utils.set_random_seed(seed)
    pretrainer = AlbertPretrainer(AlbertModel(config))
    rng = np.random.default_rng(seed)
    for variable in pretrainer.weights:  # LayerNorms and biases away from 1/0 too
        variable.assign(rng.normal(0.0, 0.3, variable.shape).astype("float32"))
    return pretrainer


def _weights(pretrainer):
    prefixes = (pretrainer.backbone.name + "/", pretrainer.name + "/")
    return {
        next(v.path[len(p) :] for p in prefixes if v.path.startswith(p)): v.numpy()
        for v in pretrainer.weights
    }


@pytest.mark.parametrize(
    "export, read", [(to_huggingface, from_huggingface), (to_original, from_original)]
)
def test_unshared_model_without_projection_round_trips(export, read, tmp_path):
    """E == H (no projection in albert_tf) and sharing="none" (one group per layer elsewhere)."""
    pretrainer = _random_pretrainer(1, sharing="none")
    export(pretrainer, str(tmp_path))
    back = read(str(tmp_path))
    assert back.backbone.config.num_hidden_groups == 3
    assert back.backbone.config.has_embedding_projection is False
    ours, theirs = _weights(pretrainer), _weights(back)
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        np.testing.assert_array_equal(theirs[name], ours[name], err_msg=name)
    if export is to_huggingface:  # HF always applies a projection: it must be the identity
        tensors = _safetensors(tmp_path)
        np.testing.assert_array_equal(
            tensors["albert.encoder.embedding_hidden_mapping_in.weight"], np.eye(16)
        )
        assert not tensors["albert.encoder.embedding_hidden_mapping_in.bias"].any()


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_partial_sharing_cannot_be_exported(sharing, tmp_path):
    pretrainer = _random_pretrainer(2, sharing=sharing)
    with pytest.raises(ConversionError, match=f"sharing='{sharing}'.*cannot express"):
        to_huggingface(pretrainer, str(tmp_path))
    assert not os.path.exists(tmp_path / "model.safetensors")
