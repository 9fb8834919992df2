"""Parity with Hugging Face ALBERT (transformers 4.57.6, PyTorch) on the committed fixtures.

Each fixture holds HF's outputs for seeded random weights (LayerNorms and biases perturbed away
from 1/0) on a padded batch: sequence output, pooled output, MLM logits at masked positions and
SOP logits must agree to 1e-5.
"""

import logging

import pytest

from albert_tf.convert import from_huggingface, from_original

# Per fixture: the config the converter must produce and the HF outputs it is compared on.
HF_CASES = {
    "hf_shared_tanh": (
        dict(hidden_act="gelu_tanh", num_hidden_layers=3, num_hidden_groups=1, inner_group_num=1),
        ["last_hidden_state", "pooler_output", "prediction_logits", "sop_logits"],
    ),
    "hf_groups_erf": (
        dict(
            hidden_act="gelu_erf",
            num_hidden_layers=4,
            num_hidden_groups=2,
            inner_group_num=2,
            hidden_dropout_prob=0.1,
        ),
        ["last_hidden_state", "pooler_output", "prediction_logits", "sop_logits"],
    ),
    "hf_unshared": (
        dict(hidden_act="relu", num_hidden_layers=3, num_hidden_groups=3, inner_group_num=1),
        ["last_hidden_state", "pooler_output", "prediction_logits", "sop_logits"],
    ),
    "hf_masked_lm": (
        dict(hidden_act="gelu_tanh", num_hidden_layers=2),
        ["last_hidden_state", "prediction_logits"],
    ),
    "hf_model_only": (
        dict(hidden_act="gelu_tanh", num_hidden_layers=2, inner_group_num=2),
        ["last_hidden_state", "pooler_output"],
    ),
}
MISSING_PARTS = {
    "hf_masked_lm": ["pooler", "sentence_order"],
    "hf_model_only": ["masked_lm", "sentence_order"],
}


@pytest.mark.parametrize("name", sorted(HF_CASES))
def test_huggingface_parity(name, fx, caplog):
    fields, compared = HF_CASES[name]
    with caplog.at_level(logging.WARNING):
        pretrainer = from_huggingface(fx.path(name))
    config = pretrainer.backbone.config
    assert {k: getattr(config, k) for k in fields} == fields
    assert (config.vocab_size, config.embedding_size, config.hidden_size) == (99, 16, 32)
    assert sorted(fx.assert_parity(pretrainer, fx.expected(name))) == sorted(compared)
    warned = [
        part
        for part in ("pooler", "masked_lm", "sentence_order")
        if any(f"has no {part} weights" in r.getMessage() for r in caplog.records)
    ]
    assert warned == MISSING_PARTS.get(name, [])


def test_original_parity(fx):
    """A TF1 checkpoint with adam slots and global_step, 2 groups x 2 inner groups, E != H."""
    pretrainer = from_original(fx.original_prefix, fx.path("original_groups/albert_config.json"))
    config = pretrainer.backbone.config
    assert (config.hidden_act, config.num_hidden_groups, config.inner_group_num) == (
        "gelu_tanh",
        2,
        2,
    )
    compared = fx.assert_parity(pretrainer, fx.expected("original_groups"))
    assert sorted(compared) == [
        "last_hidden_state",
        "pooler_output",
        "prediction_logits",
        "sop_logits",
    ]


def test_original_tfhub_prefix_and_directory_input(fx, original_copy):
    """TF-Hub `module/` names, and a directory without a `checkpoint` file as input."""
    prefix, config_path = original_copy(rename=lambda name: "module/" + name)
    assert all(name.startswith("module/") for name in fx.read_tf1(prefix))
    pretrainer = from_original(prefix.rsplit("/", 1)[0])  # albert_config.json found beside it
    fx.assert_parity(pretrainer, fx.expected("original_groups"))
