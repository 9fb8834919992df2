"""SQuAD and RACE heads: Hugging Face AlbertForQuestionAnswering / AlbertForMultipleChoice to and
from `AlbertQuestionAnswerer` / `AlbertMultipleChoice` with logits parity to 1e-5, and the
original's fine-tuned SQuAD v1 / v2 TF1 checkpoints to and from `AlbertQuestionAnswerer` /
`AlbertSquadV2Model`.

The HF fixtures were written by fixtures/generate_parity_fixtures.py (transformers 4.57.6); the
check that transformers loads our exports runs only where torch and transformers import.
"""

import json
import os
import re

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
    from_original,
    head_model_from_huggingface,
    head_model_from_original,
    head_model_to_huggingface,
    head_model_to_original,
    names,
    to_original,
)
from albert_tf.convert.weights import export_weights
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

TOLERANCE = 1e-5
QA, MC = "hf_question_answering", "hf_multiple_choice"
POOLER = ("pooler/kernel", "pooler/bias")
# Trained by run_squad_v1.py / run_squad_v2.py: the backbone (with its unused pooler) and a head;
# no MLM or SOP head.
PRETRAINING_HEADS = re.compile(r"^cls/(predictions|seq_relationship)/")
V2_HEAD = {  # original name -> shape in (H = hidden_size) terms
    "start_logits/dense/kernel": ("H", 1),
    "start_logits/dense/bias": (1,),
    "end_logits/dense_0/kernel": ("2H", "H"),
    "end_logits/dense_0/bias": ("H",),
    "end_logits/LayerNorm/gamma": ("H",),
    "end_logits/LayerNorm/beta": ("H",),
    "end_logits/dense_1/kernel": ("H", 1),
    "end_logits/dense_1/bias": (1,),
    "answer_class/dense_0/kernel": ("2H", "H"),
    "answer_class/dense_0/bias": ("H",),
    "answer_class/dense_1/kernel": ("H", 1),
}


def _numpy(outputs):
    return (
        {k: np.asarray(v) for k, v in outputs.items()}
        if isinstance(outputs, dict)
        else np.asarray(outputs)
    )


def _config(**overrides):
    return AlbertConfig(
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


def _randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.dtype == "float32":
            variable.assign(rng.normal(0.0, 0.3, variable.shape).astype("float32"))
    return model


def _squad_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_word_ids": rng.integers(5, 40, size=[2, 8]).astype("int32"),
        "input_mask": np.array([[1] * 8, [1] * 6 + [0] * 2], "int32"),
        "input_type_ids": np.array([[0] * 3 + [1] * 5] * 2, "int32"),
        "p_mask": np.array([[0, 1, 1, 1, 0, 0, 0, 1], [0, 1, 1, 1, 0, 1, 1, 1]], "int32"),
    }


# ---------------------------------------------------------------- Hugging Face -> albert_tf
def test_question_answering_parity(fx):
    model = head_model_from_huggingface(fx.path(QA))
    assert type(model) is AlbertQuestionAnswerer and model.dropout_rate == 0.0
    expected = fx.expected(QA)
    outputs = _numpy(model(fixture_inputs(expected)))
    assert sorted(outputs) == ["end_logits", "start_logits"]
    for key in ("start_logits", "end_logits"):
        assert outputs[key].shape == expected[key].shape == (2, 9)
        np.testing.assert_allclose(outputs[key], expected[key], rtol=0, atol=TOLERANCE, err_msg=key)


def test_multiple_choice_parity(fx):
    model = head_model_from_huggingface(fx.path(MC))
    assert type(model) is AlbertMultipleChoice
    assert (model.num_choices, model.dropout_rate) == (4, 0.2)
    expected = fx.expected(MC)
    assert expected["input_ids"].shape == (2, 4, 9)
    logits = np.asarray(model(fixture_inputs(expected)))
    np.testing.assert_allclose(logits, expected["logits"], rtol=0, atol=TOLERANCE)
    flat = {k: v.reshape(8, 9) for k, v in fixture_inputs(expected).items()}
    np.testing.assert_allclose(
        model.backbone(flat)["sequence_output"].numpy(),
        expected["last_hidden_state"],
        rtol=0,
        atol=TOLERANCE,
    )


