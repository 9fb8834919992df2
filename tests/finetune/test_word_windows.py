"""Word <-> piece windows for token classification: hand-checked windows and owners, long
sentences, labels, word logits, the in-graph twin, argument errors."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.text import graph_windows
from albert_tf.text.word_windows import WordWindows, window_labels, window_sizes, word_logits


def one_piece_words(n, first=10):
    return [[first + i] for i in range(n)]


def test_short_sentence_is_one_window():
    windows = WordWindows.from_word_pieces([[[10], [11, 12]]], max_seq_length=8, stride=2)
    assert windows.input_word_ids.tolist() == [[2, 10, 11, 12, 3, 0, 0, 0]]
    assert windows.input_mask.tolist() == [[1, 1, 1, 1, 1, 0, 0, 0]]
    assert windows.input_type_ids.tolist() == [[0] * 8]
    assert windows.label_word.tolist() == [[-1, 0, 1, -1, -1, -1, -1, -1]]
    assert windows.window_sentence.tolist() == [0] and windows.num_long_sentences == 0
    for array in (
        windows.input_word_ids,
        windows.input_mask,
        windows.label_word,
        windows.window_sentence,
    ):
        assert array.dtype == np.int32


def test_sliding_windows_and_max_context_owner():
    # 6 one-piece words, 4 pieces per window, stride 2: windows [0, 4) and [2, 6).
    windows = WordWindows.from_word_pieces([one_piece_words(6)], max_seq_length=6, stride=2)
    assert windows.input_word_ids.tolist() == [[2, 10, 11, 12, 13, 3], [2, 12, 13, 14, 15, 3]]
    # piece 2: min(2, 1) in window 0 beats min(0, 3); piece 3: min(3, 0) loses to min(1, 2).
    assert windows.label_word.tolist() == [[-1, 0, 1, 2, -1, -1], [-1, -1, 3, 4, 5, -1]]
    assert windows.num_long_sentences == 1


def test_ties_go_to_the_earlier_window_and_the_length_counts():
    # 5 pieces per window, stride 2, 7 pieces: [0, 5), [2, 7); piece 3 scores min(3, 1) = 1 in
    # both windows of equal length: the earlier one owns it.
    windows = WordWindows.from_word_pieces([one_piece_words(7)], max_seq_length=7, stride=2)
    assert windows.label_word.tolist() == [[-1, 0, 1, 2, 3, -1, -1], [-1, -1, -1, 4, 5, 6, -1]]
    # 4 per window, stride 3, 6 pieces: [0, 4), [3, 6) (shorter, last); piece 3 scores 0 in
    # both, the longer window wins by 0.01 * length.
    windows = WordWindows.from_word_pieces([one_piece_words(6)], max_seq_length=6, stride=3)
    assert windows.input_word_ids.tolist() == [[2, 10, 11, 12, 13, 3], [2, 13, 14, 15, 3, 0]]
    assert windows.label_word.tolist() == [[-1, 0, 1, 2, 3, -1], [-1, -1, 4, 5, -1, -1]]


def test_only_first_pieces_carry_labels_and_words_may_straddle_windows():
    # pieces: w0 = [10, 11, 12], w1 = [13, 14], w2 = [15]; 4 per window, stride 2:
    # windows [0, 4) = 10 11 12 13 and [2, 6) = 12 13 14 15.
    windows = WordWindows.from_word_pieces(
        [[[10, 11, 12], [13, 14], [15]]], max_seq_length=6, stride=2
    )
    assert windows.input_word_ids.tolist() == [[2, 10, 11, 12, 13, 3], [2, 12, 13, 14, 15, 3]]
    assert windows.label_word.tolist() == [[-1, 0, -1, -1, -1, -1], [-1, -1, 1, -1, 2, -1]]
    labels = window_labels(windows, [[4, 1, 2]])
    assert labels.tolist() == [[-1, 4, -1, -1, -1, -1], [-1, -1, 1, -1, 2, -1]]


def reference_owner(first_piece, spans):
    """The max-context rule written with the original float score."""
    scores = [
        min(first_piece - s, s + n - 1 - first_piece) + 0.01 * n
        if s <= first_piece < s + n
        else -1.0
        for s, n in spans
    ]
    return int(np.argmax(scores))


@pytest.mark.parametrize("stride", [1, 5, 14])
def test_long_sentence_every_word_labelled_once(stride):
    rng = np.random.default_rng(stride)
    sentences = [
        [list(rng.integers(5, 1000, rng.integers(1, 5))) for _ in range(n)] for n in (120, 3, 0, 40)
    ]
    windows = WordWindows.from_word_pieces(sentences, max_seq_length=16, stride=stride)
    assert windows.num_sentences == 4 and windows.num_long_sentences == 2
    for s, sentence in enumerate(sentences):
        rows = np.nonzero(windows.window_sentence == s)[0]
        pieces = [p for word in sentence for p in word]
        starts = [0]
        while starts[-1] + 14 < len(pieces):
            starts.append(starts[-1] + stride)
        assert len(rows) == len(starts)
        spans = [(start, min(14, len(pieces) - start)) for start in starts]
        owned = {}
        for row, (start, length) in zip(rows, spans):
            ids = windows.input_word_ids[row]
            assert ids.tolist() == [2] + pieces[start : start + length] + [3] + [0] * (14 - length)
            assert windows.input_mask[row].sum() == length + 2
            for position in np.nonzero(windows.label_word[row] >= 0)[0]:
                word = int(windows.label_word[row, position])
                assert word not in owned  # labelled in exactly one window
                owned[word] = (row, start + position - 1)
        assert sorted(owned) == list(range(len(sentence)))
        first_pieces = np.cumsum([0] + [len(w) for w in sentence])[:-1]
        for word, (row, piece) in owned.items():
            assert piece == first_pieces[word]
            assert row == rows[reference_owner(piece, spans)]


@pytest.mark.parametrize("stride", [1, 3, 6])
def test_graph_windows_equal_python_windows(stride):
    rng = np.random.default_rng(10 + stride)
    sentences = [
        [list(rng.integers(5, 1000, rng.integers(1, 4))) for _ in range(n)]
        for n in (30, 0, 1, 7, 12)
    ]
    python = WordWindows.from_word_pieces(sentences, max_seq_length=9, stride=stride)
    ragged = tf.ragged.constant(sentences, dtype=tf.int32, ragged_rank=2)
    graph = graph_windows.word_windows(ragged, max_seq_length=9, stride=stride, cls_id=2, sep_id=3)
    width = graph["input_word_ids"].shape[1]
    assert width == 9  # the longest window is full
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(graph[key].numpy(), python.inputs[key])
    np.testing.assert_array_equal(graph["window_text"].numpy(), python.window_sentence)
    rows, positions = np.nonzero(python.label_word >= 0)
    order = np.lexsort((python.label_word[rows, positions], python.window_sentence[rows]))
    np.testing.assert_array_equal(graph["owner_window"].numpy(), rows[order])
    np.testing.assert_array_equal(graph["owner_position"].numpy(), positions[order])


def test_word_logits_round_trip():
    sentences = [[[7] * (1 + i % 3) for i in range(n)] for n in (25, 2, 0, 9)]
    windows = WordWindows.from_word_pieces(sentences, max_seq_length=10, stride=3)
    logits = np.random.default_rng(0).normal(size=windows.label_word.shape + (2,))
    rows, positions = np.nonzero(windows.label_word >= 0)
    logits[rows, positions, 0] = windows.window_sentence[rows]
    logits[rows, positions, 1] = windows.label_word[rows, positions]
    out = word_logits(windows, logits.astype("float32"))
    assert [o.shape for o in out] == [(25, 2), (2, 2), (0, 2), (9, 2)]
    for s, words in enumerate(out):
        assert words.dtype == np.float32
        np.testing.assert_array_equal(words[:, 0], s)
        np.testing.assert_array_equal(words[:, 1], np.arange(len(words)))
    tags = [list(range(len(sentence))) for sentence in sentences]
    labels = window_labels(windows, tags)
    np.testing.assert_array_equal(labels, np.where(windows.label_word >= 0, windows.label_word, -1))
    with pytest.raises(ValueError, match="logits of shape"):
        word_logits(windows, logits[:, :5])


def test_window_labels_checks_counts():
    windows = WordWindows.from_word_pieces([[[10], [11]]], max_seq_length=8)
    with pytest.raises(ValueError, match="sentence 0 has 2 words but 3 tags"):
        window_labels(windows, [[0, 1, 2]])
    with pytest.raises(ValueError, match="2 tag lists for 1 sentences"):
        window_labels(windows, [[0, 1], [0]])


@pytest.mark.parametrize("stride", [0, 7, -1, 2.5, True])
def test_bad_stride(stride):
    with pytest.raises(
        ValueError, match=r"stride must be an integer in \[1, max_seq_length - 2 = 6\]"
    ):
        WordWindows.from_word_pieces([[[10]]], max_seq_length=8, stride=stride)


def test_bad_max_seq_length_and_empty_word():
    with pytest.raises(ValueError, match="max_seq_length must be an integer >= 3"):
        window_sizes(2, 1)
    assert window_sizes(3) == (1, 1) and window_sizes(128) == (126, 63)
    with pytest.raises(ValueError, match="word 1 has no pieces"):
        WordWindows.from_word_pieces([[[10], []]], max_seq_length=8)


@pytest.fixture(scope="module")
def python_tokenizer(spm_model_file):
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model_file)


def test_build_tokenizes_each_word_like_the_python_tokenizer(spm_model_file, python_tokenizer):
    from albert_tf.text.graph_words import WordTokenizer

    sentences = [
        ["Ann", "lives", "in", "Köln", "."],
        [],
        ["", "Grüße", "東京", "9,000,"],
        ["file"] * 30,
    ]
    words = WordTokenizer(spm_model_file)
    windows = WordWindows.build(sentences, words, max_seq_length=16, stride=5)
    expected = [
        [python_tokenizer.encode_ids(w) or [python_tokenizer.unk_id] for w in sentence]
        for sentence in sentences
    ]
    assert expected[2][0] == [1]  # an empty word becomes [UNK]
    reference = WordWindows.from_word_pieces(expected, max_seq_length=16, stride=5)
    for key in ("input_word_ids", "input_mask", "label_word", "window_sentence"):
        np.testing.assert_array_equal(getattr(windows, key), getattr(reference, key))
    assert windows.words_per_sentence.tolist() == [5, 0, 4, 30]
    long = sum(sum(len(w) for w in sentence) > 14 for sentence in expected)
    assert windows.num_long_sentences == long and 1 <= long < 4 and windows.num_windows > 4
    assert f"{long} sentences in several windows" in repr(windows)
    # The other tokenizer forms give the same windows.
    for other in (spm_model_file, python_tokenizer, words.text_tokenizer):
        again = WordWindows.build(sentences, other, max_seq_length=16, stride=5)
        np.testing.assert_array_equal(again.input_word_ids, windows.input_word_ids)
