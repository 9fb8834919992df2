"""albert_tf.optim: AdamW, the original ALBERT optimizers (LAMB, AdamWeightDecay) and schedule.

>>> from albert_tf.optim import create_optimizer, WarmupPolynomialDecay
>>> schedule = WarmupPolynomialDecay(0.00176, decay_steps=125000, warmup_steps=3125)
>>> optimizer = create_optimizer("lamb", schedule)
"""

from albert_tf._lazy import lazy_attributes

# Imported on first use, so that `albert_tf.optim.names` (the --optimizer choices) loads without
# TensorFlow.
_EXPORTS = {
    "AdamW": "albert_tf.optim.optimizers",
    "AdamWeightDecay": "albert_tf.optim.optimizers",
    "DEFAULT_EXCLUSIONS": "albert_tf.optim.optimizers",
    "Lamb": "albert_tf.optim.optimizers",
    "OPTIMIZERS": "albert_tf.optim.names",
    "WarmupPolynomialDecay": "albert_tf.optim.schedules",
    "clip_by_global_norm": "albert_tf.optim.clipping",
    "create_optimizer": "albert_tf.optim.optimizers",
    "global_norm": "albert_tf.optim.clipping",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
