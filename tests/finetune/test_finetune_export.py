"""SavedModel export: signatures, fresh-process load with only tensorflow + tensorflow_text,
versioned directories, warmup requests."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import saved_model, versions, warmup

ODD_TEXTS = [
    "A short sentence about a file.",
    "",
    "   \t  ",
    "Grüße aus Köln, 東京 and naïve café — ünïcödé!",
    "word " * 400,
]

FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops, as TF Serving does)
    model = tf.saved_model.load(sys.argv[1])
    texts = json.loads(sys.argv[2])
    serve = model.signatures["serving_default"]
    out = serve(text=tf.constant(texts))
    big = serve(text=tf.constant([texts[i % len(texts)] for i in range(256)]))
    ids = model.signatures["predict_ids"](
        input_word_ids=tf.constant([[2, 10, 3]]), input_mask=tf.constant([[1, 1, 1]]),
        input_type_ids=tf.constant([[0, 0, 0]]))
    enc = model.signatures["encode"](text=tf.constant(texts[:2]))
    empty = serve(text=tf.constant([], tf.string))
    empty_enc = model.signatures["encode"](text=tf.constant([], tf.string))
    print(json.dumps({
        "empty": {k: list(v.shape) for k, v in empty.items()},
        "empty_pooled": list(empty_enc["pooled_output"].shape),
        "signatures": sorted(model.signatures),
        "probabilities": out["probabilities"].numpy().tolist(),
        "logits": out["logits"].numpy().tolist(),
        "label": out["label"].numpy().tolist(),
        "label_name": [b.decode() for b in out["label_name"].numpy()],
        "big_shape": list(big["probabilities"].shape),
        "ids_probabilities": ids["probabilities"].numpy().tolist(),
        "pooled_shape": list(enc["pooled_output"].shape),
        "imported_albert_tf": any(m.startswith("albert_tf") for m in sys.modules),
    }))
""")


@pytest.fixture(scope="module")
def exported(trained, preprocessor, tmp_path_factory):
    model = trained[0]
    # A few fit steps barely move a tiny model's outputs; spread the head's weights so the
    # served-vs-Keras comparison below compares clearly different probabilities.
    kernel = np.random.default_rng(0).normal(0.0, 3.0, model.logits.kernel.shape)
    model.logits.kernel.assign(kernel.astype("float32"))
    base = str(tmp_path_factory.mktemp("serving") / "albert")
    return model, base, saved_model.export_classifier(model, preprocessor, base)


def test_fresh_process_matches_keras(exported, preprocessor):
    model, base, path = exported
    assert path == os.path.join(base, "1")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, path, json.dumps(ODD_TEXTS)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["signatures"] == ["encode", "predict_ids", "serving_default"]
    assert not served["imported_albert_tf"]
    logits = model(preprocessor(tf.constant(ODD_TEXTS))).numpy()
    expected = tf.nn.softmax(logits).numpy()
    np.testing.assert_allclose(served["probabilities"], expected, atol=2e-5)
    np.testing.assert_allclose(served["logits"], logits, atol=1e-4, rtol=1e-4)
    assert np.ptp(logits[:, 1] - logits[:, 0]) > 1e-2  # the texts get different outputs
    assert served["label"] == expected.argmax(-1).tolist()
    assert served["label_name"] == [["other", "file"][i] for i in served["label"]]
    assert served["big_shape"] == [256, 2] and served["pooled_shape"] == [2, 128]
    # an empty request batch gets empty outputs, not an error inside the graph
    assert served["empty"] == {
        "probabilities": [0, 2],
        "logits": [0, 2],
        "label": [0],
        "label_name": [0],
    }
    assert served["empty_pooled"] == [0, 128]
    ids = {
        "input_word_ids": tf.constant([[2, 10, 3]]),
        "input_mask": tf.constant([[1, 1, 1]]),
        "input_type_ids": tf.constant([[0, 0, 0]]),
    }
    np.testing.assert_allclose(
        served["ids_probabilities"], tf.nn.softmax(model(ids)).numpy(), atol=2e-5
    )


def test_saved_model_cli_lists_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run(
        [cli, "show", "--all", "--dir", exported[2]],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for name in ("serving_default", "predict_ids", "encode"):
        assert f"signature_def['{name}']" in result.stdout
    assert "inputs['text'] tensor_info:\n        dtype: DT_STRING" in result.stdout
    assert "outputs['probabilities'] tensor_info:" in result.stdout


def test_warmup_requests_parse_with_serving_api(exported):
    requests = warmup.read_warmup_requests(exported[2])  # tensorflow_serving protos
    assert [r.model_spec.signature_name for r in requests] == ["serving_default"] * 2
    texts = [t.decode("utf-8") for t in tf.make_ndarray(requests[1].inputs["text"]).tolist()]
    assert texts == list(saved_model.WARMUP_TEXTS) and list(requests[1].inputs) == ["text"]
    description = json.load(open(os.path.join(exported[2], "assets.extra", "albert_tf.json")))
    assert description["labels"] == ["other", "file"] and description["seq_length"] == 32


def test_versions_increase_and_never_overwrite(exported, tmp_path):
    base = exported[1]
    with versions.publish_version(base) as (tmp_dir, version):
        tf.io.gfile.GFile(os.path.join(tmp_dir, "marker"), "w").close()
    assert version == 2 and versions.list_versions(base) == [1, 2]
    with pytest.raises(FileExistsError, match=r"/1 already exists; versions are never overwritten"):
        with versions.publish_version(base, version=1):
            pass
    with pytest.raises(RuntimeError, match="boom"):
        with versions.publish_version(base) as (tmp_dir, version):
            raise RuntimeError("boom")
    assert sorted(os.listdir(base)) == ["1", "2"]  # failed export left no temp dir, no version 3


def test_float32_copy_of_mixed_precision_model():
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=1)
    model = AlbertClassifier(AlbertModel(config, dtype="mixed_bfloat16"), num_classes=3)
    assert model.backbone.compute_dtype == "bfloat16"
    copy = saved_model.float32_copy(model)
    assert copy.backbone.compute_dtype == "float32" and copy.compute_dtype == "float32"
    ids = {
        "input_word_ids": np.array([[2, 7, 9, 3]], "int32"),
        "input_mask": np.ones([1, 4], "int32"),
        "input_type_ids": np.zeros([1, 4], "int32"),
    }
    np.testing.assert_allclose(copy(ids).numpy(), model(ids).numpy(), atol=0.05)
    assert keras.config.dtype_policy().name == "float32"
