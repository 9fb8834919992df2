"""Running scripts/convert_checkpoint.py in a subprocess, for the conversion tests."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "convert_checkpoint.py")


def run_convert(*flags):
    """scripts/convert_checkpoint.py with `flags`; the CompletedProcess (text output)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, SCRIPT, *flags], capture_output=True, text=True,
                          env=env, timeout=300)
