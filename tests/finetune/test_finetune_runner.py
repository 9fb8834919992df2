"""run_classifier.py end to end under MirroredStrategy over 2 logical CPUs (subprocess), then
export_saved_model.py from its output; flag validation."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(args, timeout=600):
    return subprocess.run(
        [sys.executable] + args,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )


def test_mirrored_fit_eval_export(tmp_path, make_sentence_task, spm_model_file):
    texts, labels = make_sentence_task(limit=96)
    with open(tmp_path / "train.tsv", "w") as f:
        f.write(
            "sentence\tlabel\n"
            + "".join(f"{t}\t{'yes' if y else 'no'}\n" for t, y in zip(texts[:64], labels[:64]))
        )
    with open(tmp_path / "dev.tsv", "w") as f:
        f.write(
            "sentence\tlabel\n"
            + "".join(f"{t}\t{'yes' if y else 'no'}\n" for t, y in zip(texts[64:], labels[64:]))
        )
    out, serving = tmp_path / "out", tmp_path / "serving"
    result = _run(
        [
            "scripts/run_classifier.py",
            "--task_name=mentions-file",
            "--preset=albert_tiny",
            f"--spm_model_file={spm_model_file}",
            f"--train_file={tmp_path / 'train.tsv'}",
            f"--dev_file={tmp_path / 'dev.tsv'}",
            "--text_column=sentence",
            "--max_seq_length=32",
            "--train_batch_size=8",
            "--eval_batch_size=16",
            "--num_train_steps=4",
            "--save_checkpoints_steps=2",
            "--strategy=mirrored",
            "--logical_cpus=2",
            "--dynamic_padding",
            f"--test_file={tmp_path / 'dev.tsv'}",  # labelled: scored once at the end
            "--do_predict",
            f"--output_dir={out}",
            f"--export_dir={serving}",
            "--verbose=0",
        ]
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Strategy MirroredStrategy: 2 replica(s) in sync" in result.stderr
    results = json.load(open(out / "eval_results.json"))
    assert [h["step"] for h in results["history"]] == [2, 4]
    assert results["history"][0]["eval_num_examples"] == len(texts) - 64
    assert set(results["history"][0]) >= {"eval_accuracy", "eval_f1"}
    assert results["best"]["metric"] == "accuracy"
    dev = labels[64:]
    majority = int(dev.mean() > 0.5)  # the dev set's own majority class
    assert dev.mean() != 0.5
    assert results["baselines"]["dev_majority_class_rate"] == float((dev == majority).mean())
    assert results["baselines"]["dev_majority_class"] == ["no", "yes"][majority]
    assert results["baselines"]["f1_positive_class"] == "yes"
    assert "--learning_rate=0.001: the default for --optimizer=adamw at hidden size 128" in (
        result.stderr
    )
    # the dev score chose the checkpoint: said so; the labelled test file is scored once
    assert results["selection"].startswith("best dev accuracy over 2 evaluations (steps 2 to 4)")
    assert results["test"]["step"] == results["best"]["step"]
    assert results["test"]["num_examples"] == len(texts) - 64
    assert "selection: best dev accuracy over 2 evaluations" in result.stderr
    assert os.listdir(serving) == ["1"]
    info = json.load(open(out / "finetune.json"))
    assert info["task"]["labels"] == ["no", "yes"] and info["task"]["pair"] is False
    # small and readable: the SentencePiece model is the file beside it, not base64 inside
    assert os.path.getsize(out / "finetune.json") < 20_000
    assert info["task"]["spm_model_file"] == "spm.model" and (out / "spm.model").exists()
    # a second export from the saved output, in its own process: version 2
    result = _run(
        [
            "scripts/export_saved_model.py",
            f"--model_dir={out}",
            f"--export_dir={serving}",
            "--warmup=false",
        ]
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith(os.path.join(str(serving), "2"))


def test_flag_errors_before_work(tmp_path):
    result = _run(
        [
            "scripts/run_classifier.py",
            "--task_name=mrpc",
            f"--output_dir={tmp_path}",
            "--preset=albert_tiny",
            "--data_dir=/nonexistent",
            "--num_train_steps=0",
        ]
    )
    assert result.returncode != 0
    assert "--num_train_steps must be >= 1, got 0" in result.stderr
    result = _run(
        [
            "scripts/run_classifier.py",
            "--task_name=mrpc",
            f"--output_dir={tmp_path}",
            "--preset=albert_tiny",
            "--data_dir=/x",
            "--strategy=mirrored",
            "--steps_per_execution=4",
        ]
    )
    assert "--steps_per_execution > 1 fails under --strategy=mirrored" in result.stderr
    result = _run(["scripts/export_saved_model.py", f"--export_dir={tmp_path}"])
    assert "give exactly one of --model_dir and --pretrained_dir" in result.stderr
