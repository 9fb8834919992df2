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

Off TPU the padding of each batch is cut (`trim_padding`): a training batch to its longest row,
an evaluation batch to the longest row of its split (one length per split, so that the outputs
of all batches stack), both rounded up to a multiple of `BUCKET`.
"""

import tensorflow as tf

_MAX_PASSES = 1 << 40
#: Cut batches are a multiple of this long (fewer distinct shapes to trace).
BUCKET = 8


def trim_padding(inputs, labels=None, length=None, bucket=BUCKET):
    """(inputs, labels) with every tensor whose last axis is the sequence axis of
    `inputs["input_mask"]` (inputs and per-position labels) cut to `length`, or, without it, to
    the batch's longest row rounded up to a multiple of `bucket`. Inputs without a static
    sequence length (already padded per batch) pass through.

    >>> mask = tf.constant([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    >>> x, y = trim_padding({"input_mask": mask}, tf.zeros([2, 6]), bucket=2)
    >>> x["input_mask"].shape.as_list(), y.shape.as_list()
    ([2, 4], [2, 4])
    """
    mask = inputs.get("input_mask") if isinstance(inputs, dict) else None
    full = None if mask is None else mask.shape[-1]
    if full is None or (length is not None and length >= full):
        return inputs, labels
    if length is None:
        longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1))
        length = tf.clip_by_value((longest + bucket - 1) // bucket * bucket, 1, full)

    def cut(tensor):
        if tensor.shape.rank is not None and tensor.shape.rank >= 2 and tensor.shape[-1] == full:
            return tensor[..., :length]
        return tensor

    cut_labels = None if labels is None else tf.nest.map_structure(cut, labels)
    return tf.nest.map_structure(cut, inputs), cut_labels


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


def train_dataset(features, batch_size, seed, start_step=0, transform=None, trim=False):
    """Endless (inputs, labels) batches from step `start_step` of the seeded row stream; with
    `trim`, each batch's padding is cut to its longest row (`trim_padding`)."""
    if features.labels is None:
        raise ValueError("training needs labelled features")
    order = row_order(len(features), seed, start=start_step * batch_size)
    dataset = order.batch(batch_size, drop_remainder=True).map(_gather(features, True))
    dataset = _transformed(dataset, transform, True)
    if trim:
        dataset = dataset.map(lambda x, y: trim_padding(x, y), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def eval_dataset(
    features, batch_size, transform=None, pad_to_batch=False, with_labels=False, length=None
):
    """Rows in order, batched; with `pad_to_batch` the last batch is filled with copies of row 0
    (static shapes on TPU: cut the outputs back to `len(features)`); with `length`, every
    batch's padding is cut to that length (`trim_padding`)."""
    n = len(features)
    indices = tf.range(n, dtype=tf.int64)
    if pad_to_batch and n % batch_size:
        indices = tf.concat([indices, tf.zeros([batch_size - n % batch_size], tf.int64)], 0)
    dataset = (
        tf.data.Dataset.from_tensor_slices(indices)
        .batch(batch_size, drop_remainder=pad_to_batch)
        .map(_gather(features, with_labels))
    )
    dataset = _transformed(dataset, transform, with_labels)
    if length is not None:
        if with_labels:
            dataset = dataset.map(lambda x, y: trim_padding(x, y, length))
        else:
            dataset = dataset.map(lambda x: trim_padding(x, length=length)[0])
    return dataset.prefetch(tf.data.AUTOTUNE)
