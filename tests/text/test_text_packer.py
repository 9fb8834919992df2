"""SegmentPacker against hand-written expected arrays."""

import keras
import pytest
import tensorflow as tf

from albert_tf.text import SegmentPacker

A = tf.ragged.constant([[10, 11, 12, 13, 14], [10]])
B = tf.ragged.constant([[20, 21, 22, 23, 24], [20, 21, 22, 23, 24, 25, 26, 27]])


def run(packer, segments):
    return {k: v.numpy().tolist() for k, v in packer(segments).items()}


def test_pair_round_robin_fixed():
    out = run(SegmentPacker(8, cls_id=2, sep_id=3, pad_id=0), [A, B])
    # budget 8 - 3 = 5: two long segments split 3/2; a 1-id segment keeps it and B gets 4.
    assert out["input_word_ids"] == [[2, 10, 11, 12, 3, 20, 21, 3], [2, 10, 3, 20, 21, 22, 23, 3]]
    assert out["input_type_ids"] == [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]
    assert out["input_mask"] == [[1] * 8, [1] * 8]


def test_pair_longest_first_gives_the_odd_id_to_the_second_segment():
    out = run(SegmentPacker(8, cls_id=2, sep_id=3, pad_id=0, truncation="longest_first"), [A, B])
    # (5, 5) -> (4, 5) -> (4, 4) -> (3, 4) -> (3, 3) -> (2, 3): ties shrink the first segment.
    assert out["input_word_ids"] == [[2, 10, 11, 3, 20, 21, 22, 3], [2, 10, 3, 20, 21, 22, 23, 3]]
    assert out["input_type_ids"] == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]


def test_round_robin_matches_the_original_truncate_seq_pair():
    """The original drops from the end of the longer segment (the second on ties)."""

    def truncate_seq_pair(a, b, max_length):
        a, b = list(a), list(b)
        while len(a) + len(b) > max_length:
            (a if len(a) > len(b) else b).pop()
        return a, b

    pairs = [
        (list(range(100, 100 + la)), list(range(200, 200 + lb)))
        for la in range(9)
        for lb in range(9)
    ]
    expected = []
    for a, b in pairs:
        ta, tb = truncate_seq_pair(a, b, 6)
        row = [2] + ta + [3] + tb + [3]
        expected.append(row + [0] * (9 - len(row)))
    segments = [
        tf.ragged.constant([p[i] for p in pairs], tf.int32, ragged_rank=1, inner_shape=())
        for i in (0, 1)
    ]
    assert (
        run(SegmentPacker(9, cls_id=2, sep_id=3, pad_id=0), segments)["input_word_ids"] == expected
    )


def test_single_segment_truncates_the_end_and_pads():
    out = run(
        SegmentPacker(6, cls_id=2, sep_id=3, pad_id=0),
        [tf.ragged.constant([[10, 11, 12, 13, 14, 15], [10, 11]])],
    )
    assert out["input_word_ids"] == [[2, 10, 11, 12, 13, 3], [2, 10, 11, 3, 0, 0]]
    assert out["input_mask"] == [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]]
    assert out["input_type_ids"] == [[0] * 6, [0] * 6]


def test_pad_to_longest_and_buckets():
    a = tf.ragged.constant([[10, 11], [10]])
    b = tf.ragged.constant([[20], []])
    out = run(SegmentPacker(16, cls_id=2, sep_id=3, pad_id=0, pad_to="longest"), [a, b])
    assert out["input_word_ids"] == [[2, 10, 11, 3, 20, 3], [2, 10, 3, 3, 0, 0]]
    assert out["input_type_ids"] == [[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 0, 0]]
    assert out["input_mask"] == [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]]
    bucketed = run(
        SegmentPacker(16, cls_id=2, sep_id=3, pad_id=0, pad_to="longest", bucket=4), [a, b]
    )
    assert bucketed["input_word_ids"] == [[2, 10, 11, 3, 20, 3, 0, 0], [2, 10, 3, 3, 0, 0, 0, 0]]
    capped = run(SegmentPacker(7, cls_id=2, sep_id=3, pad_id=0, pad_to="longest", bucket=5), [a, b])
    assert capped["input_word_ids"] == [
        [2, 10, 11, 3, 20, 3, 0],
        [2, 10, 3, 3, 0, 0, 0],
    ]  # 10 capped at 7


def test_dtypes_dense_input_pad_id_and_empty_batch():
    packer = SegmentPacker(5, cls_id=7, sep_id=8, pad_id=9)
    out = packer([tf.constant([[1, 2], [3, 4]], tf.int64)])
    assert all(v.dtype == tf.int32 for v in out.values())
    assert out["input_word_ids"].numpy().tolist() == [[7, 1, 2, 8, 9], [7, 3, 4, 8, 9]]
    empty = packer([tf.ragged.constant([], tf.int32, ragged_rank=1, inner_shape=())])
    assert empty["input_word_ids"].shape == (0, 5)
    longest = SegmentPacker(5, cls_id=7, sep_id=8, pad_to="longest")
    # an empty batch is padded to the shortest packed length ([CLS] [SEP]), so a model can still
    # read position 0 (serving an empty request returns empty outputs)
    empty_longest = longest([tf.ragged.constant([], tf.int32, ragged_rank=1, inner_shape=())])
    assert empty_longest["input_mask"].shape == (0, 2)


def test_fixed_padding_has_a_static_shape_in_a_graph():
    packer = SegmentPacker(6, cls_id=2, sep_id=3, pad_id=0)
    fn = tf.function(
        lambda x: packer([x]),
        autograph=False,
        input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)],
    )
    assert fn.get_concrete_function().structured_outputs["input_word_ids"].shape.as_list() == [
        None,
        6,
    ]


def test_config_round_trip_and_validation():
    packer = SegmentPacker(
        32, cls_id=2, sep_id=3, pad_id=0, truncation="longest_first", pad_to="longest", bucket=8
    )
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(packer))
    assert clone.get_config() == packer.get_config()
    for kwargs, message in [
        (dict(max_seq_length=1), "max_seq_length must be at least 2"),
        (dict(max_seq_length=8, truncation="waterfall"), "truncation must be one of"),
        (dict(max_seq_length=8, pad_to="max"), "pad_to must be one of"),
        (dict(max_seq_length=8, bucket=4), "needs pad_to='longest'"),
        (dict(max_seq_length=8, pad_to="longest", bucket=0), "bucket must be a positive int"),
    ]:
        with pytest.raises(ValueError, match=message):
            SegmentPacker(cls_id=2, sep_id=3, **kwargs)
    with pytest.raises(ValueError, match="packs 1 or 2 segments, got 3"):
        SegmentPacker(8, cls_id=2, sep_id=3)([A, A, A])
    with pytest.raises(ValueError, match="max_seq_length=2 leaves no room for 2 segments"):
        SegmentPacker(2, cls_id=2, sep_id=3)([A, B])
