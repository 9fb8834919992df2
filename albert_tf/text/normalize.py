"""ALBERT's text normalization (`preprocess_text`), in Python.

The in-graph twin lives in `albert_tf.text.graph_ops.normalize` and is pinned to this function by
tests/text/test_text_parity.py.

>>> preprocess_text("  Le  ``Café''   CRÈME ")
'le "cafe" creme'
"""
import unicodedata


def to_text(text):
    """Returns `text` as `str`; bytes are decoded as strict UTF-8 with an error naming the byte."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"text is not valid UTF-8: byte {bytes(text)[e.start:e.start + 1]!r} at offset "
                f"{e.start} ({e.reason})") from None
    raise TypeError(f"text must be str or bytes, got {type(text).__name__}")


def preprocess_text(text, lower=True):
    """ALBERT's `tokenization.preprocess_text`, in this order:

    1. collapse whitespace runs (anything `str.isspace`) to one space and strip the ends;
    2. replace the TeX quotes `` and '' with ";
    3. NFKD-normalize and drop every character with a non-zero canonical combining class
       (`unicodedata.combining`), which strips accents;
    4. lowercase with `str.lower` when `lower` is true.

    Args:
      text: `str`, or UTF-8 `bytes` (invalid UTF-8 raises ValueError naming the offset).
      lower: lowercase the result (the released English ALBERT models are uncased).

    >>> preprocess_text("Ça\\tva ?", lower=False)
    'Ca va ?'
    """
    text = " ".join(to_text(text).strip().split())
    text = text.replace("``", '"').replace("''", '"')
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text
