"""SentencePieceTokenizer: special ids, the digit-comma rule, the word-start rule, errors."""

import pytest
import tensorflow as tf

from albert_tf.text import SentencePieceTokenizer, TextTokenizer, is_start_piece
from albert_tf.text.tokenizer import split_digit_comma

U = "\u2581"


def fake_encoder(table):
    def encode(text):
        return list(table[text])

    return encode


def test_digit_comma_rule_hand_derived():
    encode = fake_encoder(
        {
            "9,000": [U + "9", ",", "000"],
            "000": [U + "000"],
            "1": [U, "1"],
            "\u00b2": [U + "\u00b2"],
            "12": [U + "1", "2"],
        }
    )
    pieces = [U + "9,000,", "000,", "1,", "\u00b2,", U + "12,", U + ",", "a,", ",", "1", U + "x"]
    assert split_digit_comma(pieces, encode) == [
        U + "9",
        ",",
        "000",
        ",",  # kept its "▁": the re-encoding keeps the leading "▁"
        "000",
        ",",  # had no "▁": the re-encoding's "▁" is stripped off "▁000"
        "1",
        ",",  # a bare leading "▁" piece is dropped
        "\u00b2",
        ",",  # str.isdigit() digits count too
        U + "1",
        "2",
        ",",
        U + ",",
        "a,",
        ",",
        "1",
        U + "x",  # not "<digit>," pieces: unchanged
    ]


def test_digit_comma_rule_on_a_real_model_both_paths(number_spm_model_file):
    py = SentencePieceTokenizer(number_spm_model_file)
    text = "The total was 12,500, then 1,000, and 9,000,"
    raw = py._sp.EncodeAsPieces(py.preprocess(text))
    # The model must hold the pieces this test is about (a precondition, not the result).
    assert "2," in raw and U + "1," in raw
    expected = []
    for piece in raw:
        if piece == "2,":
            expected += ["2", ","]  # re-encoded "2" -> "▁2", "▁" stripped
        elif piece == U + "1,":
            expected += py._sp.EncodeAsPieces("1") + [","]  # keeps "▁1"
        else:
            expected.append(piece)
    assert py.encode_pieces(text) == expected
    assert py.encode_ids(text) == [py.piece_to_id(p) for p in expected]
    graph = TextTokenizer(number_spm_model_file)
    assert graph.tokenize_to_pieces(tf.constant([text])).to_list() == [
        [p.encode() for p in expected]
    ]
    assert graph(tf.constant([text])).to_list() == [py.encode_ids(text)]


@pytest.mark.parametrize(
    "piece, expected",
    [
        (U + "the", True),
        ("<unk>", True),
        (",", True),
        ("(", True),
        ("\u20ac", True),
        ("\u00a3", True),
        ("ing", False),
        ("s", False),
        ("Ing", False),
        ("a-b", False),  # letters (any case) and punctuation
        ("'s", True),  # the apostrophe is not in the set
        ("\u00e9", True),
        ("x\u00e9", True),
        ("9", True),
        ("\u4e2d", True),  # non a-z characters
        ("", False),
    ],
)
def test_is_start_piece(piece, expected):
    assert is_start_piece(piece) is expected
    assert SentencePieceTokenizer.is_start_piece(piece) is expected


def test_special_ids_and_lookups(py_tokenizer, spm_model_file):
    tok = py_tokenizer
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size == 1000 and len(tok.vocab()) == 1000
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert tok.piece_to_id("[MASK]") == 4 and tok.piece_to_id("no-such-piece") == tok.unk_id
    with open(spm_model_file, "rb") as f:
        assert tok.model_proto == f.read()
    assert SentencePieceTokenizer(tok.model_proto).encode_ids("Hello there") == tok.encode_ids(
        "Hello there"
    )
    with pytest.raises(ValueError, match=r"id 1000 is outside the vocabulary \[0, 1000\)"):
        tok.id_to_piece(1000)


def test_lower_case_and_accents(spm_model_file):
    cased = SentencePieceTokenizer(spm_model_file, lower_case=False)
    uncased = SentencePieceTokenizer(spm_model_file)
    assert uncased.encode_pieces("The CAF\u00c9") == uncased.encode_pieces("the cafe")
    assert cased.encode_pieces("The") != uncased.encode_pieces("The")
    assert "".join(uncased.encode_pieces("Na\u00efve")).replace(U, " ").strip() == "naive"


def test_errors(tmp_path, corpus_file):
    with pytest.raises(
        FileNotFoundError, match="SentencePiece model file not found: .*missing.model"
    ):
        SentencePieceTokenizer(str(tmp_path / "missing.model"))
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SentencePieceTokenizer(b"garbage")
    import sentencepiece as spm

    prefix = tmp_path / "plain"
    spm.SentencePieceTrainer.train(
        input=corpus_file, model_prefix=str(prefix), vocab_size=300, minloglevel=2
    )
    with pytest.raises(ValueError, match="SentencePiece model has no '<pad>' piece"):
        SentencePieceTokenizer(f"{prefix}.model")
