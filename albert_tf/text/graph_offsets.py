"""In-graph `preprocess_text` and SentencePiece with CHARACTER offsets into the raw text.

`normalize_with_sources` is `graph_ops.normalize` that also reports, for every character of the
normalised text, the span of raw characters it came from (a collapsed whitespace run -> its
first character; a TeX quote pair -> both characters; an NFKD expansion -> the one character).
`pieces_with_offsets` tokenises with SentencePiece (tensorflow-text, whose offsets point into
the normalised text), applies the digit-comma rule, and maps every piece back to raw
characters: from its first to its last non-space character, end exclusive.

For ordinary text these spans equal the Python path's LCS alignment
(`squad_alignment.align_pieces`). They can differ where a raw character normalises to several
characters or to none (ligatures such as "ﬁ", "½", standalone combining marks), for Hangul
(NFKD jamo that SentencePiece recomposes) and for characters that NFKD turns into spaces
(U+00A8): there the LCS leaves characters unmatched and guesses their neighbours, while these
spans follow the characters' true sources. Offsets assume valid UTF-8 (invalid bytes count as
U+FFFD).

>>> out = normalize_with_sources(tf.constant(["  Caf\u00e9 ``ok''"]), tex_quotes=True)
>>> out["text"].numpy()[0].decode(), out["source_start"].to_list()[0]
('cafe "ok"', [2, 3, 4, 5, 6, 7, 9, 10, 11])
"""

import tensorflow as tf

from albert_tf.text import graph_ops, unicode_tables
from albert_tf.text.tokenizer import WORD_START

_SPACE = 0x20
# Python's `str.isspace` code points (the last one is U+3000).
WHITESPACE = unicode_tables.to_ranges([c for c in range(0x3001) if chr(c).isspace()])
_QUOTES = (0x60, 0x27)  # `` and '' become one '"'


def _flat_positions(ragged):
    """(row id, index within the row) of every flat value of a ragged [B, (n)] tensor."""
    row = ragged.value_rowids()
    starts = tf.gather(ragged.row_splits, row)
    return row, tf.range(tf.size(ragged.flat_values, out_type=tf.int64)) - starts


def _keep(ragged, keep, *values):
    """`ragged` and parallel flat `values` restricted to the flat positions where `keep`."""
    kept = tf.ragged.boolean_mask(ragged, ragged.with_flat_values(keep))
    return (kept,) + tuple(tf.boolean_mask(v, keep) for v in values)


def is_whitespace(codepoints):
    """bool, the shape of int32 `codepoints`: Python's `str.isspace` of each."""
    return graph_ops.in_ranges(tf.constant(WHITESPACE), codepoints)


def _collapse_whitespace(cp):
    """Strip + collapse whitespace runs to one space: (codepoints, source start, source end)."""
    flat = cp.flat_values
    row, index = _flat_positions(cp)
    space = is_whitespace(flat)
    solid = tf.cast(tf.logical_not(space), tf.int64)
    before = tf.cumsum(solid, exclusive=True) - tf.gather(
        tf.cumsum(solid, exclusive=True), tf.gather(cp.row_splits, row)
    )
    total = tf.math.unsorted_segment_sum(solid, row, cp.nrows())
    after = tf.gather(total, row) - before - solid
    previous_space = tf.concat([[True], space[:-1]], axis=0) | tf.equal(index, 0)
    keep = tf.logical_not(space) | (tf.logical_not(previous_space) & (after > 0) & (before > 0))
    values = tf.where(space, _SPACE, flat)
    kept, start, values = _keep(cp, keep, index, values)
    return kept.with_flat_values(values), start, start + 1


