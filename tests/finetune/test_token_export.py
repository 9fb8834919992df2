"""Token-classification export: words and offsets, IOB2 chunking, and the raw-text SavedModel
loaded in a fresh process (serving_default and the `words` signature), compared with the
training path (WordWindows + model); the word convention a task records and serves, and the
served tags' agreement with the runner's dev predictions."""

import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import word_convention
from albert_tf.export.token_classifier_serving import (
    DevReference,
    export_token_classifier,
    iob2_chunks,
    token_classifier_spec,
)
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
# The `words` signature's rows: the texts' words, a row of three windows, an empty row.
WORD_ROWS = [[w for w, _, _ in word_convention.split(t, "punctuation")] for t in TEXTS[:2]]
WORD_ROWS += [LONG.split(), []]

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
    rows = json.loads(sys.argv[3])
    width = max(len(row) for row in rows) + 2
    padded = [row + ["padding"] * (width - len(row)) for row in rows]  # ignored past num_words
    by_words = model.signatures["words"](
        words=tf.constant(padded), num_words=tf.constant([len(row) for row in rows], tf.int64))
    try:
        model.signatures["words"](words=tf.constant([["a"]]), num_words=tf.constant([2], tf.int64))
        too_many = None
    except tf.errors.InvalidArgumentError as e:
        too_many = [line for line in e.message.splitlines() if "num_words" in line]
    ids = model.signatures["predict_ids"](
        input_word_ids=tf.constant([[2, 10, 11, 3]]), input_mask=tf.constant([[1, 1, 1, 1]]),
        input_type_ids=tf.constant([[0, 0, 0, 0]]))
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "served": plain(serve(text=tf.constant(json.loads(sys.argv[2])))),
        "words": plain(by_words),
        "too_many": too_many,
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


# Dev sentences whose tokens hold punctuation ("U.S.", "1-0", "Paris,"), and their gold tags.
DEV = [
    ["The", "U.S.", "team", "won", "1-0", "in", "Paris", "."],
    ["Ann", "Smith", "lives", "in", "Köln", "."],
    LONG.split(),
]
GOLD = [
    ["O", "B-LOC", "O", "O", "O", "O", "B-LOC", "O"],
    ["B-PER", "I-PER", "O", "O", "B-LOC", "O"],
    ["O"] * len(LONG.split()),
]


@pytest.fixture(scope="module")
def served(tagger, tmp_path_factory):
    """The export (punctuation convention; measured against the training path's tags of DEV,
    standing in for the runner's dev predictions), run in a fresh process."""
    model, preprocessor = tagger
    base = str(tmp_path_factory.mktemp("ner") / "tagger")
    predicted = _training_tags(model, preprocessor, DEV)[0]
    path = export_token_classifier(
        model,
        preprocessor,
        base,
        max_seq_length=SEQ_LENGTH,
        stride=STRIDE,
        dev_reference=DevReference(DEV, predicted, GOLD, "float32"),
    )
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, path, json.dumps(TEXTS), json.dumps(WORD_ROWS)],
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
    assert out["signatures"] == ["predict_ids", "serving_default", "words"]
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


def _training_tags(model, preprocessor, sentences):
    """(tags, top probabilities, windows) of the training path (WordWindows + model)."""
    windows = WordWindows.build(sentences, preprocessor, SEQ_LENGTH, STRIDE)
    per_word = word_logits(windows, model.predict(windows.inputs, verbose=0))
    probabilities = [tf.nn.softmax(logits).numpy() for logits in per_word]
    return [[LABELS[t] for t in p.argmax(-1)] for p in probabilities], probabilities, windows


def test_fresh_process_words_signature_tags_the_given_words(served, tagger):
    out = served[1]
    result = out["words"]
    tags, probabilities, windows = _training_tags(*tagger, WORD_ROWS)
    assert np.sum(windows.window_sentence == 2) >= 3  # row 2 needs 3+ windows: none cut
    width = max(len(row) for row in WORD_ROWS) + 2
    for i, row in enumerate(WORD_ROWS):
        n = len(row)
        assert result["word_tags"][i] == tags[i] + [""] * (width - n)
        assert result["word_tag_id"][i] == [LABELS.index(t) for t in tags[i]] + [-1] * (width - n)
        np.testing.assert_allclose(result["word_score"][i][:n], probabilities[i].max(-1), atol=1e-5)
        assert result["word_score"][i][n:] == [0.0] * (width - n)
        count = result["num_entities"][i]
        entities = list(
            zip(
                result["entity_type"][i][:count],
                result["entity_word_start"][i][:count],
                result["entity_word_end"][i][:count],
            )
        )
        assert entities == reference_chunks(tags[i])
        assert all(v == -1 for v in result["entity_word_start"][i][count:])
    # The words serving_default splits the first texts into: the same tags.
    for i in (0, 1):
        n = out["served"]["num_words"][i]
        assert result["word_tags"][i][:n] == out["served"]["word_tags"][i][:n]
    assert result["num_entities"][3] == 0 and sum(result["num_entities"]) > 3
    assert len(out["too_many"]) == 1
    assert "[num_words exceeds the width W of words [B, W]]" in out["too_many"][0]
    assert "[x (num_words:0) = ] [2]" in out["too_many"][0]


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
    assert description["signatures"] == ["serving_default", "words", "predict_ids"]
    assert description["word_convention"] == "punctuation"
    assert description["words"] == "whitespace and single punctuation characters"
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
        description = json.load(f)
    assert description["compute_dtype"] == "bfloat16"
    assert "agreement_with_dev_predictions" not in description  # no dev predictions given
    result = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    expected = served[1]["served"]
    scores = result["word_score"].numpy()
    assert result["num_words"].numpy().tolist() == expected["num_words"]
    tags = [[t.decode() for t in row] for row in result["word_tags"].numpy().tolist()]
    same = [a == b for row, ref in zip(tags, expected["word_tags"]) for a, b in zip(row, ref)]
    assert np.mean(same) >= 0.9
    assert 0.0 < np.abs(scores - np.array(expected["word_score"])).max() < 0.05


