"""Progress lines from the Python API: absl INFO logging on stderr outside `absl.app.run`.

`app.run` (every script) installs absl's handler and raises the verbosity to INFO. A plain
Python program that calls the library has neither: absl then shows only warnings, so a
training run prints nothing. `show_progress()`, called by the long-running entry points, does
what `app.run` would, once, unless absl's handler is already installed or the caller chose a
verbosity (`absl.logging.set_verbosity`).
"""

import logging
import sys

from absl import flags
from absl import logging as absl_logging


class _StderrHandler(logging.StreamHandler):
    """A handler writing to the `sys.stderr` of the moment (it may be replaced after set-up)."""

    def __init__(self):
        super().__init__(sys.stderr)
        self.setFormatter(absl_logging.PythonFormatter())

    def emit(self, record):
        self.setStream(sys.stderr)
        super().emit(record)


def show_progress():
    """Makes absl INFO lines visible on stderr when running outside `app.run`.

    Does nothing under `app.run` (absl's handler is installed) or when the verbosity was set by
    the caller. Otherwise sets it to INFO, and, when no logging handler exists at all, adds one
    writing absl-formatted lines to stderr (`app.run`'s `use_absl_handler` removes it again, so
    nothing is printed twice).
    """
    if (
        absl_logging.get_absl_handler() in logging.root.handlers
        or not flags.FLAGS["verbosity"].using_default_value
    ):
        return
    absl_logging.set_verbosity(absl_logging.INFO)
    if not logging.root.handlers:
        logging.root.addHandler(_StderrHandler())
