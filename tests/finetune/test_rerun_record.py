"""A re-run into a finished fine-tuning --output_dir is compared with its run.json before any
work: another learning rate, init checkpoint (path or content), train file (path or content),
sequence length or batch size is refused in one line naming old and new values (exit 1 through
the script); eval_batch_size or verbose may differ; --overwrite_output_dir starts over and ends
as a fresh run in a new directory does; a run.json of an older albert_tf is accepted with a
warning."""

import contextlib
import dataclasses
import json
import logging
import os
import shutil

import pytest
from finetune_support import script, write_tsv_splits

from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
from albert_tf.finetune.params import FinetuneParams
from albert_tf.finetune.runner import run_finetuning
from albert_tf.settings import InvalidFlagError

DATA_FIELDS = {f.name for f in dataclasses.fields(ClassificationData)}


def _run(finished, output_dir, **overrides):
    """run_finetuning on the finished run's settings with `overrides` (params or data fields)."""
    values = dict(
        output_dir=output_dir,
        init_checkpoint=finished["init"],
        max_seq_length=32,
        train_batch_size=8,
        eval_batch_size=16,
        num_train_steps=2,
        save_checkpoints_steps=2,
        learning_rate=5e-4,
        verbose=0,
        task_name="mentions-file",
        train_file=finished["paths"]["train"],
        dev_file=finished["paths"]["dev"],
        text_column="sentence",
    )
    values.update(overrides)
    data = ClassificationData(**{k: v for k, v in values.items() if k in DATA_FIELDS})
    params = FinetuneParams(**{k: v for k, v in values.items() if k not in DATA_FIELDS})
    return run_finetuning(params, SentenceClassificationTask(data, seed=params.seed))


def _save_init(path, spm_model_file, seed):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel

    keras.utils.set_random_seed(seed)
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=2)
    model_dir.save(AlbertModel(config), path, spm_model=spm_model_file)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, corpus_file, spm_model_file):
    """A finished 2-step run: {"paths": train/dev files, "init", "out", "spm", "result"}."""
    root = tmp_path_factory.mktemp("rerun")
    paths, _ = write_tsv_splits(str(root), corpus_file)
    init = str(root / "init")
    _save_init(init, spm_model_file, seed=1)
    run = {"paths": paths, "init": init, "out": str(root / "out"), "spm": spm_model_file}
    run["result"] = _run(run, run["out"])
    return run


def _outputs(directory):
    """{name: bytes} of the run's records, to check that a refused re-run wrote nothing."""
    names = ("run.json", "eval_results.json", "finetune.json")
    return {n: open(os.path.join(directory, n), "rb").read() for n in names}


@contextlib.contextmanager
def _changed(path, change):
    """`change(path)` for the duration of the block, then the file or directory as it was."""
    backup = path + ".backup"
    (shutil.copytree if os.path.isdir(path) else shutil.copy)(path, backup)
    try:
        change(path)
        yield
    finally:
        (shutil.rmtree if os.path.isdir(path) else os.remove)(path)
        os.rename(backup, path)


def _other_train_line(path):
    with open(path) as f:
        lines = f.readlines()
    lines[1] = "A sentence that was not in the file.\tno\n"
    with open(path, "w") as f:
        f.writelines(lines)