def test_agreement_with_the_runners_dev_predictions(served, tagger, caplog):
    """The punctuation export of `served` splits 'U.S.', '1-0' and the long text's 'Paris,',
    'Berlin.' (3 times each): those words disagree, with a WARNING; the words signature and a
    whitespace export (its spec: measured without writing it) agree with the runner."""
    with open(os.path.join(served[0], "assets.extra", "albert_tf.json")) as f:
        punctuation = json.load(f)["agreement_with_dev_predictions"]
    words = sum(len(s) for s in DEV)
    assert punctuation["dev_words"] == words and punctuation["sentences"] == 3
    assert punctuation["raw_text"]["same_words"] == (words - 2 - 6) / words
    assert punctuation["raw_text"]["word_agreement"] <= punctuation["raw_text"]["same_words"]
    assert punctuation["words_signature"]["word_agreement"] == 1.0
    assert punctuation["words_signature"]["f1"] == punctuation["runner"]["f1"]
    (warning,) = punctuation["warnings"]
    assert warning.startswith("served tags of raw text agree with the runner's dev predictions on ")
    assert "the served word split (punctuation) differs from the training data's on 16.0%" in (
        warning
    )
    assert "tokens such as 'Paris,', 'Berlin.', 'U.S.' are not served as one word" in warning
    assert "send pre-split words to the `words` signature or export with --word_split" in warning
    model, preprocessor = tagger
    predicted = _training_tags(model, preprocessor, DEV)[0]
    spec = token_classifier_spec(
        model,
        preprocessor,
        SEQ_LENGTH,
        STRIDE,
        word_convention="whitespace",
        dev_reference=DevReference(DEV, predicted, GOLD, "float32"),
    )
    whitespace = spec.description["agreement_with_dev_predictions"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert whitespace["raw_text"] == {
        "word_agreement": 1.0,
        "same_words": 1.0,
        "untagged": 0.0,
        "f1": whitespace["runner"]["f1"],
    }
    assert whitespace["words_signature"]["word_agreement"] == 1.0 and warned == []


def test_task_decides_records_and_overrides_the_convention(spm_model_file, tmp_path, caplog):
    from albert_tf.finetune.tagging import TaggingData, TokenClassificationTask

    caplog.set_level(logging.INFO, logger="absl")
    train = tmp_path / "train.txt"
    train.write_text(
        "".join("".join(f"{w} {t}\n" for w, t in zip(s, g)) + "\n" for s, g in zip(DEV, GOLD)),
        encoding="utf-8",
    )
    task = TokenClassificationTask(TaggingData(train_file=str(train)))
    task.configure_text(spm_model_file, max_seq_length=SEQ_LENGTH)
    task.load(["train"])
    assert task.word_convention == "whitespace"  # 8 of 50 training words hold punctuation
    assert "word convention: whitespace (training data; the punctuation split reproduces 84.0%" in (
        caplog.text
    )
    description = task.describe()
    assert description["word_convention"]["convention"] == "whitespace"
    assert description["word_convention"]["punctuation_reproduces"] == pytest.approx(0.84)
    # --word_split at training: recorded as given, with a WARNING naming the measured rate.
    caplog.clear()
    forced = TokenClassificationTask(TaggingData(train_file=str(train), word_split="punctuation"))
    forced.configure_text(spm_model_file, max_seq_length=SEQ_LENGTH)
    forced.load(["train"])
    assert forced.describe()["word_convention"]["chosen_by"] == "--word_split"
    assert forced.word_convention == "punctuation"
    assert "--word_split=punctuation contradicts the training data (the punctuation split " in (
        caplog.text
    )
    rebuilt = TokenClassificationTask.from_description(description)
    assert rebuilt.word_convention == "whitespace"
    caplog.clear()
    assert rebuilt.export_word_convention("punctuation") == "punctuation"  # overridden, warned
    assert "--word_split=punctuation contradicts the training data" in caplog.text
    # A finetune.json written before the convention was recorded serves what it served.
    del description["word_convention"]
    old = TokenClassificationTask.from_description(description)
    assert old.word_convention == "punctuation" and old.export_word_convention() == "punctuation"
    assert old.dev_reference() is None  # no run directory: not measured, said in one line
    # The scripts' --word_split: an export option of taggers only.
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
    from albert_tf.settings import InvalidFlagError

    assert old.word_split_options("whitespace") == {"word_split": "whitespace"}
    classifier = SentenceClassificationTask(ClassificationData(task_name="cola"))
    assert classifier.word_split_options() == {}
    with pytest.raises(InvalidFlagError, match="--word_split applies to a token classification"):
        classifier.word_split_options("whitespace")
