"""The command line of every script: bad flags and expected errors as one line, exit codes.

A script defines its flags and `main(argv)`, then:

    if __name__ == "__main__":
        cli.run(main)

`run` parses the flags (an unknown flag, a bad value, a missing required flag or a failed
validator is reported first, as `script.py: error: ...`, not after the help text), refuses
positional arguments and calls `main`. Exit codes:

- 0: done.
- 1: a bad flag, input file, line or setting, or an output that cannot be written; stderr ends
  with one line `script.py: error: ...` naming the flag, file or line (no traceback). These are
  `albert_tf.errors.UserError` (DataError, InvalidFlagError, ConversionError, StrategyError, ...),
  `app.UsageError`, missing, unreadable or unwritable files (FileNotFoundError, PermissionError,
  FileExistsError, IsADirectoryError, NotADirectoryError; OSError ENOSPC, EROFS, EACCES, EIO,
  EDQUOT, EFBIG) and TensorFlow's file errors (NotFound, PermissionDenied, DataLoss, and others that
  report a full disk, a read error or a path that is not a directory).
- 3: training diverged (a NaN or Inf loss, or one above --max_loss) more often in a row than
  --max_consecutive_recoveries allows (`albert_tf.train.controller.NonFiniteLossError`).
- 143: stopped by SIGTERM or Ctrl-C after saving a checkpoint; re-run the same command to resume.

Any other exception is a bug and keeps its traceback (exit code 1).

The scripts set TF_CPP_MIN_LOG_LEVEL=3 unless it is set already, which hides TensorFlow's C++ log
(start-up lines such as "failed call to cuInit"); TF_CPP_MIN_LOG_LEVEL=0 shows it all. absl's
Python log (the progress lines) is not affected.

Failing fast: the scripts also set ALBERT_TF_LIGHT_IMPORT=1 (unless it is set), so importing
albert_tf loads no TensorFlow (`albert_tf.SERIALIZABLE_MODULES`), and import the modules that need
it inside `main`, which first checks the flags and the local input paths they name
(`albert_tf.input_paths`) and then, in the scripts that build or load models, calls
`load_tensorflow()`. A flag or path error comes within a second of start-up, not after
TensorFlow's import (seconds); TensorFlow's start-up log is filtered wherever it loads.
"""

import errno
import os
import re
import sys

from absl import app, flags, logging

from albert_tf import files
from albert_tf.errors import UserError

PREEMPTED_EXIT_CODE = 143
NON_FINITE_LOSS_EXIT_CODE = 3

_OS_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EIO, errno.EDQUOT, errno.EFBIG)
_OS_ERRORS = (
    FileNotFoundError,
    PermissionError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
)
# absl's message for a flag marked as required.
_REQUIRED = re.compile(r"flag --(\w+)=None: Flag --\1 must have a value other than None\.")
# TensorFlow errors that are always about a file, and messages that make others so.
_TF_FILE_ERRORS = ("NotFoundError", "PermissionDeniedError", "DataLossError")
_TF_FILE_PROBLEM = re.compile(
    r"No space left on device|Read-only file system|Is a directory|"
    r"[Nn]ot a directory|Permission denied|No such file|"
    r"Input/output error|File too large|Disk quota exceeded"
)
# TensorFlow's decorations of an op's error: "{{function_node ...}} ", " [Op:SaveV2]", "[[...]]".
_TF_DECORATION = re.compile(r"\{\{[^}]*\}\}\s*|\s*\[Op:[^\]]*\]|\s*\[\[.*?\]\]")
# A hidden staging path (`albert_tf.files.temporary_path`: .tmp-<name>-<pid>-<8 hex>, perhaps
# with a suffix) and what follows it inside a staged directory: named as the target instead.
_STAGING_PATH = re.compile(
    re.escape(files.TEMPORARY_PREFIX) + r"([^/\s;:'\"]+?)-\d+-[0-9a-f]{8}"
    r"[^/\s;:'\",]*(?:/[^\s;:'\",]*)?"
)


