"""A model directory is written whole: no stale file survives a save, a failed or killed save
leaves the previous directory, a directory holding more than a model is refused, and the
spm.model must fit the model (albert_tf.models.model_dir.save)."""

import os

import pytest

from albert_tf.config import AlbertConfig
from albert_tf.models import model_dir
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.text.tokenizer import VocabularyError

TINY = dict(
    vocab_size=1000,
    embedding_size=8,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=16,
)


@pytest.fixture(scope="module")
def pretrainer():
    return AlbertPretrainer(AlbertModel(AlbertConfig(**TINY)))


def _contents(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_a_save_replaces_the_whole_directory(pretrainer, spm_model_file, tmp_path):
    directory = tmp_path / "model"
    model_dir.save(pretrainer, str(directory), spm_model=spm_model_file)
    assert sorted(os.listdir(directory)) == [
        "config.json",
        "pretrainer.weights.h5",
        "spm.model",
        "text.json",
    ]
    model_dir.save(pretrainer.backbone, str(directory))  # no vocabulary this time: none is kept
    assert sorted(os.listdir(directory)) == ["backbone.weights.h5", "config.json", "text.json"]
    assert model_dir.spm_model_path(str(directory)) is None
    assert os.listdir(tmp_path) == ["model"]  # nothing staged or set aside is left


def test_a_failed_or_killed_save_leaves_the_previous_directory(
    pretrainer, spm_model_file, tmp_path
):
    directory = tmp_path / "model"
    model_dir.save(pretrainer, str(directory), spm_model=spm_model_file)
    before = _contents(directory)
    killed = tmp_path / ".tmp-model-4242-deadbeef"  # what a SIGKILLed save leaves behind
    killed.mkdir()
    (killed / "config.json").write_text("{}")

    def interrupted(path):
        raise KeyboardInterrupt  # after config.json and the weights were written

    with pytest.raises(KeyboardInterrupt):
        model_dir.save(
            pretrainer.backbone, str(directory), extra_files={"model.keras": interrupted}
        )
    assert _contents(directory) == before
    assert sorted(os.listdir(tmp_path)) == ["model"]  # the killed save's staging is gone too


def test_a_directory_with_other_files_is_refused(pretrainer, tmp_path):
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "ckpt-1.index").write_text("a checkpoint")
    (directory / "config.json").write_text("{}")
    with pytest.raises(model_dir.ModelDirectoryError) as error:
        model_dir.save(pretrainer, str(directory))
    assert str(error.value) == (
        f"{directory} holds more than a saved model (ckpt-1.index); a "
        "model directory is replaced whole: save to a new directory or "
        "remove those files"
    )
    assert sorted(os.listdir(directory)) == ["ckpt-1.index", "config.json"]


def test_the_vocabulary_must_fit_the_model(spm_model_file, tmp_path):
    small = AlbertModel(AlbertConfig(**dict(TINY, vocab_size=40)))
    directory = tmp_path / "small"
    with pytest.raises(VocabularyError) as error:
        model_dir.save(small, str(directory), spm_model=spm_model_file)
    assert str(error.value) == (
        f"spm_model={spm_model_file} has 1000 pieces but the model (the AlbertModel saved "
        f"to {directory}) has vocab_size 40: the tokenizer does not belong to this model"
    )
    assert not directory.exists()
