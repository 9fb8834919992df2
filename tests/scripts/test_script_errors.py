"""Every script reports a bad flag or a bad file as one line `script.py: error: ...` naming it,
with exit code 1, no traceback and none of TensorFlow's C++ start-up log (albert_tf/cli.py);
the error formatting and the start-up log filter in-process.

Each script run imports TensorFlow (a few seconds): one or two runs per script.
"""

import errno
import os
import re
import subprocess
import sys

import pytest
from absl import app
from script_support import REPO, run

from albert_tf import cli
from albert_tf.data.task_spec import DataError
from albert_tf.settings import InvalidFlagError

NOISE = re.compile(r"cuInit|cuda|oneDNN|absl::InitializeLog|cpu_feature_guard")


def error_line(result, script, *names, first=True):
    """The `script: error:` line of a failed run (the first stderr line, or with first=False the
    last after at most two log lines), checked to name each of `names`."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not NOISE.search(result.stderr), result.stderr[-3000:]
    assert 1 <= len(lines) <= (1 if first else 3), result.stderr[-3000:]
    line = lines[0] if first else lines[-1]
    assert line.startswith(f"{script}: error: "), line
    for name in names:
        assert name in line, line
    return line


# ---------------------------------------------------------------- flag errors: first, one line
@pytest.mark.parametrize(
    "script, flags, names",
    [
        ("run_classifier.py", ["--bogus_flag=1"], ["Unknown command line flag 'bogus_flag'"]),
        ("run_token_classifier.py", ["--max_seq_length=abc"], ["--max_seq_length=abc"]),
        (
            "run_squad.py",
            ["--optimizer=sgd"],
            ["flag --optimizer=sgd: value should be one of <adamw|adamw_original|lamb>"],
        ),
        (
            "run_race.py",
            [
                "--output_dir=o",
                "--data_dir=d",
                "--preset=albert_tiny",
                "--gradient_accumulation_steps=0",
            ],
            ["--gradient_accumulation_steps must be >= 1, got 0"],
        ),
        ("run_pretraining.py", ["--output_dir=/nonexistent"], ["--input_file is required"]),
        (
            "convert_checkpoint.py",
            ["--source_format=huggingface", "--input=x", "--output_dir=y", "--config_file=c.json"],
            ["--config_file applies to"],
        ),
        (
            "train_tokenizer.py",
            ["--input=x.txt", "--model_prefix=v", "--vocab_size=8"],
            ["--vocab_size=8 must exceed"],
        ),
    ],
)
def test_flag_error_is_the_first_and_only_line(script, flags, names):
    error_line(run(script, *flags), script, *names)


# ---------------------------------------------------------------- bad input files
@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory, spm_model_file):
    """run_classifier.py on a train file and a dev file written by the test."""
    directory = tmp_path_factory.mktemp("classifier")
    rows = ["Return the file's destination.\tyes", "Numbers are useful examples.\tno"] * 4

    def classify(train_rows, dev_rows):
        for name, body in (("train.tsv", train_rows), ("dev.tsv", dev_rows)):
            (directory / name).write_text("sentence\tlabel\n" + "\n".join(body) + "\n")
        return run(
            "run_classifier.py",
            "--task_name=mentions-file",
            "--preset=albert_tiny",
            f"--spm_model_file={spm_model_file}",
            f"--train_file={directory}/train.tsv",
            f"--dev_file={directory}/dev.tsv",
            "--text_column=sentence",
            "--max_seq_length=16",
            "--num_train_steps=1",
            f"--output_dir={directory}/out",
        )

    return directory, rows, classify


def test_classifier_malformed_line_names_file_and_line(classifier_run):
    directory, rows, classify = classifier_run
    result = classify(rows[:3] + ["a line without its label"] + rows[3:], rows)
    error_line(
        result,
        "run_classifier.py",
        f"{directory}/train.tsv:5:",
        "tab-separated fields",
        first=False,
    )


def test_classifier_unknown_label_names_file_line_and_labels(classifier_run):
    directory, rows, classify = classifier_run
    result = classify(rows, rows[:2] + ["A new sentence.\tmaybe"])
    error_line(
        result,
        "run_classifier.py",
        f"{directory}/dev.tsv:4:",
        "unknown label 'maybe'",
        "['no', 'yes']",
        first=False,
    )


def test_create_pretraining_data_missing_input(tmp_path, spm_model_file):
    missing = tmp_path / "corpus.txt"
    result = run(
        "create_pretraining_data.py",
        f"--input_file={missing}",
        f"--output_file={tmp_path}/train.tfrecord",
        f"--spm_model_file={spm_model_file}",
    )
    error_line(result, "create_pretraining_data.py", str(missing))
    assert list(tmp_path.iterdir()) == []


def test_convert_checkpoint_missing_input(tmp_path):
    result = run(
        "convert_checkpoint.py",
        "--source_format=huggingface",
        f"--input={tmp_path}/hf",
        f"--output_dir={tmp_path}/out",
    )
    error_line(result, "convert_checkpoint.py", f"{tmp_path}/hf")


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory, spm_model_file):
    """A tiny backbone saved with its SentencePiece model (albert_tf.save)."""
    from albert_tf.config import AlbertConfig
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel

    directory = str(tmp_path_factory.mktemp("pretrained") / "model")
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=1)
    model_dir.save(AlbertModel(config), directory, spm_model=spm_model_file)
    return directory


def test_export_existing_version(tmp_path, pretrained_dir):
    (tmp_path / "1").mkdir()
    result = run(
        "export_saved_model.py",
        f"--pretrained_dir={pretrained_dir}",
        f"--export_dir={tmp_path}",
        "--version=1",
        "--max_seq_length=8",
    )
    error_line(result, "export_saved_model.py", f"{tmp_path}/1 already exists")
    assert sorted(os.listdir(tmp_path)) == ["1"]


def test_export_dir_that_cannot_be_created(tmp_path, pretrained_dir):
    blocker = tmp_path / "file.txt"  # a regular file: no directory can be made below it (root too)
    blocker.write_text("not a directory\n")
    result = run(
        "export_saved_model.py",
        f"--pretrained_dir={pretrained_dir}",
        f"--export_dir={blocker}/models",
        "--max_seq_length=8",
    )
    error_line(result, "export_saved_model.py", str(blocker), "not a directory")


def test_export_bfloat16_of_a_float32_only_task(tmp_path, spm_model_file):
    """RACE exports in float32 only (`FinetuneTask.export_compute_dtypes`): refused before the
    model is loaded (model.keras is a placeholder here)."""
    import json

    from albert_tf.finetune.race import RaceTask
    from albert_tf.finetune.task_data import RaceData

    task = RaceTask(RaceData(data_dir="race", max_qa_length=8))
    task.configure_text(spm_model_file, max_seq_length=32)
    (tmp_path / "finetune.json").write_text(json.dumps({"task": task.describe()}))
    (tmp_path / "model.keras").write_text("not loaded\n")
    result = run(
        "export_saved_model.py",
        f"--model_dir={tmp_path}",
        f"--export_dir={tmp_path}/serving",
        "--compute_dtype=bfloat16",
    )
    error_line(
        result,
        "export_saved_model.py",
        "--compute_dtype=bfloat16: a race export runs in float32 only (bfloat16: classification, "
        "regression, tagging and SQuAD tasks, backbones)",
    )
    assert not (tmp_path / "serving").exists()


# ---------------------------------------------------------------- error_message, in-process
def test_user_errors_are_one_line():
    assert cli.error_message(DataError("train.tsv:3: expected 2 fields,\n  found 1")) == (
        "train.tsv:3: expected 2 fields, found 1"
    )
    assert cli.error_message(InvalidFlagError("--num_train_steps must be >= 1")) == (
        "--num_train_steps must be >= 1"
    )
    assert cli.error_message(app.UsageError("--tables: unknown table(s)")) == (
        "--tables: unknown table(s)"
    )


@pytest.mark.parametrize(
    "error, expected",
    [
        (
            FileNotFoundError(errno.ENOENT, "No such file or directory", "/d/train.tsv"),
            "/d/train.tsv: No such file or directory",
        ),
        (
            FileNotFoundError("data file not found: /d/train.tsv"),
            "data file not found: /d/train.tsv",
        ),
        (PermissionError(errno.EACCES, "Permission denied", "/d/x"), "/d/x: Permission denied"),
        (FileExistsError("/m/1 already exists"), "/m/1 already exists"),
        (IsADirectoryError(errno.EISDIR, "Is a directory", "/d"), "/d: Is a directory"),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/f/x"), "/f/x: Not a directory"),
        (
            OSError(errno.ENOSPC, "No space left on device", "/out/a"),
            "/out/a: No space left on device",
        ),
        (OSError(errno.EROFS, "Read-only file system", "/ro/a"), "/ro/a: Read-only file system"),
        (OSError(errno.EACCES, "Permission denied", "/d/y"), "/d/y: Permission denied"),
        (OSError(errno.EIO, "Input/output error", "/mnt/c.txt"), "/mnt/c.txt: Input/output error"),
        (OSError(errno.EXDEV, "Invalid cross-device link", "/a", "/b"), None),
        (ValueError("an internal inconsistency"), None),
        (KeyError("x"), None),
    ],
)
def test_os_errors(error, expected):
    assert cli.error_message(error) == expected


def test_expected_types_of_a_script():
    assert cli.error_message(ValueError("corpus x.txt holds no text")) is None
    assert cli.error_message(ValueError("corpus x.txt holds no text"), (ValueError,)) == (
        "corpus x.txt holds no text"
    )


def test_tensorflow_file_errors():
    import tensorflow as tf

    def error_of(cls, message):
        return cli.error_message(cls(None, None, message))

    assert error_of(tf.errors.NotFoundError, "/d/x.tfrecord; No such file or directory") == (
        "/d/x.tfrecord; No such file or directory"
    )
    assert error_of(tf.errors.PermissionDeniedError, "/d/x; Permission denied") == (
        "/d/x; Permission denied"
    )
    assert (
        error_of(
            tf.errors.DataLossError,
            "corrupted record at 12 [Op:IteratorGetNext]\n\t [[{{node IteratorGetNext}}]]",
        )
        == "corrupted record at 12"
    )
    assert error_of(tf.errors.FailedPreconditionError, "/d/f.txt is not a directory") == (
        "/d/f.txt is not a directory"
    )
    assert error_of(tf.errors.FailedPreconditionError, "train.tsv; Is a directory") == (
        "train.tsv; Is a directory"
    )
    # Not about files: bugs, with their traceback.
    assert (
        error_of(
            tf.errors.FailedPreconditionError,
            "Could not find variable dense/kernel. "
            "This could mean that the variable has been deleted.",
        )
        is None
    )
    assert error_of(tf.errors.ResourceExhaustedError, "OOM when allocating tensor") is None
    assert error_of(tf.errors.InvalidArgumentError, "Incompatible shapes: [2] vs. [3]") is None


def test_staging_paths_are_named_as_their_target(tmp_path):
    """A full disk while a version is staged (the real message of a SavedModel export to a
    300 KiB tmpfs) and while a file is staged: the error names the target, not `.tmp-`."""
    import tensorflow as tf

    from albert_tf import files
    from albert_tf.export import versions

    with pytest.raises(tf.errors.ResourceExhaustedError) as raised:
        with versions.publish_version(str(tmp_path)) as (staging, _):
            raise tf.errors.ResourceExhaustedError(
                None,
                None,
                (
                    "{{function_node __wrapped__SaveV2_dtypes_56_device_/job:localhost/replica:0/"
                    "task:0/device:CPU:0}} " + staging + "/variables/variables_temp/part-00000-of-"
                    "00001.data-00000-of-00001.tempstate14387406170039055167; No space left on "
                    "device [Op:SaveV2]"
                ),
            )
    assert cli.error_message(raised.value) == f"{tmp_path}/1; No space left on device"
    target = str(tmp_path / "train-00000-of-00004.tfrecord")
    error = OSError(errno.ENOSPC, "No space left on device", files.temporary_path(target))
    assert cli.error_message(error) == f"{target}: No space left on device"
    model = str(tmp_path / "model.keras")  # files.save_atomic keeps the extension
    error = OSError(errno.ENOSPC, "No space left on device", files.temporary_path(model) + ".keras")
    assert cli.error_message(error) == f"{model}: No space left on device"


# ---------------------------------------------------------------- cli.run's exits, in-process
@pytest.fixture
def checked(monkeypatch, capsys):
    """Calls cli.run's wrapper of a `main` raising `error`: (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["demo.py"])

    def call(error, expected=()):
        def main(argv):
            raise error

        with pytest.raises(SystemExit) as exited:
            cli._checked(main, expected)(["demo.py"])
        return exited.value.code, capsys.readouterr().err

    return call


