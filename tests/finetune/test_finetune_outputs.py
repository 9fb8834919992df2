"""Defaults for the data at hand (length percentiles and the --max_seq_length hint, the learning
rate of the model's size) and outputs a person can read (result tables with a header and label
names, a small finetune.json with spm.model beside it, the selection note, a labelled test file
scored once)."""

import csv
import json
import logging
import os

import numpy as np
import pytest
from finetune_support import sentence_task


def test_default_learning_rate_by_size():
    from albert_tf.config import AlbertConfig
    from albert_tf.optim.learning_rates import FINETUNE_LEARNING_RATES, default_learning_rate

    sizes = {name: AlbertConfig.from_preset(name).hidden_size for name in ("albert_tiny",)}
    sizes.update(base=768, large=1024, xlarge=2048, xxlarge=4096)
    rates = {name: default_learning_rate(size)[0] for name, size in sizes.items()}
    assert rates == {
        "albert_tiny": 1e-3,  # the study: AdamW at 1e-3 learned every task on albert_tiny
        "base": 2e-5,  # the paper's Table 14
        "large": 2e-5,
        "xlarge": 1e-5,
        "xxlarge": 1e-5,
    }
    # the original AdamWeightDecay collapses at AdamW's tiny-model rate: its own default is lower
    assert default_learning_rate(128, "adamw_original")[0] == 1e-4
    assert default_learning_rate(128, "lamb")[0] == 3e-3
    assert "albert_tiny" in default_learning_rate(128)[1]
    assert all(
        set(size.rates) == {"adamw", "adamw_original", "lamb"} for size in FINETUNE_LEARNING_RATES
    )
    with pytest.raises(ValueError, match="optimizer must be one of"):
        default_learning_rate(128, "sgd")


def test_compile_takes_the_rate_of_the_model_size():
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=100, num_hidden_layers=1)
    model = AlbertClassifier(AlbertModel(config), num_classes=2)
    model.compile(num_train_steps=10, precision="float32")
    assert float(model.optimizer._learning_rate.initial_learning_rate) == 1e-3
    model.compile(num_train_steps=10, precision="float32", learning_rate=5e-5)  # given: used
    assert float(model.optimizer._learning_rate.initial_learning_rate) == 5e-5


def _write(path, texts, labels):
    with open(path, "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in zip(texts, labels)))
    return str(path)


def test_short_texts_get_a_hint_and_readable_outputs(tmp_path, corpus_file, spm_model_file, caplog):
    """Scoring only (no training): short texts in a 128-piece window, a labelled test file."""
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
    from albert_tf.finetune.runner import FinetuneParams, run_finetuning
    from albert_tf.finetune.task import task_from_description

    texts, labels = sentence_task(corpus_file, limit=48)
    short = [" ".join(t.split()[:4]) + (" file" if y else "") for t, y in zip(texts, labels)]
    names = ["yes" if y else "no" for y in labels]
    dev = _write(tmp_path / "dev.tsv", short[:32], names[:32])
    test = _write(tmp_path / "test.tsv", short[32:], names[32:])
    params = FinetuneParams(
        output_dir=str(tmp_path / "out"),
        preset="albert_tiny",
        spm_model_file=spm_model_file,
        max_seq_length=128,
        do_train=False,
        do_predict=True,
        eval_batch_size=16,
        verbose=0,
    )
    data = ClassificationData(
        task_name="short",
        dev_file=dev,
        test_file=test,
        text_column="sentence",
        labels=["no", "yes"],
    )
    with caplog.at_level(logging.INFO, logger="absl"):
        result = run_finetuning(params, SentenceClassificationTask(data))
    out = result["output_dir"]
    # the learning rate of the model's size, with the reason
    assert (
        "--learning_rate=0.001: the default for --optimizer=adamw at hidden size 128" in caplog.text
    )
    # padding and lengths: logged and recorded
    assert "padding: each batch to its longest sequence" in caplog.text
    assert "dev lengths in pieces with [CLS]/[SEP] (32 examples): p50 " in caplog.text
    assert "hint: 99% of the 32 dev examples fit in" in caplog.text
    results = json.load(open(os.path.join(out, "eval_results.json")))
    lengths = results["data"]["lengths"]
    assert lengths["split"] == "dev" and lengths["examples"] == 32
    assert lengths["p50"] <= lengths["p90"] <= lengths["p99"] <= lengths["max"] <= 32
    assert lengths["suggested_max_seq_length"] in (16, 32)
    assert "--max_seq_length=" in results["data"]["hint"]
    # one evaluation: no selection, said so
    assert results["selection"].startswith("the dev accuracy of the one evaluation")
    # the labelled test file, scored once with that model
    assert results["test"]["num_examples"] == 16 and 0.0 <= results["test"]["accuracy"] <= 1.0
    assert result["test"] == results["test"]
    # result tables: header, texts, label names
    with open(os.path.join(out, "dev_results.tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == [
        "index",
        "text",
        "label",
        "prediction",
        "probability_no",
        "probability_yes",
    ]
    assert [r[1] for r in rows[1:]] == short[:32] and [r[2] for r in rows[1:]] == names[:32]
    assert {r[3] for r in rows[1:]} <= {"no", "yes"}
    assert all(abs(float(r[4]) + float(r[5]) - 1) < 1e-5 for r in rows[1:])
    with open(os.path.join(out, "test_results.tsv"), encoding="utf-8") as f:
        assert next(csv.reader(f, delimiter="\t"))[:3] == ["index", "text", "label"]
    # finetune.json: small, names the SentencePiece model beside it, rebuilds the task
    info_path = os.path.join(out, "finetune.json")
    assert os.path.getsize(info_path) < 20_000
    info = json.load(open(info_path))
    assert info["task"]["spm_model_file"] == "spm.model" and info["data"] == results["data"]
    with open(os.path.join(out, "spm.model"), "rb") as f, open(spm_model_file, "rb") as g:
        assert f.read() == g.read()
    rebuilt = task_from_description(info["task"], out)
    ids = rebuilt.preprocessor(np.array(["open the file"], object))["input_word_ids"]
    assert int(ids.shape[0]) == 1 and rebuilt.preprocessor.max_seq_length == 128


def test_descriptions_that_embed_the_model_still_load(spm_model_file):
    """finetune.json files of older versions carry the SentencePiece model in base64."""
    import base64

    import keras

    from albert_tf.data.task_spec import custom_task
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask
    from albert_tf.finetune.squad import SquadData, SquadTask
    from albert_tf.finetune.task import task_from_description

    with open(spm_model_file, "rb") as f:
        proto = f.read()
    data = ClassificationData(task_name="t", train_file="train.tsv")
    task = SentenceClassificationTask(data, spec=custom_task("t", "text", labels=("a", "b")))
    task.configure_text(spm_model_file, max_seq_length=16)
    old = {k: v for k, v in task.describe().items() if k != "spm_model_file"}
    old["preprocessor"] = keras.saving.serialize_keras_object(task.preprocessor)
    assert task_from_description(old).preprocessor.model_proto == proto
    squad = SquadTask(SquadData())
    squad.configure_text(spm_model_file, max_seq_length=128)
    old = {k: v for k, v in squad.describe().items() if k != "spm_model_file"}
    old["spm_model_proto"] = base64.b64encode(proto).decode("ascii")
    assert task_from_description(old).spm_model == proto
