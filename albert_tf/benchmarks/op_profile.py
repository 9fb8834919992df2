"""Where the time of a TensorFlow function's calls goes: its ops by category, from the profiler.

`profile_calls` warms a function up, times `calls` calls (their median is the wall time), then
runs `calls` more under `tf.profiler.experimental` and reads the executed ops from the trace it
writes: in the "/host:CPU" plane, events named "node/path:OpType" (executor bookkeeping such as
"ExecutorState::Process" is left out). Each moment in which ops ran is shared equally among the
ops running then (the inter-op threads may run two at once), so the op times add up to the time
in which any op ran, and `overhead` is the rest of the wall time: the executor between ops,
Python and dispatch. Only ops run by TensorFlow's executor are seen: `fn` must run a graph (a
`tf.function` or a loaded SavedModel signature), not eager ops. `categorize` sorts an op into
matmul, text (tokenization and packing), loop (while-loop control) or elementwise (everything
else: elementwise math, reductions, softmax, data movement).

>>> import tensorflow as tf
>>> @tf.function
... def double_matmul(x):
...     return tf.tanh(tf.matmul(x, tf.matmul(x, x)))
>>> profile = profile_calls(double_matmul, (tf.ones([8, 8]),), calls=2, warmup=1)
>>> profile.categories["matmul"] > 0, sorted(profile.categories) == sorted(CATEGORIES)
(True, True)
>>> [op.count for op in profile.ops if op.category == "matmul"]  # MatMul or oneDNN's _MklMatMul
[2.0]
>>> print(profile.table().splitlines()[0])
| category | ms per call | share of wall |
"""

import collections
import dataclasses
import glob
import os
import re
import shutil
import statistics
import tempfile
import time

import tensorflow as tf

CATEGORIES = ("matmul", "text", "loop", "elementwise", "overhead")

# An executed op's trace event: "node/path:OpType" (TensorFlow's node name and op name syntax).
_OP_EVENT = re.compile(r"^([A-Za-z0-9.][A-Za-z0-9_.\-/>]*):([A-Za-z0-9_>]+)$")
# Node path segments of the serving preprocessor (albert_tf.text): "albert_preprocessor_1",
# "tokenizer_1", "packer".
_TEXT_SEGMENT = re.compile(r"preprocessor|tokenizer|packer", re.IGNORECASE)
_TEXT_OP_TYPE = re.compile(
    r"^(TFText>|Sentencepiece|Unicode|Regex|StaticRegex|String|Substr|ReduceJoin|AsString|"
    r"NormalizeUTF8|CaseFoldUTF8)|Tokenize"
)
_LOOP_OP_TYPES = frozenset(
    {"While", "StatelessWhile", "LoopCond", "ControlTrigger"}
    | {p + t for p in ("", "Ref") for t in ("Enter", "Exit", "NextIteration", "Switch", "Merge")}
)
# A while loop's condition function: "while/cond/_138/..." (tf.cond's branches are
# "cond/then/_0/..." and "cond/else/_1/...").
_LOOP_CONDITION = re.compile(r"(^|/)cond/_\d+/")


def categorize(node_path, op_type):
    """The category of an executed op: "text" for tokenization and packing (a text op type, or
    a node under the preprocessor, tokenizer or packer), "matmul" (MatMul, BatchMatMul and
    their oneDNN forms, Einsum), "loop" (while-loop control, its condition and TensorList ops)
    or "elementwise" (the rest).

    >>> categorize("StatefulPartitionedCall/albert_preprocessor/tokenizer_1/Less", "Less")
    'text'
    >>> categorize("encoder_1/while/body/_139/encoder_1/while/MatMul_2", "_MklBatchMatMulV2")
    'matmul'
    >>> categorize("encoder_1/while/cond/_138/encoder_1/while/Less", "Less")
    'loop'
    >>> categorize("encoder_1/while/body/_139/encoder_1/while/Softmax", "_MklSoftmax")
    'elementwise'
    """
    if _TEXT_OP_TYPE.search(op_type) or any(
        _TEXT_SEGMENT.search(segment) for segment in node_path.split("/")
    ):
        return "text"
    if "MatMul" in op_type or "Einsum" in op_type:
        return "matmul"
    if (
        op_type in _LOOP_OP_TYPES
        or op_type.startswith("TensorList")
        or _LOOP_CONDITION.search(node_path)
    ):
        return "loop"
    return "elementwise"


@dataclasses.dataclass(frozen=True)
class OpTypeTime:
    """One op type within one category: milliseconds and executions per call."""

    op_type: str
    category: str
    ms: float
    count: float


