"""TF2 Hub ALBERT encoders (TF Model Garden's export_tfhub SavedModels) read by albert_tf.

The fixtures were written by fixtures/generate_tfhub_fixtures.py with Model Garden's own exporter
(tf-models-official 2.20); these tests need neither Model Garden nor tensorflow_text, and never
run the SavedModel's graph (the committed saved_model.pb has none).
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.convert import tfhub
from albert_tf.convert.weights import ConversionError
from albert_tf.errors import UserError
from albert_tf.models.backbone import AlbertModel

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
ALBERT = os.path.join(FIXTURES, "tfhub_albert_tiny")
BERT = os.path.join(FIXTURES, "tfhub_bert_tiny")
SPM_ASSET = "assets/tiny-clean.model"
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def pretrainer():
    return tfhub.from_tfhub(ALBERT)


@pytest.fixture(scope="module")
def expected():
    with np.load(f"{ALBERT}/expected.npz") as data:
        return dict(data)


def _copy(tmp_path, source=ALBERT):
    target = tmp_path / "export"
    shutil.copytree(source, target)
    return target


def _metadata_into_object_graph(directory, edit=None):
    """Rewrites `directory` as TF < 2.5 wrote it: the Keras metadata in saved_model.pb's object
    graph, no keras_metadata.pb. `edit(record)` may change the encoder's record on the way."""
    records = tfhub.read_keras_metadata(str(directory / tfhub.KERAS_METADATA_FILE))
    path = directory / tfhub.SAVED_MODEL_FILE
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(path.read_bytes())
    nodes = saved_model.meta_graphs[0].object_graph_def.nodes
    for node_id, _, identifier, text in records:
        record = json.loads(text)
        if edit is not None and record.get("class_name") in tfhub.ALBERT_ENCODERS:
            edit(record)
        assert nodes[node_id].user_object.identifier == identifier
        nodes[node_id].user_object.metadata = json.dumps(record)
    path.write_bytes(saved_model.SerializeToString())
    (directory / tfhub.KERAS_METADATA_FILE).unlink()


