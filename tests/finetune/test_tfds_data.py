"""Benchmark data by name through TFDS (`albert_tf.data.tfds_tasks`): GLUE, SQuAD v1.1 / v2.0
and RACE read from TFDS give the same examples and features as the same data in the release's
files; the SQuAD dev set written from TFDS is the release's JSON and scores the same;
--notfds_download refuses in one line without downloading, and otherwise the dataset is
prepared into --tfds_data_dir.

No network: `tfds.testing.mock_data(as_dataset_fn=...)` serves hand-written records shaped by
each builder's own features (its download_and_prepare is a no-op), and the tests of the
download decision replace `download_and_prepare` with a recorder that raises.
"""

import contextlib
import json
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from absl import flags
from test_squad_data import v1_dataset, v2_dataset, write_squad

from albert_tf import cli
from albert_tf.data import race, squad_examples, tfds_tasks
from albert_tf.finetune.classification import (
    ClassificationData,
    SentenceClassificationTask,
    load_task_splits,
)
from albert_tf.finetune.race import RaceData, RaceTask
from albert_tf.finetune.squad import SquadData, SquadTask, answer_scores
from albert_tf.settings import InvalidFlagError, define_flags, from_flags


# ----------------------------------------------------------------------------- mock TFDS
@contextlib.contextmanager
def tfds_records(tables):
    """TFDS serving `tables[("glue/sst2", "train")]` (lists of records as Python values, in
    TFDS's stored order) with each builder's own feature specs (RACE's options ragged, as the
    prepared data gives them)."""

    def as_dataset(self, split, **kwargs):
        rows = tables[f"{self.name}/{self.builder_config.name}", str(split)]
        spec = self.info.features.get_tensor_spec()

        def convert(value, kind):
            if isinstance(kind, dict):
                return {key: convert(value[key], kind[key]) for key in kind}
            if isinstance(kind, tf.RaggedTensorSpec):
                return tf.ragged.constant(value, kind.dtype)
            return np.asarray(value, kind.dtype.as_numpy_dtype)

        return tf.data.Dataset.from_generator(
            lambda: (convert(row, spec) for row in rows), output_signature=spec
        )

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        yield


def shuffled(rows, seed=0):
    """`rows` in another order, as TFDS stores them (by a hash of their key)."""
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows


# ----------------------------------------------------------------------------- GLUE
SENTENCES = [
    ("a gripping, funny and humane film .", 1),
    ('it \'s a bore , "worthless" from start to end .', 0),
    ("the cast is uniformly excellent .", 1),
    ("an unsettling, wasted hour and a half .", 0),
    ("one of the year 's most intriguing debuts .", 1),
]
PAIRS = [
    ("The cat sat on the mat.", "A cat is sitting.", "entailment"),
    ("Two men play chess in a park.", "Nobody is playing.", "contradiction"),
    ("She bought a red car last week.", "The car was expensive.", "neutral"),
    ("Children are singing in a choir.", "Kids sing together.", "entailment"),
    ("A man is cooking pasta.", "The man is asleep.", "contradiction"),
]
MNLI_LABELS = ("entailment", "neutral", "contradiction")  # TFDS glue/mnli's ClassLabel order


def _write_tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join("\t".join(map(str, row)) for row in [header, *rows]) + "\n", encoding="utf-8"
    )


