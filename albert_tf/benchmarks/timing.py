"""Step timing for side-by-side benchmarks: first step and steady steps, alternating libraries.

`measure` takes {name: builder} where a builder returns (step function, note). It runs each
first step in turn (tracing and compilation included), then the steady steps round-robin, so
that load changes on a shared machine hit every library alike, each after a pause of
`SETTLE_SECONDS`. A library whose build or step raises is reported as {"error": ...}; the
others go on.

>>> results = measure({"a": lambda: ((lambda: None), None)}, steps=2, settle_seconds=0)
>>> len(results["a"]["steps"]), steady({"steps": [3.0, 1.0, 2.0]}), seconds(2.5)
(2, 2.0, '2.50 s')
>>> ratio(1.0, [2.0, None, 4.0])
'0.50x'
"""

import gc
import importlib.metadata
import importlib.util
import platform
import statistics
import time

# Pause before each timed step: the previous library's worker threads (torch's OpenMP pool,
# TensorFlow's Eigen pool) keep spinning for a while after their work, and a step started at
# once shares the cores with them and is measured slower than alone.
SETTLE_SECONDS = 1.0


def error_line(e):
    """'TypeName: first line of the message' (at most 160 characters of it)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:160]}"


def measure(runs, steps, settle_seconds=SETTLE_SECONDS):
    """{name: {"first": s, "steps": [s, ...], "note": str} or {"error": str}} for `runs`, a
    {name: zero-argument builder of (step function, note)}. First steps run in turn, then the
    steady steps alternate between the runs, each after a pause of `settle_seconds`."""
    results, step_fns = {}, {}
    for name, build in runs.items():
        try:
            step, note = build()
            time.sleep(settle_seconds)
            start = time.perf_counter()
            step()
            results[name] = {"first": time.perf_counter() - start, "steps": [], "note": note}
            step_fns[name] = step
        except Exception as e:  # a library that fails here is reported, the others go on
            results[name] = {"error": error_line(e)}
    for _ in range(steps):
        for name, step in list(step_fns.items()):
            try:
                time.sleep(settle_seconds)
                start = time.perf_counter()
                step()
                results[name]["steps"].append(time.perf_counter() - start)
            except Exception as e:
                results[name] = {"error": error_line(e)}
                del step_fns[name]
    step_fns.clear()
    gc.collect()
    return results


def steady(result):
    """The median of a result's steady steps (None: no steps, or an error)."""
    return statistics.median(result["steps"]) if result and result.get("steps") else None


def first(result):
    """A result's first step (None: an error, or no result)."""
    return result["first"] if result and "first" in result else None


def seconds(value):
    """'0.123 s' below a second, else '1.23 s'."""
    return f"{value:.3f} s" if value < 1 else f"{value:.2f} s"


def ratio(mine, others):
    """'0.85x': `mine` over the smallest of `others` (None values ignored; '' when missing)."""
    others = [o for o in others if o]
    return f"{mine / min(others):.2f}x" if mine and others else ""


def cell(result):
    """'first / steady' seconds of a result ('failed (see below)' for an error)."""
    if result is None:
        return ""
    if "error" in result:
        return "failed (see below)"
    median = steady(result)
    return f"{seconds(result['first'])} / {seconds(median) if median else '-'}"


def installed(libraries, needs, titles, hint="pip install -e .[bench]"):
    """The `libraries` whose modules (`needs`: {library: module names}) import here, checked
    without importing them; prints one line per skipped library (`titles`: display names)."""
    kept = []
    for library in libraries:
        missing = [m for m in needs.get(library, ()) if importlib.util.find_spec(m) is None]
        if missing:
            print(f"{titles[library]}: skipped, {' and '.join(missing)} not installed ({hint})")
        else:
            kept.append(library)
    return kept


def versions(distributions):
    """'tensorflow 2.21.0, torch 2.13.0' for the installed `distributions`."""
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in distributions)


def cpu_name(path="/proc/cpuinfo"):
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
