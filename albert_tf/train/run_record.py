"""The run record (`run.json`): what a run's result depends on, compared before it is resumed.

A runner writes the record into its --output_dir when a run starts, before any checkpoint:

    {"version": 2,
     "model": {...},       the model's config (AlbertConfig fields)
     "settings": {...},    every setting of the run (the runner's params, a task's data settings),
                           with derived values resolved (steps from epochs, the precision policy)
     "data": {...},        fingerprints of what the run reads: data, init checkpoint, vocabulary
     ...}                  runner-specific entries (fine-tuning: "task", "num_classes")

`claim` compares a re-run with the record in the directory before any work is done. Every entry
must be equal except the settings the runner names as `may_differ` (they only choose what an
invocation does or how fast it runs; a difference in them is logged at INFO). On a difference it
raises InvalidFlagError listing the differing entries, old vs new. With `overwrite` it removes
the earlier run's files instead (only the `outputs` the runner names; anything else in the
directory is kept and logged) and records the new run.

Unknown values: a setting missing from the record (added to albert_tf after the run started)
counts as its default, one the re-run leaves out (a value it cannot resolve) is not compared; a
fingerprint that is missing or None on either side (a split one of the two invocations did not
read) is not compared. A record without "settings" (written by albert_tf before version 2:
model, task and class count only), or a directory holding a checkpoint but no record, is
accepted with a warning after comparing what it holds: its other settings cannot be known, and
it is not rewritten to claim the current ones.

>>> import tempfile
>>> out = tempfile.mkdtemp()
>>> record = {"version": VERSION, "settings": {"learning_rate": 1e-3, "verbose": 1}}
>>> claim(out, record, may_differ=("verbose",))
'new'
>>> claim(out, {"version": VERSION, "settings": {"learning_rate": 1e-3, "verbose": 0}},
...       may_differ=("verbose",))
'resumed'
>>> claim(out, {"version": VERSION, "settings": {"learning_rate": 1e-4, "verbose": 1}})
Traceback (most recent call last):
...
albert_tf.settings.InvalidFlagError: ...(learning_rate: 0.001 there vs 0.0001 now): rerun...
"""

import dataclasses
import hashlib
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf.settings import InvalidFlagError

RUN_FILE = "run.json"
VERSION = 2
SHOWN_DIFFERENCES = 6  # differences named in the error; the rest are counted


# ----------------------------------------------------------------------------- building a record
def normalized(values):
    """`values` as JSON gives them back (tuples become lists), so records compare equal."""
    return json.loads(json.dumps(values))


def settings_of(*instances, skip=()):
    """{field: value} of the dataclass `instances` (later ones win), without the `skip` fields.

    >>> @dataclasses.dataclass
    ... class Params:
    ...     output_dir: str = "out"
    ...     labels: tuple = ("a", "b")
    >>> settings_of(Params(), skip=("output_dir",))
    {'labels': ['a', 'b']}
    """
    values = {}
    for instance in instances:
        values.update(dataclasses.asdict(instance))
    return normalized({k: v for k, v in values.items() if k not in skip})


def defaults_of(*classes):
    """{field: default} of the dataclass `classes` (fields without a default are left out)."""
    defaults = {}
    for cls in classes:
        for field in dataclasses.fields(cls):
            if field.default_factory is not dataclasses.MISSING:
                defaults[field.name] = field.default_factory()
            elif field.default is not dataclasses.MISSING:
                defaults[field.name] = field.default
    return normalized(defaults)


def _update(digest, value):
    if value is None:
        digest.update(b"N")
    elif isinstance(value, dict):
        digest.update(f"d{len(value)}".encode())
        for key in sorted(value):
            _update(digest, str(key))
            _update(digest, value[key])
    elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        # Values, not their storage: int32 ids built in memory hash as int64 ids read back.
        kind = "f" if value.dtype.kind == "f" else "i"
        value = np.ascontiguousarray(value, dtype=np.float64 if kind == "f" else np.int64)
        digest.update(f"a{kind}{value.shape}".encode())
        digest.update(value.tobytes())
    elif isinstance(value, np.ndarray) or (
        isinstance(value, (list, tuple)) and all(isinstance(v, (str, bytes)) for v in value)
    ):  # strings (or other objects) by their text, at once
        items = [v if isinstance(v, bytes) else str(v).encode() for v in np.ravel(value)]
        digest.update(f"l{np.shape(value)}".encode())
        digest.update(np.asarray([len(v) for v in items], np.int64).tobytes())
        digest.update(b"".join(items))
    elif isinstance(value, (list, tuple)):
        digest.update(f"n{len(value)}".encode())
        for item in value:
            _update(digest, item)
    else:
        text = value if isinstance(value, bytes) else str(value).encode()
        digest.update(f"s{len(text)}:".encode() + text)


