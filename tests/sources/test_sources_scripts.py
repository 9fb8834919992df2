"""Every script that takes a pretrained model takes it by name: a few steps of each fine-tuning
script, continued pretraining and a conversion, each from a name served by the local stand-ins
of storage.googleapis.com and huggingface.co (hub_server.py), in a subprocess with the user's
environment variables; the run records name the model (a backbone export by name:
tests/export/test_tfhub_export.py)."""

import json
import os
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def script(name, *args, timeout=300):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", name), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )


def assert_ok(result):
    assert result.returncode == 0, result.stderr[-3000:]


def model_line(result):
    """The one log line naming the resolved model."""
    return next(line for line in result.stderr.splitlines() if "] Model " in line)


TINY = ["--max_seq_length=32", "--train_batch_size=4", "--eval_batch_size=16", "--verbose=0"]


def test_run_classifier_from_hf_records_the_source(hub, hub_env, tmp_path):
    spec, out = f"hf://{hub.repo_id}", tmp_path / "out"
    rows = [("Open the file.", "yes"), ("Close it now.", "no")] * 8
    for split in ("train", "dev"):
        (tmp_path / f"{split}.tsv").write_text(
            "text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows)
        )
    args = [
        "--task_name=mentions-file",
        f"--train_file={tmp_path / 'train.tsv'}",
        f"--dev_file={tmp_path / 'dev.tsv'}",
        f"--output_dir={out}",
        "--num_train_steps=2",
        "--save_checkpoints_steps=2",
        *TINY,
    ]
    result = script("run_classifier.py", f"--init_checkpoint={spec}", *args)
    assert_ok(result)
    line = model_line(result)
    assert f"Model {spec}: {hub.url}/{hub.repo_id} at commit {hub.commit}" in line
    assert "converted from Hugging Face" in line and hub_env["ALBERT_TF_HOME"] in line
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["init_checkpoint"] == spec
    assert run["data"]["init_checkpoint_source"]["source"].endswith(hub.commit)
    info = json.loads((out / "finetune.json").read_text())
    assert info["init_checkpoint_source"]["cache"].startswith(hub_env["ALBERT_TF_HOME"])
    assert info["params"]["init_checkpoint"] == spec
    # a rerun with another model is refused by the run record (tests/finetune/
    # test_rerun_record.py): the name and its source are what it compares


