"""Every committed flagfile parses with its script's flags and passes the script's validation,
and the demo's data shapes match the tiny recipe (a mismatch fails only after minutes of work)."""

import glob
import json
import os
import re
import subprocess
import sys
import textwrap

from train_support import REPO

# Loads a script as a module, parses each flagfile with the script's own flags plus the
# command-line flags its header asks for, runs the script's validation, prints the parsed values.
_CHECK = textwrap.dedent("""
    import importlib.util, json, sys
    from absl import flags
    script, extra, paths = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    spec = importlib.util.spec_from_file_location("script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    FLAGS = flags.FLAGS
    parsed = {}
    for path in paths:
        FLAGS.unparse_flags()
        FLAGS(["script", "--flagfile=" + path] + extra)
        if hasattr(module, "params_from_flags"):
            from albert_tf.train import runner
            runner.validate_params(module.params_from_flags())
        else:  # fine-tuning scripts: FinetuneParams generated from the flags
            from albert_tf.finetune.params import FinetuneParams, validate
            from albert_tf.settings import from_flags
            validate(from_flags(FinetuneParams))
        parsed[path] = {k: getattr(FLAGS, k) for k in ("max_seq_length", "learning_rate")}
    print(json.dumps(parsed))
""")


def _check(script, extra, paths):
    env = dict(
        os.environ,
        KERAS_BACKEND="tensorflow",
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    result = subprocess.run(
        [sys.executable, "-c", _CHECK, script, json.dumps(extra)] + paths,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_pretraining_flagfiles_are_valid(tmp_path):
    records = tmp_path / "train.tfrecord"
    records.write_bytes(b"")
    paths = sorted(glob.glob(os.path.join(REPO, "flags", "pretrain_*.flags")))
    assert len(paths) == 5
    parsed = _check(
        "scripts/run_pretraining.py",
        [f"--input_file={records}", f"--output_dir={tmp_path / 'out'}"],
        paths,
    )
    base = parsed[os.path.join(REPO, "flags", "pretrain_albert_base_v2.flags")]
    assert base == {"max_seq_length": 512, "learning_rate": 0.00176}  # the paper's recipe


def test_glue_flagfiles_are_valid(tmp_path):
    paths = sorted(glob.glob(os.path.join(REPO, "flags", "glue_*.flags")))
    assert len(paths) == 10
    parsed = _check(
        "scripts/run_classifier.py",
        [
            "--init_checkpoint=pretrained",
            f"--data_dir={tmp_path}",
            f"--output_dir={tmp_path / 'out'}",
        ],
        paths,
    )
    assert all(values["learning_rate"] > 0 for values in parsed.values())


def test_squad_and_race_flagfiles_are_valid(tmp_path):
    squad = sorted(glob.glob(os.path.join(REPO, "flags", "squad_*.flags")))
    assert len(squad) == 2
    parsed = _check(
        "scripts/run_squad.py",
        ["--init_checkpoint=pretrained", f"--output_dir={tmp_path / 'out'}"],
        squad,
    )
    assert parsed[os.path.join(REPO, "flags", "squad_v1.flags")] == {
        "max_seq_length": 384,
        "learning_rate": 5e-5,
    }  # Table 14
    parsed = _check(
        "scripts/run_race.py",
        [
            "--init_checkpoint=pretrained",
            f"--data_dir={tmp_path}",
            f"--output_dir={tmp_path / 'out'}",
        ],
        [os.path.join(REPO, "flags", "race.flags")],
    )
    assert list(parsed.values()) == [{"max_seq_length": 512, "learning_rate": 2e-5}]


def test_demo_data_matches_the_tiny_recipe():
    with open(os.path.join(REPO, "flags", "pretrain_tiny_cpu.flags")) as f:
        recipe = dict(
            re.findall(r"^--(max_seq_length|max_predictions_per_seq)=(\d+)$", f.read(), re.M)
        )
    with open(os.path.join(REPO, "scripts", "demo.sh")) as f:
        demo = f.read()
    assert recipe.keys() == {"max_seq_length", "max_predictions_per_seq"}
    for name, value in recipe.items():
        written = re.findall(rf"--{name}=(\d+)", demo)
        assert len(written) == 2, name  # the training and the held-out records
        assert set(written) == {value}, (name, written, value)
