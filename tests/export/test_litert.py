"""LiteRT export: raw strings in the ai-edge-litert interpreter match the SavedModel, int8 sizes,
the accuracy report, the script's errors."""

import ast
import inspect
import json
import logging
import os
import random
import warnings

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import litert, saved_model
from albert_tf.export.token_classifier_serving import DevReference

pytest.importorskip("ai_edge_litert")

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "export_litert.py")

# Short, non-ASCII (accents and CJK: the tokenizers agree on these), empty, longer than the
# 16-position window, and whitespace only.
TEXTS = [
    "A short sentence about a file.",
    "Köln café naïve — CRÈME brûlée, 東京!",
    "",
    "the file object is read " * 12,
    "   \t  ",
]


@pytest.fixture(scope="module")
def float32_file(litert_classifier, litert_task, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("litert") / "model.tflite")
    size = litert.export_litert(litert_classifier, litert_task.preprocessor, path)
    return path, size


def test_float32_matches_the_saved_model(float32_file, litert_classifier, litert_task, tmp_path):
    path, size = float32_file
    assert os.path.getsize(path) == size
    assert [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp-")] == []
    assert set(litert.custom_ops(open(path, "rb").read())) <= set(litert.TFTEXT_OPS)
    export = saved_model.export_classifier(
        litert_classifier, litert_task.preprocessor, str(tmp_path / "serving"), write_warmup=False
    )
    serve = tf.saved_model.load(export).signatures["serving_default"]
    expected = serve(text=tf.constant(TEXTS))
    assert litert.token_agreement(litert_task.preprocessor, TEXTS) == 1.0
    runner = litert.interpreter(path).get_signature_runner()
    got = runner(text=np.array([t.encode() for t in TEXTS], object))
    np.testing.assert_array_less(np.abs(got["probabilities"] - expected["probabilities"]), 1e-4)
    np.testing.assert_array_equal(got["label"], expected["label"].numpy())
    assert np.ptp(expected["probabilities"].numpy()[:, 1]) > 1e-2  # the texts differ
    one = runner(text=np.array([TEXTS[1].encode()], object))  # another batch size
    np.testing.assert_allclose(one["probabilities"][0], got["probabilities"][1], atol=1e-6)


def test_packing_equals_the_preprocessor_with_truncation(litert_task):
    from albert_tf.models.preprocessor import AlbertPreprocessor

    pairs = list(reversed(TEXTS))
    for truncation in ("round_robin", "longest_first"):
        pre = AlbertPreprocessor(
            litert_task.preprocessor.model_proto, max_seq_length=11, truncation=truncation
        )
        lite = litert.LiteTextInputs(pre)
        for args, inputs in (
            ((tf.constant(TEXTS),), tf.constant(TEXTS)),
            (
                (tf.constant(TEXTS), tf.constant(pairs)),
                {"text": tf.constant(TEXTS), "text_pair": tf.constant(pairs)},
            ),
        ):
            got, want = lite(*args), pre(inputs)
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=truncation + key)


