"""Token-classification export: words and offsets, IOB2 chunking, and the raw-text SavedModel
loaded in a fresh process, compared with the training path (WordWindows + model)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export.token_classifier_serving import export_token_classifier, iob2_chunks
from albert_tf.text.graph_words import split_words
from albert_tf.text.word_windows import WordWindows, word_logits

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SEQ_LENGTH, STRIDE = 16, 6
LONG = "Ann met Bob Smith in Paris, and then they walked to Berlin. " * 3
TEXTS = [
    "Ann Smith lives in Paris.",
    "Grüße aus Köln — sagt Jürgen Müller (東京)!",
    "",
    " \t ",
    LONG,
]

FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops, as TF Serving does)
    model = tf.saved_model.load(sys.argv[1])
    serve = model.signatures["serving_default"]

    def plain(outputs):
        return {k: [[x.decode() for x in row] if v.dtype == tf.string else row
                    for row in v.numpy().tolist()] if v.shape.rank == 2 else v.numpy().tolist()
                for k, v in outputs.items()}

    empty = serve(text=tf.constant([], tf.string))
    ids = model.signatures["predict_ids"](
        input_word_ids=tf.constant([[2, 10, 11, 3]]), input_mask=tf.constant([[1, 1, 1, 1]]),
        input_type_ids=tf.constant([[0, 0, 0, 0]]))
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "served": plain(serve(text=tf.constant(json.loads(sys.argv[2])))),
        "empty_shapes": {k: v.shape.as_list() for k, v in empty.items()},
        "ids": plain(ids),
        "imported_albert_tf": any(m.startswith("albert_tf") for m in sys.modules),
    }))
""")


def test_split_words_character_offsets():
    texts = ["Grüße aus Köln — sagt Jürgen (東京)!", "Paris.\u00a0 Ünï", "", "   ", "a...b's"]
    out = split_words(tf.constant(texts))
    words = [[w.decode() for w in row] for row in out["words"].to_list()]
    assert words == [
        ["Grüße", "aus", "Köln", "—", "sagt", "Jürgen", "(", "東京", ")", "!"],
        ["Paris", ".", "Ünï"],
        [],
        [],
        ["a", ".", ".", ".", "b", "'", "s"],
    ]
    assert out["start"].to_list()[0] == [0, 6, 10, 15, 17, 22, 29, 30, 32, 33]
    for text, row, start, end in zip(texts, words, out["start"].to_list(), out["end"].to_list()):
        assert [text[s:e] for s, e in zip(start, end)] == row
    for text, row, start, end in zip(
        texts, words, out["byte_start"].to_list(), out["byte_end"].to_list()
    ):
        assert [text.encode()[s:e].decode() for s, e in zip(start, end)] == row
    assert out["start"].dtype == tf.int64
    assert split_words(tf.constant([], tf.string))["words"].shape.as_list() == [0, None]


def reference_chunks(tags):
    """conlleval's IOB2 chunks, by hand: [(type, start word, end word exclusive)]."""
    chunks, previous = [], None
    for i, tag in enumerate(tags):
        kind = tag[2:] if tag[:2] in ("B-", "I-") and len(tag) > 2 else None
        if kind is None:
            previous = None
            continue
        if tag.startswith("B-") or kind != previous:
            chunks.append([kind, i, i + 1])
        else:
            chunks[-1][2] = i + 1
        previous = kind
    return [tuple(c) for c in chunks]


CHUNK_CASES = [
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
    (["I-PER", "I-PER", "B-PER", "I-PER"], [("PER", 0, 2), ("PER", 2, 4)]),  # I after nothing
    (["O", "I-LOC", "I-PER", "I-PER", "O", "I-PER"], [("LOC", 1, 2), ("PER", 2, 4), ("PER", 5, 6)]),
    (["B-LOC", "B-LOC", "I-LOC", "I-LOC"], [("LOC", 0, 1), ("LOC", 1, 4)]),
    (["O", "O"], []),
    ([], []),
    (["B-PER", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 2)]),
]


