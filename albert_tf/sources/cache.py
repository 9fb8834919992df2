"""The cache of models fetched by name: where entries live, how they are verified and locked.

The cache lives in `ALBERT_TF_HOME`, else `$XDG_CACHE_HOME/albert_tf`, else
`~/.cache/albert_tf`. One entry per source:

    releases/albert_base_v2/       a released archive (also what its TF Hub handle names)
    huggingface/<org>--<repo>/<commit>/
    addresses/<name>-<sha256 of the address>/
    locks/                         one lock file per entry

An entry holds `model/` (an albert_tf model directory: config.json, pretrainer.weights.h5 or a
fine-tuned model.keras, spm.model, text.json) and `source.json` (where it came from, the
download's sha256 and size, and the sha256 and size of every file of `model/`). An entry is
built under a hidden staging name beside it and renamed into place only when it is whole: a
killed download or conversion never leaves a half-built entry under the real name. A load
checks every file of `model/` against `source.json`; a changed or missing file makes the entry
invalid, and it is fetched again (offline: an error naming the file).

Two processes asking for the same entry at once (two workers of one job) take its lock in turn:
the first builds it, the second finds it built.

>>> import os, tempfile
>>> os.environ[HOME_ENV] = tempfile.mkdtemp()
>>> entry = Entry("releases", "albert_base_v2")
>>> entry.path == os.path.join(os.environ[HOME_ENV], "releases", "albert_base_v2")
True
>>> entry.problem()
'not in the cache'
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time

from absl import logging

from albert_tf import files

HOME_ENV = "ALBERT_TF_HOME"
OFFLINE_ENV = "ALBERT_TF_OFFLINE"
MODEL_DIR = "model"
RECORD_FILE = "source.json"
_TRUE = ("1", "true", "yes", "on")


def home():
    """The cache directory (see the module docstring)."""
    if os.environ.get(HOME_ENV):
        return os.path.abspath(os.path.expanduser(os.environ[HOME_ENV]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "albert_tf")


def offline():
    """Whether ALBERT_TF_OFFLINE forbids every connection."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE


def file_sha256(path):
    """(sha256 hex, size) of a local file, read in 1 MiB blocks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _manifest(model_dir):
    """{relative path: {"sha256", "size"}} of every file under `model_dir`."""
    manifest = {}
    for root, _, names in os.walk(model_dir):
        for name in sorted(names):
            path = os.path.join(root, name)
            sha256, size = file_sha256(path)
            manifest[os.path.relpath(path, model_dir)] = {"sha256": sha256, "size": size}
    return manifest


class Entry:
    """One cache entry, `home()/kind/key` (see the module docstring)."""

    def __init__(self, kind, key):
        self.kind, self.key = kind, key
        self.path = os.path.join(home(), kind, *key.split("/"))

    @property
    def model_dir(self):
        return os.path.join(self.path, MODEL_DIR)

    @property
    def record_file(self):
        return os.path.join(self.path, RECORD_FILE)

    def record(self):
        """The entry's source.json, or None when it has none (or an unreadable one)."""
        try:
            with open(self.record_file, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def problem(self):
        """None when the entry is whole and unchanged, else what is wrong with it (a phrase
        naming the file)."""
        record = self.record()
        if record is None:
            return "not in the cache"
        for name, expected in sorted(record.get("files", {}).items()):
            path = os.path.join(self.model_dir, name)
            if not os.path.isfile(path):
                return f"{path} is missing"
            if os.path.getsize(path) != expected["size"]:
                return (
                    f"{path} changed: {os.path.getsize(path)} bytes, {expected['size']} when "
                    "downloaded"
                )
            if file_sha256(path)[0] != expected["sha256"]:
                return f"{path} changed: its sha256 differs from the one recorded at download"
        if not record.get("files"):
            return f"{self.record_file} lists no files"
        return None

    @contextlib.contextmanager
    def lock(self, what):
        """Holds the entry's lock (another process building it is waited for, with a log line
        naming `what`)."""
        locks = os.path.join(home(), "locks")
        os.makedirs(locks, exist_ok=True)
        path = os.path.join(locks, f"{self.kind}-{self.key.replace('/', '-')}.lock")
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logging.info("Waiting for another process fetching %s (lock %s)", what, path)
                start = time.monotonic()
                fcntl.flock(handle, fcntl.LOCK_EX)
                logging.info("The other process finished after %.0f s", time.monotonic() - start)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def build(self, fill, record):
        """Builds the entry whole: `fill(staging)` writes `staging/model/` (and may return
        more record fields), then source.json (`record` plus the files' sha256 and size) is
        written and the staging directory renamed into place, replacing an invalid entry."""
        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        files.remove_stale_temporaries(self.path)
        staging = files.temporary_path(self.path)
        os.makedirs(staging)
        try:
            record = {**record, **(fill(staging) or {})}
            record["files"] = _manifest(os.path.join(staging, MODEL_DIR))
            record["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with open(os.path.join(staging, RECORD_FILE), "w", encoding="utf-8") as f:
                json.dump(record, f, indent=2, sort_keys=True)
                f.write("\n")
            if os.path.exists(self.path):
                aside = files.temporary_path(self.path)
                os.rename(self.path, aside)
                shutil.rmtree(aside, ignore_errors=True)
            os.rename(staging, self.path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return record
