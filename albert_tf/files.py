"""File helpers shared by the package: JSON reading with clear errors, atomic writes (gfile, so
gs:// works).

Every atomic writer stages its output under `temporary_path(target)`: a hidden name
(`.tmp-<name>-<pid>-<random>`) in the target's directory, which no glob of outputs such as
`train-*` or `*.tfrecord` matches, then renames it into place. A killed run leaves such a file
behind; `remove_stale_temporaries(target)` deletes those of a target before it is written again.

>>> temporary_path("/data/train-00000-of-00004.tfrecord").startswith(
...     "/data/.tmp-train-00000-of-00004.tfrecord-")
True
"""
import json
import os
import uuid


def read_json(path):
    """The JSON object in `path` (local or gs://), or a ValueError naming the file and line."""
    import tensorflow as tf  # imported on use: worker processes that only write JSON stay light

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"File not found: {path}")
    with tf.io.gfile.GFile(path, "r") as f:
        text = f.read()
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
    return values


TEMPORARY_PREFIX = ".tmp-"


def _split(path):
    path = path.rstrip("/")
    if "/" not in path:
        return "", path
    parent, name = path.rsplit("/", 1)
    return parent + "/", name


def temporary_path(path):
    """A hidden staging name for `path` in the same directory (see the module docstring)."""
    parent, name = _split(path)
    return f"{parent}{TEMPORARY_PREFIX}{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def remove_stale_temporaries(path):
    """Deletes the staging files (or directories) that earlier, killed writers of `path` left;
    returns how many. Call it only where no other process writes `path` at the same time."""
    import tensorflow as tf

    parent, name = _split(path)
    pattern = f"{parent}{TEMPORARY_PREFIX}{name}-*"
    stale = tf.io.gfile.glob(pattern) if tf.io.gfile.exists(parent or ".") else []
    for leftover in stale:
        if tf.io.gfile.isdir(leftover):
            tf.io.gfile.rmtree(leftover)
        else:
            tf.io.gfile.remove(leftover)
    return len(stale)


def write_atomic(path, data):
    """Writes bytes or text to `path` through a hidden temporary file and a rename."""
    import tensorflow as tf

    tmp = temporary_path(path)
    with tf.io.gfile.GFile(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_json(path, values):
    """Writes `values` as indented, key-sorted JSON, atomically."""
    write_atomic(path, json.dumps(values, indent=2, sort_keys=True) + "\n")
