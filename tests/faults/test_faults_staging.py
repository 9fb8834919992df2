"""What killed writers leave behind is removed by the next writer of the same target (in-process,
with staging names of a process that has exited), never a live writer's, and a failed write
leaves nothing: albert_tf.files and albert_tf.export.versions."""

import os
import subprocess

import pytest

from albert_tf import files


def _exited_pid():
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _staging(target, pid, suffix=""):
    parent, name = os.path.split(target)
    return os.path.join(parent, f"{files.TEMPORARY_PREFIX}{name}-{pid}-0123abcd{suffix}")


def test_atomic_writes_remove_what_exited_writers_left(tmp_path):
    target = str(tmp_path / "eval_results.json")
    dead, live = _staging(target, _exited_pid()), _staging(target, os.getppid())
    mine_before_a_restart = _staging(target, os.getpid(), ".keras")
    for path in (dead, live, mine_before_a_restart):
        open(path, "w").write("partial")
    files.write_json(target, {"step": 4})
    assert sorted(os.listdir(tmp_path)) == sorted(["eval_results.json", os.path.basename(live)])


def test_a_failed_save_leaves_nothing(tmp_path):
    target = str(tmp_path / "model.keras")

    def save(path):
        assert path.endswith(".keras")
        open(path, "w").write("half of a model")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        files.save_atomic(target, save, suffix=".keras")
    assert os.listdir(tmp_path) == []


def test_an_export_again_removes_the_killed_exports_staging_directory(tmp_path):
    from albert_tf.export import versions

    base = str(tmp_path)
    with versions.publish_version(base) as (staging, version):
        open(os.path.join(staging, "saved_model.pb"), "w").close()
    killed = _staging(os.path.join(base, "2"), _exited_pid())
    os.makedirs(os.path.join(killed, "variables"))
    with versions.publish_version(base) as (staging, version):
        assert os.path.basename(staging).startswith(".tmp-2-")
        open(os.path.join(staging, "saved_model.pb"), "w").close()
    assert version == 2 and sorted(os.listdir(base)) == ["1", "2"]
