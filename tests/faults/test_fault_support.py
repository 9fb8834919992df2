"""The fault campaigns' own instruments (fault_support), where a wrong reading would report a
fault that did not happen or hide one that did."""

import os

import fault_support


def test_pinned_snapshot_reads_again_when_the_directory_is_swapped_out(tmp_path, monkeypatch):
    # A save swaps its new directory in and deletes the old one while the watcher reads the
    # old one through its descriptor: that read is of a directory the path no longer names.
    path, new = tmp_path / "model", tmp_path / "new"
    for directory, text in ((path, "old"), (new, "new")):
        directory.mkdir()
        for name in ("config.json", "spm.model"):
            (directory / name).write_text(text + name)
    read = fault_support.snapshot
    reads = []

    def swapped_during_the_first_read(directory, ignore=()):
        reads.append(directory)
        if len(reads) == 1:
            os.rename(path, tmp_path / "aside")
            os.rename(new, path)
            (tmp_path / "aside" / "spm.model").unlink()
        return read(directory, ignore)

    monkeypatch.setattr(fault_support, "snapshot", swapped_during_the_first_read)
    state = fault_support.pinned_snapshot(str(path))
    assert len(reads) == 2
    assert state == read(str(path))
    assert sorted(state) == ["config.json", "spm.model"]


def test_pinned_snapshot_of_a_missing_directory_is_none(tmp_path):
    assert fault_support.pinned_snapshot(str(tmp_path / "absent")) is None
