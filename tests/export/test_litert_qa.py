"""LiteRT SQuAD export: raw question and context strings in the ai-edge-litert interpreter give the
Keras model's logits on the same windows, the SavedModel export's windows and answers, and the
report of `export_finetuned` / scripts/export_litert.py."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.squad_features import FeatureSettings
from albert_tf.export import litert, litert_qa
from albert_tf.export.squad_serving import export_question_answerer, question_windows

pytest.importorskip("ai_edge_litert")

SETTINGS = FeatureSettings(max_seq_length=40, doc_stride=12, max_query_length=10)
MAX_WINDOWS = 4
MAX_ANSWER = 8
RIVER = "The river (called the Seine) flows 777 km; it's long. "
QUESTIONS = [
    "When did it open?",
    "Where does the river flow?",
    "What is it?",
    "How long is the question? " * 4,
    "Which one?",
    "Wer sagt das?",
    "How many?",
    "Too long?",
]
CONTEXTS = [
    "The Eiffel Tower is in Paris. It opened in 1889, after two years.",
    RIVER + "It is in France, not far from Paris.",  # 2 to 4 windows
    "  Spaces\tand\n\nnewlines , punctuation!!(here)  ",
    "Short.",
    "",
    "Grüße aus Köln — sagt Jürgen Müller (東京)! Café crème brûlée.",
    "1,000, 2,000, and 9,999, \u00a0 or ``quoted words.",
    RIVER * 3,  # more pieces than 4 windows hold: truncated
]
ASCII = 5  # the first five: ASCII words, which the two tokenizations split alike
TRUNCATED = 7


def _model(kind, vocab_size):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=vocab_size, num_hidden_layers=2)
    if kind == "v2":
        model = AlbertSquadV2Model(AlbertModel(config), start_n_top=3, end_n_top=3, dropout=0.0)
    else:
        model = AlbertQuestionAnswerer(AlbertModel(config))
    seq = SETTINGS.max_seq_length
    ones = np.ones((1, seq), "int32")
    model({"input_word_ids": ones, "input_mask": ones, "input_type_ids": ones, "p_mask": 0 * ones})
    # Deterministic, spread weights without a global seed (see test_squad_export.py).
    rng = np.random.default_rng(2 if kind == "v2" else 3)
    model.set_weights(
        [
            w if np.ptp(w) == 0 else rng.normal(0.0, 0.2, w.shape).astype(w.dtype)
            for w in model.get_weights()
        ]
    )
    return model


def _encoded(texts):
    return np.array([t.encode("utf-8") for t in texts], object)


@pytest.fixture(scope="module")
def exported(spm_model_file, tmp_path_factory):
    """{kind: (model, interpreter outputs with details, SavedModel outputs)} for v1 and v2."""
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    vocab_size = SentencePieceTokenizer(spm_model_file).vocab_size
    base = tmp_path_factory.mktemp("litert_qa")
    result = {}
    for kind in ("v1", "v2"):
        model = _model(kind, vocab_size)
        pre = litert_qa.squad_preprocessor(spm_model_file, SETTINGS)
        fn = litert_qa.serving_function(
            model, pre, SETTINGS, MAX_WINDOWS, max_answer_length=MAX_ANSWER, details=True
        )
        runner = litert.interpreter(model_content=litert.convert(fn)).get_signature_runner()
        lite = litert_qa._decoded(runner(question=_encoded(QUESTIONS), context=_encoded(CONTEXTS)))
        path = export_question_answerer(
            model,
            spm_model_file,
            str(base / kind),
            SETTINGS,
            max_answer_length=MAX_ANSWER,
            write_warmup=False,
        )
        result[kind] = model, lite, litert_qa.saved_model_answers(path, QUESTIONS, CONTEXTS)
    return result


def _flat(lite, keys=litert_qa.WINDOW_KEYS):
    return {k: lite[k].reshape([-1, SETTINGS.max_seq_length]) for k in keys}


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_logits_equal_the_keras_model_on_the_same_windows(exported, kind):
    model, lite, _ = exported[kind]
    expected = model(_flat(lite), training=False)
    shape = lite["input_word_ids"].shape
    assert shape == (len(QUESTIONS), MAX_WINDOWS, SETTINGS.max_seq_length)
    names = (
        ["start_logits", "end_logits"]
        if kind == "v1"
        else ["start_top_log_probs", "end_top_log_probs", "cls_logits"]
    )
    for name in names:
        want = expected[name].numpy().reshape(lite[name].shape)
        np.testing.assert_allclose(lite[name], want, atol=1e-4, rtol=0, err_msg=name)
    if kind == "v2":
        for name in ("start_top_index", "end_top_index"):
            want = expected[name].numpy().reshape(lite[name].shape)
            np.testing.assert_array_equal(lite[name], want, err_msg=name)


def test_windows_equal_the_saved_model_windows(exported, spm_model_file):
    from albert_tf.text import graph_offsets
    from albert_tf.text.preprocessing_layers import TextTokenizer

    _, lite, _ = exported["v1"]
    tokenizer = TextTokenizer(spm_model_file)
    sentencepiece = tokenizer.sentencepiece
    query = tokenizer(tf.constant(QUESTIONS))[:, : SETTINGS.max_query_length]
    pieces = graph_offsets.pieces_with_offsets(tf.constant(CONTEXTS), sentencepiece)["pieces"]
    ids = pieces.with_flat_values(tf.cast(sentencepiece.string_to_id(pieces.flat_values), tf.int64))
    special = [int(sentencepiece.string_to_id(t)) for t in ("[CLS]", "[SEP]")]
    want = question_windows(query, ids, SETTINGS, *special)
    example = want["example"].numpy()
    counts = np.bincount(example, minlength=len(QUESTIONS))
    assert lite["num_windows"].tolist() == np.minimum(counts, MAX_WINDOWS).tolist()
    assert 1 < counts[1] <= MAX_WINDOWS and counts[4] == 0 and counts[TRUNCATED] > MAX_WINDOWS
    assert lite["truncated"].tolist() == [i == TRUNCATED for i in range(len(QUESTIONS))]
    for i in list(range(ASCII)) + [TRUNCATED]:
        rows = np.flatnonzero(example == i)[:MAX_WINDOWS]
        for key in litert_qa.WINDOW_KEYS:
            got = lite[key][i, : len(rows)]
            np.testing.assert_array_equal(got, want[key].numpy()[rows], err_msg=f"{i} {key}")


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_answers_equal_the_saved_model_export(exported, kind):
    _, lite, saved = exported[kind]
    for i, context in enumerate(CONTEXTS):
        raw = context.encode("utf-8")
        answer = lite["answer"][i]
        start, end = int(lite["start_byte"][i]), int(lite["end_byte"][i])
        if answer:  # a whole-character slice of the raw context
            assert raw[start:end].decode("utf-8") == answer, i
            assert lite["start_piece"][i] <= lite["end_piece"][i], i
        else:
            assert (start, end, lite["start_piece"][i]) == (-1, -1, -1), i
        if i >= ASCII:
            continue
        assert answer == saved["answer"][i], (i, answer, saved["answer"][i])
        chars = (len(raw[:start].decode()), len(raw[:end].decode())) if answer else (-1, -1)
        assert chars == (saved["start"][i], saved["end"][i]), i
        np.testing.assert_allclose(lite["score"][i], saved["score"][i], rtol=1e-5, atol=1e-4)
        if kind == "v2":
            assert lite["has_answer"][i] == bool(answer), i
            np.testing.assert_allclose(
                lite["has_answer_probability"][i], saved["has_answer_probability"][i], atol=1e-5
            )
    answered = sum(bool(a) for a in lite["answer"][:ASCII])
    if kind == "v1":
        assert answered >= 3  # real answers, not all ""
    else:  # some answers, and some questions the null threshold leaves unanswered
        assert 0 < answered < ASCII - 1, lite["answer"]
    assert lite["answer"][4] == "" and lite["num_windows"][4] == 0
    # The truncated context is answered from the pieces its windows hold.
    covered = (MAX_WINDOWS - 1) * SETTINGS.doc_stride + int(
        np.sum(lite["input_type_ids"][TRUNCATED, -1] == 1) - 1
    )
    assert lite["end_piece"][TRUNCATED] < covered


@pytest.fixture(scope="module")
def squad_task(spm_model_file, tmp_path_factory):
    """A v1.1 `SquadTask` on the built-in docstring QA files (not loaded: export_finetuned reads
    the examples)."""
    from albert_tf.data.docstring_qa import write_docstring_squad
    from albert_tf.finetune.squad import SquadData, SquadTask

    directory = tmp_path_factory.mktemp("litert_squad")
    train, dev = str(directory / "train.json"), str(directory / "dev.json")
    write_docstring_squad(train, dev, max_paragraphs=40)
    task = SquadTask(
        SquadData(
            train_file=train,
            predict_file=dev,
            doc_stride=SETTINGS.doc_stride,
            max_query_length=SETTINGS.max_query_length,
            max_answer_length=MAX_ANSWER,
        )
    )
    task.configure_text(spm_model_file, max_seq_length=SETTINGS.max_seq_length)
    return task


def test_script_exports_and_reports_a_squad_model(exported, squad_task, tmp_path):
    from finetune_support import script

    model_dir, out = tmp_path / "run", tmp_path / "litert"
    model_dir.mkdir()
    exported["v1"][0].save(str(model_dir / "model.keras"))
    (model_dir / "finetune.json").write_text(json.dumps({"task": squad_task.describe()}))
    result = script(
        "export_litert.py",
        [
            f"--model_dir={model_dir}",
            f"--output_dir={out}",
            "--variants=float32,int8_dynamic",
            "--max_eval_examples=8",
            "--max_windows=32",  # the docstring paragraphs are long for 40 positions
        ],
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "litert_report.json").read_text())
    assert report["kind"] == "squad" and report["eval_examples"] == 8
    float32, int8 = report["variants"]["float32"], report["variants"]["int8_dynamic"]
    assert float32["answer_agreement"] >= 0.9 and float32["truncated"] == 0, float32
    reference = report["reference_scores"]
    assert abs(float32["f1"] - reference["f1"]) <= 100 * (1 - float32["answer_agreement"])
    # Weights int8 (the <= 0.3 target is the classifier test's: this model has fewer weights).
    assert int8["model_size_ratio"] <= 0.4 and os.path.getsize(int8["file"]) == int8["bytes"]
    lines = result.stdout.strip().splitlines()
    assert lines[-6].startswith(
        "squad-v1.1 (squad), max_seq_length 40, 32 windows of doc_stride 12"
    )
    assert lines[-6].endswith("truncated); passes: agreement >= 99%")
    assert lines[-5].split() == "variant bytes x f32 model x answer agr EM F1 passes".split()
    assert [line.split()[0] for line in lines[-4:-2]] == ["float32", "int8_dynamic"]
    for line, name in zip(lines[-4:-2], ("float32", "int8_dynamic")):
        passes = report["variants"][name]["passes"]
        assert line.split()[-1] == ("yes" if passes else "NO")
        assert (f"{name} agrees with the reference on" in result.stderr) == (not passes)
    # Only albert_tf's lines: none of TensorFlow's about its temporary SavedModel, tf-text's
    # tokenizer builder or TFLite's delegate.
    for noise in ("Assets written to", "fingerprint", "/tmp/tmp", "CharsMap", "XNNPACK"):
        assert noise not in result.stderr, result.stderr
    assert lines[-2].startswith("reference (the float32 SavedModel QA export")
    assert lines[-1] == f"report: {out / 'litert_report.json'}"


def test_argument_errors(exported, spm_model_file):
    model = exported["v1"][0]
    pre = litert_qa.squad_preprocessor(spm_model_file, SETTINGS)
    with pytest.raises(ValueError, match="max_position_embeddings=512"):
        litert_qa.serving_function(model, pre, FeatureSettings(max_seq_length=1024))
    with pytest.raises(ValueError, match="max_windows must be >= 1, got 0"):
        litert_qa.serving_function(model, pre, SETTINGS, max_windows=0)
    with pytest.raises(TypeError, match="got AlbertModel"):
        litert_qa.serving_function(model.backbone, pre, SETTINGS)
