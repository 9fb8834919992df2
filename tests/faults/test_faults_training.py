"""Training commands under SIGKILL at seeded moments: the same command again finishes with the
final weights (numerically exact on CPU), evaluation history and outputs of an uninterrupted
run, and leaves nothing behind. run_pretraining, and two fine-tuning runners sharing
albert_tf/finetune/runner.py (run_classifier, run_token_classifier); also a read error in the
middle of a fine-tuning data file."""

import json
import os
import shutil

import pytest
from fault_commands import FINETUNE_STEPS, PRETRAINING_STEPS, add_reference, reference
from fault_support import (
    Outcome,
    differing_arrays,
    failing_reads,
    h5_arrays,
    kill_moment,
    leftovers,
    moments,
    one_line_error,
    record,
    reproduce,
    run_script,
    scalars,
)

FINETUNING = ("run_classifier", "run_token_classifier")


def plan(campaign, inputs):
    for command in ("run_pretraining",) + FINETUNING:
        add_reference(campaign, command, inputs)
        for moment in moments(command):
            campaign.add((command, "kill", moment), _kill, campaign, command, moment)
    campaign.add(("run_classifier", "read error"), _read_error, campaign, inputs)


def _json(path):
    with open(path) as f:
        return json.load(f)


def _pretraining_differences(output, ref):
    from train_support import checkpoint_values

    final = [
        checkpoint_values(os.path.join(d, "checkpoints", f"ckpt-{PRETRAINING_STEPS}"))
        for d in (output, ref)
    ]
    differences = [f"checkpoint {n}" for n in differing_arrays(*final)]
    exported = [
        h5_arrays(os.path.join(d, "export", "pretrainer.weights.h5")) for d in (output, ref)
    ]
    differences += [f"export {n}" for n in differing_arrays(*exported)]
    if _json(os.path.join(output, "eval_results.json")) != _json(
        os.path.join(ref, "eval_results.json")
    ):
        differences.append("eval_results.json")
    history = [scalars(os.path.join(d, "summaries", "eval")) for d in (output, ref)]
    if history[0] != history[1]:
        differences.append(
            f"evaluation history (summaries/eval): steps "
            f"{sorted({s for _, s in history[0]})} vs "
            f"{sorted({s for _, s in history[1]})}"
        )
    return differences


def _finetuning_differences(output, ref):
    from finetune_support import checkpoint_values

    final = [
        checkpoint_values(os.path.join(d, "checkpoints", f"ckpt-{FINETUNE_STEPS}"))
        for d in (output, ref)
    ]
    differences = [f"checkpoint {n}" for n in differing_arrays(*final)]
    for name in ("best.weights.h5", "model.keras"):
        arrays = [h5_arrays(os.path.join(d, name)) for d in (output, ref)]
        differences += [f"{name} {n}" for n in differing_arrays(*arrays)]
    if _json(os.path.join(output, "eval_results.json")) != _json(
        os.path.join(ref, "eval_results.json")
    ):
        differences.append("eval_results.json (evaluation history and best)")
    info = [_json(os.path.join(d, "finetune.json")) for d in (output, ref)]
    if len({json.dumps([i["step"], i["best"], i["task"]]) for i in info}) > 1:
        differences.append("finetune.json")
    for name in sorted(os.listdir(ref)):
        if name.endswith((".tsv", ".txt")):
            with (
                open(os.path.join(output, name), "rb") as a,
                open(os.path.join(ref, name), "rb") as b,
            ):
                if a.read() != b.read():
                    differences.append(name)
    return differences


def _kill(campaign, command, moment):
    ref = reference(campaign, command)
    output = str(campaign.mkdir(f"{command}_killed") / "run")
    at = kill_moment(command, moment, ref.cpu)
    killed = run_script(ref.script, ref.args(output), kill_at=at)
    rerun = run_script(ref.script, ref.args(output))
    problems, left = [], leftovers(output, ref.output)
    if rerun.code != 0:
        problems.append(f"the re-run failed: {rerun.describe()}")
    else:
        compare = (
            _pretraining_differences if command == "run_pretraining" else _finetuning_differences
        )
        differences = compare(output, ref.output)
        if differences:
            problems.append(f"differs from the uninterrupted run: {differences}")
    problems += [f"left behind: {left}"] if left else []
    record(
        command,
        kills=1,
        landed=killed.killed,
        recovered=rerun.code == 0,
        identical=rerun.code == 0 and not [p for p in problems if p.startswith("differs")],
        left_behind=len(left),
    )
    return Outcome(
        problems,
        f"{reproduce(command, moment)}; killed at {at:.2f} of {ref.cpu:.2f}"
        f" CPU-s\n{killed.describe(1500)}",
    )


def _read_error(campaign, inputs):
    """run_classifier on a training file that fails with EIO after 12 KiB, into the output
    directory of a finished run, which must stay as it was."""
    ref = reference(campaign, "run_classifier")
    directory = campaign.mkdir("run_classifier_read_error")
    train = directory / "train.tsv"  # over 12 KiB: the rows again and again
    with open(inputs["tsv"]["train"], encoding="utf-8") as f:
        header, *rows = f.readlines()
    train.write_text(header + "".join(rows * 4), encoding="utf-8")
    with failing_reads(str(directory), [str(train)]) as copies:
        if copies is None:
            return None
        output = str(directory / "run")
        shutil.copytree(ref.output, output)
        before = sorted(os.listdir(output))
        args = [a for a in ref.args(output) if not a.startswith("--train_file=")]
        run = run_script(ref.script, args + [f"--train_file={copies[str(train)]}"])
    problems = one_line_error(run, copies[str(train)])
    if sorted(os.listdir(output)) != before:
        problems.append(f"the output directory changed: {sorted(os.listdir(output))}")
    problems += [
        f"{name} changed"
        for name in ("eval_results.json", "finetune.json")
        if _json(os.path.join(output, name)) != _json(os.path.join(ref.output, name))
    ]
    record("run_classifier", faults=1, handled=not problems)
    return Outcome(problems, run.describe())


@pytest.mark.parametrize(
    "command, moment",
    [
        (command, moment)
        for command in ("run_pretraining",) + FINETUNING
        for moment in moments(command)
    ],
)
def test_killed_then_resumed_equals_uninterrupted(campaign, command, moment):
    outcome = campaign.result((command, "kill", moment))
    assert not outcome.problems, str(outcome)


def test_read_error_in_the_middle_of_the_training_file(campaign):
    outcome = campaign.result(("run_classifier", "read error"))
    if outcome is None:
        pytest.skip("cannot mount an ext2 image here (needs root, mount, mkfs.ext2, debugfs)")
    assert not outcome.problems, str(outcome)
