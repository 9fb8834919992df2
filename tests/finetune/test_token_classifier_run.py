"""run_token_classifier.py end to end on CoNLL files built from local text (the built-in
"docstring-code" task), re-export from its output, and bad input as one-line errors."""

import json
import os

import pytest
from finetune_support import script


@pytest.fixture(scope="module")
def conll_files(tmp_path_factory):
    """train/dev/test in the CoNLL-2003 layout from the installed packages' docstrings."""
    from albert_tf.data.docstring_entities import conll_text, docstring_code_splits

    splits = docstring_code_splits(max_sentences=240)
    directory = tmp_path_factory.mktemp("conll")
    paths = {}
    for split, documents in splits.items():
        paths[split] = str(directory / f"{split}.txt")
        with open(paths[split], "w", encoding="utf-8") as f:
            f.write(conll_text(documents))
    return paths


def _flags(paths, spm_model_file, output_dir, **overrides):
    values = dict(
        train_file=paths["train"],
        dev_file=paths["dev"],
        preset="albert_tiny",
        spm_model_file=spm_model_file,
        max_seq_length=24,
        stride=8,
        train_batch_size=8,
        eval_batch_size=32,
        num_train_steps=6,
        save_checkpoints_steps=3,
        learning_rate=1e-3,
        output_dir=output_dir,
        verbose=0,
    )
    values.update(overrides)
    return [f"--{k}={v}" for k, v in values.items() if v is not None]


