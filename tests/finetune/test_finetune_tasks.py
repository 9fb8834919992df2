"""GLUE TSV layouts, generic CSV/TSV/JSONL files, and error messages naming file:line."""

import os

import numpy as np
import pytest

from albert_tf.data import glue, task_spec, text_files
from albert_tf.finetune.classification import ClassificationData, load_task_splits


def _write(path, text, bom=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8-sig" if bom else "utf-8") as f:
        f.write(text)
    return path


def test_glue_layouts(tmp_path):
    root = str(tmp_path)
    # CoLA: no header, label in column 1, sentence in column 3; its test file has a header.
    _write(
        f"{root}/CoLA/train.tsv",
        "gj04\t1\t\tThe sailors rode the breeze.\n"
        "gj04\t0\t*\tThe more we study verbs the crazier.\n",
    )
    _write(f"{root}/CoLA/test.tsv", "index\tsentence\n0\tBill whistled past the house.\n")
    # MRPC: byte-order mark before "Quality", as in the GLUE download.
    _write(
        f"{root}/MRPC/dev.tsv",
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t1\t2\tHe said "hi".\tHe greeted.\n'
        "0\t3\t4\tA cat.\tA dog.\n",
        bom=True,
    )
    # MNLI dev: five annotator labels, gold_label last.
    header = (
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\t"
        "label4\tlabel5\tgold_label\n"
    )
    row = (
        "0\t1\t2\tfiction\t(x)\t(y)\t(X)\t(Y)\tThe premise.\tThe hypothesis.\t"
        + "neutral\tneutral\tneutral\tentailment\tneutral\tneutral\n"
    )
    _write(f"{root}/MNLI/dev_mismatched.tsv", header + row)
    _write(
        f"{root}/STS-B/train.tsv",
        "index\tgenre\tfilename\tyear\told_index\tsource1\t"
        "source2\tsentence1\tsentence2\tscore\n"
        "0\tmain\tf\t2012\t1\tnone\tnone\tA plane.\tAn air plane.\t5.000\n",
    )

    cola = glue.read_glue_examples("cola", root, "train")
    assert cola.texts == ["The sailors rode the breeze.", "The more we study verbs the crazier."]
    assert cola.labels.tolist() == [1, 0] and cola.text_pairs is None
    test = glue.read_glue_examples("cola", root, "test")
    assert test.texts == ["Bill whistled past the house."] and test.labels is None
    mrpc = glue.read_glue_examples("MRPC", root, "dev")
    assert mrpc.texts == ['He said "hi".', "A cat."]  # TSV: quotes are text
    assert mrpc.text_pairs == ["He greeted.", "A dog."] and mrpc.labels.tolist() == [1, 0]
    mm = glue.read_glue_examples("mnli-mm", root, "dev")
    assert (mm.texts, mm.text_pairs, mm.labels.tolist()) == (
        ["The premise."],
        ["The hypothesis."],
        [2],
    )
    sts = glue.read_glue_examples("stsb", root, "train")
    assert sts.labels.dtype == np.float32 and sts.labels.tolist() == [5.0]
    assert (
        glue.get_task("sts-b").num_classes == 1 and glue.get_task("sts-b").main_metric == "pearson"
    )
    assert glue.get_task("cola").main_metric == "matthews_corrcoef"


def test_glue_errors_name_file_and_line(tmp_path):
    root = str(tmp_path)
    path = _write(
        f"{root}/RTE/train.tsv",
        "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n\n1\tC.\tD.\tmaybe\n2\tE.\n",
    )
    with pytest.raises(task_spec.DataError, match=rf"^{path}:3: empty line$"):
        glue.read_glue_examples("rte", root, "train")
    ok = glue.read_glue_examples("rte", root, "train", skip_bad_lines=True)
    assert ok.texts == ["A."]  # lines 3 (empty), 4 (label), 5 (short) skipped
    _write(path, "index\tsentence1\tsentence2\tlabel\n1\tC.\tD.\tmaybe\n")
    with pytest.raises(
        task_spec.DataError,
        match=rf"{path}:2: unknown label 'maybe'; task 'rte' has "
        r"labels \['entailment', 'not_entailment'\]",
    ):
        glue.read_glue_examples("rte", root, "train")
    _write(path, "index\tsentence1\tsentence2\tlabel\n2\tE.\n")
    with pytest.raises(
        task_spec.DataError,
        match=rf"{path}:2: expected at least 4 tab-separated "
        "fields, found 2",
    ):
        glue.read_glue_examples("rte", root, "train")
    _write(path, "index\tsentence_1\tsentence2\tlabel\n")
    with pytest.raises(task_spec.DataError, match=rf"{path}:1: missing column 'sentence1'"):
        glue.read_glue_examples("rte", root, "train")
    with pytest.raises(FileNotFoundError, match="dev data of task 'rte' not found"):
        glue.read_glue_examples("rte", root, "dev")
    with pytest.raises(ValueError, match="unknown task 'glue'"):
        glue.get_task("glue")


def test_generic_files_and_label_inference(tmp_path):
    csv_path = _write(
        str(tmp_path / "train.csv"),
        'review,stars\n"Great, really great",good\n"Line one\nline two",bad\nmeh,bad\n',
    )
    task = task_spec.custom_task("reviews", "review", label_column="stars")
    examples, task = text_files.read_file_examples(task, csv_path, infer_labels=True)
    assert task.labels == ("bad", "good") and task.metrics == ("accuracy", "f1")
    assert examples.texts == ["Great, really great", "Line one\nline two", "meh"]
    assert examples.labels.tolist() == [1, 0, 0]
    bad = _write(str(tmp_path / "dev.csv"), "review,stars\nok,good\nfine,neutral\n")
    with pytest.raises(task_spec.DataError, match=rf"{bad}:3: unknown label 'neutral'"):
        text_files.read_file_examples(task, bad)
    jsonl = _write(
        str(tmp_path / "pairs.jsonl"),
        '{"q": "a?", "p": "b.", "y": 0.5}\n{"q": "c?", "p": "d.", "y": 1}\n{"q": "e?"}\n',
    )
    reg = task_spec.custom_task("sim", "q", "p", "y", regression=True)
    with pytest.raises(task_spec.DataError, match=rf"{jsonl}:3: missing column\(s\) \['p', 'y'\]"):
        text_files.read_file_examples(reg, jsonl)
    examples, _ = text_files.read_file_examples(reg, jsonl, skip_bad_lines=True)
    assert examples.text_pairs == ["b.", "d."] and examples.labels.tolist() == [0.5, 1.0]
    data = ClassificationData(
        task_name="reviews", train_file=csv_path, text_column="review", label_column="stars"
    )
    task, splits = load_task_splits(data, wanted=["train"])
    assert task.labels == ("bad", "good") and len(splits["train"]) == 3


def test_tfds_glue_label_mapping():
    import tensorflow as tf
    import tensorflow_datasets as tfds

    def as_dataset(self, split, **kwargs):  # hand-written records instead of random mock data
        pairs = {"glue/mnli": ("premise", "hypothesis"), "glue/mrpc": ("sentence1", "sentence2")}
        name = self.name + "/" + self.builder_config.name
        a, b = pairs[name]
        labels = [0, 1, 2] if name == "glue/mnli" else [1, 0, 1]
        return tf.data.Dataset.from_tensor_slices(
            {a: ["p0", "p1", "p2"], b: ["h0", "h1", "h2"], "label": labels, "idx": [0, 1, 2]}
        )

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        mnli = glue.read_tfds_examples("mnli-mm", "dev")
        mrpc = glue.read_tfds_examples("mrpc", "train")
    # TFDS names MRPC's labels not_equivalent/equivalent: mapped by index onto GLUE's "0"/"1"
    assert mrpc.labels.tolist() == [1, 0, 1]
    # TFDS order entailment, neutral, contradiction -> the task's contradiction, entailment, neutral
    assert mnli.labels.tolist() == [1, 2, 0]
    assert (mnli.texts, mnli.text_pairs) == (["p0", "p1", "p2"], ["h0", "h1", "h2"])
    assert mnli.source == "tfds:glue/mnli/validation_mismatched"


def test_description_keeps_the_builtin_split_seed(monkeypatch, spm_model_file):
    # The built-in task's split depends on the run's --seed; a task rebuilt from finetune.json
    # (export_litert.py scores the dev set) must draw the same dev set, not seed 0's.
    from albert_tf.finetune import classification
    from albert_tf.finetune.task import task_from_description

    def splits(seed=0):
        spec = task_spec.TaskSpec("docstring-source", ("a", "b"), ("accuracy",), ("text",), "l")
        rng = np.random.default_rng(seed)
        texts = [f"text {i}" for i in rng.permutation(20)]
        return spec, {
            "train": task_spec.Examples(texts[:15], labels=np.zeros(15, np.int32)),
            "dev": task_spec.Examples(texts[15:], labels=np.ones(5, np.int32)),
        }

    monkeypatch.setattr(classification, "docstring_source_splits", splits)
    task = classification.SentenceClassificationTask(
        ClassificationData(task_name="docstring-source"), seed=12345
    )
    task.configure_text(spm_model_file, lower_case=True, max_seq_length=16, static_shapes=False)
    task.load(["train", "dev"])
    rebuilt = task_from_description(task.describe())
    rebuilt.load(["dev"])
    assert rebuilt.splits["dev"].texts == task.splits["dev"].texts
    assert rebuilt.splits["dev"].texts != splits(seed=0)[1]["dev"].texts


def test_squad_keeps_tex_quotes_in_its_description(spm_model_file):
    # SQuAD builds its features in Python: the rule travels in its FeatureSettings, and a
    # finetune.json written before the setting existed reads as the original's (False).
    from albert_tf.finetune.squad import SquadData, SquadTask
    from albert_tf.finetune.task import task_from_description

    task = SquadTask(SquadData())
    task.configure_text(spm_model_file, max_seq_length=128, tex_quotes=True)
    assert task.settings.tex_quotes
    description = task.describe()
    assert task_from_description(description).settings.tex_quotes
    del description["settings"]["tex_quotes"]
    assert not task_from_description(description).settings.tex_quotes
