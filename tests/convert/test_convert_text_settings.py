"""A model directory records its text settings (text.json): a model converted from Hugging Face
tokenizes with HF's TeX-quote rule wherever a tokenizer is built from the directory, one from
the original's checkpoint (or an older directory without the record) without it."""

import json
import os

import numpy as np
import pytest

from albert_tf.convert.checkpoint import convert_checkpoint
from albert_tf.models import model_dir
from albert_tf.models.preprocessor import AlbertPreprocessor

QUOTED = "He said ``quoted'' twice."


@pytest.fixture(scope="module")
def converted(tmp_path_factory, spm_model_file):
    """{"huggingface": dir, "original": dir}: one tiny model (vocab_size 1000, fitting the spm
    fixture) converted to albert_tf from a Hugging Face directory and from a TF1 checkpoint."""
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
    root = tmp_path_factory.mktemp("text_settings")
    hf_dir, tf1_dir = str(root / "hf"), str(root / "tf1")
    to_huggingface(AlbertPretrainer(AlbertModel(config)), hf_dir)
    out = {"huggingface": str(root / "from_hf"), "original": str(root / "from_tf1")}
    convert_checkpoint("huggingface", hf_dir, out["huggingface"], spm_model=spm_model_file)
    convert_checkpoint("huggingface", hf_dir, tf1_dir, target_format="original")
    convert_checkpoint("original", tf1_dir, out["original"], spm_model=spm_model_file)
    return out


def _ids(preprocessor, text=QUOTED):
    import tensorflow as tf

    return preprocessor(tf.constant([text]))["input_word_ids"].numpy()[0].tolist()


def _text_json(directory):
    with open(os.path.join(directory, model_dir.TEXT_FILE)) as f:
        return json.load(f)


@pytest.mark.parametrize("fixture", ["hf_shared_tanh", "hf_sequence_classification"])
def test_a_huggingface_fixture_converts_to_a_directory_recording_tex_quotes(fx, fixture, tmp_path):
    out = str(tmp_path / "albert")
    convert_checkpoint("huggingface", fx.path(fixture), out)
    assert _text_json(out) == {"tex_quotes": True}
    assert model_dir.text_settings(out) == {"tex_quotes": True}


def test_an_original_checkpoint_converts_to_a_directory_recording_the_default(fx, tmp_path):
    out = str(tmp_path / "albert")
    convert_checkpoint("original", fx.original_prefix, out)
    assert _text_json(out) == {"tex_quotes": False}
    assert model_dir.text_settings(out) == model_dir.DEFAULT_TEXT_SETTINGS


def test_a_preprocessor_from_the_directory_follows_its_record(converted, spm_model_file):
    huggingface = _ids(AlbertPreprocessor(spm_model_file, max_seq_length=16, tex_quotes=True))
    original = _ids(AlbertPreprocessor(spm_model_file, max_seq_length=16))
    assert huggingface != original  # the fixture's vocabulary tells the two rules apart
    from_hf = AlbertPreprocessor.from_pretrained(converted["huggingface"], max_seq_length=16)
    assert from_hf.tex_quotes and _ids(from_hf) == huggingface
    from_tf1 = AlbertPreprocessor.from_pretrained(converted["original"], max_seq_length=16)
    assert not from_tf1.tex_quotes and _ids(from_tf1) == original
    assert not AlbertPreprocessor.from_pretrained(
        converted["huggingface"], max_seq_length=16, tex_quotes=False
    ).tex_quotes  # an explicit argument wins


def test_fine_tuning_tokenizes_as_the_directory_records(converted, spm_model_file, tmp_path):
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
    from albert_tf.finetune.runner import FinetuneParams, run_finetuning
    from albert_tf.finetune.task import task_from_description

    rows = [(QUOTED, "yes"), ("No quotes here.", "no")] * 2
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    expected = {
        "huggingface": _ids(AlbertPreprocessor(spm_model_file, max_seq_length=16, tex_quotes=True)),
        "original": _ids(AlbertPreprocessor(spm_model_file, max_seq_length=16)),
    }
    for source, directory in converted.items():
        params = FinetuneParams(
            output_dir=str(tmp_path / source),
            init_checkpoint=directory,
            max_seq_length=16,
            do_train=False,
            eval_batch_size=4,
            verbose=0,
        )
        data = ClassificationData(
            task_name="quotes", dev_file=str(dev), text_column="sentence", labels=["no", "yes"]
        )
        result = run_finetuning(params, SentenceClassificationTask(data))
        with open(os.path.join(result["output_dir"], "finetune.json")) as f:
            task = task_from_description(json.load(f)["task"], result["output_dir"])
        assert task.preprocessor.tex_quotes == (source == "huggingface")
        assert _ids(task.preprocessor) == expected[source], source


def test_an_older_directory_without_the_record_loads_with_the_default(converted, tmp_path):
    import shutil

    older = str(tmp_path / "older")
    shutil.copytree(converted["huggingface"], older)
    os.remove(os.path.join(older, model_dir.TEXT_FILE))
    assert model_dir.text_settings(older) == {"tex_quotes": False}
    assert not AlbertPreprocessor.from_pretrained(older).tex_quotes
    model = model_dir.load(older)
    reference = model_dir.load(converted["huggingface"])
    np.testing.assert_array_equal(
        model.backbone.weights[0].numpy(), reference.backbone.weights[0].numpy()
    )
    model_dir.save(model, older)  # an older directory is replaced whole, now with the record
    assert _text_json(older) == {"tex_quotes": False}


def test_a_bad_record_is_an_error_naming_the_file(converted, tmp_path):
    import shutil

    directory = str(tmp_path / "bad")
    shutil.copytree(converted["original"], directory)
    path = os.path.join(directory, model_dir.TEXT_FILE)
    with open(path, "w") as f:
        json.dump({"tex_quotes": "yes"}, f)
    with pytest.raises(model_dir.ModelDirectoryError) as error:
        model_dir.text_settings(directory)
    assert str(error.value) == f'{path}: tex_quotes must be true or false, got "yes"'
