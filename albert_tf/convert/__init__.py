"""Checkpoint conversion: the original TF1 ALBERT, Hugging Face ALBERT and keras-hub presets, to
and from albert_tf.

>>> from albert_tf.convert import from_original, from_huggingface, to_huggingface
>>> pretrainer = from_original("albert_base/model.ckpt-best")  # doctest: +SKIP
>>> to_huggingface(pretrainer, "albert_base_hf/")  # doctest: +SKIP
>>> from_huggingface("albert_base_hf/").backbone  # doctest: +SKIP

Fine-tuned Hugging Face heads (AlbertForSequenceClassification, AlbertForTokenClassification,
AlbertForQuestionAnswering, AlbertForMultipleChoice):

>>> from albert_tf.convert import head_model_from_huggingface, head_model_to_huggingface
>>> classifier = head_model_from_huggingface("albert_mnli_hf/")  # doctest: +SKIP
>>> head_model_to_huggingface(classifier, "albert_mnli_hf_again/")  # doctest: +SKIP

Fine-tuned original SQuAD checkpoints (run_squad_v1.py, run_squad_v2.py):

>>> from albert_tf.convert import head_model_from_original, head_model_to_original
>>> squad_v2 = head_model_from_original("squad2_out/model.ckpt-best")  # doctest: +SKIP
>>> head_model_to_original(squad_v2, "squad2_again/")  # doctest: +SKIP

keras-hub presets (AlbertBackbone, AlbertMaskedLM, AlbertTextClassifier; keras_hub is never
imported):

>>> from albert_tf.convert import from_keras_hub, to_keras_hub
>>> classifier = from_keras_hub("albert_classifier_preset/")  # doctest: +SKIP
>>> to_keras_hub(classifier, "albert_classifier_again/")  # doctest: +SKIP

Each converter is a flat table of (source name -> our variable, transform) in
`albert_tf.convert.names`; `albert_tf.convert.weights` applies a table with full checks.
"""

from albert_tf._lazy import lazy_attributes

# Imported lazily, so that scripts can read the format names without loading TensorFlow.
_EXPORTS = {
    "from_original": "albert_tf.convert.original",
    "to_original": "albert_tf.convert.original",
    "head_model_from_original": "albert_tf.convert.original",
    "head_model_to_original": "albert_tf.convert.original",
    "from_huggingface": "albert_tf.convert.huggingface",
    "to_huggingface": "albert_tf.convert.huggingface",
    "head_model_from_huggingface": "albert_tf.convert.huggingface",
    "head_model_to_huggingface": "albert_tf.convert.huggingface",
    "from_keras_hub": "albert_tf.convert.keras_hub",
    "to_keras_hub": "albert_tf.convert.keras_hub",
    "from_tfhub": "albert_tf.convert.tfhub",
    "ConversionError": "albert_tf.convert.weights",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