def glue_sources(root):
    """GLUE TSV directories of SST-2 (train, dev, test) and MNLI (train, dev_matched) under
    `root`, and the same examples as TFDS records."""
    glue_dir = root / "glue_data"
    tables = {}
    for split, tfds_split, rows in (
        ("train", "train", SENTENCES),
        ("dev", "validation", SENTENCES[::-1]),
    ):
        _write_tsv(glue_dir / "SST-2" / f"{split}.tsv", ["sentence", "label"], rows)
        tables["glue/sst2", tfds_split] = shuffled(
            {"sentence": text, "label": label, "idx": i} for i, (text, label) in enumerate(rows)
        )
    _write_tsv(
        glue_dir / "SST-2" / "test.tsv",
        ["index", "sentence"],
        list(enumerate(a for a, _, _ in PAIRS)),
    )
    tables["glue/sst2", "test"] = shuffled(
        {"sentence": text, "label": -1, "idx": i} for i, (text, _, _) in enumerate(PAIRS)
    )
    header = ["index", "promptID", "pairID", "genre", "sentence1", "sentence2", "label1"]
    for name, tfds_split, rows in (
        ("train.tsv", "train", PAIRS),
        ("dev_matched.tsv", "validation_matched", PAIRS[1:] + PAIRS[:1]),
    ):
        _write_tsv(
            glue_dir / "MNLI" / name,
            header + ["gold_label"],
            [(i, 7 * i, f"{7 * i}n", "fiction", a, b, y, y) for i, (a, b, y) in enumerate(rows)],
        )
        tables["glue/mnli", tfds_split] = shuffled(
            {"premise": a, "hypothesis": b, "label": MNLI_LABELS.index(y), "idx": i}
            for i, (a, b, y) in enumerate(rows)
        )
    return glue_dir, tables


@pytest.mark.parametrize("task_name", ["sst-2", "mnli"])
def test_glue_from_tfds_equals_the_tsv_files(task_name, tmp_path, spm_model_file):
    glue_dir, tables = glue_sources(tmp_path)
    splits = ["train", "dev"] + (["test"] if task_name == "sst-2" else [])
    tasks = {}
    for source, data in (
        ("files", ClassificationData(task_name=task_name, data_dir=str(glue_dir))),
        ("tfds", ClassificationData(task_name=task_name, use_tfds=True)),
    ):
        task = SentenceClassificationTask(data)
        task.configure_text(spm_model_file, max_seq_length=32)
        with tfds_records(tables):
            task.load(splits)
        tasks[source] = task
    files, tfds_task = tasks["files"], tasks["tfds"]
    for split in splits:
        a, b = files.splits[split], tfds_task.splits[split]
        assert b.source.startswith("tfds:glue/")
        assert (a.texts, a.text_pairs) == (b.texts, b.text_pairs)
        assert (a.labels is None) == (b.labels is None) == (split == "test")
        if a.labels is not None:
            np.testing.assert_array_equal(a.labels, b.labels)
        features = {}
        for source, task in tasks.items():
            found = task.features(split)
            inputs = {k: tf.constant(v) for k, v in found.inputs.items()}
            features[source] = {k: v.numpy() for k, v in task.input_transform()(inputs).items()}
        assert sorted(features["files"]) == ["input_mask", "input_type_ids", "input_word_ids"]
        for key, value in features["files"].items():
            np.testing.assert_array_equal(value, features["tfds"][key], err_msg=f"{split} {key}")
    if task_name == "mnli":  # TFDS's label order is not GLUE's: mapped by name
        assert files.spec.labels[int(tfds_task.splits["dev"].labels[0])] == PAIRS[1][2]


# ----------------------------------------------------------------------------- SQuAD
def squad_rows(dataset, version_2):
    """The TFDS squad records of an official JSON dict: one per question, as its builder
    makes them (title and context on every row; v2.0: is_impossible, plausible_answers)."""

    def answers(values):
        return {
            "text": [a["text"] for a in values],
            "answer_start": [a["answer_start"] for a in values],
        }

    rows = []
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                row = {
                    "id": qa["id"],
                    "title": article.get("title", ""),
                    "context": paragraph["context"],
                    "question": qa["question"],
                    "answers": answers(qa["answers"]),
                }
                if version_2:
                    row["is_impossible"] = qa["is_impossible"]
                    row["plausible_answers"] = answers(qa.get("plausible_answers", []))
                rows.append(row)
    return rows