def test_num_choices_only_groups_the_rows(fx):
    """num_choices is not in HF's config: 2 choices x 4 rows score the same sequences."""
    model = head_model_from_huggingface(fx.path(MC), num_choices=2)
    assert model.num_choices == 2
    expected = fx.expected(MC)
    regrouped = {k: v.reshape(4, 2, 9) for k, v in fixture_inputs(expected).items()}
    np.testing.assert_allclose(
        np.asarray(model(regrouped)).reshape(2, 4), expected["logits"], rtol=0, atol=TOLERANCE
    )


# ---------------------------------------------------------------- albert_tf -> Hugging Face
@pytest.mark.parametrize(
    "name, architecture", [(QA, "AlbertForQuestionAnswering"), (MC, "AlbertForMultipleChoice")]
)
def test_huggingface_round_trip_is_identical(name, architecture, fx, tmp_path):
    model = head_model_from_huggingface(fx.path(name))
    head_model_to_huggingface(model, str(tmp_path))
    values, tensors = read_huggingface_dir(str(tmp_path))
    _, stored = read_huggingface_dir(fx.path(name))
    assert values["architectures"] == [architecture]
    assert sorted(tensors) == sorted(stored)  # exactly HF's tensors (no pooler for QA)
    for key, array in stored.items():
        np.testing.assert_array_equal(tensors[key], array, err_msg=key)
    if name == MC:
        assert (values["num_choices"], values["classifier_dropout_prob"]) == (4, 0.2)
    else:
        assert values["num_labels"] == 2

    back = head_model_from_huggingface(str(tmp_path))
    assert type(back) is type(model) and back.get_config()["dropout"] == model.dropout_rate
    # HF's question answerer has no pooler: each import keeps its own.
    assert_same_weights(model, back, skip=POOLER if name == QA else ())
    inputs = fixture_inputs(fx.expected(name))
    for ours, theirs in zip(
        keras.tree.flatten(_numpy(model(inputs))), keras.tree.flatten(_numpy(back(inputs)))
    ):
        np.testing.assert_array_equal(theirs, ours)


def test_random_multiple_choice_round_trips(tmp_path):
    model = _randomized(
        AlbertMultipleChoice(AlbertModel(_config(embedding_size=16)), num_choices=3, dropout=0.3)
    )
    head_model_to_huggingface(model, str(tmp_path))
    back = head_model_from_huggingface(str(tmp_path))
    assert (back.num_choices, back.dropout_rate) == (3, 0.3)
    assert_same_weights(model, back)


def test_transformers_loads_the_exports(fx, tmp_path):
    """transformers' from_pretrained reads our exports with no missing or unexpected keys."""
    torch = import_or_skip("torch")
    transformers = import_or_skip("transformers")
    for name in (QA, MC):
        directory = str(tmp_path / name)
        head_model_to_huggingface(head_model_from_huggingface(fx.path(name)), directory)
        hf_class = getattr(transformers, read_huggingface_dir(directory)[0]["architectures"][0])
        hf_model, info = hf_class.from_pretrained(
            directory, output_loading_info=True, attn_implementation="eager", dtype=torch.float32
        )
        assert {k: v for k, v in info.items() if v} == {}, (name, info)
        hf_model.eval()
        expected = fx.expected(name)
        with torch.no_grad():
            out = hf_model(
                **{
                    k: torch.from_numpy(expected[k]).long()
                    for k in ("input_ids", "attention_mask", "token_type_ids")
                }
            )
        for key in ("start_logits", "end_logits") if name == QA else ("logits",):
            np.testing.assert_allclose(
                getattr(out, key).numpy(),
                expected[key],
                rtol=0,
                atol=TOLERANCE,
                err_msg=f"{name} {key}",
            )


# ---------------------------------------------------------------- Hugging Face errors
def test_wrong_qa_outputs_width_is_named(hf_copy):
    def three_outputs(tensors):
        tensors["qa_outputs.weight"] = np.zeros([3, 32], np.float32)
        tensors["qa_outputs.bias"] = np.zeros([3], np.float32)

    with pytest.raises(
        ConversionError,
        match=r"qa_outputs\.weight has shape \[3, 32\], i\.e\. 3 "
        r"outputs, but AlbertForQuestionAnswering has 2",
    ):
        head_model_from_huggingface(hf_copy(QA, edit_tensors=three_outputs))


def test_squad_v2_model_has_no_huggingface_form(tmp_path):
    model = AlbertSquadV2Model(AlbertModel(_config()))
    with pytest.raises(
        TypeError,
        match="Hugging Face has no ALBERT model with the original's "
        "SQuAD v2 head.*head_model_to_original",
    ):
        head_model_to_huggingface(model, str(tmp_path))
    assert not os.listdir(tmp_path)


