"""Fixtures of the fault-injection tests: tiny inputs and the session's `Campaign`, which runs the
scripts of every selected test module in background threads (the module's `plan(campaign,
inputs)` adds its jobs); the figures of the session are printed at the end.

The helpers of the resume tests (tests/train/train_support.py, tests/finetune/finetune_support.py)
are reused: their folders are put on sys.path here.
"""

import os
import sys

import pytest

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _folder in ("train", "finetune"):
    if os.path.join(_TESTS, _folder) not in sys.path:
        sys.path.insert(0, os.path.join(_TESTS, _folder))

import fault_support  # noqa: E402
from fault_commands import make_inputs  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    if fault_support.TALLY:
        terminalreporter.section("fault injection")
        for line in fault_support.summary_lines():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def fault_inputs(tmp_path_factory, corpus_file, spm_model_file):
    """Tiny inputs of every command (see fault_commands.make_inputs)."""
    return make_inputs(tmp_path_factory.mktemp("fault_inputs"), corpus_file, spm_model_file)


@pytest.fixture(scope="session")
def campaign(request, fault_inputs, tmp_path_factory):
    """The jobs of every test module with a selected test that uses this fixture, started."""
    modules = []
    for item in request.session.items:
        if "campaign" in getattr(item, "fixturenames", ()) and item.module not in modules:
            modules.append(item.module)
    jobs = fault_support.Campaign(tmp_path_factory.mktemp)
    for module in modules:
        module.plan(jobs, fault_inputs)
    jobs.start()
    yield jobs
    jobs.close()