def test_iob2_chunks_hand_cases():
    tag_ids = tf.ragged.constant(
        [[LABELS.index(t) for t in tags] for tags, _ in CHUNK_CASES],
        dtype=tf.int64,
        row_splits_dtype=tf.int64,
    )
    chunks = iob2_chunks(tag_ids, LABELS)
    for (tags, expected), types, starts, ends in zip(
        CHUNK_CASES, chunks["type"].to_list(), chunks["start"].to_list(), chunks["end"].to_list()
    ):
        got = [(t.decode(), s, e) for t, s, e in zip(types, starts, ends)]
        assert got == expected == reference_chunks(tags), tags
    # An entity never runs across two texts.
    rows = iob2_chunks(tf.ragged.constant([[1, 2], [2, 2]]), LABELS)
    assert rows["start"].to_list() == [[0], [0]] and rows["end"].to_list() == [[2], [2]]
    odd = iob2_chunks(tf.ragged.constant([[0, 1, 2]]), ["MISC", "B-X", "I-X"])  # no prefix: O
    assert odd["start"].to_list() == [[1]] and odd["end"].to_list() == [[3]]


@pytest.fixture(scope="module")
def tagger(spm_model_file):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.preprocessor import AlbertPreprocessor
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    preprocessor = AlbertPreprocessor(spm_model_file, max_seq_length=32)
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=preprocessor.vocab_size)
    model = AlbertTokenClassifier(AlbertModel(config), labels=LABELS, dropout=0.0)
    # Deterministic weights without a global seed (tf.random.set_seed would clear TF's kernel
    # cache and with it other fixtures' SentencePiece resources): random matrices redrawn,
    # constant LayerNorm scales and biases kept; the head spread so that tags are a mix.
    rng = np.random.default_rng(0)
    model.set_weights(
        [
            w if np.ptp(w) == 0 else rng.normal(0.0, 0.02, w.shape).astype(w.dtype)
            for w in model.get_weights()
        ]
    )
    kernel = rng.normal(0.0, 0.3, model.logits.kernel.shape)
    model.logits.kernel.assign(kernel.astype("float32"))
    return model, preprocessor


@pytest.fixture(scope="module")
def served(tagger, tmp_path_factory):
    model, preprocessor = tagger
    base = str(tmp_path_factory.mktemp("ner") / "tagger")
    path = export_token_classifier(
        model, preprocessor, base, max_seq_length=SEQ_LENGTH, stride=STRIDE
    )
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, path, json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return path, json.loads(result.stdout.strip().splitlines()[-1])


def test_fresh_process_signatures_and_words(served):
    path, out = served
    assert path.endswith(os.sep + "1")
    assert out["signatures"] == ["predict_ids", "serving_default"]
    assert not out["imported_albert_tf"]
    result = out["served"]
    assert result["num_words"] == [6, 11, 0, 0, 42]
    for i, text in enumerate(TEXTS):
        n = result["num_words"][i]
        words = result["words"][i][:n]
        assert words == [
            text[s:e] for s, e in zip(result["word_start"][i][:n], result["word_end"][i][:n])
        ]
        assert all(w == "" for w in result["words"][i][n:])
        assert all(s == -1 for s in result["word_start"][i][n:])
    assert (
        result["words"][1]
        == ["Grüße", "aus", "Köln", "—", "sagt", "Jürgen", "Müller", "(", "東京", ")", "!"]
        + [""] * 31
    )
    assert result["word_start"][1][:4] == [0, 6, 10, 15]
    # The empty batch returns empty outputs of the right rank.
    shapes = out["empty_shapes"]
    assert shapes["num_words"] == [0] and shapes["num_entities"] == [0]
    assert all(shape[0] == 0 for shape in shapes.values()) and len(shapes) == len(result)


