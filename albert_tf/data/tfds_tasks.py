"""The paper's benchmarks by name: GLUE, SQuAD and RACE read through TensorFlow Datasets (TFDS)
into the example objects of the file readers, so features, metrics and prediction files cannot
differ by where the data came from.

`prepared_builder` finds a dataset in a TFDS data directory (local or gs://; default
$TFDS_DATA_DIR or ~/tensorflow_datasets) and, when it is not prepared there yet, downloads and
prepares it with TFDS's own `download_and_prepare` (TFDS logs the progress), or, with
`download=False`, raises `NotPreparedError`: one line naming the directory and the `tfds build`
command that prepares it (for a TPU run on data built beforehand).

- GLUE (`glue/*`): `albert_tf.data.glue.read_tfds_examples`, in the TSV files' order (TFDS's
  `idx`).
- SQuAD (`squad/v1.1`, `squad/v2.0`; splits train and validation): TFDS keeps one row per
  question (id, title, context, question, answers {text, answer_start}, and in v2.0
  is_impossible and plausible_answers). `squad_json` groups the rows back into the official
  JSON layout (articles by title, paragraphs by context, in the order the rows come), which
  `write_squad_tfds` writes as a file that `albert_tf.data.squad_examples` reads like the
  release's dev-v1.1.json: the same questions, ids, contexts and answer offsets, and a file
  the official evaluation scripts take.
- RACE (`race/middle`, `race/high`; splits train, dev, test): one row per article (article,
  questions, options, answers, example_id = the release's "id"); `read_race_tfds` gives the
  `RaceExamples` of `albert_tf.data.race.read_race` (middle school first, each level in the
  order of its files, 1.txt, 2.txt, ...).

>>> dataset = squad_json([{"id": "q1", "title": "Paris", "context": "It opened in 1889.",
...                         "question": "When?",
...                         "answers": {"text": ["1889"], "answer_start": [13]}}])
>>> dataset["version"], [article["title"] for article in dataset["data"]]
('1.1', ['Paris'])
>>> dataset["data"][0]["paragraphs"][0]["qas"]
[{'id': 'q1', 'question': 'When?', 'answers': [{'text': '1889', 'answer_start': 13}]}]
"""

import json

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.data import race
from albert_tf.data.task_spec import DataError

#: Our split names -> TFDS squad's.
SQUAD_SPLITS = {"train": "train", "dev": "validation"}


class NotPreparedError(DataError):
    """A TFDS dataset is not prepared in its data directory and downloading is off."""


def prepared_builder(name, data_dir=None, download=True):
    """The TFDS builder of `name` ("glue/sst2", "squad/v1.1", "race/high") in `data_dir`, its
    data prepared: downloaded and prepared first when the directory does not hold it (TFDS's
    `download_and_prepare`; downloads go to `data_dir`/downloads), or NotPreparedError when
    `download` is False."""
    import tensorflow_datasets as tfds

    builder = tfds.builder(name, data_dir=data_dir)
    if builder.data_path.exists() and builder.is_prepared():  # (is_prepared warns when absent)
        return builder
    if not download:
        raise NotPreparedError(
            f"TFDS dataset {name} is not prepared at {builder.data_dir} and --notfds_download "
            f"forbids downloading it: build it with `tfds build {name} "
            f"--data_dir={builder.data_dir_root}`, or run once without --notfds_download"
        )
    logging.info(
        "TFDS dataset %s is not prepared at %s: downloading and preparing it (once; TFDS logs "
        "its progress)",
        name,
        builder.data_dir,
    )
    builder.download_and_prepare()
    logging.info("TFDS dataset %s is prepared at %s", name, builder.data_dir)
    return builder


def records(builder, split):
    """The records of a prepared builder's `split` as Python values (str, int, bool, lists),
    in TFDS's stored order (an iterator); FileNotFoundError when the data has no such split."""
    import tensorflow_datasets as tfds

    try:
        dataset = builder.as_dataset(split=split)
    except (KeyError, ValueError) as e:
        raise FileNotFoundError(
            f"TFDS dataset {builder.info.full_name} at {builder.data_dir} has no split "
            f"{split!r} ({e})"
        ) from None
    return ({key: _python(value) for key, value in r.items()} for r in tfds.as_numpy(dataset))