def test_int8_sizes_and_accuracy_report(litert_classifier, litert_task, tmp_path, capfd, caplog):
    caplog.set_level(logging.INFO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = litert.export_finetuned(
            litert_classifier,
            litert_task,
            str(tmp_path),
            variants=("float32", "int8_dynamic", "int8"),
            num_representative=32,
        )
    assert json.loads((tmp_path / "litert_report.json").read_text()) == report
    # TensorFlow's lines stay off the console: the temporary SavedModel's INFO log, the
    # deprecation of tf.lite.Interpreter (its int8 calibrator), the quantizer's settings.
    assert not [r for r in caplog.records if r.name == "tensorflow" and r.levelno < 30]
    assert not [w for w in caught if "tf.lite.Interpreter is deprecated" in str(w.message)]
    assert "fully_quantize" not in capfd.readouterr().err
    # Each variant passes when it agrees with the reference on at least 99% of the texts.
    assert report["min_agreement"] == litert.MIN_AGREEMENT == 0.99
    for name, entry in report["variants"].items():
        assert entry["passes"] == (entry["top1_agreement"] >= 0.99), name
        assert (entry["warning"] is None) == entry["passes"], name
    variants = report["variants"]
    assert report["eval_examples"] == 32 and report["token_agreement"] == 1.0
    float32 = variants["float32"]
    assert float32["top1_agreement"] == 1.0 and float32["max_prob_diff"] < 1e-4
    assert float32["accuracy"] == float32["reference_accuracy"]
    for name in ("int8_dynamic", "int8"):
        entry = variants[name]
        # The weights shrink 4x; the tokenizer (about 0.3 MB here) does not.
        assert entry["model_size_ratio"] <= 0.3, (name, entry)
        assert entry["text_ops_bytes"] == float32["text_ops_bytes"]
        if name == "int8_dynamic":  # weights int8, activations float: close to float32
            assert entry["top1_agreement"] >= 0.9 and entry["max_prob_diff"] < 0.1, entry
            assert abs(entry["accuracy"] - float32["accuracy"]) <= 0.1
        # Full-integer int8 also quantizes activations from a calibration on training texts. On
        # this untrained model, whose head magnifies tiny differences of the [CLS] vector, its
        # agreement swings from run to run (0 to 1 seen): only a trained model measures it.
        assert os.path.getsize(entry["file"]) == entry["bytes"]
    table = litert.format_report(report)
    assert "int8_dynamic" in table and "top-1 agr" in table
    assert (
        f"; tokenizer {float32['text_ops_bytes']:,} bytes of each file; passes: agreement >= 99%"
        in table
    )
    assert table.splitlines()[2].split()[-1] == "yes"  # float32


def test_variants_below_the_agreement_threshold_are_warned_about_and_not_defaults(caplog):
    assert "int8" in litert.VARIANTS and "int8" not in litert.DEFAULT_VARIANTS
    assert set(litert.DEFAULT_VARIANTS) < set(litert.VARIANTS)
    assert inspect.signature(litert.export_finetuned).parameters["variants"].default == (
        litert.DEFAULT_VARIANTS
    )
    # The script's defaults, defined before TensorFlow is imported, are the library's.
    script = ast.parse(open(SCRIPT).read())
    constants = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in script.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id.endswith("VARIANTS")
    }
    assert constants == {"VARIANTS": litert.VARIANTS, "DEFAULT_VARIANTS": litert.DEFAULT_VARIANTS}
    assert "0.99,  # litert.MIN_AGREEMENT" in open(SCRIPT).read()

    def report(kind, key, **agreements):
        variants = {name: {key: value, "rows": 300} for name, value in agreements.items()}
        return {"kind": kind, "eval_examples": 300, "variants": variants}

    # The demo classifier's numbers (docs/litert.md): int8 73.5%, int8_dynamic 99.6%.
    with caplog.at_level(logging.WARNING):
        judged = litert.judge_variants(
            report("classification", "top1_agreement", float32=1.0, int8_dynamic=0.996, int8=0.735),
            unit="texts",
        )
    variants = judged["variants"]
    assert [variants[n]["passes"] for n in ("float32", "int8_dynamic", "int8")] == [
        True,
        True,
        False,
    ]
    warning = (
        "int8 agrees with the reference on 73.5% of 300 dev texts, below min_agreement=99%: "
        "not a default variant; measure it on your data before shipping it"
    )
    assert variants["int8"]["warning"] == warning and variants["float32"]["warning"] is None
    assert [r.getMessage() for r in caplog.records] == [warning]
    # Exactly the threshold passes; another threshold; SQuAD's answers; regression: not judged.
    squad = litert.judge_variants(
        report("squad", "answer_agreement", a=0.99, b=0.989), min_agreement=0.99, unit="questions"
    )
    assert [e["passes"] for e in squad["variants"].values()] == [True, False]
    assert "of 300 dev questions, below" in squad["variants"]["b"]["warning"]
    strict = litert.judge_variants(report("classification", "top1_agreement", a=0.996), 0.999)
    assert strict["min_agreement"] == 0.999 and not strict["variants"]["a"]["passes"]
    assert "below min_agreement=99.9%" in strict["variants"]["a"]["warning"]
    regression = litert.judge_variants(report("classification", "max_score_diff", a=0.3))
    assert regression["variants"]["a"]["passes"] is None
    assert litert.passes_column(regression["variants"]["a"]) == "-"


