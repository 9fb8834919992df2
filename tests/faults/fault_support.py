"""The fault-injection harness: run a script, SIGKILL it at a seeded random moment, inspect what
it left, and make disk-full, read-only and failing-read file systems.

Kill moments: moment i of command C is the fraction `Random(f"{seed}:{C}:{i}").random()` of the
CPU time of an uninterrupted run of C, counted in the killed process's own CPU time (so load on
the machine, or the other runs of the campaign, do not move where in the run it lands). The seed
is `$ALBERT_TF_FAULT_SEED`, else drawn once per session; every assertion message and the summary
print it. `$ALBERT_TF_FAULT_SOAK=N` runs N moments per command (default: `CI_MOMENTS`, 1 or 2).

`Campaign` runs the scripts of every selected test in a few background threads (the reference
runs first, then the other jobs in the order of the tests); the tests assert on each `Outcome`.

File systems (each needs root and `mount`; without it the fallback is named in the summary):
- disk full: a tmpfs just larger than what it holds; fallback RLIMIT_FSIZE on the child (Python
  ignores SIGXFSZ, so a write past the limit fails with EFBIG);
- read-only: a tmpfs remounted read-only (EROFS); fallback a path below a regular file (ENOTDIR);
- read error: an ext2 image mounted read-only whose file's indirect block pointer points past
  the end of the device, so reading stops with EIO after 12 KiB (no fallback: skipped).
"""

import collections
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

from signal_support import cpu_seconds

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOAK_ENV, SEED_ENV = "ALBERT_TF_FAULT_SOAK", "ALBERT_TF_FAULT_SEED"
SEED = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(1_000_000))
CI_MOMENTS = {"create_pretraining_data": 2, "convert_checkpoint": 2}  # the cheap ones; others 1
POLL_SECONDS = 0.02
EVENTS = re.compile(r"events\.out\.tfevents\.[^/]*$")
TEMPORARY = ".tmp-"


# ----------------------------------------------------------------------------- kill moments
def moments(command):
    """Indices of the kill moments of `command` (`$ALBERT_TF_FAULT_SOAK`, else CI_MOMENTS)."""
    return range(int(os.environ.get(SOAK_ENV) or CI_MOMENTS.get(command, 1)))


def kill_moment(command, index, cpu_seconds):
    """The seeded kill moment `index` of `command`: uniform in [0, cpu_seconds) of CPU time."""
    return random.Random(f"{SEED}:{command}:{index}").random() * cpu_seconds


def reproduce(command, index):
    """The line that repeats a moment, for assertion messages."""
    return (
        f"seed {SEED}, {command} moment {index}: repeat with {SEED_ENV}={SEED} "
        f"{SOAK_ENV}={index + 1} .venv/bin/python -m pytest tests/faults"
    )


# ----------------------------------------------------------------------------- tally
TALLY = collections.defaultdict(collections.Counter)
MECHANISMS = {}  # fault -> how it was made (tmpfs, rlimit, ...)
REFERENCE_CPU = {}  # command -> CPU seconds of its uninterrupted run
_LOCK = threading.Lock()


def record(command, **counts):
    """Adds to the session's figures of `command` (printed by tests/faults/conftest.py)."""
    with _LOCK:
        TALLY[command].update({k: int(v) for k, v in counts.items()})


def summary_lines():
    """The figures of the session: one line per command and the totals."""
    keys = ("kills", "landed", "recovered", "identical", "left_behind", "faults", "handled")
    total = collections.Counter()
    lines = []
    for command in sorted(TALLY):
        counts = TALLY[command]
        total.update(counts)
        cpu = (
            f" (uninterrupted: {REFERENCE_CPU[command]:.1f} CPU-s)"
            if command in REFERENCE_CPU
            else ""
        )
        lines.append(
            f"  {command}{cpu}: " + ", ".join(f"{k} {counts[k]}" for k in keys if k in counts)
        )
    lines.insert(
        0,
        f"fault injection (seed {SEED}): {total['landed']} SIGKILLs landed in "
        f"{total['kills']} kill moments, {total['recovered']} re-runs recovered, "
        f"{total['identical']} outputs identical to an uninterrupted run, "
        f"{total['left_behind']} files left behind; {total['faults']} disk-full/"
        f"read-only/read-error faults, {total['handled']} ended as one-line errors "
        f"with the previous output intact",
    )
    if MECHANISMS:
        lines.append("  made with: " + ", ".join(f"{k} {v}" for k, v in sorted(MECHANISMS.items())))
    return lines


