"""train_sentencepiece and scripts/train_tokenizer.py."""

import os
import subprocess
import sys
import unicodedata

import pytest

from albert_tf.data.corpora import CorpusStats, iter_documents
from albert_tf.text import SentencePieceTokenizer
from albert_tf.text.vocab import ORIGINAL_USER_DEFINED_SYMBOLS, train_sentencepiece

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_train_sentencepiece_albert_layout(corpus_file, tmp_path):
    stats = CorpusStats()
    documents = iter_documents(corpus_file, stats=stats)
    model = train_sentencepiece(
        documents, str(tmp_path / "out" / "v"), vocab_size=400, num_threads=1
    )
    assert model == str(tmp_path / "out" / "v.model")
    assert sorted(os.listdir(tmp_path / "out")) == ["v.model", "v.vocab"]  # no temp files left
    assert stats.documents > 100 and stats.skipped_lines == 0
    tok = SentencePieceTokenizer(model)
    assert tok.vocab_size == 400
    pieces = tok.vocab()
    assert pieces[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert pieces[5:13] == list(ORIGINAL_USER_DEFINED_SYMBOLS)
    # Trained on preprocess_text(lower=True) output: no uppercase or composed (accented) pieces.
    assert not [p for p in pieces[13:] if p != p.lower() or unicodedata.normalize("NFKD", p) != p]
    with open(tmp_path / "out" / "v.vocab", encoding="utf-8") as f:
        assert [line.split("\t")[0] for line in f.read().splitlines()] == pieces
    assert {"(", ")", "."} <= set(tok.encode_pieces("f(x)."))  # user-defined symbols stay whole


def test_train_from_documents_iterable_and_errors(tmp_path):
    documents = [
        ["The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen jugs."]
    ] * 50
    model = train_sentencepiece(
        iter(documents),
        str(tmp_path / "it"),
        vocab_size=60,
        user_defined_symbols=(),
        hard_vocab_limit=False,
        num_threads=1,
    )
    assert SentencePieceTokenizer(model).vocab()[5] not in ORIGINAL_USER_DEFINED_SYMBOLS
    with pytest.raises(
        ValueError, match="vocab_size=10 must exceed the 13 special and user-defined pieces"
    ):
        train_sentencepiece(iter(documents), str(tmp_path / "x"), vocab_size=10)
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        iter_documents(str(tmp_path / "missing.txt"))
    with pytest.raises(TypeError, match=r"pass albert_tf.data.corpora.iter_documents\('c.txt'\)"):
        train_sentencepiece("c.txt", str(tmp_path / "x"), vocab_size=100)
    with pytest.raises(ValueError, match="the corpus is too small for this vocab_size"):
        train_sentencepiece(iter(documents), str(tmp_path / "x"), vocab_size=1000, num_threads=1)
    with pytest.raises(ValueError, match="holds no text"):
        train_sentencepiece(iter([[" ", ""]]), str(tmp_path / "x"), vocab_size=100)
    with pytest.raises(ValueError, match="user_defined_symbols must not repeat the special pieces"):
        train_sentencepiece(
            iter(documents), str(tmp_path / "x"), vocab_size=100, user_defined_symbols=["[CLS]"]
        )
    assert not [f for f in os.listdir(tmp_path) if f.startswith("x")]


@pytest.mark.parametrize(
    "flag, message",
    [
        (
            "--vocab_size=8",
            "--vocab_size=8 must exceed the 5 special pieces plus 8 --user_defined_symbols",
        ),
        ("--character_coverage=1.5", "--character_coverage must be in (0, 1], got 1.5"),
        ("--model_prefix=/tmp/x.model", "--model_prefix is a prefix"),
    ],
)
def test_script_validates_flags_before_any_work(flag, message, tmp_path):
    args = [
        sys.executable,
        os.path.join(REPO, "scripts", "train_tokenizer.py"),
        "--input=/nonexistent",
        f"--model_prefix={tmp_path / 'v'}",
        flag,
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode != 0
    assert message in result.stderr
