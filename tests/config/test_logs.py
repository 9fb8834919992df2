"""albert_tf.logs.show_progress: INFO lines from plain Python, never twice under app.run."""

import logging

import pytest
from absl import flags
from absl import logging as absl_logging

from albert_tf.logs import show_progress


@pytest.fixture
def plain_python(monkeypatch):
    """Logging as a fresh `python program.py` has it: no handler, absl verbosity untouched."""
    verbosity = flags.FLAGS["verbosity"]
    monkeypatch.setattr(verbosity, "value", -1)  # absl's default (WARNING); restored after
    monkeypatch.setattr(verbosity, "using_default_value", True)
    monkeypatch.setattr(logging.root, "handlers", [])
    return verbosity


def test_plain_python_shows_info_lines_once(plain_python, capsys):
    absl_logging.info("before")
    assert capsys.readouterr().err == ""
    logging.root.handlers.clear()  # absl's own basicConfig() for that call
    show_progress()
    show_progress()  # idempotent: one handler
    absl_logging.info("step %d/%d", 1, 2)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("I") and lines[0].endswith("] step 1/2")
    assert len(logging.root.handlers) == 1


def test_under_app_run_nothing_changes(plain_python, capsys):
    handlers = [absl_logging.get_absl_handler()]  # what app.run's use_absl_handler installs
    logging.root.handlers[:] = handlers
    show_progress()
    assert logging.root.handlers == handlers and plain_python.using_default_value


def test_a_verbosity_chosen_by_the_caller_is_kept(plain_python, capsys):
    absl_logging.set_verbosity(absl_logging.WARNING)
    show_progress()
    absl_logging.info("hidden")
    assert "hidden" not in capsys.readouterr().err
    assert plain_python.value == absl_logging.WARNING
