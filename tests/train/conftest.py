"""Fixtures of the training tests (helpers live in train_support.py: conftest is not importable)."""

import json

import pytest
from train_support import VOCAB, write_records


@pytest.fixture(scope="session")
def records(tmp_path_factory):
    """{"train": two training files, "eval": one held-out file, "config": a tiny config JSON}."""
    directory = tmp_path_factory.mktemp("train_records")
    train = [write_records(str(directory / f"train-{i}.tfrecord"), 96, seed=i) for i in range(2)]
    held_out = write_records(str(directory / "eval.tfrecord"), 48, seed=99)
    config = directory / "albert_config.json"
    config.write_text(
        json.dumps(
            {
                "vocab_size": VOCAB,
                "embedding_size": 16,
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "hidden_act": "gelu",
                "max_position_embeddings": 64,
                "type_vocab_size": 2,
                "initializer_range": 0.02,
                "hidden_dropout_prob": 0.0,
                "attention_probs_dropout_prob": 0.0,
            }
        )
    )
    return {
        "train": ",".join(train),
        "eval": held_out,
        "config": str(config),
        "dir": str(directory),
    }
