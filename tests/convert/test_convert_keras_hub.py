"""keras-hub presets in: parity with keras-hub 0.32 on the committed fixtures (no keras_hub import).

fixtures/generate_keras_hub_fixtures.py wrote the presets with keras-hub's `save_to_preset` and
keras-hub's outputs on a padded batch, its tokenizer's ids and its classifier's probabilities;
albert_tf must agree to 1e-5 and give the same ids (text.json: lower_case and albert_rules
false). Writing presets that keras-hub loads is tested in test_convert_keras_hub_export.py.
"""

import json
import logging
import os
import shutil
import tarfile

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.convert import keras_hub
from albert_tf.convert.checkpoint import convert_checkpoint, load_head_model, read_model
from albert_tf.convert.keras_hub import TEXT_SETTINGS, from_keras_hub
from albert_tf.convert.weights import ConversionError
from albert_tf.models import model_dir
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.sources.resolver import find_layout
from albert_tf.text import SentencePieceTokenizer, TextTokenizer
from albert_tf.text.tokenizer import VocabularyError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
BACKBONE = os.path.join(FIXTURES, "keras_hub_backbone")
CLASSIFIER = os.path.join(FIXTURES, "keras_hub_classifier")
MASKED_LM = os.path.join(FIXTURES, "keras_hub_masked_lm")
VOCABULARY = os.path.join(BACKBONE, keras_hub.VOCABULARY_FILE)
TOLERANCE = 1e-5


def expected(directory):
    with np.load(os.path.join(directory, "expected.npz")) as data:
        return dict(data)


def inputs(values):
    return {
        "input_word_ids": values["token_ids"],
        "input_mask": values["padding_mask"],
        "input_type_ids": values["segment_ids"],
    }


def assert_backbone_parity(backbone, values):
    out = backbone(inputs(values))
    valid = values["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        out["sequence_output"].numpy()[valid],
        values["sequence_output"][valid],
        rtol=0,
        atol=TOLERANCE,
    )
    if "pooled_output" in values:
        np.testing.assert_allclose(
            out["pooled_output"].numpy(), values["pooled_output"], rtol=0, atol=TOLERANCE
        )


def keras_hub_ids(values):
    return [
        row.tolist() for row in np.split(values["text_ids"], np.cumsum(values["text_lengths"])[:-1])
    ]


@pytest.fixture
def classifier_preset(tmp_path):
    """The classifier fixture with its vocabulary (the backbone fixture's, the same tokenizer,
    left out of the committed copy to keep the fixtures small)."""
    directory = tmp_path / "keras_hub_classifier"
    shutil.copytree(CLASSIFIER, directory)
    os.makedirs(directory / "assets" / "tokenizer")
    shutil.copy(VOCABULARY, directory / keras_hub.VOCABULARY_FILE)
    return str(directory)


def edited_copy(tmp_path, source, edit_config=None, vocabulary=None):
    directory = tmp_path / os.path.basename(source)
    shutil.copytree(source, directory)
    if edit_config is not None:
        values = json.loads((directory / "config.json").read_text())
        edit_config(values)
        (directory / "config.json").write_text(json.dumps(values))
    if vocabulary is not None:
        shutil.copy(vocabulary, directory / keras_hub.VOCABULARY_FILE)
    return str(directory)


def test_backbone_preset_parity(caplog):
    with caplog.at_level(logging.WARNING):
        pretrainer = from_keras_hub(BACKBONE)
    config = pretrainer.backbone.config
    assert (config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num) == (4, 2, 2)
    assert (config.embedding_size, config.hidden_size, config.hidden_act) == (16, 32, "gelu_tanh")
    assert_backbone_parity(pretrainer.backbone, expected(BACKBONE))
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "has no sentence_order weights" in warned and "has no masked_lm weights" in warned


