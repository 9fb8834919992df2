"""Checkpoint conversion: the original TF1 ALBERT and Hugging Face ALBERT, to and from albert_tf.

>>> from albert_tf.convert import from_original, from_huggingface, to_huggingface
>>> pretrainer = from_original("albert_base/model.ckpt-best")  # doctest: +SKIP
>>> to_huggingface(pretrainer, "albert_base_hf/")  # doctest: +SKIP
>>> from_huggingface("albert_base_hf/").backbone  # doctest: +SKIP

Each converter is a flat table of (source name -> our variable, transform) in
`albert_tf.convert.names`; `albert_tf.convert.weights` applies a table with full checks.
"""
from albert_tf.convert.huggingface import from_huggingface, to_huggingface
from albert_tf.convert.original import from_original, to_original
from albert_tf.convert.weights import ConversionError

__all__ = ["from_original", "to_original", "from_huggingface", "to_huggingface", "ConversionError"]