def digest(values):
    """A sha256 hex digest of nested dicts of arrays, lists of strings and scalars: of their
    values and shapes (integers of any width and booleans alike, floats as float64).

    >>> digest({"text": np.array(["a", "b"], dtype=object)}) == digest({"text": ["a", "b"]})
    True
    >>> digest(np.arange(3)) == digest(np.arange(3).astype(np.int32))
    True
    >>> digest(np.arange(3)) == digest(np.arange(3).reshape(3, 1))
    False
    """
    hashed = hashlib.sha256()
    _update(hashed, values)
    return hashed.hexdigest()


def _file_sha256(path):
    hashed = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            hashed.update(chunk)
    return hashed.hexdigest()


def files_fingerprint(paths, content=True):
    """'2 files, 2048 bytes, sha256 0123456789abcdef': the files' names and sizes and, with
    `content`, their bytes (without, for data too large to read at every start). Names count
    without their directory, so a moved copy has the same fingerprint."""
    paths = sorted(paths, key=os.path.basename)
    entries, total = [], 0
    for path in paths:
        size = tf.io.gfile.stat(path).length
        total += size
        entries.append([os.path.basename(path), size, _file_sha256(path) if content else None])
    hashed = hashlib.sha256(json.dumps(entries).encode()).hexdigest()
    return f"{len(paths)} file{'s' * (len(paths) != 1)}, {total} bytes, sha256 {hashed[:16]}"


def directory_files(directory):
    """The files directly in `directory` (not its subdirectories, nor hidden staging files)."""
    names = [n for n in tf.io.gfile.listdir(directory) if not n.startswith(".")]
    paths = [os.path.join(directory, n.rstrip("/")) for n in names]
    return [p for p in paths if not tf.io.gfile.isdir(p)]


# ----------------------------------------------------------------------------- comparing
def _sections(record):
    """The record's sections, in the order their differences are listed."""
    order = ["settings", "data"] + sorted(set(record) - {"settings", "data", "version"})
    return [s for s in order if s in record]


def _flat(record):
    """{entry name: value}: a section's entries by their own names ("learning_rate"), a
    top-level value by its key ("task"); a name taken already gets its section's prefix."""
    flat = {}
    for section in _sections(record):
        values = record[section]
        items = values.items() if isinstance(values, dict) else [(section, values)]
        for key, value in items:
            flat[key if key not in flat else f"{section}.{key}"] = value
    return flat


def compare(previous, current, may_differ=(), defaults=None):
    """([(entry, value there, value now)] that differ, [the same for `may_differ` entries]).

    Only the sections `previous` holds are compared; a setting missing from its "settings"
    counts as `defaults[name]`, one missing from `current`'s (not known to this invocation) is
    skipped; a "data" fingerprint missing or None on either side is skipped.

    >>> compare({"settings": {"lr": 1}, "data": {"train": "a"}},
    ...         {"settings": {"lr": 2, "seed": 5}, "data": {"train": None}}, defaults={"seed": 5})
    ([('lr', 1, 2)], [])
    """
    defaults = defaults or {}
    previous = {k: v for k, v in previous.items() if k in current}
    current = {k: v for k, v in current.items() if k in previous}
    if "settings" in previous:
        missing = set(current["settings"]) - set(previous["settings"])
        previous["settings"] = {
            **{k: v for k, v in previous["settings"].items() if k in current["settings"]},
            **{k: defaults.get(k) for k in missing},
        }
    if "data" in previous:
        known = {
            k
            for k in set(previous["data"]) & set(current["data"])
            if previous["data"][k] is not None and current["data"][k] is not None
        }
        previous["data"] = {k: v for k, v in previous["data"].items() if k in known}
        current["data"] = {k: v for k, v in current["data"].items() if k in known}
    there, now = _flat(previous), _flat(current)
    names = list(now) + [k for k in there if k not in now]
    differing = [(k, there.get(k), now.get(k)) for k in names if there.get(k) != now.get(k)]
    return (
        [d for d in differing if d[0] not in may_differ],
        [d for d in differing if d[0] in may_differ],
    )


