"""Parameter counts: built models vs the released checkpoints, the paper's tables,
num_parameters."""

import numpy as np
import pytest

from albert_tf.config import AlbertConfig, list_presets
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer

# Counted from the released checkpoints' variable shapes (albert_original.md section 3.3),
# backbone including the pooler, without the MLM/SOP heads.
RELEASED = {"base": 11_683_584, "large": 17_683_968, "xlarge": 58_724_864, "xxlarge": 222_595_584}

# Paper Table 3 (E, sharing) and Table 4 (E, strategy) on the ALBERT-base configuration, in M.
PAPER_TABLE_3_4 = {
    (64, "none"): 87,
    (128, "none"): 89,
    (256, "none"): 93,
    (768, "none"): 108,
    (64, "all"): 10,
    (128, "all"): 12,
    (256, "all"): 16,
    (768, "all"): 31,
    (768, "attention"): 83,
    (768, "ffn"): 57,
    (128, "attention"): 64,
    (128, "ffn"): 38,
}


def count(weights):
    return sum(int(np.prod(v.shape)) for v in weights)


@pytest.mark.parametrize("size", sorted(RELEASED))
def test_built_released_models_match_the_checkpoints(size):
    config = AlbertConfig.from_preset(f"albert_{size}_v2")
    model = AlbertModel(config)
    assert count(model.trainable_weights) == RELEASED[size]
    assert not model.non_trainable_weights  # v2: no dropout, no seed state
    assert config.num_parameters() == RELEASED[size]
    assert AlbertConfig.from_preset(f"albert_{size}_v1").num_parameters() == RELEASED[size]


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
@pytest.mark.parametrize("groups,inner,embedding", [(1, 1, 8), (2, 2, 16)])
def test_built_model_equals_analytic_count(tiny_config, sharing, groups, inner, embedding):
    config = tiny_config(
        sharing=sharing, num_hidden_groups=groups, inner_group_num=inner, embedding_size=embedding
    )
    backbone = AlbertModel(config)
    assert count(backbone.trainable_weights) == config.num_parameters()
    assert count(backbone.trainable_weights) - count(
        backbone.pooler.trainable_weights
    ) == config.num_parameters(include_pooler=False)
    pretrainer = AlbertPretrainer(backbone)
    assert count(pretrainer.trainable_weights) == config.num_parameters(include_heads=True)
    # Stacked shapes: one attention / FFN entry per group and inner sublayer.
    assert tuple(backbone.encoder.attention_weights["query_kernel"].shape) == (
        config.attention_groups,
        inner,
        16,
        16,
    )
    assert tuple(backbone.encoder.ffn_weights["intermediate_kernel"].shape) == (
        config.ffn_groups,
        inner,
        16,
        24,
    )
    assert (backbone.embeddings.projection is None) == (embedding == 16)


def test_heads_add_the_original_head_parameters():
    config = AlbertConfig.from_preset("albert_base_v2")
    # cls/predictions: dense H->E, LayerNorm(E), output_bias V; cls/seq_relationship: 2H + 2.
    heads = 768 * 128 + 128 + 2 * 128 + 30000 + 2 * 768 + 2
    assert config.num_parameters(include_heads=True) == RELEASED["base"] + heads


@pytest.mark.parametrize("embedding,sharing", sorted(PAPER_TABLE_3_4))
def test_paper_tables_3_and_4(embedding, sharing):
    config = AlbertConfig.from_preset("albert_base_v2", embedding_size=embedding, sharing=sharing)
    paper = PAPER_TABLE_3_4[(embedding, sharing)] * 1e6
    assert abs(config.num_parameters() - paper) <= 1.1e6


def test_paper_table_1():
    paper = {
        "bert_base": 108,
        "bert_large": 334,
        "albert_base_v2": 12,
        "albert_large_v2": 18,
        "albert_xlarge_v2": 60,
    }
    # Table 1 rounds loosely (xlarge: 58.7M built, 59.0M with heads, "60M" in the paper).
    for preset, millions in paper.items():
        n = AlbertConfig.from_preset(preset).num_parameters()
        assert abs(n - millions * 1e6) <= max(1.1e6, 0.025 * millions * 1e6), preset
    # The paper's 235M for xxlarge does not match the released checkpoint (222.6M).
    assert round(AlbertConfig.from_preset("albert_xxlarge_v2").num_parameters() / 1e6, 1) == 222.6


def test_every_preset_has_a_consistent_count():
    for name in list_presets():
        config = AlbertConfig.from_preset(name)
        n = config.num_parameters()
        with_heads = config.num_parameters(include_heads=True)
        H, E, V = config.hidden_size, config.embedding_size, config.vocab_size
        assert with_heads - n == H * E + 3 * E + V + 2 * H + 2, name
        assert n - config.num_parameters(include_pooler=False) == H * H + H, name