def test_quiet_hides_tensorflow_noise_and_nothing_else(capfd, caplog, monkeypatch):
    from albert_tf.export.litert_quiet import quiet

    noise = (
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        b"I0000 00:00:1795756036.304952    1512 builder.cc:183] Loading CharsMap of size=215630\n"
        b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
        b"fully_quantize: 0, inference_type: 6, input_inference_type: FLOAT32\n"
    )
    real = (
        b"W0000 00:00:1795756036.304952    1512 builder.cc:99] a C++ warning\n"
        b"E0000 00:00:1795756036.304952    1512 builder.cc:99] a C++ error\n"
        b"ERROR: Encountered unresolved custom op: TFText>Nope.\n"
        b"Traceback (most recent call last):\n"
    )
    tf_logger = logging.getLogger("tensorflow")
    before = tf_logger.level
    caplog.set_level(logging.INFO)
    for level, shown in (("3", real), ("0", noise + real)):
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
        capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with quiet():
                with quiet():  # nested: the outer block does the work
                    os.write(2, noise + real)
                tf_logger.info("Assets written to: /tmp/tmpabc/assets")
                tf_logger.warning("a TensorFlow warning")
                warnings.warn("    Warning: tf.lite.Interpreter is deprecated", UserWarning)
                warnings.warn("another warning", UserWarning)
        assert capfd.readouterr().err == shown.decode(), level
        assert [str(w.message) for w in caught] == ["another warning"]
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == [
        "a TensorFlow warning"
    ] * 2
    assert tf_logger.level == before


@pytest.fixture(scope="module")
def tagger(litert_task):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    random.seed(11)  # Keras's unseeded initializers draw from Python's `random` (conftest)
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=1)
    return AlbertTokenClassifier(AlbertModel(config), labels=["O", "B-X", "I-X"])


# Raw text split by the punctuation convention: tokens holding punctuation, a non-breaking and
# an ideographic space (multi-byte whitespace), CJK, an empty text, a text past one window.
TAGGED_TEXTS = [
    "Ann lives in Köln.",
    "a\u00a0b 東京「x」\u3000y U.S. e-mail: CTRL-W,z",
    "",
    "word " * 20,
]


def test_token_classifier_matches_tensorflow(litert_task, tagger, tmp_path):
    from albert_tf.text.graph_words import split_words

    pre = litert_task.preprocessor
    path = str(tmp_path / "tagger.tflite")
    litert.export_litert(tagger, pre, path, word_convention="punctuation")
    texts = TAGGED_TEXTS
    expected = litert.serving_function(tagger, pre, word_convention="punctuation")(
        tf.constant(texts)
    )
    got = litert.interpreter(path).get_signature_runner()(
        text=np.array([t.encode() for t in texts], object)
    )
    # Every word of a short text is tagged; a long text keeps the words of one window. The
    # words are the SavedModel's (split_words), at the same UTF-8 byte offsets.
    assert got["num_words"].tolist() == [5, 8, 0, 7]
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-5)
    for key in ("tag_id", "word_start", "word_end"):
        np.testing.assert_array_equal(got[key], expected[key].numpy())
    words = split_words(tf.constant(texts), "punctuation")
    for i, n in enumerate(got["num_words"]):
        assert got["word_start"][i, :n].tolist() == words["byte_start"][i].numpy()[:n].tolist()
        assert got["word_end"][i, :n].tolist() == words["byte_end"][i].numpy()[:n].tolist()
        assert (got["word_start"][i, n:] == -1).all()
    # Beyond one window too, and with the whitespace convention (the default): the SavedModel's
    # words at its offsets.
    lite = litert.LiteTextInputs(pre)
    for convention in ("punctuation", "whitespace"):
        flat, splits, starts, ends = lite.words(tf.constant(texts), convention)
        words = split_words(tf.constant(texts), convention)
        assert splits.numpy().tolist() == words["words"].row_splits.numpy().tolist()
        assert flat.numpy().tolist() == words["words"].flat_values.numpy().tolist()
        assert starts.numpy().tolist() == words["byte_start"].flat_values.numpy().tolist()
        assert ends.numpy().tolist() == words["byte_end"].flat_values.numpy().tolist()


