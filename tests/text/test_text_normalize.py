"""preprocess_text against hand-derived results, and the in-graph normalize against it."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.text import graph_ops, unicode_tables
from albert_tf.text.normalize import preprocess_text, to_text


def as_bytes(text):
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize(
    "text, lower, tex_quotes, expected",
    [
        ("  Le  ``Caf\u00e9''   CR\u00c8ME ", True, False, "le ``cafe'' creme"),  # the original
        ("  Le  ``Caf\u00e9''   CR\u00c8ME ", True, True, 'le "cafe" creme'),
        ("  Le  ``Caf\u00e9''   CR\u00c8ME ", False, True, 'Le "Cafe" CREME'),
        ("```x''''", False, True, '"`x""'),  # left-to-right, `` before ''
        ("```x''''", False, False, "```x''''"),
        ("\uff07\uff07", False, True, "''"),  # fullwidth quotes become '' after the replacement
        ("\u2028a\x1cb\x85c\u3000", True, False, "a b c"),  # str.isspace separators
        ("a\u200bb", True, False, "a\u200bb"),  # zero-width space is not whitespace
        ("\ufb01 \u2460\u00b2 \u00bd", True, False, "fi 12 1\u20442"),  # NFKD compatibility
        ("\u0130stanbul", True, False, "istanbul"),  # NFKD splits the dot off before lower
        (
            "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3 \u03a3",
            True,
            False,
            "\u03bf\u03b4\u03bf\u03c2 \u03c3\u03b1\u03c2 \u03c3",
        ),
        ("\ud55c", True, False, "\u1112\u1161\u11ab"),  # Hangul syllable -> jamo
        ("\u00a8x", True, False, " x"),  # spacing diaeresis -> space + mark
        (b"caf\xc3\xa9 \xff", True, False, "cafe \ufffd"),
        ("a\ud800b", True, False, "a\ufffd\ufffd\ufffdb"),  # lone surrogate: U+FFFD per byte
        ("", True, False, ""),
        (" \t\n ", True, False, ""),
    ],
)
def test_preprocess_text_hand_derived(text, lower, tex_quotes, expected):
    assert preprocess_text(text, lower=lower, tex_quotes=tex_quotes) == expected


def test_to_text_rejects_other_types():
    with pytest.raises(TypeError, match="text must be str or bytes, got int"):
        to_text(3)


def test_regex_class_ranges():
    assert unicode_tables.regex_class([9, 10, 11, 32, 0x3000]) == "[\\x{9}-\\x{b}\\x{20}\\x{3000}]"
    bounds = unicode_tables.to_ranges([1, 2, 3, 7])
    assert bounds.tolist() == [1, 4, 7, 8]


@pytest.mark.parametrize("tex_quotes", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_graph_normalize_equals_python_on_torture(torture_texts, lower, tex_quotes):
    out = graph_ops.normalize(
        tf.constant([as_bytes(t) for t in torture_texts]), lower=lower, tex_quotes=tex_quotes
    ).numpy()
    for text, got in zip(torture_texts, out):
        expected = preprocess_text(text, lower=lower, tex_quotes=tex_quotes)
        assert got.decode("utf-8") == expected, repr(text)[:80]


def test_graph_normalize_equals_python_on_every_codepoint():
    """Each assigned or unassigned codepoint, in runs of 61 between a cased letter and a sigma,
    so decomposition, combining marks, lowercase and the final-sigma context all get exercised."""
    cps = np.array([c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF])
    chunks = ["A" + "".join(map(chr, cps[i : i + 61])) + "\u03a3" for i in range(0, len(cps), 61)]
    for lower in (True, False):
        out = graph_ops.normalize(
            tf.constant([c.encode("utf-8") for c in chunks]), lower=lower
        ).numpy()
        bad = [
            c for c, o in zip(chunks, out) if o.decode("utf-8") != preprocess_text(c, lower=lower)
        ]
        assert not bad, (
            f"{len(bad)} chunks differ, first codepoints {[hex(ord(x)) for x in bad[0][:5]]}"
        )


def test_graph_normalize_runs_without_autograph_and_on_empty_batch():
    fn = tf.function(
        lambda x: graph_ops.normalize(x),
        autograph=False,
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    assert fn(tf.constant(["\u00c9T\u00c9"])).numpy().tolist() == [b"ete"]
    assert fn(tf.constant([], tf.string)).numpy().tolist() == []


def test_graph_normalize_one_string_per_batch(torture_texts):
    """Single-string batches take the shortcuts (nothing to decompose, no capital sigma) or not."""
    for text in torture_texts + [
        "plain ascii ONLY",
        "\u65e5\u672c \u2019quote\u2019",
        "\u03a3\u03a3",
    ]:
        got = graph_ops.normalize(tf.constant([as_bytes(text)])).numpy()[0].decode("utf-8")
        assert got == preprocess_text(text), repr(text)[:80]
