"""Gradient accumulation: N micro-batches, run one after the other, make ONE optimizer update.

`split_micro_batches` reshapes every tensor of a batch from [B, ...] to [N, B/N, ...];
`accumulate` runs a micro-step for k = 0 .. N-1 inside one `tf.while_loop` with
`parallel_iterations=1` (so only one micro-batch's activations are alive at a time) and sums
what each returns: the gradients and any statistics. The caller weights each micro-batch's loss
so that the sum is the gradient of the whole batch (a loss divided by a whole-batch count needs
no weight). Used by the pretraining loop (`albert_tf.train.loop.Trainer`) and the fine-tuning
models' `train_step` (`albert_tf.models.head_model`).

>>> import tensorflow as tf
>>> micro = split_micro_batches({"x": tf.reshape(tf.range(8.0), [4, 2])}, 2)
>>> micro["x"].shape
TensorShape([2, 2, 2])
>>> v = tf.Variable(1.0)
>>> def micro_step(k):
...     with tf.GradientTape() as tape:
...         loss = tf.reduce_sum(micro["x"][k]) * v
...     return tape.gradient(loss, [v]), {"rows": tf.constant(2.0)}
>>> gradients, sums = accumulate(micro_step, 2, [v], {"rows": tf.constant(0.0)})
>>> float(gradients[0]), float(sums["rows"])
(28.0, 4.0)
"""

import tensorflow as tf

from albert_tf.optim.clipping import to_dense


def split_micro_batches(structure, steps, what="gradient_accumulation_steps"):
    """Every tensor of `structure` reshaped from [B, ...] to [steps, B // steps, ...] (None
    entries stay None); a static B that `steps` does not divide is a ValueError naming `what`."""

    def split(t):
        if t is None:
            return None
        static = t.shape.as_list()
        if static[0] is not None and static[0] % steps:
            raise ValueError(
                f"{what}={steps} does not divide the batch of {static[0]} rows (per replica)"
            )
        dynamic = tf.shape(t)
        dims = [d if d is not None else dynamic[i] for i, d in enumerate(static)]
        return tf.reshape(t, [steps, dims[0] // steps] + dims[1:])

    return tf.nest.map_structure(split, structure)


def accumulate(micro_step, steps, variables, initial):
    """Sums `micro_step(k)` = (gradients of `variables`, statistics shaped as `initial`) over
    k = 0 .. steps-1, one micro-step at a time.

    Returns (the summed gradients, dense and in each variable's dtype, None where the micro-step
    returns None; the summed statistics, starting from `initial`)."""
    no_gradient = []  # filled while tracing the loop body

    def body(k, gradients, totals):
        grads, stats = micro_step(k)
        no_gradient[:] = [g is None for g in grads]
        gradients = [
            acc if g is None else acc + tf.cast(to_dense(g), acc.dtype)
            for acc, g in zip(gradients, grads)
        ]
        totals = tf.nest.map_structure(lambda t, s: t + tf.cast(s, t.dtype), totals, stats)
        return k + 1, gradients, totals

    _, gradients, totals = tf.while_loop(
        lambda k, *_: k < steps,
        body,
        (tf.constant(0), [tf.zeros(v.shape, v.dtype) for v in variables], initial),
        parallel_iterations=1,
    )
    return [None if none else g for g, none in zip(gradients, no_gradient)], totals