def test_exit_codes(checked):
    from albert_tf.train.checkpointing import Preempted
    from albert_tf.train.runner import NonFiniteLossError
    from albert_tf.train.strategy import StrategyError

    assert checked(DataError("a.tsv:2: empty line")) == (1, "demo.py: error: a.tsv:2: empty line\n")
    assert checked(StrategyError("--strategy=tpu: no TPU found")) == (
        1,
        "demo.py: error: --strategy=tpu: no TPU found\n",
    )
    assert checked(NonFiniteLossError("NaN or Inf at step 3")) == (
        3,
        "demo.py: error: NaN or Inf at step 3\n",
    )
    assert checked(Preempted(4, "out/checkpoints/ckpt-4"))[0] == 143
    with pytest.raises(ZeroDivisionError):
        checked(ZeroDivisionError("a bug"))


def test_positional_arguments_are_refused(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["demo.py"])
    with pytest.raises(SystemExit) as exited:
        cli._checked(lambda argv: 0, ())(["demo.py", "extra"])
    assert exited.value.code == 1
    assert capsys.readouterr().err == "demo.py: error: unexpected arguments: extra\n"


# ---------------------------------------------------------------- TensorFlow's start-up log
# The lines TensorFlow 2.21 writes while it loads on a CPU machine, before it reads
# TF_CPP_MIN_LOG_LEVEL (cuInit comes later, when devices are created, and obeys the variable).
STARTUP_LOG = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1795525286.504509   22477 port.cc:153] oneDNN custom operations are on.\n"
    "I0000 00:00:1795525286.504835   22477 cudart_stub.cc:31] Could not find cuda drivers on your "
    "machine, GPU will not be used.\n"
    "W0000 00:00:1795525286.6   22477 x.cc:1] a warning\n"
    "E0000 00:00:1795525286.7   22477 y.cc:2] an error\n"
    "a line of Python\n"
)


@pytest.mark.parametrize(
    "level, kept",
    [
        ("3", "a line of Python\n"),
        ("2", "E0000 00:00:1795525286.7   22477 y.cc:2] an error\na line of Python\n"),
        ("0", STARTUP_LOG),
    ],
)
def test_startup_log_filter(level, kept):
    """Lines below TF_CPP_MIN_LOG_LEVEL are dropped from what is written to file descriptor 2
    inside the filter; the rest is kept in order (a process without TensorFlow, 0.1 s)."""
    code = (
        "import os\nfrom albert_tf._env import startup_log_filter\n"
        f"with startup_log_filter():\n    os.write(2, {STARTUP_LOG.encode()!r})\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=level, ALBERT_TF_LIGHT_IMPORT="1", PYTHONPATH=REPO)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == kept


def test_help_lists_the_generated_flags():
    """--help shows the flags generated from the settings dataclasses (training and data), not
    only a pointer to --helpfull."""
    result = run("run_squad.py", "--help")  # absl exits with 1 after --help
    assert "Traceback" not in result.stderr
    listed = set(re.findall(r"^  --(?:\[no\])?(\w+):", result.stdout, re.M))
    assert {"learning_rate", "output_dir", "doc_stride", "version_2_with_negative"} <= listed
