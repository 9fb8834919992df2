"""ALBERT's learning-rate schedule: linear warmup, then polynomial decay to an end value.

The original (`optimization.create_optimizer`) computes, for a raw global step `t`:

    decayed = (lr - end) * (1 - min(t, decay_steps) / decay_steps) ** power + end
    s = t - start_warmup_step
    lr(t) = lr * s / warmup_steps   if warmup_steps > 0 and s < warmup_steps
          = decayed                 otherwise

The warmup counts from `start_warmup_step` while the decay uses the raw step, exactly as the
original. One deviation: before `start_warmup_step` the original's formula gives a *negative*
learning rate (s < 0); here `s` is clamped at 0, so the rate is 0 until warmup starts.

>>> from albert_tf.optim.schedules import WarmupPolynomialDecay
>>> schedule = WarmupPolynomialDecay(1e-3, decay_steps=100, warmup_steps=10)
>>> [round(float(schedule(t)), 6) for t in (0, 5, 10, 55, 100, 200)]
[0.0, 0.0005, 0.0009, 0.00045, 0.0, 0.0]
"""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `initial_learning_rate`, then polynomial decay (the original's).

    Args:
        initial_learning_rate: peak rate (the original's `--learning_rate`).
        decay_steps: steps over which the rate decays to `end_learning_rate` (the original
            passes `--num_train_steps`).
        warmup_steps: length of the linear warmup (`--num_warmup_steps`); 0 disables it.
        start_warmup_step: step at which warmup starts (`--start_warmup_step`).
        power: polynomial power of the decay (`--poly_power`; 1.0 is linear).
        end_learning_rate: rate reached at `decay_steps` and kept afterwards.

    Example:
        >>> schedule = WarmupPolynomialDecay(0.00176, decay_steps=125000, warmup_steps=3125)
        >>> round(float(schedule(3125)), 7)
        0.001716
    """

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        warmup_steps=0,
        start_warmup_step=0,
        power=1.0,
        end_learning_rate=0.0,
        name="warmup_polynomial_decay",
    ):
        super().__init__()
        if decay_steps <= 0:
            raise ValueError(f"WarmupPolynomialDecay: decay_steps must be > 0, got {decay_steps}")
        if warmup_steps < 0 or start_warmup_step < 0:
            raise ValueError(
                f"WarmupPolynomialDecay: warmup_steps ({warmup_steps}) and start_warmup_step "
                f"({start_warmup_step}) must be >= 0"
            )
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.warmup_steps = int(warmup_steps)
        self.start_warmup_step = int(start_warmup_step)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)
        self.name = name

    def __call__(self, step):
        with tf.name_scope(self.name):
            step = tf.cast(step, tf.float32)
            progress = tf.minimum(step, float(self.decay_steps)) / float(self.decay_steps)
            decayed = (self.initial_learning_rate - self.end_learning_rate) * tf.pow(
                1.0 - progress, self.power
            ) + self.end_learning_rate
            if not self.warmup_steps:
                return decayed
            warmup_step = tf.maximum(step - float(self.start_warmup_step), 0.0)
            # lr * (s / warmup), in this order, as the original (float32 rounding differs from
            # (lr * s) / warmup at some steps).
            warmup = self.initial_learning_rate * (warmup_step / float(self.warmup_steps))
            return tf.where(warmup_step < float(self.warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "warmup_steps": self.warmup_steps,
            "start_warmup_step": self.start_warmup_step,
            "power": self.power,
            "end_learning_rate": self.end_learning_rate,
            "name": self.name,
        }
