"""Fixtures for tests/text: tokenizers on the shared tiny model and a model that knows "<digit>,"
pieces."""

import random

import pytest


@pytest.fixture(scope="session")
def number_spm_model_file(corpus_file, tmp_path_factory):
    """A 600-piece model trained with split_by_number=False on prose plus sentences full of
    "9,000,"-style numbers, so it has pieces such as "▁1," and "2," that trigger the digit-comma
    rule."""
    import sentencepiece as spm

    rng = random.Random(1)
    with open(corpus_file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for _ in range(3000):
        lines.append(
            f"the total was {rng.choice(['1,000', '9,000', '12,500', '3,000', '2,000', '500'])}, "
            f"then {rng.choice(['4,000', '9,000', '7,250'])}, and more"
        )
    corpus = tmp_path_factory.mktemp("numbers") / "numbers.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    prefix = corpus.parent / "numbers"
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        vocab_size=600,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        split_by_number=False,
        num_threads=1,
        minloglevel=2,
    )
    return f"{prefix}.model"


@pytest.fixture(scope="session")
def py_tokenizer(spm_model_file):
    from albert_tf.text import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model_file)


@pytest.fixture(scope="session")
def graph_tokenizer(spm_model_file):
    from albert_tf.text import TextTokenizer

    return TextTokenizer(spm_model_file)


# Strings that stress normalization and tokenization; bytes items are fed as-is (invalid UTF-8).
TORTURE = [
    "Café crème brûlée, naïve façade, Ångström, ÉCOLE ÉLÉMENTAIRE",
    "\u201cHello\u201d \u2018world\u2019 ``TeX quotes'' and ''odd`` ```triple'''",
    "9,000 then 1,000,000, and 12,500, x2, 3.0, 4,5 \u00b2, \u0663,",
    "日本語のテキスト、中文。 한국어 텍스트",
    "I \u2764\ufe0f \U0001f355! \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "a\x00b\x07c\x1bd\x7fe\x1cf\x85g",
    "\ttab\ttab\n\r\x0b\x0c end",
    "\u200b\u200d\ufeff zero width \u00ad soft hyphen",
    "",
    "   \t\n ",
    "\u3000\u2028\u2029\u00a0",
    "word " * 5000,
    "x" * 20000,
    "ΟΔΟΣ ΣΑΣ. Σ ΑΣ'Σ",
    "e\u0301\u0327 \ufb01 \ufb00 \u2460 \u00bd \u338f \u216b",
    "İSTANBUL ıı ǅ ß ẞ",
    "Привет, МИР! مرحبا بالعالم שלום",
    "[CLS] <unk> [MASK] \u2581 \u2581\u2581 _",
    b"caf\xc3",
    b"\xff\xfe bad bytes",
    b"ok \xed\xa0\x80 surrogate \xc0\xaf overlong",
    "lone \ud83d surrogate",
]


@pytest.fixture(scope="session")
def torture_texts():
    return list(TORTURE)
