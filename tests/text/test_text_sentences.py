"""The rule-based sentence splitter."""

import pytest

from albert_tf.text import split_sentences


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Dr. Smith arrived at 9 p.m. on Monday. He left.",
            ["Dr. Smith arrived at 9 p.m. on Monday.", "He left."],
        ),
        ('He said: "Hi!" Then he left.', ['He said: "Hi!"', "Then he left."]),
        (
            "See Fig. 3 for details. (It is small.) Next one.",
            ["See Fig. 3 for details.", "(It is small.)", "Next one."],
        ),
        (
            "J. R. R. Tolkien wrote it. The U.S. Army came.",
            ["J. R. R. Tolkien wrote it.", "The U.S. Army came."],
        ),
        ("Wait... What? 3 cats. `x` is set.", ["Wait...", "What?", "3 cats.", "`x` is set."]),
        (
            "lower case. does not split. \u00c9t\u00e9 does.",
            ["lower case. does not split.", "\u00c9t\u00e9 does."],
        ),
        (
            "\u65e5\u672c\u8a9e\u3067\u3059\u3002 Next.",
            ["\u65e5\u672c\u8a9e\u3067\u3059\u3002 Next."],
        ),
        ("Ends here. ...", ["Ends here. ..."]),  # no letters: glued to the previous one
        ("  spaced\n\tout.  Second  ", ["spaced out.", "Second"]),
        ("", []),
        (" \n ", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected
