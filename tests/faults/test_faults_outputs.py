"""Commands that write a model directory next to or over a good earlier one, under faults.

export_saved_model adds version N+1 beside version 1: SIGKILL at a seeded moment never leaves a
half-written version visible, version 1 stays unchanged and loadable, and the same command again
publishes a complete version equal to the uninterrupted export. convert_checkpoint into an
existing model directory (another model): at every moment checked the directory is the whole
earlier model or the whole new one, and the re-run gives the uninterrupted conversion. Disk full
and a read-only output directory end as one-line errors with the earlier output intact.
"""

import os
import shutil

import pytest
from fault_commands import add_reference, reference
from fault_support import (
    Outcome,
    kill_moment,
    leftovers,
    moments,
    nearly_full_copy,
    one_line_error,
    pinned_snapshot,
    read_only_copy,
    record,
    reproduce,
    run_script,
    snapshot,
)

EXPORT, CONVERT = "export_saved_model", "convert_checkpoint"
VERSION_FILES = (
    "saved_model.pb",
    "fingerprint.pb",
    "variables/variables.index",
    "variables/variables.data-00000-of-00001",
    "assets.extra/albert_tf.json",
)
FAULTS = ("disk full", "read-only")


def plan(campaign, inputs):
    for command in (EXPORT, CONVERT):  # in the order of the tests below
        add_reference(campaign, command, inputs)
        for moment in moments(command):
            campaign.add((command, "kill", moment), _kill, campaign, command, moment, inputs)
    for command in (EXPORT, CONVERT):
        for fault in FAULTS:
            campaign.add((command, fault), _fault, campaign, command, fault, inputs)


# ----------------------------------------------------------------------------- export
def _versions(export_dir):
    return sorted(int(n) for n in os.listdir(export_dir) if n.isdigit())


def _export_problems(export_dir, first):
    """Version 1 must equal `first` (a snapshot); every other visible version must be whole."""
    problems = []
    if snapshot(os.path.join(export_dir, "1")) != first:
        problems.append("version 1 changed")
    for name in os.listdir(export_dir):
        if name.isdigit() and name != "1":
            missing = [
                f for f in VERSION_FILES if not os.path.exists(os.path.join(export_dir, name, f))
            ]
            if missing:
                problems.append(f"version {name} is visible without {missing}")
        elif not name.isdigit() and not name.startswith("."):
            problems.append(f"a stray entry beside the versions: {name}")
    return problems


