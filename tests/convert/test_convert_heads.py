"""Fine-tuned Hugging Face heads (AlbertForSequenceClassification, AlbertForTokenClassification)
to and from `AlbertClassifier` / `AlbertTokenClassifier`, with logits parity to 1e-5.

The fixtures were written by fixtures/generate_parity_fixtures.py (transformers 4.57.6); the
check that transformers loads our exports runs only where torch and transformers are installed.
"""

import os

import keras
import numpy as np
import pytest
from convert_support import (
    assert_same_weights,
    fixture_inputs,
    import_or_skip,
    read_huggingface_dir,
    run_convert,
)

from albert_tf.config import AlbertConfig
from albert_tf.convert import (
    ConversionError,
    from_huggingface,
    head_model_from_huggingface,
    head_model_to_huggingface,
)
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.token_classifier import AlbertTokenClassifier

TOLERANCE = 1e-5
SEQUENCE, TOKEN = "hf_sequence_classification", "hf_token_classification"
POOLER = ("pooler/kernel", "pooler/bias")
# Per fixture: the model class, its labels and dropout, and the HF architecture.
CASES = {
    SEQUENCE: (
        AlbertClassifier,
        ["entailment", "neutral", "contradiction"],
        0.2,
        "AlbertForSequenceClassification",
    ),
    # classifier_dropout_prob is null there: HF's token classifier uses hidden_dropout_prob.
    TOKEN: (
        AlbertTokenClassifier,
        ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
        0.1,
        "AlbertForTokenClassification",
    ),
}


def _logits(model, expected):
    return np.asarray(model(fixture_inputs(expected)))


def _assert_logits(logits, expected):
    if logits.ndim == 3:  # token logits: the unpadded positions first, for a clearer failure
        valid = expected["attention_mask"].astype(bool)
        np.testing.assert_allclose(
            logits[valid],
            expected["logits"][valid],
            rtol=0,
            atol=TOLERANCE,
            err_msg="logits (valid positions)",
        )
    np.testing.assert_allclose(logits, expected["logits"], rtol=0, atol=TOLERANCE, err_msg="logits")


def _random_head(cls, num_classes, labels=None, seed=0, **overrides):
    config = AlbertConfig(
        **{
            **dict(
                vocab_size=40,
                embedding_size=12,
                hidden_size=16,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=24,
                max_position_embeddings=12,
            ),
            **overrides,
        }
    )
    keras.utils.set_random_seed(seed)
    model = cls(AlbertModel(config), num_classes=num_classes, labels=labels, dropout=0.3)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, 0.3, variable.shape).astype("float32"))
    return model


def _random_inputs(vocab_size=40, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], "int32")
    return {
        "input_ids": rng.integers(5, vocab_size, size=[2, 7]).astype("int32"),
        "attention_mask": mask,
        "token_type_ids": np.array([[0] * 4 + [1] * 3] * 2, "int32"),
    }


# ---------------------------------------------------------------- Hugging Face -> albert_tf
@pytest.mark.parametrize("name", [SEQUENCE, TOKEN])
def test_huggingface_head_parity(name, fx):
    cls, labels, dropout, _ = CASES[name]
    model = head_model_from_huggingface(fx.path(name))
    assert type(model) is cls
    assert (model.num_classes, model.labels, model.dropout_rate) == (len(labels), labels, dropout)
    expected = fx.expected(name)
    _assert_logits(_logits(model, expected), expected)
    sequence = model.backbone(fixture_inputs(expected))["sequence_output"].numpy()
    np.testing.assert_allclose(sequence, expected["last_hidden_state"], rtol=0, atol=TOLERANCE)


# ---------------------------------------------------------------- albert_tf -> Hugging Face
@pytest.mark.parametrize("name", [SEQUENCE, TOKEN])
def test_round_trip_is_identical(name, fx, tmp_path):
    cls, labels, dropout, architecture = CASES[name]
    model = head_model_from_huggingface(fx.path(name))
    head_model_to_huggingface(model, str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]
    values, tensors = read_huggingface_dir(str(tmp_path))
    assert values["architectures"] == [architecture]
    assert values["id2label"] == {str(i): label for i, label in enumerate(labels)}
    assert values["label2id"] == {label: i for i, label in enumerate(labels)}
    assert (values["num_labels"], values["classifier_dropout_prob"]) == (len(labels), dropout)
    # Exactly the tensors HF stored (HF's token classifier has no pooler).
    _, stored = read_huggingface_dir(fx.path(name))
    assert sorted(tensors) == sorted(stored)
    for key, array in stored.items():
        np.testing.assert_array_equal(tensors[key], array, err_msg=key)

    back = head_model_from_huggingface(str(tmp_path))
    assert type(back) is cls
    assert (back.num_classes, back.labels, back.dropout_rate) == (len(labels), labels, dropout)
    # The token classifier's pooler is not part of HF's model: each import keeps its own.
    assert_same_weights(model, back, skip=POOLER if cls is AlbertTokenClassifier else ())
    expected = fx.expected(name)
    np.testing.assert_array_equal(_logits(back, expected), _logits(model, expected))


