"""TF Hub reusable SavedModels (`albert_tf.export.tfhub`, scripts/export_saved_model.py
--format=tfhub): the encoder equals the backbone, the preprocessor's ids equal
AlbertPreprocessor's, both load through tf.saved_model.load and keras.layers.TFSMLayer here and
through tensorflow_hub in a Keras 2 process (tests/export/tfhub_keras2.py), and a failed export
leaves nothing behind.

One export of a tiny pretrainer with dropout, written by the script (the module fixture).
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from script_support import REPO, run, run_python

from albert_tf.export import tfhub
from albert_tf.models import model_dir
from albert_tf.models.preprocessor import AlbertPreprocessor

SEQ_LENGTH = 16
TEXTS = [
    "open the file",
    "A short sentence about a file.",
    "",
    "Köln café naïve ``quoted''",
    "numbers 1, 2 and 9,000",
]
# Pairs that fit, and pairs that need trimming: one long text (the short one is kept whole),
# two long texts (the budget is dealt in turn: prefixes of about equal length).
PAIRS = [
    ("open the file", "read it twice"),
    ("returns a tensor of zeros with the shape and dtype given " * 2, "short"),
    ("x", "the object is read twice and then written back to the same file " * 2),
    ("raise ValueError if the argument is empty or None " * 2, "keras layers and models " * 3),
]


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory, spm_model_file):
    """A tiny pretrainer (MLM and SOP heads) with dropout, saved with its spm.model."""
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    config = AlbertConfig.from_preset(
        "albert_tiny",
        vocab_size=1000,
        num_hidden_layers=2,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    directory = str(tmp_path_factory.mktemp("tfhub_pretrained") / "model")
    model_dir.save(AlbertPretrainer(AlbertModel(config)), directory, spm_model=spm_model_file)
    return directory


@pytest.fixture(scope="module")
def hub_dir(pretrained_dir, tmp_path_factory):
    """The script's export of `pretrained_dir`, given by name: as an archive of it (converted
    into a cache of its own, as `albert_tf.sources` does for a downloaded one)."""
    import tarfile

    directory = tmp_path_factory.mktemp("tfhub")
    export_dir = str(directory / "albert_hub")
    archive = str(directory / "model.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(pretrained_dir, arcname="model")
    result = run(
        "export_saved_model.py",
        f"--pretrained_dir={archive}",
        "--format=tfhub",
        f"--export_dir={export_dir}",
        f"--max_seq_length={SEQ_LENGTH}",
        env={"ALBERT_TF_HOME": str(directory / "cache")},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"] Model {archive}" in result.stderr  # resolved by name, logged in one line
    assert result.stdout.split() == [export_dir]
    assert sorted(os.listdir(export_dir)) == ["encoder", "preprocessor"]
    return export_dir


@pytest.fixture(scope="module")
def pretrainer(pretrained_dir):
    return model_dir.load(pretrained_dir)


@pytest.fixture(scope="module")
def preprocessor(pretrained_dir):
    return AlbertPreprocessor.from_pretrained(pretrained_dir, max_seq_length=SEQ_LENGTH)


def assert_close(actual, expected, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), atol=atol, rtol=0)


def test_encoder_equals_the_backbone(hub_dir, pretrainer, preprocessor):
    inputs = preprocessor(TEXTS)  # padded: most texts are shorter than SEQ_LENGTH
    assert int(tf.reduce_min(tf.reduce_sum(inputs["input_mask"], 1))) < SEQ_LENGTH
    encoder = tf.saved_model.load(f"{hub_dir}/encoder")
    backbone = pretrainer.backbone
    # Any batch size and sequence length (the concrete functions are polymorphic).
    for batch in (inputs, {k: v[:3, :11] for k, v in inputs.items()}):
        out, ref = encoder(batch), backbone(batch)
        assert_close(out["pooled_output"], ref["pooled_output"])
        assert_close(out["sequence_output"], ref["sequence_output"])
        assert len(out["encoder_outputs"]) == 2
        assert_close(out["encoder_outputs"][-1], ref["sequence_output"])
        np.testing.assert_array_equal(out["default"], out["pooled_output"])
    served = encoder.signatures["serving_default"](**inputs)
    assert sorted(served) == ["default", "pooled_output", "sequence_output"]
    assert_close(served["pooled_output"], backbone(inputs)["pooled_output"])

    # training=True applies the dropout of the config (0.1), a fresh mask per call.
    inference = encoder(inputs)["pooled_output"]
    trained = [encoder(inputs, training=True)["pooled_output"] for _ in range(2)]
    assert float(tf.reduce_max(tf.abs(trained[0] - inference))) > 1e-3
    assert float(tf.reduce_max(tf.abs(trained[0] - trained[1]))) > 1e-3

    assert len(encoder.trainable_variables) == len(backbone.trainable_variables)
    assert {v.shape for v in encoder.trainable_variables} == {
        v.shape for v in backbone.trainable_variables
    }
    assert list(encoder.regularization_losses) == []

    # .mlm: the pretrainer's masked-LM logits, plus the encoder outputs.
    positions = tf.constant([[1, 2, 0]] * len(TEXTS), tf.int32)
    mlm = encoder.mlm(dict(inputs, masked_lm_positions=positions))
    assert_close(
        mlm["mlm_logits"], pretrainer(dict(inputs, masked_lm_positions=positions))["mlm_logits"]
    )
    assert_close(mlm["pooled_output"], inference)
    head = pretrainer.masked_lm.trainable_variables
    assert len(encoder.mlm.trainable_variables) == len(backbone.trainable_variables) + len(head)

    # The encoder needs no SentencePiece model (and no tensorflow_text).
    with open(f"{hub_dir}/encoder/saved_model.pb", "rb") as f:
        assert b"Sentencepiece" not in f.read()
    assert not os.listdir(f"{hub_dir}/encoder/assets")

    # Keras 3: TFSMLayer, with the training endpoint.
    layer = keras.layers.TFSMLayer(
        f"{hub_dir}/encoder", call_endpoint="serve", call_training_endpoint="call_training"
    )
    assert_close(layer(inputs)["pooled_output"], inference)
    assert (
        float(tf.reduce_max(tf.abs(layer(inputs, training=True)["pooled_output"] - inference)))
        > 1e-3
    )
    assert len(layer.trainable_weights) == len(backbone.trainable_variables)


def packed(preprocessor, pairs, seq_length):
    fixed = preprocessor.with_padding(False, max_seq_length=seq_length)
    first, second = ([pair[i] for pair in pairs] for i in (0, 1))
    return {k: v.numpy() for k, v in fixed({"text": first, "text_pair": second}).items()}


def assert_same_inputs(actual, expected, seq_length):
    assert sorted(actual) == ["input_mask", "input_type_ids", "input_word_ids"]
    for key, value in expected.items():
        assert actual[key].dtype == tf.int32
        assert actual[key].shape == (len(value), seq_length)
        np.testing.assert_array_equal(actual[key], value, err_msg=key)


def test_preprocessor_ids_equal_albert_preprocessor(hub_dir, preprocessor, spm_model_file):
    hub_preprocessor = tf.saved_model.load(f"{hub_dir}/preprocessor")
    texts = tf.constant(TEXTS)
    expected = {k: v.numpy() for k, v in preprocessor(TEXTS).items()}
    assert_same_inputs(hub_preprocessor(texts), expected, SEQ_LENGTH)
    serving = hub_preprocessor.signatures["serving_default"](texts=texts)
    assert_same_inputs(serving, expected, SEQ_LENGTH)
    layer = keras.layers.TFSMLayer(f"{hub_dir}/preprocessor", call_endpoint="serving_default")
    assert_same_inputs(layer(texts), expected, SEQ_LENGTH)

    # tokenize: [batch, (tokens)] int32, the SentencePiece ids without [CLS]/[SEP].
    tokens = hub_preprocessor.tokenize(texts)
    assert isinstance(tokens, tf.RaggedTensor) and tokens.ragged_rank == 1
    assert tokens.dtype == tf.int32
    assert tokens.to_list() == preprocessor.tokenizer(texts).to_list()

    # bert_pack_inputs: pairs, trimmed in turn, at the default and another seq_length.
    first, second = (
        hub_preprocessor.tokenize(tf.constant([pair[i] for pair in PAIRS])) for i in (0, 1)
    )
    for seq_length in (SEQ_LENGTH, 24):
        expected = packed(preprocessor, PAIRS, seq_length)
        options = {} if seq_length == SEQ_LENGTH else {"seq_length": seq_length}
        actual = hub_preprocessor.bert_pack_inputs([first, second], **options)
        assert_same_inputs(actual, expected, seq_length)
    actual = hub_preprocessor.bert_pack_inputs([first, second])
    lengths = [first.row_lengths().numpy(), second.row_lengths().numpy()]
    kept = [
        np.sum((actual["input_type_ids"].numpy() == s) & (actual["input_mask"].numpy() == 1), 1)
        for s in (0, 1)
    ]
    budget = SEQ_LENGTH - 3
    assert lengths[1][1] + lengths[0][1] > budget and kept[1][1] - 1 == lengths[1][1]  # "short"
    assert kept[0][2] - 2 == lengths[0][2]  # "x" and [CLS] [SEP]
    assert abs((kept[0][3] - 2) - (kept[1][3] - 1)) <= 1  # two long texts: equal shares

    # [batch, (words), (tokens)] segments pack as their flattened tokens.
    words = tf.RaggedTensor.from_row_lengths(
        first.flat_values, tf.ones_like(first.flat_values, tf.int64)
    )
    grouped = tf.RaggedTensor.from_row_splits(words, first.row_splits)
    single = hub_preprocessor.bert_pack_inputs([first])
    for key, value in hub_preprocessor.bert_pack_inputs([grouped]).items():
        np.testing.assert_array_equal(value, single[key])

    assert {k: int(v) for k, v in hub_preprocessor.tokenize.get_special_tokens_dict().items()} == {
        "vocab_size": 1000,
        "start_of_sequence_id": preprocessor.special_ids["cls_id"],
        "end_of_segment_id": preprocessor.special_ids["sep_id"],
        "padding_id": preprocessor.special_ids["pad_id"],
        "mask_id": preprocessor.special_ids["mask_id"],
    }
    with (
        open(hub_preprocessor.sp_model_file.asset_path.numpy(), "rb") as f,
        open(spm_model_file, "rb") as g,
    ):
        assert f.read() == g.read()


def test_tensorflow_hub_keras2_classifier_fine_tunes_saves_and_reloads(
    hub_dir, pretrainer, preprocessor, tmp_path
):
    """The tutorials' way: Keras 2, tensorflow_hub, in a process of its own."""
    spec = {"pairs": PAIRS, "seq_length": 24}
    result = run_python(
        os.path.join(REPO, "tests", "export", "tfhub_keras2.py"),
        hub_dir,
        tmp_path,
        json.dumps(spec),
        env={"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["keras"] == "tf_keras"
    assert not report["imported_albert_tf"]
    assert report["trainable_weights"] == len(pretrainer.backbone.trainable_variables)
    assert report["changed_weights"] == report["trainable_weights"]  # fine-tuned, all of them
    assert report["reloaded_weights_equal"]
    assert report["prediction_difference"] < 1e-5
    expected = packed(preprocessor, PAIRS, 24)
    for key, value in expected.items():
        np.testing.assert_array_equal(report["pairs"][key], value, err_msg=key)


def test_failed_export_leaves_no_directory(pretrainer, preprocessor, tmp_path, monkeypatch):
    target = tmp_path / "hub"
    written = []
    write = tfhub.write_saved_model

    def failing_write(root, path):
        if path.endswith(tfhub.PREPROCESSOR_DIR):
            written.append(sorted(os.listdir(os.path.dirname(path))))
            raise OSError(28, "No space left on device", path)
        write(root, path)

    monkeypatch.setattr(tfhub, "write_saved_model", failing_write)
    with pytest.raises(OSError, match="No space left"):
        tfhub.export_tfhub(pretrainer, preprocessor, str(target), seq_length=SEQ_LENGTH)
    assert written == [["encoder"]]  # the encoder was complete when the failure came
    assert os.listdir(tmp_path) == []  # neither the target nor its staging directory

    target.mkdir()
    (target / "keep.txt").write_text("an earlier export\n")
    with pytest.raises(FileExistsError, match="never overwritten"):
        tfhub.export_tfhub(pretrainer, preprocessor, str(target))
    assert os.listdir(target) == ["keep.txt"]


def test_a_model_without_its_sentencepiece_model_is_refused(pretrainer, tmp_path):
    directory = str(tmp_path / "no_spm")
    model_dir.save(pretrainer.backbone, directory)
    with pytest.raises(tfhub.TFHubExportError, match="has no spm.model"):
        tfhub.export_pretrained(directory, str(tmp_path / "hub"))
    assert sorted(os.listdir(tmp_path)) == ["no_spm"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model_dir=out/mrpc"], "--format=tfhub exports a pretrained model"),
        (["--pretrained_dir=pretrained", "--version=2"], "--format=tfhub does not take --version"),
    ],
)
def test_script_refuses_other_combinations_in_one_line(tmp_path, flags, message):
    result = run("export_saved_model.py", "--format=tfhub", f"--export_dir={tmp_path}/hub", *flags)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(f"export_saved_model.py: error: {message}")
    assert not os.path.exists(tmp_path / "hub")
