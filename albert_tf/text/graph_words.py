"""Words for token classification, in the graph: raw text -> words with offsets -> pieces.

`split_words` cuts raw text by one of two word conventions (`WORD_CONVENTIONS`; which one a
tagger serves is decided from its training data: `albert_tf.data.word_convention`):
"punctuation", the way CoNLL data is tokenised: on whitespace, and every punctuation character
is a word of its own ("Paris." -> "Paris", "."); "whitespace": on whitespace only ("U.S." and
"e-mail" stay words). `WordTokenizer` turns
each word, on its own, into SentencePiece ids with ALBERT's `TextTokenizer` (the same
normalisation and model as the rest of the package), giving every word at least one id.
Training (`albert_tf.text.word_windows`, run eagerly) and serving
(`albert_tf.export.token_classifier_serving`, in a SavedModel) both call `WordTokenizer`, so their
pieces cannot disagree.

Only TensorFlow and tensorflow-text ops: the functions run eagerly, in tf.data and in a
SavedModel.
"""

import os

import tensorflow as tf
import tensorflow_text as tft

# Python's `str.isspace` characters: \t \n \v \f \r, the separators \x1c-\x1f, space, NEL and
# the Unicode separators (category Z: Zs, Zl, Zp).
WHITESPACE_PATTERN = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Z}]"
# BERT's `_is_punctuation`: every non-alphanumeric printable ASCII character, and Unicode P*.
PUNCTUATION_PATTERN = r"[!-/:-@\[-`{-~]|\pP"
# convention -> (regex of the separators, regex of the separators kept as words).
WORD_CONVENTIONS = {
    "whitespace": (f"{WHITESPACE_PATTERN}+", ""),
    "punctuation": (f"{WHITESPACE_PATTERN}+|{PUNCTUATION_PATTERN}", PUNCTUATION_PATTERN),
}


def split_words(texts, convention="punctuation"):
    """Splits tf.string [B] on whitespace; with the "punctuation" convention (see
    `WORD_CONVENTIONS`) each punctuation character also becomes its own word.

    Returns a dict of RaggedTensors [B, (words)]: `words` (tf.string), `start` and `end` (int64
    CHARACTER offsets, i.e. Unicode code points, end exclusive, so that in Python
    `text[start:end] == word`), and `byte_start` / `byte_end` (the same in UTF-8 bytes).
    CJK text without spaces stays one word per run. Offsets assume valid UTF-8.

    >>> out = split_words(tf.constant(["Köln, 2024.", ""]))
    >>> [w.decode() for w in out["words"][0].numpy()]
    ['Köln', ',', '2024', '.']
    >>> out["start"].to_list(), out["end"].to_list()
    ([[0, 4, 6, 10], []], [[4, 5, 10, 11], []])
    >>> out["byte_start"].to_list()[0]
    [0, 5, 7, 11]
    >>> split_words(tf.constant(["U.S. e-mail"]), "whitespace")["words"].to_list()
    [[b'U.S.', b'e-mail']]
    """
    if convention not in WORD_CONVENTIONS:
        raise ValueError(
            f"convention must be one of {', '.join(WORD_CONVENTIONS)}, got {convention!r}"
        )
    texts = tf.convert_to_tensor(texts, tf.string)
    words, byte_start, byte_end = tft.regex_split_with_offsets(texts, *WORD_CONVENTIONS[convention])
    byte_start, byte_end = tf.cast(byte_start, tf.int64), tf.cast(byte_end, tf.int64)
    return {
        "words": words,
        "start": _char_offsets(texts, byte_start),
        "end": _char_offsets(texts, byte_end),
        "byte_start": byte_start,
        "byte_end": byte_end,
    }


