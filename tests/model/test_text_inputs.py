"""Raw text in the task models' fit / evaluate / predict (albert_tf.models.text_inputs): every
form a user may pass, predict equal to the SavedModel exports on the same texts, the errors for
shapes that cannot be read, `.keras` round trips with the preprocessor, and AlbertPreprocessor's
own reading of lists (a list of N strings is N texts, a nested list is rows of pairs).

Models are made per test (a module-wide one would lose its SentencePiece resource if another
module's test on the same worker set the random seed in between), on one tiny model directory.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models import model_dir
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model
from albert_tf.models.token_classifier import AlbertTokenClassifier

SEQ = 32
TEXTS = ["A great film, truly.", "Dull and far too long", "What a movie!", "boring"]
PAIRS = [["Is it good?", "It is great."], ["Is it long?", "Far too long."]]
TAGS = ["O", "B-PER", "I-PER"]
QUESTIONS = [
    ("When did it open?", "The Eiffel Tower is in Paris. It opened in 1889 and is tall."),
    ("Where is it?", "It is in Paris."),
]
ARTICLES = [
    ("Tom has a small cat.", "Tom has a _ .", ["cat", "dog", "car", "hat"]),
    ("It rains all day.", "What happens?", ["rain", "sun", "snow", "wind"]),
]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, spm_model_file):
    """A model directory: a tiny random backbone and the test SentencePiece model."""
    config = AlbertConfig(
        vocab_size=1000,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=64,
    )
    directory = str(tmp_path_factory.mktemp("text_inputs") / "pretrained")
    model_dir.save(AlbertModel(config), directory, spm_model=spm_model_file)
    return directory


def _served(path, **inputs):
    """The serving_default outputs of the SavedModel at `path` on string inputs, as predict
    returns them (strings decoded)."""
    serve = tf.saved_model.load(path).signatures["serving_default"]
    outputs = serve(**{k: tf.constant(v) for k, v in inputs.items()})
    return {
        k: v.numpy().astype(str) if v.dtype == tf.string else v.numpy() for k, v in outputs.items()
    }


def _assert_same(predicted, served):
    assert sorted(predicted) == sorted(served)
    for key, value in served.items():
        if value.dtype.kind in "fc":
            np.testing.assert_allclose(predicted[key], value, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(predicted[key].astype(value.dtype), value, err_msg=key)


def test_classifier_fits_and_predicts_text_like_its_saved_model(pretrained, tmp_path):
    from albert_tf.export.saved_model import export_classifier

    model = AlbertClassifier.from_pretrained(pretrained, labels=["neg", "pos"], max_seq_length=SEQ)
    assert (model.preprocessor.max_seq_length, model.preprocessor.dynamic_padding) == (SEQ, True)
    model.compile(precision="float32")
    history = model.fit(TEXTS, ["pos", "neg", "pos", "neg"], batch_size=2, verbose=0)
    assert int(model.optimizer.iterations) == 2 and np.isfinite(history.history["loss"][0])
    names = tf.data.Dataset.from_tensor_slices((TEXTS, ["neg", "pos", "neg", "pos"]))
    model.fit(names.batch(2), verbose=0)  # label names mapped in the graph
    assert int(model.optimizer.iterations) == 4
    metrics = model.evaluate(TEXTS, [1, 0, 1, 0], batch_size=4, verbose=0, return_dict=True)
    assert sorted(metrics) == ["accuracy", "loss"]

    predicted = model.predict(TEXTS, batch_size=3, verbose=0)
    assert predicted["probabilities"].shape == (4, 2) and predicted["label_name"].dtype == object
    assert set(predicted["label_name"]) <= {"neg", "pos"}
    for same in (np.array(TEXTS), tf.data.Dataset.from_tensor_slices(TEXTS).batch(2)):
        _assert_same(model.predict(same, verbose=0), predicted)
    path = export_classifier(model, model.preprocessor, str(tmp_path / "export"))
    _assert_same(predicted, _served(path, text=TEXTS))

    # Pairs: rows of a list, a [N, 2] array and a dict of columns are the same examples.
    rows = model.predict(PAIRS, verbose=0)
    _assert_same(model.predict(np.array(PAIRS), verbose=0), rows)
    columns = {"text": [a for a, _ in PAIRS], "text_pair": [b for _, b in PAIRS]}
    _assert_same(model.predict(columns, verbose=0), rows)
    assert not np.allclose(
        rows["logits"], model.predict([a for a, _ in PAIRS], verbose=0)["logits"]
    )

    # .keras keeps the preprocessor (and the fitted weights).
    model.save(str(tmp_path / "model.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert type(loaded.preprocessor) is AlbertPreprocessor
    assert loaded.get_config() == model.get_config()
    _assert_same(loaded.predict(TEXTS, verbose=0), predicted)


def test_token_classifier_tags_words_like_the_task_and_the_export(pretrained, tmp_path):
    from albert_tf.export.token_classifier_serving import export_token_classifier
    from albert_tf.text.word_windows import WordWindows, window_labels

    model = AlbertTokenClassifier.from_pretrained(pretrained, labels=TAGS, max_seq_length=12)
    texts = ["Ann Smith lives in Paris.", "Bob went home, then he walked to the old town."]
    tags = [["B-PER", "I-PER", "O", "O", "O", "O"], ["B-PER"] + ["O"] * 11]
    model.compile(precision="float32")
    model.fit(texts, tags, batch_size=1, verbose=0)  # the second text needs several windows
    assert int(model.optimizer.iterations) == 2
    words = [["Ann", "Smith", "lives"], ["Bob"]]
    model.evaluate(words, [[1, 2, 0], [1]], verbose=0)

    # The windows and labels of the raw-text path are the task's (WordWindows, window_labels).
    ids = [[TAGS.index(t) for t in row] for row in tags]
    encoded, labels = model.encode_text(dict(model.text_options))(
        {"text": tf.constant(texts)}, tf.ragged.constant(ids)
    )
    windows = WordWindows.build(
        [text.replace(".", " .").replace(",", " ,").split() for text in texts],
        model.preprocessor,
        max_seq_length=12,
    )
    width = encoded["input_word_ids"].shape[1]
    np.testing.assert_array_equal(encoded["input_word_ids"], windows.input_word_ids[:, :width])
    np.testing.assert_array_equal(labels, window_labels(windows, ids)[:, :width])

    predicted = model.predict(texts, batch_size=1, verbose=0)
    assert predicted["num_words"].tolist() == [6, 12]
    assert predicted["words"][0, :6].tolist() == ["Ann", "Smith", "lives", "in", "Paris", "."]
    path = export_token_classifier(model, model.preprocessor, str(tmp_path / "export"))
    _assert_same(predicted, _served(path, text=texts))
    with pytest.raises(ValueError, match=r"example 0 has 6 words .* but 1 tags"):
        model.fit(texts, [["O"], ["O"]], verbose=0)
    # A run whose training tokens hold punctuation serves whitespace words: predict follows it.
    spaced = model.predict(["U.S. mail, e-mail."], verbose=0, word_split="whitespace")
    assert spaced["words"][0, : spaced["num_words"][0]].tolist() == ["U.S.", "mail,", "e-mail."]
    with pytest.raises(ValueError, match=r"word_split must be one of whitespace, punctuation"):
        model.predict(texts, verbose=0, word_split="spaces")


def test_question_answerers_fit_on_character_offsets_and_answer_in_them(pretrained):
    model = AlbertQuestionAnswerer.from_pretrained(pretrained, max_seq_length=SEQ)
    context = QUESTIONS[0][1]
    answers = {
        "answer_start": [context.index("1889"), QUESTIONS[1][1].index("Paris")],
        "answer_text": ["1889", "Paris"],
    }
    model.compile(precision="float32")
    model.fit(QUESTIONS, answers, batch_size=8, verbose=0)
    metrics = model.evaluate(QUESTIONS, answers, verbose=0, return_dict=True)
    assert "start_logits_accuracy" in metrics
    predicted = model.predict(QUESTIONS, verbose=0, doc_stride=8, max_query_length=8)
    contexts = np.array([c for _, c in QUESTIONS], object)
    for answer, start, end, c in zip(
        predicted["answer"], predicted["start"], predicted["end"], contexts
    ):
        assert answer == (c[start:end] if start >= 0 else "")
    assert sorted(predicted) == ["answer", "end", "score", "start"]

    v2 = AlbertSquadV2Model.from_pretrained(
        pretrained, max_seq_length=SEQ, start_n_top=2, end_n_top=2
    )
    v2.compile(precision="float32")
    no_answer = [{"text": "1889", "answer_start": context.index("1889")}, {}]
    history = v2.fit(QUESTIONS, no_answer, verbose=0)  # p_mask and is_impossible from the text
    assert np.isfinite(history.history["cls_logits_loss"][0])


def test_multiple_choice_takes_rows_and_columns(pretrained):
    model = AlbertMultipleChoice.from_pretrained(pretrained, max_seq_length=SEQ)
    model.compile(precision="float32")
    model.fit(ARTICLES, ["A", 0], verbose=0)
    assert np.isfinite(model.evaluate(ARTICLES, [0, 1], verbose=0, return_dict=True)["loss"])
    predicted = model.predict(ARTICLES, verbose=0)
    assert predicted["probabilities"].shape == (2, 4) and predicted["answer"].shape == (2,)
    columns = {
        "article": [a for a, _, _ in ARTICLES],
        "question": [q for _, q, _ in ARTICLES],
        "options": np.array([o for _, _, o in ARTICLES]),
    }
    _assert_same(model.predict(columns, verbose=0), predicted)


def test_errors_name_the_expected_shapes(pretrained):
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=1)
    bare = AlbertClassifier(AlbertModel(config))
    for raw in (np.array(TEXTS), {"text": TEXTS}):
        with pytest.raises(
            ValueError, match=r"no preprocessor.*from_pretrained.*AlbertPreprocessor"
        ):
            bare.fit(raw, [0, 1, 0, 1], verbose=0)
    with pytest.raises(TypeError, match="raw text goes to fit / evaluate / predict"):
        bare(np.array(TEXTS))
    assert AlbertClassifier.from_pretrained(pretrained, preprocessor=None).preprocessor is None

    model = AlbertClassifier.from_pretrained(pretrained, max_seq_length=SEQ)
    expected = r"expected texts of shape \[batch\] or pairs \[batch, 2\]"
    with pytest.raises(ValueError, match=expected + r".*got \[4, 3\]"):
        model.predict(np.array([["a", "b", "c"]] * 4), verbose=0)
    with pytest.raises(ValueError, match=expected + r".*rows of 1 and 3"):
        model.predict([["a"], ["b", "c", "d"]], verbose=0)
    with pytest.raises(ValueError, match=expected + r".*a single string"):
        model.predict("a text", verbose=0)
    with pytest.raises(ValueError, match=r"keys \['sentence'\] \(text keys: text, text_pair"):
        model.predict({"sentence": TEXTS}, verbose=0)
    with pytest.raises(ValueError, match=r"no batch axis: batch it"):
        model.predict(tf.data.Dataset.from_tensor_slices(TEXTS), verbose=0)
    with pytest.raises(ValueError, match=r"label 'great' is not one of the model's labels"):
        model.fit(TEXTS, ["great"] * 4, verbose=0)
    with pytest.raises(TypeError, match=r"unknown keyword arguments \['doc_stride'\]"):
        model.predict(TEXTS, doc_stride=3)

    qa = AlbertQuestionAnswerer.from_pretrained(pretrained, max_seq_length=SEQ)
    with pytest.raises(ValueError, match=r"expected \(question, context\) pairs.*4 strings"):
        qa.predict(TEXTS, verbose=0)
    with pytest.raises(ValueError, match=r"answer 0 'Rome' is not at character 0"):
        qa.fit(QUESTIONS, {"answer_start": [0, 0], "answer_text": ["Rome", "It"]}, verbose=0)
    mc = AlbertMultipleChoice.from_pretrained(pretrained, max_seq_length=SEQ)
    with pytest.raises(ValueError, match=r"4 options each.*options of shape \[1, 3\]"):
        mc.predict([("An article.", "A question?", ["a", "b", "c"])], verbose=0)


def test_preprocessor_reads_lists_as_batches_and_rows(spm_model_file):
    pre = AlbertPreprocessor(spm_model_file, max_seq_length=16)
    texts = ["A first text.", "Another one"]
    assert pre(texts)["input_word_ids"].shape == (2, 16)  # two strings: a batch of two
    assert pre(TEXTS)["input_word_ids"].shape == (4, 16)
    np.testing.assert_array_equal(
        pre(texts)["input_word_ids"], pre(tf.constant(texts))["input_word_ids"]
    )
    by_columns = pre({"text": [a for a, _ in PAIRS], "text_pair": [b for _, b in PAIRS]})
    for rows in (PAIRS, np.array(PAIRS), tf.constant(PAIRS)):
        out = pre(rows)
        for key, value in by_columns.items():
            np.testing.assert_array_equal(out[key], value)
    segments = pre([tf.constant([a for a, _ in PAIRS]), tf.constant([b for _, b in PAIRS])])
    np.testing.assert_array_equal(segments["input_type_ids"], by_columns["input_type_ids"])
    with pytest.raises(ValueError, match=r"pairs \[batch, 2\].*got \[4, 3\]"):
        pre(np.array([["a", "b", "c"]] * 4))
    with pytest.raises(ValueError, match="a single string"):
        pre("one text")
