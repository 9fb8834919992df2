"""run_squad.py end to end on SQuAD v1.1 / v2.0 files built from local text (the built-in
docstrings: fill in the code), with the feature cache and the original's output files."""

import json
import os

import pytest
from finetune_support import script


@pytest.fixture(scope="module")
def squad_files(tmp_path_factory):
    from albert_tf.data.docstring_qa import write_docstring_squad

    directory = tmp_path_factory.mktemp("squad")
    paths = {}
    for version, v2 in (("v1", False), ("v2", True)):
        train, dev = (
            str(directory / f"train-{version}.json"),
            str(directory / f"dev-{version}.json"),
        )
        write_docstring_squad(train, dev, max_paragraphs=30, version_2_with_negative=v2)
        paths[version] = (train, dev)
    return paths


def _flags(files, spm_model_file, output_dir, cache_dir, **overrides):
    values = dict(
        train_file=files[0],
        predict_file=files[1],
        preset="albert_tiny",
        spm_model_file=spm_model_file,
        max_seq_length=64,
        doc_stride=24,
        max_query_length=24,
        train_batch_size=8,
        eval_batch_size=32,
        num_train_steps=4,
        save_checkpoints_steps=2,
        learning_rate=1e-3,
        output_dir=output_dir,
        feature_cache_dir=cache_dir,
        verbose=0,
    )
    values.update(overrides)
    return [f"--{k}={v}" for k, v in values.items() if v is not None]


def _question_ids(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return sorted(q["id"] for a in data for p in a["paragraphs"] for q in p["qas"])


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_train_evaluate_answer(version, squad_files, spm_model_file, tmp_path):
    files = squad_files[version]
    out, cache = tmp_path / "out", tmp_path / "cache"
    extra = (
        {"version_2_with_negative": True, "start_n_top": 3, "end_n_top": 3}
        if version == "v2"
        else {"export_dir": tmp_path / "serving"}
    )
    result = script("run_squad.py", _flags(files, spm_model_file, out, cache, **extra))
    assert result.returncode == 0, result.stderr[-4000:]
    results = json.load(open(out / "eval_results.json"))
    assert [h["step"] for h in results["history"]] == [2, 4]
    first = results["history"][0]
    keys = (
        {"eval_exact_match", "eval_f1"}
        if version == "v1"
        else {
            "eval_exact",
            "eval_f1",
            "eval_HasAns_f1",
            "eval_NoAns_f1",
            "eval_best_f1",
            "eval_null_score_diff_threshold",
        }
    )
    assert keys <= set(first), sorted(first)
    assert results["best"]["metric"] == "f1"
    baselines = results["baselines"]
    assert baselines["dev_first_words"] >= 1 and 0 <= baselines["dev_first_words_f1"] < 100
    dev_ids = _question_ids(files[1])
    assert first["eval_num_questions"] == len(dev_ids)
    predictions = json.load(open(out / "predictions.json"))
    assert sorted(predictions) == dev_ids
    nbest = json.load(open(out / "nbest_predictions.json"))
    assert all(1 <= len(nbest[q]) <= 20 for q in dev_ids)
    assert os.path.exists(out / "null_odds.json") == (version == "v2")
    if version == "v2":  # the chosen model's dev threshold is the one recorded for exports
        best = next(h for h in results["history"] if h["step"] == results["best"]["step"])
        task = json.load(open(out / "finetune.json"))["task"]
        assert task["null_threshold"] == best["eval_null_score_diff_threshold"]
    from albert_tf.finetune.task import tsv_field

    with open(out / "dev_results.tsv", encoding="utf-8") as f:  # one row per question
        table = [line.rstrip("\n").split("\t") for line in f]
    assert table[0] == ["id", "question", "label", "prediction", "exact_match", "f1"]
    assert sorted(r[0] for r in table[1:]) == dev_ids
    assert all(r[3] == tsv_field(predictions[r[0]]) for r in table[1:])
    # the cache holds one feature file per (file, settings); a re-run reuses it and trains no more
    cached = sorted(f for f in os.listdir(cache) if f.endswith(".tfrecord"))
    assert len(cached) == 2 and not any(f.startswith(".") for f in os.listdir(cache))
    again = script("run_squad.py", _flags(files, spm_model_file, out, cache, **extra))
    assert again.returncode == 0, again.stderr[-4000:]
    assert "reading the cache" in again.stderr and "training is complete" in again.stderr
    assert json.load(open(out / "eval_results.json"))["history"] == results["history"]
    if version == "v1":  # exported at the end, and again from the run's files: version 2
        assert os.listdir(tmp_path / "serving") == ["1"]
        exported = script(
            "export_saved_model.py",
            [f"--model_dir={out}", f"--export_dir={tmp_path / 'serving'}", "--warmup=false"],
        )
        assert exported.returncode == 0, exported.stderr[-4000:]
        assert exported.stdout.strip().endswith(os.path.join(str(tmp_path / "serving"), "2"))


def test_bad_squad_input_is_one_line(squad_files, spm_model_file, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.1", "data": [{"paragraphs": [}]}', encoding="utf-8")
    result = script(
        "run_squad.py",
        _flags(
            (squad_files["v1"][0], str(bad)), spm_model_file, tmp_path / "out", tmp_path / "cache"
        ),
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert str(bad) in result.stderr.strip().splitlines()[-1]
    result = script(
        "run_squad.py",
        _flags(
            squad_files["v1"], spm_model_file, tmp_path / "o2", tmp_path / "cache", doc_stride=0
        ),
    )
    assert result.returncode == 1 and "--doc_stride must be >= 1" in result.stderr
