"""LiteRT export: raw strings in the ai-edge-litert interpreter match the SavedModel, int8 sizes,
the accuracy report, the script's errors."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import litert, saved_model

pytest.importorskip("ai_edge_litert")

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
            litert_task.preprocessor.model_proto, seq_length=11, truncation=truncation
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


def test_int8_sizes_and_accuracy_report(litert_classifier, litert_task, tmp_path):
    report = litert.export_finetuned(
        litert_classifier,
        litert_task,
        str(tmp_path),
        variants=("float32", "int8_dynamic", "int8"),
        num_representative=32,
    )
    assert json.loads((tmp_path / "litert_report.json").read_text()) == report
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
    assert f"; tokenizer {float32['text_ops_bytes']:,} bytes of each file" in table


def test_token_classifier_matches_tensorflow(litert_task, tmp_path):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=1)
    model = AlbertTokenClassifier(AlbertModel(config), labels=["O", "B-X", "I-X"])
    pre = litert_task.preprocessor
    path = str(tmp_path / "tagger.tflite")
    litert.export_litert(model, pre, path)
    texts = ["Ann lives in Köln .", "", "word " * 20]
    expected = litert.serving_function(model, pre)(tf.constant(texts))
    got = litert.interpreter(path).get_signature_runner()(
        text=np.array([t.encode() for t in texts], object)
    )
    # Every word of a short text is tagged; a long text keeps the words of one window.
    assert got["num_words"].tolist() == [5, 0, 7]
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-5)
    np.testing.assert_array_equal(got["tag_id"], expected["tag_id"])


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