def _squad_task(data, spm_model_file):
    task = SquadTask(data)
    task.configure_text(spm_model_file, max_seq_length=32)
    return task


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_squad_from_tfds_equals_the_json_files_and_scores_the_same(
    version, tmp_path, spm_model_file
):
    version_2 = version == "v2.0"
    train = v2_dataset() if version_2 else v1_dataset()
    dev = json.loads(json.dumps(train))  # another split, the same shape: questions reversed
    for article in dev["data"]:
        for paragraph in article["paragraphs"]:
            paragraph["qas"].reverse()
    name = f"squad/{version}"
    tables = {
        (name, "train"): squad_rows(train, version_2),
        (name, "validation"): squad_rows(dev, version_2),
    }
    settings = dict(
        version_2_with_negative=version_2, doc_stride=8, max_query_length=10, n_best_size=3
    )
    files = _squad_task(
        SquadData(
            train_file=write_squad(tmp_path / f"train-{version}.json", train),
            predict_file=write_squad(tmp_path / f"dev-{version}.json", dev),
            feature_cache_dir=str(tmp_path / "cache-files"),
            **settings,
        ),
        spm_model_file,
    )
    files.load(["train", "dev"])
    from_tfds = _squad_task(
        SquadData(use_tfds=True, feature_cache_dir=str(tmp_path / "cache-tfds"), **settings),
        spm_model_file,
    )
    with tfds_records(tables):
        from_tfds.load(["train", "dev"])

    # (a) the same examples (ids, texts, answers and offsets) and the same features
    for split in ("train", "dev"):
        assert list(from_tfds.examples[split]) == list(files.examples[split]), split
        a, b = files.squad_features[split].arrays(), from_tfds.squad_features[split].arrays()
        assert sorted(a) == sorted(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{split} {key}")
    assert files.examples["train"].mismatched_ids == from_tfds.examples["train"].mismatched_ids

    # (b) the dev JSON written from TFDS is the release's, in the feature cache and, beside the
    # predictions, in the output directory; scores on it equal the file run's
    written = from_tfds.tfds_files["dev"]
    assert written.startswith(str(tmp_path / "cache-tfds" / "tfds" / name))
    assert written.endswith(f"dev-{version}.json")
    with open(written, encoding="utf-8") as f:
        assert json.load(f) == dev
    dev_examples = files.examples["dev"]
    answers = {
        e.qas_id: (e.gold_answers[0] if i % 3 == 0 and e.gold_answers else ["", "the"][i % 2])
        for i, e in enumerate(dev_examples)
    }
    null_odds = {e.qas_id: float(i % 5) - 2.0 for i, e in enumerate(dev_examples)}
    predictions = {
        "predictions": answers,
        "nbest": {qid: [] for qid in answers},
        "null_odds": null_odds if version_2 else None,
    }
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    from_tfds.write_predictions(predictions, "dev", str(output_dir))
    copied = output_dir / f"dev-{version}.json"
    assert f"dev-{version}.json" in from_tfds.output_files
    assert f"dev-{version}.json" not in files.output_files
    with open(copied, encoding="utf-8") as f:
        assert json.load(f) == dev
    reread = squad_examples.read_squad_examples(
        str(copied), version_2, labelled=True, skip_mismatched=False
    )
    texts = [answers[e.qas_id] for e in dev_examples]
    scores = answer_scores(dev_examples, texts, version_2)
    assert answer_scores(list(reread), texts, version_2) == scores
    assert answer_scores(from_tfds.examples["dev"], texts, version_2) == scores
    assert 0 < scores["f1"] < 100
    assert from_tfds.evaluate(predictions, "dev") == files.evaluate(predictions, "dev")

    # TFDS stores the questions in another order: the same dataset, grouped again
    regrouped = tfds_tasks.squad_json(shuffled(tables[name, "validation"], 3), version_2)
    assert regrouped["version"] == dev["version"]

    def by_id(dataset):
        return {
            qa["id"]: (article["title"], paragraph["context"], qa)
            for article in dataset["data"]
            for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]
        }

    assert by_id(regrouped) == by_id(dev)


