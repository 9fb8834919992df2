"""Exact resume of fine-tuning: SIGTERM saves and exits 143, SIGKILL at any moment; the re-run
ends with the same eval history, best checkpoint and final weights as an uninterrupted run, and
trains exactly --num_train_steps optimizer updates (with gradient accumulation: updates, not
micro-batches); re-running a finished run changes nothing."""

import concurrent.futures
import json
import os
import signal
import subprocess

import h5py
import numpy as np
from finetune_support import checkpoint_values, classifier_flags, script, write_tsv_splits
from signal_support import run_until

STEPS, EVERY = 5, 2  # evaluations at 2, 4 and 5 (the last off the checkpoint grid)


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
        gradient_accumulation_steps=2,
    )
    reference, interrupted = str(tmp_path / "reference"), str(tmp_path / "interrupted")
    serving = str(tmp_path / "serving")

    reference_args = classifier_flags(
        paths, spm_model_file, reference, export_dir=serving, **common
    )

    def uninterrupted_twice():
        """The reference run, then the same command again (which must change nothing)."""
        done = script("run_classifier.py", reference_args)
        if done.returncode != 0:
            return done, None, None
        history = json.load(open(os.path.join(reference, "eval_results.json")))
        return done, history, script("run_classifier.py", reference_args)

    # The uninterrupted runs share nothing with the interrupted ones but the input files: they
    # run in another process meanwhile (the machine has a second core).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        uninterrupted = pool.submit(uninterrupted_twice)

        args = classifier_flags(paths, spm_model_file, interrupted, **common)
        code, log = _run_until(args, "ckpt-2", signal.SIGTERM)  # lands during steps 3-4
        assert code == 143, log[-3000:]
        assert "preempted: saved checkpoint" in log and "re-run the same command" in log
        code, log = _run_until(args, "ckpt-4", signal.SIGKILL)
        assert code == -signal.SIGKILL, log[-3000:]
        assert "Resuming from" in log
        finished = script("run_classifier.py", args)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert "Resuming from" in finished.stderr

        done, history, again = uninterrupted.result()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "effective batch 4 (micro-batch 2 x 2 accumulation step(s) x 1 replica(s))" in (
        done.stderr
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "training is complete" in again.stderr and "already exported" in again.stderr
    assert json.load(open(os.path.join(reference, "eval_results.json"))) == history
    assert sorted(os.listdir(serving)) == ["1"]

    results = [
        json.load(open(os.path.join(d, "eval_results.json"))) for d in (reference, interrupted)
    ]
    assert [h["step"] for h in results[0]["history"]] == [2, 4, 5]
    assert results[1] == results[0]  # same history (no lost or repeated evaluation), same best
    for directory in (reference, interrupted):
        assert os.path.exists(os.path.join(directory, "checkpoints", f"ckpt-{STEPS}.index"))
    final = [
        checkpoint_values(os.path.join(d, "checkpoints", f"ckpt-{STEPS}"))
        for d in (reference, interrupted)
    ]
    assert sorted(final[0]) == sorted(final[1])
    step_keys = [k for k in final[0] if "iterations" in k]
    # exactly N updates, not 2N micro-batches
    assert step_keys and all(int(final[1][k]) == STEPS for k in step_keys)
    for name, value in final[0].items():
        np.testing.assert_array_equal(final[1][name], value, err_msg=name)
    best = [_h5_arrays(os.path.join(d, "best.weights.h5")) for d in (reference, interrupted)]
    assert sorted(best[0]) == sorted(best[1]) and best[0]
    for name, value in best[0].items():
        np.testing.assert_array_equal(best[1][name], value, err_msg=name)
