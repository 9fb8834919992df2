"""Served batches run in chunks of one padded width: the outputs are those of the whole batch at
once, in the request's order; each chunk is cut to its rows' width."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export.length_chunks import run_in_length_chunks


def _ids(lengths, seq, seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(seq)[None] < np.asarray(lengths)[:, None]).astype("int32")
    ids = (rng.integers(5, 1000, mask.shape) * mask).astype("int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def _widths(inputs):
    mask = inputs["input_mask"]
    rows = tf.shape(mask)[0]
    return {
        "width": tf.fill([rows], tf.shape(mask)[1]),
        "rows": tf.fill([rows], rows),
        "length": tf.reduce_sum(mask, axis=1),
        "id": inputs["input_word_ids"][:, 0],
    }


SPECS = {name: tf.TensorSpec([None], tf.int32) for name in ("width", "rows", "length", "id")}


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_rows_come_back_in_order_with_their_chunk_width(graph):
    lengths = [30, 3, 17, 9, 1, 64, 12, 5, 33, 2, 8]
    inputs = _ids(lengths, 70)

    def run(x):
        return run_in_length_chunks(_widths, x, SPECS, chunk_size=4)

    out = (tf.function(run) if graph else run)(inputs)
    assert out["length"].numpy().tolist() == lengths
    assert out["id"].numpy().tolist() == inputs["input_word_ids"][:, 0].tolist()
    # widths: the length rounded up to a multiple of 8; the five rows of width 8 (lengths 3, 1,
    # 5, 2, 8 in the request's order) run as chunks of 4 and 1, the two of width 16 together
    assert out["width"].numpy().tolist() == [32, 8, 24, 16, 8, 64, 16, 8, 40, 8, 8]
    assert out["rows"].numpy().tolist() == [1, 4, 1, 2, 4, 1, 2, 4, 1, 4, 1]


def test_width_never_exceeds_the_batch_and_an_empty_batch_keeps_its_shapes():
    out = run_in_length_chunks(_widths, _ids([70, 69, 0], 70), SPECS)
    assert out["width"].numpy().tolist() == [70, 70, 8]  # an empty row is one chunk of width 8
    assert out["rows"].numpy().tolist() == [2, 2, 1]
    specs = {"p": tf.TensorSpec([None, 3], tf.float32)}

    def zeros(chunk):
        return {"p": tf.zeros([tf.shape(chunk["input_mask"])[0], 3])}

    empty = tf.function(lambda x: run_in_length_chunks(zeros, x, specs))(_ids([], 16))
    assert empty["p"].shape == (0, 3)


def test_classifier_outputs_equal_the_whole_batch_at_once():
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import classifier_body
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=2)
    model = AlbertClassifier(AlbertModel(config), labels=["a", "b", "c"])
    lengths = np.random.default_rng(1).integers(1, 41, 19)  # 5 widths, 19 rows
    inputs = _ids(lengths, 40)
    served = tf.function(classifier_body(model))(inputs)
    logits = model(inputs, training=False).numpy()
    np.testing.assert_allclose(served["logits"].numpy(), logits, atol=1e-5)
    assert served["label"].numpy().tolist() == logits.argmax(-1).tolist()
    names = [b.decode() for b in served["label_name"].numpy()]
    assert names == [["a", "b", "c"][i] for i in logits.argmax(-1)]


class _ShapeRecorder:
    """A stand-in classifier that records the width of every batch it is called on."""

    labels, num_classes, is_regression = None, 2, False

    def __init__(self):
        self.widths = []

    def __call__(self, inputs, training=False):
        self.widths.append(int(inputs["input_mask"].shape[1]))
        return tf.zeros([tf.shape(inputs["input_mask"])[0], 2])


@pytest.mark.parametrize("chunked, widths", [(True, [8, 24, 64]), (False, [64])])
def test_static_shape_exports_run_the_batch_whole(chunked, widths):
    from albert_tf.export.saved_model import classifier_body

    recorder = _ShapeRecorder()
    out = classifier_body(recorder, length_chunked=chunked)(_ids([3, 20, 60, 5], 64))
    assert recorder.widths == widths and out["label"].shape == (4,)
