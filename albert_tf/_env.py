"""Import-time environment checks: Keras on the TensorFlow backend, matching TF / TF-Text minors;
TF_CPP_MIN_LOG_LEVEL applied to the C++ log lines TensorFlow writes while it loads."""

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
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
        return  # text and export layers import tensorflow_text and fail there with its own error
    if _minor(tf_version) != _minor(text_version):
        raise ImportError(
            f"albert_tf needs tensorflow and tensorflow-text of the same minor version, found "
            f"tensorflow {tf_version} and tensorflow-text {text_version}: "
            f"pip install 'tensorflow-text=={_minor(tf_version)}.*'"
        )


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
            "Set KERAS_BACKEND=tensorflow before importing keras."
        )
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


# An absl C++ log line ("I0000 00:00:1795525286.504509   22477 port.cc:153] oneDNN ..."): its
# severity letter, in TF_CPP_MIN_LOG_LEVEL's order (0 shows all, 3 hides I, W and E).
_CPP_LOG_LINE = re.compile(rb"^([IWEF])\d{4} [\d:.]+ +\d+ [^\s\]]+:\d+\] ")
_CPP_LOG_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called"


def _hidden(line, level):
    match = _CPP_LOG_LINE.match(line)
    if match:
        return b"IWEF".index(match.group(1)) < level
    return line.startswith(_CPP_LOG_BANNER)


@contextlib.contextmanager
def startup_log_filter():
    """Hides the C++ log lines below TF_CPP_MIN_LOG_LEVEL that TensorFlow's libraries write while
    they load, before they read the variable ("oneDNN custom operations are on", "Could not find
    cuda drivers"). Inside the block file descriptor 2 goes to a temporary file; its lines are
    written back to stderr at the end, except those. Does nothing when the level is 0 or unset,
    or when TensorFlow is already loaded.
    """
    if "tensorflow" in sys.modules:
        yield
        return
    with _filtered_fd2():
        yield


@contextlib.contextmanager
def _filtered_fd2():
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
    if not level.isdigit() or int(level) == 0:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                captured.seek(0)
                kept = [line for line in captured if not _hidden(line, int(level))]
                sys.stderr.write(b"".join(kept).decode(errors="replace"))
                sys.stderr.flush()
    finally:
        os.close(saved)


class _FilteredImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `tensorflow` as the other finders do, once, and runs its module inside the start-up
    log filter."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)  # the other finders find it; later imports find it loaded
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        with _filtered_fd2():
            self.loader.exec_module(module)


def filter_startup_log_on_import():
    """Runs TensorFlow's first import, wherever it happens, inside `startup_log_filter` (for a
    process that imported albert_tf without TensorFlow). Does nothing once TensorFlow is loaded.
    """
    if "tensorflow" not in sys.modules:
        sys.meta_path.insert(0, _FilteredImport())
