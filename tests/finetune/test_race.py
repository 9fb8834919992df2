"""RACE: reading the release layout (and all.txt), the "_" rule, truncation keeping the last qa
pieces, the in-graph packing, bad records as one-line errors, run_race.py end to end (train,
evaluate, predict, export) with the export loaded in a fresh process, and the Table 14 flagfile."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from finetune_support import REPO, script

from albert_tf.data import race
from albert_tf.data.task_spec import DataError

SEQ_LENGTH, MAX_QA = 48, 16
QUESTIONS = (
    "Which sentence is taken from the passage?",
    "The passage says: _",
    "According to the text, which of these statements _ true?",
)
LONG_ARTICLE = "The students walked to the old library after class and read. " * 12

FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops, as TF Serving does)
    model = tf.saved_model.load(sys.argv[1])
    serve = model.signatures["serving_default"]
    batch = json.loads(sys.argv[2])
    out = serve(article=tf.constant(batch["article"]), question=tf.constant(batch["question"]),
                options=tf.constant(batch["options"]))
    empty = serve(article=tf.constant([], tf.string), question=tf.constant([], tf.string),
                  options=tf.zeros([0, 4], tf.string))
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "probabilities": out["probabilities"].numpy().tolist(),
        "answer": out["answer"].numpy().tolist(), "answer_dtype": out["answer"].dtype.name,
        "empty": {k: v.shape.as_list() for k, v in empty.items()},
        "imported_albert_tf": any(m.startswith("albert_tf") for m in sys.modules),
    }))
""")


def _documents(corpus_file):
    with open(corpus_file, encoding="utf-8") as f:
        blocks = f.read().split("\n\n")
    return [
        [s for s in block.splitlines() if s.strip()]
        for block in blocks
        if len(block.splitlines()) >= 3
    ]


def _article(document, others, rng, number):
    """One RACE record: questions whose right option is a sentence of the article."""
    questions, options, answers = [], [], []
    for q in range(2):
        right = document[(q + number) % len(document)]
        wrong = [others[int(i)][0] for i in rng.choice(len(others), 3, replace=False)]
        label = int(rng.integers(4))
        choices = wrong[:label] + [right] + wrong[label:]
        questions.append(QUESTIONS[(number + q) % len(QUESTIONS)])
        options.append(choices)
        answers.append("ABCD"[label])
    return {
        "article": " ".join(document),
        "questions": questions,
        "options": options,
        "answers": answers,
        "id": f"doc{number}.txt",
    }


@pytest.fixture(scope="module")
def race_dir(corpus_file, tmp_path_factory):
    """RACE/{train,dev,test}/{middle,high}/<n>.txt from the corpus; dev/high as one all.txt."""
    documents = _documents(corpus_file)
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("race")
    counts = {"train": 12, "dev": 4, "test": 3}
    number = 0
    for split, count in counts.items():
        for level in race.LEVELS:
            directory = root / "RACE" / split / level
            directory.mkdir(parents=True)
            records = []
            for i in range(count):
                document = documents[number % len(documents)]
                others = (
                    documents[: number % len(documents)] + documents[number % len(documents) + 1 :]
                )
                records.append(_article(document, others, rng, number))
                number += 1
            if (split, level) == ("dev", "high"):
                (directory / "all.txt").write_text(
                    "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
                )
            else:
                for i, record in enumerate(records):
                    (directory / f"{i + 1}.txt").write_text(json.dumps(record), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model_file)


