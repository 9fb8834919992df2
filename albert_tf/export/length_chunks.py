"""Served batches in chunks of one padded width: a request of mixed texts pads each chunk to its
own width instead of every text to the longest of the request.

A batch of 32 texts is padded to its longest: with one long text among short ones, most of the
encoder's work is padding. `run_in_length_chunks` sorts the rows by length, runs the model on the
rows of each padded width (length rounded up to a multiple of 8) together, at most `chunk_size`
at a time, each chunk cut to that width, and returns the per-row outputs in the request's order.
A request whose texts share one padded width (similar sentences, as server-side batching
gathers) runs as one chunk: only a sort, a one-pass loop and gathers are added. A row's
outputs do not depend on the other rows (padding is masked), so they are those of the whole
batch at once.

>>> import tensorflow as tf
>>> inputs = {"input_mask": tf.constant([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]])}
>>> def widths(x):
...     mask = x["input_mask"]
...     return {"width": tf.fill([tf.shape(mask)[0]], tf.shape(mask)[1]),
...             "length": tf.reduce_sum(mask, 1)}
>>> specs = {"width": tf.TensorSpec([None], tf.int32), "length": tf.TensorSpec([None], tf.int32)}
>>> out = run_in_length_chunks(widths, inputs, specs, multiple=2)
>>> out["length"].numpy().tolist(), out["width"].numpy().tolist()
([3, 1, 2], [4, 2, 2])
"""

import tensorflow as tf

from albert_tf.text.preprocessing_layers import bucketed_length

#: At most this many rows per chunk (bounds one chunk's memory in a large request).
CHUNK_SIZE = 32
#: Rows are padded to a multiple of this; the rows of one padded width form a chunk.
WIDTH_MULTIPLE = 8


def run_in_length_chunks(fn, inputs, specs, chunk_size=CHUNK_SIZE, multiple=WIDTH_MULTIPLE):
    """fn(inputs of some rows, cut to their width) -> dict of [rows, ...] tensors, run on
    chunks of rows of one padded width (their length rounded up to `multiple`, at most the
    batch's), at most `chunk_size` rows each; returns the outputs (same dict) in the rows' order.

    `inputs`: a dict of [B, S] tensors with "input_mask" (ones then zeros in every row);
    `specs`: {output name: tf.TensorSpec([None, ...], dtype)} of what `fn` returns (`fn` is
    traced once, in the loop; the shapes after the first dimension make an empty batch's outputs).
    """
    mask = inputs["input_mask"]
    batch, seq = tf.shape(mask)[0], tf.shape(mask)[1]
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    widths = bucketed_length(tf.maximum(lengths, 1), multiple, seq)
    order = tf.argsort(widths, stable=True)
    ordered = {name: tf.gather(value, order) for name, value in inputs.items()}
    ordered_widths = tf.gather(widths, order)
    # A chunk starts at the first row of each width and every `chunk_size` rows after it.
    first_of_width = tf.searchsorted(ordered_widths, ordered_widths, side="left")
    position = tf.range(batch) - first_of_width
    starts = tf.cast(tf.where(position % chunk_size == 0)[:, 0], tf.int32)
    ends = tf.concat([starts[1:], [batch]], axis=0)
    num_chunks = tf.size(starts)

    def chunk(index):
        start, end = starts[index], ends[index]
        width = ordered_widths[start]
        return fn({name: value[start:end, :width] for name, value in ordered.items()})

    arrays = {
        name: tf.TensorArray(
            spec.dtype, size=num_chunks, infer_shape=False, element_shape=spec.shape
        )
        for name, spec in specs.items()
    }

    def body(index, arrays):
        outputs = chunk(index)
        return index + 1, {name: arrays[name].write(index, outputs[name]) for name in arrays}

    _, arrays = tf.while_loop(lambda index, _: index < num_chunks, body, (0, arrays))
    restore = tf.math.invert_permutation(order)
    return {name: tf.gather(array.concat(), restore) for name, array in arrays.items()}
