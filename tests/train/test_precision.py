"""precision="auto" (albert_tf.precision): the decision per device, its log line, the compile()
switch, and bf16 numerics: a short fine-tuning run's loss curve under mixed_bfloat16 against
float32."""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import precision
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier

SAPPHIRE_RAPIDS = "fpu vme avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8"
COOPER_LAKE = "fpu avx2 avx512f avx512_vnni avx512_bf16"
SKYLAKE = "fpu avx2 avx512f avx512cd avx512bw"
CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum
flags\t\t: {flags}
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: {flags}
"""


@pytest.mark.parametrize(
    "flags, line",
    [
        (
            SAPPHIRE_RAPIDS,
            "precision: mixed_bfloat16 without XLA "
            "(CPU has amx_bf16 and avx512_bf16; oneDNN beats XLA on CPU)",
        ),
        (
            COOPER_LAKE,
            "precision: mixed_bfloat16 without XLA (CPU has avx512_bf16; oneDNN beats XLA on CPU)",
        ),
        (
            SKYLAKE,
            "precision: float32 without XLA "
            "(CPU has no amx_bf16 or avx512_bf16; oneDNN beats XLA on CPU)",
        ),
    ],
)
def test_auto_on_cpus_reads_the_cpuinfo_flags(tmp_path, flags, line):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.format(flags=flags))
    found = precision.cpu_flags(str(path))
    assert found == frozenset(flags.split())
    assert precision.choose("auto", device="CPU", cpu_flags=found).log_line() == line


def test_cpu_flags_of_a_missing_file_are_empty(tmp_path):
    assert precision.cpu_flags(str(tmp_path / "none")) == frozenset()


@pytest.mark.parametrize(
    "device, capabilities, policy, jit, reason",
    [
        ("TPU", [], "mixed_bfloat16", True, "TPU"),
        ("GPU", [(8, 0)], "mixed_bfloat16", True, "GPU compute capability 8.0 has bfloat16"),
        ("GPU", [(9, 0), (7, 5)], "float32", True, "GPU compute capability 7.5 has no bfloat16"),
        ("GPU", [], "float32", True, "GPU compute capability 0.0 has no bfloat16"),
    ],
)
def test_auto_on_accelerators(device, capabilities, policy, jit, reason):
    choice = precision.choose("auto", device=device, gpu_capabilities=capabilities)
    assert (choice.policy, choice.jit_compile, choice.device) == (policy, jit, device)
    assert choice.reason.startswith(reason)


def test_explicit_settings_win_except_xla_on_tpu():
    bf16_cpu = {"avx512_bf16"}
    forced = precision.choose("float32", device="CPU", cpu_flags=bf16_cpu)
    assert forced.log_line() == "precision: float32 without XLA (float32 requested; XLA off on CPU)"
    forced = precision.choose("auto", jit_compile=True, device="CPU", cpu_flags=bf16_cpu)
    assert forced.log_line() == (
        "precision: mixed_bfloat16 with XLA (CPU has avx512_bf16; XLA requested)"
    )
    gpu = precision.choose("mixed_bfloat16", jit_compile=False, device="GPU")
    assert gpu.log_line() == (
        "precision: mixed_bfloat16 without XLA (mixed_bfloat16 requested; XLA off requested)"
    )
    tpu = precision.choose("float32", jit_compile=False, device="TPU")
    assert tpu.log_line() == "precision: float32 with XLA (float32 requested)"


def test_float16_where_the_loop_scales_the_loss():
    gpu = precision.choose("auto", device="GPU", gpu_capabilities=[(7, 5)], float16=True)
    assert (gpu.policy, gpu.jit_compile) == ("mixed_float16", True)
    assert gpu.reason.startswith("GPU compute capability 7.5 has float16 but no bfloat16")
    for capability, policy in (((6, 1), "float32"), ((8, 0), "mixed_bfloat16")):
        choice = precision.choose("auto", device="GPU", gpu_capabilities=[capability], float16=True)
        assert choice.policy == policy
    assert precision.choose("mixed_float16", device="CPU", float16=True).policy == "mixed_float16"
    with pytest.raises(precision.PrecisionError) as raised:
        precision.choose("mixed_float16", device="TPU", float16=True)
    assert str(raised.value) == (
        "precision='mixed_float16' cannot run on a TPU (no float16 matmuls): choose one of "
        "auto, float32, mixed_bfloat16"
    )
    assert isinstance(raised.value, UserError)  # scripts print it as one line, exit code 1
    with pytest.raises(ValueError, match="on a GPU.*choose one of auto, float32, mixed_bfloat16$"):
        precision.choose("mixed_float16", device="GPU")  # fit does not scale the loss


def test_invalid_values_name_the_setting():
    with pytest.raises(ValueError, match=r"precision='float16': expected one of auto, float32"):
        precision.choose("float16")
    with pytest.raises(ValueError, match=r"device='IPU'"):
        precision.choose("auto", device="IPU")


def test_resolve_logs_one_line_for_this_machine(caplog):
    expected = precision.choose("auto", device="CPU", cpu_flags=precision.cpu_flags()).log_line()
    with caplog.at_level(logging.INFO, logger="absl"):
        choice = precision.resolve("auto")
    assert choice.device == "CPU" and choice.log_line() == expected
    assert [r.getMessage() for r in caplog.records if "precision:" in r.getMessage()] == [expected]


# ----------------------------------------------------------------------------- compile and bf16
SEQ, BATCH, STEPS = 16, 8, 30


def _config():
    return AlbertConfig.from_preset(
        "albert_tiny", vocab_size=64, num_hidden_layers=2, hidden_size=64, intermediate_size=128
    )


def _data():
    """A learnable task: label 1 when token 5 occurs in the sequence."""
    rng = np.random.default_rng(0)
    ids = rng.integers(6, 64, size=(BATCH, SEQ)).astype("int32")
    labels = (np.arange(BATCH) % 2).astype("int32")
    ids[labels == 1, rng.integers(1, SEQ)] = 5
    inputs = {
        "input_word_ids": ids,
        "input_mask": np.ones_like(ids),
        "input_type_ids": np.zeros_like(ids),
    }
    return inputs, labels


def _classifier(weights=None):
    keras.utils.set_random_seed(7)
    model = AlbertClassifier(AlbertModel(_config(), dtype="float32"), dropout=0.0)
    if weights is not None:
        model.set_weights(weights)
    return model


@pytest.fixture(scope="module")
def loss_curves():
    """{policy: (losses of STEPS fit steps, the model)} from the same weights and batches."""
    inputs, labels = _data()
    weights = _classifier().get_weights()
    curves = {}
    batches = tf.data.Dataset.from_tensors((inputs, labels)).repeat(STEPS)
    for policy in ("float32", "mixed_bfloat16"):
        model = _classifier(weights)
        model.compile(learning_rate=1e-3, num_train_steps=STEPS, precision=policy)
        means = []  # Keras logs the running mean of the epoch's losses after each step
        record = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: means.append(float(logs["loss"]))
        )
        model.fit(batches, epochs=1, verbose=0, callbacks=[record], shuffle=False)
        totals = np.arange(1, STEPS + 1) * np.array(means)
        curves[policy] = (np.diff(totals, prepend=0.0), model)  # each step's own loss
    return curves


def test_bf16_loss_curve_stays_within_tolerance_of_float32(loss_curves):
    f32, f32_model = loss_curves["float32"]
    bf16, bf16_model = loss_curves["mixed_bfloat16"]
    assert f32_model.backbone.compute_dtype == "float32"
    assert bf16_model.backbone.compute_dtype == "bfloat16"
    inputs, _ = _data()
    hidden = bf16_model.backbone(inputs)["sequence_output"]
    assert hidden.dtype == tf.bfloat16  # the run computed in bf16 ...
    assert not np.array_equal(f32, bf16)  # ... and its losses differ from float32's
    assert f32[0] - f32[-1] > 0.3  # the run learns: the tolerance is small beside the drop
    # Tolerance: 0.01 absolute per step (bf16 keeps 8 significant bits; the curves start at
    # 0.69 and fall below 0.01; measured difference: at most 6e-4).
    np.testing.assert_allclose(bf16, f32, atol=0.01, rtol=0)


def test_compile_switches_a_float32_model_to_bf16_like_one_built_in_bf16(loss_curves):
    inputs, _ = _data()
    switched = _classifier()
    switched.compile(precision="mixed_bfloat16")
    assert switched.compute_dtype == switched.backbone.compute_dtype == "bfloat16"
    assert switched.logits.compute_dtype == "float32"  # pinned layers stay float32
    assert switched.backbone.embeddings.layer_norm.compute_dtype == "float32"
    keras.utils.set_random_seed(7)
    built = AlbertClassifier(AlbertModel(_config(), dtype="mixed_bfloat16"), dropout=0.0)
    built.set_weights(switched.get_weights())
    out = switched(inputs)
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out.numpy(), built(inputs).numpy())
    switched.compile(precision="float32")
    np.testing.assert_array_equal(switched(inputs).numpy(), _classifier()(inputs).numpy())


def test_compile_auto_takes_this_machines_choice_and_keeps_an_explicit_jit(caplog):
    expected = precision.resolve("auto", log=False)
    model = _classifier()
    with caplog.at_level(logging.INFO, logger="absl"):
        model.compile()
    assert model.backbone.compute_dtype == (
        "bfloat16" if "bfloat16" in expected.policy else "float32"
    )
    assert model.jit_compile is expected.jit_compile
    assert expected.log_line() in [r.getMessage() for r in caplog.records]
    model.compile(precision="float32", jit_compile=True)
    assert (model.backbone.compute_dtype, model.jit_compile) == ("float32", True)
