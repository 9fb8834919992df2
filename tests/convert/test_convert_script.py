"""scripts/convert_checkpoint.py end to end: its output loads with albert_tf.load and matches HF."""

import os

from convert_support import run_convert

import albert_tf
from albert_tf.convert import from_huggingface


def test_original_to_albert_tf_to_huggingface(fx, tmp_path):
    albert_dir, hf_dir = str(tmp_path / "albert"), str(tmp_path / "hf")
    result = run_convert(
        "--source_format=original",
        f"--input={fx.original_prefix}",
        f"--config_file={fx.original_dir}/albert_config.json",
        f"--output_dir={albert_dir}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    fx.assert_parity(albert_tf.load(albert_dir), fx.expected("original_groups"))

    result = run_convert(
        "--source_format=albert_tf",
        f"--input={albert_dir}",
        "--target_format=huggingface",
        f"--output_dir={hf_dir}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(hf_dir)) == ["config.json", "model.safetensors"]
    fx.assert_parity(from_huggingface(hf_dir), fx.expected("original_groups"))


def test_flag_errors_name_the_flag(fx, tmp_path):
    result = run_convert(
        "--source_format=huggingface",
        f"--input={fx.path('hf_shared_tanh')}",
        "--config_file=albert_config.json",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert result.returncode != 0
    assert "--config_file applies to --source_format=original only" in result.stderr
    assert not os.path.exists(tmp_path / "out")
