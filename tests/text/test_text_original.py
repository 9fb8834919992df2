"""preprocess_text (Python and in-graph) against the outputs of the original ALBERT's
`tokenization.preprocess_text` (the default) and of Hugging Face's `AlbertTokenizer`
(`tex_quotes=True`), recorded in fixtures/preprocess_text_original.json by
fixtures/generate_preprocess_fixtures.py."""

import json
import os

import pytest
import tensorflow as tf

from albert_tf.text import graph_ops
from albert_tf.text.normalize import preprocess_text

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "preprocess_text_original.json")


def _cases():
    with open(FIXTURE, encoding="utf-8") as f:
        return json.load(f)["cases"]


def test_fixture_covers_both_rules_and_casings():
    cases = _cases()
    assert {c["lower"] for c in cases} == {True, False}
    assert sum(c["original"] != c["huggingface"] for c in cases) >= 4  # the TeX-quote cases


@pytest.mark.parametrize("tex_quotes, expected", [(False, "original"), (True, "huggingface")])
def test_python_and_graph_equal_the_recorded_outputs(tex_quotes, expected):
    cases = _cases()
    for case in cases:
        got = preprocess_text(case["text"], lower=case["lower"], tex_quotes=tex_quotes)
        assert got == case[expected], repr(case["text"])
    for lower in (True, False):
        rows = [c for c in cases if c["lower"] == lower]
        out = graph_ops.normalize(
            tf.constant([c["text"] for c in rows]), lower=lower, tex_quotes=tex_quotes
        ).numpy()
        assert [o.decode("utf-8") for o in out] == [c[expected] for c in rows]