@dataclasses.dataclass(frozen=True)
class OpProfile:
    """Per call: the median wall time, the time in which ops ran (`op_ms`), that time by
    category plus "overhead" = wall - op time (`categories`, ms; overhead comes out negative
    when the timed calls ran faster than the profiled ones, as on a busy machine), and the op
    types by time (`ops`, largest first)."""

    wall_ms: float
    op_ms: float
    categories: dict
    ops: list
    calls: int

    def table(self):
        """A markdown table: each category's ms per call and share of the wall time."""
        rows = ["| category | ms per call | share of wall |", "|---|---|---|"]
        for name in CATEGORIES:
            ms = self.categories[name]
            rows.append(f"| {name} | {ms:.3f} | {ms / self.wall_ms:.1%} |")
        rows.append(f"| wall | {self.wall_ms:.3f} | 100.0% |")
        return "\n".join(rows)

    def ops_table(self, top=10):
        """A markdown table of the `top` op types: category, ms and executions per call."""
        rows = ["| op type | category | ms per call | runs per call |", "|---|---|---|---|"]
        for op in self.ops[:top]:
            rows.append(f"| {op.op_type} | {op.category} | {op.ms:.3f} | {op.count:g} |")
        return "\n".join(rows)

    def to_dict(self, top=10):
        """The profile as JSON-ready values (the `top` op types)."""
        return {
            "calls": self.calls,
            "wall_ms": self.wall_ms,
            "op_ms": self.op_ms,
            "categories": dict(self.categories),
            "ops": [dataclasses.asdict(op) for op in self.ops[:top]],
        }


def profile_calls(fn, args=(), kwargs=None, calls=10, warmup=5, logdir=None):
    """The `OpProfile` of `fn(*args, **kwargs)`: `warmup` untimed calls, `calls` timed ones (the
    wall time is their median), then `calls` under the profiler. The trace is written to a
    temporary directory (removed), and copied to `logdir` if given (for TensorBoard; TensorFlow
    names a trace by the second it started: a run in the same second replaces it). Raises what
    `tf.profiler.experimental.start` raises when a profiler is already running, and ValueError
    when the trace holds no executed op (`fn` ran eagerly)."""
    if calls < 1:
        raise ValueError(f"calls must be at least 1, got {calls}")
    kwargs = kwargs or {}
    for _ in range(warmup):
        fn(*args, **kwargs)
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
    op_ps, counts = _profile(fn, args, kwargs, calls, logdir)
    if not counts:
        raise ValueError(
            "the profiler saw no op run by TensorFlow's executor: profile a tf.function or a "
            "loaded SavedModel signature, not eager code"
        )
    return _summary(statistics.median(seconds) * 1e3, op_ps, counts, calls)


def _profile(fn, args, kwargs, calls, logdir):
    """({(op type, category): ps}, {(op type, category): executions}) of `calls` calls."""
    directory = tempfile.mkdtemp(prefix="op_profile_")
    try:
        tf.profiler.experimental.start(directory)
        try:
            for _ in range(calls):
                fn(*args, **kwargs)
        finally:
            tf.profiler.experimental.stop()
        op_ps, counts = collections.Counter(), collections.Counter()
        for path in glob.glob(os.path.join(directory, "plugins", "profile", "*", "*.xplane.pb")):
            events = _op_events(path)
            op_ps.update(_shares(events))
            counts.update(key for _, _, key in events)
            if logdir:
                kept = os.path.join(logdir, os.path.relpath(path, directory))
                tf.io.gfile.makedirs(os.path.dirname(kept))
                tf.io.gfile.copy(path, kept, overwrite=True)
        return op_ps, counts
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _op_events(path):
    """[(start ps, end ps, (op type, category))] of the executed ops in a trace file."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    events = []
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                match = _OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
                if match:
                    node_path, op_type = match.groups()
                    start = line.timestamp_ns * 1000 + event.offset_ps
                    key = (op_type, categorize(node_path, op_type))
                    events.append((start, start + event.duration_ps, key))
    return events


def _shares(events):
    """{key: ps}: each moment shared equally among the events running then (on several
    threads, or nested on one: none were seen nested in the traces of tf.functions)."""
    points = sorted((t, i) for i, (start, end, _) in enumerate(events) for t in (start, end))
    shares, running, last = collections.Counter(), set(), 0
    for t, i in points:
        for j in running:
            shares[events[j][2]] += (t - last) / len(running)
        last = t
        running ^= {i}
    return shares


def _summary(wall_ms, op_ps, counts, calls):
    ms = {key: ps / 1e9 / calls for key, ps in op_ps.items()}
    categories = dict.fromkeys(CATEGORIES, 0.0)
    for (_, category), value in ms.items():
        categories[category] += value
    op_ms = sum(ms.values())
    categories["overhead"] = wall_ms - op_ms
    ops = [
        OpTypeTime(op_type, category, ms.get((op_type, category), 0.0), n / calls)
        for (op_type, category), n in counts.items()
    ]
    ops.sort(key=lambda op: (-op.ms, op.op_type))
    return OpProfile(wall_ms, op_ms, categories, ops, calls)