@pytest.mark.parametrize(
    "cls, num_classes, labels, overrides",
    [
        (AlbertClassifier, 1, None, {}),  # regression
        (AlbertClassifier, 2, None, dict(embedding_size=16)),  # E == H: identity projection
        (AlbertTokenClassifier, 3, ["O", "B-X", "I-X"], dict(num_hidden_groups=2)),
    ],
)
def test_random_head_round_trips(cls, num_classes, labels, overrides, tmp_path):
    model = _random_head(cls, num_classes, labels, **overrides)
    head_model_to_huggingface(model, str(tmp_path))
    values, tensors = read_huggingface_dir(str(tmp_path))
    if cls is AlbertClassifier:
        assert values["problem_type"] == (
            "regression" if num_classes == 1 else "single_label_classification"
        )
        assert "albert.pooler.weight" in tensors
    else:
        assert "problem_type" not in values and "albert.pooler.weight" not in tensors
    if labels is None:  # HF's placeholder names, read back as "no labels"
        assert values["id2label"] == {str(i): f"LABEL_{i}" for i in range(num_classes)}
    back = head_model_from_huggingface(str(tmp_path))
    assert (type(back), back.num_classes, back.labels, back.dropout_rate) == (
        cls,
        num_classes,
        labels,
        0.3,
    )
    assert_same_weights(model, back, skip=POOLER if cls is AlbertTokenClassifier else ())
    inputs = _random_inputs()
    np.testing.assert_array_equal(_logits(back, inputs), _logits(model, inputs))


def test_transformers_loads_the_export(fx, tmp_path):
    """transformers' AlbertForXxx.from_pretrained reads our export with no missing keys."""
    torch = import_or_skip("torch")
    transformers = import_or_skip("transformers")
    exports = {
        name: (head_model_from_huggingface(fx.path(name)), fx.expected(name))
        for name in (SEQUENCE, TOKEN)
    }
    regression = _random_head(AlbertClassifier, 1)
    exports["regression"] = (
        regression,
        {**_random_inputs(), "logits": _logits(regression, _random_inputs())},
    )
    for name, (model, expected) in exports.items():
        directory = str(tmp_path / name)
        head_model_to_huggingface(model, directory)
        hf_class = getattr(transformers, read_huggingface_dir(directory)[0]["architectures"][0])
        hf_model, info = hf_class.from_pretrained(
            directory, output_loading_info=True, attn_implementation="eager", dtype=torch.float32
        )
        assert {k: v for k, v in info.items() if v} == {}, (name, info)
        hf_model.eval()
        with torch.no_grad():
            logits = hf_model(
                **{
                    k: torch.from_numpy(np.asarray(expected[k])).long()
                    for k in ("input_ids", "attention_mask", "token_type_ids")
                }
            ).logits.numpy()
        _assert_logits(logits, expected)
        _assert_logits(_logits(model, expected), expected)
        assert hf_model.config.num_labels == model.num_classes
        if model.labels:
            assert [hf_model.config.id2label[i] for i in range(model.num_classes)] == model.labels
        if name == "regression":
            assert hf_model.config.problem_type == "regression"


# ---------------------------------------------------------------- errors
def test_wrong_architecture_is_named(fx):
    with pytest.raises(
        ConversionError,
        match=r"architectures is \['AlbertForPreTraining'\]; "
        r"head_model_from_huggingface reads "
        r"AlbertForSequenceClassification or "
        r"AlbertForTokenClassification",
    ):
        head_model_from_huggingface(fx.path("hf_shared_tanh"))


@pytest.mark.parametrize("name", [SEQUENCE, TOKEN])
@pytest.mark.parametrize("tensor", ["classifier.weight", "classifier.bias"])
def test_missing_classifier_tensor_is_named(name, tensor, hf_copy):
    directory = hf_copy(name, edit_tensors=lambda tensors: tensors.pop(tensor))
    with pytest.raises(
        ConversionError,
        match=rf"missing variable {tensor} for the classifier "
        rf"weights",
    ):
        head_model_from_huggingface(directory)


