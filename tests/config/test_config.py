"""AlbertConfig: both JSON dialects, validation messages, presets, environment checks."""

import json
import os
import subprocess
import sys

import pytest

from albert_tf.config import AlbertConfig, list_presets

# An albert_config.json exactly as released in albert_base_v1.tar.gz (albert_original.md 3.1).
ORIGINAL_BASE_V1 = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}
# A Hugging Face config.json of albert-base-v1: the same model, but "gelu" means erf there.
HF_BASE_V1 = {
    "architectures": ["AlbertForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "bos_token_id": 2,
    "classifier_dropout_prob": 0.1,
    "embedding_size": 128,
    "eos_token_id": 3,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "inner_group_num": 1,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "albert",
    "num_attention_heads": 12,
    "num_hidden_groups": 1,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def _write(tmp_path, values, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(values))
    return str(path)


def test_original_config_reads_gelu_as_tanh(tmp_path):
    config = AlbertConfig.from_json_file(_write(tmp_path, ORIGINAL_BASE_V1))
    assert config == AlbertConfig.from_preset("albert_base_v1")
    assert config.hidden_act == "gelu_tanh"


def test_huggingface_config_reads_gelu_as_erf_and_gelu_new_as_tanh(tmp_path):
    config = AlbertConfig.from_json_file(_write(tmp_path, HF_BASE_V1))
    assert config.hidden_act == "gelu_erf"
    assert config == AlbertConfig.from_preset("albert_base_v1", hidden_act="gelu_erf")
    v2 = dict(
        HF_BASE_V1, hidden_act="gelu_new", hidden_dropout_prob=0, attention_probs_dropout_prob=0
    )
    assert AlbertConfig.from_json_file(_write(tmp_path, v2)) == AlbertConfig.from_preset(
        "albert_base_v2"
    )


@pytest.mark.parametrize("dialect", ["original", "huggingface"])
@pytest.mark.parametrize("act", ["gelu_tanh", "gelu_erf", "relu"])
def test_json_round_trip_in_both_dialects(tmp_path, dialect, act):
    config = AlbertConfig.from_preset(
        "albert_tiny",
        hidden_act=act,
        sharing="ffn",
        num_hidden_groups=2,
        inner_group_num=3,
        layer_norm_eps=1e-6,
    )
    path = str(tmp_path / "out.json")
    config.to_json_file(path, dialect=dialect)
    assert AlbertConfig.from_json_file(path) == config
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]  # written atomically


def test_written_original_dialect_is_what_the_original_reads(tmp_path):
    path = str(tmp_path / "albert_config.json")
    AlbertConfig.from_preset("albert_base_v2").to_json_file(path)
    values = json.loads(open(path).read())
    assert values["hidden_act"] == "gelu"
    for key, value in ORIGINAL_BASE_V1.items():
        if key in values and "dropout" not in key:
            assert values[key] == value, key


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            dict(hidden_size=100, num_attention_heads=12),
            "hidden_size (100) is not divisible by num_attention_heads (12)",
        ),
        (
            dict(num_hidden_layers=12, num_hidden_groups=5),
            "num_hidden_layers (12) is not divisible by num_hidden_groups (5)",
        ),
        (
            dict(num_hidden_layers=2, num_hidden_groups=4),
            "num_hidden_groups (4) exceeds num_hidden_layers (2)",
        ),
        (dict(hidden_act="swishy"), "hidden_act 'swishy' is not a known activation"),
        (dict(sharing="half"), "sharing 'half' is not one of"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob must be in [0, 1)"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
    ],
)
def test_invalid_combinations_are_rejected_with_the_field_named(overrides, message):
    with pytest.raises(ValueError) as error:
        AlbertConfig.from_preset("albert_base_v2", **overrides)
    assert message in str(error.value)


def test_json_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 10,\n "hidden_size": }')
    with pytest.raises(ValueError, match=r"bad.json: not valid JSON \(line 2"):
        AlbertConfig.from_json_file(str(bad))
    with pytest.raises(
        ValueError, match=r"x.json: hidden_act 'gelu_new' is not a known original activation"
    ):
        AlbertConfig.from_json_file(
            _write(tmp_path, dict(ORIGINAL_BASE_V1, hidden_act="gelu_new"), "x.json")
        )
    with pytest.raises(ValueError, match=r"y.json: .*hidden_size \(770\) is not divisible"):
        AlbertConfig.from_json_file(
            _write(tmp_path, dict(ORIGINAL_BASE_V1, hidden_size=770), "y.json")
        )
    with pytest.raises(FileNotFoundError, match="missing.json"):
        AlbertConfig.from_json_file(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="Unknown preset 'albert_huge'"):
        AlbertConfig.from_preset("albert_huge")


def test_presets_match_the_released_configs():
    assert set(list_presets()) >= {
        f"albert_{s}_v{v}" for s in ("base", "large", "xlarge", "xxlarge") for v in (1, 2)
    }
    assert {"bert_base", "bert_large", "albert_tiny"} <= set(list_presets())
    for size in ("base", "large", "xlarge"):
        assert AlbertConfig.from_preset(f"albert_{size}_v1").hidden_dropout_prob == 0.1
        assert AlbertConfig.from_preset(f"albert_{size}_v2").hidden_dropout_prob == 0.0
    xxl = AlbertConfig.from_preset("albert_xxlarge_v1")
    assert (
        xxl.hidden_size,
        xxl.intermediate_size,
        xxl.num_attention_heads,
        xxl.hidden_dropout_prob,
    ) == (4096, 16384, 64, 0.0)
    assert AlbertConfig.from_preset("albert_xlarge_v2").num_attention_heads == 16
    bert = AlbertConfig.from_preset("bert_base")
    assert (bert.sharing, bert.embedding_size, bert.has_embedding_projection) == (
        "none",
        768,
        False,
    )
    assert (bert.attention_groups, bert.ffn_groups) == (12, 12)


def _import_in_subprocess(env_overrides):
    env = dict(os.environ, **env_overrides)
    return subprocess.run(
        [sys.executable, "-c", "import albert_tf"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_other_keras_backend_is_a_clear_import_error():
    result = _import_in_subprocess({"KERAS_BACKEND": "numpy"})
    assert result.returncode != 0
    assert (
        "albert_tf needs Keras on the TensorFlow backend, but Keras is using 'numpy'"
        in result.stderr
    )


def test_omitted_fields_take_each_dialects_defaults(tmp_path):
    original = AlbertConfig.from_json_file(_write(tmp_path, {"vocab_size": 30000}, "o.json"))
    assert original == AlbertConfig.from_preset("albert_xxlarge_v2")  # the original's defaults
    hf = AlbertConfig.from_json_file(_write(tmp_path, {"model_type": "albert"}, "h.json"))
    assert hf == AlbertConfig.from_preset("albert_xxlarge_v2")  # HF's: gelu_new (tanh), V=30000
    with pytest.raises(ValueError, match="o2.json: the config has no vocab_size"):
        AlbertConfig.from_json_file(_write(tmp_path, {"hidden_size": 64}, "o2.json"))
