"""Atomic outputs never show a partial file to a glob of the outputs, and the next run removes
what a killed one left behind."""

import glob
import os

from albert_tf import files
from albert_tf.data.writer import ShardedRecordWriter, output_paths


def test_staging_files_are_hidden_from_output_globs(tmp_path):
    paths = output_paths(str(tmp_path / "train"), num_output_shards=2)
    writer = ShardedRecordWriter(paths)
    writer.write_all([b"a", b"b", b"c"])
    # mid-run: the staging files exist, but no glob of the outputs sees them
    staged = sorted(os.listdir(tmp_path))
    assert len(staged) == 2 and all(name.startswith(files.TEMPORARY_PREFIX) for name in staged)
    assert glob.glob(str(tmp_path / "train-*")) == glob.glob(str(tmp_path / "*.tfrecord")) == []
    writer.commit()
    assert sorted(glob.glob(str(tmp_path / "train-*"))) == sorted(paths)
    assert writer.counts == [2, 1]


def test_the_next_run_removes_what_a_killed_run_left(tmp_path):
    paths = output_paths(str(tmp_path / "train"), num_output_shards=2)
    killed = ShardedRecordWriter(paths)  # a run killed before commit: its staging files stay
    killed.write_all([b"x"] * 5)
    killed._writers[0].flush()
    unrelated = tmp_path / f"{files.TEMPORARY_PREFIX}other.tfrecord-1-abcd"
    unrelated.write_bytes(b"someone else's")
    with ShardedRecordWriter(paths) as writer:
        writer.write_all([b"y"])
        writer.commit()
    killed._done = True  # (its handles are gone in a real kill)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(p) for p in paths] + [unrelated.name]
    )


def test_write_atomic_stages_under_a_hidden_name(tmp_path, monkeypatch):
    seen = []
    real = files.temporary_path
    monkeypatch.setattr(files, "temporary_path", lambda p: seen.append(real(p)) or seen[-1])
    files.write_json(str(tmp_path / "summary.json"), {"a": 1})
    assert os.path.basename(seen[0]).startswith(".tmp-summary.json-")
    assert os.listdir(tmp_path) == ["summary.json"]
