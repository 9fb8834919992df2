"""tf.data pipelines: static shapes, original-tool records, host sharding, dynamic masking."""

import pytest
import tensorflow as tf

from albert_tf.data import masking, pipeline, schema

SEQ, PRED = 16, 4
VOCAB = masking.MaskingVocab(4, (0, 1, 2, 3, 4), tuple(range(5, 100)))
EXPECTED = {
    "input_word_ids": tf.int32,
    "input_mask": tf.int32,
    "input_type_ids": tf.int32,
    "masked_lm_positions": tf.int32,
    "masked_lm_ids": tf.int32,
    "masked_lm_weights": tf.float32,
    "next_sentence_labels": tf.int32,
}


def _original_example(tag, token_boundary=False):
    """A record built as the original write_instance_to_example_files does (tf.train API)."""
    ids = [2] + [10 + tag % 50] * 5 + [3] + [60 + tag % 30] * 4 + [3]
    n = len(ids)

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    features = {
        "input_ids": ints(ids + [0] * (SEQ - n)),
        "input_mask": ints([1] * n + [0] * (SEQ - n)),
        "segment_ids": ints([0] * 7 + [1] * 5 + [0] * (SEQ - n)),
        "masked_lm_positions": ints([1, 8, 0, 0]),
        "masked_lm_ids": ints([ids[1], ids[8], 0, 0]),
        "masked_lm_weights": tf.train.Feature(
            float_list=tf.train.FloatList(value=[1.0, 1.0, 0.0, 0.0])
        ),
        "next_sentence_labels": ints([tag % 2]),
    }
    if token_boundary:
        features["token_boundary"] = ints([1] * n + [0] * (SEQ - n))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString(), ids


def _write(path, tags, token_boundary=False):
    with tf.io.TFRecordWriter(str(path)) as w:
        for tag in tags:
            w.write(_original_example(tag, token_boundary)[0])


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """4 files of 8 records; the record tag (= file * 10 + i) is readable from input_ids[1]."""
    d = tmp_path_factory.mktemp("shards")
    for f in range(4):
        _write(d / f"part-{f}.tfrecord", [f * 10 + i for i in range(8)], token_boundary=True)
    return str(d / "part-*.tfrecord")


def _file_of(batch):
    return set(((batch["input_word_ids"][:, 1].numpy() - 10) // 10).tolist())


def test_original_records_static_shapes_and_values(tmp_path):
    _write(tmp_path / "orig.tfrecord", range(6))  # no token_boundary, as older files
    ds = pipeline.pretraining_dataset(
        str(tmp_path / "orig.tfrecord"), 3, SEQ, PRED, is_training=False
    )
    for name, dtype in EXPECTED.items():
        assert ds.element_spec[name].dtype == dtype
        assert ds.element_spec[name].shape.is_fully_defined()
    batches = list(ds)
    assert len(batches) == 2  # 6 records, batch 3, no repeat in evaluation
    first = batches[0]
    _, ids = _original_example(0)
    assert first["input_word_ids"][0].numpy().tolist() == ids + [0] * (SEQ - len(ids))
    assert first["next_sentence_labels"].numpy().tolist() == [0, 1, 0]
    assert first["masked_lm_weights"][0].numpy().tolist() == [1.0, 1.0, 0.0, 0.0]


def test_our_encoder_matches_tf_train_example():
    record, _ = _original_example(3, token_boundary=True)
    example = tf.train.Example.FromString(record)
    ints = {
        k: list(v.int64_list.value)
        for k, v in example.features.feature.items()
        if k != "masked_lm_weights"
    }
    floats = {
        "masked_lm_weights": list(example.features.feature["masked_lm_weights"].float_list.value)
    }
    assert tf.train.Example.FromString(schema.encode_example(ints, floats)) == example


def test_two_input_pipelines_read_disjoint_files(shards):
    seen = []
    for pipeline_id in range(2):
        ctx = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
        )
        ds = pipeline.pretraining_dataset(shards, 4, SEQ, PRED, input_context=ctx, seed=0)
        files = set()
        for batch in ds.take(12):  # repeats: 3 passes over its 16 records
            files |= _file_of(batch)
        seen.append(files)
    assert seen[0] == {0, 2} and seen[1] == {1, 3}


def test_element_sharding_when_fewer_files_than_pipelines(tmp_path):
    _write(tmp_path / "one.tfrecord", range(8))
    tags = []
    for pipeline_id in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
        ds = pipeline.pretraining_dataset(
            str(tmp_path / "one.tfrecord"), 4, SEQ, PRED, is_training=False, input_context=ctx
        )
        tags.append({int(t) for b in ds for t in b["input_word_ids"][:, 1].numpy()})
    assert tags[0] & tags[1] == set() and len(tags[0] | tags[1]) == 8


def test_seeded_training_order_is_reproducible(shards):
    def order(seed):
        ds = pipeline.pretraining_dataset(shards, 4, SEQ, PRED, seed=seed)
        return [b["input_word_ids"][:, 1].numpy().tolist() for b in ds.take(6)]

    assert order(5) == order(5) and order(5) != order(6)


def test_missing_files_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no TFRecord file matches"):
        pipeline.pretraining_dataset(str(tmp_path / "nothing-*"), 2, SEQ, PRED)


def test_dynamic_masking(shards, tmp_path):
    def epochs(seed, n=2):
        ds = pipeline.dynamic_masking_dataset(
            shards, 8, SEQ, PRED, vocab=VOCAB, masked_lm_prob=0.3, is_training=False, seed=seed
        )
        return ds, [[b["masked_lm_positions"].numpy() for b in ds] for _ in range(n)]

    ds, (first, second) = epochs(11)
    for name, dtype in EXPECTED.items():
        assert (
            ds.element_spec[name].dtype == dtype and ds.element_spec[name].shape.is_fully_defined()
        )
    assert any((a != b).any() for a, b in zip(first, second))  # fresh masks every epoch
    _, (again, _) = epochs(11)
    assert all((a == b).all() for a, b in zip(first, again))  # same seed, same masks
    # The record's own masks are undone: labels are the original tokens at the new positions.
    for batch in ds:
        ids, pos, labels, weights = (
            batch[k].numpy()
            for k in ("input_word_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
        )
        for row in range(ids.shape[0]):
            first_piece = labels[row][list(pos[row]).index(1)] if 1 in pos[row] else ids[row, 1]
            _, original = _original_example(int(first_piece) - 10)  # input_ids[1] = 10 + tag
            n = int(weights[row].sum())
            assert n == masking.num_to_predict(len(original), masking.MaskingConfig(0.3, PRED))
            assert [original[p] for p in pos[row, :n]] == labels[row, :n].tolist()
            assert not set(ids[row][pos[row, :n]]) & {0, 1, 2, 3}
    _write(tmp_path / "nb.tfrecord", range(4))
    with pytest.raises(ValueError, match="no token_boundary feature"):
        pipeline.dynamic_masking_dataset(str(tmp_path / "nb.tfrecord"), 2, SEQ, PRED, vocab=VOCAB)


@pytest.mark.parametrize(
    "values", [[0, 1, 1, 0], [5, 300, 70000, 2**40, -3], list(range(0, 66000, 97)), []]
)
def test_int64_encoding_round_trips(values):
    example = tf.train.Example.FromString(schema.encode_example({"x": values}, {"w": [0.5, -1.0]}))
    assert list(example.features.feature["x"].int64_list.value) == values
    assert list(example.features.feature["w"].float_list.value) == [0.5, -1.0]