def test_masked_lm_preset_parity(caplog):
    """The head maps exactly (keras-hub with albert_tf's epsilon 1e-12 agrees to 1e-5); with
    keras-hub's own MLM LayerNorm epsilon 1e-5 the logits differ by about 1e-4."""
    with caplog.at_level(logging.WARNING):
        pretrainer = from_keras_hub(MASKED_LM)
    values = expected(MASKED_LM)
    assert_backbone_parity(pretrainer.backbone, values)
    logits = pretrainer({**inputs(values), "masked_lm_positions": values["mask_positions"]})[
        "mlm_logits"
    ].numpy()
    np.testing.assert_allclose(logits, values["mlm_logits_eps_1e12"], rtol=0, atol=TOLERANCE)
    assert 1e-6 < np.abs(logits - values["mlm_logits"]).max() < 1e-3
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "epsilon 1e-05" in warned and f"has no {keras_hub.VOCABULARY_FILE}" in warned


def test_token_ids_equal_keras_hubs_tokenizer():
    """keras-hub feeds the raw text to SentencePiece: albert_tf's Python and in-graph tokenizers
    with the preset's text settings give its ids (ALBERT's own rules would not)."""
    values = expected(BACKBONE)
    texts = [str(t) for t in values["texts"]]
    ids = keras_hub_ids(values)
    python = SentencePieceTokenizer(VOCABULARY, **TEXT_SETTINGS)
    assert [python.encode_ids(t) for t in texts] == ids
    graph = TextTokenizer(VOCABULARY, **TEXT_SETTINGS)
    assert graph(tf.constant(texts)).to_list() == ids
    albert = SentencePieceTokenizer(VOCABULARY)
    assert sum(albert.encode_ids(t) != i for t, i in zip(texts, ids)) >= 5


def test_converted_directory_records_keras_hubs_text_settings(tmp_path):
    assert find_layout(BACKBONE) == ("keras_hub", BACKBONE, VOCABULARY)
    out = str(tmp_path / "converted")
    convert_checkpoint("keras_hub", BACKBONE, out)
    assert model_dir.text_settings(out) == TEXT_SETTINGS
    with open(model_dir.spm_model_path(out), "rb") as f, open(VOCABULARY, "rb") as g:
        assert f.read() == g.read()
    values = expected(BACKBONE)
    texts = [str(t) for t in values["texts"]]
    preprocessor = AlbertPreprocessor.from_pretrained(out, max_seq_length=64)
    assert (preprocessor.lower_case, preprocessor.albert_rules) == (False, False)
    word_ids = preprocessor(texts)["input_word_ids"].numpy()
    ids = keras_hub_ids(values)
    assert [row[1 : 1 + len(i)].tolist() for row, i in zip(word_ids, ids)] == ids
    assert_backbone_parity(model_dir.load_backbone(out), values)


def test_classifier_preset_predicts_keras_hubs_probabilities(classifier_preset):
    values = expected(CLASSIFIER)
    model = from_keras_hub(classifier_preset)
    assert isinstance(model, AlbertClassifier)
    assert (model.num_classes, model.dropout_rate) == (3, 0.2)
    assert model.preprocessor.max_seq_length == 16 and not model.preprocessor.albert_rules
    assert_backbone_parity(model.backbone, values)
    np.testing.assert_allclose(
        model(inputs(values)).numpy(), values["logits"], rtol=0, atol=TOLERANCE
    )
    texts = [str(t) for t in values["texts"]]
    probabilities = model.predict(texts, verbose=0)["probabilities"]
    np.testing.assert_allclose(probabilities, values["text_probabilities"], rtol=0, atol=TOLERANCE)
    backbone_only = read_model("keras_hub", classifier_preset, ignore_variables=[r"^logits/"])
    assert type(backbone_only).__name__ == "AlbertPretrainer"