def _saved_model_problems(path):
    """Problems loading a SavedModel in this process (none when it loads and serves)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece ops of the export)

    try:
        outputs = tf.saved_model.load(path).signatures["serving_default"](
            text=tf.constant(["A sentence."])
        )
    except Exception as e:  # noqa: BLE001 - reported as the problem
        return [f"{path} does not load: {type(e).__name__}: {str(e)[:300]}"]
    return [] if "probabilities" in outputs else [f"{path} serves {sorted(outputs)}"]


def _weights(version_dir):
    """The float variables of a SavedModel, sorted by shape and value: an export names them by
    their order of tracking, which differs from process to process."""
    from train_support import checkpoint_values

    values = checkpoint_values(os.path.join(version_dir, "variables", "variables")).values()
    return sorted((v.shape, v.tobytes()) for v in values if v.dtype.kind == "f")


def _kill_export(ref, at, output):
    first = snapshot(os.path.join(ref.output, "1"))
    shutil.copytree(ref.output, output)
    seen = set()
    killed = run_script(
        ref.script,
        ref.args(output),
        kill_at=at,
        watch=lambda: seen.update(_export_problems(output, first)),
    )
    problems = sorted(seen | set(_export_problems(output, first)))
    problems += _saved_model_problems(os.path.join(output, "1"))
    before = _versions(output)
    rerun = run_script(ref.script, ref.args(output))
    identical = False
    if rerun.code != 0:
        problems.append(f"the re-run failed: {rerun.describe()}")
    elif _versions(output) != before + [before[-1] + 1]:
        problems.append(f"versions {before} after the kill, {_versions(output)} after the re-run")
    else:
        new = os.path.join(output, str(before[-1] + 1))
        same = _weights(new) == _weights(os.path.join(ref.output, "1"))
        identical = same and not _export_problems(output, first)
        problems += [] if same else [f"the weights of {new} differ from the uninterrupted export"]
        problems += _export_problems(output, first)
    return killed, rerun, identical, problems


# ----------------------------------------------------------------------------- convert
def _kill_convert(ref, at, output, earlier_dir):
    earlier, new = snapshot(earlier_dir), snapshot(ref.output)
    shutil.copytree(earlier_dir, output)
    seen = set()

    def check():
        state = pinned_snapshot(output)  # the watcher must not mix the two sides of the swap
        state = None if state is None else {k: v for k, v in state.items() if k[:1] != "."}
        if state not in (earlier, new):
            seen.add(
                f"the directory is neither the whole earlier model nor the whole new one: "
                f"{sorted(state or {})} ({'mixed' if state else 'missing'})"
            )

    killed = run_script(ref.script, ref.args(output), kill_at=at, watch=check)
    check()
    rerun = run_script(ref.script, ref.args(output))
    problems = sorted(seen)
    identical = rerun.code == 0 and snapshot(output) == new
    if rerun.code != 0:
        problems.append(f"the re-run failed: {rerun.describe()}")
    elif not identical:
        problems.append(f"differs from the uninterrupted conversion: {sorted(snapshot(output))}")
    return killed, rerun, identical, problems


def _kill(campaign, command, moment, inputs):
    ref = reference(campaign, command)
    output = str(campaign.mkdir(f"{command}_killed") / os.path.basename(ref.output))
    at = kill_moment(command, moment, ref.cpu)
    if command == EXPORT:
        killed, rerun, identical, problems = _kill_export(ref, at, output)
    else:
        killed, rerun, identical, problems = _kill_convert(ref, at, output, inputs["other"])
    left = leftovers(output, ref.output)
    if command == EXPORT:  # versions come and go: only hidden or stray names are leftovers
        left = [p for p in left if not p.split("/")[0].isdigit()]
    problems += [f"left behind: {left}"] if left else []
    record(
        command,
        kills=1,
        landed=killed.killed,
        recovered=rerun.code == 0,
        identical=identical,
        left_behind=len(left),
    )
    return Outcome(
        problems,
        f"{reproduce(command, moment)}; killed at {at:.2f} of {ref.cpu:.2f}"
        f" CPU-s\n{killed.describe(1500)}",
    )


# ----------------------------------------------------------------------------- faults
def _fault(campaign, command, fault, inputs):
    """Disk full or a read-only output directory holding a good earlier output."""
    ref = reference(campaign, command)
    earlier_dir = ref.output if command == EXPORT else inputs["other"]
    earlier = snapshot(earlier_dir)
    mountpoint = str(campaign.mkdir(f"{command}_{fault.replace(' ', '_')}") / "mnt")
    if fault == "disk full":
        with nearly_full_copy(earlier_dir, mountpoint) as (output, limit):
            run = run_script(ref.script, ref.args(output), file_size_limit=limit)
            return _failed(command, run, output, earlier, output)
    with read_only_copy(earlier_dir, mountpoint) as output:
        run = run_script(ref.script, ref.args(output))
        # The error names the output or, below a regular file (no mount), that file.
        return _failed(
            command,
            run,
            output,
            earlier if os.path.isdir(output) else None,
            os.path.dirname(output),
        )


def _failed(command, run, output, earlier, name):
    """One-line error naming `name`; `output` still holds `earlier`, no hidden leftovers."""
    problems = one_line_error(run, name)
    if earlier is not None and snapshot(output) != earlier:
        problems.append(f"the earlier output changed: {sorted(snapshot(output))}")
    if os.path.isdir(output):
        problems += [f"left behind: {n}" for n in os.listdir(output) if n.startswith(".")]
    record(command, faults=1, handled=not problems)
    return Outcome(problems, run.describe())


@pytest.mark.parametrize(
    "command, moment",
    [(command, moment) for command in (EXPORT, CONVERT) for moment in moments(command)],
)
def test_killed_over_a_good_output_then_rerun(campaign, command, moment):
    outcome = campaign.result((command, "kill", moment))
    assert not outcome.problems, str(outcome)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", (EXPORT, CONVERT))
def test_fault_ends_in_one_line_and_keeps_the_earlier_output(campaign, command, fault):
    outcome = campaign.result((command, fault))
    assert not outcome.problems, str(outcome)
