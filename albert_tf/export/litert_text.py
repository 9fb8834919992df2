"""ALBERT's text preprocessing with TFLite-supported ops only: `AlbertPreprocessor`'s ids in a
`.tflite` file.

TFLite has no kernels for regular expressions or Unicode tables, so the two steps that the
SavedModel runs with them move into data built at export time:

1. `compose_model_proto`: ALBERT's `preprocess_text` (whitespace collapse, optionally Hugging
   Face's TeX quotes `` and '' -> ", NFKD + drop combining marks, optional lowercase) is folded
   into the SentencePiece model's own normalizer (its `precompiled_charsmap`, nmt_nfkc: a
   longest-match map from character sequences to strings, which `FastSentencepieceTokenizer`
   applies). Every source of the new map (each character that either step changes, each
   multi-character source of the model's map, the two TeX quotes when replaced) maps to
   nmt_nfkc(preprocess_text(source)), whitespace to " "; rules that the single-character ones
   already give are left out. Most of the model's multi-character rules compose combining marks
   and go; its Hangul jamo compositions stay (most of the size): 253 KB against nmt_nfkc's
   240 KB for the demo vocabulary, built in about a second; the FastBertNormalizer model it
   replaces took 254 KB.
2. `DigitCommaTable`: the digit-comma re-split ("▁9,000," -> "▁9", ",", "000", ",") is a
   function of the piece alone, so it becomes a table from piece id to replacement ids, applied
   to the ragged ids with gather, where and cumsum.

Remaining differences from `AlbertPreprocessor` (none in the demo's 1,500 docstring texts):
- Greek final sigma: `str.lower` turns a capital sigma that ends a word into "ς". The map has
  rules for "Σ" after a Greek letter and before a space, a newline, a tab or punctuation, so
  "ΟΔΟΣ " and "ΟΔΟΣ." match, but a capital sigma that ends the whole text (or follows a Latin
  letter) becomes "σ": the map cannot see the end of the text.
- Hangul: a precomposed syllable followed by a conjoining final consonant (U+11A8-U+11C2), which
  NFKD + NFKC would merge into one syllable, stays as two characters.
- Invalid UTF-8: each invalid byte becomes <unk>; the SavedModel makes it U+FFFD, which nmt_nfkc
  turns into a space (no piece).
- Ties between segmentations with the same pieces in another order ("21112" as "1", "11" or
  "11", "1" when "111" is no piece; digit runs mostly): `FastSentencepieceTokenizer` picks the
  order the SentencePiece library (and so the Python data pipeline) picks, tensorflow-text's
  `SentencepieceTokenizer` (the SavedModel) the other. The digit-comma table follows the latter.
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from albert_tf.text import unicode_tables
from albert_tf.text.normalize import preprocess_text
from albert_tf.text.tokenizer import load_processor, split_digit_comma

TEX_QUOTES = ("``", "''")
_NORMALIZER_SPEC, _CHARSMAP = 3, 2  # ModelProto.normalizer_spec, .precompiled_charsmap
_SIGMA = "\u03a3"
# What may follow a word-final capital sigma in its rules (see the module docstring).
_WORD_ENDS = " \t\n.,;:!?'\")]}-/"


def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data, pos):
    """(value, position after it) of the varint at `data[pos]`."""
    value, shift = 0, 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _fields(data):
    """(field number, raw bytes of the whole field, payload or None) of a protobuf message."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        wire, payload = key & 7, None
        if wire == 0:
            pos = _read_varint(data, pos)[1]
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            payload = data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, data[start:pos], payload


def _replace_field(message, number, payload):
    """`message` with field `number` (length-delimited) set to `payload`."""
    kept = b"".join(raw for n, raw, _ in _fields(message) if n != number)
    return kept + _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _field_payload(message, number):
    return next((p for n, _, p in _fields(message) if n == number), b"")


def _preprocessed(text, lower, tex_quotes):
    """`preprocess_text` of a rule's source, with whitespace at its ends kept as one space (the
    text around it is not known)."""
    if text.isspace():
        return " "
    lead = " " if text[0].isspace() else ""
    body = preprocess_text(text, lower=lower, tex_quotes=tex_quotes)
    return lead + body + (" " if text[-1].isspace() else "")


def _sigma_rules(target):
    """Rules for a capital sigma after a Greek letter and before a word end (see the module
    docstring); each rule's target is what `str.lower` gives in that context. A case-ignorable
    end ("." or "'") only counts when a space follows it."""
    letters = [c for c in map(chr, range(0x0370, 0x0400)) if unicodedata.category(c) in "LuLl"]
    ends = [e if ("A" + _SIGMA + e + "A").lower()[1] != "\u03c3" else e + " " for e in _WORD_ENDS]
    rules = {}
    for letter in letters:
        for end in ends:
            rules[letter + _SIGMA + end] = target(letter) + "\u03c2" + target(end)
    return rules


def _sentencepiece():
    """The sentencepiece module, checked for `SentencePieceNormalizer.Decompile` and `norm_map`
    (sentencepiece 0.2.3 has them, 0.2.0 does not)."""
    import sentencepiece as spm

    if not hasattr(spm.SentencePieceNormalizer, "Decompile"):
        raise ImportError(
            f"LiteRT export builds its tokenizer with sentencepiece's "
            f"SentencePieceNormalizer.Decompile, which sentencepiece {spm.__version__} lacks: "
            "pip install -U 'sentencepiece>=0.2.3'"
        )
    return spm