def _tex_quotes(cp, start, end):
    """Each pair of `` or '' (left to right in a run) becomes '"', spanning both sources."""
    flat = cp.flat_values
    row, index = _flat_positions(cp)
    n = tf.size(flat, out_type=tf.int64)
    previous = tf.concat([[-1], flat[:-1]], axis=0)
    run_start = tf.not_equal(flat, previous) | tf.equal(index, 0)
    run = tf.cumsum(tf.cast(run_start, tf.int64)) - 1
    first = tf.gather(tf.boolean_mask(tf.range(n), run_start), run)
    runs = tf.reduce_sum(tf.cast(run_start, tf.int64))
    run_length = tf.gather(tf.math.unsorted_segment_sum(tf.ones_like(run), run, runs), run)
    position = tf.range(n) - first
    quote = tf.equal(flat, _QUOTES[0]) | tf.equal(flat, _QUOTES[1])
    pair_head = quote & tf.equal(position % 2, 0) & (position + 1 < run_length)
    pair_tail = quote & tf.equal(position % 2, 1)
    next_end = tf.concat([end[1:], [0]], axis=0)
    values = tf.where(pair_head, ord('"'), flat)
    end = tf.where(pair_head, next_end, end)
    kept, values, start, end = _keep(cp, tf.logical_not(pair_tail), values, start, end)
    return kept.with_flat_values(values), start, end


