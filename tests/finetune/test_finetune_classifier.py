"""AlbertClassifier: fit defaults, learning, .keras round trip, from_pretrained, regression;
AlbertPreprocessor: ids equal to the Python tokenizer, pairs, dynamic padding, config."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models import model_dir
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.optim.optimizers import AdamW
from albert_tf.optim.schedules import WarmupPolynomialDecay
from albert_tf.text.tokenizer import SentencePieceTokenizer


def _small_config():
    return AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=1)


def test_fit_defaults_and_learning(trained):
    model, _, _, history = trained
    optimizer = model.optimizer
    assert type(optimizer) is AdamW and optimizer.global_clipnorm == 1.0
    schedule = (
        optimizer.learning_rate
        if isinstance(optimizer.learning_rate, WarmupPolynomialDecay)
        else optimizer._learning_rate
    )
    # num_train_steps inferred by fit: 3 epochs x 6 steps; warmup 10% of it
    assert (schedule.decay_steps, schedule.warmup_steps) == (18, 2)
    assert int(optimizer.iterations.numpy()) == 18
    assert isinstance(model.loss, keras.losses.SparseCategoricalCrossentropy)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]  # it learns


def test_infer_steps_needs_a_length():
    model = AlbertClassifier(AlbertModel(_small_config()))
    model.compile()
    endless = tf.data.Dataset.from_tensors(({"input_word_ids": [[2, 3]]}, [0])).repeat()
    with pytest.raises(ValueError, match="pass steps_per_epoch to fit"):
        model.fit(endless, epochs=1)


def test_keras_round_trip_and_regression(tmp_path):
    model = AlbertClassifier(AlbertModel(_small_config()), num_classes=1, dropout=0.2)
    assert model.is_regression
    ids = {
        "input_word_ids": np.array([[2, 9, 14, 3], [2, 7, 3, 0]], "int32"),
        "input_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]], "int32"),
        "input_type_ids": np.zeros([2, 4], "int32"),
    }
    model.compile(learning_rate=1e-3, num_train_steps=4)
    assert isinstance(model.loss, keras.losses.MeanSquaredError)
    model.fit(ids, np.array([0.5, 4.0], "float32"), batch_size=2, epochs=2, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.num_classes, loaded.dropout_rate, loaded.labels) == (1, 0.2, None)
    np.testing.assert_allclose(loaded(ids).numpy(), model(ids).numpy(), atol=1e-6)
    assert type(loaded.optimizer).__name__ == "AdamW"
    assert int(loaded.optimizer.iterations.numpy()) == 2
    with pytest.raises(ValueError, match="labels has 3 names but num_classes is 2"):
        AlbertClassifier(AlbertModel(_small_config()), num_classes=2, labels=["a", "b", "c"])


def test_from_pretrained_with_dropout_override(tmp_path, spm_model_file):
    from albert_tf.models.pretrainer import AlbertPretrainer

    backbone = AlbertModel(_small_config())
    model_dir.save(AlbertPretrainer(backbone), str(tmp_path / "pre"), spm_model=spm_model_file)
    model = AlbertClassifier.from_pretrained(
        str(tmp_path / "pre"), labels=["x", "y", "z"], hidden_dropout_prob=0.1
    )
    assert model.num_classes == 3 and model.backbone.config.hidden_dropout_prob == 0.1
    for loaded, original in zip(model.backbone.weights, backbone.weights):
        np.testing.assert_array_equal(loaded.numpy(), original.numpy())


def test_preprocessor_matches_python_tokenizer(preprocessor, spm_model_file):
    python = SentencePieceTokenizer(spm_model_file)
    a, b = (
        "The file is Opened, 9,000 times.",
        "Grüße, naïve café!",
    )  # 15 + 17 pieces: truncated to 32
    out = preprocessor({"text": tf.constant([a]), "text_pair": tf.constant([b])})
    ids_a, ids_b = python.encode_ids(a), python.encode_ids(b)
    assert len(ids_a) + len(ids_b) + 3 > 32
    # round_robin (the original _truncate_seq_pair): 29 ids shared one at a time, 15 + 14
    kept_a, kept_b = ids_a[:15], ids_b[:14]
    expected = [python.cls_id] + kept_a + [python.sep_id] + kept_b + [python.sep_id]
    assert out["input_word_ids"].numpy()[0].tolist() == expected
    assert out["input_type_ids"].numpy()[0].tolist() == [0] * 17 + [1] * 15
    assert out["input_mask"].numpy()[0].tolist() == [1] * 32
    single = preprocessor(tf.constant([a]))["input_word_ids"].numpy()[0].tolist()
    assert single == [python.cls_id] + ids_a + [python.sep_id] + [0] * (32 - len(ids_a) - 2)
    dynamic = preprocessor.with_padding(True)
    short = dynamic(tf.constant(["a file", "read"]))
    assert short["input_word_ids"].shape[1] == 8  # bucketed to a multiple of 8
    long = dynamic(tf.constant(["word " * 100]))
    assert long["input_word_ids"].shape[1] == 32  # capped at max_seq_length, truncated
    assert preprocessor.token_lengths([a]).numpy().tolist() == [len(ids_a)]
    copy = AlbertPreprocessor.from_config(preprocessor.get_config())
    assert copy.model_proto == preprocessor.model_proto and copy.max_seq_length == 32
    with pytest.raises(KeyError, match=r"expected keys 'text' and optionally 'text_pair'"):
        preprocessor({"sentence": tf.constant(["x"])})


def test_fit_counts_steps_of_dict_labels():
    from albert_tf.models.question_answering import AlbertQuestionAnswerer

    model = AlbertQuestionAnswerer(AlbertModel(_small_config()))
    model.compile()
    ids = np.tile(np.array([[2, 9, 14, 3, 7, 3]], "int32"), [6, 1])
    x = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": ids * 0}
    y = {"start_positions": np.full([6], 4, "int32"), "end_positions": np.full([6], 4, "int32")}
    model.fit(x, y, batch_size=2, epochs=2, verbose=0)
    # 6 rows / batch 2 = 3 steps per epoch: the schedule spans 6 steps (not len(y) = 2 keys)
    assert model.optimizer._learning_rate.decay_steps == 6
    assert int(model.optimizer.iterations.numpy()) == 6


@pytest.mark.parametrize("method", ["fit", "train_on_batch"])
def test_first_step_creates_no_variables_inside_the_trace(method):
    # Variables created while tracing the step (Keras builds the optimizer's slots lazily
    # there) make TensorFlow trace the whole step twice; fit and train_on_batch create them
    # before.
    model = AlbertClassifier(AlbertModel(_small_config()), num_classes=2)
    model.compile(num_train_steps=10, precision="float32")
    ids = np.array([[2, 7, 9, 3], [2, 8, 3, 0]], "int32")
    x = {"input_word_ids": ids, "input_mask": (ids > 0).astype("int32"), "input_type_ids": 0 * ids}
    y = np.array([0, 1], "int32")
    traced = []

    def creator(next_creator, **kwargs):
        traced.append(tf.inside_function())
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        if method == "fit":
            model.fit(x, y, batch_size=2, epochs=1, verbose=0)
        else:
            model.train_on_batch(x, y)
    assert traced and not any(traced)
