"""Gradient clipping by global norm, as one reduction over all gradients.

The norm is taken over the gradients concatenated into one vector, not summed tensor by tensor:
under XLA that is one fused reduction where a sum per tensor compiles to about three kernels per
tensor. Without XLA the concatenation costs one copy of the gradients, made after the backward
pass has freed its activations.

>>> import tensorflow as tf
>>> float(global_norm([tf.constant([3.0]), tf.constant([[4.0]])]))
5.0
>>> clipped, norm = clip_by_global_norm([tf.constant([3.0]), tf.constant([[4.0]])], 1.0)
>>> [round(float(tf.reshape(t, [])), 2) for t in clipped]
[0.6, 0.8]
"""

import tensorflow as tf


def to_dense(gradient):
    """`gradient` as a dense tensor (an IndexedSlices, such as an embedding's, scattered)."""
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


def global_norm(tensors):
    """The float32 L2 norm of all `tensors` (IndexedSlices as their dense values) together;
    None entries are skipped."""
    flat = [tf.reshape(tf.cast(to_dense(t), tf.float32), [-1]) for t in tensors if t is not None]
    if not flat:
        return tf.constant(0.0)
    return tf.sqrt(tf.reduce_sum(tf.square(tf.concat(flat, axis=0))))


def clip_by_global_norm(tensors, clip_norm, norm=None):
    """(`tensors` scaled by clip_norm / max(norm, clip_norm), the norm before clipping), None
    entries kept. As `tf.clip_by_global_norm`, a norm that is not finite makes every tensor NaN,
    so the loss check stops the run instead of an update with an unknown scale."""
    tensors = [None if t is None else to_dense(t) for t in tensors]
    if norm is None:
        norm = global_norm(tensors)
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)
    scale = scale + (norm - norm)  # NaN unless the norm is finite
    clipped = [None if t is None else t * tf.cast(scale, t.dtype) for t in tensors]
    return clipped, norm