def test_reading_levels_and_all_txt(race_dir):
    train = race.read_race(str(race_dir), "train")
    assert len(train) == 2 * 12 * 2 and len(train.articles) == 24
    assert list(train.levels[:24]) == ["middle"] * 24 and list(train.levels[24:]) == ["high"] * 24
    assert train.example_ids[:2] == ["doc0.txt", "doc0.txt"]
    assert train.question_index[:4].tolist() == [0, 1, 0, 1]
    record = json.loads((race_dir / "RACE" / "train" / "middle" / "1.txt").read_text())
    assert train.labels[:2].tolist() == ["ABCD".index(a) for a in record["answers"]]
    assert train.options[0] == record["options"][0]
    dev = race.read_race(str(race_dir / "RACE"), "dev", high_only=True)  # the RACE dir itself
    assert len(dev) == 8 and set(dev.levels) == {"high"} and dev.source.endswith("dev")
    assert dev.example_ids[0] == "doc28.txt"  # from all.txt
    middle = race.read_race(str(race_dir), "test", middle_only=True, labelled=False)
    assert len(middle) == 6 and set(middle.levels) == {"middle"}
    assert middle.labels is not None  # the test files have answers


def test_underscore_rule_and_truncation_keep_the_last_qa_pieces(tokenizer):
    from albert_tf.text.normalize import preprocess_text

    question = "Tom said _ loudly , and then asked why the old library had closed so early today ?"
    examples = race.RaceExamples(
        [LONG_ARTICLE],
        np.array([0]),
        ["x"],
        np.array([0]),
        np.array(["high"]),
        [question],
        [["Hello", "Goodbye", "Nothing at all", "Yes"]],
        np.array([1], np.int32),
        "test",
    )
    packed = race.build_inputs(examples, tokenizer, SEQ_LENGTH, max_qa_length=8)
    article_ids = tokenizer.encode_ids(preprocess_text(LONG_ARTICLE))
    assert len(article_ids) > SEQ_LENGTH
    assert packed.truncated_articles == 4 and packed.truncated_qas == 4
    for choice, option in enumerate(examples.options[0]):
        qa = preprocess_text(question.replace("_", option))
        assert (
            race.qa_texts(
                preprocess_text(question), [preprocess_text(o) for o in examples.options[0]]
            )[choice]
            == qa
        )
        first, total = packed.segment_lengths[0, choice].tolist()
        ids = packed.word_ids[0, choice].tolist()
        assert total == SEQ_LENGTH and first == SEQ_LENGTH - 8 - 1
        assert ids[0] == tokenizer.cls_id and ids[first - 1] == tokenizer.sep_id == ids[-1]
        assert ids[1 : first - 1] == article_ids[: first - 2]  # the article's first pieces
        assert ids[first : total - 1] == tokenizer.encode_ids(qa)[-8:]  # the qa's LAST pieces
    assert race.qa_texts("why?", ["a", "b", "c", "d"]) == ["why? a", "why? b", "why? c", "why? d"]
    inputs = race.model_inputs(packed.inputs())
    assert inputs["input_mask"].numpy().sum() == 4 * SEQ_LENGTH
    assert inputs["input_type_ids"].numpy()[0, 0].tolist() == [0] * first + [1] * 9
    with pytest.raises(ValueError, match="max_qa_length"):
        race.build_inputs(examples, tokenizer, SEQ_LENGTH, max_qa_length=SEQ_LENGTH - 2)


def test_graph_packing_equals_python(tokenizer, spm_model_file, race_dir):
    from albert_tf.export.multiple_choice_serving import pack_choices
    from albert_tf.text.preprocessing_layers import TextTokenizer

    dev = race.read_race(str(race_dir), "dev")
    articles = [dev.articles[i] for i in dev.article_index] + [LONG_ARTICLE, "Ça   va ?"]
    questions = dev.questions + ["Ｔｈｅ ＿ cat and the _ dog", "_"]
    options = dev.options + [["big", "small ", " ", "Grüße"], ["", "a", "b", "c"]]
    examples = race.RaceExamples(
        articles,
        np.arange(len(articles)),
        ["x"] * len(articles),
        np.zeros(len(articles), np.int32),
        np.array(["high"] * len(articles)),
        questions,
        options,
        None,
        "t",
    )
    expected = race.model_inputs(
        race.build_inputs(examples, tokenizer, SEQ_LENGTH, MAX_QA).inputs()
    )
    graph = pack_choices(
        TextTokenizer(spm_model_file),
        articles,
        questions,
        options,
        SEQ_LENGTH,
        MAX_QA,
        cls_id=tokenizer.cls_id,
        sep_id=tokenizer.sep_id,
    )
    length = graph["input_word_ids"].shape[-1]
    assert length <= SEQ_LENGTH and length % 8 == 0 or length == SEQ_LENGTH
    for key, values in expected.items():
        values = values.numpy()
        assert not values[..., length:].any()
        np.testing.assert_array_equal(graph[key].numpy(), values[..., :length], err_msg=key)


