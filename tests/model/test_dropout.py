"""Dropout masks: block i's mask is piece i of its site's random stream, with and without XLA."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import dropout

SEED = tf.constant([3, 9])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_blocks_mask_is_its_piece_of_the_sites_stream(jit_compile):
    shape = [3, 5]  # 15 elements: each piece is 16 numbers of the stream, the last one unused
    masks = dropout.BlockMasks(SEED, {0: 0.5, 2: 0.25}, {0: shape, 2: [2, 4]})

    @tf.function(jit_compile=jit_compile)
    def draw(index):  # a tensor index, as in the encoder's tf.while_loop
        return masks.at(index)[0], masks.at(index)[2]

    @tf.function(jit_compile=jit_compile)
    def streams():  # the whole streams of 4 blocks, drawn at once by the same generator
        return (
            dropout.keep_mask([4, 16], 0.5, dropout.sub_seed(SEED, 0)),
            dropout.keep_mask([4, 8], 0.25, dropout.sub_seed(SEED, 2)),
        )

    stream0, stream2 = (s.numpy() for s in streams())
    for i in range(4):
        got0, got2 = (m.numpy() for m in draw(tf.constant(i)))
        np.testing.assert_array_equal(got0, stream0[i, :15].reshape(shape))
        np.testing.assert_array_equal(got2, stream2[i].reshape(2, 4))
    assert not np.array_equal(stream0[0], stream0[1])  # each block its own mask


@pytest.mark.parametrize("jit_compile", [False, True])
def test_masks_packed_eight_to_a_byte_unpack_to_themselves(jit_compile):
    shapes = {0: [2, 3, 7, 7], 1: [5, 3]}  # 294 and 15 elements: not whole bytes
    masks = dropout.BlockMasks(SEED, {0: 0.1, 1: 0.5}, shapes)

    @tf.function(jit_compile=jit_compile)
    def round_trip(index):
        drawn = masks.at(index)
        packed = masks.pack(drawn)
        return drawn, packed, masks.unpack(packed)

    drawn, packed, unpacked = round_trip(tf.constant(1))
    assert packed[0].dtype == tf.uint8 and packed[0].shape == (37,)  # ceil(294 / 8)
    assert packed[1].shape == (2,)
    for site in shapes:
        assert unpacked[site].dtype == tf.bool and unpacked[site].shape == shapes[site]
        np.testing.assert_array_equal(unpacked[site].numpy(), drawn[site].numpy())
    # Bit b of byte j is element 8 j + b.
    flat = drawn[1].numpy().reshape(-1)
    assert int(packed[1][0]) == sum(int(flat[b]) << b for b in range(8))


def test_masks_keep_one_minus_rate_and_differ_by_site():
    masks = dropout.BlockMasks(SEED, {0: 0.3, 1: 0.3}, {0: [200, 200], 1: [200, 200]})
    first, other_site = masks.at(5)[0].numpy(), masks.at(5)[1].numpy()
    assert first.dtype == bool and first.shape == (200, 200)
    assert abs(first.mean() - 0.7) < 0.01
    assert abs((first == other_site).mean() - (0.7**2 + 0.3**2)) < 0.01  # independent


def test_dropout_draws_a_stateless_philox_mask():
    x = tf.random.normal([6, 7])
    kept = tf.random.stateless_uniform([6, 7], seed=SEED, alg="philox").numpy() >= 0.4
    np.testing.assert_allclose(
        dropout.dropout(x, 0.4, SEED).numpy(), np.where(kept, x.numpy() / 0.6, 0.0), rtol=1e-6
    )
    assert dropout.dropout(x, 0.0, SEED) is x