# ---------------------------------------------------------------- original TF1 SQuAD heads
def _backbone_names(config):
    """The original names of a backbone with `config` (pooler included)."""
    stored = export_weights(AlbertPretrainer(AlbertModel(config)), names.ORIGINAL)
    return sorted(name for name in stored if not PRETRAINING_HEADS.search(name))


@pytest.mark.parametrize("cls", [AlbertQuestionAnswerer, AlbertSquadV2Model])
def test_original_round_trip(cls, fx, tmp_path):
    config = _config(num_hidden_groups=2)
    options = dict(start_n_top=2, end_n_top=3) if cls is AlbertSquadV2Model else {}
    model = _randomized(cls(AlbertModel(config), **options))
    prefix = head_model_to_original(model, str(tmp_path / "tf1"))
    stored = fx.read_tf1(prefix)
    hidden = config.hidden_size
    if cls is AlbertQuestionAnswerer:
        head = {"cls/squad/output_weights": (2, hidden), "cls/squad/output_bias": (2,)}
    else:
        sizes = {"H": hidden, "2H": 2 * hidden}
        head = {k: tuple(sizes.get(d, d) for d in shape) for k, shape in V2_HEAD.items()}
    assert sorted(stored) == sorted(_backbone_names(config) + list(head))
    assert {k: stored[k].shape for k in head} == head
    with open(tmp_path / "tf1" / "albert_config.json") as f:
        assert json.load(f)["num_hidden_groups"] == 2

    back = head_model_from_original(prefix, **options)
    assert type(back) is cls
    assert back.get_config()["dropout"] == (0.0 if cls is AlbertQuestionAnswerer else 0.1)
    assert_same_weights(model, back)
    inputs = _squad_inputs()
    for ours, theirs in zip(
        keras.tree.flatten(_numpy(model(inputs))), keras.tree.flatten(_numpy(back(inputs)))
    ):
        np.testing.assert_array_equal(theirs, ours)
    # Writing it again gives the same checkpoint.
    again = fx.read_tf1(head_model_to_original(back, str(tmp_path / "again")))
    assert sorted(again) == sorted(stored)
    for key, array in stored.items():
        np.testing.assert_array_equal(again[key], array, err_msg=key)


