"""keras-hub presets out: what albert_tf writes loads unchanged in keras-hub 0.32 (imported here,
once for the module; keras-hub is in the "test" extras) and computes albert_tf's outputs.

Reading presets without keras_hub is tested in test_convert_keras_hub.py.
"""

import os

import keras
import numpy as np
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.convert.checkpoint import convert_checkpoint, read_model, save_head_model
from albert_tf.convert.keras_hub import from_keras_hub, to_keras_hub
from albert_tf.convert.weights import ConversionError
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.sources.resolver import find_layout
from albert_tf.text import SentencePieceTokenizer
from albert_tf.text.tokenizer import VocabularyError

keras_hub = pytest.importorskip(
    "keras_hub", reason="keras-hub (test extras) proves that presets load in keras-hub"
)

TOLERANCE = 1e-5
# What the exported vocabulary's normalizer reproduces: case, accents, whitespace, TeX quotes
# kept as ALBERT keeps them, any script.
TEXTS = [
    "Ça va?",
    "``Quoted''",
    "Straße",
    "東京",
    "ÉCOLE",
    "The Naïve CAFÉ returns a list.",
    "  two\tspaces  and\na newline ",
    "",
]
SIZES = dict(
    embedding_size=16,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=64,
)


def perturbed(model, seed):
    """`model` with every weight redrawn away from its init (as the fixture generators do)."""
    rng = np.random.RandomState(seed)
    for variable in model.weights:
        noise = rng.standard_normal(variable.shape).astype("float32")
        gamma = variable.path.endswith("gamma")
        variable.assign(1.0 + 0.2 * noise if gamma else 0.15 * noise)
    return model


def batch(vocab_size):
    rng = np.random.RandomState(0)
    ids = rng.randint(5, vocab_size, size=[2, 10]).astype("int32")
    ids[:, 0], ids[0, -1], ids[1, 5] = 2, 3, 3
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    ids[1, 6:] = 0
    segments = np.zeros_like(ids)
    segments[:, 3:6] = 1
    return ids, segments, mask


