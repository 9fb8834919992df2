"""Running the scripts, and snippets that load them, in a fresh Python as a user does."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(*args, env=None):
    """`python *args` in the repository, with the scripts' own TF_CPP_MIN_LOG_LEVEL default."""
    full_env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    full_env.update(KERAS_BACKEND="tensorflow", PYTHONPATH=REPO, **(env or {}))
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=full_env,
        timeout=300,
    )


def run(script, *args, env=None):
    """scripts/<script> with `args`."""
    return run_python(os.path.join(REPO, "scripts", script), *args, env=env)
