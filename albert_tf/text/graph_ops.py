"""In-graph twins of `preprocess_text` and the digit-comma rule (TensorFlow ops only).

Every function here is plain TF ops on tensors (no Python control flow on values), so it runs in
tf.data, in a `tf.function(autograph=False)` and in an exported SavedModel. The Unicode tables
come from `albert_tf.text.unicode_tables` (this Python's Unicode database) and are embedded as
constants, so the graph reproduces Python's `unicodedata` and `str.lower` exactly.

Invalid UTF-8 is not an error in either path: each maximal invalid byte sequence becomes U+FFFD,
exactly as `bytes.decode("utf-8", "replace")` does (the Python path's rule).
"""

import tensorflow as tf

from albert_tf.text import unicode_tables
from albert_tf.text.tokenizer import WORD_START

_SIGMA, _SMALL_SIGMA, _FINAL_SIGMA = 0x03A3, 0x03C3, 0x03C2
_HANGUL_L, _HANGUL_V, _HANGUL_T = 0x1100, 0x1161, 0x11A7
_HANGUL_V_COUNT_T_COUNT, _HANGUL_T_COUNT = 21 * 28, 28


def lookup(keys, x):
    """(found, index) of each x in the sorted 1-D constant `keys`."""
    index = tf.minimum(tf.searchsorted(keys, x, side="left"), tf.size(keys) - 1)
    return tf.equal(tf.gather(keys, index), x), index


def in_ranges(bounds, x):
    """Membership of x in the ranges [bounds[0], bounds[1]), [bounds[2], bounds[3]), ..."""
    return tf.equal(
        tf.math.floormod(tf.searchsorted(bounds, tf.cast(x, tf.int64), side="right"), 2), 1
    )


def _decompose(codepoints):
    """NFKD + drop combining characters on a ragged [B, (chars)] int32 tensor of codepoints."""
    keys_np, splits_np, values_np = unicode_tables.decomposition_table()
    cp = codepoints.flat_values
    # ASCII is NFKD-invariant and holds no combining character: only look the others up.
    where = tf.where(cp >= 0x80)
    others = tf.gather_nd(cp, where)
    found_others, index_others = lookup(tf.constant(keys_np), others)
    hangul_others = (others >= unicode_tables.HANGUL_FIRST) & (
        others < unicode_tables.HANGUL_FIRST + unicode_tables.HANGUL_COUNT
    )

    def expand():
        shape = tf.shape(cp, out_type=tf.int64)
        found = tf.scatter_nd(where, found_others, shape)
        index = tf.scatter_nd(where, index_others, shape)
        splits = tf.constant(splits_np)
        # Hangul syllables decompose arithmetically into 2 or 3 jamo (Unicode 3.12).
        s = cp - unicode_tables.HANGUL_FIRST
        hangul = (s >= 0) & (s < unicode_tables.HANGUL_COUNT)
        lead = _HANGUL_L + s // _HANGUL_V_COUNT_T_COUNT
        vowel = _HANGUL_V + (s % _HANGUL_V_COUNT_T_COUNT) // _HANGUL_T_COUNT
        trail = _HANGUL_T + s % _HANGUL_T_COUNT
        triples = tf.reshape(tf.stack([tf.where(hangul, lead, cp), vowel, trail], axis=1), [-1])
        source = tf.concat([tf.constant(values_np), triples], axis=0)
        table_start = tf.gather(splits, index)
        table_length = tf.gather(splits, index + 1) - table_start
        own_start = values_np.size + 3 * tf.range(shape[0])
        own_length = tf.where(hangul, 2 + tf.cast(tf.not_equal(trail, _HANGUL_T), tf.int64), 1)
        start = tf.where(found, table_start, own_start)
        length = tf.where(found, table_length, own_length)
        out = tf.gather(source, tf.ragged.range(start, start + length).flat_values)
        row_lengths = tf.math.unsorted_segment_sum(
            length, codepoints.value_rowids(), codepoints.nrows()
        )
        return out, tf.concat([[0], tf.cumsum(row_lengths)], axis=0)

    values, row_splits = tf.cond(
        tf.reduce_any(found_others | hangul_others), expand, lambda: (cp, codepoints.row_splits)
    )
    return tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)


