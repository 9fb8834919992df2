"""albert_tf.metrics: task scores in plain Python and NumPy, independent of TensorFlow.

- `glue_metrics`: accuracy, F1, Matthews and Pearson/Spearman correlation, as GLUE defines them.
- `entity_metrics`: entity precision/recall/F1 of IOB2 tags, as CoNLL's conlleval defines them.
- `squad_metrics`: SQuAD exact match and F1, as the official v1.1 and v2.0 scripts define them.
"""

from albert_tf._lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__)
