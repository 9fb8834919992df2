"""File helpers shared by the package: JSON reading with clear errors, atomic writes (gfile, so gs:// works)."""
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


def write_atomic(path, data):
    """Writes bytes or text to `path` through a temporary file and a rename."""
    import tensorflow as tf

    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with tf.io.gfile.GFile(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_json(path, values):
    """Writes `values` as indented, key-sorted JSON, atomically."""
    write_atomic(path, json.dumps(values, indent=2, sort_keys=True) + "\n")