def _final_sigma(codepoints):
    """Boolean mask over codepoints.flat_values: capital sigmas that `str.lower` makes final."""
    cased_np, ignorable_np = unicode_tables.final_sigma_ranges()
    cp = codepoints.flat_values
    n = tf.size(cp, out_type=tf.int64)
    cased = in_ranges(tf.constant(cased_np), cp)
    counted = tf.logical_not(in_ranges(tf.constant(ignorable_np), cp))
    positions = tf.concat([tf.boolean_mask(tf.range(n), counted), [n]], axis=0)  # sentinel n
    cased_ext = tf.concat([cased, [False]], axis=0)
    num_counted = tf.size(positions, out_type=tf.int64) - 1
    counted_i = tf.cast(counted, tf.int64)
    before = tf.cumsum(counted_i, exclusive=True)  # counted characters before i
    through = tf.cumsum(counted_i)  # counted characters up to and including i
    row = codepoints.value_rowids()
    row_start = tf.gather(codepoints.row_starts(), row)
    row_limit = tf.gather(codepoints.row_limits(), row)
    prev = tf.gather(positions, tf.maximum(before - 1, 0))
    prev_cased = (before > 0) & (prev >= row_start) & tf.gather(cased_ext, prev)
    nxt = tf.gather(positions, tf.minimum(through, num_counted))
    next_cased = (nxt < row_limit) & tf.gather(cased_ext, nxt)
    return tf.equal(cp, _SIGMA) & prev_cased & tf.logical_not(next_cased)


def lowercase(codepoints):
    """`str.lower` on a ragged [B, (chars)] int32 tensor of codepoints (after `_decompose`)."""
    keys_np, values_np = unicode_tables.lowercase_table()
    cp = codepoints.flat_values
    lowered = tf.where((cp >= 0x41) & (cp <= 0x5A), cp + 0x20, cp)  # ASCII A-Z
    # Only the non-ASCII codepoints go through the table lookup.
    where = tf.where(cp >= 0x80)
    others = tf.gather_nd(cp, where)
    found, index = lookup(tf.constant(keys_np), others)
    lowered = tf.tensor_scatter_nd_update(
        lowered, where, tf.where(found, tf.gather(tf.constant(values_np), index), others)
    )
    final = tf.cond(
        tf.reduce_any(tf.equal(cp, _SIGMA)),
        lambda: _final_sigma(codepoints),
        lambda: tf.zeros_like(cp, tf.bool),
    )
    return codepoints.with_flat_values(tf.where(final, _FINAL_SIGMA, lowered))


