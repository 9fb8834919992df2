"""Interrupting a script run mid-way, for the resume tests of pretraining and fine-tuning."""


def run_until(process, marker, sig, timeout=300):
    """Reads the text stderr of `process` (a Popen); sends `sig` once a line contains `marker`.

    Returns (exit code, whole stderr). The signal is sent once, at the first matching line.
    """
    log, sent = [], False
    for line in process.stderr:
        log.append(line)
        if not sent and marker in line:
            process.send_signal(sig)
            sent = True
    return process.wait(timeout=timeout), "".join(log)
