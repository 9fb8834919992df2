"""SIGTERM in the middle of a long host loop (--steps_per_loop far above the steps left): the
run stops at the next step boundary, writes a checkpoint there and exits 143, and the same
command again ends with the weights of an uninterrupted run. Also --profile_steps' trace from a
script run, and the one-line errors of the new flags."""

import glob
import json
import os
import signal
import subprocess
import threading

import pytest
from fault_commands import TINY_CONFIG
from train_support import (
    checkpoint_values,
    max_difference,
    run_script,
    tiny_flags,
    tiny_params,
    write_records,
)

STEPS = 400
# One host loop of every step, except that --profile_steps=1,1 ends the first loop after step 1:
# a second after its progress line, the long loop (steps 2..400, about 4 s on an idle 2-core
# machine, still twice that second on a host twice as fast) runs. Under heavy load that second
# may end before step 2 does: the run then stops at step 1, also inside the long loop (it wrote
# no checkpoint at the end of step 1's loop).
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


def test_sigterm_mid_loop_checkpoints_that_step_and_the_rerun_equals_uninterrupted(
    tiny_records, tmp_path
):
    from albert_tf.train import runner

    out = str(tmp_path / "preempted")
    args = tiny_flags(tiny_records, out, **SETTINGS)
    process = run_script(
        args + ["--profile_steps=1,1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    log = []
    for line in process.stderr:
        log.append(line)
        if f"step 1/{STEPS}" in line:
            threading.Timer(1.0, process.send_signal, (signal.SIGTERM,)).start()
    code, log = process.wait(timeout=240), "".join(log)
    assert code == 143, log[-3000:]
    stopped = _latest_checkpoint_step(out)
    assert 1 <= stopped < STEPS, log[-3000:]  # inside the loop of steps 2..400, not at its end
    assert f"preempted: saved checkpoint {out}/checkpoints/ckpt-{stopped} at step" in log
    trace = os.path.join(out, "summaries", "profile", "plugins", "profile", "*", "*.xplane.pb")
    assert glob.glob(trace), "no profiler trace of step 1"

    rerun = run_script(args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"at step {stopped}" in rerun.stderr

    reference = str(tmp_path / "uninterrupted")
    params = tiny_params(
        tiny_records, reference, learning_rate=0.01, num_warmup_steps=2, **SETTINGS
    )
    runner.run_pretraining(params)
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