def test_original_squad_v1_parity(fx, original_copy):
    """run_squad_v1.py's head on the fixture's TF1 backbone: logits = h W^T + b, with h the
    hidden states HF computed from the same checkpoint."""
    rng = np.random.default_rng(7)
    weights = rng.normal(0, 0.3, [2, 32]).astype(np.float32)
    bias = rng.normal(0, 0.3, [2]).astype(np.float32)

    def squad_checkpoint(arrays):
        for key in [k for k in arrays if PRETRAINING_HEADS.search(k)]:
            del arrays[key]
        arrays.update(
            {
                "cls/squad/output_weights": weights,
                "cls/squad/output_bias": bias,
                "cls/squad/output_weights/adam_m": np.zeros_like(weights),
            }
        )

    prefix, config_path = original_copy(edit_arrays=squad_checkpoint)
    model = head_model_from_original(prefix, config_path)
    assert type(model) is AlbertQuestionAnswerer
    expected = fx.expected("original_groups")
    logits = expected["last_hidden_state"] @ weights.T + bias
    outputs = _numpy(model(fixture_inputs(expected)))
    np.testing.assert_allclose(outputs["start_logits"], logits[..., 0], rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(outputs["end_logits"], logits[..., 1], rtol=0, atol=TOLERANCE)


def test_original_v2_head_names(fx, original_copy, tmp_path):
    """A checkpoint with the v2 scopes reads into the named layers, and writes back the same."""
    rng = np.random.default_rng(3)
    sizes = {"H": 32, "2H": 64}
    head = {
        k: rng.normal(0, 0.3, [sizes.get(d, d) for d in shape]).astype(np.float32)
        for k, shape in V2_HEAD.items()
    }

    def squad_checkpoint(arrays):
        for key in [k for k in arrays if PRETRAINING_HEADS.search(k)]:
            del arrays[key]
        arrays.update(head)

    prefix, config_path = original_copy(edit_arrays=squad_checkpoint)
    model = head_model_from_original(prefix, config_path, start_n_top=4, end_n_top=2, dropout=0.2)
    assert type(model) is AlbertSquadV2Model
    assert (model.start_n_top, model.end_n_top, model.dropout_rate) == (4, 2, 0.2)
    np.testing.assert_array_equal(model.logits.kernel.numpy(), head["start_logits/dense/kernel"])
    np.testing.assert_array_equal(
        model.end_dense_0.kernel.numpy(), head["end_logits/dense_0/kernel"]
    )
    np.testing.assert_array_equal(
        model.end_layer_norm.gamma.numpy(), head["end_logits/LayerNorm/gamma"]
    )
    np.testing.assert_array_equal(
        model.answer_dense_1.kernel.numpy(), head["answer_class/dense_1/kernel"]
    )
    written = {
        k: v
        for k, v in fx.read_tf1(head_model_to_original(model, str(tmp_path))).items()
        if k in head
    }
    assert sorted(written) == sorted(head)
    for key, array in head.items():
        np.testing.assert_array_equal(written[key], array, err_msg=key)


def test_from_original_points_to_the_head_reader(original_copy):
    def squad_checkpoint(arrays):
        arrays["cls/squad/output_weights"] = np.zeros([2, 32], np.float32)
        arrays["cls/squad/output_bias"] = np.zeros([2], np.float32)

    prefix, config_path = original_copy(edit_arrays=squad_checkpoint)
    with pytest.raises(
        ConversionError,
        match=r"holds a fine-tuned SQuAD head "
        r"\(cls/squad/output_weights, an "
        r"AlbertQuestionAnswerer\); read it with "
        r"head_model_from_original",
    ):
        from_original(prefix, config_path)
    pretrainer = from_original(prefix, config_path, ignore_variables=[r"^cls/squad/"])
    assert isinstance(pretrainer, AlbertPretrainer)
    # The pretraining heads are not part of a SQuAD model: named, with the way to skip them.
    with pytest.raises(ConversionError, match=r"unexpected variable cls/predictions/"):
        head_model_from_original(prefix, config_path)
    model = head_model_from_original(
        prefix, config_path, ignore_variables=[PRETRAINING_HEADS.pattern]
    )
    assert type(model) is AlbertQuestionAnswerer


def test_head_model_from_original_needs_a_squad_head(fx):
    with pytest.raises(
        ConversionError,
        match=r"holds no fine-tuned SQuAD head \(neither "
        r"cls/squad/output_weights nor "
        r"start_logits/dense/kernel\)",
    ):
        head_model_from_original(fx.original_prefix)


def test_original_writers_check_the_model_type(tmp_path):
    model = AlbertQuestionAnswerer(AlbertModel(_config()))
    with pytest.raises(
        TypeError,
        match=r"to_original needs an AlbertPretrainer, got "
        r"AlbertQuestionAnswerer \(use head_model_to_original\)",
    ):
        to_original(model, str(tmp_path))
    with pytest.raises(
        TypeError,
        match=r"head_model_to_original needs an AlbertQuestionAnswerer "
        r"or AlbertSquadV2Model, got AlbertPretrainer",
    ):
        head_model_to_original(AlbertPretrainer(model.backbone), str(tmp_path))
    assert not os.listdir(tmp_path)


# ---------------------------------------------------------------- scripts/convert_checkpoint.py
def test_script_converts_squad_heads(fx, tmp_path):
    """HF question answerer -> albert_tf -> original TF1 -> albert_tf, logits kept throughout."""
    albert_dir, tf1_dir, again_dir = (str(tmp_path / d) for d in ("albert", "tf1", "again"))
    for flags in (
        ("--source_format=huggingface", f"--input={fx.path(QA)}", f"--output_dir={albert_dir}"),
        (
            "--source_format=albert_tf",
            f"--input={albert_dir}",
            "--target_format=original",
            f"--output_dir={tf1_dir}",
        ),
        ("--source_format=original", f"--input={tf1_dir}/model.ckpt", f"--output_dir={again_dir}"),
    ):
        result = run_convert(*flags)
        assert result.returncode == 0, result.stderr[-3000:]
    assert "cls/squad/output_weights" in fx.read_tf1(f"{tf1_dir}/model.ckpt")
    model = keras.saving.load_model(f"{again_dir}/model.keras", compile=False)
    assert type(model) is AlbertQuestionAnswerer
    expected = fx.expected(QA)
    outputs = _numpy(model(fixture_inputs(expected)))
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(outputs[key], expected[key], rtol=0, atol=TOLERANCE)
