"""Import-time environment checks: Keras on the TensorFlow backend, matching TF / TF-Text minors."""
import os
from importlib import metadata



def _minor(version):
    return ".".join(version.split(".")[:2])


def check_versions():
    """Raises ImportError when tensorflow and tensorflow-text minor versions differ."""
    try:
        tf_version = metadata.version("tensorflow")
    except metadata.PackageNotFoundError:
        try:
            tf_version = metadata.version("tensorflow-tpu")
        except metadata.PackageNotFoundError:
            tf_version = metadata.version("tensorflow-cpu")
    try:
        text_version = metadata.version("tensorflow-text")
    except metadata.PackageNotFoundError:
        return  # the text and export layers import tensorflow_text and fail there with its own error
    if _minor(tf_version) != _minor(text_version):
        raise ImportError(
            f"albert_tf needs tensorflow and tensorflow-text of the same minor version, found "
            f"tensorflow {tf_version} and tensorflow-text {text_version}: "
            f"pip install 'tensorflow-text=={_minor(tf_version)}.*'")


def _configured_backend():
    """The backend Keras will use, read the way Keras reads it, without importing Keras."""
    import json
    import sys

    if "keras" in sys.modules:
        return sys.modules["keras"].backend.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as f:
            return json.load(f).get("backend", "tensorflow")
    except (OSError, ValueError):
        return "tensorflow"


def check_backend():
    """Raises ImportError unless Keras runs (or will run) on the TensorFlow backend."""
    backend = _configured_backend()
    if backend != "tensorflow":
        raise ImportError(
            f"albert_tf needs Keras on the TensorFlow backend, but Keras is using {backend!r} "
            f"(from KERAS_BACKEND={os.environ.get('KERAS_BACKEND')!r} or ~/.keras/keras.json). "
            "Set KERAS_BACKEND=tensorflow before importing keras.")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