def test_tagger_report_agrees_with_the_runners_dev_predictions(litert_task, tagger, caplog):
    """The report's agreement with the runner's dev tags (`text_spec` header, no conversion):
    tokens that hold punctuation disagree under the punctuation convention (WARNING), not
    under whitespace; the runner's tags are the training path's."""
    from albert_tf.text.word_windows import WordWindows, word_logits

    pre = litert_task.preprocessor
    dev = [
        ["U.S.", "won", "1-0"],
        ["Ann", "lives", "in", "Köln", "."],
        ["call", "f(x)"],
    ]
    windows = WordWindows.build(dev, pre, pre.max_seq_length)
    per_word = word_logits(windows, tagger.predict(windows.inputs, verbose=0))
    predicted = [[tagger.labels[t] for t in logits.argmax(-1)] for logits in per_word]
    gold = [["O"] * len(words) for words in dev]
    gold[1][3] = "B-X"

    def texts(split, limit):
        return litert.sentence_columns(dev, None, limit)

    spec = litert.text_spec(
        tagger,
        pre,
        texts,
        "token_classification",
        "ner",
        word_convention="punctuation",
        dev_reference=DevReference(dev, predicted, gold, "mixed_bfloat16"),
    )
    report = dict(spec.header(spec.reference(spec.inputs)), variants={})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    agreement = report["agreement_with_dev_predictions"]
    assert report["word_convention"] == "punctuation" and agreement["dev_words"] == 10
    assert agreement["runner_precision"] == "mixed_bfloat16"  # what the runner computed in
    assert agreement["raw_text"]["same_words"] == 7 / 10  # 'U.S.', '1-0', 'f(x)' are cut
    assert agreement["raw_text"]["untagged"] == 0.0  # every sentence fits in the window
    assert agreement["raw_text"]["word_agreement"] <= 7 / 10
    assert warned == agreement["warnings"] and len(warned) == 1
    assert warned[0].startswith("LiteRT tags of raw text agree with the runner's dev predictions")
    assert "tokens such as 'U.S.', '1-0', 'f(x)'" in warned[0]
    assert "export with --word_split=whitespace" in warned[0]
    assert "WARNING: LiteRT tags" in litert.format_report(report)
    # Whitespace: the same words as the runner's, the same tags.
    caplog.clear()
    columns = spec.inputs
    fn = litert.serving_function(tagger, pre, word_convention="whitespace")
    reference = litert.reference_outputs(fn, pre, columns)
    agreement = litert.dev_tagger_agreement(
        reference,
        columns["text"],
        DevReference(dev, predicted, gold, None),
        tagger.labels,
        "whitespace",
    )
    assert agreement["raw_text"]["word_agreement"] == 1.0 and agreement["warnings"] == []
    assert agreement["raw_text"]["f1"] == agreement["runner"]["f1"]
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    report.update(word_convention="whitespace", agreement_with_dev_predictions=agreement)
    assert "words (whitespace) vs the runner's dev predictions: agreement 1.0000 on 10 words" in (
        litert.format_report(report)
    )


def test_script_reports_a_bad_model_dir_in_one_line(tmp_path):
    from finetune_support import script

    result = script(
        "export_litert.py",
        [f"--model_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}"],
        timeout=120,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"export_litert.py: error: --model_dir={tmp_path} has no model.keras (is it the "
        "--output_dir of a finished run_classifier.py, run_token_classifier.py or run_squad.py?)"
    )