def composed_rules(spm_model, lower=True, tex_quotes=False):
    """The character map of `compose_model_proto`: {source: target} for every source of the
    model's own map, every character that `preprocess_text` changes and (with `tex_quotes`)
    the TeX quotes, where target = nmt_nfkc(preprocess_text(source)); rules that the
    single-character ones already give are left out."""
    spm = _sentencepiece()
    nfkc = spm.SentencePieceNormalizer(
        model_proto=spm_model,
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )
    sources = {k for k, _ in spm.SentencePieceNormalizer(model_proto=spm_model).Decompile()}
    sources.update(map(chr, unicode_tables.decomposition_table()[0]))
    if lower:
        sources.update(map(chr, unicode_tables.lowercase_table()[0]))
        sources.add("\u0130")  # lowercases to two characters: not in the table
    spaces = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
    sources.update(spaces)
    if tex_quotes:
        sources.update(TEX_QUOTES)
    sources = sorted(sources)
    chars = {c: _preprocessed(c, lower, tex_quotes) for c in sources if len(c) == 1}
    context = frozenset("`'" + _SIGMA + spaces)  # preprocess_text is per character but for these

    def preprocessed(source):
        if source in chars:
            return chars[source]
        if context.isdisjoint(source):
            return "".join([chars.get(c, c) for c in source])
        return _preprocessed(source, lower, tex_quotes)

    targets = nfkc.Normalize([preprocessed(s) for s in sources])
    rules = {}
    for source, target in zip(sources, targets):
        while "  " in target:  # SentencePiece collapses spaces across rules, not inside one
            target = target.replace("  ", " ")
        rules[source] = target
    single = {k: v for k, v in rules.items() if len(k) == 1}

    def target(text):
        return "".join([single.get(c, c) for c in text])

    rules = {k: v for k, v in rules.items() if v != (k if len(k) == 1 else target(k))}
    if lower:
        rules.update(_sigma_rules(target))
    return rules


@functools.lru_cache(maxsize=4)
def compose_model_proto(spm_model, lower=True, tex_quotes=False):
    """A copy of the serialized SentencePiece model `spm_model` (bytes) whose normalizer also
    does `preprocess_text(text, lower, tex_quotes)` (see the module docstring); the pieces and
    scores are unchanged."""
    rules = composed_rules(spm_model, lower, tex_quotes)
    compiled = _sentencepiece().SentencePieceNormalizer(norm_map=sorted(rules.items()))
    charsmap = _field_payload(compiled.serialized_normalizer_spec(), _CHARSMAP)
    spec = _field_payload(spm_model, _NORMALIZER_SPEC)
    return _replace_field(spm_model, _NORMALIZER_SPEC, _replace_field(spec, _CHARSMAP, charsmap))


def charsmap_size(spm_model):
    """Bytes of the `precompiled_charsmap` of `spm_model` (serialized bytes)."""
    return len(_field_payload(_field_payload(spm_model, _NORMALIZER_SPEC), _CHARSMAP))


class DigitCommaTable:
    """The digit-comma rule in id space: `expand` maps SentencePiece ids to the ids of
    `split_digit_comma` on their pieces.

    The pieces it changes (those ending in a digit and ",") are found in the vocabulary at export
    time and re-encoded as `AlbertPreprocessor` does (tensorflow-text's SentencepieceTokenizer,
    which breaks ties between equal-score segmentations unlike the SentencePiece library). Their
    ids are hashed by `id % modulus` (the smallest modulus without collisions) into a table whose
    rows are [id, replacement ids..., -1 padding]. `spm_model` is the serialized model (bytes).

    >>> from albert_tf.text import SentencePieceTokenizer
    >>> tokenizer = SentencePieceTokenizer("30k-clean.model")
    >>> table = DigitCommaTable(tokenizer.model_proto)
    >>> ids = [tokenizer.piece_to_id(p) for p in ["\u2581the", "1,"]]
    >>> values, row_splits = table.expand(tf.constant(ids), tf.constant([0, 2]))
    >>> tokenizer.ids_to_pieces(values.numpy()), row_splits.numpy().tolist()
    (['\u2581the', '1', ','], [0, 3])
    """

    def __init__(self, spm_model):
        import tensorflow_text as tft

        _, sp = load_processor(spm_model)
        segmenter = tft.SentencepieceTokenizer(spm_model, out_type=tf.string)

        def encode(text):
            return [p.decode("utf-8") for p in segmenter.tokenize(text).numpy()]

        self.replacements = {}
        for i in range(sp.GetPieceSize()):
            piece = sp.IdToPiece(i)
            if sp.IsControl(i) or sp.IsUnknown(i):
                continue
            pieces = split_digit_comma([piece], encode)
            if pieces != [piece]:
                self.replacements[i] = sp.PieceToId(pieces)
        keys = sorted(self.replacements)
        self.modulus = len(keys) or 1
        while len({k % self.modulus for k in keys}) < len(keys):
            self.modulus += 1
        width = 1 + max((len(v) for v in self.replacements.values()), default=0)
        table = np.full([self.modulus, width], -1, np.int32)
        for key in keys:
            replacement = self.replacements[key]
            table[key % self.modulus, : 1 + len(replacement)] = [key] + replacement
        self.table = table

    def expand(self, values, row_splits):
        """(values int32 [N], row_splits int32 [B + 1]) -> the same after the rule."""
        if not self.replacements:
            return values, row_splits
        rows = tf.gather(tf.constant(self.table), tf.math.floormod(values, self.modulus))
        hit = tf.equal(rows[:, 0], values)[:, tf.newaxis]
        width = self.table.shape[1] - 1
        same = tf.pad(values[:, tf.newaxis], [[0, 0], [0, width - 1]], constant_values=-1)
        options = tf.where(hit, rows[:, 1:], same)  # [N, width], -1 as padding
        keep = options >= 0
        counts = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
        ends = tf.concat([[0], tf.cumsum(counts)], axis=0)
        return tf.boolean_mask(options, keep), tf.gather(ends, row_splits)
