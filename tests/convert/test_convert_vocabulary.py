"""convert_checkpoint --spm_model_file: the vocabulary must fit the converted model, and
converting into an existing --output_dir replaces it whole (no stale spm.model)."""

import os

import pytest

from albert_tf.convert.checkpoint import convert_checkpoint
from albert_tf.text.tokenizer import VocabularyError


@pytest.fixture(scope="module")
def huggingface_dir(tmp_path_factory):
    """A Hugging Face directory of a tiny model whose vocab_size (1000) fits the spm fixture."""
    from albert_tf.config import AlbertConfig
    from albert_tf.convert.huggingface import to_huggingface
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    config = AlbertConfig(
        vocab_size=1000,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=16,
    )
    directory = str(tmp_path_factory.mktemp("vocab") / "huggingface")
    to_huggingface(AlbertPretrainer(AlbertModel(config)), directory)
    return directory


def test_converting_again_leaves_no_stale_vocabulary(huggingface_dir, spm_model_file, tmp_path):
    out = tmp_path / "albert"
    convert_checkpoint("huggingface", huggingface_dir, str(out), spm_model=spm_model_file)
    assert sorted(os.listdir(out)) == [
        "config.json",
        "pretrainer.weights.h5",
        "spm.model",
        "text.json",
    ]
    convert_checkpoint("huggingface", huggingface_dir, str(out))
    assert sorted(os.listdir(out)) == ["config.json", "pretrainer.weights.h5", "text.json"]
    assert os.listdir(tmp_path) == ["albert"]


def test_a_vocabulary_of_another_model_is_refused(huggingface_dir, spm_model_file, fx, tmp_path):
    out = tmp_path / "albert"
    convert_checkpoint("huggingface", huggingface_dir, str(out), spm_model=spm_model_file)
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    other = fx.path("hf_shared_tanh")  # vocab_size 99
    with pytest.raises(VocabularyError) as error:
        convert_checkpoint("huggingface", other, str(out), spm_model=spm_model_file)
    assert str(error.value) == (
        f"--spm_model_file={spm_model_file} has 1000 pieces but the model ({other}) has "
        "vocab_size 99: the tokenizer does not belong to this model"
    )
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
