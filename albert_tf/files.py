"""File helpers shared by the package: JSON reading with clear errors, atomic writes (gfile, so
gs:// works).

Every atomic writer stages its output under `temporary_path(target)`: a hidden name
(`.tmp-<name>-<pid>-<random>`) in the target's directory, which no glob of outputs such as
`train-*` or `*.tfrecord` matches, then renames it into place. A killed run leaves such a file
behind; `remove_stale_temporaries(target)` deletes those of a target before it is written again
(`save_atomic` and `write_atomic` do), except those of a process still running on this host.

>>> temporary_path("/data/train-00000-of-00004.tfrecord").startswith(
...     "/data/.tmp-train-00000-of-00004.tfrecord-")
True
"""

import contextlib
import json
import os
import re
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


def _in_use(staging, rest):
    """Whether `staging` (named `.tmp-<name>-` + `rest`) belongs to another process still
    running on this host: `rest` starts with its pid. Remote paths, and names of this process's
    pid (an earlier process that had it, in a restarted container), count as left over."""
    match = re.match(r"(\d+)-[0-9a-f]{8}", rest)
    if "://" in staging or not match or int(match.group(1)) == os.getpid():
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(path):
    """Deletes the staging files (or directories) that earlier, killed writers of `path` left;
    returns how many. Those of a process still running on this host are left alone."""
    import tensorflow as tf

    parent, name = _split(path)
    pattern = f"{parent}{TEMPORARY_PREFIX}{name}-*"
    stale = tf.io.gfile.glob(pattern) if tf.io.gfile.exists(parent or ".") else []
    prefix = f"{TEMPORARY_PREFIX}{name}-"
    stale = [
        leftover
        for leftover in stale
        if not _in_use(leftover, leftover.rstrip("/").rsplit("/", 1)[-1][len(prefix) :])
    ]
    for leftover in stale:
        if tf.io.gfile.isdir(leftover):
            tf.io.gfile.rmtree(leftover)
        else:
            tf.io.gfile.remove(leftover)
    return len(stale)


def save_atomic(path, save, suffix=""):
    """Calls `save(staging path)` and renames the result to `path`. The staging path ends with
    `suffix`, for writers that check the extension (Keras: ".keras", ".weights.h5").

    What killed writers of `path` staged is removed first; on an exception (a full disk, say)
    the staging file is removed too, so nothing half-written stays behind.
    """
    import tensorflow as tf

    remove_stale_temporaries(path)
    tmp = temporary_path(path) + suffix
    try:
        save(tmp)
        tf.io.gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        with contextlib.suppress(Exception):
            if tf.io.gfile.exists(tmp):
                tf.io.gfile.remove(tmp)
        raise


def write_atomic(path, data):
    """Writes bytes or text to `path` through a hidden temporary file and a rename."""
    import tensorflow as tf

    def write(tmp):
        with tf.io.gfile.GFile(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)

    save_atomic(path, write)


def write_json(path, values):
    """Writes `values` as indented, key-sorted JSON, atomically."""
    write_atomic(path, json.dumps(values, indent=2, sort_keys=True) + "\n")


_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange_paths(first, second):
    """Swaps two local paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where
    the system or file system cannot, and then nothing has changed."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_cwd = -100  # AT_FDCWD
    result = renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), _RENAME_EXCHANGE)
    return result == 0