# ----------------------------------------------------------------------------- the campaign
@dataclasses.dataclass
class Outcome:
    """What a job found: `problems` (empty when all held) and the context to reproduce it."""

    problems: list
    context: str

    def __str__(self):
        return f"{self.problems}\n{self.context}"


class Campaign:
    """Jobs run by `workers` threads: the reference runs first (longest commands first, see
    `PRIORITY`), then the other jobs in the order they were added, which is the order of the
    tests that wait for them (so no test waits long for its job, however long the soak). A job
    may wait for a reference run, never for a later job (no deadlock)."""

    PRIORITY = (
        "run_classifier",
        "run_token_classifier",
        "run_pretraining",
        "create_pretraining_data",
        "convert_checkpoint",
        "export_saved_model",
    )

    def __init__(self, mkdir, workers=3):
        self.mkdir = mkdir  # name -> a new empty directory (pathlib.Path)
        self.workers = workers
        self._jobs, self._futures, self._pool = {}, {}, None

    def add(self, key, function, *args, reference=False):
        """Adds job `key` = (command, ...) running function(*args), unless it exists."""
        if key not in self._jobs:
            order = (0, self.PRIORITY.index(key[0])) if reference else (1, len(self._jobs))
            self._jobs[key] = (order, function, args)

    def start(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, "fault-job")
        for key, (_, function, args) in sorted(self._jobs.items(), key=lambda kv: kv[1][0]):
            self._futures[key] = self._pool.submit(function, *args)

    def result(self, key):
        return self._futures[key].result()

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------------------- running scripts
@dataclasses.dataclass
class Run:
    """One script run: exit code (negative: killed by that signal), output, wall time and CPU
    time, and the CPU second it was killed at (None when it was not killed)."""

    command: list
    code: int
    stdout: str
    stderr: str
    seconds: float
    cpu: float
    killed_at: float = None

    @property
    def killed(self):
        return self.killed_at is not None and self.code == -signal.SIGKILL

    def describe(self, tail=3000):
        killed = f", SIGKILL at {self.killed_at:.2f} CPU-s" if self.killed_at is not None else ""
        return (
            f"exit {self.code} after {self.seconds:.1f}s ({self.cpu:.1f} CPU-s{killed}): "
            f"{' '.join(self.command[1:])}\n{self.stderr[-tail:]}"
        )


def _kill_group(pid):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_script(script, args, kill_at=None, watch=None, file_size_limit=None, timeout=300):
    """Runs scripts/<script> in its own process group; returns a `Run`.

    With `kill_at` (CPU seconds of the process: load on the machine does not move the moment)
    the group gets SIGKILL then, if still running (worker processes die with it). `watch()` is
    called every POLL_SECONDS while it runs; an exception from it kills the run and propagates.
    `file_size_limit` (bytes) makes any longer write of the process fail with EFBIG (Python
    ignores SIGXFSZ).
    """
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    command = [sys.executable, os.path.join(REPO, "scripts", script), *map(str, args)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.monotonic()
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True
        )
        if file_size_limit is not None:
            resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (file_size_limit,) * 2)
        killed_at = cpu = None
        try:
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    process.returncode = os.waitstatus_to_exitcode(status)
                    cpu = usage.ru_utime + usage.ru_stime
                    break
                used = cpu_seconds(process.pid)
                if (
                    killed_at is None
                    and kill_at is not None
                    and used is not None
                    and used >= kill_at
                ):
                    _kill_group(process.pid)
                    killed_at = used
                if time.monotonic() - began > timeout:
                    raise TimeoutError(f"{script} ran longer than {timeout}s")
                if watch is not None and killed_at is None:
                    watch()
                time.sleep(POLL_SECONDS)
        finally:
            _kill_group(process.pid)  # also ends workers left by a killed parent
            if process.returncode is None:
                process.wait(timeout=60)
        out.seek(0)
        err.seek(0)
        return Run(
            command,
            process.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            time.monotonic() - began,
            cpu,
            killed_at,
        )


def flag_list(**values):
    """--name=value flags (None left out, booleans as --name / --noname)."""
    return [
        (f"--{k}" if v else f"--no{k}") if isinstance(v, bool) else f"--{k}={v}"
        for k, v in values.items()
        if v is not None
    ]


def one_line_error(run, *names):
    """Problems with a failed run that must end as one error line naming each of `names`."""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    problems = []
    if run.code != 1:
        problems.append(f"exit code {run.code}, expected 1")
    if "Traceback" in run.stderr:
        problems.append("a traceback on stderr")
    if not re.match(r"^\S+: error: ", last):
        problems.append(f"the last stderr line is not 'script: error: ...': {last[:300]!r}")
    missing = [n for n in names if n not in last]
    if missing:
        problems.append(f"the error line does not name {missing}: {last[:300]!r}")
    if TEMPORARY in last:
        problems.append(f"the error line names a hidden staging path: {last[:300]!r}")
    return problems


