"""tf.train.Checkpoint and model_dir.save/load round trips, and input errors.

get_config / from_config and `.keras` save/load of every model are checked by
tests/harness.py (tests/model/test_model_harness.py).
"""

import json
import logging
import os
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models import model_dir
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer


@pytest.fixture
def pretrainer(tiny_config, randomize):
    return randomize(
        AlbertPretrainer(AlbertModel(tiny_config(num_hidden_groups=2, inner_group_num=2)))
    )


@pytest.fixture
def pretrain_inputs(make_inputs):
    inputs = make_inputs(lengths=[7, 5])
    inputs["masked_lm_positions"] = np.array([[1, 3], [2, 0]], np.int32)
    return inputs


def assert_same_outputs(a, b, inputs):
    out_a, out_b = a(inputs), b(inputs)
    assert sorted(out_a) == sorted(out_b)
    for key in out_a:
        np.testing.assert_allclose(out_a[key].numpy(), out_b[key].numpy(), atol=1e-6, err_msg=key)


def test_tf_train_checkpoint_round_trip(pretrainer, pretrain_inputs, tmp_path):
    path = tf.train.Checkpoint(model=pretrainer).save(str(tmp_path / "ckpt"))
    fresh = AlbertPretrainer(AlbertModel(pretrainer.backbone.config))
    assert (
        np.abs(
            fresh(pretrain_inputs)["mlm_logits"] - pretrainer(pretrain_inputs)["mlm_logits"]
        ).max()
        > 1e-3
    )
    tf.train.Checkpoint(model=fresh).restore(path).assert_existing_objects_matched()
    assert_same_outputs(fresh, pretrainer, pretrain_inputs)


def test_io_save_load_pretrainer(tiny_config, randomize, pretrain_inputs, tmp_path, spm_model_file):
    # The spm.model must fit the model (1000 pieces, vocab_size 1000).
    pretrainer = randomize(
        AlbertPretrainer(
            AlbertModel(tiny_config(vocab_size=1000, num_hidden_groups=2, inner_group_num=2))
        )
    )
    spm = pathlib.Path(spm_model_file)
    directory = str(tmp_path / "out" / "albert")
    model_dir.save(pretrainer, directory, spm_model=str(spm))
    assert sorted(os.listdir(directory)) == [
        "config.json",
        "pretrainer.weights.h5",
        "spm.model",
        "text.json",
    ]
    assert sorted(os.listdir(tmp_path / "out")) == ["albert"]  # no staging leftovers
    with open(os.path.join(directory, "config.json")) as f:
        assert json.load(f)["hidden_act"] == "gelu"  # the original dialect
    assert open(model_dir.spm_model_path(directory), "rb").read() == spm.read_bytes()
    loaded = model_dir.load(directory)
    assert (
        isinstance(loaded, AlbertPretrainer)
        and loaded.backbone.config == pretrainer.backbone.config
    )
    assert_same_outputs(loaded, pretrainer, pretrain_inputs)
    backbone = model_dir.load_backbone(directory, output_encoder_outputs=True)
    out = backbone(pretrain_inputs)
    np.testing.assert_allclose(
        out["sequence_output"], pretrainer.backbone(pretrain_inputs)["sequence_output"], atol=1e-6
    )
    assert out["encoder_outputs"].shape[0] == 8


def test_io_backbone_only_and_existing_directory(pretrainer, pretrain_inputs, tmp_path, caplog):
    directory = tmp_path / "model_dir"
    model_dir.save(pretrainer, str(directory))
    model_dir.save(pretrainer.backbone, str(directory))  # replaces the directory whole
    assert sorted(os.listdir(directory)) == ["backbone.weights.h5", "config.json", "text.json"]
    assert model_dir.spm_model_path(str(directory)) is None
    with caplog.at_level(logging.WARNING):
        loaded = model_dir.load(str(directory))
    assert "holds a backbone only" in caplog.text
    assert isinstance(loaded, AlbertPretrainer)
    assert_same_outputs(loaded.backbone, pretrainer.backbone, pretrain_inputs)
    backbone = model_dir.load_backbone(str(directory))
    assert_same_outputs(backbone, pretrainer.backbone, pretrain_inputs)


def test_io_errors(pretrainer, tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=f"Model directory not found: {re.escape(missing)}"):
        model_dir.load(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "pretrainer.weights.h5").write_bytes(b"")
    with pytest.raises(
        FileNotFoundError, match="has no config.json; found \\['pretrainer.weights.h5'\\]"
    ):
        model_dir.load(str(empty))
    pretrainer.backbone.config.to_json_file(str(empty / "config.json"))
    (empty / "pretrainer.weights.h5").unlink()
    with pytest.raises(FileNotFoundError, match="has no weights file; found \\['config.json'\\]"):
        model_dir.load(str(empty))
    with pytest.raises(TypeError, match="needs an AlbertPretrainer or AlbertModel, got Dense"):
        model_dir.save(keras.layers.Dense(2), str(tmp_path / "x"))
    with pytest.raises(FileNotFoundError, match="spm_model not found"):
        model_dir.save(pretrainer, str(tmp_path / "y"), spm_model=str(tmp_path / "none.model"))


def test_input_errors(tiny_config, make_inputs, pretrainer):
    model = AlbertModel(tiny_config())  # max_position_embeddings = 16
    with pytest.raises(ValueError, match="sequence length 17 exceeds max_position_embeddings 16"):
        model(make_inputs(seq=17))
    inputs = make_inputs()
    with pytest.raises(KeyError, match=r"missing input key\(s\) \['input_mask'\]"):
        model({k: v for k, v in inputs.items() if k != "input_mask"})
    with pytest.raises(TypeError, match="inputs must be a dict"):
        model(inputs["input_word_ids"])
    with pytest.raises(
        TypeError, match="'input_word_ids' must be an integer tensor, got dtype float32"
    ):
        model({**inputs, "input_word_ids": inputs["input_word_ids"].astype(np.float32)})
    with pytest.raises(
        ValueError, match=r"'input_mask' has shape \(2, 6\) but input_word_ids has shape \(2, 7\)"
    ):
        model({**inputs, "input_mask": inputs["input_mask"][:, :6]})
    with pytest.raises(KeyError, match="missing input key 'masked_lm_positions'"):
        pretrainer(inputs)
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
    traced = tf.function(lambda x: model(x)["sequence_output"], input_signature=[spec])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="sequence length exceeds max_position_embeddings 16"
    ):
        traced(make_inputs(seq=20))