def _char_offsets(texts, byte_offsets):
    """Byte offsets (ragged [B, (n)], at character boundaries) -> code point offsets."""
    _, char_bytes = tf.strings.unicode_decode_with_offsets(texts, "UTF-8", errors="replace")
    # Offsets of all texts on one axis: text i's bytes start at byte_base[i], its characters at
    # char_splits[i]. A byte offset's character offset counts the characters starting before it.
    byte_base = tf.cumsum(tf.strings.length(texts, unit="BYTE"), exclusive=True)
    byte_base = tf.cast(byte_base, tf.int64)
    char_splits = tf.cast(char_bytes.row_splits, tf.int64)
    global_char_bytes = char_bytes.flat_values + tf.gather(byte_base, char_bytes.value_rowids())
    rows = byte_offsets.value_rowids()
    global_offsets = byte_offsets.flat_values + tf.gather(byte_base, rows)
    chars_before = tf.searchsorted(
        global_char_bytes, global_offsets, side="left", out_type=tf.int64
    )
    return byte_offsets.with_flat_values(chars_before - tf.gather(char_splits, rows))


class WordTokenizer:
    """Words -> SentencePiece ids, each word tokenised on its own; never zero ids per word.

    A word that gives no piece (e.g. a lone control character, removed by normalisation)
    becomes `[unk_id]`.

    Args:
      tokenizer: an `AlbertPreprocessor`, a `TextTokenizer`, a `SentencePieceTokenizer`, or
        a SentencePiece `.model` path (local or gs://) or its serialized bytes.
      lower_case: casing for a path or bytes (the others carry their own).

    Attributes: `text_tokenizer` (the `TextTokenizer` to track in an export), `lower_case`,
    `cls_id`, `sep_id`, `pad_id`, `unk_id`.

    Example:
    >>> words = WordTokenizer("30k-clean.model")                         # doctest: +SKIP
    >>> ids = words(tf.ragged.constant([["Hello", ",", ""]]))             # doctest: +SKIP
    >>> ids.shape.rank, ids.to_list()[0][2] == [words.unk_id]             # doctest: +SKIP
    (3, True)
    """

    def __init__(self, tokenizer, lower_case=True):
        from albert_tf.text.preprocessing_layers import TextTokenizer
        from albert_tf.text.tokenizer import SentencePieceTokenizer

        if hasattr(tokenizer, "tokenizer") and isinstance(tokenizer.tokenizer, TextTokenizer):
            tokenizer = tokenizer.tokenizer  # an AlbertPreprocessor
        if isinstance(tokenizer, SentencePieceTokenizer):
            tokenizer = TextTokenizer(
                tokenizer.model_proto,
                lower_case=tokenizer.lower_case,
                tex_quotes=tokenizer.tex_quotes,
                albert_rules=tokenizer.albert_rules,
            )
        elif isinstance(tokenizer, (str, bytes, bytearray, os.PathLike)):
            tokenizer = TextTokenizer(
                os.fspath(tokenizer) if isinstance(tokenizer, os.PathLike) else tokenizer,
                lower_case=lower_case,
            )
        elif not isinstance(tokenizer, TextTokenizer):
            raise TypeError(
                f"tokenizer must be an AlbertPreprocessor, TextTokenizer, "
                f"SentencePieceTokenizer, or a SentencePiece model path or bytes, "
                f"got {type(tokenizer).__name__}"
            )
        self.text_tokenizer = tokenizer
        self.lower_case = tokenizer.lower_case
        ids = SentencePieceTokenizer(tokenizer.model_proto, lower_case=self.lower_case)
        self.cls_id, self.sep_id = ids.cls_id, ids.sep_id
        self.pad_id, self.unk_id = ids.pad_id, ids.unk_id
        # tensorflow-text creates its SentencePiece resource on first use; create it eagerly so
        # that a first use inside a tf.function does not tie it to that graph.
        with tf.init_scope():
            tokenizer(tf.constant([""]))

    def __call__(self, words):
        """tf.string [N] -> int32 ragged [N, (ids)]; ragged [B, (W)] -> [B, (W), (ids)]."""
        if isinstance(words, tf.RaggedTensor):
            return words.with_flat_values(self(words.flat_values))
        words = tf.convert_to_tensor(words, tf.string)
        if words.shape.rank != 1:
            raise ValueError(
                f"WordTokenizer expects words of shape [N] or a ragged [B, (W)], got {words.shape}"
            )
        ids = self.text_tokenizer(words)
        empty = tf.equal(ids.row_lengths(), 0)
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], tf.constant(self.unk_id, ids.dtype)),
            tf.cast(empty, ids.row_splits.dtype),
        )
        return tf.concat([ids, unk], axis=1)