def test_classifier_preset_by_address(classifier_preset, tmp_path, monkeypatch):
    """A preset archive resolves (find_layout: keras_hub) into a cached albert_tf directory with
    the head (model.keras), the vocabulary and keras-hub's text settings; from_pretrained then
    tokenizes as keras-hub."""
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "home"))
    archive = str(tmp_path / "albert_classifier_preset.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(classifier_preset, arcname="albert_classifier_preset")
    from albert_tf import sources

    resolved = sources.resolve(archive)
    assert resolved.conversion.startswith("keras-hub preset")
    assert model_dir.text_settings(resolved.directory) == TEXT_SETTINGS
    values = expected(CLASSIFIER)
    texts = [str(t) for t in values["texts"]]
    head = load_head_model(resolved.directory)  # model.keras, its preprocessor inside
    probabilities = tf.nn.softmax(head(head.preprocessor(texts))).numpy()
    np.testing.assert_allclose(probabilities, values["text_probabilities"], rtol=0, atol=TOLERANCE)
    fresh = AlbertClassifier.from_pretrained(archive, num_classes=3)
    assert (fresh.preprocessor.lower_case, fresh.preprocessor.albert_rules) == (False, False)
    assert_backbone_parity(fresh.backbone, values)


def test_fine_tuning_takes_the_recorded_lower_case(tmp_path):
    from albert_tf.finetune.params import FinetuneParams
    from albert_tf.finetune.runner import text_settings

    out = str(tmp_path / "converted")
    convert_checkpoint("keras_hub", BACKBONE, out)
    params = FinetuneParams(output_dir=str(tmp_path / "run"), init_checkpoint=out)
    assert text_settings(params) == TEXT_SETTINGS
    params.do_lower_case = True  # the flag, given, overrides the record
    assert text_settings(params) == {**TEXT_SETTINGS, "lower_case": True}
    params = FinetuneParams(output_dir=str(tmp_path / "run"), preset="albert_tiny")
    assert text_settings(params) == {"tex_quotes": False, "lower_case": True}


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda v: v.update(class_name="BertBackbone", registered_name="keras_hub>BertBackbone"),
            r"holds a keras-hub BertBackbone .*reads AlbertBackbone",
        ),
        (lambda v: v["config"].update(rope_theta=1.0), r"argument 'rope_theta' is not one"),
        (
            lambda v: v["config"].update(num_heads=4),
            r"query_dense/vars/0 has shape \[32, 2, 16\] but .*needs \[32, 4, 8\] "
            r"\(hidden_size=32, num_attention_heads=4\)",
        ),
        (
            lambda v: v.update(
                module="keras.src.models", class_name="Functional", registered_name=None
            ),
            r"not a keras-hub preset file",
        ),
    ],
)
def test_unreadable_presets_are_refused_in_one_line(tmp_path, edit, message):
    directory = edited_copy(tmp_path, BACKBONE, edit_config=edit)
    with pytest.raises(ConversionError, match=message) as raised:
        from_keras_hub(directory)
    assert "\n" not in str(raised.value)


def test_a_vocabulary_of_another_size_is_refused_naming_the_file(tmp_path, spm_model_file):
    directory = edited_copy(tmp_path, BACKBONE, vocabulary=spm_model_file)
    with pytest.raises(VocabularyError, match=r"vocabulary\.spm has 1000 pieces but .*300"):
        from_keras_hub(directory)


def test_classifier_from_pretrained_on_the_task_preset_directory(
    classifier_preset, tmp_path, monkeypatch
):
    """`AlbertClassifier.from_pretrained(task_preset_dir)`: the preset's head and class count,
    keras-hub's probabilities from `predict` on text; `num_classes` asks for a new head."""
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "home"))
    values = expected(CLASSIFIER)
    texts = [str(t) for t in values["texts"]]
    model = AlbertClassifier.from_pretrained(str(classifier_preset))
    assert model.num_classes == 3
    probabilities = model.predict(texts, verbose=0)["probabilities"]
    np.testing.assert_allclose(probabilities, values["text_probabilities"], rtol=0, atol=TOLERANCE)
    again = AlbertClassifier.from_pretrained(str(classifier_preset), num_classes=5)
    assert again.num_classes == 5  # a new head on the preset's backbone
    assert_backbone_parity(again.backbone, values)
