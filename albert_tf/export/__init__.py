"""albert_tf.export: SavedModels for TF Serving and LiteRT files that take raw text (each module
imported on use).

- `serving_spec`: what a task's `serving_spec` returns and the builders consume.
- `saved_model`: `build` (any `SavedModelSpec`), `export_classifier`, `export_backbone` (and the
  shared float32 copy, versioned writing, description).
- `token_classifier_serving`: `export_token_classifier` (raw text -> entities with character
  offsets).
- `squad_serving`: `export_question_answerer` (question + context -> answer span).
- `multiple_choice_serving`: `export_multiple_choice` (article, question, options -> answer).
- `litert`: `build` (any `LiteRTSpec`), text classifiers' LiteRT graphs; `litert_qa`: SQuAD's;
  `litert_text`, `dense`: their tokenizer and dense-graph pieces; `litert_quiet`: quiet
  conversion.
- `versions`, `warmup`: version directories and TF Serving warmup requests.
- `tfhub`: `export_tfhub`, TF Hub's reusable encoder + preprocessor SavedModels (not for TF
  Serving's version directories).
"""

from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