# ----------------------------------------------------------------------------- inspecting outputs
def listing(directory):
    """Sorted relative paths under `directory` (directories end with "/"); TensorBoard event
    files, one more per process that wrote them, count as one entry per directory."""
    paths = set()
    for root, dirs, names in os.walk(directory):
        relative = os.path.relpath(root, directory)
        prefix = "" if relative == "." else relative + "/"
        paths.update(prefix + d + "/" for d in dirs)
        paths.update(prefix + (EVENTS.sub("events.out.tfevents.*", n)) for n in names)
    return sorted(paths)


def leftovers(directory, reference):
    """Entries of `directory` that an uninterrupted run (`reference`) does not have, any hidden
    staging file (`.tmp-`) in it, and staging siblings of it (`../.tmp-<name>-*`)."""
    extra = set(listing(directory)) - set(listing(reference))
    extra.update(p for p in listing(directory) if TEMPORARY in p)
    parent, name = os.path.split(os.path.abspath(directory))
    extra.update(f"../{n}" for n in os.listdir(parent) if n.startswith(f"{TEMPORARY}{name}-"))
    return sorted(extra)


def h5_arrays(path):
    """{dataset name: array} of an HDF5 file (Keras .weights.h5) or of a .keras archive's."""
    import h5py

    arrays = {}
    with contextlib.ExitStack() as stack:
        source = path
        if path.endswith(".keras"):
            archive = stack.enter_context(zipfile.ZipFile(path))
            source = stack.enter_context(archive.open("model.weights.h5"))
        f = stack.enter_context(h5py.File(source, "r"))
        f.visititems(
            lambda name, item: (
                arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return arrays


def fingerprint(path):
    """A digest of what a file holds: its arrays for HDF5/.keras files (whose bytes carry
    timestamps), else its bytes; "unreadable: ..." for a file that cannot be parsed."""
    digest = hashlib.sha256()
    try:
        if path.endswith((".h5", ".keras")):
            for name, value in sorted(h5_arrays(path).items()):
                digest.update(name.encode() + repr((value.dtype, value.shape)).encode())
                digest.update(value.tobytes())
        else:
            with open(path, "rb") as f:
                digest.update(f.read())
    except Exception as e:  # noqa: BLE001 - a torn or partial file shows as such
        return f"unreadable: {type(e).__name__}"
    return digest.hexdigest()


def snapshot(directory, ignore=()):
    """{relative path: fingerprint} of the files under `directory` (names in `ignore` skipped)."""
    return {
        p: fingerprint(os.path.join(directory, p))
        for p in listing(directory)
        if not p.endswith("/") and "*" not in p and os.path.basename(p) not in ignore
    }


def pinned_snapshot(directory, ignore=()):
    """`snapshot` of the directory that `directory` names, read through an open descriptor: a
    rename or exchange of the path while its files are read cannot mix two directories in one
    snapshot (None when `directory` does not exist). If the path names another directory once
    the files are read (the one read was swapped out, and is being deleted), it reads again:
    the snapshot is of what the path named, not of a replaced directory's remains."""
    while True:
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return None
        try:
            state = snapshot(f"/proc/self/fd/{fd}", ignore)
            pinned = os.fstat(fd)
            try:
                now = os.stat(directory)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (pinned.st_dev, pinned.st_ino):
                return state
        finally:
            os.close(fd)


def json_without(path, *keys):
    """The JSON object in `path` without `keys` (such as timings)."""
    with open(path) as f:
        values = json.load(f)
    return {k: v for k, v in values.items() if k not in keys}


def scalars(logdir):
    """{(tag, step): value} of the TensorBoard events under `logdir`, later files winning (a
    resumed run writes a new file; a killed writer's torn last record is skipped)."""
    import tensorflow as tf

    values = {}
    paths = sorted(
        tf.io.gfile.glob(os.path.join(logdir, "events.out.tfevents.*")), key=os.path.getmtime
    )
    for path in paths:
        with contextlib.suppress(tf.errors.DataLossError):
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    number = (
                        float(tf.make_ndarray(value.tensor))
                        if value.HasField("tensor")
                        else value.simple_value
                    )
                    values[(value.tag, event.step)] = number
    return values


def differing_arrays(a, b):
    """Names whose arrays differ (or exist on one side only) between two {name: array}."""
    import numpy as np

    names = set(a) | set(b)
    return sorted(n for n in names if n not in a or n not in b or not np.array_equal(a[n], b[n]))


# ----------------------------------------------------------------------------- file systems
def _mount(*args):
    return subprocess.run(["mount", *args], capture_output=True, text=True).returncode == 0


def _unmount(path):
    subprocess.run(["umount", "-l", path], capture_output=True)


@contextlib.contextmanager
def tmpfs(mountpoint, size_bytes):
    """A tmpfs of `size_bytes` mounted at `mountpoint` (created), or None without mount rights."""
    os.makedirs(mountpoint, exist_ok=True)
    size = max(size_bytes, 1 << 16)
    if not _mount("-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs", mountpoint):
        yield None
        return
    try:
        yield mountpoint
    finally:
        _unmount(mountpoint)


def tree_size(directory):
    """Bytes of the files under `directory`, each rounded up to whole 4 KiB pages (tmpfs)."""
    return sum(
        -(-os.path.getsize(os.path.join(root, n)) // 4096) * 4096
        for root, _, names in os.walk(directory)
        for n in names
    )


@contextlib.contextmanager
def nearly_full_copy(source, mountpoint, free_bytes=32 << 10):
    """`source` copied onto a tmpfs with only `free_bytes` left: yields (copy, file size limit).

    Without mount rights the copy is a plain directory and the limit (for `run_script`) caps
    every file the script writes at `free_bytes` instead; with the tmpfs it is None.
    """
    needed = tree_size(source) + (64 << 10) + free_bytes  # directories and the rounding
    with tmpfs(mountpoint, needed) as mounted:
        copy = os.path.join(mountpoint, os.path.basename(source.rstrip("/")))
        shutil.copytree(source, copy)
        MECHANISMS["disk full"] = "tmpfs" if mounted else "RLIMIT_FSIZE"
        yield copy, None if mounted else free_bytes


@contextlib.contextmanager
def read_only_copy(source, mountpoint):
    """`source` copied onto a tmpfs remounted read-only: yields the copy. Without mount rights
    yields a path below a regular file (nothing can be created there; no earlier output)."""
    with tmpfs(mountpoint, tree_size(source) + (256 << 10)) as mounted:
        copy = os.path.join(mountpoint, os.path.basename(source.rstrip("/")))
        if mounted:
            shutil.copytree(source, copy)
            if _mount("-o", "remount,ro", mountpoint):
                MECHANISMS["read-only"] = "tmpfs remounted ro"
                yield copy
                return
        blocker = os.path.join(mountpoint, "a-regular-file")
        with open(blocker, "w") as f:
            f.write("not a directory\n")
        MECHANISMS["read-only"] = "path below a regular file"
        yield os.path.join(blocker, os.path.basename(copy))


def _tools_for_bad_block():
    return all(shutil.which(t) for t in ("mkfs.ext2", "debugfs", "mount", "umount"))


@contextlib.contextmanager
def failing_reads(directory, sources):
    """Copies of `sources` (each over 12 KiB) whose reads fail with EIO in the middle: yields
    {source: copy}.

    The copies live on an ext2 image (1 KiB blocks) mounted read-only at `directory`/mnt; in
    each, the pointer to the indirect block (blocks 12 on) points past the end of the device, so
    reading returns the first 12 KiB, then EIO. Yields None where this cannot be made.
    """
    image, mountpoint = os.path.join(directory, "disk.ext2"), os.path.join(directory, "mnt")
    os.makedirs(mountpoint, exist_ok=True)
    blocks = 256 + sum(os.path.getsize(s) // 1024 + 2 for s in sources)
    with open(image, "wb") as f:
        f.truncate(blocks * 1024)
    names = {s: f"{i}-{os.path.basename(s)}" for i, s in enumerate(sources)}
    commands = [["mkfs.ext2", "-q", "-F", "-b", "1024", image]]
    for source, name in names.items():
        assert os.path.getsize(source) > 13 * 1024, f"{source} is too small to fail mid-way"
        commands += [
            ["debugfs", "-w", "-R", f"write {source} {name}", image],
            ["debugfs", "-w", "-R", f"sif {name} block[IND] {blocks * 1000}", image],
        ]
    ok = _tools_for_bad_block() and all(
        subprocess.run(c, capture_output=True).returncode == 0 for c in commands
    )
    if not ok or not _mount("-o", "loop,ro", image, mountpoint):
        yield None
        return
    MECHANISMS["read error"] = "ext2 image with a block past the device end (EIO)"
    try:
        yield {s: os.path.join(mountpoint, n) for s, n in names.items()}
    finally:
        _unmount(mountpoint)
