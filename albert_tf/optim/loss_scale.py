"""Dynamic loss scaling for float16 compute (`--precision=mixed_float16`).

The loss is multiplied by `scale` before the backward pass and the gradients divided by it, so
small float16 gradients do not flush to zero. A step whose gradient is not finite (an overflow)
is skipped, the scale halves and `skipped_steps` counts it; after `growth_interval` finite steps
in a row the scale doubles (as Keras' `LossScaleOptimizer`). The state is three variables of a
`tf.Module`, so a checkpoint holding the module restores it exactly. Created in a strategy's
scope, the variables take the first replica's value when assigned in replica context (every
replica sees the same all-reduced gradient, hence the same verdict).

>>> import tensorflow as tf
>>> scale = DynamicLossScale(initial_scale=8.0, growth_interval=2)
>>> scale.update(tf.constant(False))
>>> float(scale.scale), int(scale.skipped_steps)
(4.0, 1)
>>> for _ in range(2):
...     scale.update(tf.constant(True))
>>> float(scale.scale)
8.0
"""

import tensorflow as tf


class DynamicLossScale(tf.Module):
    """The loss scale and its counters (`scale`, `good_steps`, `skipped_steps` variables)."""

    def __init__(self, initial_scale=2.0**15, growth_interval=2000, name="loss_scale"):
        super().__init__(name=name)
        self.growth_interval = int(growth_interval)

        def variable(value, dtype, name):
            return tf.Variable(
                tf.constant(value, dtype),
                trainable=False,
                name=name,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )

        self.scale = variable(initial_scale, tf.float32, "scale")
        self.good_steps = variable(0, tf.int64, "good_steps")
        self.skipped_steps = variable(0, tf.int64, "skipped_steps")

    def update(self, finite):
        """After a step: halve on an overflow (`finite` False, the step skipped), else count the
        step and double the scale every `growth_interval` finite steps."""
        grow = tf.logical_and(finite, self.good_steps + 1 >= self.growth_interval)
        new_scale = tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale), self.scale / 2.0)
        zero = tf.constant(0, tf.int64)
        new_good = tf.where(finite, tf.where(grow, zero, self.good_steps + 1), zero)
        self.scale.assign(new_scale)
        self.good_steps.assign(new_good)
        self.skipped_steps.assign_add(tf.cast(tf.logical_not(finite), tf.int64))
