"""Runs script command lines, or imports modules, in a process where importing TensorFlow fails.

    python without_tensorflow.py run SCRIPT '[[ARG, ...], ...]'   one forked child per command
    python without_tensorflow.py import MODULE ...

An import of tensorflow, keras, tensorflow_text or tensorflow_datasets raises ImportError and is
recorded, so one that a script catches is seen too. `run` prints one JSON line: per command
line, the exit code, stdout, stderr, the blocked imports and the seconds it took (from the
fork; the interpreter's start-up is shared). `import` prints the blocked imports as JSON (an
import that fails exits with its traceback).
Nothing of albert_tf is imported before a child runs the script: the script's own start decides.
"""

import json
import os
import runpy
import sys
import tempfile
import time

BLOCKED = ("tensorflow", "keras", "tensorflow_text", "tensorflow_datasets")


class _Blocker:
    def __init__(self):
        self.attempts = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            self.attempts.append(name)
            raise ImportError(f"{name} is imported before the flags and paths are checked")
        return None


def _child(script, args, directory, blocker):
    """Runs `script` with `args` as `python script args` would; never returns."""
    out = os.open(os.path.join(directory, "out"), os.O_WRONLY | os.O_CREAT)
    err = os.open(os.path.join(directory, "err"), os.O_WRONLY | os.O_CREAT)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.argv = [script, *args]
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # a traceback on stderr, as Python would print it
        import traceback

        traceback.print_exc()
        code = 1
    with open(os.path.join(directory, "imports"), "w") as f:
        json.dump(blocker.attempts, f)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(script, commands, blocker):
    import absl.app  # noqa: F401  (shared by the children: loaded once)
    import absl.flags  # noqa: F401
    import numpy  # noqa: F401

    results = []
    for args in commands:
        with tempfile.TemporaryDirectory() as directory:
            began = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                _child(script, args, directory, blocker)
            _, status = os.waitpid(pid, 0)
            seconds = time.perf_counter() - began
            read = {}
            for name in ("out", "err", "imports"):
                path = os.path.join(directory, name)
                read[name] = open(path).read() if os.path.exists(path) else ""
        results.append(
            {
                "args": args,
                "code": os.waitstatus_to_exitcode(status),
                "stdout": read["out"],
                "stderr": read["err"],
                "blocked": json.loads(read["imports"] or "[]"),
                "seconds": seconds,
            }
        )
    print(json.dumps(results))


def main():
    blocker = _Blocker()
    sys.meta_path.insert(0, blocker)
    if sys.argv[1] == "run":
        run(sys.argv[2], json.loads(sys.argv[3]), blocker)
    else:
        for module in sys.argv[2:]:
            __import__(module)
        print(json.dumps(blocker.attempts))


if __name__ == "__main__":
    main()