def _sentences(path):
    """[[words]] of a CoNLL file (the first column), -DOCSTART- skipped."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                if current:
                    sentences.append(current)
                current = []
            elif fields[0] != "-DOCSTART-":
                current.append(fields[0])
    return sentences + ([current] if current else [])


@pytest.fixture(scope="module")
def finished_run(conll_files, spm_model_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("ner") / "run"
    serving = out.parent / "serving"
    result = script(
        "run_token_classifier.py",
        _flags(
            conll_files,
            spm_model_file,
            out,
            test_file=conll_files["test"],
            do_predict=True,
            export_dir=serving,
        ),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return out, serving, result


def test_fit_evaluate_predict_export(finished_run, conll_files):
    out, serving, result = finished_run
    assert "longer than one window" in result.stderr
    results = json.load(open(out / "eval_results.json"))
    assert [h["step"] for h in results["history"]] == [3, 6]
    first = results["history"][0]
    assert {
        "eval_precision",
        "eval_recall",
        "eval_f1",
        "eval_token_accuracy",
        "eval_ARG_f1",
        "eval_ARG_support",
    } <= set(first)
    assert first["eval_num_sentences"] == len(_sentences(conll_files["dev"]))
    assert results["best"]["metric"] == "f1"
    assert 0.0 < results["baselines"]["dev_most_frequent_tag_token_accuracy"] < 1.0
    # one predicted tag per word of the test file, in its order, in the CoNLL layout
    predicted = _sentences(out / "test_predictions.txt")
    assert predicted == _sentences(conll_files["test"])
    # the test file has tags: scored once with the chosen model, beside the selection note
    assert results["test"]["step"] == results["best"]["step"]
    assert results["test"]["num_sentences"] == len(predicted) and "f1" in results["test"]
    assert "chosen on the dev set it is reported on" in results["selection"]
    assert "'test' is the chosen checkpoint's score" in results["selection"]
    assert "test, scored once with the model of step" in result.stderr
    # padding cut to the sentences (at most the 24-piece window) and recorded with percentiles
    assert results["data"]["lengths"]["split"] == "train"
    assert results["data"]["lengths"]["max"] <= 24
    # result tables: one row per word with its gold and predicted tag, by name
    with open(out / "dev_results.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    assert rows[0] == ["sentence", "word", "label", "prediction"]
    dev_words = [w for sentence in _sentences(conll_files["dev"]) for w in sentence]
    assert [r[1] for r in rows[1:]] == dev_words
    tags = set(json.load(open(out / "finetune.json"))["task"]["labels"])
    assert {r[2] for r in rows[1:]} <= tags and {r[3] for r in rows[1:]} <= tags
    assert open(out / "test_results.tsv").readline().split() == rows[0]
    info = json.load(open(out / "finetune.json"))
    assert info["task"]["spm_model_file"] == "spm.model" and (out / "spm.model").exists()
    assert info["task"]["kind"] == "token_classification"
    assert info["task"]["labels"][0] == "O" and "B-ARG" in info["task"]["labels"]
    # the words were split as the export splits raw text: the punctuation convention, recorded
    words = info["task"]["word_convention"]
    assert (words["convention"], words["chosen_by"]) == ("punctuation", "training data")
    assert words["punctuation_reproduces"] == 1.0 and words["words"] > 1000
    assert "word convention: punctuation (training data; the punctuation split reproduces " in (
        result.stderr
    )
    assert os.listdir(serving) == ["1"]
    # the served tags against the runner's dev predictions: the same words, the same tags
    agreement = info["export_agreement"]
    assert (
        agreement["dev_words"] == len(dev_words) and agreement["word_convention"] == "punctuation"
    )
    assert agreement["raw_text"]["same_words"] == 1.0
    assert agreement["words_signature"]["word_agreement"] >= 0.99
    assert agreement["raw_text"]["word_agreement"] >= 0.99
    assert abs(agreement["runner"]["f1"] - results["best"]["value"]) < 1e-9  # the chosen model
    assert agreement["runner_precision"] == results["precision"] == info["params"]["precision"]
    assert agreement["warnings"] == [] and not [w for w in info["warnings"] if "agree" in w]
    first = json.load(open(serving / "1" / "assets.extra" / "albert_tf.json"))
    assert first["word_convention"] == "punctuation"
    assert first["agreement_with_dev_predictions"] == agreement
    # the same output exported again from its files, in its own process: version 2, overriding
    # the word convention (a WARNING: the training data splits punctuation off), measured again
    # against dev_predictions.txt (the same words: tokens joined by spaces)
    again = script(
        "export_saved_model.py",
        [
            f"--model_dir={out}",
            f"--export_dir={serving}",
            "--warmup=false",
            "--word_split=whitespace",
        ],
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stdout.strip().endswith(os.path.join(str(serving), "2"))
    assert "--word_split=whitespace contradicts the training data" in again.stderr
    described = json.load(open(serving / "2" / "assets.extra" / "albert_tf.json"))
    assert described["kind"] == "token_classifier" and described["stride"] == 8
    assert described["word_convention"] == "whitespace"
    measured = described["agreement_with_dev_predictions"]
    assert json.loads(again.stdout.strip().splitlines()[-2]) == {
        "agreement_with_dev_predictions": measured
    }
    assert measured["raw_text"]["same_words"] == 1.0
    assert measured["words_signature"]["word_agreement"] >= 0.99


def _one_line_error(result, *fragments):
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in last, last
    return last


def test_bad_input_is_one_line(conll_files, spm_model_file, finished_run, tmp_path):
    out = tmp_path / "bad"
    dev = tmp_path / "dev.txt"
    dev.write_text("Call O\nfoo B-FUNC\n\n", encoding="utf-8")
    result = script(
        "run_token_classifier.py", _flags(conll_files, spm_model_file, out, dev_file=dev)
    )
    _one_line_error(result, f"{dev}:2: unknown tag 'B-FUNC'")
    assert not out.exists() or not any(out.iterdir())

    short = tmp_path / "short.txt"
    short.write_text("Call O\nfoo\n\n", encoding="utf-8")
    result = script(
        "run_token_classifier.py", _flags(conll_files, spm_model_file, out, dev_file=short)
    )
    _one_line_error(result, f"{short}:2")

    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text('{"tokens": ["a", "b"], "tags": ["O"]}\n', encoding="utf-8")
    result = script(
        "run_token_classifier.py", _flags(conll_files, spm_model_file, out, dev_file=jsonl)
    )
    _one_line_error(result, f"{jsonl}:1")

    result = script("run_token_classifier.py", _flags(conll_files, spm_model_file, out, stride=40))
    _one_line_error(result, "--stride")

    # a fine-tuning output directory is not a pretrained model
    run_dir = finished_run[0]
    result = script(
        "run_token_classifier.py",
        _flags(conll_files, None, out, preset=None, init_checkpoint=run_dir),
    )
    _one_line_error(result, f"--init_checkpoint={run_dir} is a fine-tuning output directory")


def test_vocabulary_must_match_the_model(conll_files, spm_model_file, tmp_path):
    import sentencepiece as spm

    from albert_tf.config import AlbertConfig
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel

    pretrained = tmp_path / "pretrained"
    model_dir.save(
        AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=1000)),
        str(pretrained),
        spm_model=spm_model_file,
    )
    corpus = tmp_path / "words.txt"
    corpus.write_text(
        "\n".join(" ".join(s) for s in _sentences(conll_files["train"])), encoding="utf-8"
    )
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(tmp_path / "other"),
        vocab_size=400,
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
    )
    other = tmp_path / "other.model"
    result = script(
        "run_token_classifier.py",
        _flags(conll_files, other, tmp_path / "out", preset=None, init_checkpoint=pretrained),
    )
    _one_line_error(result, f"--spm_model_file={other} has 400 pieces", "has vocab_size 1000")


def test_resolve_vocabulary_checks_special_ids(corpus_file, spm_model_file, tmp_path, caplog):
    import sentencepiece as spm

    from albert_tf.config import AlbertConfig
    from albert_tf.finetune.params import FinetuneParams
    from albert_tf.finetune.runner import resolve_vocabulary
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.settings import InvalidFlagError

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000)
    pretrained = str(tmp_path / "pretrained")
    model_dir.save(AlbertModel(config), pretrained, spm_model=spm_model_file)
    common = dict(
        input=corpus_file,
        vocab_size=1000,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
    )
    # the same size and special ids, other pieces: accepted with a warning
    spm.SentencePieceTrainer.train(
        model_prefix=str(tmp_path / "bpe"), model_type="bpe", pad_id=0, unk_id=1, **common
    )
    params = FinetuneParams(
        output_dir=str(tmp_path / "out"),
        init_checkpoint=pretrained,
        spm_model_file=str(tmp_path / "bpe.model"),
    )
    assert resolve_vocabulary(params, config) == str(tmp_path / "bpe.model")
    assert "differs from the model's own" in caplog.text
    # the same size, <pad> and <unk> swapped: refused, naming the ids
    spm.SentencePieceTrainer.train(
        model_prefix=str(tmp_path / "swapped"), pad_id=1, unk_id=0, **common
    )
    params.spm_model_file = str(tmp_path / "swapped.model")
    with pytest.raises(InvalidFlagError, match=r"special ids differ .*pad_id 1 vs 0"):
        resolve_vocabulary(params, config)
