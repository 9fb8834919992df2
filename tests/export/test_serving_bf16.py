"""The bfloat16 SavedModel export: it serves in a fresh process with only tensorflow +
tensorflow_text, computes in bfloat16, returns float32, and stays close to float32."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import batching, saved_model

# Stated tolerance of the bfloat16 export against float32 (8-bit mantissa matmuls).
MAX_PROBABILITY_DIFFERENCE = 0.05
HELD_OUT = [
    "open the file",
    "A short sentence about a file.",
    "",
    "Köln café naïve",
    "raise ValueError if empty",
    "a held-out sentence with numbers 9,000 and 12",
    "東京",
    "keras layers and models " * 5,
]

FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops, as TF Serving does)
    model = tf.saved_model.load(sys.argv[1])
    serve = model.signatures["serving_default"]
    out = serve(text=tf.constant(json.loads(sys.argv[2])))
    enc = model.signatures["encode"](text=tf.constant(["one text"]))
    library = serve.graph.as_graph_def().library.function
    bf16 = tf.bfloat16.as_datatype_enum
    print(json.dumps({
        "dtypes": sorted({v.dtype.name for v in list(out.values()) + list(enc.values())}),
        "probabilities": out["probabilities"].numpy().tolist(),
        "bf16_matmuls": sum(
            n.op in ("MatMul", "BatchMatMulV2", "Einsum") and n.attr["T"].type == bf16
            for f in library for n in f.node_def
        ),
        "imported_albert_tf": any(m.startswith("albert_tf") for m in sys.modules),
        "xla_functions": sum(f.attr["_XlaMustCompile"].b for f in library),
    }))
""")


@pytest.fixture(scope="module")
def bf16_export(litert_classifier, litert_task, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("bf16") / "albert")
    path = saved_model.export_classifier(
        litert_classifier,
        litert_task.preprocessor,
        base,
        write_warmup=False,
        compute_dtype="bfloat16",
        agreement_texts=HELD_OUT,
    )
    return path


def test_fresh_process_serves_bf16_close_to_float32(bf16_export, litert_classifier, litert_task):
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, bf16_export, json.dumps(HELD_OUT)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert not served["imported_albert_tf"]
    assert served["xla_functions"] == 0  # TF Serving runs it without its XLA JIT
    assert served["dtypes"] == ["float32", "int32", "int64", "string"]  # float32 outputs
    assert served["bf16_matmuls"] > 0  # the encoder really computes in bfloat16
    with open(os.path.join(bf16_export, "assets.extra", batching.BATCHING_FILE)) as f:
        assert batching.parse_text_proto(f.read()) == batching.SERVING_PARAMETERS
    logits = litert_classifier(litert_task.preprocessor(tf.constant(HELD_OUT))).numpy()
    expected = tf.nn.softmax(logits).numpy()
    probabilities = np.array(served["probabilities"])
    difference = np.abs(probabilities - expected).max()
    assert 0.0 < difference < MAX_PROBABILITY_DIFFERENCE
    assert (probabilities.argmax(-1) == expected.argmax(-1)).mean() >= 0.9


def test_agreement_is_measured_and_described(bf16_export):
    with open(os.path.join(bf16_export, "assets.extra", "albert_tf.json")) as f:
        description = json.load(f)
    assert description["compute_dtype"] == "bfloat16"
    agreement = description["agreement_with_float32"]
    assert agreement["texts"] == len(HELD_OUT)
    assert agreement["top1_agreement"] >= 0.9
    assert 0.0 < agreement["max_probability_difference"] < MAX_PROBABILITY_DIFFERENCE


def test_backbone_agreement_and_bad_compute_dtype(litert_classifier, litert_task, tmp_path):
    backbone = litert_classifier.backbone
    bf16 = saved_model.policy_copy(backbone, "mixed_bfloat16")
    assert bf16.compute_dtype == "bfloat16" and bf16.variable_dtype == "float32"
    served = saved_model.policy_copy(backbone, "bfloat16", serving_layout=True)
    assert served.encoder.serving_layout and not backbone.encoder.serving_layout
    inputs = litert_task.preprocessor({"text": tf.constant(HELD_OUT[:4])})
    expected = backbone(inputs)["pooled_output"].numpy()
    np.testing.assert_allclose(served(inputs)["pooled_output"].numpy(), expected, atol=0.05)
    agreement = saved_model.measure_agreement(
        backbone, bf16, litert_task.preprocessor, HELD_OUT, batch_size=4
    )
    assert agreement["texts"] == len(HELD_OUT)
    assert 0.99 < agreement["min_pooled_cosine"] < 1.0
    assert 0.0 < agreement["max_pooled_difference"] < 0.1
    with pytest.raises(
        ValueError, match="compute_dtype must be one of float32, bfloat16, got 'float16'"
    ):
        saved_model.export_backbone(
            backbone, litert_task.preprocessor, str(tmp_path), compute_dtype="float16"
        )


def test_precision_note_names_this_cpus_bfloat16_features(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu avx512f avx512_bf16 amx_tile amx_bf16\n")
    assert saved_model.cpu_bfloat16_flags(str(cpuinfo)) == ["amx_bf16", "avx512_bf16"]
    cpuinfo.write_text("flags\t\t: fpu avx2\n")
    assert saved_model.cpu_bfloat16_flags(str(cpuinfo)) == []
    assert saved_model.cpu_bfloat16_flags(str(tmp_path / "missing")) == []
    assert saved_model.precision_note("bfloat16").startswith("The export computes in bfloat16")
    assert "compute_dtype='bfloat16'" in saved_model.precision_note("float32")
