"""Every public layer and model of albert_tf.layers and albert_tf.models through tests/harness.py.

The harness checks the config round trip, `.keras` save/load, mixed_bfloat16, the symbolic
build and, for models, predict and one fit step (see tests/harness.py). Text layers are in
tests/text/test_text_harness.py; `test_every_public_layer_is_covered` keeps both lists complete.
"""

import importlib
import inspect
import pathlib

import keras
import numpy as np
import pytest
from harness import run_layer_test, run_model_test

from albert_tf.layers import block_weights
from albert_tf.layers.embedding import FactorizedEmbedding
from albert_tf.layers.encoder import AlbertEncoder, StackedWeights
from albert_tf.layers.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.token_classifier import IGNORE, AlbertTokenClassifier

# Layer and model classes tested here and in tests/text/test_text_harness.py.
COVERED = {
    "FactorizedEmbedding",
    "StackedWeights",
    "AlbertEncoder",
    "MaskedLMHead",
    "SentenceOrderHead",
    "AlbertModel",
    "AlbertPretrainer",
    "AlbertClassifier",
    "AlbertTokenClassifier",
    "AlbertPreprocessor",
    "TextTokenizer",
    "SegmentPacker",
}
# Public classes that are not run through the harness, and why.
NOT_HARNESSED = {
    "AlbertHeadModel": "abstract base of AlbertClassifier and "
    "AlbertTokenClassifier (head_input is not defined)"
}

BATCH, SEQ, H = 2, 7, 16
BACKBONE_OUTPUTS = {"sequence_output": (BATCH, SEQ, H), "pooled_output": (BATCH, H)}
NO_FIT = "the backbone has no loss; fit runs through the pretrainer and classifier tests"


def test_every_public_layer_is_covered():
    """Every public keras Layer / Model subclass defined anywhere in albert_tf is harnessed."""
    package = pathlib.Path(__file__).resolve().parents[2] / "albert_tf"
    public = set()
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for cls_name, cls in vars(importlib.import_module(name)).items():
            if (
                inspect.isclass(cls)
                and cls.__module__ == name
                and not cls_name.startswith("_")
                and issubclass(cls, keras.layers.Layer)
            ):
                public.add(cls_name)
    assert public - set(NOT_HARNESSED) == COVERED


def test_stacked_weights(tiny_config):
    def flat_values(stack):
        if not stack.built:
            stack.build()
        return stack.flat_values()

    groups, inner, hidden, intermediate = 2, 2, 8, 12
    sizes = {"hidden_size": hidden, "intermediate_size": intermediate}
    shapes = {
        name: (groups * inner,) + block_weights.shape("ffn", name, sizes)
        for name in block_weights.FFN_WEIGHTS
    }
    run_layer_test(
        StackedWeights,
        dict(
            kind="ffn",
            groups=groups,
            inner=inner,
            hidden_size=hidden,
            intermediate_size=intermediate,
            initializer_range=0.1,
        ),
        (),
        shapes,
        call_fn=flat_values,
        expected_output_dtype="float32",
        # Read outside any layer call nothing autocasts: AlbertEncoder's call reads them in
        # bfloat16 (its own harness test checks that).
        mixed_output_dtype="float32",
        skip={"symbolic": "never called on inputs: a weight container read by AlbertEncoder"},
    )


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),  # E=8 -> H=16 through the projection
        dict(embedding_size=H, hidden_dropout_prob=0.1),  # E == H: no projection; dropout seed
    ],
    ids=["projection", "no_projection_dropout"],
)
def test_factorized_embedding(tiny_config, make_inputs, overrides):
    inputs = make_inputs(BATCH, SEQ)
    run_layer_test(
        FactorizedEmbedding,
        dict(config=tiny_config(**overrides), seed=3),
        (inputs["input_word_ids"], inputs["input_type_ids"]),
        (BATCH, SEQ, H),
        expected_output_dtype="float32",
        mixed_output_dtype="bfloat16",
    )


@pytest.mark.parametrize(
    "overrides, unroll",
    [
        (dict(num_hidden_groups=2, inner_group_num=2), False),
        (dict(num_hidden_groups=2, inner_group_num=2), True),
        (dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1), False),
    ],
    ids=["loop", "unrolled", "dropout"],
)
def test_encoder(tiny_config, make_inputs, overrides, unroll):
    config = tiny_config(**overrides)
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((BATCH, SEQ, H)).astype(np.float32)
    mask = make_inputs(BATCH, SEQ, lengths=[SEQ, 4])["input_mask"]
    blocks = config.num_hidden_layers * config.inner_group_num
    run_layer_test(
        AlbertEncoder,
        dict(config=config, output_encoder_outputs=True, unroll=unroll, seed=5),
        (hidden, mask),
        {"sequence_output": (BATCH, SEQ, H), "encoder_outputs": (blocks, BATCH, SEQ, H)},
        expected_output_dtype="float32",
        mixed_output_dtype="bfloat16",
    )


