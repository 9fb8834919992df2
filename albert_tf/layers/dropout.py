"""Stateless dropout masks: one random stream per dropout site, a piece of it per block.

Block i's mask at a site is the elements [i * m, i * m + n) of one Philox stream keyed by the
site's seed, n being the mask's size and m that rounded up to a multiple of 4 (Philox yields
4 numbers per counter step, so a piece starts on a counter step and is drawn on its own by
offsetting the counter). The site's seed is the same in every block, folded once outside the
encoder's loop; only the counter offset depends on the block (faster under XLA than a seed
folded in per block and a mask drawn in its own shape: docs/notes/encoder_speed.md). Every
block's masks are drawn on their own, when the block runs, and are the same in a
`tf.while_loop` and unrolled.
Recomputation (`AlbertEncoder(recompute=True)`) keeps them packed 8 to a byte (`pack`,
`unpack`) for the backward pass.

XLA draws other numbers than TensorFlow's CPU kernel from the same seed.

>>> import tensorflow as tf
>>> from albert_tf.layers import dropout
>>> masks = dropout.BlockMasks(tf.constant([1, 2]), {0: 0.5}, {0: [3, 5]})
>>> masks.at(2)[0].shape
TensorShape([3, 5])

Block 2's piece of site 0's stream is the same drawn on its own or with blocks 0 and 1:

>>> stream = dropout.keep_mask([3, 16], 0.5, dropout.sub_seed(tf.constant([1, 2]), 0))
>>> bool(tf.reduce_all(tf.reshape(stream[2, :15], [3, 5]) == masks.at(2)[0]))
True
"""

import functools

import tensorflow as tf

from albert_tf.layers import elementwise

_PHILOX = 1  # the `alg` number of Philox in TensorFlow's stateless random ops


def sub_seed(seed, index):
    """A distinct seed per site or call: `index` may be a Python int or a scalar tensor."""
    return tf.random.experimental.stateless_fold_in(seed, tf.cast(index, tf.int32))


def _uniform(shape, seed, counter_offset=0):
    """Philox uniform [0, 1) floats of `shape` from `seed`, starting `counter_offset` counter
    steps (4 numbers each) into its stream. Offset 0 equals
    `tf.random.stateless_uniform(shape, seed, alg="philox")`."""
    # Philox named, not "auto_select": the same numbers off XLA (where auto_select is Philox),
    # and under XLA:CPU auto_select inside a tf.while_loop ran slower than unrolled
    # (docs/notes/encoder_speed.md).
    key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
    offset = tf.cast(counter_offset, tf.uint64)
    counter = counter + tf.stack([offset, tf.zeros_like(offset)])
    return tf.raw_ops.StatelessRandomUniformV2(
        shape=shape, key=key, counter=counter, alg=_PHILOX, dtype=tf.float32
    )


def keep_mask(shape, rate, seed, counter_offset=0):
    """The keep mask (bool, True where kept, with probability 1 - rate) of `shape` from `seed`,
    starting `counter_offset` counter steps into its stream."""
    return _uniform(shape, seed, counter_offset) >= rate


def dropout(x, rate, seed):
    """Inverted dropout with a mask drawn from `seed` (int32/int64 [2]). Rate 0 is a no-op.

    >>> import tensorflow as tf
    >>> y = dropout(tf.ones([1000]), 0.5, tf.constant([1, 2]))
    >>> sorted(set(y.numpy().tolist()))
    [0.0, 2.0]
    """
    if not rate:
        return x
    return elementwise.apply_dropout(x, keep_mask(tf.shape(x), rate, seed), rate)


class BlockMasks:
    """The keep masks of an encoder call's blocks: `rates` and `shapes` map each active site to
    its rate and its mask's shape (int list or int32 tensor), `seed` is the call's seed.

    `at(i)` draws block i's masks: {site: bool mask}. `pack` packs such masks 8 to a byte
    ({site: uint8 [ceil(n / 8)]}) and `unpack` turns them back: what recomputation keeps for
    the backward pass (at ALBERT-large, seq 512, 24 layers, 31 MB instead of 252 MB of bool).
    """

    def __init__(self, seed, rates, shapes):
        self.rates = dict(rates)
        self._seeds = {site: sub_seed(seed, site) for site in self.rates}
        self._shapes = {site: tf.cast(shapes[site], tf.int32) for site in self.rates}

    def _draw(self, site, index):
        n = tf.reduce_prod(self._shapes[site])
        m = (n + 3) // 4 * 4  # the piece of the stream: n rounded up to whole counter steps
        offset = tf.cast(index, tf.int64) * tf.cast(m // 4, tf.int64)
        keep = keep_mask(tf.reshape(m, [1]), self.rates[site], self._seeds[site], offset)
        return tf.reshape(keep[:n], self._shapes[site])

    def at(self, index):
        """Block `index`'s masks (`index` a Python int or a scalar tensor): {site: bool mask}."""
        return {site: self._draw(site, index) for site in self.rates}

    def pack(self, masks):
        """`at(i)`'s masks packed 8 to a byte: {site: uint8 [ceil(n / 8)]}."""
        return {site: _pack(keep) for site, keep in masks.items()}

    def unpack(self, packed):
        """`pack`'s result -> the masks it packed."""
        return {site: _unpack(bits, self._shapes[site]) for site, bits in packed.items()}


_BIT_SHIFTS = list(range(8))


@elementwise.xla_kernel
def _pack(keep):
    flat = tf.reshape(keep, [-1])
    flat = tf.pad(flat, [[0, -tf.size(flat) % 8]])  # to whole bytes
    bits = tf.cast(tf.reshape(flat, [-1, 8]), tf.uint8)
    # Eight shifted columns ORed: one elementwise pass (XLA:CPU runs a reduction on one thread).
    shifted = [tf.bitwise.left_shift(bits[:, b], tf.constant(b, tf.uint8)) for b in _BIT_SHIFTS]
    return functools.reduce(tf.bitwise.bitwise_or, shifted)


@elementwise.xla_kernel
def _unpack(packed, shape):
    bits = tf.bitwise.right_shift(packed[:, tf.newaxis], tf.constant(_BIT_SHIFTS, tf.uint8)) & 1
    flat = tf.reshape(bits, [-1])[: tf.reduce_prod(shape)]
    return tf.reshape(tf.cast(flat, tf.bool), shape)