def test_fresh_process_tags_equal_the_training_path(served, tagger):
    model, preprocessor = tagger
    result = served[1]["served"]
    sentences = [row[:n] for row, n in zip(result["words"], result["num_words"])]
    windows = WordWindows.build(sentences, preprocessor, SEQ_LENGTH, STRIDE)
    assert np.sum(windows.window_sentence == 4) >= 3  # the long text needs 3+ windows
    logits = model.predict(windows.inputs, verbose=0)
    for i, per_word in enumerate(word_logits(windows, logits)):
        probabilities = tf.nn.softmax(per_word).numpy()
        n = result["num_words"][i]
        assert result["word_tags"][i][:n] == [LABELS[t] for t in probabilities.argmax(-1)]
        np.testing.assert_allclose(result["word_score"][i][:n], probabilities.max(-1), atol=1e-5)
    tags = [t for i, row in enumerate(result["word_tags"]) for t in row[: result["num_words"][i]]]
    assert {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"} <= set(tags)  # a real mix of tags


def test_fresh_process_entities_follow_the_tags(served):
    result = served[1]["served"]
    total = 0
    for i, text in enumerate(TEXTS):
        n = result["num_words"][i]
        expected = reference_chunks(result["word_tags"][i][:n])
        count = result["num_entities"][i]
        assert count == len(expected)
        total += count
        for e, (kind, first, end) in enumerate(expected):
            start, stop = result["word_start"][i][first], result["word_end"][i][end - 1]
            assert result["entity_type"][i][e] == kind
            assert (result["entity_start"][i][e], result["entity_end"][i][e]) == (start, stop)
            assert result["entity_text"][i][e] == text[start:stop]
            np.testing.assert_allclose(
                result["entity_score"][i][e], np.mean(result["word_score"][i][first:end]), atol=1e-6
            )
        assert all(t == "" for t in result["entity_type"][i][count:])
        assert all(s == -1 for s in result["entity_start"][i][count:])
    assert total > 5 and any(
        s < e - 1
        for s, e in zip(  # some entity spans several words
            sum(result["entity_start"], []), sum(result["entity_end"], [])
        )
        if s >= 0
    )


def test_predict_ids_and_description(served, tagger):
    from albert_tf.export import warmup

    path, out = served
    model = tagger[0]
    ids = {
        "input_word_ids": np.array([[2, 10, 11, 3]], "int32"),
        "input_mask": np.ones([1, 4], "int32"),
        "input_type_ids": np.zeros([1, 4], "int32"),
    }
    logits = model(ids).numpy()
    np.testing.assert_allclose(out["ids"]["logits"], logits, atol=1e-4)
    assert out["ids"]["tag"] == [[LABELS[t] for t in logits[0].argmax(-1)]]
    description = json.load(open(os.path.join(path, "assets.extra", "albert_tf.json")))
    assert description["kind"] == "token_classifier" and description["labels"] == LABELS
    assert (description["seq_length"], description["stride"]) == (SEQ_LENGTH, STRIDE)
    if warmup.serving_api_available():
        assert len(warmup.read_warmup_requests(path)) == 2


def test_export_argument_errors(tagger, tmp_path):
    model, preprocessor = tagger
    with pytest.raises(ValueError, match="one tag name per class"):
        export_token_classifier(model, preprocessor, str(tmp_path), labels=["O", "B-X"])
    with pytest.raises(ValueError, match="stride must be"):
        export_token_classifier(model, preprocessor, str(tmp_path), stride=31)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        export_token_classifier(model, preprocessor, str(tmp_path), max_seq_length=4096)
    assert not os.listdir(tmp_path)


def test_bfloat16_export_tags_close_to_float32(served, tagger, tmp_path):
    model, preprocessor = tagger
    path = export_token_classifier(
        model, preprocessor, str(tmp_path), SEQ_LENGTH, STRIDE, compute_dtype="bfloat16"
    )
    with open(os.path.join(path, "assets.extra", "albert_tf.json")) as f:
        assert json.load(f)["compute_dtype"] == "bfloat16"
    result = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    expected = served[1]["served"]
    scores = result["word_score"].numpy()
    assert result["num_words"].numpy().tolist() == expected["num_words"]
    tags = [[t.decode() for t in row] for row in result["word_tags"].numpy().tolist()]
    same = [a == b for row, ref in zip(tags, expected["word_tags"]) for a, b in zip(row, ref)]
    assert np.mean(same) >= 0.9
    assert 0.0 < np.abs(scores - np.array(expected["word_score"])).max() < 0.05