def test_outputs_equal_model_garden_on_a_padded_batch(pretrainer, expected):
    inputs = {k: expected[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    assert not expected["input_mask"].all()  # the batch is padded
    backbone = pretrainer.backbone(inputs)
    mlm_logits = pretrainer(dict(inputs, masked_lm_positions=expected["masked_lm_positions"]))[
        "mlm_logits"
    ]
    ours = {
        "sequence_output": backbone["sequence_output"],  # padded positions too
        "pooled_output": backbone["pooled_output"],
        "mlm_logits": mlm_logits,
    }
    for key, value in ours.items():
        np.testing.assert_allclose(value, expected[key], rtol=0, atol=TOLERANCE, err_msg=key)

    # Every one of the 3 applications of the shared block, as Model Garden's encoder_outputs.
    layers = AlbertModel(pretrainer.backbone.config, output_encoder_outputs=True)
    layers.set_weights(pretrainer.backbone.get_weights())
    encoder_outputs = layers(inputs)["encoder_outputs"]
    assert len(encoder_outputs) == expected["encoder_outputs"].shape[0] == 3
    for i, output in enumerate(encoder_outputs):
        np.testing.assert_allclose(
            output, expected["encoder_outputs"][i], rtol=0, atol=TOLERANCE, err_msg=f"layer {i}"
        )


def test_config_from_shapes_and_the_recorded_encoder_config(pretrainer):
    config = pretrainer.backbone.config
    assert (config.vocab_size, config.embedding_size, config.hidden_size) == (320, 8, 16)
    assert (config.num_hidden_layers, config.num_attention_heads, config.intermediate_size) == (
        3,
        4,
        24,
    )
    assert (config.num_hidden_groups, config.inner_group_num, config.sharing) == (1, 1, "all")
    assert config.hidden_act == "gelu_tanh"  # Model Garden's "gelu" (Text>gelu)
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.1, 0.1)
    assert (config.max_position_embeddings, config.type_vocab_size) == (32, 2)


def test_sentencepiece_model_and_text_settings(pretrainer):
    import sentencepiece as spm

    path = tfhub.spm_model_path(ALBERT)
    assert path == f"{ALBERT}/{SPM_ASSET}"
    processor = spm.SentencePieceProcessor(model_file=path)
    assert processor.get_piece_size() == pretrainer.backbone.config.vocab_size
    assert [processor.id_to_piece(i) for i in (0, 2, 3, 4)] == ["<pad>", "[CLS]", "[SEP]", "[MASK]"]
    assert tfhub.TEXT_SETTINGS == {"tex_quotes": False, "lower_case": True, "albert_rules": True}


def test_missing_sentencepiece_asset_is_one_line_naming_the_file(tmp_path):
    directory = _copy(tmp_path)
    (directory / SPM_ASSET).unlink()
    with pytest.raises(ConversionError) as error:
        tfhub.from_tfhub(str(directory))
    message = str(error.value)
    assert isinstance(error.value, UserError)
    assert "\n" not in message
    assert f"{directory}/{SPM_ASSET} is missing" in message
    assert tfhub.spm_model_path(str(directory), required=False) is None


def test_bert_encoder_is_refused_naming_it():
    with pytest.raises(ConversionError, match=r"holds a Text>BertEncoder.*not an ALBERT encoder"):
        tfhub.from_tfhub(BERT)


def test_detection_by_files(tmp_path, fx):
    assert tfhub.is_tfhub_saved_model(ALBERT)
    assert tfhub.is_tfhub_saved_model(BERT)  # a Hub SavedModel; from_tfhub refuses it
    assert not tfhub.is_tfhub_saved_model(fx.path("hf_shared_tanh"))
    assert not tfhub.is_tfhub_saved_model(fx.original_dir)
    assert not tfhub.is_tfhub_saved_model(str(tmp_path / "absent"))
    only_graph = tmp_path / "only_graph"
    only_graph.mkdir()
    shutil.copy(f"{ALBERT}/{tfhub.SAVED_MODEL_FILE}", only_graph)
    assert not tfhub.is_tfhub_saved_model(str(only_graph))


def test_metadata_in_the_object_graph_as_before_tf_2_5(tmp_path, pretrainer):
    directory = _copy(tmp_path)
    _metadata_into_object_graph(directory)
    assert tfhub.from_tfhub(str(directory)).backbone.config == pretrainer.backbone.config


def test_recorded_config_contradicting_the_variables_is_refused(tmp_path):
    directory = _copy(tmp_path)
    _metadata_into_object_graph(directory, lambda r: r["config"].update(num_attention_heads=2))
    with pytest.raises(ConversionError, match=r"num_attention_heads=2 but the variables .* give 4"):
        tfhub.from_tfhub(str(directory))


def test_unknown_activation_is_refused(tmp_path):
    directory = _copy(tmp_path)
    _metadata_into_object_graph(directory, lambda r: r["config"].update(activation="swish"))
    with pytest.raises(ConversionError, match=r"activation \"swish\" is not an activation"):
        tfhub.from_tfhub(str(directory))


def test_tf1_hub_module_points_to_the_original_reader(tmp_path):
    directory = _copy(tmp_path)
    (directory / tfhub.TF1_MODULE_FILE).write_bytes(b"")
    with pytest.raises(ConversionError, match=r"TF1 Hub module.*from_original"):
        tfhub.from_tfhub(str(directory))


def test_saved_model_without_keras_metadata_is_refused(tmp_path):
    module = tf.Module()
    module.weight = tf.Variable(tf.zeros([2, 2]))
    tf.saved_model.save(module, str(tmp_path / "plain"))
    assert tfhub.is_tfhub_saved_model(str(tmp_path / "plain"))
    with pytest.raises(ConversionError, match=r"records no Keras objects"):
        tfhub.from_tfhub(str(tmp_path / "plain"))


def test_ignored_variables_keep_their_fresh_initialisation():
    pretrainer = tfhub.from_tfhub(ALBERT, ignore_variables=[r"^bert/cls/predictions/"])
    assert not np.any(pretrainer.masked_lm.output_bias.numpy())  # zeros: not the stored bias


def test_load_by_path_converts_once_into_the_cache(tmp_path, monkeypatch):
    """`albert_tf.load(hub_saved_model_dir)`: converted into the cache (`local/`), outputs equal
    Model Garden's, the SentencePiece asset kept as spm.model; the second load converts
    nothing."""
    import albert_tf
    from albert_tf import sources

    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "home"))
    resolved = sources.resolve(ALBERT)
    assert resolved.conversion.startswith("TF Hub SavedModel")
    assert sorted(os.listdir(resolved.directory)) == [
        "config.json",
        "pretrainer.weights.h5",
        "spm.model",
        "text.json",
    ]
    assert sources.resolve(ALBERT).directory == resolved.directory
    pretrainer = albert_tf.load(ALBERT)
    values = np.load(os.path.join(ALBERT, "expected.npz"))
    outputs = pretrainer.backbone(
        {k: values[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    )
    np.testing.assert_allclose(
        outputs["pooled_output"].numpy(), values["pooled_output"], rtol=0, atol=1e-5
    )
