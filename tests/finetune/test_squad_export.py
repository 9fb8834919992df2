"""SQuAD export: in-graph pieces with character offsets (against the Python LCS alignment), and
the raw-text SavedModel loaded in a fresh process, compared with the Python path
(build_features + model.predict + v1_predictions / v2_predictions)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.squad_alignment import align_pieces
from albert_tf.data.squad_examples import SquadExample
from albert_tf.data.squad_features import FeatureSettings, build_features
from albert_tf.export.squad_serving import NO_SPAN_SCORE, export_question_answerer
from albert_tf.finetune.squad_predictions import (
    apply_null_threshold,
    v1_predictions,
    v2_predictions,
)
from albert_tf.text import graph_ops
from albert_tf.text.graph_offsets import normalize_with_sources, pieces_with_offsets
from albert_tf.text.preprocessing_layers import TextTokenizer
from albert_tf.text.tokenizer import SentencePieceTokenizer

SETTINGS = FeatureSettings(max_seq_length=48, doc_stride=16, max_query_length=12)
N_BEST, MAX_ANSWER = 20, 8
LONG = " ".join(["The river (called the Seine) flows 777 km; it's long."] * 8)
QUESTIONS = [
    "When did it open?",
    "Where does the river flow?",
    "Wer sagt das?",
    "What is it?",
    "How long is the question? " * 6,
    "How many?",
    "Which one?",
]
CONTEXTS = [
    "The Eiffel Tower is in Paris. It opened in 1889.",
    LONG,
    "Grüße aus Köln — sagt Jürgen Müller (東京)! Café crème brûlée.",
    "  Spaces\tand\n\nnewlines , punctuation!!(here)  ",
    "Short.",
    '1,000, 2,000, and 9,999, \u00a0 or "quoted" words.',
    "Ünïcödé ÀÉÎ ñ ß øå.",
]
OFFSET_TEXTS = CONTEXTS + [
    "  The Tower (Paris), built 1887-1889, cost 7,799,401.31 francs!  ",
    "ΣΑΣ ΟΔΟΣ. e\u0301t\u00e9 x",
    "",
    "   ",
    "Hello, World 9,000!",
    "He said ``stop'' and ''go``, '''then'' ```x`.",
]

FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops, as TF Serving does)
    questions, contexts = json.loads(sys.argv[3])
    out = {}
    for name, path in (("v1", sys.argv[1]), ("v2", sys.argv[2])):
        serve = tf.saved_model.load(path).signatures["serving_default"]
        result = serve(question=tf.constant(questions), context=tf.constant(contexts))
        empty = serve(question=tf.constant([], tf.string), context=tf.constant([], tf.string))
        out[name] = {
            "served": {k: [x.decode() if isinstance(x, bytes) else x for x in v.numpy().tolist()]
                       for k, v in result.items()},
            "dtypes": {k: v.dtype.name for k, v in result.items()},
            "empty_shapes": {k: v.shape.as_list() for k, v in empty.items()}}
    out["imported_albert_tf"] = any(m.startswith("albert_tf") for m in sys.modules)
    print(json.dumps(out))
""")


@pytest.mark.parametrize("tex_quotes", [False, True])
def test_normalized_text_and_piece_offsets_equal_the_python_path(spm_model_file, tex_quotes):
    python = SentencePieceTokenizer(spm_model_file, tex_quotes=tex_quotes)
    layer = TextTokenizer(spm_model_file, tex_quotes=tex_quotes)
    texts = tf.constant(OFFSET_TEXTS)
    normalized = normalize_with_sources(texts, tex_quotes=tex_quotes)
    assert (
        normalized["text"].numpy().tolist()
        == graph_ops.normalize(texts, tex_quotes=tex_quotes).numpy().tolist()
    )
    out = pieces_with_offsets(texts, layer.sentencepiece, tex_quotes=tex_quotes)
    aligned = 0
    for i, text in enumerate(OFFSET_TEXTS):
        pieces = [p.decode() for p in out["pieces"][i].numpy()]
        assert pieces == python.encode_pieces(text), text
        alignment = align_pieces(text, pieces, tex_quotes=tex_quotes) if pieces else None
        if alignment is not None:
            assert out["start"][i].numpy().tolist() == alignment.piece_start_char, text
            assert out["end"][i].numpy().tolist() == alignment.piece_end_char, text
            aligned += 1
    assert aligned == len(OFFSET_TEXTS) - 2  # all but "" and "   "
    sources = normalize_with_sources(tf.constant(["a  ``b''\u00e9"]), tex_quotes=tex_quotes)
    if tex_quotes:  # each quote pair becomes one '"' spanning both characters
        assert sources["text"].numpy()[0].decode() == 'a "b"e'
        assert sources["source_start"].to_list() == [[0, 1, 3, 5, 6, 8]]
        assert sources["source_end"].to_list() == [[1, 2, 5, 6, 8, 9]]
    else:
        assert sources["text"].numpy()[0].decode() == "a ``b''e"
        assert sources["source_start"].to_list() == [[0, 1, 3, 4, 5, 6, 7, 8]]
        assert sources["source_end"].to_list() == [[1, 2, 4, 5, 6, 7, 8, 9]]