@pytest.mark.parametrize(
    "record, message",
    [
        ('{"article": "A.", "questions": ["Q?"], ', "1.txt:1:40: invalid JSON"),
        (
            {
                "article": "A.",
                "questions": ["Q?", "R?"],
                "options": [["a", "b", "c", "d"], ["a", "b", "c"]],
                "answers": ["A", "B"],
            },
            "1.txt: question 2: 3 options, expected 4",
        ),
        (
            {
                "article": "A.",
                "questions": ["Q?"],
                "options": [["a", "b", "c", "d"]],
                "answers": ["E"],
            },
            "1.txt: question 1: answer 'E' is not one of A, B, C, D",
        ),
        (
            {
                "article": "A.",
                "questions": ["Q?"],
                "options": [["a", "b", "c", "d"]],
                "answers": ["A", "B"],
            },
            "1.txt: 1 questions, 1 options lists and 2 answers",
        ),
        (
            {
                "article": "  ",
                "questions": ["Q?"],
                "options": [["a", "b", "c", "d"]],
                "answers": ["A"],
            },
            "1.txt: empty article",
        ),
        (
            {
                "article": "A.",
                "questions": [""],
                "options": [["a", "b", "c", "d"]],
                "answers": ["A"],
            },
            "1.txt: question 1 is empty",
        ),
        (
            {"article": "A.", "questions": ["Q?"], "options": [["a", "b", "c", "d"]]},
            "has no 'answers'",
        ),
    ],
    ids=["json", "options", "answer", "counts", "article", "question", "unlabelled"],
)
def test_bad_records(tmp_path, record, message):
    directory = tmp_path / "RACE" / "dev" / "middle"
    directory.mkdir(parents=True)
    (directory / "1.txt").write_text(record if isinstance(record, str) else json.dumps(record))
    with pytest.raises(DataError) as error:
        race.read_race(str(tmp_path), "dev", middle_only=True)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_all_txt_line_and_missing_level(tmp_path):
    directory = tmp_path / "RACE" / "dev" / "high"
    directory.mkdir(parents=True)
    good = {
        "article": "A.",
        "questions": ["Q?"],
        "options": [["a", "b", "c", "d"]],
        "answers": ["A"],
    }
    (directory / "all.txt").write_text(json.dumps(good) + "\n\n{oops\n")
    with pytest.raises(DataError, match=r"all.txt:3:2: invalid JSON"):
        race.read_race(str(tmp_path), "dev", high_only=True)
    with pytest.raises(FileNotFoundError, match=r"dev/middle: no such directory .*--high_only"):
        race.read_race(str(tmp_path), "dev")
    with pytest.raises(FileNotFoundError, match=r"RACE/train: no such directory"):
        race.read_race(str(tmp_path), "train")


def test_unlabelled_test_files(tmp_path):
    directory = tmp_path / "RACE" / "test" / "high"
    directory.mkdir(parents=True)
    record = {"article": "A.", "questions": ["Q?"], "options": [["a", "b", "c", "d"]]}
    (directory / "1.txt").write_text(json.dumps(record))
    (directory / "2.txt").write_text(json.dumps(record))
    examples = race.read_race(str(tmp_path), "test", high_only=True, labelled=False)
    assert examples.labels is None and examples.example_ids == ["1.txt", "2.txt"]
    (directory / "2.txt").write_text(json.dumps(dict(record, answers=["B"])))
    with pytest.raises(DataError, match="1 of 2 questions have no answers"):
        race.read_race(str(tmp_path), "test", high_only=True, labelled=False)


