"""ALBERT's optimizers as Keras 3 optimizers: AdamW (bias-corrected, the fine-tuning default),
and the original's AdamWeightDecay and LAMB.

AdamWeightDecay and Lamb follow `optimization.py` / `lamb_optimizer.py` of google-research/albert
exactly:

    m <- beta_1 m + (1 - beta_1) g
    v <- beta_2 v + (1 - beta_2) g^2
    u  = m / (sqrt(v) + epsilon)  [+ weight_decay_rate * w  unless w is excluded from decay]
    AdamW:  w <- w - lr u
    LAMB:   w <- w - r lr u,  r = ||w|| / ||u|| if both norms > 0 else 1
            (r = 1 for variables excluded from layer adaptation)

There is no bias correction, the decay sits inside the update (so it enters LAMB's trust ratio)
and the trust ratio is not clipped. `keras.optimizers.Lamb` differs in all of these.

`AdamW` is AdamWeightDecay with Adam's bias correction (m / (1 - beta_1^t), v / (1 - beta_2^t)),
as `torch.optim.AdamW` and `keras.optimizers.AdamW`, with the same exclusions. Without the
correction the first updates are up to 1 / sqrt(1 - beta_2^t) (about 3x after 100 steps) larger,
and fine-tuning at higher learning rates collapses to the majority class (docs/finetune.md has the
study that made AdamW the fine-tuning default).

Exclusions are regular expressions searched in each variable's Keras `path` (for example
`albert/encoder/attention_layer_norm/gamma`). The defaults cover the original's names
("LayerNorm", "layer_norm", "bias") and Keras' LayerNormalization weight names (`gamma`, `beta`),
so LayerNorm scales/offsets and every bias skip weight decay and layer adaptation.

Weights stacked on leading axes (the shared-block encoder stores each group's weights as
`[groups, inner_group_num, ...]`) get one trust ratio per slice, as the original's separate
per-group variables did: `stacked_axes={"pattern": 2}` names them.

Do not combine with the Keras base `weight_decay` argument (the decay would be applied twice);
use `weight_decay_rate`.

>>> import keras, numpy as np
>>> from albert_tf.optim.optimizers import Lamb
>>> w = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
>>> opt = Lamb(learning_rate=0.1)
>>> opt.apply([np.full((2, 2), 0.5, "float32")], [w])
>>> np.round(w.numpy()[0, 0], 4)
np.float32(0.9)
"""

import re

import keras
import tensorflow as tf

from albert_tf.optim.clipping import clip_by_global_norm, to_dense
from albert_tf.optim.names import OPTIMIZERS  # re-exported: albert_tf.optim.optimizers.OPTIMIZERS

# The original's exclusion list plus the Keras names of LayerNormalization's weights.
DEFAULT_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias", r"(^|[/_])(gamma|beta)(:\d+)?$")