def _model(kind, vocab_size):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=vocab_size)
    if kind == "v2":
        model = AlbertSquadV2Model(AlbertModel(config), dropout=0.0)
    else:
        model = AlbertQuestionAnswerer(AlbertModel(config))
    seq = SETTINGS.max_seq_length
    inputs = {
        "input_word_ids": np.zeros((1, seq), "int32"),
        "input_mask": np.ones((1, seq), "int32"),
        "input_type_ids": np.zeros((1, seq), "int32"),
    }
    model(dict(inputs, p_mask=np.zeros((1, seq), "int32")) if kind == "v2" else inputs)
    # Deterministic, spread weights without a global seed (see test_token_export.py).
    rng = np.random.default_rng(1 if kind == "v2" else 0)
    model.set_weights(
        [
            w if np.ptp(w) == 0 else rng.normal(0.0, 0.3, w.shape).astype(w.dtype)
            for w in model.get_weights()
        ]
    )
    return model


@pytest.fixture(scope="module")
def served(spm_model_file, tmp_path_factory):
    vocab_size = SentencePieceTokenizer(spm_model_file).vocab_size
    models = {kind: _model(kind, vocab_size) for kind in ("v1", "v2")}
    base = tmp_path_factory.mktemp("squad_export")
    paths = {
        kind: export_question_answerer(
            model,
            spm_model_file,
            str(base / kind),
            SETTINGS,
            n_best_size=N_BEST,
            max_answer_length=MAX_ANSWER,
            write_warmup="auto" if kind == "v2" else False,
        )
        for kind, model in models.items()
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            FRESH_PROCESS,
            paths["v1"],
            paths["v2"],
            json.dumps([QUESTIONS, CONTEXTS]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return models, paths, json.loads(result.stdout.strip().splitlines()[-1])


def _python_path(model, kind, spm_model_file):
    examples = [SquadExample(f"q{i}", q, c) for i, (q, c) in enumerate(zip(QUESTIONS, CONTEXTS))]
    features = build_features(examples, spm_model_file, SETTINGS, labelled=False)
    assert not features.stats.alignment_failures
    assert np.sum(features.example_index == 1) >= 3  # the long context needs 3+ windows
    inputs = features.model_inputs()
    if kind == "v2":
        inputs["p_mask"] = features.p_mask
    outputs = model.predict(inputs, verbose=0)
    if kind == "v2":
        _, nbest, null_odds = v2_predictions(
            examples,
            features,
            *[
                outputs[k]
                for k in (
                    "start_top_log_probs",
                    "start_top_index",
                    "end_top_log_probs",
                    "end_top_index",
                    "cls_logits",
                )
            ],
            n_best_size=N_BEST,
            max_answer_length=MAX_ANSWER,
        )
        return examples, nbest, null_odds
    _, nbest = v1_predictions(
        examples, features, outputs["start_logits"], outputs["end_logits"], N_BEST, MAX_ANSWER
    )
    return examples, nbest, None


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_fresh_process_answers_equal_the_python_path(served, kind, spm_model_file):
    models, _, out = served
    assert not out["imported_albert_tf"]
    result = out[kind]["served"]
    examples, nbest, null_odds = _python_path(models[kind], kind, spm_model_file)
    names = ("start_logit", "end_logit") if kind == "v1" else ("start_log_prob", "end_log_prob")
    expected = {e.qas_id: nbest[e.qas_id][0]["text"] for e in examples}
    if null_odds is not None:
        expected = apply_null_threshold(expected, null_odds, 0.0)
    for i, example in enumerate(examples):
        best = nbest[example.qas_id][0]
        answer = expected[example.qas_id]
        span = (best["start"], best["end"]) if answer else (-1, -1)
        assert result["answer"][i] == answer, i
        assert (result["start"][i], result["end"][i]) == span, i
        if answer:
            assert CONTEXTS[i][span[0] : span[1]] == answer
        score = best[names[0]] + best[names[1]] if best["text"] else NO_SPAN_SCORE
        np.testing.assert_allclose(result["score"][i], score, rtol=1e-5, atol=1e-4)
        if kind == "v2":
            np.testing.assert_allclose(
                result["has_answer_probability"][i],
                1 / (1 + np.exp(null_odds[example.qas_id])),
                atol=1e-5,
            )
    answered = sum(bool(a) for a in result["answer"])
    if kind == "v1":
        assert answered >= 4  # real answers, not all ""
    else:  # some answers, and some questions the null threshold leaves unanswered
        assert 0 < answered < len(QUESTIONS) and max(null_odds.values()) > 0


def test_outputs_and_empty_batch(served):
    _, paths, out = served
    assert set(out["v1"]["dtypes"]) == {"answer", "score", "start", "end"}
    assert out["v2"]["dtypes"] == {
        "answer": "string",
        "score": "float32",
        "start": "int64",
        "end": "int64",
        "has_answer_probability": "float32",
    }
    for kind in ("v1", "v2"):
        assert all(shape == [0] for shape in out[kind]["empty_shapes"].values())
        assert set(out[kind]["empty_shapes"]) == set(out[kind]["dtypes"])
        assert paths[kind].endswith(os.sep + "1")
    description = json.load(open(os.path.join(paths["v2"], "assets.extra", "albert_tf.json")))
    assert description["kind"] == "question_answerer_v2"
    assert (description["max_seq_length"], description["doc_stride"]) == (48, 16)
    from albert_tf.export import warmup

    if warmup.serving_api_available():
        assert len(warmup.read_warmup_requests(paths["v2"])) == 2


def test_export_argument_errors(served, tmp_path):
    model = served[0]["v1"]
    with pytest.raises(TypeError, match="FeatureSettings"):
        export_question_answerer(model, "x.model", str(tmp_path), {"max_seq_length": 48})
    with pytest.raises(ValueError, match="max_position_embeddings"):
        export_question_answerer(
            model, "x.model", str(tmp_path), FeatureSettings(max_seq_length=4096)
        )
    with pytest.raises(ValueError, match="must be positive"):
        export_question_answerer(model, "x.model", str(tmp_path), SETTINGS, n_best_size=0)
    assert not os.listdir(tmp_path)


def test_bfloat16_export_answers_like_float32(served, spm_model_file, tmp_path):
    models, paths, _ = served
    bf16 = export_question_answerer(
        models["v2"], spm_model_file, str(tmp_path), SETTINGS, N_BEST, MAX_ANSWER,
        write_warmup=False, compute_dtype="bfloat16",
    )  # fmt: skip
    with open(os.path.join(bf16, "assets.extra", "albert_tf.json")) as f:
        assert json.load(f)["compute_dtype"] == "bfloat16"
    answers = {}
    for dtype, path in (("float32", paths["v2"]), ("bfloat16", bf16)):
        serve = tf.saved_model.load(path).signatures["serving_default"]
        answers[dtype] = serve(question=tf.constant(QUESTIONS), context=tf.constant(CONTEXTS))
    probability = {k: v["has_answer_probability"].numpy() for k, v in answers.items()}
    # The test model's weights are spread (std 0.3, 15x the initializer's), which bfloat16's
    # 8-bit mantissa turns into up to 0.24 of probability in the training layout too.
    assert 0.0 < np.abs(probability["bfloat16"] - probability["float32"]).max() < 0.3
    same = answers["bfloat16"]["answer"].numpy() == answers["float32"]["answer"].numpy()
    assert same.mean() >= 0.5
