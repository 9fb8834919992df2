"""The compute bound's FLOP count, by hand, and its matmul rate measurement."""

from albert_tf.benchmarks import compute_bound
from albert_tf.config import AlbertConfig


def test_forward_flops_by_hand():
    config = AlbertConfig(
        vocab_size=100, embedding_size=4, hidden_size=8, num_attention_heads=2,
        intermediate_size=16, num_hidden_layers=2,
    )  # fmt: skip
    # embedding 2*3*4*8 = 192; per block 3 tokens * 2*(4*8*8 + 2*8*16) = 3072 and attention
    # 2*2*3*3*8 = 288; two blocks 6720; pooler 2*8*8 = 128
    assert compute_bound.forward_flops(config, 3) == 192 + 6720 + 128
    # ALBERT-base over 16 positions: about 2.7 GFLOP
    base = AlbertConfig.from_preset("albert_base_v2", vocab_size=30000)
    assert 2.7e9 < compute_bound.forward_flops(base, 16) < 2.8e9
    grouped = AlbertConfig.from_preset("albert_base_v2", vocab_size=30000, inner_group_num=2)
    blocks = compute_bound.forward_flops(grouped, 16) - compute_bound.forward_flops(base, 16)
    assert blocks > 2.6e9  # every inner group's block counts


def test_matmul_rate_is_measured():
    rate = compute_bound.matmul_rate("float32", rows=64, inner=64, columns=64, seconds=0.05)
    assert 1e6 < rate < 1e14


def test_weight_bytes_by_hand_and_read_rate():
    config = AlbertConfig(
        vocab_size=100, embedding_size=4, hidden_size=8, num_attention_heads=2,
        intermediate_size=16, num_hidden_layers=2,
    )  # fmt: skip
    # per block 4*8*8 + 2*8*16 = 512 values, two layers 1024; projection 4*8; pooler 8*8
    assert compute_bound.weight_bytes(config, 2) == 2 * (1024 + 32 + 64)
    assert compute_bound.weight_bytes(config, 4) == 2 * compute_bound.weight_bytes(config, 2)
    assert 1e6 < compute_bound.read_rate(megabytes=1, seconds=0.05) < 1e13