def _compile(patterns, argument):
    patterns = tuple(patterns or ())
    for p in patterns:
        try:
            re.compile(p)
        except re.error as e:
            raise ValueError(f"{argument}: {p!r} is not a valid regular expression ({e})") from None
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def _variable_path(variable):
    return getattr(variable, "path", None) or variable.name


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(keras.optimizers.Optimizer):
    """The original `AdamWeightDecayOptimizer`: Adam without bias correction, decoupled decay.

    Args:
        learning_rate: float or `keras.optimizers.schedules.LearningRateSchedule`.
        weight_decay_rate: decay coefficient added to the update (`wd * w`); the original uses
            0.01 for pretraining.
        beta_1, beta_2, epsilon: Adam constants (original: 0.9, 0.999, 1e-6).
        exclude_from_weight_decay: regexes searched in variable paths; matching variables get
            no decay.
        **kwargs: the base `keras.optimizers.Optimizer` arguments, except `weight_decay`.

    Example:
        >>> opt = AdamWeightDecay(learning_rate=1e-4)
        >>> opt.get_config()["epsilon"]
        1e-06
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUSIONS,
        name=None,
        **kwargs,
    ):
        if kwargs.get("weight_decay") is not None:
            raise ValueError(
                f"{type(self).__name__}: use weight_decay_rate (applied inside the update, as the "
                "original), not the Keras base weight_decay argument"
            )
        kwargs.pop("weight_decay", None)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay or ())
        self._decay_regex = _compile(
            self.exclude_from_weight_decay_patterns, "exclude_from_weight_decay"
        )

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Slot names as the original's "<name>/adam_m" and "<name>/adam_v".
        self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        # update_step receives the raw tf.Variable (no `.path`), so decisions are made here.
        self._decayed = {
            self._var_key(v) for v in var_list if self._matches_none(self._decay_regex, v)
        }

    @staticmethod
    def _matches_none(regex, variable):
        return regex is None or regex.search(_variable_path(variable)) is None

    def uses_weight_decay(self, variable):
        """Whether `variable` (already passed to `build`) receives weight decay."""
        return self._var_key(variable) in self._decayed

    def _direction(self, gradient, variable):
        """Updates the moments and returns the original's `u` (with decay when applicable)."""
        dtype = variable.dtype
        gradient = tf.cast(to_dense(gradient), dtype)
        index = self._get_variable_index(variable)
        m, v = self._adam_m[index], self._adam_v[index]
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(gradient)
        self.assign(m, next_m)
        self.assign(v, next_v)
        corrections = self._bias_corrections(dtype)
        if corrections is not None:
            next_m, next_v = next_m * corrections[0], next_v * corrections[1]
        update = next_m / (tf.sqrt(next_v) + self.epsilon)
        if self.weight_decay_rate and self.uses_weight_decay(variable):
            update += self.weight_decay_rate * tf.convert_to_tensor(variable)
        return update

    def _bias_corrections(self, dtype):
        """The factors of the first and second moments in the update, or None: the original has
        no bias correction; `AdamW` overrides this."""
        del dtype
        return None

    def update_step(self, gradient, variable, learning_rate):
        lr = tf.cast(learning_rate, variable.dtype)
        self.assign_sub(variable, lr * self._direction(gradient, variable))

    def _clip_gradients(self, grads):
        """Keras' hook: `global_clipnorm` as one reduction over all gradients (see
        `albert_tf.optim.clipping`); `clipnorm` and `clipvalue` (Keras allows one of the three)
        as Keras does them."""
        if self.global_clipnorm and self.global_clipnorm > 0:
            return clip_by_global_norm(grads, self.global_clipnorm)[0]
        return super()._clip_gradients(grads)

    def get_config(self):
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay_patterns),
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamW(AdamWeightDecay):
    """Bias-corrected AdamW with decoupled weight decay: the fine-tuning default.

    u = m_hat / (sqrt(v_hat) + epsilon) [+ weight_decay_rate * w], w <- w - lr u, with
    m_hat = m / (1 - beta_1^t) and v_hat = v / (1 - beta_2^t) at update t (1-based), the
    update `torch.optim.AdamW` makes. Arguments as `AdamWeightDecay` (LayerNorm weights and
    biases excluded from decay by default).

    Example:
        >>> import keras, numpy as np
        >>> w = keras.Variable(np.ones((2,), "float32"), name="kernel")
        >>> opt = AdamW(learning_rate=0.1, weight_decay_rate=0.0)
        >>> opt.apply([np.array([0.5, -0.25], "float32")], [w])  # first step: about lr * sign(g)
        >>> np.round(w.numpy(), 4)
        array([0.9, 1.1], dtype=float32)
    """

    def _bias_corrections(self, dtype):
        t = tf.cast(self.iterations + 1, dtype)
        return 1.0 / (1.0 - tf.pow(tf.cast(self.beta_1, dtype), t)), 1.0 / (
            1.0 - tf.pow(tf.cast(self.beta_2, dtype), t)
        )


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(AdamWeightDecay):
    """The original `LAMBOptimizer`: AdamWeightDecay's update scaled by an unclipped trust ratio.

    Args:
        exclude_from_layer_adaptation: regexes; matching variables use trust ratio 1. None (the
            original's default) means the same list as `exclude_from_weight_decay`.
        stacked_axes: {regex: k} for variables that stack per-layer weights on their first k
            axes; their trust ratio is computed per slice (norms over the remaining axes).
        Other arguments as `AdamWeightDecay`.

    Example:
        >>> opt = Lamb(learning_rate=0.00176, stacked_axes={"encoder/": 2})
        >>> opt.get_config()["weight_decay_rate"]
        0.01
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUSIONS,
        exclude_from_layer_adaptation=None,
        stacked_axes=None,
        name=None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay_rate=weight_decay_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            exclude_from_weight_decay=exclude_from_weight_decay,
            name=name,
            **kwargs,
        )
        self.exclude_from_layer_adaptation_patterns = (
            None if exclude_from_layer_adaptation is None else tuple(exclude_from_layer_adaptation)
        )
        self._adaptation_regex = _compile(
            self.exclude_from_weight_decay_patterns
            if exclude_from_layer_adaptation is None
            else exclude_from_layer_adaptation,
            "exclude_from_layer_adaptation",
        )
        self.stacked_axes = dict(stacked_axes or {})
        for pattern, axes in self.stacked_axes.items():
            _compile([pattern], "stacked_axes")
            if not isinstance(axes, int) or axes < 0:
                raise ValueError(f"stacked_axes[{pattern!r}] must be an integer >= 0, got {axes!r}")

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adapted = {
            self._var_key(v) for v in var_list if self._matches_none(self._adaptation_regex, v)
        }
        self._leading_axes = {}
        for v in var_list:
            path = _variable_path(v)
            for pattern, axes in self.stacked_axes.items():
                if re.search(pattern, path) and len(v.shape) > axes:
                    self._leading_axes[self._var_key(v)] = axes
                    break

    def uses_layer_adaptation(self, variable):
        """Whether `variable` (already passed to `build`) gets a trust ratio other than 1."""
        return self._var_key(variable) in self._adapted

    def update_step(self, gradient, variable, learning_rate):
        lr = tf.cast(learning_rate, variable.dtype)
        update = self._direction(gradient, variable)
        if self.uses_layer_adaptation(variable):
            leading = self._leading_axes.get(self._var_key(variable), 0)
            axes = list(range(leading, len(variable.shape)))
            w_norm = tf.sqrt(
                tf.reduce_sum(tf.square(tf.convert_to_tensor(variable)), axis=axes, keepdims=True)
            )
            u_norm = tf.sqrt(tf.reduce_sum(tf.square(update), axis=axes, keepdims=True))
            ratio = tf.where(
                w_norm > 0.0, tf.where(u_norm > 0.0, w_norm / tf.maximum(u_norm, 1e-37), 1.0), 1.0
            )
            update = ratio * update
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.update(
            exclude_from_layer_adaptation=(
                None
                if self.exclude_from_layer_adaptation_patterns is None
                else list(self.exclude_from_layer_adaptation_patterns)
            ),
            stacked_axes=dict(self.stacked_axes),
        )
        return config


def create_optimizer(
    name,
    learning_rate,
    weight_decay_rate=0.01,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    exclude_from_weight_decay=DEFAULT_EXCLUSIONS,
    stacked_axes=None,
    **kwargs,
):
    """An optimizer by name, with the original's constants: "adamw" (bias-corrected `AdamW`),
    "adamw_original" (the original's `AdamWeightDecay`, no bias correction) or "lamb" (the
    original's `Lamb`).

    >>> create_optimizer("adamw", 1e-4).__class__.__name__
    'AdamW'
    >>> create_optimizer("adamw_original", 1e-4).__class__.__name__
    'AdamWeightDecay'

    Other keyword arguments (`global_clipnorm`, ...) go to the Keras optimizer base class.
    """
    common = dict(
        learning_rate=learning_rate,
        weight_decay_rate=weight_decay_rate,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay,
        **kwargs,
    )
    if name == "lamb":
        return Lamb(stacked_axes=stacked_axes, **common)
    if name == "adamw":
        return AdamW(**common)
    if name == "adamw_original":
        return AdamWeightDecay(**common)
    raise ValueError(f"Unknown optimizer {name!r}: expected one of {', '.join(OPTIMIZERS)}")
