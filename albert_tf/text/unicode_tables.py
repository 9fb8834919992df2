"""Unicode tables derived from this Python's `unicodedata` and `str` methods, for the in-graph ops.

The in-graph normalization (`albert_tf.text.graph_ops`) must reproduce `preprocess_text`, which
uses Python's Unicode database (`unicodedata.unidata_version`). TensorFlow's ICU-based ops
(`normalize_utf8`, `tf.strings.lower`) follow a newer Unicode version and differ on recently
assigned characters (and `tf.strings.lower` drops U+0000), so the graph uses these tables instead.
They are computed once per process (about a second) and embedded as constants.
"""

import functools
import itertools
import unicodedata

import numpy as np

MAX_CODEPOINT = 0x10FFFF
HANGUL_FIRST, HANGUL_COUNT = 0xAC00, 11172  # decomposed algorithmically in the graph
_SEP = "\x00"  # neither cased nor case-ignorable, has no decomposition, lowercases to itself


@functools.lru_cache(maxsize=1)
def _all_chars():
    """Every codepoint but U+0000 (the separator; it maps to itself everywhere) and surrogates."""
    return tuple(map(chr, itertools.chain(range(1, 0xD800), range(0xE000, MAX_CODEPOINT + 1))))


def to_ranges(codepoints):
    """Sorted codepoints -> int32 array [starts..., ends...] interleaved: s0, e0+1, s1, e1+1, ..."""
    bounds = []
    for c in codepoints:
        if bounds and bounds[-1] == c:
            bounds[-1] = c + 1
        else:
            bounds.extend([c, c + 1])
    return np.asarray(bounds, dtype=np.int64)


def regex_class(codepoints):
    """Sorted codepoints -> an RE2 character class such as "[\\x{9}-\\x{d}\\x{20}]"."""
    bounds = to_ranges(codepoints)
    parts = []
    for start, end in zip(bounds[0::2], bounds[1::2]):
        parts.append(
            f"\\x{{{start:x}}}" if end - start == 1 else f"\\x{{{start:x}}}-\\x{{{end - 1:x}}}"
        )
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def whitespace_class():
    """Characters `str.split()` splits on (`str.isspace`), as an RE2 class."""
    return regex_class([ord(c) for c in _all_chars() if c.isspace()])


@functools.lru_cache(maxsize=None)
def punctuation_table():
    """bool [last punctuation codepoint + 1]: whether each codepoint is punctuation as
    `graph_words.PUNCTUATION_PATTERN` defines it (printable ASCII that is not a letter or a
    digit, and Unicode P*): the LiteRT word split's lookup table."""
    ascii_symbols = set(range(33, 48)) | set(range(58, 65)) | set(range(91, 97))
    ascii_symbols |= set(range(123, 127))
    marks = [
        ord(c) for c in _all_chars() if ord(c) in ascii_symbols or unicodedata.category(c)[0] == "P"
    ]
    table = np.zeros([max(marks) + 1], bool)
    table[marks] = True
    return table


@functools.lru_cache(maxsize=None)
def digit_class():
    """Characters for which `str.isdigit()` is true, as an RE2 class (the digit-comma rule's
    test)."""
    return regex_class([ord(c) for c in _all_chars() if c.isdigit()])


@functools.lru_cache(maxsize=None)
def decomposition_table():
    """NFKD followed by dropping combining characters, per codepoint (Hangul syllables excluded).

    Because every character with a non-zero combining class is dropped afterwards, canonical
    reordering cannot change the result, so the string-level operation is the concatenation of
    this per-character mapping. Returns (keys int32 [K] sorted, splits int64 [K+1], values int32).
    """
    keys, splits, values = [], [0], []
    for c in _all_chars():
        if unicodedata.is_normalized("NFKD", c) and not unicodedata.combining(c):
            continue
        cp = ord(c)
        if HANGUL_FIRST <= cp < HANGUL_FIRST + HANGUL_COUNT:
            continue
        kept = [ord(x) for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x)]
        if kept != [cp]:
            keys.append(cp)
            values.extend(kept)
            splits.append(len(values))
    return (np.asarray(keys, np.int32), np.asarray(splits, np.int64), np.asarray(values, np.int32))


@functools.lru_cache(maxsize=None)
def lowercase_table():
    """`str.lower` per codepoint where it is one codepoint (all but U+0130, which NFKD removes).

    Returns (keys int32 [K] sorted, values int32 [K]).
    """
    chars = _all_chars()
    lowered = _SEP.join(chars).lower().split(_SEP)  # one call; U+03A3 after U+0000 is not final
    pairs = [(ord(c), ord(low)) for c, low in zip(chars, lowered) if low != c and len(low) == 1]
    return (
        np.asarray([k for k, _ in pairs], np.int32),
        np.asarray([v for _, v in pairs], np.int32),
    )


@functools.lru_cache(maxsize=None)
def final_sigma_ranges():
    """Range tables for `str.lower`'s Final_Sigma rule on U+03A3.

    Python lowercases a capital sigma to the final form when, skipping case-ignorable characters,
    the previous character is cased and the next one is not (or there is none). Derived from
    `str.lower` itself:
    - "cased" (cased and not case-ignorable): "\u0391\u03a3" + c lowercases the sigma to the
      medial form;
    - "ignorable": "\u0391\u03a3" + c + "\u0391" gives the medial form and c is not "cased".
    Returns (cased_ranges, ignorable_ranges) for `to_ranges`-style membership tests.
    """
    # Unassigned and private-use characters have no case properties.
    chars = [c for c in _all_chars() if unicodedata.category(c) not in ("Cn", "Co")]
    after = _SEP.join("\u0391\u03a3" + c for c in chars).lower().split(_SEP)
    between = _SEP.join("\u0391\u03a3" + c + "\u0391" for c in chars).lower().split(_SEP)
    cased, ignorable = [], []
    for c, a, b in zip(chars, after, between):
        if a[1] == "\u03c3":
            cased.append(ord(c))
        elif b[1] == "\u03c3":
            ignorable.append(ord(c))
    return to_ranges(cased), to_ranges(ignorable)
