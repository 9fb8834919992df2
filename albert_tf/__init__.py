"""albert_tf: ALBERT (A Lite BERT, arXiv 1909.11942) for TensorFlow 2 and Keras 3.

>>> import albert_tf
>>> config = albert_tf.AlbertConfig.from_preset("albert_tiny")
>>> model = albert_tf.AlbertModel(config)
"""
from albert_tf import _env

_env.check_versions()
_env.check_backend()

__version__ = "0.1.0"

# Public names, imported lazily so that `import albert_tf` stays cheap.
_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "list_presets": "albert_tf.config",
    "AlbertModel": "albert_tf.models.backbone",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "AlbertClassifier": "albert_tf.models.classifier",
    "AlbertPreprocessor": "albert_tf.models.preprocessor",
    "load": "albert_tf.models.io",
    "save": "albert_tf.models.io",
}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
