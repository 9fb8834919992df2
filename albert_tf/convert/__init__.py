"""Checkpoint conversion: the original TF1 ALBERT and Hugging Face ALBERT, to and from albert_tf.

>>> from albert_tf.convert import from_original, from_huggingface, to_huggingface
>>> pretrainer = from_original("albert_base/model.ckpt-best")  # doctest: +SKIP
>>> to_huggingface(pretrainer, "albert_base_hf/")  # doctest: +SKIP
>>> from_huggingface("albert_base_hf/").backbone  # doctest: +SKIP

Fine-tuned Hugging Face heads (AlbertForSequenceClassification, AlbertForTokenClassification):

>>> from albert_tf.convert import head_model_from_huggingface, head_model_to_huggingface
>>> classifier = head_model_from_huggingface("albert_mnli_hf/")  # doctest: +SKIP
>>> head_model_to_huggingface(classifier, "albert_mnli_hf_again/")  # doctest: +SKIP

Each converter is a flat table of (source name -> our variable, transform) in
`albert_tf.convert.names`; `albert_tf.convert.weights` applies a table with full checks.
"""
# Imported lazily, so that scripts can read the format names without loading TensorFlow.
_EXPORTS = {
    "from_original": "albert_tf.convert.original",
    "to_original": "albert_tf.convert.original",
    "from_huggingface": "albert_tf.convert.huggingface",
    "to_huggingface": "albert_tf.convert.huggingface",
    "head_model_from_huggingface": "albert_tf.convert.huggingface",
    "head_model_to_huggingface": "albert_tf.convert.huggingface",
    "ConversionError": "albert_tf.convert.weights",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'albert_tf.convert' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
