"""tf.data pipelines over in-memory `Features` with an exact, cheap data position.

Training reads the rows in an order that is a pure function of (seed, position): pass `e` is a
permutation of the rows seeded by (seed, e), and the passes follow each other without a gap, so
a batch may span two passes. Step `s` reads rows [s * batch_size, (s + 1) * batch_size) of that
endless stream; a run resumed at step `s` starts the stream there (nothing to skip or replay).

>>> import numpy as np
>>> from albert_tf.finetune.task import Features
>>> features = Features({"x": np.arange(5)}, labels=np.arange(5) * 10)
>>> first = [b[0]["x"].numpy().tolist() for b in train_dataset(features, 2, seed=1).take(4)]
>>> resumed = [b[0]["x"].numpy().tolist() for b in train_dataset(features, 2, seed=1,
...                                                                start_step=2).take(2)]
>>> resumed == first[2:], sorted(sum(first[:2], []) + first[2][:1]) == list(range(5))
(True, True)
"""

import tensorflow as tf

_MAX_PASSES = 1 << 40


def row_order(num_rows, seed, start=0):
    """Endless dataset of row indices (int64) from position `start` of the seeded stream."""
    if num_rows < 1:
        raise ValueError("cannot train on zero examples")
    first_pass, offset = divmod(int(start), int(num_rows))

    def permutation(epoch):
        keys = tf.random.stateless_uniform(
            [num_rows], seed=tf.stack([tf.constant(seed, tf.int64), epoch]), dtype=tf.float32
        )
        return tf.data.Dataset.from_tensor_slices(tf.argsort(keys, stable=True))

    passes = tf.data.Dataset.range(first_pass, _MAX_PASSES)
    return passes.flat_map(permutation).skip(offset).map(lambda i: tf.cast(i, tf.int64))


def _gather(features, with_labels):
    """indices -> the rows of the inputs (and labels: an array or a dict of arrays)."""
    inputs = {k: tf.constant(v) for k, v in features.inputs.items()}
    labels = tf.nest.map_structure(tf.constant, features.labels) if with_labels else None

    def take(indices):
        batch = {k: tf.gather(v, indices) for k, v in inputs.items()}
        if not with_labels:
            return batch
        return batch, tf.nest.map_structure(lambda v: tf.gather(v, indices), labels)

    return take


def _transformed(dataset, transform, with_labels):
    if transform is None:
        return dataset
    if with_labels:
        return dataset.map(lambda x, y: (transform(x), y), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.map(transform, num_parallel_calls=tf.data.AUTOTUNE)


def train_dataset(features, batch_size, seed, start_step=0, transform=None):
    """Endless (inputs, labels) batches from step `start_step` of the seeded row stream."""
    if features.labels is None:
        raise ValueError("training needs labelled features")
    order = row_order(len(features), seed, start=start_step * batch_size)
    dataset = order.batch(batch_size, drop_remainder=True).map(_gather(features, True))
    return _transformed(dataset, transform, True).prefetch(tf.data.AUTOTUNE)


def eval_dataset(features, batch_size, transform=None, pad_to_batch=False, with_labels=False):
    """Rows in order, batched; with `pad_to_batch` the last batch is filled with copies of row 0
    (static shapes on TPU: cut the outputs back to `len(features)`)."""
    n = len(features)
    indices = tf.range(n, dtype=tf.int64)
    if pad_to_batch and n % batch_size:
        indices = tf.concat([indices, tf.zeros([batch_size - n % batch_size], tf.int64)], 0)
    dataset = (
        tf.data.Dataset.from_tensor_slices(indices)
        .batch(batch_size, drop_remainder=pad_to_batch)
        .map(_gather(features, with_labels))
    )
    return _transformed(dataset, transform, with_labels).prefetch(tf.data.AUTOTUNE)
