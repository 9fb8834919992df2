"""albert_tf.optim: AdamW, the original ALBERT optimizers (LAMB, AdamWeightDecay) and schedule.

>>> from albert_tf.optim import create_optimizer, WarmupPolynomialDecay
>>> schedule = WarmupPolynomialDecay(0.00176, decay_steps=125000, warmup_steps=3125)
>>> optimizer = create_optimizer("lamb", schedule)
"""

from albert_tf.optim.clipping import clip_by_global_norm, global_norm
from albert_tf.optim.optimizers import (
    DEFAULT_EXCLUSIONS,
    OPTIMIZERS,
    AdamW,
    AdamWeightDecay,
    Lamb,
    create_optimizer,
)
from albert_tf.optim.schedules import WarmupPolynomialDecay

__all__ = [
    "AdamW",
    "AdamWeightDecay",
    "DEFAULT_EXCLUSIONS",
    "Lamb",
    "OPTIMIZERS",
    "WarmupPolynomialDecay",
    "clip_by_global_norm",
    "create_optimizer",
    "global_norm",
]
from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
