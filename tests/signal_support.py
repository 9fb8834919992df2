"""Interrupting a script run mid-way, for the resume tests of pretraining and fine-tuning."""

import os
import threading
import time


def cpu_seconds(pid):
    """User + system CPU seconds of a running process (all its threads), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _signal_after_cpu(process, seconds, sig):
    """Sends `sig` to `process` once it has used `seconds` more CPU time than now (load on the
    machine does not move the moment), unless it ends first."""
    start = cpu_seconds(process.pid)
    while process.poll() is None and start is not None:
        used = cpu_seconds(process.pid)
        if used is not None and used - start >= seconds:
            process.send_signal(sig)
            return
        time.sleep(0.005)


def run_until(process, marker, sig, timeout=300, after_cpu_seconds=None):
    """Reads the text stderr of `process` (a Popen); sends `sig` once a line contains `marker`,
    or, with `after_cpu_seconds`, once the process has used that much more CPU time after it.

    Returns (exit code, whole stderr). The signal is sent once, for the first matching line.
    """
    log, sent, signaller = [], False, None
    for line in process.stderr:
        log.append(line)
        if not sent and marker in line:
            sent = True
            if after_cpu_seconds is None:
                process.send_signal(sig)
            else:
                signaller = threading.Thread(
                    target=_signal_after_cpu, args=(process, after_cpu_seconds, sig)
                )
                signaller.start()
    code = process.wait(timeout=timeout)
    if signaller is not None:
        signaller.join()
    return code, "".join(log)
