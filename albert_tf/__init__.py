"""albert_tf: ALBERT (A Lite BERT, arXiv 1909.11942) for TensorFlow 2 and Keras 3.

>>> import albert_tf
>>> config = albert_tf.AlbertConfig.from_preset("albert_tiny")
>>> model = albert_tf.AlbertModel(config)
"""

from albert_tf import _env
from albert_tf._lazy import lazy_attributes

_env.check_versions()
_env.check_backend()

__version__ = "0.1.0"

# Modules that register Keras-serializable classes ("albert_tf>AlbertClassifier", ...). They are
# imported with the package, so `keras.saving.load_model` finds every saved albert_tf model after
# a bare `import albert_tf`. With ALBERT_TF_LIGHT_IMPORT=1 they are not, and with them TensorFlow:
# worker processes that never build a model (pretraining-data creation) set it, and so do the
# scripts, which call `register_serializable_classes()` once their flags and input files are
# checked (albert_tf/cli.py). TensorFlow's C++ start-up log is filtered wherever it then loads.
SERIALIZABLE_MODULES = (
    "albert_tf.layers.embedding",
    "albert_tf.layers.encoder",
    "albert_tf.layers.heads",
    "albert_tf.models.backbone",
    "albert_tf.models.pretrainer",
    "albert_tf.models.classifier",
    "albert_tf.models.token_classifier",
    "albert_tf.models.question_answering",
    "albert_tf.models.multiple_choice",
    "albert_tf.models.preprocessor",
    "albert_tf.optim.optimizers",
    "albert_tf.optim.schedules",
    "albert_tf.text.preprocessing_layers",
)
LIGHT_IMPORT_ENV = "ALBERT_TF_LIGHT_IMPORT"

# Public names, imported on first use.
_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "list_presets": "albert_tf.config",
    "AlbertModel": "albert_tf.models.backbone",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "AlbertClassifier": "albert_tf.models.classifier",
    "AlbertPreprocessor": "albert_tf.models.preprocessor",
    "load": "albert_tf.sources",
    "save": "albert_tf.models.model_dir",
}


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)


def register_serializable_classes():
    """Imports the modules of `SERIALIZABLE_MODULES`, and TensorFlow with them: what `import
    albert_tf` does unless ALBERT_TF_LIGHT_IMPORT=1."""
    import importlib

    with _env.startup_log_filter():  # TensorFlow loads here
        for module in SERIALIZABLE_MODULES:
            importlib.import_module(module)
    # Models given by name (from_pretrained("albert_base_v2")) are fetched by albert_tf.sources,
    # which the models package cannot import (sources converts through it).
    from albert_tf import sources
    from albert_tf.models import model_dir

    model_dir.set_name_resolver(sources.model_directory)


def _import():
    import os

    if os.environ.get(LIGHT_IMPORT_ENV) == "1":
        _env.filter_startup_log_on_import()
    else:
        register_serializable_classes()


_import()
