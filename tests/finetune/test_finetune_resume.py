"""Exact resume of fine-tuning: SIGTERM saves and exits 143, SIGKILL at any moment; the re-run
ends with the same eval history, best checkpoint and final weights as an uninterrupted run, and
trains exactly --num_train_steps steps."""

import json
import os
import signal
import subprocess

import h5py
import numpy as np
from finetune_support import checkpoint_values, classifier_flags, script, write_tsv_splits
from signal_support import run_until

STEPS, EVERY = 14, 4  # evaluations at 4, 8, 12 and 14


def _run_until(args, marker, sig):
    """Starts run_classifier.py; sends `sig` once a log line contains `marker`; (code, log)."""
    process = script(
        "run_classifier.py",
        args,
        wait=False,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    return run_until(process, marker, sig)


def _h5_arrays(path):
    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, item: (
                arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return arrays


def test_sigterm_sigkill_resume_equals_uninterrupted(tmp_path, corpus_file, spm_model_file):
    paths, _ = write_tsv_splits(str(tmp_path), corpus_file)
    common = dict(
        num_train_steps=STEPS,
        save_checkpoints_steps=EVERY,
        keep_checkpoint_max=10,
        albert_dropout=0.1,
        classifier_dropout=0.1,
        train_batch_size=4,
    )
    reference, interrupted = str(tmp_path / "reference"), str(tmp_path / "interrupted")

    done = script("run_classifier.py", classifier_flags(paths, spm_model_file, reference, **common))
    assert done.returncode == 0, done.stderr[-3000:]

    args = classifier_flags(paths, spm_model_file, interrupted, **common)
    code, log = _run_until(args, "ckpt-4", signal.SIGTERM)  # lands during steps 5-8
    assert code == 143, log[-3000:]
    assert "preempted: saved checkpoint" in log and "re-run the same command" in log
    code, log = _run_until(args, "ckpt-8", signal.SIGKILL)
    assert code == -signal.SIGKILL, log[-3000:]
    assert "Resuming from" in log
    finished = script("run_classifier.py", args)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "Resuming from" in finished.stderr

    results = [
        json.load(open(os.path.join(d, "eval_results.json"))) for d in (reference, interrupted)
    ]
    assert [h["step"] for h in results[0]["history"]] == [4, 8, 12, 14]
    assert results[1] == results[0]  # same history (no lost or repeated evaluation), same best
    for directory in (reference, interrupted):
        assert os.path.exists(os.path.join(directory, "checkpoints", f"ckpt-{STEPS}.index"))
    final = [
        checkpoint_values(os.path.join(d, "checkpoints", f"ckpt-{STEPS}"))
        for d in (reference, interrupted)
    ]
    assert sorted(final[0]) == sorted(final[1])
    step_keys = [k for k in final[0] if "iterations" in k]
    assert step_keys and all(int(final[1][k]) == STEPS for k in step_keys)  # exactly N steps
    for name, value in final[0].items():
        np.testing.assert_array_equal(final[1][name], value, err_msg=name)
    best = [_h5_arrays(os.path.join(d, "best.weights.h5")) for d in (reference, interrupted)]
    assert sorted(best[0]) == sorted(best[1]) and best[0]
    for name, value in best[0].items():
        np.testing.assert_array_equal(best[1][name], value, err_msg=name)


def test_rerun_of_a_finished_run_changes_nothing(tmp_path, corpus_file, spm_model_file):
    paths, _ = write_tsv_splits(str(tmp_path), corpus_file)
    out, serving = str(tmp_path / "out"), str(tmp_path / "serving")
    args = classifier_flags(paths, spm_model_file, out, export_dir=serving)
    first = script("run_classifier.py", args)
    assert first.returncode == 0, first.stderr[-3000:]
    history = json.load(open(os.path.join(out, "eval_results.json")))
    again = script("run_classifier.py", args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "training is complete" in again.stderr and "already exported" in again.stderr
    assert json.load(open(os.path.join(out, "eval_results.json"))) == history
    assert sorted(os.listdir(serving)) == ["1"]


def test_resume_with_gradient_accumulation(tmp_path, corpus_file, spm_model_file):
    """--gradient_accumulation_steps=2: steps count updates, SIGTERM + resume is exact, and the
    run equals (float tolerance, dropout off) the run with whole batches."""
    paths, _ = write_tsv_splits(str(tmp_path), corpus_file)
    common = dict(
        num_train_steps=6,
        save_checkpoints_steps=2,
        keep_checkpoint_max=10,
        albert_dropout=0.0,
        classifier_dropout=0.0,
        train_batch_size=4,
        precision="float32",
    )
    directories = {k: str(tmp_path / k) for k in ("whole", "reference", "interrupted")}
    whole = script(
        "run_classifier.py", classifier_flags(paths, spm_model_file, directories["whole"], **common)
    )
    assert whole.returncode == 0, whole.stderr[-3000:]
    common["gradient_accumulation_steps"] = 2
    done = script(
        "run_classifier.py",
        classifier_flags(paths, spm_model_file, directories["reference"], **common),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "effective batch 4 (micro-batch 2 x 2 accumulation step(s) x 1 replica(s))" in (
        done.stderr
    )
    args = classifier_flags(paths, spm_model_file, directories["interrupted"], **common)
    code, log = _run_until(args, "ckpt-2", signal.SIGTERM)
    assert code == 143, log[-3000:]
    finished = script("run_classifier.py", args)
    assert finished.returncode == 0 and "Resuming from" in finished.stderr, finished.stderr[-3000:]

    results = {
        k: json.load(open(os.path.join(d, "eval_results.json"))) for k, d in directories.items()
    }
    assert [h["step"] for h in results["reference"]["history"]] == [2, 4, 6]
    assert results["interrupted"] == results["reference"]
    final = {
        k: checkpoint_values(os.path.join(d, "checkpoints", "ckpt-6"))
        for k, d in directories.items()
    }
    assert sorted(final["reference"]) == sorted(final["interrupted"]) == sorted(final["whole"])
    for name, value in final["reference"].items():
        np.testing.assert_array_equal(final["interrupted"][name], value, err_msg=name)
        if "iterations" in name:
            assert int(value) == 6  # updates, not micro-batches
        np.testing.assert_allclose(final["whole"][name], value, atol=2e-5, err_msg=name)