def test_label_count_must_match_the_classifier(hf_copy):
    def four_labels(values):
        values["id2label"] = {str(i): f"L{i}" for i in range(4)}
        values["label2id"] = {f"L{i}": i for i in range(4)}

    directory = hf_copy(SEQUENCE, edit_config=four_labels)
    with pytest.raises(
        ConversionError,
        match=r"classifier\.weight has shape \[3, 32\], i\.e\. 3 "
        r"labels, but .*config\.json gives 4",
    ):
        head_model_from_huggingface(directory)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda v: v.update(id2label={"0": "a", "2": "b", "3": "c"}),
            r"id2label has ids \[0, 2, 3\]",
        ),
        (lambda v: v.update(num_labels=2), r"num_labels is 2 but id2label names 3 labels"),
        (
            lambda v: v.update(problem_type="multi_label_classification"),
            r"problem_type 'multi_label_classification' is not supported",
        ),
        (lambda v: v.update(problem_type="regression"), r"'regression' with num_labels=3"),
    ],
)
def test_bad_head_config_is_named(edit, message, hf_copy):
    with pytest.raises(ConversionError, match=message):
        head_model_from_huggingface(hf_copy(SEQUENCE, edit_config=edit))


@pytest.mark.parametrize(
    "name, architecture, head",
    [
        (SEQUENCE, "AlbertForSequenceClassification", r"^classifier\."),
        ("hf_question_answering", "AlbertForQuestionAnswering", r"^qa_outputs\."),
    ],
)
def test_from_huggingface_points_to_the_head_reader(name, architecture, head, fx):
    with pytest.raises(
        ConversionError,
        match=rf"holds an {architecture} .*"
        r"head_model_from_huggingface",
    ):
        from_huggingface(fx.path(name))
    pretrainer = from_huggingface(fx.path(name), ignore_variables=[head])
    expected = fx.expected(name)
    sequence = pretrainer.backbone(fixture_inputs(expected))["sequence_output"].numpy()
    np.testing.assert_allclose(sequence, expected["last_hidden_state"], rtol=0, atol=TOLERANCE)


def test_export_needs_a_head_model_with_distinct_labels(tmp_path):
    model = _random_head(AlbertClassifier, 2, ["yes", "yes"])
    with pytest.raises(ConversionError, match=r"labels repeat \['yes'\]"):
        head_model_to_huggingface(model, str(tmp_path))
    with pytest.raises(
        TypeError,
        match=r"needs an AlbertClassifier or AlbertTokenClassifier, got "
        r"AlbertPretrainer",
    ):
        head_model_to_huggingface(AlbertPretrainer(model.backbone), str(tmp_path))
    assert not os.listdir(tmp_path)


# ---------------------------------------------------------------- scripts/convert_checkpoint.py


def test_script_converts_heads_both_ways(fx, tmp_path):
    from albert_tf.convert.checkpoint import load_head_model
    from albert_tf.models import model_dir

    albert_dir, hf_dir = str(tmp_path / "albert"), str(tmp_path / "hf")
    result = run_convert(
        "--source_format=huggingface", f"--input={fx.path(TOKEN)}", f"--output_dir={albert_dir}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(albert_dir)) == [
        "backbone.weights.h5",
        "config.json",
        "model.keras",
        "text.json",
    ]
    expected = fx.expected(TOKEN)
    model = keras.saving.load_model(f"{albert_dir}/model.keras", compile=False)
    assert type(model) is AlbertTokenClassifier and model.labels == CASES[TOKEN][1]
    _assert_logits(_logits(model, expected), expected)
    # The directory is also a backbone directory to fine-tune from.
    backbone = model_dir.load_backbone(albert_dir)
    np.testing.assert_allclose(
        backbone(fixture_inputs(expected))["sequence_output"].numpy(),
        expected["last_hidden_state"],
        rtol=0,
        atol=TOLERANCE,
    )

    result = run_convert(
        "--source_format=albert_tf",
        f"--input={albert_dir}",
        "--target_format=huggingface",
        f"--output_dir={hf_dir}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    back = head_model_from_huggingface(hf_dir)
    assert_same_weights(load_head_model(albert_dir), back, skip=POOLER)
    _assert_logits(_logits(back, expected), expected)


def test_script_errors_are_one_line(fx, tmp_path):
    result = run_convert(
        "--source_format=huggingface",
        f"--input={fx.path(SEQUENCE)}",
        "--target_format=original",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == (
        "convert_checkpoint.py: error: A fine-tuned AlbertClassifier cannot be "
        "written as an original TF1 checkpoint (pretraining models only); "
        "convert it to albert_tf or huggingface"
    )
    assert "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "out")
