"""Dense-graph pieces shared by the LiteRT exports (TFLite builtin ops only, no ragged tensors).

>>> row_ids(tf.constant([0, 2, 2, 5]), 5).numpy().tolist()  # row 1 is empty
[0, 0, 2, 2, 2]
>>> span_sums(tf.constant([0, 1]), tf.constant([2, 3]), tf.constant([0, 1, 3, 6])).numpy().tolist()
[3, 5]
"""

import tensorflow as tf


def row_ids(splits, size):
    """int32 [size]: the row of each of `size` values given int32 row_splits (empty rows
    allowed): the dense form of `tf.RaggedTensor.value_rowids`."""
    marks = tf.scatter_nd(
        splits[1:-1, tf.newaxis], tf.ones_like(splits[1:-1]), tf.reshape(size + 1, [1])
    )
    return tf.cumsum(marks)[:size]


def span_sums(begins, ends, cumulative):
    """Per row of int32 `begins`/`ends` ([R]): the values whose inclusive cumsum with a leading
    0 is `cumulative` ([n + 1]), summed over [begin, end)."""
    return tf.gather(cumulative, ends) - tf.gather(cumulative, begins)