# ----------------------------------------------------------------------------- RACE
RACE_QUESTIONS = ("What is the passage mainly about?", "The writer thinks that _ .")


def race_sources(root):
    """The RACE release (RACE/{split}/{level}/<n>.txt, files 1, 2 and 10 so that the order is
    numeric) and the same articles as TFDS race/<level> records (example_id = "id")."""
    tables = {}
    for s, split in enumerate(race.SPLITS):
        for level in race.LEVELS:
            directory = root / "RACE" / split / level
            directory.mkdir(parents=True)
            rows = []
            for k, number in enumerate((10, 1, 2)):
                options = [[f"{c}: {split} {number}.{q}" for c in "ABCD"] for q in (0, 1)]
                record = {
                    "article": f"A {level} school article number {number} of the {split} set. "
                    * (1 + k),
                    "questions": list(RACE_QUESTIONS),
                    "options": options,
                    "answers": ["ABCD"[(number + s) % 4], "ABCD"[(k + 1) % 4]],
                    "id": f"{level}{number}.txt",
                }
                (directory / f"{number}.txt").write_text(json.dumps(record), encoding="utf-8")
                rows.append(
                    {
                        "article": record["article"],
                        "questions": record["questions"],
                        "answers": record["answers"],
                        "options": record["options"],
                        "example_id": record["id"],
                    }
                )
            tables[f"race/{level}", split] = shuffled(rows, s)
    return root, tables