def _flags(race_dir, spm_model_file, output_dir, **overrides):
    values = dict(
        data_dir=race_dir,
        preset="albert_tiny",
        spm_model_file=spm_model_file,
        max_seq_length=SEQ_LENGTH,
        max_qa_length=MAX_QA,
        train_batch_size=8,
        eval_batch_size=16,
        num_train_steps=4,
        save_checkpoints_steps=2,
        learning_rate=1e-3,
        output_dir=output_dir,
        verbose=0,
        precision="float32",  # the export test compares served and Keras outputs to float32 noise
    )
    values.update(overrides)
    return [f"--{k}={v}" for k, v in values.items() if v is not None]


@pytest.fixture(scope="module")
def finished_run(race_dir, spm_model_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("race_run") / "run"
    serving = out.parent / "serving"
    result = script(
        "run_race.py", _flags(race_dir, spm_model_file, out, do_predict=True, export_dir=serving)
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return out, serving, result


def test_fit_evaluate_predict_export(finished_run, race_dir):
    out, serving, result = finished_run
    assert "cut the article to fit max_seq_length=48" in result.stderr
    results = json.load(open(out / "eval_results.json"))
    assert [h["step"] for h in results["history"]] == [2, 4]
    first = results["history"][0]
    assert {"eval_accuracy", "eval_middle_accuracy", "eval_high_accuracy"} <= set(first)
    assert first["eval_num_examples"] == 16
    assert results["best"]["metric"] == "accuracy"
    assert 0.25 <= results["baselines"]["dev_majority_answer_rate"] <= 1.0
    predicted = json.load(open(out / "predict_results.json"))
    assert predicted["split"] == "test" and "high_accuracy" in predicted["metrics"]
    test = race.read_race(str(race_dir), "test")
    rows = predicted["predictions"]
    assert [(r["id"], r["question"]) for r in rows] == list(
        zip(test.example_ids, test.question_index.tolist())
    )
    assert all(r["answer"] in "ABCD" and abs(sum(r["probabilities"]) - 1) < 1e-4 for r in rows)
    # the answered test split is scored once into eval_results.json too
    assert results["test"]["accuracy"] == predicted["metrics"]["accuracy"]
    assert results["test"]["step"] == results["best"]["step"]
    # dev_results.tsv: one row per question, gold and predicted letters
    with open(out / "dev_results.tsv", encoding="utf-8") as f:
        table = [line.rstrip("\n").split("\t") for line in f]
    assert table[0][:6] == ["id", "question_index", "question", "level", "label", "prediction"]
    assert table[0][6:] == ["probability_A", "probability_B", "probability_C", "probability_D"]
    dev = race.read_race(str(race_dir), "dev")
    assert [r[0] for r in table[1:]] == dev.example_ids
    assert [r[4] for r in table[1:]] == ["ABCD"[i] for i in dev.labels]
    assert all(r[5] in "ABCD" for r in table[1:])
    info = json.load(open(out / "finetune.json"))
    assert info["task"]["kind"] == "race" and info["task"]["data"]["max_qa_length"] == MAX_QA
    assert os.listdir(serving) == ["1"]
    described = json.load(open(serving / "1" / "assets.extra" / "albert_tf.json"))
    assert described["kind"] == "multiple_choice" and described["max_qa_length"] == MAX_QA


def test_export_in_a_fresh_process_equals_the_keras_model(finished_run, tokenizer, race_dir):
    import keras

    from albert_tf.models.multiple_choice import AlbertMultipleChoice

    out, serving, _ = finished_run
    model = keras.saving.load_model(str(out / "model.keras"), compile=False)
    assert isinstance(model, AlbertMultipleChoice)
    test = race.read_race(str(race_dir), "test")
    batch = {
        "article": [test.articles[i] for i in test.article_index[:3]] + [LONG_ARTICLE],
        "question": test.questions[:3] + ["The students _ to the library ."],
        "options": test.options[:3] + [["walked", "ran", "drove", "flew"]],
    }
    examples = race.RaceExamples(
        batch["article"],
        np.arange(4),
        ["x"] * 4,
        np.zeros(4),
        np.array(["high"] * 4),
        batch["question"],
        batch["options"],
        None,
        "batch",
    )
    inputs = race.model_inputs(race.build_inputs(examples, tokenizer, SEQ_LENGTH, MAX_QA).inputs())
    logits = model(inputs).numpy()
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(serving / "1"), json.dumps(batch)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["signatures"] == ["predict_ids", "serving_default"]
    assert not served["imported_albert_tf"]
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    assert served["answer"] == expected.argmax(-1).tolist() and served["answer_dtype"] == "int64"
    assert served["empty"] == {"probabilities": [0, 4], "answer": [0]}
    # export_saved_model.py rebuilds the task from finetune.json to export again.
    from albert_tf.finetune.task import task_from_description

    description = json.load(open(out / "finetune.json"))["task"]
    assert description["spm_model_file"] == "spm.model"  # the file beside it, not its bytes
    task = task_from_description(description, str(out))
    rebuilt = task.describe()
    assert rebuilt.pop("spm_model_file") == str(out / "spm.model")
    assert rebuilt == {k: v for k, v in description.items() if k != "spm_model_file"}
    assert task.vocab_size == 1000


def _one_line_error(result, *fragments):
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    for fragment in fragments:
        assert fragment in last, last
    return last


def test_bad_input_is_one_line(race_dir, spm_model_file, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(race_dir, bad)
    path = bad / "RACE" / "dev" / "middle" / "1.txt"
    record = json.loads(path.read_text())
    record["options"][1] = record["options"][1][:3]
    path.write_text(json.dumps(record))
    result = script("run_race.py", _flags(bad, spm_model_file, tmp_path / "out"))
    _one_line_error(result, f"{path}: question 2: 3 options, expected 4")
    # Flag errors are InvalidFlagError, which the script reports in one line as well.
    from albert_tf.finetune.race import RaceData, RaceTask
    from albert_tf.settings import InvalidFlagError

    with pytest.raises(
        InvalidFlagError,
        match=r"--max_qa_length=46 must be in \[1, "
        r"--max_seq_length - 3 = 45\]",
    ):
        RaceTask(RaceData(str(race_dir), max_qa_length=46)).configure_text(
            spm_model_file, max_seq_length=48
        )
    with pytest.raises(InvalidFlagError, match="--high_only and --middle_only"):
        RaceTask(RaceData(str(race_dir), high_only=True, middle_only=True)).configure_text(
            spm_model_file, max_seq_length=48
        )


def test_race_flagfile_parses_with_run_race(tmp_path):
    check = textwrap.dedent("""
        import importlib.util, json, sys
        from absl import flags
        spec = importlib.util.spec_from_file_location("script", "scripts/run_race.py")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        flags.FLAGS(["run_race", "--flagfile=flags/race.flags"] + sys.argv[1:])
        from albert_tf.finetune.params import FinetuneParams, validate
        from albert_tf.finetune.race import RaceData
        from albert_tf.settings import from_flags
        params = from_flags(FinetuneParams)
        validate(params)
        print(json.dumps({"params": vars(params), "data": vars(from_flags(RaceData))}))
    """)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            check,
            "--init_checkpoint=pretrained",
            f"--data_dir={tmp_path}",
            f"--output_dir={tmp_path / 'out'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(
            os.environ,
            TF_CPP_MIN_LOG_LEVEL="3",
            PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
        ),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    params = parsed["params"]
    # Table 14, RACE: lr 2e-5, batch 32, ALBERT DR 0.1, classifier DR 0.1, 12000 steps, 1000 warmup,
    # MSL 512; max_qa_length 128 as the original run_race.py.
    assert (
        params["learning_rate"],
        params["train_batch_size"],
        params["albert_dropout"],
        params["classifier_dropout"],
        params["num_train_steps"],
        params["warmup_steps"],
        params["max_seq_length"],
    ) == (2e-5, 32, 0.1, 0.1, 12000, 1000, 512)
    assert parsed["data"]["max_qa_length"] == 128
    assert not tf.io.gfile.exists(str(tmp_path / "out"))
