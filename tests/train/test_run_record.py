"""The run record on its own (no training): which differences refuse a re-run and how they are
told, unknown entries, records of an older albert_tf, and what --overwrite_output_dir removes."""

import json
import os

import pytest

from albert_tf.settings import InvalidFlagError
from albert_tf.train import run_record


def _record(settings=None, data=None, **sections):
    return {
        "version": run_record.VERSION,
        "model": {"hidden_size": 32},
        "settings": {"learning_rate": 0.001, "seed": 1, "verbose": 1, **(settings or {})},
        "data": {"train_data": "64 rows, sha256 aa", **(data or {})},
        **sections,
    }


def _stored(directory):
    with open(os.path.join(directory, run_record.RUN_FILE)) as f:
        return json.load(f)


def test_every_difference_is_named_old_vs_new(tmp_path):
    out = str(tmp_path)
    assert run_record.claim(out, _record()) == "new"
    assert run_record.claim(out, _record({"verbose": 0}), may_differ=("verbose",)) == "resumed"
    assert _stored(out) == _record()  # the record keeps the values the run started with
    changed = {f"s{i}": i for i in range(7)}
    with pytest.raises(InvalidFlagError) as error:
        run_record.claim(
            out,
            _record({"learning_rate": 0.01, **changed}, {"train_data": "64 rows, sha256 bb"}),
            defaults={k: -1 for k in changed},
        )
    assert str(error.value) == (
        f"--output_dir={out} holds a run with other settings (learning_rate: 0.001 there vs "
        "0.01 now; s0: -1 there vs 0 now; s1: -1 there vs 1 now; s2: -1 there vs 2 now; s3: -1 "
        "there vs 3 now; s4: -1 there vs 4 now; and 3 more): rerun with its settings, use a new "
        "--output_dir, or pass --overwrite_output_dir to start over"
    )
    with pytest.raises(InvalidFlagError, match=r"\(hidden_size: 32 there vs 64 now\)"):
        run_record.claim(out, {**_record(), "model": {"hidden_size": 64}})
    assert _stored(out) == _record()


def test_unknown_entries(tmp_path):
    """A setting the record lacks counts as its default, one the re-run lacks is skipped; a
    fingerprint of a split one side did not read is skipped, and recorded once known."""
    out = str(tmp_path)
    run_record.claim(out, _record(data={"train_data": None}))
    current = _record({"added": 0}, {"train_data": "64 rows, sha256 cc"})
    assert run_record.claim(out, current, defaults={"added": 0}) == "resumed"
    assert _stored(out) == current
    with pytest.raises(InvalidFlagError, match=r"\(added: 0 there vs 5 now\)"):
        run_record.claim(out, _record({"added": 5}, {"train_data": "64 rows, sha256 cc"}))
    unresolved = _record({"added": 0}, {"train_data": None})  # a re-run that cannot know "seed"
    del unresolved["settings"]["seed"]
    assert run_record.claim(out, unresolved) == "resumed"
    assert _stored(out) == current


def test_records_of_an_older_albert_tf(tmp_path):
    """A record without settings (model, task, class count) is compared as far as it goes and
    accepted without being rewritten; so is a checkpoint without a record."""
    older = {"model": {"hidden_size": 32}, "task": "sst-2", "num_classes": 2}
    out = str(tmp_path / "older")
    os.makedirs(out)
    with open(os.path.join(out, run_record.RUN_FILE), "w") as f:
        json.dump(older, f)
    assert run_record.claim(out, _record(task="sst-2", num_classes=2)) == "unrecorded"
    assert _stored(out) == older
    with pytest.raises(InvalidFlagError, match=r"\(task: sst-2 there vs cola now\)"):
        run_record.claim(out, _record(task="cola", num_classes=2))
    unrecorded = tmp_path / "unrecorded"
    (unrecorded / "checkpoints").mkdir(parents=True)
    (unrecorded / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (unrecorded / "checkpoints" / "ckpt-2.index").write_bytes(b"")
    assert run_record.claim(str(unrecorded), _record()) == "unrecorded"
    assert not (unrecorded / run_record.RUN_FILE).exists()


def test_overwrite_removes_only_the_runs_files(tmp_path):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "ckpt-2.index").write_bytes(b"")
    (out / "eval_results.json").write_text("{}")
    (out / ".tmp-eval_results.json-999999999-0123abcd").write_text("{}")  # a killed write's
    (out / "notes.txt").write_text("mine")
    run_record.claim(str(out), _record())
    new = _record({"learning_rate": 0.1})
    outputs = ("checkpoints", "eval_results.json", "model.keras", run_record.RUN_FILE)
    assert run_record.claim(str(out), new, overwrite=True, outputs=outputs) == "new"
    assert sorted(os.listdir(out)) == ["notes.txt", run_record.RUN_FILE]
    assert _stored(str(out)) == new
    # a non-chief process of a multi-worker run neither removes nor writes
    (out / "eval_results.json").write_text("{}")
    run_record.claim(str(out), _record(), overwrite=True, outputs=outputs, chief=False)
    assert _stored(str(out)) == new and (out / "eval_results.json").exists()


def test_fingerprints(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b" / "a.txt"
    second.parent.mkdir()
    first.write_text("same")
    second.write_text("same")
    assert run_record.files_fingerprint([str(first)]) == run_record.files_fingerprint(
        [str(second)]
    )  # a moved copy
    assert run_record.files_fingerprint([str(first)]).startswith("1 file, 4 bytes, sha256 ")
    second.write_text("diff")
    assert run_record.files_fingerprint([str(first)]) != run_record.files_fingerprint([str(second)])
    assert run_record.files_fingerprint(
        [str(first)], content=False
    ) == run_record.files_fingerprint([str(second)], content=False)
