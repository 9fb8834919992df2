"""ALBERT's text normalization (`preprocess_text`), in Python.

The in-graph twin lives in `albert_tf.text.graph_ops.normalize` and is pinned to this function by
tests/text/test_text_parity.py.

>>> preprocess_text("  Le  ``Café''   CRÈME ")
"le ``cafe'' creme"
>>> preprocess_text("  Le  ``Café''   CRÈME ", tex_quotes=True)
'le "cafe" creme'
>>> preprocess_text("  Le  ``Café''   CRÈME ", lower=False, albert_rules=False)
"  Le  ``Café''   CRÈME "
"""

import unicodedata


def to_text(text):
    """Returns `text` as `str` with every invalid UTF-8 sequence replaced by U+FFFD.

    Bytes are decoded with `errors="replace"`; a `str` holding lone surrogates (not encodable as
    UTF-8) is treated as the bytes `surrogatepass` would give, so a surrogate becomes U+FFFD per
    byte. The in-graph path (`tf.strings.unicode_transcode(errors="replace")`) does the same.
    """
    if isinstance(text, str):
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            text = text.encode("utf-8", "surrogatepass")
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    raise TypeError(f"text must be str or bytes, got {type(text).__name__}")


def preprocess_text(text, lower=True, tex_quotes=False, albert_rules=True):
    """ALBERT's `tokenization.preprocess_text`, in this order:

    1. collapse whitespace runs (anything `str.isspace`) to one space and strip the ends;
    2. only with `tex_quotes`: replace the TeX quotes `` and '' with " (left to right, all ``
       first);
    3. NFKD-normalize and drop every character with a non-zero canonical combining class
       (`unicodedata.combining`), which strips accents;
    4. lowercase with `str.lower` when `lower` is true.

    With `albert_rules=False` steps 1 and 3 are skipped: the text reaches SentencePiece as given
    (only `tex_quotes` and `lower` still apply when set), as keras-hub's `AlbertTokenizer`
    feeds it (its presets record this, see `albert_tf.convert.keras_hub`).

    Step 2 is not in the original ALBERT's `preprocess_text`; it is the rule of Hugging Face's
    `AlbertTokenizer` (taken from XLNet's), so `tex_quotes=True` gives the text that tokenizer
    feeds to SentencePiece.

    Args:
      text: `str` or UTF-8 `bytes`; invalid UTF-8 sequences become U+FFFD (see `to_text`).
      lower: lowercase the result (the released English ALBERT models are uncased).
      tex_quotes: replace the TeX quotes as Hugging Face's `AlbertTokenizer` does (False: the
        original ALBERT, which keeps them).
      albert_rules: collapse whitespace and strip accents (False: keras-hub's tokenizer, which
        does neither).

    >>> preprocess_text("Ça\\tva ?", lower=False)
    'Ca va ?'
    """
    text = to_text(text)
    if albert_rules:
        text = " ".join(text.strip().split())
    if tex_quotes:
        text = text.replace("``", '"').replace("''", '"')
    if albert_rules and not text.isascii():  # ASCII is NFKD-invariant, without combining marks
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text
