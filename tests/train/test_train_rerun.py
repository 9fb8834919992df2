"""A re-run of run_pretraining into a finished --output_dir is compared with its run.json before
any work: another learning rate or other input files are refused naming old and new values;
evaluation and loop settings may differ; --overwrite_output_dir starts over and ends with the
weights of a fresh run; a directory of an older albert_tf (no run.json) resumes with a warning."""

import json
import logging
import os
import re
import shutil

import pytest
from train_support import checkpoint_values, max_difference, tiny_params

from albert_tf.settings import InvalidFlagError
from albert_tf.train import runner


@pytest.fixture(scope="module")
def finished(records, tmp_path_factory):
    """The --output_dir of a finished 2-step run."""
    out = str(tmp_path_factory.mktemp("pretraining_rerun") / "run")
    assert runner.run_pretraining(tiny_params(records, out))["global_step"] == 2
    return out


def _copy(finished, tmp_path):
    out = str(tmp_path / "run")
    shutil.copytree(finished, out)
    return out


def _final_weights(out):
    return checkpoint_values(os.path.join(out, "checkpoints", "ckpt-2"))


def test_other_settings_are_refused_before_work(records, finished):
    before = {name: os.path.getmtime(os.path.join(finished, name)) for name in os.listdir(finished)}
    one_file = records["train"].split(",")[0]
    with pytest.raises(InvalidFlagError) as error:
        runner.run_pretraining(
            tiny_params(records, finished, learning_rate=0.01, input_file=one_file)
        )
    pattern = (
        f"--output_dir={re.escape(finished)} holds a run with other settings \\(input_file: "
        f"{re.escape(records['train'])} there vs {re.escape(one_file)} now; learning_rate: "
        "0.00176 there vs 0.01 now; input_files: 2 files, (\\d+) bytes, sha256 \\w+ there vs 1 "
        "file, (\\d+) bytes, sha256 \\w+ now\\): rerun with its settings, use a new "
        "--output_dir, or pass --overwrite_output_dir to start over"
    )
    assert re.fullmatch(pattern, str(error.value)), str(error.value)
    after = {name: os.path.getmtime(os.path.join(finished, name)) for name in os.listdir(finished)}
    assert after == before


def test_settings_that_may_differ_resume(records, finished, tmp_path, caplog):
    out = _copy(finished, tmp_path)
    with caplog.at_level(logging.INFO, logger="absl"):
        result = runner.run_pretraining(
            tiny_params(records, out, eval_batch_size=4, steps_per_loop=1)
        )
    assert result["global_step"] == 2 and result["train"] is None  # nothing left to train
    assert (
        "Settings that may differ from the run's record: eval_batch_size: 8 there vs 4 now; "
        "steps_per_loop: 2 there vs 1 now"
    ) in caplog.text


def test_overwrite_output_dir_starts_over(records, finished, tmp_path):
    out = _copy(finished, tmp_path)
    record_path = os.path.join(out, "run.json")
    with open(record_path) as f:
        record = json.load(f)
    record["settings"]["learning_rate"] = 0.01  # as if an earlier run used another rate
    with open(record_path, "w") as f:
        json.dump(record, f)
    with pytest.raises(InvalidFlagError, match=r"\(learning_rate: 0.01 there vs 0.00176 now\)"):
        runner.run_pretraining(tiny_params(records, out))
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("mine")
    result = runner.run_pretraining(tiny_params(records, out, overwrite_output_dir=True))
    assert result["global_step"] == 2 and result["train"] is not None  # trained again
    assert sorted(os.listdir(out)) == sorted(os.listdir(finished) + ["notes.txt"])
    with open(record_path) as f:
        assert json.load(f)["settings"]["learning_rate"] == 0.00176
    assert max_difference(_final_weights(out), _final_weights(finished)) == 0.0  # a fresh run's


def test_a_run_of_an_older_albert_tf_resumes_with_a_warning(records, finished, tmp_path, caplog):
    out = _copy(finished, tmp_path)
    os.remove(os.path.join(out, "run.json"))
    with caplog.at_level(logging.WARNING, logger="absl"):
        result = runner.run_pretraining(tiny_params(records, out, learning_rate=0.01))
    assert result["global_step"] == 2 and result["train"] is None
    assert "holds a run without a record of its settings" in caplog.text
    assert not os.path.exists(os.path.join(out, "run.json"))  # not claimed for these settings
