"""Output side of instance creation: shard names, a bounded shuffle buffer, atomic sharded writes.

>>> buffer = ShuffleBuffer(capacity=2, seed=0)
>>> out = [x for i in range(5) for x in buffer.add(i)] + list(buffer.flush())
>>> sorted(out)
[0, 1, 2, 3, 4]
"""

import contextlib
import random
from typing import Iterable, Iterator, List

from absl import logging

from albert_tf import files


def output_paths(output_file: str, num_output_shards: int = 1) -> List[str]:
    """The TFRecord files to write.

    `output_file` is a comma-separated list of files (written round-robin, as in the original), or,
    with num_output_shards > 1, a single prefix: PREFIX-00000-of-0000N.tfrecord ...
    """
    files = [f.strip() for f in output_file.split(",") if f.strip()]
    if not files:
        raise ValueError("output_file is empty")
    if num_output_shards < 1:
        raise ValueError(f"num_output_shards must be >= 1, got {num_output_shards}")
    if num_output_shards == 1:
        paths = files
    elif len(files) != 1:
        raise ValueError(
            f"num_output_shards={num_output_shards} needs output_file to be one prefix, "
            f"got {len(files)} comma-separated files"
        )
    else:
        paths = [
            f"{files[0]}-{i:05d}-of-{num_output_shards:05d}.tfrecord"
            for i in range(num_output_shards)
        ]
    if len(set(paths)) != len(paths):
        raise ValueError(f"output_file names a file twice: {output_file}")
    return paths


SUMMARY_SUFFIX = ".summary.json"


def summary_path(output_file: str, num_output_shards: int = 1) -> str:
    """Where the JSON summary goes: PREFIX.summary.json (prefix mode) or FIRST_FILE.summary.json."""
    first = output_paths(output_file, num_output_shards)[0]
    stem = output_file.strip() if num_output_shards > 1 else first
    return f"{stem}{SUMMARY_SUFFIX}"


class ShuffleBuffer:
    """Seeded shuffling of a stream within `capacity` items (memory bounded, deterministic).

    Each new item, once the buffer is full, evicts a uniformly chosen resident item.
    """

    def __init__(self, capacity: int, seed: int):
        if capacity < 1:
            raise ValueError(f"shuffle buffer capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._items = []
        self._rng = random.Random(f"albert_tf:shuffle:{seed}")

    def add(self, item) -> tuple:
        """Adds item; returns () while filling, else (evicted item,)."""
        if len(self._items) < self.capacity:
            self._items.append(item)
            return ()
        j = self._rng.randrange(self.capacity)
        evicted, self._items[j] = self._items[j], item
        return (evicted,)

    def flush(self) -> Iterator:
        self._rng.shuffle(self._items)
        items, self._items = self._items, []
        yield from items


class ShardedRecordWriter:
    """Writes records round-robin into TFRecord files, atomically.

    Everything goes to hidden temporary files next to the targets (`files.temporary_path`;
    those of a killed earlier run are removed first); `commit()` renames them into place,
    and leaving the `with` block on an exception deletes them, so a failed run never leaves a
    half-written final file (paths may be gs://).
    """

    def __init__(self, paths: List[str]):
        import tensorflow as tf

        self._tf = tf
        self.paths = list(paths)
        self._writers = []
        stale = 0
        for path in self.paths:
            parent = path.rsplit("/", 1)[0] if "/" in path else ""
            if parent and not tf.io.gfile.exists(parent):
                tf.io.gfile.makedirs(parent)
            stale += files.remove_stale_temporaries(path)
        if stale:
            logging.info("Removed %d temporary file(s) left by an interrupted run", stale)
        # Hidden staging names: a glob of the outputs (train-*) never sees a partial shard.
        self._tmp_paths = [files.temporary_path(p) for p in self.paths]
        try:
            for tmp in self._tmp_paths:
                self._writers.append(tf.io.TFRecordWriter(tmp))
        except BaseException:  # e.g. a read-only directory after the first file
            self.abort()
            raise
        self.counts = [0] * len(self.paths)
        self._next = 0
        self._done = False

    def write(self, record: bytes) -> None:
        self._writers[self._next].write(record)
        self.counts[self._next] += 1
        self._next = (self._next + 1) % len(self._writers)

    def write_all(self, records: Iterable[bytes]) -> None:
        for record in records:
            self.write(record)

    def commit(self) -> None:
        for writer in self._writers:
            writer.close()
        for tmp, path in zip(self._tmp_paths, self.paths):
            self._tf.io.gfile.rename(tmp, path, overwrite=True)
        self._done = True

    def abort(self) -> None:
        """Deletes the staging files, whatever fails on the way (on a full disk, closing a
        writer fails too)."""
        for writer in self._writers:
            with contextlib.suppress(Exception):
                writer.close()
        for tmp in self._tmp_paths:
            with contextlib.suppress(Exception):
                if self._tf.io.gfile.exists(tmp):
                    self._tf.io.gfile.remove(tmp)
        self._done = True
        logging.warning("Output discarded: no file of %s was written", self.paths)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._done:
            self.abort()
        return False