def test_token_classifier_squad_and_race_from_names(hub, hub_env, tmp_path):
    from albert_tf.data.docstring_qa import write_docstring_squad
    from albert_tf.data.docstring_race import write_docstring_race

    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    write_docstring_squad(str(train), str(dev), max_paragraphs=6)
    write_docstring_race(str(tmp_path / "race"), 120)
    conll = tmp_path / "tags.conll"
    conll.write_text("".join("Open O\nthe O\nfile B-OBJ\nnow O\n\n" for _ in range(8)))
    # two steps, no dev evaluation (the runner's evaluation is not what is tested here)
    steps = ["--num_train_steps=2", "--save_checkpoints_steps=2", "--nodo_eval", *TINY]
    runs = {
        "run_token_classifier.py": [
            f"--train_file={conll}",
            f"--dev_file={conll}",
            f"--init_checkpoint={hub.release_url}",
        ],
        "run_squad.py": [
            f"--train_file={train}",
            f"--predict_file={dev}",
            "--doc_stride=16",
            "--max_query_length=12",
            f"--feature_cache_dir={tmp_path / 'cache'}",
            f"--init_checkpoint={hub.release_url}",
        ],
        "run_race.py": [
            f"--data_dir={tmp_path / 'race'}",
            "--max_qa_length=12",
            f"--init_checkpoint=hf://{hub.repo_id}@{hub.commit}",
        ],
    }
    processes = {
        name: subprocess.Popen(
            [
                sys.executable,
                os.path.join(REPO, "scripts", name),
                *args,
                *steps,
                f"--output_dir={tmp_path / name}",
            ],
            cwd=REPO,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in runs.items()
    }
    for name, process in processes.items():
        _, stderr = process.communicate(timeout=400)
        assert process.returncode == 0, f"{name}: {stderr[-3000:]}"
        assert (tmp_path / name / "model.keras").exists()
    # one download of the archive for two scripts (the second waited for the first's lock or
    # found the entry); the pinned hf:// name asked the Hub for nothing it had cached
    archive = [p for m, p, _ in hub.server.requests if m == "GET" and p.endswith(".tar.gz")]
    assert archive == ["/albert_models/albert_base_v2.tar.gz"]


def test_continued_pretraining_and_conversion_from_names(hub, hub_env, tmp_path):
    from albert_tf.data.instances import InstanceConfig
    from albert_tf.data.masking import MaskingConfig
    from albert_tf.data.pretraining import CreationConfig, create_pretraining_data

    corpus = tmp_path / "corpus.txt"
    lines = [f"Open the file number {i} and read line {i % 7} of it." for i in range(40)]
    corpus.write_text("\n\n".join("\n".join(lines[i : i + 4]) for i in range(0, 40, 4)))
    records = tmp_path / "train.tfrecord"
    masking = MaskingConfig(max_predictions_per_seq=5)
    config = CreationConfig(InstanceConfig(max_seq_length=32, masking=masking), dupe_factor=2)
    create_pretraining_data(str(corpus), str(records), hub.tiny_release.spm_model, config=config)
    pretrain = script(
        "run_pretraining.py",
        f"--init_checkpoint=hf://{hub.repo_id}",
        f"--input_file={records}",
        f"--output_dir={tmp_path / 'pretrain'}",  # its config: the named model's
        "--max_seq_length=32",
        "--max_predictions_per_seq=5",
        "--train_batch_size=4",
        "--num_train_steps=2",
        "--save_checkpoints_steps=2",
        "--steps_per_loop=1",
    )
    assert_ok(pretrain)
    assert "] Model hf://" in pretrain.stderr
    assert (
        json.loads((tmp_path / "pretrain" / "run.json").read_text())["settings"]["init_checkpoint"]
        == f"hf://{hub.repo_id}"
    )
    # export_saved_model.py --pretrained_dir by name: tests/export/test_tfhub_export.py
    converted = script(
        "convert_checkpoint.py",
        f"--input=hf://{hub.repo_id}",
        "--target_format=original",
        f"--output_dir={tmp_path / 'tf1'}",
    )
    assert_ok(converted)
    assert (tmp_path / "tf1" / "albert_config.json").exists()


def test_a_killed_download_leaves_nothing_and_the_rerun_fetches_whole(hub, hub_env):
    """SIGKILL in the middle of a download: no cache entry, only a staging file that the next
    run removes; the rerun downloads the archive whole."""
    from albert_tf import sources

    hub.server.fault("/albert_models/albert_base_v2.tar.gz", "slow", delay=0.5)
    code = f"from albert_tf import sources; sources.resolve({hub.release_url!r})"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=dict(os.environ, ALBERT_TF_LIGHT_IMPORT="1", PYTHONPATH=REPO),
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while not hub.server.count(".tar.gz") and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.2)  # a few chunks have arrived
    process.send_signal(signal.SIGKILL)
    process.wait()
    addresses = os.path.join(hub_env["ALBERT_TF_HOME"], "addresses")
    left = os.listdir(addresses)
    assert left and all(name.startswith(".tmp-") for name in left)  # staging only
    hub.server.clear_faults()
    resolved = sources.resolve(hub.release_url, quiet=True)
    assert os.listdir(addresses) == [os.path.basename(resolved.cache)]
    assert hub.server.count(".tar.gz") == 2


def test_unknown_model_flag_fails_before_tensorflow(tmp_path):
    result = script(
        "run_classifier.py",
        "--task_name=docstring-source",
        f"--output_dir={tmp_path}",
        "--init_checkpoint=albert_bsae_v2",
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run_classifier.py: error: --init_checkpoint=albert_bsae_v2: unknown")
    assert "did you mean albert_base_v2?" in last
