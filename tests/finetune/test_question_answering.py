"""The SQuAD models: their outputs against the original's formulas in NumPy, their losses, fit on a
tiny batch, the v2 train/inference switch and the beam."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert.weights import export_weights
from albert_tf.models import model_dir
from albert_tf.models.backbone import INPUT_KEYS, AlbertModel
from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

B, S, H = 3, 10, 16
# Rows: [CLS] question [SEP] context [SEP] (padding); p_mask 1 on the question, [SEP]s, padding.
P_MASK = np.array(
    [
        [0, 1, 1, 1, 0, 0, 0, 0, 0, 1],
        [0, 1, 1, 0, 0, 0, 0, 1, 1, 1],
        [0, 1, 1, 1, 1, 0, 0, 0, 0, 1],
    ],
    np.int32,
)
LENGTHS = (10, 8, 10)
CONTEXT_STARTS = (4, 3, 5)  # segment B (input_type_ids 1) starts with the context
LABELS = {
    "start_positions": np.array([5, 3, 0], np.int32),
    "end_positions": np.array([7, 5, 0], np.int32),
    "is_impossible": np.array([0, 0, 1], np.int32),
}


def _config(**overrides):
    return AlbertConfig(
        **{
            **dict(
                vocab_size=50,
                embedding_size=8,
                hidden_size=H,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=24,
                max_position_embeddings=16,
            ),
            **overrides,
        }
    )


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    ids = np.zeros([B, S], np.int32)
    for b, n in enumerate(LENGTHS):
        ids[b, :n] = rng.integers(5, 50, size=n)
        ids[b, 0] = 2
    mask = (np.arange(S)[None] < np.array(LENGTHS)[:, None]).astype(np.int32)
    types = (np.arange(S)[None] >= np.array(CONTEXT_STARTS)[:, None]).astype(np.int32) * mask
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types, "p_mask": P_MASK}


def _randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        if v.dtype == "float32":
            base = 1.0 if "gamma" in v.path else 0.0
            v.assign(base + rng.normal(0.0, 0.5, v.shape).astype(np.float32))
    return model


def _sequence(model, inputs):
    ids = {k: inputs[k] for k in INPUT_KEYS}
    return model.backbone(ids)["sequence_output"].numpy().astype(np.float64)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _cross_entropy(log_probs, labels):
    return -np.take_along_axis(log_probs, labels[:, None], -1)[:, 0]


class OriginalV2:
    """run_squad_v2.py's create_v2_model in NumPy (float64), on the original's variables."""

    def __init__(self, model):
        self.w = {
            k: v.astype(np.float64)
            for k, v in export_weights(model, names.ORIGINAL_SQUAD_V2).items()
        }
        self.eps = model.backbone.config.layer_norm_eps

    def masked(self, logits, p_mask):
        return logits * (1 - p_mask) - 1e30 * p_mask

    def start_logits(self, seq, p_mask):
        logits = seq @ self.w["start_logits/dense/kernel"][:, 0] + self.w["start_logits/dense/bias"]
        return self.masked(logits, p_mask)

    def end_logits(self, seq, start_states):
        """[B, S, H] and [B, K, H] -> [B, K, S] through the original's concatenation."""
        k = start_states.shape[1]
        end_input = np.concatenate(
            [
                np.broadcast_to(seq[:, None], (B, k, S, H)),
                np.broadcast_to(start_states[:, :, None], (B, k, S, H)),
            ],
            -1,
        )
        x = np.tanh(
            end_input @ self.w["end_logits/dense_0/kernel"] + self.w["end_logits/dense_0/bias"]
        )
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        x = (x - mean) / np.sqrt(var + self.eps) * self.w["end_logits/LayerNorm/gamma"] + self.w[
            "end_logits/LayerNorm/beta"
        ]
        return (x @ self.w["end_logits/dense_1/kernel"] + self.w["end_logits/dense_1/bias"])[..., 0]

    def cls_logits(self, seq, start_logits):
        probs = np.exp(_log_softmax(start_logits))
        features = np.concatenate([np.einsum("bs,bsh->bh", probs, seq), seq[:, 0]], -1)
        hidden = np.tanh(
            features @ self.w["answer_class/dense_0/kernel"] + self.w["answer_class/dense_0/bias"]
        )
        return (hidden @ self.w["answer_class/dense_1/kernel"])[:, 0]

    def training(self, seq, p_mask, start_positions):
        start = self.start_logits(seq, p_mask)
        gold = seq[np.arange(B), start_positions][:, None]
        end = self.masked(self.end_logits(seq, gold)[:, 0], p_mask)
        return {"start_logits": start, "end_logits": end, "cls_logits": self.cls_logits(seq, start)}

    def inference(self, seq, p_mask, k1, k2):
        start = self.start_logits(seq, p_mask)
        start_log_probs = _log_softmax(start)
        start_index = np.argsort(-start_log_probs, -1, kind="stable")[:, :k1]
        states = np.take_along_axis(seq, start_index[..., None], 1)
        end_log_probs = _log_softmax(self.masked(self.end_logits(seq, states), p_mask[:, None]))
        end_index = np.argsort(-end_log_probs, -1, kind="stable")[..., :k2]
        return {
            "start_top_log_probs": np.take_along_axis(start_log_probs, start_index, -1),
            "start_top_index": start_index,
            "end_top_log_probs": np.take_along_axis(end_log_probs, end_index, -1).reshape(
                B, k1 * k2
            ),
            "end_top_index": end_index.reshape(B, k1 * k2),
            "cls_logits": self.cls_logits(seq, start),
        }