# The learning rate, sequence length and batch size: test_the_script_exits_1_naming_every_...
CHANGES = {
    "preset": (
        dict(init_checkpoint=None, preset="albert_tiny", spm_model_file="SPM"),
        ["init_checkpoint: INIT there vs None now", "preset: None there vs albert_tiny now"],
    ),
    "train_file": (dict(train_file="COPY"), ["train_file: TRAIN there vs COPY now"]),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_changed_setting_is_refused_before_work(finished, name, tmp_path):
    overrides, fragments = CHANGES[name]
    names = {"SPM": finished["spm"], "INIT": finished["init"], "COPY": str(tmp_path / "t.tsv")}
    names["TRAIN"] = finished["paths"]["train"]
    shutil.copy(finished["paths"]["train"], names["COPY"])
    overrides = {k: names.get(v, v) if isinstance(v, str) else v for k, v in overrides.items()}
    before = _outputs(finished["out"])
    with pytest.raises(InvalidFlagError) as error:
        _run(finished, finished["out"], **overrides)
    message = str(error.value)
    assert message.startswith(f"--output_dir={finished['out']} holds a run with other settings (")
    assert message.endswith(
        "): rerun with its settings, use a new --output_dir, or pass --overwrite_output_dir to "
        "start over"
    )
    for fragment in fragments:
        fragment = " ".join(names.get(word, word) for word in fragment.split(" "))
        assert fragment in message, message
    if name == "train_file":  # the same content elsewhere: only the path differs
        assert message.count(" there vs ") == 1, message
    assert _outputs(finished["out"]) == before


def test_changed_contents_are_refused(finished):
    """The same paths holding other bytes: the train file, the init checkpoint's weights."""
    train = finished["paths"]["train"]
    with _changed(train, _other_train_line):
        with pytest.raises(InvalidFlagError, match=r"\(train_data: 64 rows, sha256 \w+ there vs "):
            _run(finished, finished["out"])
    init = finished["init"]
    with _changed(init, lambda path: _save_init(path, finished["spm"], seed=2)):
        with pytest.raises(
            InvalidFlagError, match=r"\(init_checkpoint_content: 4 files, \d+ bytes, sha256 \w+ "
        ):
            _run(finished, finished["out"])


def test_the_script_exits_1_naming_every_difference(finished):
    args = [
        "--task_name=mentions-file",
        f"--init_checkpoint={finished['init']}",
        f"--train_file={finished['paths']['train']}",
        f"--dev_file={finished['paths']['dev']}",
        "--text_column=sentence",
        "--max_seq_length=24",
        "--train_batch_size=4",
        "--eval_batch_size=16",
        "--num_train_steps=2",
        "--save_checkpoints_steps=2",
        "--learning_rate=1e-3",
        f"--output_dir={finished['out']}",
        "--verbose=0",
    ]
    result = script("run_classifier.py", args)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_classifier.py: error: --output_dir={finished['out']} holds a run with other "
        "settings (max_seq_length: 32 there vs 24 now; train_batch_size: 8 there vs 4 now; "
        "learning_rate: 0.0005 there vs 0.001 now): rerun with its settings, use a new "
        "--output_dir, or pass --overwrite_output_dir to start over"
    )


def test_settings_that_may_differ_resume(finished, tmp_path, caplog):
    out = str(tmp_path / "out")
    shutil.copytree(finished["out"], out)
    with caplog.at_level(logging.INFO, logger="absl"):
        result = _run(finished, out, eval_batch_size=8, verbose=2)
    assert result["global_step"] == 2 and result["best"] == finished["result"]["best"]
    assert "training is complete" in caplog.text
    assert (
        "Settings that may differ from the run's record: eval_batch_size: 16 there vs 8 now; "
        "verbose: 0 there vs 2 now"
    ) in caplog.text
    with open(os.path.join(out, "finetune.json")) as f:
        assert json.load(f)["params"]["eval_batch_size"] == 8  # what this invocation used


def test_overwrite_output_dir_starts_over(finished, tmp_path):
    """A directory whose run.json holds other settings: refused, then started over with
    --overwrite_output_dir, which removes the run's files (not the user's) and ends with the
    results of a fresh run in a new directory."""
    out = tmp_path / "out"
    shutil.copytree(finished["out"], out)
    record = json.loads((out / "run.json").read_text())
    record["settings"]["learning_rate"] = 0.01
    (out / "run.json").write_text(json.dumps(record))
    with pytest.raises(InvalidFlagError, match=r"\(learning_rate: 0.01 there vs 0.0005 now\)"):
        _run(finished, str(out))
    (out / "notes.txt").write_text("mine")
    (out / "test_results.tsv").write_text("stale predictions\n")
    (out / "checkpoints" / "state-99.json").write_text("{}")
    result = _run(finished, str(out), overwrite_output_dir=True)
    assert sorted(os.listdir(out)) == sorted(os.listdir(finished["out"]) + ["notes.txt"])
    assert not (out / "checkpoints" / "state-99.json").exists()
    assert json.loads((out / "run.json").read_text())["settings"]["learning_rate"] == 0.0005
    fresh = json.loads(open(os.path.join(finished["out"], "eval_results.json")).read())
    assert json.loads((out / "eval_results.json").read_text()) == fresh
    assert result["best"] == finished["result"]["best"] == fresh["best"]


def test_a_record_of_an_older_albert_tf_is_accepted_with_a_warning(finished, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(finished["out"], out)
    record = json.loads((out / "run.json").read_text())
    older = {k: record[k] for k in ("model", "task", "num_classes")}
    (out / "run.json").write_text(json.dumps(older))
    result = _run(finished, str(out))
    assert result["global_step"] == 2 and result["best"] == finished["result"]["best"]
    assert json.loads((out / "run.json").read_text()) == older  # not claimed for these settings
    warnings = json.loads((out / "finetune.json").read_text())["warnings"]
    assert any("were not recorded (an older albert_tf)" in w for w in warnings), warnings
