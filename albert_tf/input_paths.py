"""The input files and directories that flags name, checked before TensorFlow loads.

A missing input is then a one-line error naming its flag within a second of start-up, not after
TensorFlow's import. Local paths are checked with `os` and `glob`; gs:// and other URLs through
`tf.io.gfile` (imported for them). `gfile_for(path)` is the module of those functions for a path.

>>> check_exists("init_checkpoint", "no/such/model")
Traceback (most recent call last):
...
albert_tf.settings.InvalidFlagError: --init_checkpoint='no/such/model': not found
>>> check_matches("input_file", "builtin:docstrings", corpus=True)  # names no file
"""

import glob
import os
import sys
import types

from albert_tf.settings import InvalidFlagError


def _glob(pattern):
    # tf.io.gfile.glob matches names starting with a dot too; Python's glob does from 3.11.
    if sys.version_info >= (3, 11):
        return glob.glob(pattern, include_hidden=True)
    return glob.glob(pattern)


_LOCAL = types.SimpleNamespace(
    exists=os.path.exists, isdir=os.path.isdir, listdir=os.listdir, glob=_glob
)


def gfile_for(path):
    """`tf.io.gfile` for a URL (gs://...), else the same `exists`, `isdir`, `listdir` and `glob`
    done with `os` and `glob`, without loading TensorFlow."""
    if "://" not in path:
        return _LOCAL
    import tensorflow as tf

    return tf.io.gfile


def check_exists(flag, path, checkpoint=False):
    """Raises InvalidFlagError naming --`flag` unless `path` exists (or, with `checkpoint`, is a
    TensorFlow checkpoint prefix: PATH.index exists)."""
    gfile = gfile_for(path)
    if not gfile.exists(path) and not (checkpoint and gfile.exists(path + ".index")):
        raise InvalidFlagError(f"--{flag}={path!r}: not found")


def check_matches(flag, spec, corpus=False):
    """Raises InvalidFlagError naming --`flag` unless each item of the comma list `spec` (a file,
    directory or glob) matches something. With `corpus` (an `albert_tf.data.corpora` spec),
    "tfds:" and "builtin:" items name no file and are not checked."""
    for pattern in [s.strip() for s in spec.split(",") if s.strip()]:
        if corpus and pattern.startswith(("tfds:", "builtin:")):
            continue
        if not gfile_for(pattern).glob(pattern):
            raise InvalidFlagError(f"--{flag}: no file matches {pattern!r}")


def check_fields(settings, flags, checkpoints=()):
    """`check_exists` for each field of `settings` named in `flags` that is set (those named in
    `checkpoints` may be checkpoint prefixes)."""
    for flag in flags:
        path = getattr(settings, flag, None)
        if path:
            check_exists(flag, path, checkpoint=flag in checkpoints)