def normalize(texts, lower=True, tex_quotes=False, albert_rules=True):
    """`preprocess_text(text, lower, tex_quotes, albert_rules)` on a tf.string tensor [B]
    (returns tf.string [B]).

    >>> normalize(tf.constant(["  Le  ``Caf\u00e9''   CR\u00c8ME "])).numpy()[0].decode()
    "le ``cafe'' creme"
    >>> texts = tf.constant(["  Le  ``Caf\u00e9''   CR\u00c8ME "])
    >>> normalize(texts, tex_quotes=True).numpy()[0].decode()
    'le "cafe" creme'
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    texts = tf.strings.unicode_transcode(
        texts,
        "UTF-8",
        "UTF-8",
        errors="replace",
        replacement_char=0xFFFD,
        replace_control_characters=False,
    )
    if albert_rules:
        space = unicode_tables.whitespace_class()
        texts = tf.strings.regex_replace(texts, f"^{space}+|{space}+$", "")
        texts = tf.strings.regex_replace(texts, f"{space}+", " ")
    if tex_quotes:
        # One pass for both TeX quotes: the two replacements of preprocess_text cannot interact.
        texts = tf.strings.regex_replace(texts, "``|''", '"')
    if not albert_rules and not lower:
        return texts
    if not albert_rules:  # str.lower makes U+0130 two characters; NFKD does so otherwise
        texts = tf.strings.regex_replace(texts, "\u0130", "i\u0307")
    codepoints = tf.strings.unicode_decode(texts, "UTF-8")
    if albert_rules:
        codepoints = _decompose(codepoints)
    if lower:
        codepoints = lowercase(codepoints)
    return tf.strings.unicode_encode(codepoints, "UTF-8")


def split_digit_comma(pieces, encode_as_pieces):
    """The digit-comma rule (see `albert_tf.text.tokenizer.split_digit_comma`) on ragged pieces.

    Args:
      pieces: tf.string RaggedTensor [B, (pieces)].
      encode_as_pieces: tf.string [N] -> tf.string RaggedTensor [N, (pieces)] (SentencePiece).
    Returns:
      tf.string RaggedTensor [B, (pieces)].
    """
    flat = pieces.flat_values
    # Only pieces ending in "," go through the regex with the (large) digit class, and the
    # re-encoding below runs only when a piece matches (most requests have none).
    candidates = tf.where(tf.strings.regex_full_match(flat, "(?s).*,"))
    digit_comma = tf.strings.regex_full_match(
        tf.gather_nd(flat, candidates), f"(?s).*{unicode_tables.digit_class()},"
    )

    def split():
        num_pieces = tf.size(flat, out_type=tf.int64)
        flagged = tf.scatter_nd(candidates, digit_comma, tf.shape(flat, out_type=tf.int64))
        selected = tf.boolean_mask(flat, flagged)
        sub = reencode_without_comma(selected, encode_as_pieces)
        commas = tf.RaggedTensor.from_tensor(tf.fill([tf.size(selected), 1], ","))
        replacements = tf.concat([sub, commas], axis=1)
        singles = tf.RaggedTensor.from_row_lengths(flat, tf.ones([num_pieces], tf.int64))
        options = tf.concat([singles, replacements], axis=0)
        flagged_i = tf.cast(flagged, tf.int64)
        choice = tf.where(
            flagged, num_pieces + tf.cumsum(flagged_i, exclusive=True), tf.range(num_pieces)
        )
        per_piece = tf.gather(options, choice)
        row_lengths = tf.math.unsorted_segment_sum(
            per_piece.row_lengths(), pieces.value_rowids(), pieces.nrows()
        )
        return per_piece.flat_values, tf.concat([[0], tf.cumsum(row_lengths)], axis=0)

    values, row_splits = tf.cond(
        tf.reduce_any(digit_comma), split, lambda: (flat, pieces.row_splits)
    )
    return tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)


def reencode_without_comma(selected, encode_as_pieces):
    """Pieces "<digit>," (tf.string [N]) re-encoded without their final comma and word-start mark:
    tf.string RaggedTensor [N, (pieces)], the re-encoding's leading "▁" dropped when the original
    piece had none (the digit-comma rule's replacement, before its ",")."""
    had_start = tf.strings.regex_full_match(selected, f"(?s){WORD_START}.*")
    stripped = tf.strings.regex_replace(
        tf.strings.regex_replace(selected, ",$", ""), WORD_START, ""
    )
    sub = encode_as_pieces(stripped)
    sub_values = sub.flat_values
    sub_row = sub.value_rowids()
    first = tf.equal(
        tf.range(tf.size(sub_values, out_type=tf.int64)), tf.gather(sub.row_starts(), sub_row)
    )
    strip = (
        first
        & tf.logical_not(tf.gather(had_start, sub_row))
        & tf.strings.regex_full_match(sub_values, f"(?s){WORD_START}.*")
    )
    new_values = tf.where(
        strip, tf.strings.regex_replace(sub_values, f"^{WORD_START}", ""), sub_values
    )
    keep = tf.logical_not(strip & tf.equal(new_values, ""))
    return tf.ragged.boolean_mask(sub.with_flat_values(new_values), sub.with_flat_values(keep))