def test_masked_lm_head():
    rng = np.random.default_rng(0)
    sequence_output = rng.standard_normal((BATCH, SEQ, H)).astype(np.float32)
    positions = np.array([[1, 2, 5], [3, 0, 0]], np.int32)
    table = rng.standard_normal((40, 8)).astype(np.float32)
    run_layer_test(
        MaskedLMHead,
        dict(
            vocab_size=40,
            embedding_size=8,
            activation="gelu_erf",
            layer_norm_eps=1e-6,
            initializer_range=0.1,
        ),
        (sequence_output, positions, table),
        (BATCH, 3, 40),
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
    )


def test_sentence_order_head():
    pooled = np.random.default_rng(0).standard_normal((3, H)).astype(np.float32)
    run_layer_test(
        SentenceOrderHead,
        dict(num_classes=2, initializer_range=0.1),
        pooled,
        (3, 2),
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
    )


def test_backbone(tiny_config, make_inputs):
    config = tiny_config(num_hidden_groups=2, inner_group_num=2, hidden_dropout_prob=0.1)
    blocks = config.num_hidden_layers * config.inner_group_num
    run_model_test(
        # unrolled here; the pretrainer and classifiers below use the tf.while_loop encoder
        AlbertModel,
        lambda: dict(config=config, output_encoder_outputs=True, unroll=True),
        make_inputs(BATCH, SEQ, lengths=[SEQ, 5]),
        {**BACKBONE_OUTPUTS, "encoder_outputs": (blocks, BATCH, SEQ, H)},
        expected_output_dtype="float32",
        mixed_output_dtype="bfloat16",
        skip={"fit": NO_FIT},
    )


def test_pretrainer(tiny_config, make_inputs):
    config = tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    inputs = make_inputs(BATCH, SEQ, lengths=[SEQ, 5])
    inputs["masked_lm_positions"] = np.array([[1, 3, 4], [2, 1, 0]], np.int32)
    labels = {
        "mlm_logits": np.take_along_axis(
            inputs["input_word_ids"], inputs["masked_lm_positions"], axis=1
        ),
        "sop_logits": np.array([0, 1], np.int32),
    }
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    run_model_test(
        AlbertPretrainer,
        lambda: dict(backbone=AlbertModel(config)),
        inputs,
        {"mlm_logits": (BATCH, 3, 40), "sop_logits": (BATCH, 2)},
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
        fit_data=(inputs, labels),
        compile_kwargs=dict(optimizer="adam", loss={"mlm_logits": loss, "sop_logits": loss}),
    )


@pytest.mark.parametrize("num_classes", [3, 1], ids=["classes", "regression"])
def test_classifier(tiny_config, make_inputs, num_classes):
    config = tiny_config(hidden_dropout_prob=0.1)
    labels = ["a", "b", "c"] if num_classes == 3 else None
    targets = (
        np.array([0, 2], np.int32) if num_classes == 3 else np.array([[0.5], [-1.0]], np.float32)
    )
    inputs = make_inputs(BATCH, SEQ, lengths=[SEQ, 4])
    run_model_test(
        AlbertClassifier,
        lambda: dict(backbone=AlbertModel(config), num_classes=num_classes, labels=labels),
        inputs,
        (BATCH, num_classes),
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
        fit_data=(inputs, targets),
    )


def test_token_classifier(tiny_config, make_inputs):
    config = tiny_config()
    inputs = make_inputs(BATCH, SEQ, lengths=[SEQ, 4])
    tags = np.array(
        [[IGNORE, 0, 1, 2, 1, 0, IGNORE], [IGNORE, 2, 2, IGNORE, IGNORE, IGNORE, IGNORE]], np.int32
    )
    run_model_test(
        AlbertTokenClassifier,
        lambda: dict(backbone=AlbertModel(config), labels=["O", "B-X", "I-X"], dropout=0.0),
        inputs,
        (BATCH, SEQ, 3),
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
        fit_data=(inputs, tags),
        # The tagging head reads the sequence output: the pooler gets no gradient.
        unused_variables=["albert/pooler/kernel", "albert/pooler/bias"],
    )


@pytest.mark.parametrize("dynamic_padding", [False, True], ids=["fixed", "dynamic"])
def test_preprocessor(spm_model_file, dynamic_padding):
    texts = {
        "text": np.array(["A first sentence, and more.", "Short."]),
        "text_pair": np.array(["Its pair.", "Another much longer second text here."]),
    }
    shape = (BATCH, None if dynamic_padding else 16)
    report = run_layer_test(
        AlbertPreprocessor,
        dict(
            spm_model=spm_model_file, max_seq_length=16, dynamic_padding=dynamic_padding, bucket=4
        ),
        texts,
        {k: shape for k in ("input_word_ids", "input_mask", "input_type_ids")},
        expected_output_dtype="int32",
        mixed_output_dtype="int32",
        stored_differently={"spm_model": "stored as the model's bytes in base64"},
    )
    assert report.checks == ["config", "saving", "mixed_precision", "symbolic"]