def assert_backbones_agree(ours, theirs, vocab_size):
    ids, segments, mask = batch(vocab_size)
    a = ours({"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments})
    b = theirs({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    valid = mask.astype(bool)
    np.testing.assert_allclose(
        a["sequence_output"].numpy()[valid],
        np.asarray(b["sequence_output"])[valid],
        rtol=0,
        atol=TOLERANCE,
    )
    np.testing.assert_allclose(
        a["pooled_output"].numpy(), np.asarray(b["pooled_output"]), rtol=0, atol=TOLERANCE
    )


def assert_same_weights(model, other):
    for a, b in zip(model.weights, other.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


@pytest.fixture(scope="module")
def pretrainer():
    config = AlbertConfig(
        vocab_size=1000, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, **SIZES
    )
    return perturbed(AlbertPretrainer(AlbertModel(config)), 1)


@pytest.fixture(scope="module")
def pretrainer_preset(pretrainer, spm_model_file, tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("keras_hub") / "pretrainer")
    to_keras_hub(pretrainer, directory, spm_model_file)
    return directory


def test_backbone_and_tokenizer_load_in_keras_hub(pretrainer, pretrainer_preset, spm_model_file):
    backbone = keras_hub.models.AlbertBackbone.from_preset(pretrainer_preset)
    assert (backbone.num_groups, backbone.num_inner_repetitions) == (2, 2)
    assert_backbones_agree(pretrainer.backbone, backbone, 1000)
    tokenizer = keras_hub.models.AlbertTokenizer.from_preset(pretrainer_preset)
    ours = SentencePieceTokenizer(spm_model_file)  # lowercases, strips accents
    assert [np.asarray(tokenizer(t)).tolist() for t in TEXTS] == [ours.encode_ids(t) for t in TEXTS]


def test_masked_lm_loads_in_keras_hub(pretrainer, pretrainer_preset):
    masked_lm = keras_hub.models.AlbertMaskedLM.from_preset(pretrainer_preset)
    ids, segments, mask = batch(1000)
    positions = np.array([[1, 4, 7], [2, 3, 5]], "int32")
    ours = pretrainer(
        {
            "input_word_ids": ids,
            "input_mask": mask,
            "input_type_ids": segments,
            "masked_lm_positions": positions,
        }
    )["mlm_logits"].numpy()
    inputs = {
        "token_ids": ids,
        "segment_ids": segments,
        "padding_mask": mask,
        "mask_positions": positions,
    }
    assert np.abs(np.asarray(masked_lm(inputs)) - ours).max() < 1e-3  # its epsilon is 1e-5
    masked_lm.masked_lm_head._intermediate_layer_norm.epsilon = 1e-12  # albert_tf's
    np.testing.assert_allclose(np.asarray(masked_lm(inputs)), ours, rtol=0, atol=TOLERANCE)


def test_round_trip_albert_tf_keras_hub_albert_tf(pretrainer, pretrainer_preset):
    assert find_layout(pretrainer_preset)[0] == "keras_hub"
    again = from_keras_hub(pretrainer_preset)
    assert again.backbone.config == pretrainer.backbone.config
    assert_same_weights(again.backbone, pretrainer.backbone)
    assert_same_weights(again.masked_lm, pretrainer.masked_lm)


def test_classifier_loads_as_keras_hubs_text_classifier(spm_model_file, tmp_path):
    """A fine-tuned AlbertClassifier in an albert_tf head directory -> convert_checkpoint ->
    AlbertTextClassifier.from_preset: same logits, same probabilities on raw text."""
    config = AlbertConfig(vocab_size=1000, num_hidden_layers=2, **SIZES)
    preprocessor = AlbertPreprocessor(spm_model_file, max_seq_length=16)
    classifier = AlbertClassifier(AlbertModel(config), num_classes=3, preprocessor=preprocessor)
    perturbed(classifier, 2)
    head_dir, preset = str(tmp_path / "fine_tuned"), str(tmp_path / "preset")
    save_head_model(classifier, head_dir, spm_model_file)
    convert_checkpoint("albert_tf", head_dir, preset, target_format="keras_hub")
    theirs = keras_hub.models.AlbertTextClassifier.from_preset(preset)
    assert theirs.preprocessor.sequence_length == 16
    ids, segments, mask = batch(1000)
    logits = theirs({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    ours = classifier({"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments})
    np.testing.assert_allclose(np.asarray(logits), ours.numpy(), rtol=0, atol=TOLERANCE)
    x, _, _ = keras.utils.unpack_x_y_sample_weight(theirs.preprocessor(TEXTS))
    probabilities = keras.ops.softmax(theirs(x))
    ours = keras.ops.softmax(classifier(preprocessor(TEXTS)))
    np.testing.assert_allclose(np.asarray(probabilities), ours, rtol=0, atol=TOLERANCE)
    again = read_model("keras_hub", preset)
    assert isinstance(again, AlbertClassifier)
    assert_same_weights(again, classifier)


def test_equal_embedding_and_hidden_sizes_write_an_identity_projection(tmp_path):
    config = AlbertConfig(vocab_size=100, num_hidden_layers=2, **{**SIZES, "embedding_size": 32})
    model = perturbed(AlbertPretrainer(AlbertModel(config)), 3)
    directory = str(tmp_path / "preset")
    to_keras_hub(model, directory)  # no vocabulary: AlbertBackbone.from_preset still loads
    assert_backbones_agree(
        model.backbone, keras_hub.models.AlbertBackbone.from_preset(directory), 100
    )
    assert_same_weights(from_keras_hub(directory).backbone, model.backbone)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(hidden_act="gelu_erf"), r"^hidden_act='gelu_erf' cannot be written as a keras-hub"),
        (dict(layer_norm_eps=1e-6), r"^layer_norm_eps=1e-06 cannot be written"),
        (dict(sharing="attention"), r"^sharing='attention' with num_hidden_groups=1 cannot be"),
    ],
)
def test_unrepresentable_configs_are_refused_writing_nothing(tmp_path, fields, message):
    config = AlbertConfig(vocab_size=100, num_hidden_layers=2, **SIZES, **fields)
    directory = tmp_path / "out" / "preset"
    with pytest.raises(ConversionError, match=message) as raised:
        to_keras_hub(AlbertPretrainer(AlbertModel(config)), str(directory))
    assert "\n" not in str(raised.value)
    assert not directory.exists()


def test_a_vocabulary_of_another_size_is_refused_writing_nothing(spm_model_file, tmp_path):
    config = AlbertConfig(vocab_size=100, num_hidden_layers=2, **SIZES)
    directory = tmp_path / "preset"
    with pytest.raises(VocabularyError, match=r"spm_model=.*has 1000 pieces but .*100"):
        to_keras_hub(AlbertPretrainer(AlbertModel(config)), str(directory), spm_model_file)
    assert os.listdir(tmp_path) == []


def test_a_bert_preset_is_refused_naming_it(tmp_path):
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=50,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
    )
    directory = str(tmp_path / "bert_preset")
    bert.save_to_preset(directory)
    assert find_layout(directory)[0] == "keras_hub"
    with pytest.raises(ConversionError, match=r"holds a keras-hub BertBackbone \(keras_hub\.src"):
        convert_checkpoint("keras_hub", directory, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_an_existing_preset_is_replaced_anything_else_refused(tmp_path):
    config = AlbertConfig(vocab_size=100, num_hidden_layers=2, **SIZES)
    model = AlbertPretrainer(AlbertModel(config))
    directory = tmp_path / "preset"
    to_keras_hub(model, str(directory))
    to_keras_hub(perturbed(model, 4), str(directory))  # replaced whole
    assert_same_weights(from_keras_hub(str(directory)).backbone, model.backbone)
    assert sorted(os.listdir(tmp_path)) == ["preset"]  # no staging directory left
    (directory / "notes.txt").write_text("mine")
    with pytest.raises(ConversionError, match=r"holds more than a keras-hub preset \(notes\.txt"):
        to_keras_hub(model, str(directory))
    assert (directory / "notes.txt").read_text() == "mine"
