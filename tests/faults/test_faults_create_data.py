"""create_pretraining_data under faults: SIGKILL at seeded moments, then the same command gives
byte-identical records and summary (its timings aside); disk full, a read-only output directory
and a read error in the middle of the corpus end as one-line errors. An earlier good output at
the same paths is never replaced by a partial one: every shard a reader sees, at every moment
checked, is a whole file of the earlier run or of the new one."""

import os
import shutil

import pytest
from fault_commands import add_reference, reference
from fault_support import (
    TEMPORARY,
    Outcome,
    failing_reads,
    json_without,
    kill_moment,
    leftovers,
    moments,
    nearly_full_copy,
    one_line_error,
    read_only_copy,
    record,
    reproduce,
    run_script,
    snapshot,
)

COMMAND = "create_pretraining_data"
TIMINGS = ("seconds", "instances_per_second")
SUMMARY = "train.summary.json"


def visible(directory):
    """What a reader of the output sees: {name: content} of every non-hidden file (the summary
    without its timings, its output files by name)."""
    state = snapshot(directory, ignore=(SUMMARY,))
    if os.path.exists(os.path.join(directory, SUMMARY)):
        summary = json_without(os.path.join(directory, SUMMARY), *TIMINGS)
        summary["outputs"] = {os.path.basename(k): v for k, v in summary["outputs"].items()}
        state[SUMMARY] = summary
    return {name: value for name, value in state.items() if not name.startswith(".")}


def partial_files(directory, *good):
    """Visible files of `directory` that are in none of the `good` states (a partial shard, a
    summary of another run, a stray name)."""
    state = visible(directory)
    return sorted(n for n, v in state.items() if all(g.get(n) != v for g in good))


def plan(campaign, inputs):
    add_reference(campaign, COMMAND, inputs)
    campaign.add((COMMAND, "earlier"), _earlier, campaign, reference=True)
    for moment in moments(COMMAND):
        campaign.add((COMMAND, "kill", moment), _kill, campaign, moment)
    for name, fault in FAULTS.items():
        campaign.add((COMMAND, name), fault, campaign, inputs)


def _earlier(campaign):
    """A good earlier output at the same paths (another --random_seed)."""
    ref = reference(campaign, COMMAND)
    output = str(campaign.mkdir("data_earlier") / "data")
    run = run_script(ref.script, ref.args(output, seed=7))
    assert run.code == 0, run.describe()
    return output


def _kill(campaign, moment):
    ref, earlier_dir = reference(campaign, COMMAND), campaign.result((COMMAND, "earlier"))
    new, earlier = visible(ref.output), visible(earlier_dir)
    assert new.keys() == earlier.keys() and new != earlier
    output = str(campaign.mkdir("data_killed") / "data")
    shutil.copytree(earlier_dir, output)
    seen = set()
    at = kill_moment(COMMAND, moment, ref.cpu)
    killed = run_script(
        ref.script,
        ref.args(output),
        kill_at=at,
        watch=lambda: seen.update(partial_files(output, earlier, new)),
    )
    seen.update(partial_files(output, earlier, new))
    rerun = run_script(ref.script, ref.args(output))
    left = leftovers(output, ref.output)
    problems = [f"partial or stray output visible: {sorted(seen)}"] if seen else []
    if rerun.code != 0:
        problems.append(f"the re-run failed: {rerun.describe()}")
    elif visible(output) != new:
        problems.append(f"differs from the uninterrupted run: {partial_files(output, new)}")
    problems += [f"left behind: {left}"] if left else []
    record(
        COMMAND,
        kills=1,
        landed=killed.killed,
        recovered=rerun.code == 0,
        identical=rerun.code == 0 and visible(output) == new,
        left_behind=len(left),
    )
    return Outcome(
        problems,
        f"{reproduce(COMMAND, moment)}; killed at {at:.2f} of {ref.cpu:.2f}"
        f" CPU-s\n{killed.describe(1500)}",
    )


def _failed(run, output, earlier, *names):
    """One-line error naming `names`; `output` still holds exactly `earlier`, no staging file."""
    problems = one_line_error(run, *names)
    if earlier is not None and visible(output) != earlier:
        problems.append(f"the earlier output changed: {partial_files(output, earlier)}")
    if os.path.isdir(output):
        problems += [f"left behind: {n}" for n in os.listdir(output) if n.startswith(TEMPORARY)]
    record(COMMAND, faults=1, handled=not problems)
    return Outcome(problems, run.describe())


def _disk_full(campaign, inputs):
    ref, earlier = reference(campaign, COMMAND), campaign.result((COMMAND, "earlier"))
    with nearly_full_copy(earlier, str(campaign.mkdir("data_disk_full") / "disk")) as (
        output,
        limit,
    ):
        run = run_script(ref.script, ref.args(output), file_size_limit=limit)
        return _failed(run, output, visible(earlier), output)


def _read_only(campaign, inputs):
    ref, earlier = reference(campaign, COMMAND), campaign.result((COMMAND, "earlier"))
    with read_only_copy(earlier, str(campaign.mkdir("data_read_only") / "ro")) as output:
        run = run_script(ref.script, ref.args(output))
        # The error names the output or, below a regular file (no mount), that file.
        return _failed(
            run,
            output,
            visible(earlier) if os.path.isdir(output) else None,
            os.path.dirname(output),
        )


def _read_error(campaign, inputs):
    ref, earlier = reference(campaign, COMMAND), campaign.result((COMMAND, "earlier"))
    directory = campaign.mkdir("data_read_error")
    with failing_reads(str(directory), [inputs["corpus"]]) as copies:
        if copies is None:
            return None
        output = str(directory / "data")
        shutil.copytree(earlier, output)
        args = [a for a in ref.args(output) if not a.startswith("--input_file=")]
        run = run_script(ref.script, args + [f"--input_file={copies[inputs['corpus']]}"])
        return _failed(run, output, visible(earlier), copies[inputs["corpus"]])


@pytest.mark.parametrize("moment", moments(COMMAND))
def test_killed_then_rerun_gives_identical_records(campaign, moment):
    outcome = campaign.result((COMMAND, "kill", moment))
    assert not outcome.problems, str(outcome)


FAULTS = {"disk full": _disk_full, "read-only": _read_only, "read error": _read_error}


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_ends_in_one_line_and_keeps_the_earlier_output(campaign, fault):
    outcome = campaign.result((COMMAND, fault))
    if outcome is None:
        pytest.skip("cannot mount an ext2 image here (needs root, mount, mkfs.ext2, debugfs)")
    assert not outcome.problems, str(outcome)
