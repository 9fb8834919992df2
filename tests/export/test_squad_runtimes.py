"""The SQuAD pieces that exist once per runtime agree on the same inputs: the windows and
max-context flags of the Python features (`squad_features.window_spans`,
`squad_features.max_context_windows`), the SavedModel's ragged graph
(`squad_serving.question_windows`) and LiteRT's dense graph
(`litert_qa.question_windows`); the span rule; the dense row ids; the shared constants."""

import numpy as np
import tensorflow as tf

from albert_tf.data import squad_features
from albert_tf.export import dense, litert_qa, squad_serving
from albert_tf.finetune import squad_predictions

CLS, SEP, PAD = 2, 3, 0
SETTINGS = squad_features.FeatureSettings(max_seq_length=16, doc_stride=3, max_query_length=4)
# (question ids, context ids): long and short questions, no context, one window, many windows.
CASES = [
    ([7], list(range(10, 15))),
    ([7, 8, 9, 10, 11, 12], list(range(20, 51))),
    ([5], []),
    ([], list(range(60, 80))),
    ([9, 9], list(range(80, 94))),
]


def _python_windows(query, context):
    """Per window: (input_word_ids, context piece index per position or -1, max-context flags)
    from the Python rule."""
    query = query[: SETTINGS.max_query_length]
    seq = SETTINGS.max_seq_length
    spans = squad_features.window_spans(len(context), seq - len(query) - 3, SETTINGS.doc_stride)
    owner = squad_features.max_context_windows(spans, len(context))
    windows = []
    for window, (start, length) in enumerate(spans):
        ids = [CLS] + query + [SEP] + context[start : start + length] + [SEP]
        piece = [-1] * (len(query) + 2) + list(range(start, start + length)) + [-1]
        best = [p >= 0 and owner[p] == window for p in piece]
        pad = seq - len(ids)
        windows.append((ids + [PAD] * pad, piece + [-1] * pad, best + [False] * pad))
    return windows


def _ragged_windows():
    out = squad_serving.question_windows(
        tf.ragged.constant([q[: SETTINGS.max_query_length] for q, _ in CASES], tf.int64),
        tf.ragged.constant([c for _, c in CASES], tf.int64, ragged_rank=1),
        SETTINGS,
        CLS,
        SEP,
    )
    starts = np.cumsum([0] + [len(c) for _, c in CASES])  # flat piece index -> in its context
    result = [[] for _ in CASES]
    for row, example in enumerate(out["example"].numpy()):
        piece = out["piece"][row].numpy()
        local = np.where(piece >= 0, piece - starts[example], -1)
        result[example].append(
            (
                out["input_word_ids"][row].numpy().tolist(),
                local.tolist(),
                out["max_context"][row].numpy().tolist(),
            )
        )
    return result


def _dense_windows(max_windows=12):
    def flat(lists):
        values = tf.constant([v for x in lists for v in x], tf.int32)
        splits = tf.constant(np.cumsum([0] + [len(x) for x in lists]), tf.int32)
        return values, splits

    out = litert_qa.question_windows(
        *flat([q for q, _ in CASES]),
        *flat([c for _, c in CASES]),
        SETTINGS,
        max_windows,
        CLS,
        SEP,
        PAD,
    )
    assert not out["truncated"].numpy().any()
    return [
        [
            (
                out["input_word_ids"][b, w].numpy().tolist(),
                out["piece"][b, w].numpy().tolist(),
                out["max_context"][b, w].numpy().tolist(),
            )
            for w in range(used)
        ]
        for b, used in enumerate(out["num_windows"].numpy())
    ]


def test_windows_and_max_context_agree_across_runtimes():
    python = [_python_windows(q, c) for q, c in CASES]
    assert [len(w) for w in python] == [1, 9, 0, 4, 2]  # the cases cover 0, 1 and many windows
    assert _ragged_windows() == python
    assert _dense_windows() == python


def test_the_span_rule_agrees_across_runtimes():
    """`squad_predictions.valid_spans` (Python, one window) and `squad_serving.valid_spans`
    (the SavedModel and LiteRT graphs, a batch of windows) on the same candidates."""
    rng = np.random.default_rng(0)
    windows, positions, candidates = 6, 16, 40
    is_context = rng.random([windows, positions]) < 0.6
    max_context = is_context & (rng.random([windows, positions]) < 0.7)
    starts = rng.integers(0, positions, [windows, candidates])
    ends = rng.integers(0, positions, [windows, candidates])
    graph = squad_serving.valid_spans(
        tf.constant(is_context), tf.constant(max_context), starts, ends, max_answer_length=5
    ).numpy()
    python = np.stack(
        [
            squad_predictions.valid_spans(is_context[w], max_context[w], starts[w], ends[w], 5)
            for w in range(windows)
        ]
    )
    np.testing.assert_array_equal(graph, python)
    assert 0 < python.sum() < python.size  # both outcomes are exercised


def test_row_ids_agree_with_ragged_value_rowids():
    splits = [0, 2, 2, 5, 5, 6]
    ragged = tf.RaggedTensor.from_row_splits(tf.range(6), tf.constant(splits, tf.int64))
    got = dense.row_ids(tf.constant(splits, tf.int32), tf.constant(6))
    assert got.numpy().tolist() == ragged.value_rowids().numpy().tolist()


def test_the_runtimes_share_one_home_for_their_constants():
    assert squad_predictions.EMPTY_SCORE is squad_features.EMPTY_SCORE
    assert squad_predictions.NO_WINDOW_NULL_SCORE is squad_features.NO_WINDOW_NULL_SCORE
    assert squad_serving.NO_SPAN_SCORE == 2 * squad_features.EMPTY_SCORE  # the placeholder's score
    assert litert_qa.NO_SPAN_SCORE is squad_serving.NO_SPAN_SCORE