def test_race_from_tfds_equals_the_release_files(tmp_path, spm_model_file):
    race_dir, tables = race_sources(tmp_path / "race_data")
    tasks = {}
    for source, data in (
        ("files", RaceData(data_dir=str(race_dir), max_qa_length=16)),
        ("tfds", RaceData(use_tfds=True, max_qa_length=16)),
    ):
        task = RaceTask(data)
        task.configure_text(spm_model_file, max_seq_length=48)
        with tfds_records(tables):
            task.load(["train", "dev", "test"])
        tasks[source] = task
    for split in race.SPLITS:
        a, b = tasks["files"].examples[split], tasks["tfds"].examples[split]
        assert b.source == f"tfds:race/middle+high/{split}"
        assert a.example_ids[:3] == ["middle1.txt", "middle1.txt", "middle2.txt"]
        assert (a.articles, a.example_ids, a.questions, a.options) == (
            b.articles,
            b.example_ids,
            b.questions,
            b.options,
        )
        for key in ("article_index", "question_index", "levels", "labels"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
        for key, value in tasks["files"].features(split).inputs.items():
            np.testing.assert_array_equal(value, tasks["tfds"].features(split).inputs[key])
        np.testing.assert_array_equal(
            tasks["files"].features(split).labels, tasks["tfds"].features(split).labels
        )
    with tfds_records(tables):
        high = RaceTask(RaceData(use_tfds=True, high_only=True)).read_split("dev")
    assert set(high.levels) == {"high"} and high.example_ids[0] == "high1.txt"


# ----------------------------------------------------------------------------- download
def _parsed(data_cls, *argv):
    values = flags.FlagValues()
    define_flags(data_cls, values)
    values(["prog", *argv])
    return from_flags(data_cls, values)


def _readers(tmp_path, spm_model_file, *argv):
    """(TFDS dataset name, a call that reads it) for each script's data flags `argv`."""

    def glue():
        load_task_splits(_parsed(ClassificationData, "--task_name=sst-2", *argv), ["train"])

    def squad():
        flags = ["--version_2_with_negative", "--max_query_length=10", "--doc_stride=8"]
        data = _parsed(SquadData, *flags, f"--feature_cache_dir={tmp_path}", *argv)
        _squad_task(data, spm_model_file).load(["train", "dev"])

    def race_reader():
        RaceTask(_parsed(RaceData, *argv)).read_split("dev")

    return [("glue/sst2", glue), ("squad/v2.0", squad), ("race/middle", race_reader)]


def test_notfds_download_refuses_in_one_line_without_downloading(
    tmp_path, spm_model_file, monkeypatch
):
    def no_download(self, *args, **kwargs):
        raise AssertionError(f"{self.name}: download_and_prepare called with --notfds_download")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", no_download)
    empty = tmp_path / "tfds"
    empty.mkdir()
    argv = ["--use_tfds", f"--tfds_data_dir={empty}", "--notfds_download"]
    for name, read in _readers(tmp_path, spm_model_file, *argv):
        with pytest.raises(tfds_tasks.NotPreparedError) as info:
            read()
        message = cli.error_message(info.value)
        assert message == str(info.value) and "\n" not in message
        assert f"TFDS dataset {name} is not prepared at {empty}/{name}/" in message
        assert f"`tfds build {name} --data_dir={empty}`" in message
        assert "--notfds_download" in message
    assert list(empty.iterdir()) == []


def test_download_prepares_into_the_tfds_data_dir(tmp_path, spm_model_file, monkeypatch):
    class Prepared(Exception):
        pass

    calls = []

    def download_and_prepare(self, *args, **kwargs):  # no network: record, then stop the read
        calls.append((self.name, self.builder_config.name, str(self.data_dir_root)))
        raise Prepared()

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", download_and_prepare)
    data_dir = str(tmp_path / "tfds")
    for name, read in _readers(
        tmp_path, spm_model_file, "--use_tfds", f"--tfds_data_dir={data_dir}"
    ):
        with pytest.raises(Prepared):
            read()
        assert calls.pop() == (*name.split("/"), data_dir)
    # Prepared data is read, not downloaded again.
    monkeypatch.setattr(tfds.core.DatasetBuilder, "is_prepared", lambda self: True)
    (tmp_path / "tfds" / "glue" / "sst2" / "2.0.0").mkdir(parents=True)
    builder = tfds_tasks.prepared_builder("glue/sst2", data_dir, download=True)
    assert calls == [] and builder.data_dir == f"{data_dir}/glue/sst2/2.0.0"


def test_tfds_flags_exclude_the_file_flags():
    cases = [
        (ClassificationData, ["--task_name=sst-2", "--data_dir=glue"], "--data_dir"),
        (ClassificationData, ["--task_name=t", "--train_file=x.csv"], "--train_file"),
        (ClassificationData, ["--task_name=t", "--dev_file=x.csv"], "--dev_file"),
        (SquadData, ["--train_file=train-v1.1.json"], "--train_file"),
        (RaceData, ["--data_dir=race_data"], "--data_dir"),
    ]
    for data_cls, argv, flag in cases:
        with pytest.raises(InvalidFlagError) as info:
            _parsed(data_cls, "--use_tfds", *argv)
        message = cli.error_message(info.value)
        assert message.startswith(f"--use_tfds and {flag} exclude each other: "), message
    # --predict_file with --use_tfds: train on TFDS, answer the file
    assert _parsed(SquadData, "--use_tfds", "--predict_file=dev.json").predict_file == "dev.json"
    with pytest.raises(InvalidFlagError, match="--use_tfds reads GLUE tasks"):
        load_task_splits(ClassificationData(task_name="docstring-source", use_tfds=True))
    with pytest.raises(InvalidFlagError, match=r"--data_dir is required .*, or --use_tfds"):
        RaceTask(RaceData()).load(["dev"])


def test_ragged_and_numpy_values_become_python():
    ragged = tf.ragged.constant([["a", "b"], ["ç"]])
    assert tfds_tasks._python(ragged) == [["a", "b"], ["ç"]]
    value = {"t": np.array([b"x", "é".encode()], object), "n": np.int32(3), "b": np.bool_(True)}
    assert tfds_tasks._python(value) == {"t": ["x", "é"], "n": 3, "b": True}
