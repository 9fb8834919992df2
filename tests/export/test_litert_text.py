"""LiteRT tokenization (albert_tf.export.litert_text): the composed normalizer and the digit-comma
table give AlbertPreprocessor's ids, in TensorFlow and in the ai-edge-litert interpreter."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import litert, litert_text
from albert_tf.text.normalize import preprocess_text

STRESS = [
    "He said ``hello'' and ''bye`` then ```triple''' quotes, `single' ones",
    "It costs 9,000, or 1,234,567, dollars; 12, 3,4, x,5, 2,",
    "9,000,000,000, and \uff19,\uff10\uff10\uff10, (full-width digits) \u0663,",
    "Caf\u00e9 CR\u00c8ME br\u00fbl\u00e9e na\u00efve K\u00f6ln",
    "Cafe\u0301 cre\u0300me na\u0308ive \u00c5ngstr\u00f6m A\u030a",  # decomposed accents
    "Stra\u00dfe STRASSE \u00df \u1e9e",
    "\u039f\u0394\u039f\u03a3 \u039f\u0394\u039f\u03a3. \u039f\u0394\u039f\u03a3, \u03a3 x "
    "\u03a3\u039f\u03a6\u0399\u0391 \u0391\u03a3\u03a3 \u039f\u0394\u039f\u03a3'\u0391 ok",
    "\u1f48\u0394\u03a5\u03a3\u03a3\u0395\u038e\u03a3 "
    "\u1f48\u03b4\u03c5\u03c3\u03c3\u03b5\u03cd\u03c2",
    "\u0130stanbul ISTANBUL \u0131i I\u0130",
    "\u6771\u4eac\u90fd \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587",
    "\uff26\uff35\uff2c\uff2c\uff0d\uff57\uff49\uff44\uff54\uff48\u3000\uff46\uff4f\uff52\uff4d"
    "\uff53\uff01 \uff11\uff12\uff13 \uff76\uff80\uff76\uff85",
    "control\x01chars\x7f here\x0b and\x1c sep\x1f",
    "emoji \U0001f600\U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469 "
    "flags \U0001f1eb\U0001f1f7",
    "multiple   spaces\t\ttabs\n\nnewlines \u00a0nbsp\u2003em\u3000ideo",
    "   leading and trailing   ",
    "",
    "\ufb01 \ufb02 \ufb03 \u00bd \u00b2 \u210c \u337f \u2460 \u2122 \u2026",
    "\uac01 \u3131\u314f \u1100\u1161 \ud55c\uad6d\uc5b4",
    "x\u200by zero\u200dwidth \ufeffbom",
    "\u01c4 \u01c5 \u01c6 \u212b \u2126 \u212a",
    "``",
    "''",
    "1,",
    "a1,b",
    "\u03a3",
]
# The documented differences of the normalizer (litert_text's docstring): a capital sigma ending
# the text stays medial; a syllable and a trailing conjoining consonant are not merged.
FINAL_SIGMA = "\u039f\u0394\u039f\u03a3"
HANGUL_PLUS_JAMO = "\uac00\u11a8"


@pytest.fixture(scope="module")
def stress_model(tmp_path_factory):
    """A SentencePiece model that covers every character of STRESS (so that normalization
    differences show in the ids) and learns digit-comma pieces."""
    from albert_tf.text.vocab import train_sentencepiece

    numbers = [f"{i},{i * 7 % 1000:03d}, and {i}, then {i % 10}," for i in range(1, 400)]
    # Cased training on raw and lowercased texts: both cases are in the vocabulary.
    lines = numbers + [preprocess_text(t) for t in STRESS] + STRESS
    prefix = str(tmp_path_factory.mktemp("spm") / "stress")
    train_sentencepiece(
        [lines * 3], prefix, vocab_size=400, lower_case=False, character_coverage=1.0, num_threads=1
    )
    with open(f"{prefix}.model", "rb") as f:
        return f.read()


@pytest.mark.parametrize("tex_quotes", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_composed_normalizer_is_preprocess_text_then_nmt_nfkc(stress_model, lower, tex_quotes):
    import sentencepiece as spm

    proto = litert_text.compose_model_proto(stress_model, lower, tex_quotes)
    # The map stays about the size of nmt_nfkc's (it replaces it in the file).
    assert litert_text.charsmap_size(proto) < 1.1 * litert_text.charsmap_size(stress_model)
    flags = dict(add_dummy_prefix=True, remove_extra_whitespaces=True, escape_whitespaces=True)
    composed = spm.SentencePieceNormalizer(model_proto=proto, **flags)
    own = spm.SentencePieceNormalizer(model_proto=stress_model, **flags)
    for text in STRESS + [FINAL_SIGMA + " x"]:
        expected = own.Normalize(preprocess_text(text, lower, tex_quotes))
        assert composed.Normalize(text) == expected, text
    # The documented differences: (composed, reference).
    differences = {HANGUL_PLUS_JAMO: ("\u2581\uac00\u11a8", "\u2581\uac01")}
    if lower:
        differences[FINAL_SIGMA] = (
            "\u2581\u03bf\u03b4\u03bf\u03c3",
            "\u2581\u03bf\u03b4\u03bf\u03c2",
        )
    else:  # no lowercasing, no final sigma
        assert composed.Normalize(FINAL_SIGMA) == own.Normalize(FINAL_SIGMA)
    for text, expected in differences.items():
        assert (composed.Normalize(text), own.Normalize(preprocess_text(text, lower))) == expected


def test_digit_comma_table_reproduces_split_digit_comma(stress_model):
    """Against the SavedModel's rule (`graph_ops.split_digit_comma` with tensorflow-text's
    SentencepieceTokenizer), on every piece of the vocabulary."""
    import tensorflow_text as tft

    from albert_tf.text import graph_ops

    table = litert_text.DigitCommaTable(stress_model)
    assert len(table.replacements) >= 5  # "▁1,", "0,", ...: the rule has work to do
    segmenter = tft.SentencepieceTokenizer(stress_model, out_type=tf.string)
    ids = tf.range(segmenter.vocab_size())
    rows = tf.RaggedTensor.from_row_splits(ids, [0, 7, 7, ids.shape[0]])  # one row empty
    values, row_splits = table.expand(rows.flat_values, tf.cast(rows.row_splits, tf.int32))
    got = tf.RaggedTensor.from_row_splits(values, row_splits).to_list()
    pieces = graph_ops.split_digit_comma(segmenter.id_to_string(rows), segmenter.tokenize)
    assert got == segmenter.string_to_id(pieces).to_list()


@pytest.fixture(scope="module")
def stress_preprocessor(stress_model):
    from albert_tf.models.preprocessor import AlbertPreprocessor

    return AlbertPreprocessor(stress_model, max_seq_length=64)


def test_litert_file_gives_the_preprocessors_ids(stress_preprocessor):
    """Through the real interpreter: only builtin and tensorflow-text ops, exact ids."""
    pytest.importorskip("ai_edge_litert")
    inputs = litert.LiteTextInputs(stress_preprocessor)
    fn = tf.function(
        lambda text: dict(zip(("values", "row_splits"), inputs.tokenize(text))),
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
        autograph=False,
    )
    data = litert.convert(fn)
    assert set(litert.custom_ops(data)) == {"TFText>FastSentencepieceTokenize"}
    runner = litert.interpreter(model_content=data).get_signature_runner()
    got = runner(text=np.array([t.encode() for t in STRESS], object))
    got = tf.RaggedTensor.from_row_splits(got["values"], got["row_splits"]).to_list()
    want = stress_preprocessor.tokenizer(tf.constant(STRESS)).to_list()
    assert got == want


@pytest.mark.parametrize("tex_quotes", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_token_agreement_on_the_stress_texts(stress_model, lower, tex_quotes):
    from albert_tf.models.preprocessor import AlbertPreprocessor

    pre = AlbertPreprocessor(
        stress_model, lower_case=lower, max_seq_length=64, tex_quotes=tex_quotes
    )
    assert litert.token_agreement(pre, STRESS) == 1.0
    # The documented difference shows in the ids too (this vocabulary has both sigmas).
    assert litert.token_agreement(pre, [FINAL_SIGMA]) == (0.0 if lower else 1.0)


def test_a_model_without_alberts_text_rules_is_refused(stress_model):
    """A keras-hub preset's text settings (albert_rules=false) have no LiteRT tokenizer here:
    one line saying so, before anything is built."""
    from albert_tf.errors import UserError
    from albert_tf.export.litert import LiteTextInputs
    from albert_tf.models.preprocessor import AlbertPreprocessor

    preprocessor = AlbertPreprocessor(stress_model, lower_case=False, albert_rules=False)
    with pytest.raises(UserError, match="albert_rules=false .* export a SavedModel instead"):
        LiteTextInputs(preprocessor)