def _v2_model(k1=3, k2=2, dropout=0.0, seed=0, **config):
    return _randomized(
        AlbertSquadV2Model(
            AlbertModel(_config(**config)), start_n_top=k1, end_n_top=k2, dropout=dropout
        ),
        seed,
    )


# ---------------------------------------------------------------- SQuAD v1.1
def test_question_answerer_logits_and_loss():
    model = _randomized(AlbertQuestionAnswerer(AlbertModel(_config())))
    inputs = _inputs()
    outputs = {k: v.numpy() for k, v in model(inputs).items()}
    kernel, bias = model.logits.kernel.numpy(), model.logits.bias.numpy()
    expected = _sequence(model, inputs) @ kernel + bias
    np.testing.assert_allclose(outputs["start_logits"], expected[..., 0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"], expected[..., 1], atol=1e-5)

    model.compile(precision="float32")  # losses checked to 1e-5
    labels = {k: LABELS[k] for k in ("start_positions", "end_positions")}
    metrics = model.evaluate(inputs, labels, batch_size=B, verbose=0, return_dict=True)
    start_loss = _cross_entropy(_log_softmax(expected[..., 0]), labels["start_positions"]).mean()
    end_loss = _cross_entropy(_log_softmax(expected[..., 1]), labels["end_positions"]).mean()
    assert metrics["loss"] == pytest.approx(0.5 * (start_loss + end_loss), rel=1e-5)
    assert sorted(metrics) == [
        "end_logits_accuracy",
        "end_logits_loss",
        "loss",
        "start_logits_accuracy",
        "start_logits_loss",
    ]


def test_question_answerer_fits_a_tiny_batch():
    keras.utils.set_random_seed(0)
    model = AlbertQuestionAnswerer(AlbertModel(_config()))
    model.compile(learning_rate=1e-2, warmup_ratio=0.0)
    labels = {k: LABELS[k] for k in ("start_positions", "end_positions")}
    dataset = tf.data.Dataset.from_tensors((_inputs(), labels))  # one batch per epoch
    losses = model.fit(dataset, epochs=8, verbose=0).history["loss"]
    assert int(model.optimizer.iterations) == 8
    assert losses[-1] < 0.8 * losses[0], losses


def test_fixed_heads_take_no_classes():
    with pytest.raises(ValueError, match="fixed head"):
        AlbertQuestionAnswerer(AlbertModel(_config()), num_classes=3)
    config = AlbertQuestionAnswerer(AlbertModel(_config()), dropout=0.2).get_config()
    assert "num_classes" not in config and "labels" not in config and config["dropout"] == 0.2


def test_from_pretrained(tmp_path):
    model_dir.save(AlbertModel(_config()), str(tmp_path))
    v1 = AlbertQuestionAnswerer.from_pretrained(str(tmp_path))
    v2 = AlbertSquadV2Model.from_pretrained(
        str(tmp_path), start_n_top=2, end_n_top=4, hidden_dropout_prob=0.1
    )
    assert v1.dropout_rate == 0.0 and (v2.start_n_top, v2.end_n_top, v2.dropout_rate) == (2, 4, 0.1)
    assert v2.backbone.config.hidden_dropout_prob == 0.1


# ---------------------------------------------------------------- SQuAD v2.0
def test_v2_gold_start_outputs_match_the_original():
    model = _v2_model()
    inputs = {**_inputs(), "start_positions": LABELS["start_positions"]}
    ours = {k: v.numpy() for k, v in model(inputs).items()}
    reference = OriginalV2(model).training(
        _sequence(model, inputs), P_MASK.astype(np.float64), LABELS["start_positions"]
    )
    assert sorted(ours) == ["cls_logits", "end_logits", "start_logits"]
    for key, value in reference.items():
        assert ours[key].dtype == np.float32
        np.testing.assert_allclose(ours[key], value, rtol=1e-5, atol=1e-4, err_msg=key)


@pytest.mark.parametrize("k1, k2", [(3, 2), (1, 5)])
def test_v2_beam_matches_the_original(k1, k2):
    model = _v2_model(k1, k2, seed=1)
    inputs = _inputs(seed=1)
    ours = {k: v.numpy() for k, v in model(inputs).items()}
    reference = OriginalV2(model).inference(
        _sequence(model, inputs), P_MASK.astype(np.float64), k1, k2
    )
    assert {k: (v.shape, v.dtype.name) for k, v in ours.items()} == {
        "start_top_log_probs": ((B, k1), "float32"),
        "start_top_index": ((B, k1), "int32"),
        "end_top_log_probs": ((B, k1 * k2), "float32"),
        "end_top_index": ((B, k1 * k2), "int32"),
        "cls_logits": ((B,), "float32"),
    }
    for key, value in reference.items():
        if key.endswith("index"):
            np.testing.assert_array_equal(ours[key], value, err_msg=key)
        else:
            np.testing.assert_allclose(ours[key], value, rtol=1e-5, atol=1e-4, err_msg=key)
    # Only allowed positions (p_mask 0) are picked: every row has enough of them.
    assert not np.take_along_axis(P_MASK, ours["start_top_index"], 1).any()
    assert not np.take_along_axis(P_MASK, ours["end_top_index"], 1).any()


def test_v2_loss_is_the_originals():
    model = _v2_model(dropout=0.1)
    model.compile(precision="float32")  # losses checked to 1e-5
    inputs = _inputs()
    metrics = model.evaluate(inputs, LABELS, batch_size=B, verbose=0, return_dict=True)
    reference = OriginalV2(model).training(
        _sequence(model, inputs), P_MASK.astype(np.float64), LABELS["start_positions"]
    )
    start = _cross_entropy(_log_softmax(reference["start_logits"]), LABELS["start_positions"])
    end = _cross_entropy(_log_softmax(reference["end_logits"]), LABELS["end_positions"])
    logits, impossible = reference["cls_logits"], LABELS["is_impossible"]
    sigmoid_ce = np.maximum(logits, 0) - logits * impossible + np.log1p(np.exp(-np.abs(logits)))
    expected = 0.5 * (start.mean() + end.mean()) + 0.5 * sigmoid_ce.mean()
    assert metrics["loss"] == pytest.approx(expected, rel=1e-5)
    assert metrics["cls_logits_loss"] == pytest.approx(sigmoid_ce.mean(), rel=1e-5)


def test_v2_fit_then_predict():
    keras.utils.set_random_seed(0)
    model = AlbertSquadV2Model(AlbertModel(_config()), start_n_top=3, end_n_top=2)
    model.compile(learning_rate=1e-2, warmup_ratio=0.0)
    inputs = _inputs()  # no start_positions: fit takes them from the labels
    history = model.fit(inputs, LABELS, batch_size=B, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses
    assert sorted(history.history) == sorted(
        [
            f"{out}_{metric}"
            for out in ("start_logits", "end_logits", "cls_logits")
            for metric in ("loss", "accuracy")
        ]
        + ["loss"]
    )
    predicted = model.predict(inputs, batch_size=B, verbose=0)
    assert sorted(predicted) == [
        "cls_logits",
        "end_top_index",
        "end_top_log_probs",
        "start_top_index",
        "start_top_log_probs",
    ]
    assert predicted["end_top_index"].dtype == np.int32
    # fit and evaluate also accept the start positions in the inputs.
    with_starts = {**inputs, "start_positions": LABELS["start_positions"]}
    again = model.evaluate(with_starts, LABELS, batch_size=B, verbose=0, return_dict=True)
    plain = model.evaluate(inputs, LABELS, batch_size=B, verbose=0, return_dict=True)
    assert again["loss"] == pytest.approx(plain["loss"], rel=1e-6)


def test_v2_needs_p_mask_and_a_gold_start_to_train():
    model = _v2_model()
    inputs = _inputs()
    with pytest.raises(ValueError, match="needs 'p_mask'"):
        model({k: v for k, v in inputs.items() if k != "p_mask"})
    with pytest.raises(ValueError, match="trains on the gold start"):
        model(inputs, training=True)
    with pytest.raises(ValueError, match=r"sequence length 10 is shorter than start_n_top=11"):
        _v2_model(k1=11)(inputs)


def test_v2_under_mixed_precision_keeps_float32_outputs():
    inputs = {**_inputs(), "start_positions": LABELS["start_positions"]}
    model = _v2_model()
    expected = {k: v.numpy() for k, v in model(inputs).items()}
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = AlbertSquadV2Model(AlbertModel(_config()), start_n_top=3, end_n_top=2, dropout=0.0)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    mixed.set_weights(model.get_weights())
    assert mixed.backbone.compute_dtype == "bfloat16"
    outputs = {k: v.numpy() for k, v in mixed(inputs).items()}
    for key, value in expected.items():
        assert outputs[key].dtype == np.float32, key
        allowed = P_MASK == 0 if value.ndim == 2 else np.ones_like(value, bool)
        scale = max(1.0, np.abs(value[allowed]).max())
        # bfloat16's 8-bit mantissa through the encoder and the end head: the end logits of
        # this random model differ from float32's by 0.067-0.086 (scale 1.56), depending on
        # how the GELU's ops are grouped (oneDNN fuses tf.nn.gelu into the MatMul).
        np.testing.assert_allclose(
            outputs[key][allowed], value[allowed], rtol=0, atol=0.1 * scale, err_msg=key
        )
