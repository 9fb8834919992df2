"""albert_tf.models: keras.Model classes and model directories.

- `backbone.AlbertModel`: the ALBERT backbone.
- `pretrainer.AlbertPretrainer`: backbone + masked-LM and sentence-order heads.
- `io.save` / `io.load` / `io.load_backbone`: model directories (config.json + weights).
"""

from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