def _python(value):
    """A TFDS value as Python: bytes -> str, arrays (ragged too) -> lists, dicts kept."""
    if isinstance(value, dict):
        return {key: _python(v) for key, v in value.items()}
    if hasattr(value, "to_list"):  # tf.RaggedTensor (a nested Sequence of TFDS)
        value = value.to_list()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list):
        return [_python(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


# ----------------------------------------------------------------------------- SQuAD
def squad_name(version_2_with_negative=False):
    """The TFDS dataset of a SQuAD version: "squad/v2.0" or "squad/v1.1"."""
    return "squad/v2.0" if version_2_with_negative else "squad/v1.1"


def squad_file_name(split, version_2_with_negative=False):
    """The release's file name of a split: train-v1.1.json, dev-v1.1.json, train-v2.0.json,
    dev-v2.0.json."""
    return f"{split}-{'v2.0' if version_2_with_negative else 'v1.1'}.json"


def _answers(values, where):
    texts, starts = values.get("text", []), values.get("answer_start", [])
    if len(texts) != len(starts):
        raise DataError(f"{where}: {len(texts)} answer texts but {len(starts)} answer_starts")
    return [{"text": text, "answer_start": int(start)} for text, start in zip(texts, starts)]


def squad_json(rows, version_2_with_negative=False, source="tfds:squad"):
    """The official SQuAD JSON (a dict: version, data[].title, paragraphs[].context, qas[].id,
    question, answers[].text/answer_start, v2.0: is_impossible and, where there are any,
    plausible_answers) of TFDS squad rows (Python values, see `records`). Articles are the
    rows' titles and paragraphs their (title, context) pairs, each in the order first met;
    questions keep the rows' order."""
    data, articles, paragraphs = [], {}, {}
    for row in rows:
        title, context = row["title"], row["context"]
        where = f"{source}: question {row['id']!r}"
        if title not in articles:
            articles[title] = {"title": title, "paragraphs": []}
            data.append(articles[title])
        if (title, context) not in paragraphs:
            paragraphs[title, context] = {"context": context, "qas": []}
            articles[title]["paragraphs"].append(paragraphs[title, context])
        qa = {
            "id": row["id"],
            "question": row["question"],
            "answers": _answers(row["answers"], where),
        }
        if version_2_with_negative:
            qa["is_impossible"] = bool(row["is_impossible"])
            plausible = _answers(row.get("plausible_answers") or {}, where)
            if plausible:
                qa["plausible_answers"] = plausible
        paragraphs[title, context]["qas"].append(qa)
    return {"version": "v2.0" if version_2_with_negative else "1.1", "data": data}


def read_squad_tfds(split, version_2_with_negative=False, data_dir=None, download=True):
    """(official SQuAD JSON dict, TFDS builder) of `split` ("train" or "dev", TFDS's
    validation) of `squad_name(version_2_with_negative)`, prepared as `prepared_builder`
    does."""
    if split not in SQUAD_SPLITS:
        raise ValueError(f"SQuAD split must be one of {sorted(SQUAD_SPLITS)}, got {split!r}")
    name = squad_name(version_2_with_negative)
    builder = prepared_builder(name, data_dir, download)
    source = f"tfds:{name}/{SQUAD_SPLITS[split]}"
    rows = records(builder, SQUAD_SPLITS[split])
    return squad_json(rows, version_2_with_negative, source), builder


def squad_json_text(dataset):
    """The file content of an official SQuAD JSON dict (UTF-8 text, one line): the same
    dataset always gives the same bytes (the SQuAD feature cache is keyed by them)."""
    return json.dumps(dataset, ensure_ascii=False) + "\n"


def write_squad_tfds(directory, split, version_2_with_negative=False, data_dir=None, download=True):
    """Writes `read_squad_tfds`'s JSON to DIRECTORY/<dataset>/<config>/<version>/
    `squad_file_name(split)` (e.g. squad/v1.1/3.0.0/dev-v1.1.json; atomically, and only when
    its content changed) and returns the path: a file `albert_tf.data.squad_examples` and the
    official evaluation scripts read as the release's."""
    import tensorflow as tf

    dataset, builder = read_squad_tfds(split, version_2_with_negative, data_dir, download)
    content = squad_json_text(dataset).encode("utf-8")
    folder = f"{directory.rstrip('/')}/{builder.info.full_name}"
    path = f"{folder}/{squad_file_name(split, version_2_with_negative)}"
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f:
            if f.read() == content:
                return path
    tf.io.gfile.makedirs(folder)
    files.write_atomic(path, content)
    questions = sum(len(p["qas"]) for a in dataset["data"] for p in a["paragraphs"])
    logging.info(
        "TFDS %s %s: %d questions written as SQuAD JSON to %s",
        builder.info.full_name,
        SQUAD_SPLITS[split],
        questions,
        path,
    )
    return path


# ----------------------------------------------------------------------------- RACE
def _race_record(row):
    """A TFDS race row as the release's JSON article (no "answers" when it has none)."""
    record = {
        "article": row["article"],
        "questions": row["questions"],
        "options": row["options"],
        "id": row["example_id"],
    }
    if row.get("answers"):
        record["answers"] = row["answers"]
    return record


def _file_order(example_id, level):
    """`race.file_order_key` of the file an id names: the release's ids are the level and the
    file name ("high123.txt" is high/123.txt)."""
    name = example_id[len(level) :] if example_id.startswith(level) else example_id
    return race.file_order_key(name)


def read_race_tfds(
    split, high_only=False, middle_only=False, labelled=True, data_dir=None, download=True
):
    """`race.read_race` from TFDS race/middle and race/high (prepared as `prepared_builder`
    does): the same `RaceExamples` (ids, question order, option order, labels; middle school
    first, each level in its files' order)."""
    levels = race.chosen_levels(split, high_only, middle_only)

    def level_rows(level):
        name = f"race/{level}"
        builder = prepared_builder(name, data_dir, download)
        articles = sorted(
            (_race_record(row) for row in records(builder, split)),
            key=lambda record: _file_order(record["id"], level),
        )
        rows = []
        for record in articles:
            where = f"tfds:{name}/{split}: article {record['id']!r}"
            rows += race.article_questions(record, where, record["id"])
        return rows, f"{len(articles)} articles of TFDS {builder.info.full_name}"

    source = f"tfds:race/{'+'.join(levels)}/{split}"
    return race.collect_examples(split, levels, level_rows, source, labelled)