def _decompose_with_sources(cp, start, end):
    """`graph_ops._decompose` (NFKD without combining marks) carrying each output's sources."""
    keys_np, splits_np, values_np = unicode_tables.decomposition_table()
    flat = cp.flat_values
    found, index = graph_ops.lookup(tf.constant(keys_np), flat)
    splits = tf.constant(splits_np)
    s = tf.cast(flat, tf.int64) - unicode_tables.HANGUL_FIRST
    hangul = (s >= 0) & (s < unicode_tables.HANGUL_COUNT)
    lead = tf.cast(0x1100 + s // (21 * 28), tf.int32)
    vowel = tf.cast(0x1161 + (s % (21 * 28)) // 28, tf.int32)
    trail = tf.cast(0x11A7 + s % 28, tf.int32)
    triples = tf.reshape(tf.stack([tf.where(hangul, lead, flat), vowel, trail], axis=1), [-1])
    source = tf.concat([tf.constant(values_np), triples], axis=0)
    n = tf.size(flat, out_type=tf.int64)
    table_start = tf.gather(splits, index)
    own_start = values_np.size + 3 * tf.range(n)
    own_length = tf.where(hangul, 2 + tf.cast(tf.not_equal(trail, 0x11A7), tf.int64), 1)
    first = tf.where(found, table_start, own_start)
    length = tf.where(found, tf.gather(splits, index + 1) - table_start, own_length)
    expanded = tf.ragged.range(first, first + length)
    origin = expanded.value_rowids()
    values = tf.gather(source, expanded.flat_values)
    row_lengths = tf.math.unsorted_segment_sum(length, cp.value_rowids(), cp.nrows())
    out = tf.RaggedTensor.from_row_lengths(values, row_lengths, validate=False)
    return out, tf.gather(start, origin), tf.gather(end, origin)


def normalize_with_sources(texts, lower=True, tex_quotes=False):
    """`graph_ops.normalize(texts, lower, tex_quotes)` of tf.string [B], with each output
    character's raw source span.

    Returns a dict: `text` (tf.string [B], equal to `graph_ops.normalize`), `codepoints`
    (int32 ragged [B, (m)]), `source_start` / `source_end` (int64 ragged [B, (m)], character
    offsets into the raw text, end exclusive).
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    cp = tf.strings.unicode_decode(texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
    cp = tf.cast(cp, tf.int32)
    cp, start, end = _collapse_whitespace(cp)
    if tex_quotes:
        cp, start, end = _tex_quotes(cp, start, end)
    cp, start, end = _decompose_with_sources(cp, start, end)
    if lower:
        cp = graph_ops.lowercase(cp)
    return {
        "text": tf.strings.unicode_encode(cp, "UTF-8"),
        "codepoints": cp,
        "source_start": cp.with_flat_values(start),
        "source_end": cp.with_flat_values(end),
    }


def _utf8_length(codepoints):
    """Bytes of each code point in UTF-8 (int64)."""
    return 1 + sum(tf.cast(codepoints >= limit, tf.int64) for limit in (0x80, 0x800, 0x10000))


def _piece_characters(normalized, byte_start, byte_end):
    """Per SentencePiece piece: its normalised characters (global flat indices), all and the
    non-space ones, from the pieces' byte offsets into the normalised texts."""
    cp = normalized["codepoints"]
    widths = _utf8_length(cp.flat_values)
    row_bytes = tf.math.unsorted_segment_sum(widths, cp.value_rowids(), cp.nrows())
    byte_base = tf.cumsum(row_bytes, exclusive=True)
    # The global byte start of every character, and a sentinel (searchsorted needs one value).
    char_bytes = tf.concat([tf.cumsum(widths, exclusive=True), [tf.int64.max]], axis=0)
    rows = byte_start.value_rowids()
    base = tf.gather(byte_base, rows)
    first = tf.searchsorted(char_bytes, tf.cast(byte_start.flat_values, tf.int64) + base)
    last = tf.searchsorted(char_bytes, tf.cast(byte_end.flat_values, tf.int64) + base)
    last = tf.maximum(last, first)
    chars = tf.ragged.range(first, last)
    solid = tf.not_equal(tf.gather(cp.flat_values, chars.flat_values), _SPACE)
    return chars, tf.ragged.boolean_mask(chars, chars.with_flat_values(solid))


def _split_digit_comma_with_sources(pieces, solid_counts, encode_as_pieces):
    """`graph_ops.split_digit_comma` that also returns, per output piece, its source piece (flat
    index) and the range [lo, hi) of that piece's non-space characters it covers."""
    flat = pieces.flat_values
    n = tf.size(flat, out_type=tf.int64)
    flagged = tf.strings.regex_full_match(flat, f"(?s).*{unicode_tables.digit_class()},")
    selected = tf.boolean_mask(flat, flagged)
    selected_index = tf.boolean_mask(tf.range(n), flagged)
    sub = graph_ops.reencode_without_comma(selected, encode_as_pieces)
    width = tf.cast(
        tf.strings.length(
            tf.strings.regex_replace(sub.flat_values, WORD_START, ""), unit="UTF8_CHAR"
        ),
        tf.int64,
    )
    width = sub.with_flat_values(width)
    lo = tf.cumsum(width, axis=1, exclusive=True)
    limit = tf.gather(tf.gather(solid_counts, selected_index) - 1, sub.value_rowids())
    lo_flat = tf.minimum(lo.flat_values, limit)
    hi_flat = tf.minimum(lo.flat_values + width.flat_values, limit)
    count = tf.size(selected, out_type=tf.int64)
    selected_limit = tf.gather(solid_counts, selected_index)

    def concat(sub_values, comma_values):
        return tf.concat(
            [sub.with_flat_values(sub_values), tf.reshape(comma_values, [count, 1])], axis=1
        )

    replacements = {
        "piece": concat(sub.flat_values, tf.fill([count], ",")),
        "source": concat(tf.gather(selected_index, sub.value_rowids()), selected_index),
        "lo": concat(lo_flat, selected_limit - 1),
        "hi": concat(hi_flat, selected_limit),
    }
    singles = {
        "piece": flat,
        "source": tf.range(n),
        "lo": tf.zeros([n], tf.int64),
        "hi": solid_counts,
    }
    choice = tf.where(
        flagged, n + tf.cumsum(tf.cast(flagged, tf.int64), exclusive=True), tf.range(n)
    )
    out = {}
    for key, single in singles.items():
        options = tf.concat(
            [tf.RaggedTensor.from_row_lengths(single, tf.ones([n], tf.int64)), replacements[key]],
            axis=0,
        )
        per_piece = tf.gather(options, choice)
        out[key] = per_piece.flat_values
    lengths = tf.gather(
        tf.concat([tf.ones([n], tf.int64), replacements["piece"].row_lengths()], 0), choice
    )
    row_lengths = tf.math.unsorted_segment_sum(lengths, pieces.value_rowids(), pieces.nrows())
    return out, row_lengths


def pieces_with_offsets(texts, sentencepiece, lower=True, tex_quotes=False):
    """SentencePiece pieces of `preprocess_text(texts, lower, tex_quotes)` (digit-comma rule
    applied, equal to
    `TextTokenizer.tokenize_to_pieces`) with their character spans in the RAW texts.

    Args:
      texts: tf.string [B].
      sentencepiece: a `tensorflow_text.SentencepieceTokenizer` with out_type=tf.string.
      lower: lowercase (the tokenizer's lower_case).
      tex_quotes: Hugging Face's TeX-quote rule (the tokenizer's tex_quotes).

    Returns a dict of ragged [B, (pieces)]: `pieces` (tf.string), `start`, `end` (int64
    character offsets into the raw text, end exclusive: a piece's first to last non-space
    character; a piece that is only "▁" gets the whitespace character it stands for).

    >>> import tensorflow_text as tft
    >>> from albert_tf.text.tokenizer import read_model_proto
    >>> sp = tft.SentencepieceTokenizer(read_model_proto("30k-clean.model"), out_type=tf.string)
    >>> text = "Hi  Caf\u00e9!"
    >>> out = pieces_with_offsets(tf.constant([text]), sp)
    >>> [p.decode() for p in out["pieces"][0].numpy()]
    ['▁', 'h', 'i', '▁c', 'a', 'f', 'e', '!']
    >>> [text[s:e] for s, e in zip(out["start"][0].numpy(), out["end"][0].numpy())]
    ['H', 'H', 'i', 'C', 'a', 'f', 'é', '!']
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    normalized = normalize_with_sources(texts, lower, tex_quotes)
    pieces, byte_start, byte_end = sentencepiece.tokenize_with_offsets(normalized["text"])
    chars, solid = _piece_characters(normalized, byte_start, byte_end)
    solid_counts = solid.row_lengths()
    split, row_lengths = _split_digit_comma_with_sources(
        pieces, solid_counts, sentencepiece.tokenize
    )
    source_start = normalized["source_start"].flat_values
    source_end = normalized["source_end"].flat_values
    source = split["source"]
    lo, hi = split["lo"], split["hi"]
    piece_solid = tf.gather(solid, source)
    has_solid = hi > lo
    padded_solid = tf.concat([piece_solid.flat_values, [0]], 0)
    solid_first = tf.gather(padded_solid, piece_solid.row_starts() + tf.where(has_solid, lo, 0))
    solid_last = tf.gather(padded_solid, piece_solid.row_starts() + tf.where(has_solid, hi - 1, 0))
    # A piece without non-space characters ("▁"): the character it covers, else the one
    # before the text's first kept character.
    piece_chars = tf.gather(chars, source)
    any_char = piece_chars.row_lengths() > 0
    first_char = tf.gather(
        tf.concat([piece_chars.flat_values, [0]], 0),
        tf.minimum(piece_chars.row_starts(), tf.size(piece_chars.flat_values, out_type=tf.int64)),
    )
    padded_start = tf.concat([source_start, [0]], 0)
    padded_end = tf.concat([source_end, [0]], 0)
    row = tf.repeat(tf.range(pieces.nrows()), row_lengths)
    text_first = tf.gather(tf.concat([normalized["source_start"].row_starts(), [0]], 0), row)
    lead = tf.maximum(
        tf.gather(padded_start, tf.minimum(text_first, tf.size(source_start, out_type=tf.int64)))
        - 1,
        0,
    )
    start = tf.where(
        has_solid,
        tf.gather(padded_start, solid_first),
        tf.where(any_char, tf.gather(padded_start, first_char), lead),
    )
    end = tf.where(
        has_solid,
        tf.gather(padded_end, solid_last),
        tf.where(any_char, tf.gather(padded_end, first_char), lead + 1),
    )

    def ragged(values):
        return tf.RaggedTensor.from_row_lengths(values, row_lengths, validate=False)

    return {"pieces": ragged(split["piece"]), "start": ragged(start), "end": ragged(end)}
