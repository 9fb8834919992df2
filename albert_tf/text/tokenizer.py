"""SentencePiece tokenization with ALBERT's rules, in Python (the data pipeline's tokenizer).

The in-graph twin is `albert_tf.text.preprocessing_layers.TextTokenizer`; both give the same ids.
"""

import os

from albert_tf.errors import UserError
from albert_tf.text.normalize import preprocess_text

WORD_START = "\u2581"  # SentencePiece's word-start marker "▁"

# The original `_is_start_piece_sp` punctuation set (note: no apostrophe), plus the euro and pound
# signs it adds.
START_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~') | {"\u20ac", "\u00a3"}
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | START_PUNCTUATION

SPECIAL_PIECES = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


class VocabularyError(UserError, ValueError):
    """A SentencePiece model file is unusable or does not belong to the model; names the file."""


def spm_name(spm_model):
    """How errors name a SentencePiece model: its path, or the size of the given bytes."""
    if isinstance(spm_model, (bytes, bytearray)):
        return f"the given SentencePiece model ({len(spm_model)} bytes)"
    return str(spm_model)


def read_model_proto(spm_model):
    """Returns the serialized SentencePiece model: `bytes` pass through, paths are read (gs://
    and other remote paths through tf.io.gfile)."""
    if isinstance(spm_model, (bytes, bytearray)):
        return bytes(spm_model)
    path = str(spm_model)
    if "://" not in path:  # local: no TensorFlow import, so worker processes stay light
        if not os.path.exists(path):
            raise FileNotFoundError(f"SentencePiece model file not found: {path}")
        with open(path, "rb") as f:
            return f.read()
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"SentencePiece model file not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def load_processor(spm_model):
    """(serialized model, loaded `SentencePieceProcessor`); a file that is not a SentencePiece
    model raises VocabularyError "<path>: not a SentencePiece model (...)", never its bytes.

    >>> load_processor(b"not a model")
    Traceback (most recent call last):
    ...
    albert_tf.text.tokenizer.VocabularyError: the given SentencePiece model (11 bytes): not a \
SentencePiece model (it does not parse as one)
    """
    import sentencepiece as spm

    proto = read_model_proto(spm_model)
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(proto)
    except RuntimeError as e:
        reason = str(e).replace("INTERNAL: ", "").strip()
        if "ParseFromArray" in reason or not reason:
            reason = "it does not parse as one"
        raise VocabularyError(
            f"{spm_name(spm_model)}: not a SentencePiece model ({reason[:200]})"
        ) from None
    return proto, processor


def is_start_piece(piece):
    """The original `_is_start_piece_sp`: does `piece` begin a new word (for whole-word masking)?

    True when the piece starts with "▁" or "<", is a single punctuation piece, or holds any
    character outside a-z and that punctuation (so non-English pieces are always words of their
    own).

    >>> [is_start_piece(p) for p in ["\u2581the", "re", ",", "'s", "\u00e9"]]
    [True, False, True, True, True]
    """
    if piece.startswith(WORD_START) or piece.startswith("<") or piece in START_PUNCTUATION:
        return True
    return not all(c.lower() in _WORD_CHARS for c in piece)


def split_digit_comma(pieces, encode_as_pieces):
    """ALBERT's digit-comma rule on a list of pieces (the original `encode_pieces`).

    A piece longer than one character ending in "," after a digit is re-encoded without the ","
    and without any "▁"; the leading "▁" of the re-encoding is kept only if the original piece
    had one; then "," follows as its own piece. So "▁9,000," becomes ["▁9", ",", "000", ","] with
    a model that knows those pieces.

    This is the intended rule (Python 2, Hugging Face). Under Python 3 the original compares the
    `str` piece with a `bytes` "▁" and so never strips the "▁" ("2," gives ["▁2", ","]).

    Args:
      pieces: list of piece strings.
      encode_as_pieces: callable str -> list of piece strings (the SentencePiece model).
    """
    out = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            sub = encode_as_pieces(piece[:-1].replace(WORD_START, ""))
            if sub and not piece.startswith(WORD_START) and sub[0].startswith(WORD_START):
                sub = sub[1:] if len(sub[0]) == 1 else [sub[0][1:]] + sub[1:]
            out.extend(sub)
            out.append(",")
        else:
            out.append(piece)
    return out