def test_masked_lm_head_keeps_the_float32_table_under_mixed_precision():
    # Keras autocasts float call arguments; the tied table must reach the output matmul in
    # float32 (it was rounded to bfloat16 before).
    rng = np.random.default_rng(0)
    sequence_output = rng.standard_normal((BATCH, SEQ, H)).astype(np.float32)
    positions = np.array([[1, 2, 5], [3, 0, 0]], np.int32)
    table = keras.Variable(rng.standard_normal((40, 8)).astype(np.float32), autocast=False)
    head = MaskedLMHead(vocab_size=40, embedding_size=8, dtype="mixed_bfloat16")
    logits = head(sequence_output, positions, table)
    gathered = np.take_along_axis(sequence_output, positions[..., None], axis=1)
    features = head.layer_norm(head.activation_fn(head.dense(gathered)))
    expected = np.matmul(features.numpy(), table.numpy().T) + head.output_bias.numpy()
    assert logits.dtype == "float32"
    np.testing.assert_allclose(logits.numpy(), expected, atol=1e-5)


# Appended with the RACE task (the lists above belong to their authors).
COVERED.add("AlbertMultipleChoice")


def test_multiple_choice(tiny_config, make_inputs):
    from albert_tf.models.multiple_choice import AlbertMultipleChoice

    config = tiny_config(hidden_dropout_prob=0.1)
    choices = 3
    flat = make_inputs(BATCH * choices, SEQ, lengths=[SEQ, 4, 5, 6, 3, SEQ])
    inputs = {k: v.reshape(BATCH, choices, SEQ) for k, v in flat.items()}
    run_model_test(
        AlbertMultipleChoice,
        lambda: dict(backbone=AlbertModel(config), num_choices=choices, dropout=0.1),
        inputs,
        (BATCH, choices),
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
        fit_data=(inputs, np.eye(choices, dtype="float32")[[2, 0]]),
        # The default softmax over the choices ignores the dense bias (it shifts every score
        # alike: its gradient is 0 up to rounding, so one step may or may not move it). Scoring
        # each choice on its own (sigmoid) gives every variable a gradient.
        compile_kwargs=dict(loss=keras.losses.BinaryCrossentropy(from_logits=True), metrics=[]),
    )


# Appended with the SQuAD task.
COVERED.update({"AlbertQuestionAnswerer", "AlbertSquadV2Model"})
SQUAD_UNUSED = ["albert/pooler/kernel", "albert/pooler/bias"]  # the heads read the sequence


def test_question_answerer(tiny_config, make_inputs):
    from albert_tf.models.question_answering import AlbertQuestionAnswerer

    config = tiny_config(hidden_dropout_prob=0.1)
    inputs = make_inputs(BATCH, SEQ, lengths=[SEQ, 4])
    labels = {
        "start_positions": np.array([2, 1], np.int32),
        "end_positions": np.array([4, 2], np.int32),
    }
    run_model_test(
        AlbertQuestionAnswerer,
        lambda: dict(backbone=AlbertModel(config), dropout=0.1),
        inputs,
        {"start_logits": (BATCH, SEQ), "end_logits": (BATCH, SEQ)},
        expected_output_dtype="float32",
        mixed_output_dtype="float32",
        fit_data=(inputs, labels),
        unused_variables=SQUAD_UNUSED,
    )


def test_squad_v2_model(tiny_config, make_inputs):
    from albert_tf.models.question_answering import AlbertSquadV2Model

    config = tiny_config()
    inputs = make_inputs(BATCH, SEQ, lengths=[SEQ, 5])
    # One allowed answer position per row: the beam's other entries are masked ties, which
    # top_k orders by index, so its indices cannot differ between bfloat16 and float32 (over
    # nearly tied random logits they could). The beam itself is checked against NumPy in
    # tests/finetune/test_question_answering.py.
    inputs["p_mask"] = np.array([[1, 1, 1, 1, 0, 1, 1], [0, 1, 1, 1, 1, 1, 1]], np.int32)
    # Training needs several allowed positions (a single one has no gradient).
    fit_inputs = dict(
        inputs, p_mask=np.array([[0, 1, 1, 1, 0, 0, 1], [0, 1, 1, 0, 1, 1, 1]], np.int32)
    )
    labels = {
        "start_positions": np.array([4, 0], np.int32),
        "end_positions": np.array([5, 0], np.int32),
        "is_impossible": np.array([0, 1], np.int32),
    }
    k1, k2 = 3, 2
    run_model_test(
        AlbertSquadV2Model,
        lambda: dict(backbone=AlbertModel(config), start_n_top=k1, end_n_top=k2, dropout=0.1),
        inputs,
        {
            "start_top_log_probs": (BATCH, k1),
            "start_top_index": (BATCH, k1),
            "end_top_log_probs": (BATCH, k1 * k2),
            "end_top_index": (BATCH, k1 * k2),
            "cls_logits": (BATCH,),
        },
        expected_output_dtype={
            "start_top_log_probs": "float32",
            "start_top_index": "int32",
            "end_top_log_probs": "float32",
            "end_top_index": "int32",
            "cls_logits": "float32",
        },
        mixed_output_dtype={
            "start_top_log_probs": "float32",
            "start_top_index": "int32",
            "end_top_log_probs": "float32",
            "end_top_index": "int32",
            "cls_logits": "float32",
        },
        fit_data=(fit_inputs, labels),
        unused_variables=SQUAD_UNUSED,
    )
