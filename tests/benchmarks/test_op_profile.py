"""albert_tf.benchmarks.op_profile: op categories on the names a served ALBERT's trace holds, and
profiles of a small tf.function (a while loop of MatMuls, elementwise ops, SentencePiece
tokenization) that must add up to its wall time and leave no trace directory behind.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

from albert_tf.benchmarks import op_profile

ENCODER = "StatefulPartitionedCall/albert_classifier_1/albert_1/encoder_1/while"
BODY = f"{ENCODER}/body/_139/albert_classifier_1/albert_1/encoder_1/while"
CONDITION = f"{ENCODER}/cond/_138/albert_classifier_1/albert_1/encoder_1/while"
PREPROCESSOR = "StatefulPartitionedCall/albert_preprocessor_copy_1"
ITERATIONS = 4


@pytest.mark.parametrize(
    "node_path, op_type, category",
    [
        (f"{BODY}/MatMul_5", "_MklMatMul", "matmul"),
        (f"{BODY}/BiasAdd", "_MklNativeFusedMatMul", "matmul"),
        (f"{BODY}/add_2", "_MklFusedBatchMatMulV2", "matmul"),
        (f"{BODY}/MatMul_2", "BatchMatMulV2", "matmul"),
        ("dense/MatMul", "MatMul", "matmul"),
        ("einsum/Einsum", "Einsum", "matmul"),
        (
            f"{PREPROCESSOR}/tokenizer_1/SentenceTokenizer/SentencepieceTokenizeOp",
            "SentencepieceTokenizeOp",
            "text",
        ),
        (f"{PREPROCESSOR}/tokenizer_1/UnicodeTranscode", "UnicodeTranscode", "text"),
        (f"{PREPROCESSOR}/tokenizer_1/StaticRegexReplace", "StaticRegexReplace", "text"),
        (
            f"{PREPROCESSOR}/packer_1/RaggedToTensor/RaggedTensorToTensor",
            "RaggedTensorToTensor",
            "text",
        ),
        (f"{PREPROCESSOR}/tokenizer_1/Less", "Less", "text"),
        (f"{PREPROCESSOR}/packer_1/Cast", "Cast", "text"),
        ("trim/TFText>RoundRobinTrim", "TFText>RoundRobinTrim", "text"),
        ("split/StringSplitV2", "StringSplitV2", "text"),
        ("wordpiece/FastWordpieceTokenizeWithOffsets", "FastWordpieceTokenizeWithOffsets", "text"),
        (f"{CONDITION}/Less", "Less", "loop"),
        (f"{CONDITION}/LogicalAnd", "LogicalAnd", "loop"),
        (f"{BODY}/TensorListSetItem", "TensorListSetItem", "loop"),
        *(
            (f"{ENCODER}/{t}", t, "loop")
            for t in ("Enter", "Exit", "NextIteration", "Switch", "Merge", "LoopCond", "While")
        ),
        (f"{BODY}/transpose", "_MklTranspose", "elementwise"),
        (f"{BODY}/Softmax", "_MklSoftmax", "elementwise"),
        (f"{BODY}/add", "AddV2", "elementwise"),
        (f"{BODY}/Gelu/Tanh", "Tanh", "elementwise"),
        ("RaggedToTensor/RaggedTensorToTensor", "RaggedTensorToTensor", "elementwise"),
        ("albert_1/assert_less_equal/LessEqual", "LessEqual", "elementwise"),
        # tf.cond's branches are not a loop condition.
        ("cond/then/_0/cond/Less", "Less", "elementwise"),
    ],
)
def test_categorize(node_path, op_type, category):
    assert op_profile.categorize(node_path, op_type) == category


@pytest.fixture(scope="module")
def serve_like(spm_model_file):
    """A tf.function shaped like a served model: tokenize, then a while loop of MatMuls."""
    import tensorflow_text as tf_text

    with open(spm_model_file, "rb") as f:
        tokenizer = tf_text.SentencepieceTokenizer(model=f.read())
    weights = tf.random.stateless_normal([64, 64], seed=(1, 2)) * 0.1

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        with tf.name_scope("tokenizer"):
            ids = tokenizer.tokenize(tf.strings.lower(text))
            length = tf.cast(ids.row_lengths()[0], tf.float32)  # text by its node path
        hidden = tf.fill([8, 64], length)

        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, weights) * 0.5 + 1.0)

        _, hidden = tf.while_loop(lambda i, _: i < ITERATIONS, body, (0, hidden))
        return tf.reduce_sum(hidden)

    return serve, (tf.constant(["The quick brown fox jumps over the lazy dog."]),)


@pytest.fixture
def made_directories(monkeypatch):
    """The directories tempfile.mkdtemp makes during the test."""
    made, mkdtemp = [], tempfile.mkdtemp

    def recorded(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recorded)
    return made


def test_profile_adds_up_to_the_wall_time(serve_like, made_directories):
    fn, args = serve_like
    profile = op_profile.profile_calls(fn, args, calls=3, warmup=2)
    assert len(made_directories) == 1 and not os.path.exists(made_directories[0])

    categories = profile.categories
    assert set(categories) == set(op_profile.CATEGORIES)
    assert categories["matmul"] > 0 and categories["loop"] > 0 and categories["text"] > 0
    assert categories["elementwise"] > 0
    assert 0 < profile.op_ms <= profile.wall_ms
    assert categories["overhead"] == pytest.approx(profile.wall_ms - profile.op_ms)
    shares = [ms / profile.wall_ms for ms in categories.values()]
    assert min(shares) >= 0 and sum(shares) == pytest.approx(1.0, abs=1e-6)
    assert sum(op.ms for op in profile.ops) == pytest.approx(profile.op_ms)

    counts = {(op.op_type, op.category): op.count for op in profile.ops}
    matmuls = {t: n for (t, c), n in counts.items() if c == "matmul"}
    assert list(matmuls.values()) == [ITERATIONS]  # per call, whatever the kernel's name
    assert counts[("Tanh", "elementwise")] == ITERATIONS
    assert counts[("Less", "loop")] == ITERATIONS + 1  # the condition, once more than the body
    assert counts[("SentencepieceTokenizeOp", "text")] == 1
    assert counts[("Cast", "text")] == 1
    assert [op.ms for op in profile.ops] == sorted((op.ms for op in profile.ops), reverse=True)

    table = profile.table().splitlines()
    assert table[0] == "| category | ms per call | share of wall |"
    assert [row.split(" | ")[0].strip("| ") for row in table[2:]] == [
        *op_profile.CATEGORIES,
        "wall",
    ]
    assert len(profile.ops_table(top=2).splitlines()) == 4
    as_json = json.loads(json.dumps(profile.to_dict(top=3)))
    assert as_json["calls"] == 3 and len(as_json["ops"]) == 3
    assert as_json["categories"] == pytest.approx(categories)


def test_a_kept_logdir_holds_the_trace_and_counts_only_the_new_one(serve_like, tmp_path):
    fn, args = serve_like
    counts = []
    for _ in range(2):  # the second run ignores the first one's trace in the directory
        profile = op_profile.profile_calls(fn, args, calls=2, warmup=1, logdir=str(tmp_path))
        counts.append({op.op_type: op.count for op in profile.ops if op.category == "matmul"})
    assert glob.glob(os.path.join(tmp_path, "plugins", "profile", "*", "*.xplane.pb"))
    assert counts[0] == counts[1] and list(counts[0].values()) == [ITERATIONS]


def test_a_failing_call_stops_the_profiler_and_removes_the_trace(serve_like, made_directories):
    fn, args = serve_like
    calls = []

    def fails_when_profiled(*a):
        calls.append(1)
        if len(calls) > 2:  # 1 warmup and 1 timed call
            raise RuntimeError("failed under the profiler")
        return fn(*a)

    with pytest.raises(RuntimeError, match="under the profiler"):
        op_profile.profile_calls(fails_when_profiled, args, calls=1, warmup=1)
    assert len(made_directories) == 1 and not os.path.exists(made_directories[0])
    profile = op_profile.profile_calls(fn, args, calls=1, warmup=0)  # the profiler was stopped
    assert profile.categories["matmul"] > 0


def test_eager_code_is_refused(made_directories):
    with pytest.raises(ValueError, match="no op run by TensorFlow's executor"):
        op_profile.profile_calls(lambda: tf.matmul(tf.ones([2, 2]), tf.ones([2, 2])), calls=1)
    assert len(made_directories) == 1 and not os.path.exists(made_directories[0])
    with pytest.raises(ValueError, match="calls must be at least 1"):
        op_profile.profile_calls(lambda: None, calls=0)


def test_twice_in_a_fresh_process():
    """The first profiler session of a process, then a second one in the same process."""
    code = """
import tensorflow as tf
from albert_tf.benchmarks import op_profile

@tf.function
def f(x):
    return tf.tanh(tf.matmul(x, tf.matmul(x, x)))

for _ in range(2):
    profile = op_profile.profile_calls(f, (tf.ones([8, 8]),), calls=2, warmup=1)
    print(sum(op.count for op in profile.ops if op.category == "matmul"))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["2.0", "2.0"]
