"""Sliding windows over words' pieces, in the graph: the twin of `word_windows.WordWindows`.

A text's pieces (every word's ids, in order) become windows of at most `max_seq_length - 2` pieces
whose starts advance by `stride`, packed as `[CLS] pieces [SEP]`; a text that fits is one
window. Each word is read from ONE window: the one where its first piece has the most context,
score = min(pieces left of it, pieces right of it) + 0.01 * window length, ties to the earlier
window (the original BERT/ALBERT max-context rule; computed here exactly, in integers, as
100 * min(...) + length). Plain TF ops, no Python control flow on values.

>>> ids = tf.ragged.constant([[[10], [11, 12], [13]], [[14]]], ragged_rank=2)
>>> windows = word_windows(ids, max_seq_length=5, stride=1, cls_id=2, sep_id=3, pad_id=0)
>>> windows["input_word_ids"].numpy().tolist()
[[2, 10, 11, 12, 3], [2, 11, 12, 13, 3], [2, 14, 3, 0, 0]]
>>> windows["window_text"].numpy().tolist()
[0, 0, 1]
>>> windows["owner_window"].numpy().tolist(), windows["owner_position"].numpy().tolist()
([0, 0, 1, 2], [1, 2, 3, 1])
"""

import tensorflow as tf

from albert_tf.text.word_windows import window_sizes

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def word_windows(word_ids, max_seq_length, stride, cls_id, sep_id, pad_id=0):
    """Packs the words' pieces of each text into windows and picks each word's owning window.

    Args:
      word_ids: int RaggedTensor [B, (words), (pieces)], every word with at least one piece
        (see `graph_words.WordTokenizer`).
      max_seq_length: longest window, [CLS] and [SEP] included; the batch is padded to its longest
        window.
      stride: pieces between the starts of consecutive windows (1 <= stride <= max_seq_length - 2).
      cls_id, sep_id, pad_id: special ids.

    Returns a dict: `input_word_ids`, `input_mask`, `input_type_ids` (int32 [N, S]);
    `window_text` (int64 [N], the text of each window); `owner_window`, `owner_position`
    (int64 [total words], in word order: the window and position that carry each word's first
    piece); `word_splits` (int64 [B + 1], the words' row splits).
    """
    max_len, stride = window_sizes(max_seq_length, stride)
    pieces = word_ids.merge_dims(1, 2)  # [B, (pieces)]
    num_pieces = pieces.row_lengths()
    words = word_ids.values  # [total words, (pieces)]
    word_text = word_ids.value_rowids()
    piece_splits = tf.cast(pieces.row_splits, tf.int64)
    # First piece of each word, counted from the start of its text.
    first_piece = tf.cumsum(tf.cast(words.row_lengths(), tf.int64), exclusive=True) - tf.gather(
        piece_splits, word_text
    )
    # Windows: starts 0, stride, 2 * stride, ... until one reaches the end of the text.
    num_windows = 1 + tf.maximum(
        tf.constant(0, tf.int64), -tf.math.floordiv(max_len - num_pieces, stride)
    )
    k = tf.ragged.range(num_windows)
    window_text, window_start = k.value_rowids(), k.flat_values * stride
    text_pieces = tf.gather(num_pieces, window_text)
    window_length = tf.minimum(text_pieces - window_start, max_len)
    first = tf.gather(piece_splits, window_text) + window_start
    content = tf.gather(pieces.flat_values, tf.ragged.range(first, first + window_length))
    inputs = _pack(
        content, cls_id, sep_id, pad_id, tf.reduce_max(tf.concat([window_length, [0]], axis=0)) + 2
    )
    owner = _owners(
        first_piece,
        tf.gather(num_pieces, word_text),
        tf.gather(num_windows, word_text),
        max_len,
        stride,
    )
    window_base = k.row_splits[:-1]
    return dict(
        inputs,
        window_text=window_text,
        owner_window=tf.gather(window_base, word_text) + owner,
        owner_position=1 + first_piece - owner * stride,
        word_splits=tf.cast(word_ids.row_splits, tf.int64),
    )


def _pack(content, cls_id, sep_id, pad_id, length):
    """Ragged [N, (n)] ids -> `[CLS] ids [SEP]` padded to [N, length] model inputs."""
    n = content.nrows()
    ones = tf.RaggedTensor.from_row_lengths(tf.ones([n], content.dtype), tf.ones([n], tf.int64))
    ids = tf.concat([ones * cls_id, content, ones * sep_id], axis=1)
    shape = tf.stack([n, length])
    word_ids = ids.to_tensor(default_value=tf.cast(pad_id, ids.dtype), shape=shape)
    mask = tf.ones_like(ids).to_tensor(default_value=0, shape=shape)
    return {
        "input_word_ids": tf.cast(word_ids, tf.int32),
        "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.zeros(shape, tf.int32),
    }


def _owners(first_piece, num_pieces, num_windows, max_len, stride):
    """Index (within its text) of the window owning each word: best score, earliest on ties."""
    # Windows holding piece p: k * stride <= p < k * stride + max_len.
    low = tf.maximum(tf.constant(0, tf.int64), -tf.math.floordiv(max_len - 1 - first_piece, stride))
    high = tf.minimum(num_windows - 1, tf.math.floordiv(first_piece, stride))
    candidates = tf.ragged.range(low, high + 1)
    word = candidates.value_rowids()
    k = candidates.flat_values
    p = tf.gather(first_piece, word)
    start = k * stride
    length = tf.minimum(tf.gather(num_pieces, word) - start, max_len)
    score = 100 * tf.minimum(p - start, start + length - 1 - p) + length
    best = tf.gather(tf.math.segment_max(score, word), word)
    never = tf.fill(tf.shape(k), tf.reduce_max(tf.concat([num_windows, [0]], axis=0)))
    return tf.math.unsorted_segment_min(
        tf.where(tf.equal(score, best), k, never), word, tf.shape(first_piece, out_type=tf.int64)[0]
    )


def owner_logits(windows, logits):
    """Each word's logits from its owning window: [N, S, C] -> ragged [B, (words), C]."""
    index = tf.stack([windows["owner_window"], windows["owner_position"]], axis=1)
    return tf.RaggedTensor.from_row_splits(tf.gather_nd(logits, index), windows["word_splits"])