def script_name():
    """The running script's file name (`run_classifier.py`), the prefix of its error lines."""
    return os.path.basename(sys.argv[0])


def fail(message, exit_code=1):
    """Prints `script.py: error: message` on stderr and exits with `exit_code`."""
    print(f"{script_name()}: error: {message}", file=sys.stderr)
    sys.exit(exit_code)


def positive_ints(flag, values):
    """A comma-list flag's `values` as positive integers, or the one-line error naming `--flag`."""
    try:
        numbers = [int(value) for value in values]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 1:
        fail(f"--{flag} must be a comma list of positive integers, got {','.join(values)!r}")
    return numbers


def parse_flags_or_fail(argv):
    """absl's flag parser, with a bad flag reported first and in one line (no help text)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        message = _REQUIRED.sub(r"--\1 is required", _one_line(str(e)))
        fail(f"{message} (see --helpfull)")


def _raised(error, module, name):
    """Whether `error` is a `module.name`, without importing `module` (not loaded: it is not)."""
    cls = getattr(sys.modules.get(module), name, None)
    return isinstance(cls, type) and isinstance(error, cls)


def _one_line(text):
    return " ".join(_STAGING_PATH.sub(r"\1", text).split())


def _tensorflow_file_error(error):
    """The message of a TensorFlow error about the user's files, else None."""
    tf_errors = sys.modules.get("tensorflow.python.framework.errors_impl")
    if tf_errors is None or not isinstance(error, tf_errors.OpError):
        return None
    message = _TF_DECORATION.sub("", error.message or "").strip()
    if type(error).__name__ in _TF_FILE_ERRORS or _TF_FILE_PROBLEM.search(message):
        return message.splitlines()[0] if message else type(error).__name__
    return None


def error_message(error, expected=()):
    """The one-line message of an expected error (the user's to fix), or None for a bug.
    `expected`: further exception types that are the user's to fix where this is called."""
    if isinstance(error, (UserError, app.UsageError) + tuple(expected)):
        message = str(error)
    elif isinstance(error, _OS_ERRORS) or (
        isinstance(error, OSError) and error.errno in _OS_ERRNOS
    ):
        message = str(error)
        if error.filename is not None and error.strerror:
            message = f"{error.filename}: {error.strerror}"
            if error.filename2 is not None:
                message += f" ({error.filename2})"
    else:
        message = _tensorflow_file_error(error)
        if message is None:
            return None
    return _one_line(message) or type(error).__name__


def _checked(main, expected):
    """`main`, with positional arguments refused and its expected errors turned into exits."""

    def checked_main(argv):
        if len(argv) > 1:
            fail(f"unexpected arguments: {' '.join(argv[1:])}")
        try:
            return main(argv)
        except Exception as e:
            if _raised(e, "albert_tf.train.checkpointing", "Preempted"):
                logging.warning("%s; re-run the same command to resume", e)
                sys.exit(PREEMPTED_EXIT_CODE)
            if _raised(e, "albert_tf.train.controller", "NonFiniteLossError"):
                fail(_one_line(str(e)), NON_FINITE_LOSS_EXIT_CODE)
            message = error_message(e, expected)
            if message is None:
                raise
            fail(message)

    return checked_main


def load_tensorflow():
    """Imports TensorFlow and the modules of albert_tf's Keras classes, as a bare `import
    albert_tf` does: what `main` calls once the flags and input paths are checked."""
    import albert_tf

    albert_tf.register_serializable_classes()


def run(main, expected=()):
    """`absl.app.run(main)` with the flag and error handling of this module's docstring.

    `expected`: further exception types that `main`'s library calls raise for bad input (e.g.
    ValueError where every ValueError they raise names a bad flag or file), reported in one line.
    """
    app.run(_checked(main, expected), flags_parser=parse_flags_or_fail)
