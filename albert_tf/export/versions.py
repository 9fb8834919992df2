"""Versioned model directories as TF Serving expects them: EXPORT_DIR/<integer version>/.

A new version is one more than the highest existing integer directory (1 for an empty base).
It is written completely into a hidden temporary sibling (`albert_tf.files.temporary_path`) and
renamed into place at the end, so a server polling EXPORT_DIR never sees a half-written version,
and an existing version is never overwritten. The staging directory a killed export left is
removed when that version is exported again.

On an object store (gs://) a directory rename is a copy and a delete per object, so a kill
during it leaves part of the version: the objects move one at a time with saved_model.pb last,
so a version directory is complete exactly when it holds saved_model.pb (a server fails to load
one without it, and keeps the version it serves). The next export without --version removes
such version directories first, and takes the number again.

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


SAVED_MODEL_FILE = "saved_model.pb"


def _remove_incomplete(base_dir):
    """Object stores: deletes the version directories without saved_model.pb (a killed
    publish's part, see the module docstring)."""
    if "://" not in base_dir:
        return
    for version in list_versions(base_dir):
        path = os.path.join(base_dir, str(version))
        if not tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
            logging.info(
                "Removing %s: an interrupted export left it without %s", path, SAVED_MODEL_FILE
            )
            tf.io.gfile.rmtree(path)


def move_into_place(tmp, target):
    """Renames the finished staging directory `tmp` to `target` (which must not exist); on an
    object store file by file, each saved_model.pb after the other files and, of those, the
    last in path order last."""
    if "://" not in target:
        tf.io.gfile.rename(tmp, target)
        return
    relative = []
    for root, _, names in tf.io.gfile.walk(tmp):
        folder = root[len(tmp) :].strip("/")
        relative += [f"{folder}/{name}" if folder else name for name in names]
    for name in sorted(relative, key=lambda name: (name.split("/")[-1] == SAVED_MODEL_FILE, name)):
        tf.io.gfile.rename(f"{tmp}/{name}", f"{target}/{name}")
    tf.io.gfile.rmtree(tmp)


def _exists(base_dir, version):
    """Whether base_dir/<version> exists, by a listing: gs:// caches stat results for seconds
    (GCS_STAT_CACHE_MAX_AGE), so `exists` can still see a directory just removed."""
    return tf.io.gfile.isdir(base_dir) and str(version) in {
        name.rstrip("/") for name in tf.io.gfile.listdir(base_dir)
    }


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
        _remove_incomplete(base_dir)
        version = next_version(base_dir)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version must be a positive integer, got {version!r}")
    target = os.path.join(base_dir, str(version))
    if _exists(base_dir, version):
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
        if _exists(base_dir, version):
            raise FileExistsError(
                f"{target} appeared while exporting; not overwriting it "
                f"(the export is left in {tmp})"
            )
        move_into_place(tmp, target)
    except FileExistsError:
        raise
    except BaseException:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)
        raise
    logging.info("Published version %d: %s", version, target)