class SentencePieceTokenizer:
    """ALBERT's SentencePiece tokenizer: `preprocess_text`, SentencePiece, the digit-comma rule.

    With `albert_rules=False` it is keras-hub's `AlbertTokenizer`: SentencePiece on the text as
    given (no whitespace collapse, accent stripping or digit-comma rule; `lower_case` and
    `tex_quotes` still apply when set).

    Args:
      spm_model: path (local or gs://) of a `.model` file, or its serialized bytes.
      lower_case: lowercase during preprocessing (True for the released uncased English models).
      tex_quotes: replace the TeX quotes `` and '' with " during preprocessing, as Hugging Face's
        `AlbertTokenizer` does (False: the original ALBERT's `preprocess_text`).
      albert_rules: ALBERT's whitespace collapse, accent stripping and digit-comma rule (False:
        keras-hub's tokenizer, recorded by models converted from a keras-hub preset).

    Example:
    >>> tok = SentencePieceTokenizer("30k-clean.model")
    >>> pieces = tok.encode_pieces("Hello, World 9,000!")
    >>> tok.encode_ids("Hello, World 9,000!") == [tok.piece_to_id(p) for p in pieces]
    True
    >>> tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id
    (0, 1, 2, 3, 4)
    """

    def __init__(self, spm_model, lower_case=True, tex_quotes=False, albert_rules=True):
        self.model_proto, self._sp = load_processor(spm_model)
        self.lower_case = bool(lower_case)
        self.tex_quotes = bool(tex_quotes)
        self.albert_rules = bool(albert_rules)
        # The file it was read from (None for bytes): what vocabulary errors name.
        self.source = None if isinstance(spm_model, (bytes, bytearray)) else str(spm_model)
        ids = {}
        for name, piece in SPECIAL_PIECES.items():
            i = self._sp.PieceToId(piece)
            if self._sp.IdToPiece(i) != piece:
                raise VocabularyError(
                    f"{spm_name(spm_model)}: SentencePiece model has no {piece!r} "
                    "piece; ALBERT needs <pad>, <unk>, [CLS], [SEP] and [MASK] (train one with "
                    "scripts/train_tokenizer.py)"
                )
            ids[name] = i
        self.pad_id, self.unk_id = ids["pad"], ids["unk"]
        self.cls_id, self.sep_id, self.mask_id = ids["cls"], ids["sep"], ids["mask"]

    @property
    def vocab_size(self):
        return self._sp.GetPieceSize()

    def preprocess(self, text):
        """`preprocess_text` of `text` with the tokenizer's lower_case, tex_quotes and
        albert_rules."""
        return preprocess_text(
            text, lower=self.lower_case, tex_quotes=self.tex_quotes, albert_rules=self.albert_rules
        )

    def encode_pieces(self, text):
        """Raw text -> list of pieces (preprocessing, SentencePiece, digit-comma rule)."""
        pieces = self._sp.EncodeAsPieces(self.preprocess(text))
        if not self.albert_rules:
            return pieces
        return split_digit_comma(pieces, self._sp.EncodeAsPieces)

    def encode_ids(self, text):
        """Raw text -> list of ids (`piece_to_id` of `encode_pieces`)."""
        return self._sp.PieceToId(self.encode_pieces(text))

    def id_to_piece(self, i):
        if not 0 <= int(i) < self.vocab_size:
            raise ValueError(f"id {i} is outside the vocabulary [0, {self.vocab_size})")
        return self._sp.IdToPiece(int(i))

    def piece_to_id(self, piece):
        """The piece's id, or `unk_id` for an unknown piece."""
        return self._sp.PieceToId(piece)

    def ids_to_pieces(self, ids):
        return [self.id_to_piece(i) for i in ids]

    def decode_ids(self, ids):
        """Ids -> text (SentencePiece detokenization; preprocessing is not undone)."""
        return self._sp.DecodeIds([int(i) for i in ids])

    @staticmethod
    def is_start_piece(piece):
        """See `albert_tf.text.tokenizer.is_start_piece`."""
        return is_start_piece(piece)

    def vocab(self):
        """List of all pieces in id order."""
        return [self._sp.IdToPiece(i) for i in range(self.vocab_size)]
