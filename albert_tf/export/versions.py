"""Versioned model directories as TF Serving expects them: EXPORT_DIR/<integer version>/.

A new version is one more than the highest existing integer directory (1 for an empty base).
It is written completely into a hidden temporary sibling (`albert_tf.files.temporary_path`) and
renamed into place at the end, so a server polling EXPORT_DIR never sees a half-written version,
and an existing version is never overwritten. The staging directory a killed export left is
removed when that version is exported again.

>>> import tempfile
>>> base = tempfile.mkdtemp()
>>> with publish_version(base) as (tmp_dir, version):
...     open(f"{tmp_dir}/saved_model.pb", "w").close()
>>> version, list_versions(base)
(1, [1])
"""

import contextlib
import os

import tensorflow as tf
from absl import logging

from albert_tf import files


def list_versions(base_dir):
    """Sorted integer versions present in `base_dir` (missing directory: [])."""
    if not tf.io.gfile.isdir(base_dir):
        return []
    versions = []
    for name in tf.io.gfile.listdir(base_dir):
        name = name.rstrip("/")
        if name.isdigit() and tf.io.gfile.isdir(os.path.join(base_dir, name)):
            versions.append(int(name))
    return sorted(versions)


def next_version(base_dir):
    versions = list_versions(base_dir)
    return versions[-1] + 1 if versions else 1


@contextlib.contextmanager
def publish_version(base_dir, version=None):
    """Yields (temporary directory, version); on success renames it to base_dir/<version>.

    Raises FileExistsError if `version` is given and already exists. On an exception inside the
    block the temporary directory is removed and nothing is published.
    """
    if version is None:
        version = next_version(base_dir)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version must be a positive integer, got {version!r}")
    target = os.path.join(base_dir, str(version))
    if tf.io.gfile.exists(target):
        raise FileExistsError(
            f"{target} already exists; versions are never overwritten "
            f"(existing: {list_versions(base_dir)})"
        )
    tf.io.gfile.makedirs(base_dir)
    if files.remove_stale_temporaries(target):
        logging.info(
            "Removed the staging directory of an interrupted export of version %d", version
        )
    tmp = files.temporary_path(target)
    tf.io.gfile.makedirs(tmp)
    try:
        yield tmp, version
        if tf.io.gfile.exists(target):
            raise FileExistsError(
                f"{target} appeared while exporting; not overwriting it "
                f"(the export is left in {tmp})"
            )
        tf.io.gfile.rename(tmp, target)
    except FileExistsError:
        raise
    except BaseException:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)
        raise
    logging.info("Published version %d: %s", version, target)
