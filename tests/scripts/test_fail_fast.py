"""Every script reports a flag typo, a bad setting and a missing input path as one line
`script.py: error: ...` with exit code 1, without importing TensorFlow and within 2 s
(albert_tf/cli.py, "Failing fast"); the flag-definition modules import without TensorFlow.

One process per script (without_tensorflow.py: importing TensorFlow raises there, and is
recorded), each command line in a forked child of it: about 0.3 s per script.
"""

import glob
import json
import os
import time

import pytest
from script_support import REPO, run_python

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "without_tensorflow.py")
SECONDS = 2.0
TYPO = (["--bogus_flag=1"], "Unknown command line flag 'bogus_flag'")
FINETUNE = ["--output_dir={out}", "--preset=albert_tiny"]
WORD_SPLIT = "--word_split=bogus: value should be one of <auto|whitespace|punctuation>"

# script -> [(command line, what its error line says)]; {missing} is a path that does not exist,
# {present} a file that does, {out} an output directory (never written).
CASES = {
    "run_classifier.py": [
        TYPO,
        (
            ["--task_name=t", *FINETUNE, "--train_file={missing}"],
            "--train_file='{missing}': not found",
        ),
        (
            ["--task_name=t", "--output_dir={out}", "--init_checkpoint={missing}"],
            "--init_checkpoint='{missing}': not found",
        ),
        (["--task_name=t", *FINETUNE, "--learning_rate=0"], "--learning_rate must be > 0"),
        (["--task_name=t", *FINETUNE], "--spm_model_file is required: a preset has no spm.model"),
    ],
    "run_token_classifier.py": [
        TYPO,
        ([*FINETUNE, "--dev_file={missing}"], "--dev_file='{missing}': not found"),
        ([*FINETUNE, "--word_split=bogus"], WORD_SPLIT),
    ],
    "run_squad.py": [
        TYPO,
        ([*FINETUNE, "--predict_file={missing}"], "--predict_file='{missing}': not found"),
        ([*FINETUNE, "--predict_batch_size=0"], "--eval_batch_size must be >= 1"),  # original
    ],
    "run_race.py": [
        TYPO,
        ([*FINETUNE, "--data_dir={missing}"], "--data_dir='{missing}': not found"),
    ],
    "run_pretraining.py": [
        TYPO,
        (
            ["--output_dir={out}", "--preset=albert_tiny", "--input_file={missing}/train-*"],
            "--input_file: no file matches '{missing}/train-*'",
        ),
        (
            [
                "--output_dir={out}",
                "--preset=albert_tiny",
                "--input_file={present}",
                "--init_checkpoint={missing}",
            ],
            "--init_checkpoint='{missing}': not found",
        ),
    ],
    "create_pretraining_data.py": [
        TYPO,
        (
            ["--input_file={missing}", "--output_file={out}/x", "--spm_model_file={present}"],
            "--input_file: no file matches '{missing}'",
        ),
        (
            ["--input_file={present}", "--output_file={out}/x", "--spm_model_file={missing}"],
            "--spm_model_file='{missing}': not found",
        ),
    ],
    "train_tokenizer.py": [
        TYPO,
        (["--input={missing}", "--model_prefix={out}/v"], "--input: no file matches '{missing}'"),
    ],
    "export_saved_model.py": [
        TYPO,
        (
            ["--model_dir={missing}", "--export_dir={out}"],
            "--model_dir='{missing}': not found",
        ),
        (["--model_dir={out}", "--export_dir={out}", "--word_split=bogus"], WORD_SPLIT),
    ],
    "export_litert.py": [
        TYPO,
        (["--model_dir={missing}", "--output_dir={out}"], "--model_dir='{missing}': not found"),
        (["--model_dir={out}", "--output_dir={out}", "--word_split=bogus"], WORD_SPLIT),
    ],
    "convert_checkpoint.py": [
        TYPO,
        (
            ["--source_format=original", "--input={missing}", "--output_dir={out}"],
            "--input='{missing}': not found",
        ),
    ],
    "compare_served_answers.py": [
        TYPO,
        (
            ["--run_dir={out}", "--saved_model={missing}"],
            "--saved_model='{missing}': not found",
        ),
    ],
    "study_finetune.py": [
        TYPO,
        (
            ["--output_dir={out}", "--init_checkpoint={missing}"],
            "--init_checkpoint='{missing}': not found",
        ),
    ],
    "parameter_table.py": [TYPO, (["--tables=2"], "--tables: unknown table(s) ['2']")],
    # The benchmarks take no input paths (they generate their inputs).
    "benchmark_convert.py": [TYPO, (["--presets=albert_huge"], "--presets: expected some of")],
    "benchmark_data.py": [TYPO],
    "benchmark_encoder.py": [TYPO],
    "benchmark_memory.py": [TYPO],
    "benchmark_pretraining.py": [TYPO],
    "benchmark_serving.py": [
        TYPO,
        (
            ["--spm_model_file={present}", "--batching=4:1000"],
            "--batching: expected max_batch_size:batch_timeout_micros:num_batch_threads",
        ),
        (["--spm_model_file={present}", "--clients=0"], "--clients: expected positive integers"),
        (["--spm_model_file={present}", "--measure=speed"], "--measure: expected some of peers"),
    ],
    "benchmark_step.py": [TYPO],
}