def _shown(value, limit=240):
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_differences(differing, limit=SHOWN_DIFFERENCES):
    """'lr: 0.001 there vs 0.01 now; seed: 1 there vs 2 now' (the first `limit`, and N more)."""
    parts = [f"{k}: {_shown(old)} there vs {_shown(new)} now" for k, old, new in differing]
    text = "; ".join(parts[:limit])
    if len(parts) > limit:
        text += f"; and {len(parts) - limit} more"
    return text


# ----------------------------------------------------------------------------- the directory
def remove_outputs(output_dir, outputs):
    """Deletes the entries `outputs` (names of files or directories a runner writes) of
    `output_dir` and the staging files of killed writes of them; returns (removed, kept) names:
    everything else in the directory is kept."""
    removed = []
    for name in outputs:
        path = os.path.join(output_dir, name)
        if files.remove_stale_temporaries(path):
            removed.append(f"{files.TEMPORARY_PREFIX}{name}-*")
        if not tf.io.gfile.exists(path):
            continue
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        else:
            tf.io.gfile.remove(path)
        removed.append(name)
    kept = sorted(n.rstrip("/") for n in tf.io.gfile.listdir(output_dir))
    return removed, kept


def _start_over(output_dir, outputs):
    removed, kept = remove_outputs(output_dir, outputs)
    logging.info(
        "--overwrite_output_dir: removed %s from %s%s",
        ", ".join(removed) or "nothing (no earlier run)",
        output_dir,
        f"; kept {', '.join(kept)} (not written by this runner)" if kept else "",
    )


def _add_unknowns(path, previous, record):
    """Rewrites the record at `path` with the entries of `record` it lacks or holds as None (a
    "data" fingerprint of a split read for the first time, a setting added to albert_tf since);
    the values it holds stay."""
    known = {**record, **previous}
    if "settings" in record:
        known["settings"] = {**record["settings"], **previous.get("settings", {})}
    if "data" in record:
        held = {k: v for k, v in previous.get("data", {}).items() if v is not None}
        known["data"] = {**record["data"], **held}
    if known != previous:
        files.write_json(path, known)


def claim(
    output_dir,
    record,
    may_differ=(),
    defaults=None,
    overwrite=False,
    outputs=(),
    checkpoints=None,
    chief=True,
):
    """Makes `output_dir` the home of the run `record` describes, before any of its work (see
    the module docstring); only the `chief` writes. Returns "new" (the record was written: a
    fresh directory, or `overwrite` removed the earlier run's `outputs`), "resumed" (the record
    there matches) or "unrecorded" (an older albert_tf's run: compared as far as known and
    accepted with a warning). `checkpoints`: the run's checkpoint directory (default
    OUTPUT_DIR/checkpoints), where an unrecorded run is detected.

    Raises InvalidFlagError naming every entry that differs from the record.
    """
    path = os.path.join(output_dir, RUN_FILE)
    record = normalized(record)
    if overwrite:
        if chief:
            _start_over(output_dir, outputs)
            files.write_json(path, record)
        return "new"
    if not tf.io.gfile.exists(path):
        checkpoints = checkpoints or os.path.join(output_dir, "checkpoints")
        if tf.train.latest_checkpoint(checkpoints):
            logging.warning(
                "--output_dir=%s holds a run without a record of its settings (written by an "
                "older albert_tf): they cannot be compared with these; pass "
                "--overwrite_output_dir to start over",
                output_dir,
            )
            return "unrecorded"
        if chief:
            files.write_json(path, record)
        return "new"
    previous = files.read_json(path)
    differing, free = compare(previous, record, may_differ, defaults)
    if differing:
        raise InvalidFlagError(
            f"--output_dir={output_dir} holds a run with other settings "
            f"({describe_differences(differing)}): rerun with its settings, use a new "
            "--output_dir, or pass --overwrite_output_dir to start over"
        )
    if free:
        logging.info(
            "Settings that may differ from the run's record: %s",
            describe_differences(free, limit=len(free)),
        )
    if "settings" not in previous:
        logging.warning(
            "--output_dir=%s holds a run recorded by an older albert_tf (its model and task "
            "only): its other settings cannot be compared with these; pass "
            "--overwrite_output_dir to start over",
            output_dir,
        )
        return "unrecorded"
    if chief:  # what the record did not know yet (a split read for the first time)
        _add_unknowns(path, previous, record)
    return "resumed"
