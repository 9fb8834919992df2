"""Wrong checkpoints fail with a message naming the variable; nothing is silently skipped."""

import re

import numpy as np
import pytest

from albert_tf.convert import ConversionError, from_huggingface, from_original

FFN0 = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"
GROUP1 = "bert/encoder/transformer/group_1/inner_group_1/ffn_1/intermediate/dense/kernel"


def _pop(name):
    return lambda tensors: tensors.pop(name)


def _set(name, value):
    def edit(values):
        values[name] = value

    return edit


# ---------------------------------------------------------------- Hugging Face
def test_missing_variable_is_named(hf_copy):
    directory = hf_copy("hf_shared_tanh", edit_tensors=_pop(FFN0))
    with pytest.raises(
        ConversionError,
        match=rf"missing variable {re.escape(FFN0)} for the "
        rf"encoder weights",
    ):
        from_huggingface(directory)


def test_missing_variable_keeps_the_stored_name_in_model_layout(hf_copy):
    name = "encoder.albert_layer_groups.0.albert_layers.1.attention.key.bias"
    directory = hf_copy("hf_model_only", edit_tensors=_pop(name))
    with pytest.raises(ConversionError, match=rf"missing variable albert\.{re.escape(name)}"):
        from_huggingface(directory)


def test_half_present_head_is_an_error(hf_copy):
    directory = hf_copy("hf_shared_tanh", edit_tensors=_pop("predictions.dense.bias"))
    with pytest.raises(
        ConversionError, match=r"missing variable predictions\.dense\.bias for the masked_lm"
    ):
        from_huggingface(directory)


def test_wrong_shape_is_named(hf_copy):
    directory = hf_copy(
        "hf_shared_tanh", edit_tensors=_set("albert.pooler.weight", np.zeros([32, 31], "float32"))
    )
    with pytest.raises(
        ConversionError,
        match=r"variable albert\.pooler\.weight has shape "
        r"\[32, 31\] but .* needs \[32, 32\] "
        r"\(hidden_size=32\)",
    ):
        from_huggingface(directory)


def test_config_mismatch_names_the_variable_and_the_field(hf_copy):
    directory = hf_copy("hf_shared_tanh", edit_config=_set("embedding_size", 128))
    with pytest.raises(
        ConversionError,
        match=r"albert\.embeddings\.word_embeddings\.weight has "
        r"shape \[99, 16\] but the model built from "
        r".*config\.json needs \[99, 128\] "
        r"\(vocab_size=99, embedding_size=128\): the "
        r"config does not match",
    ):
        from_huggingface(directory)


def test_unexpected_variable_is_named_unless_ignored(hf_copy, fx):
    extra = "classifier.weight"
    directory = hf_copy("hf_shared_tanh", edit_tensors=_set(extra, np.zeros([3, 32], "float32")))
    with pytest.raises(
        ConversionError,
        match=r"unexpected variable classifier\.weight is not "
        r"used by the model built from .*config\.json",
    ):
        from_huggingface(directory)
    pretrainer = from_huggingface(directory, ignore_variables=[r"^classifier\."])
    fx.assert_parity(pretrainer, fx.expected("hf_shared_tanh"))


def test_fewer_groups_in_config_than_checkpoint(hf_copy):
    directory = hf_copy("hf_groups_erf", edit_config=_set("num_hidden_groups", 1))
    with pytest.raises(
        ConversionError,
        match=r"unexpected variable albert\.encoder\."
        r"albert_layer_groups\.1\..* up to group 1, inner "
        r"group 1, but the config gives "
        r"num_hidden_groups=1, inner_group_num=2",
    ):
        from_huggingface(directory)


def test_tied_decoder_copies_are_checked(hf_copy, fx):
    def tied(tensors):
        tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"]
        tensors["predictions.decoder.bias"] = tensors.pop("predictions.bias")

    fx.assert_parity(
        from_huggingface(hf_copy("hf_shared_tanh", edit_tensors=tied)),
        fx.expected("hf_shared_tanh"),
    )

    def untied(tensors):
        tensors["predictions.decoder.weight"] = np.ones([99, 16], "float32")

    with pytest.raises(
        ConversionError,
        match=r"predictions\.decoder\.weight differs from "
        r"albert\.embeddings\.word_embeddings\.weight",
    ):
        from_huggingface(hf_copy("hf_masked_lm", edit_tensors=untied))