# The modules the scripts define their flags from and check them with.
FLAG_MODULES = (
    "albert_tf.cli",
    "albert_tf.config",
    "albert_tf.convert.checkpoint",
    "albert_tf.finetune.cli",
    "albert_tf.finetune.original_flags",
    "albert_tf.finetune.params",
    "albert_tf.finetune.task",
    "albert_tf.finetune.task_data",
    "albert_tf.input_paths",
    "albert_tf.optim.names",
    "albert_tf.precision",
    "albert_tf.settings",
    "albert_tf.train.params",
)


def _driver(*args, env=None):
    """without_tensorflow.py's JSON answer and the seconds its process took."""
    began = time.perf_counter()
    result = run_python(DRIVER, *args, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), time.perf_counter() - began


def test_every_script_has_cases():
    scripts = {os.path.basename(p) for p in glob.glob(os.path.join(REPO, "scripts", "*.py"))}
    assert scripts == set(CASES)


@pytest.mark.parametrize("script", sorted(CASES))
def test_errors_come_before_tensorflow(script, tmp_path):
    present = tmp_path / "present.txt"
    present.write_text("A sentence.\n")
    names = dict(missing=str(tmp_path / "missing"), present=str(present), out=str(tmp_path / "o"))
    commands = [[arg.format(**names) for arg in args] for args, _ in CASES[script]]
    results, wall = _driver("run", os.path.join(REPO, "scripts", script), json.dumps(commands))
    start_up = wall - sum(r["seconds"] for r in results)  # the interpreter's, shared
    for result, (_, says) in zip(results, CASES[script]):
        where = f"{script} {' '.join(result['args'])}:\n{result['stderr'][-3000:]}"
        assert result["blocked"] == [], where
        assert result["code"] == 1, where
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert len(lines) == 1, where
        assert lines[0].startswith(f"{script}: error: "), where
        assert says.format(**names) in lines[0], where
        assert start_up + result["seconds"] < SECONDS, where
    assert not os.path.exists(names["out"])


def test_flag_modules_import_without_tensorflow():
    blocked, _ = _driver("import", *FLAG_MODULES, env={"ALBERT_TF_LIGHT_IMPORT": "1"})
    assert blocked == []


def test_moved_settings_keep_their_old_homes():
    from albert_tf.finetune import classification, race, squad, tagging, task_data
    from albert_tf.optim import names, optimizers
    from albert_tf.train import params, runner, strategy

    assert classification.ClassificationData is task_data.ClassificationData
    assert tagging.TaggingData is task_data.TaggingData
    assert squad.SquadData is task_data.SquadData
    assert race.RaceData is task_data.RaceData
    assert runner.PretrainingParams is params.PretrainingParams
    assert runner.validate_params is params.validate_params
    assert strategy.STRATEGIES is params.STRATEGIES
    assert optimizers.OPTIMIZERS is names.OPTIMIZERS
