"""Exact resume: SIGTERM saves and exits; SIGKILL at any moment; the restarted run ends with the
same weights as an uninterrupted one. Also the final eval_results.json and the export."""

import json
import os
import signal
import subprocess

import numpy as np
import tensorflow as tf
from signal_support import run_until
from train_support import PRED, SEQ, checkpoint_values, max_difference, run_script, tiny_flags

from albert_tf.train import runner

STEPS = 24
COMMON = dict(
    num_train_steps=STEPS,
    num_warmup_steps=4,
    save_checkpoints_steps=4,
    steps_per_loop=1,
    keep_checkpoint_max=20,
    jit_compile=False,
)


def _run_until(args, line_marker, sig):
    """Starts the script, sends `sig` when a log line contains `line_marker`; returns (code,
    log)."""
    process = run_script(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    return run_until(process, line_marker, sig, timeout=240)


def _latest_step(output_dir):
    latest = tf.train.latest_checkpoint(os.path.join(output_dir, "checkpoints"))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def test_sigterm_then_sigkill_then_resume_equals_uninterrupted(records, tmp_path):
    out = str(tmp_path / "interrupted")
    args = tiny_flags(records, out, **COMMON)

    code, log = _run_until(args, f"step 6/{STEPS}", signal.SIGTERM)
    assert code == 143, log[-3000:]
    assert "preempted: saved checkpoint" in log
    preempted_at = _latest_step(out)
    assert 6 <= preempted_at < STEPS, (
        preempted_at
    )  # saved at the preemption, not only every 4 steps

    code, log = _run_until(args, f"step {preempted_at + 7}/{STEPS}", signal.SIGKILL)
    assert code == -signal.SIGKILL, log[-3000:]
    assert "Resuming from" in log and f"at step {preempted_at}" in log
    killed_after = _latest_step(out)
    assert preempted_at < killed_after < STEPS

    finished = run_script(args)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"at step {killed_after}" in finished.stderr
    assert _latest_step(out) == STEPS

    reference = str(tmp_path / "uninterrupted")
    params = runner.PretrainingParams(
        input_file=records["train"],
        output_dir=reference,
        albert_config_file=records["config"],
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        train_batch_size=8,
        eval_batch_size=8,
        learning_rate=0.01,
        eval_input_files=records["eval"],
        export=True,
        **COMMON,
    )
    result = runner.run_pretraining(params)
    assert result["global_step"] == STEPS
    resumed = checkpoint_values(os.path.join(out, "checkpoints", f"ckpt-{STEPS}"))
    uninterrupted = checkpoint_values(os.path.join(reference, "checkpoints", f"ckpt-{STEPS}"))
    assert max_difference(resumed, uninterrupted) == 0.0

    # Final evaluation and export of the uninterrupted run.
    with open(os.path.join(reference, "eval_results.json")) as f:
        metrics = json.load(f)
    assert metrics == json.loads(json.dumps(result["eval"]))
    assert metrics["global_step"] == STEPS and metrics["examples"] == 48
    assert 0 < metrics["masked_lm_majority_baseline"] < 0.2
    assert 0.3 < metrics["sentence_order_majority_baseline"] <= 1.0
    assert abs(metrics["loss"] - metrics["masked_lm_loss"] - metrics["sentence_order_loss"]) < 1e-9
    import albert_tf

    exported = albert_tf.load(result["export"])
    final = {v.path: v.numpy() for v in result["model"].variables}
    assert all(np.array_equal(v.numpy(), final[v.path]) for v in exported.variables)
    events = tf.io.gfile.glob(
        os.path.join(reference, "summaries", "train", "events.out.tfevents.*")
    )
    assert len(events) == 1
