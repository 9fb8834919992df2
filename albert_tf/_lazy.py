"""Attributes of a package imported on first access: its submodules and re-exported names.

`import albert_tf` stays independent of what a user reaches for later: `albert_tf.convert.
from_huggingface`, `albert_tf.data.corpora.iter_documents` and the like import their module
when first read (worker processes that never touch them never load them).

>>> layers = {"TextTokenizer": "albert_tf.text.preprocessing_layers"}
>>> getattr_, dir_ = lazy_attributes("albert_tf.text", layers)
>>> getattr_("normalize").__name__
'albert_tf.text.normalize'
"""

import importlib
import importlib.util


def lazy_attributes(package, exports=None):
    """(`__getattr__`, `__dir__`) for `package`: the names of `exports` ({name: module}) and
    the package's submodules, each imported on first access."""
    exports = dict(exports or {})

    def __getattr__(name):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(importlib.import_module(package).__dict__) | set(exports))

    return __getattr__, __dir__
