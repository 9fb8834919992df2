"""albert_tf.files: atomic writes leave no partial file; JSON errors name the file and line."""

import json
import os

import pytest

from albert_tf import files


def test_write_json_replaces_atomically(tmp_path):
    path = str(tmp_path / "eval_results.json")
    files.write_json(path, {"a": 1})
    files.write_json(path, {"b": [2, 3]})
    assert files.read_json(path) == {"b": [2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == ["eval_results.json"]


def test_failed_write_keeps_the_old_file(tmp_path):
    path = str(tmp_path / "results.json")
    files.write_json(path, {"good": True})
    with pytest.raises(TypeError):
        files.write_json(path, {"bad": object()})  # not serializable: fails before any write
    assert json.loads(open(path).read()) == {"good": True}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_read_json_errors(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"list.json: expected a JSON object, got list"):
        files.read_json(str(tmp_path / "list.json"))
    (tmp_path / "broken.json").write_text('{\n\n "a": 1,,\n}')
    with pytest.raises(ValueError, match=r"broken.json: not valid JSON \(line 3"):
        files.read_json(str(tmp_path / "broken.json"))
    with pytest.raises(FileNotFoundError, match=r"File not found: .*nothing.json"):
        files.read_json(str(tmp_path / "nothing.json"))


def test_exchange_paths_swaps_two_directories_in_one_step(tmp_path):
    old, new = tmp_path / "model", tmp_path / ".tmp-model-1-abcdef01"
    old.mkdir()
    new.mkdir()
    (old / "spm.model").write_text("old")
    (new / "config.json").write_text("new")
    assert files.exchange_paths(str(new), str(old))  # Linux: renameat2 RENAME_EXCHANGE
    assert sorted(os.listdir(old)) == ["config.json"]
    assert sorted(os.listdir(new)) == ["spm.model"]
    assert not files.exchange_paths(str(tmp_path / "missing"), str(old))  # nothing changes
    assert sorted(os.listdir(old)) == ["config.json"]
