"""Fixtures of the data tests: a tokenizer on the shared tiny SentencePiece model."""

import pytest


@pytest.fixture(scope="session")
def tokenizer(spm_model_file):
    from albert_tf.text import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model_file, lower_case=True)
