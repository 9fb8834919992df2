"""SIGTERM in the middle of a long host loop (--steps_per_loop far above the steps left): the
run stops at the next step boundary, writes a checkpoint there and exits 143, and the same
command again ends with the weights of an uninterrupted run. Also --profile_steps' trace from a
script run, and the one-line errors of the new flags."""

import concurrent.futures
import glob
import json
import os
import signal
import subprocess

import pytest
from fault_commands import TINY_CONFIG
from signal_support import run_until
from train_support import (
    checkpoint_values,
    max_difference,
    run_script,
    tiny_flags,
    tiny_params,
    write_records,
)

STEPS = 200
# One host loop of every step, except that --profile_steps=1,1 ends the first loop after step 1
# ("Wrote the profile of steps 1-1" is its last line). SIGTERM goes once the run has used
# SIGNAL_CPU_SECONDS more of its own CPU time after that line: some 30 steps into the long loop
# of steps 2..200 (about 8 ms of CPU a step on a 2-core machine; the loop takes over 1.5 CPU-s),
# wherever the load on the machine puts them in wall time. A run stopped at step 1 (its stop
# request seen before the loop's first step) also stopped inside the long loop: it wrote no
# checkpoint at the end of step 1's loop.
SIGNAL_CPU_SECONDS = 0.25
SETTINGS = dict(
    num_train_steps=STEPS,
    steps_per_loop=STEPS,
    save_checkpoints_steps=STEPS,
    jit_compile=False,
)


@pytest.fixture(scope="module")
def tiny_records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("preemption_records")
    config = directory / "albert_config.json"
    config.write_text(json.dumps(TINY_CONFIG))
    train = write_records(str(directory / "train.tfrecord"), 96, seed=0)
    return {"train": train, "config": str(config)}


def _latest_checkpoint_step(output_dir):
    names = glob.glob(os.path.join(output_dir, "checkpoints", "ckpt-*.index"))
    return max(int(name[: -len(".index")].rsplit("-", 1)[1]) for name in names)


def _preempt_then_rerun(args, output_dir):
    """The run with SIGTERM mid-loop, then the same command again: (code, log, step of its
    latest checkpoint, rerun)."""
    process = run_script(
        args + ["--profile_steps=1,1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    code, log = run_until(
        process,
        "Wrote the profile of steps 1-1",
        signal.SIGTERM,
        timeout=240,
        after_cpu_seconds=SIGNAL_CPU_SECONDS,
    )
    if code != 143:
        return code, log, None, None
    return code, log, _latest_checkpoint_step(output_dir), run_script(args)


def test_sigterm_mid_loop_checkpoints_that_step_and_the_rerun_equals_uninterrupted(
    tiny_records, tmp_path
):
    from albert_tf.train import runner

    out = str(tmp_path / "preempted")
    args = tiny_flags(tiny_records, out, **SETTINGS)
    reference = str(tmp_path / "uninterrupted")
    params = tiny_params(
        tiny_records, reference, learning_rate=0.01, num_warmup_steps=2, **SETTINGS
    )
    # The script runs go on in their own processes while this one trains the reference.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        script_runs = pool.submit(_preempt_then_rerun, args, out)
        runner.run_pretraining(params)
        code, log, stopped, rerun = script_runs.result()

    assert code == 143, log[-3000:]
    assert 1 <= stopped < STEPS, log[-3000:]  # inside the loop of steps 2..STEPS, not at its end
    assert f"preempted: saved checkpoint {out}/checkpoints/ckpt-{stopped} at step" in log
    trace = os.path.join(out, "summaries", "profile", "plugins", "profile", "*", "*.xplane.pb")
    assert glob.glob(trace), "no profiler trace of step 1"

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"at step {stopped}" in rerun.stderr

    final = [
        checkpoint_values(os.path.join(d, "checkpoints", f"ckpt-{STEPS}")) for d in (out, reference)
    ]
    assert max_difference(*final) == 0.0


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--profile_steps=5,3", "--profile_steps='5,3' must be A,B with 1 <= A <= B <= "),
        (f"--profile_steps=3,{STEPS + 1}", f"--num_train_steps ({STEPS})"),
        ("--max_loss=0", "--max_loss must be > 0 when given, got 0.0"),
        ("--max_consecutive_recoveries=-1", "--max_consecutive_recoveries must be >= 0, got -1"),
    ],
)
def test_bad_fault_flags_are_one_line_errors(tiny_records, tmp_path, flag, message):
    result = run_script(tiny_flags(tiny_records, str(tmp_path / "out"), **SETTINGS) + [flag])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[-1].startswith("run_pretraining.py: error: ") and message in lines[-1], lines