def test_learned_projection_with_equal_sizes_is_an_error(hf_copy):
    def square(values):
        values["embedding_size"] = 32

    def tensors(values):
        for name in list(values):
            if "embeddings." in name and "LayerNorm" not in name and "mapping" not in name:
                values[name] = np.ones([values[name].shape[0], 32], "float32")
            elif "embeddings.LayerNorm" in name:
                values[name] = np.ones([32], "float32")
        values["embeddings.word_embeddings.weight"] = np.ones([99, 32], "float32")
        values["encoder.embedding_hidden_mapping_in.weight"] = np.ones([32, 32], "float32")

    directory = hf_copy("hf_model_only", edit_tensors=tensors, edit_config=square)
    with pytest.raises(
        ConversionError,
        match=r"encoder\.embedding_hidden_mapping_in\.weight is a "
        r"learned projection but embedding_size == "
        r"hidden_size \(32\)",
    ):
        from_huggingface(directory)


def test_missing_weights_file(hf_copy):
    directory = hf_copy("hf_shared_tanh")
    import os

    os.remove(os.path.join(directory, "model.safetensors"))
    with pytest.raises(
        FileNotFoundError,
        match=r"No model\.safetensors at .* \(found: "
        r"config\.json, expected\.npz\)",
    ):
        from_huggingface(directory)


# ---------------------------------------------------------------- original TF1
def test_original_missing_variable(original_copy):
    name = "cls/predictions/output_bias"
    prefix, config = original_copy(edit_arrays=_pop(name))
    with pytest.raises(ConversionError, match=rf"missing variable {name} for the masked_lm"):
        from_original(prefix, config)


def test_original_config_mismatch(original_copy):
    prefix, config = original_copy(edit_config=_set("intermediate_size", 64))
    with pytest.raises(
        ConversionError,
        match=r"bert/encoder/transformer/group_0/inner_group_0/"
        r"ffn_1/intermediate/dense/kernel has shape "
        r"\[32, 37\] but .*albert_config\.json needs "
        r"\[32, 64\] \(hidden_size=32, "
        r"intermediate_size=64\)",
    ):
        from_original(prefix, config)


def test_original_more_groups_in_config_than_checkpoint(original_copy):
    prefix, config = original_copy(edit_config=_set("num_hidden_groups", 4))
    with pytest.raises(
        ConversionError,
        match=r"missing variable bert/encoder/transformer/"
        r"group_2/.*num_hidden_groups=4",
    ):
        from_original(prefix, config)


def test_original_unexpected_variable_but_slots_are_ignored(original_copy):
    def extra(arrays):
        arrays["bert/encoder/transformer/group_0/inner_group_0/extra_scale"] = np.ones([3], "f")
        arrays["bert/encoder/transformer/group_0/inner_group_0/extra_scale/adam_m"] = np.ones(
            [3], "f"
        )

    prefix, config = original_copy(edit_arrays=extra)
    with pytest.raises(
        ConversionError,
        match=r"unexpected variable bert/encoder/transformer/"
        r"group_0/inner_group_0/extra_scale is not used by "
        r"the model built from .*albert_config\.json; 1 "
        r"unused in all",
    ) as info:
        from_original(prefix, config)
    assert "adam_m" not in str(info.value)


def test_original_projection_when_e_equals_h(original_copy):
    def square(values):
        values["embedding_size"] = 32

    prefix, config = original_copy(edit_config=square)
    with pytest.raises(
        ConversionError,
        match=r"bert/embeddings/word_embeddings has shape "
        r"\[99, 16\] but .* needs \[99, 32\]",
    ):
        from_original(prefix, config)


def test_original_missing_checkpoint(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=r"No TF1 checkpoint at .*model\.ckpt-1: "
        r"expected the prefix of",
    ):
        from_original(str(tmp_path / "model.ckpt-1"), str(tmp_path / "albert_config.json"))


def test_albert_tf_sharing_in_a_foreign_config(hf_copy):
    directory = hf_copy("hf_shared_tanh", edit_config=_set("sharing", "attention"))
    with pytest.raises(
        ConversionError,
        match=r"config\.json: sharing='attention' is an "
        r"albert_tf setting",
    ):
        from_huggingface(directory)
