"""Fixtures for the model tests: tiny configs, deterministic inputs, random weights."""

import numpy as np
import pytest

from albert_tf.config import AlbertConfig

TINY = dict(
    vocab_size=40,
    embedding_size=8,
    hidden_size=16,
    num_hidden_layers=4,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=16,
    type_vocab_size=2,
)


@pytest.fixture
def tiny_config():
    """tiny_config(**overrides) -> a tiny AlbertConfig (V=40 E=8 H=16 L=4 heads=2 I=24 P=16)."""

    def make(**overrides):
        return AlbertConfig(**{**TINY, **overrides})

    return make


@pytest.fixture
def make_inputs():
    """make_inputs(batch, seq, lengths=None, seed=0, vocab=40) -> the backbone's int32 input dict.

    Rows are [CLS]=2, random ids >= 5, [SEP]=3 at the row's length - 1, then padding (id 0,
    mask 0); type ids are 0 for the first half of each row's tokens and 1 after.
    """

    def make(batch=2, seq=7, lengths=None, seed=0, vocab=40):
        rng = np.random.default_rng(seed)
        lengths = lengths or [seq] * batch
        ids = np.zeros([batch, seq], np.int32)
        mask = np.zeros([batch, seq], np.int32)
        types = np.zeros([batch, seq], np.int32)
        for b, n in enumerate(lengths):
            ids[b, :n] = rng.integers(5, vocab, size=n)
            ids[b, 0], ids[b, n - 1] = 2, 3
            mask[b, :n] = 1
            types[b, n // 2 : n] = 1
        return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}

    return make


@pytest.fixture
def randomize():
    """randomize(model, seed=0): gives every float variable random values (LayerNorms too),
    so that tests cannot pass because of zero biases or unit gammas."""

    def apply(model, seed=0):
        rng = np.random.default_rng(seed)
        for v in model.weights:
            if v.dtype in ("float32", "bfloat16", "float16"):
                scale = 0.5 if ("gamma" in v.path or "beta" in v.path or "bias" in v.path) else 0.3
                base = 1.0 if "gamma" in v.path else 0.0
                v.assign(base + scale * rng.standard_normal(v.shape).astype(np.float32))
        return model

    return apply
