"""albert_tf.export: SavedModels for TF Serving that take raw text (each module imported on use).

- `saved_model`: `export_classifier`, `export_backbone` (and the shared float32 copy, versioned
  writing, description).
- `entities`: `export_token_classifier` (raw text -> entities with character offsets).
- `question_answering`: `export_question_answerer` (question + context -> answer span).
- `multiple_choice`: `export_multiple_choice` (article, question, options -> answer).
- `versions`, `warmup`: version directories and TF Serving warmup requests.
"""

from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
