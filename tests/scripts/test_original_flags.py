"""The original google-research/albert command lines on our scripts: every flag of
run_classifier.py, run_squad_v1.py, run_squad_v2.py and run_race.py is accepted with its
meaning or refused with one line naming the replacement (albert_tf/finetune/original_flags.py),
and one original-style command line per script runs end to end."""

import dataclasses
import json
import logging

import pytest
from absl import flags
from script_support import run

from albert_tf.finetune import original_flags
from albert_tf.finetune.classification import ClassificationData
from albert_tf.finetune.params import FinetuneParams
from albert_tf.finetune.race import RaceData
from albert_tf.finetune.squad import SquadData
from albert_tf.settings import InvalidFlagError, define_flags, from_flags

# Every flag of the original scripts (google-research/albert at HEAD), listed literally.
_TPU = ["use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores"]
ORIGINAL = {
    "run_classifier.py": [
        "data_dir", "albert_config_file", "task_name", "vocab_file", "spm_model_file",
        "output_dir", "cached_dir", "init_checkpoint", "albert_hub_module_handle",
        "do_lower_case", "max_seq_length", "do_train", "do_eval", "do_predict",
        "train_batch_size", "eval_batch_size", "predict_batch_size", "learning_rate",
        "train_step", "warmup_step", "save_checkpoints_steps", "keep_checkpoint_max",
        "iterations_per_loop", "optimizer", *_TPU, "export_dir", "threshold_to_export",
    ],
    "run_squad_v1.py": [
        "albert_config_file", "vocab_file", "spm_model_file", "output_dir", "train_file",
        "predict_file", "train_feature_file", "predict_feature_file",
        "predict_feature_left_file", "init_checkpoint", "albert_hub_module_handle",
        "do_lower_case", "max_seq_length", "doc_stride", "max_query_length", "do_train",
        "do_predict", "train_batch_size", "predict_batch_size", "learning_rate",
        "num_train_epochs", "warmup_proportion", "save_checkpoints_steps",
        "iterations_per_loop", "n_best_size", "max_answer_length", *_TPU, "use_einsum",
        "export_dir",
    ],
    "run_squad_v2.py": [
        "albert_config_file", "vocab_file", "spm_model_file", "output_dir", "train_file",
        "predict_file", "train_feature_file", "predict_feature_file",
        "predict_feature_left_file", "init_checkpoint", "albert_hub_module_handle",
        "do_lower_case", "max_seq_length", "doc_stride", "max_query_length", "do_train",
        "do_predict", "train_batch_size", "predict_batch_size", "learning_rate",
        "num_train_epochs", "warmup_proportion", "save_checkpoints_steps",
        "iterations_per_loop", "n_best_size", "max_answer_length", *_TPU, "start_n_top",
        "end_n_top", "dropout_prob",
    ],
    "run_race.py": [
        "data_dir", "albert_config_file", "task_name", "vocab_file", "train_file", "eval_file",
        "predict_file", "spm_model_file", "output_dir", "init_checkpoint",
        "albert_hub_module_handle", "do_lower_case", "dropout_prob", "max_seq_length",
        "max_qa_length", "num_keep_checkpoint", "high_only", "middle_only", "do_train",
        "do_eval", "do_predict", "train_batch_size", "eval_batch_size", "predict_batch_size",
        "learning_rate", "train_step", "warmup_step", "save_checkpoints_steps",
        "iterations_per_loop", *_TPU,
    ],
}  # fmt: skip
SCRIPTS = {  # original script -> (our data settings, the minimum of our required flags)
    "run_classifier.py": (ClassificationData, ["--task_name=mrpc"]),
    "run_squad_v1.py": (SquadData, []),
    "run_squad_v2.py": (SquadData, []),
    "run_race.py": (RaceData, ["--data_dir=race"]),
}

# flag -> (command-line argument, expected): ("set", our setting, value), ("no effect",),
# ("accepted",) or ("refused", a fragment of the message). Flags needing files: further down.
SAME = {
    "data_dir": ("--data_dir=glue", ("set", "data_dir", "glue")),
    "task_name": ("--task_name=rte", ("set", "task_name", "rte")),
    "spm_model_file": ("--spm_model_file=sp.model", ("set", "spm_model_file", "sp.model")),
    "output_dir": ("--output_dir=o2", ("set", "output_dir", "o2")),
    "do_lower_case": ("--nodo_lower_case", ("set", "do_lower_case", False)),
    "max_seq_length": ("--max_seq_length=384", ("set", "max_seq_length", 384)),
    "do_train": ("--nodo_train", ("set", "do_train", False)),
    "do_eval": ("--nodo_eval", ("set", "do_eval", False)),
    "do_predict": ("--do_predict", ("set", "do_predict", True)),
    "train_batch_size": ("--train_batch_size=48", ("set", "train_batch_size", 48)),
    "eval_batch_size": ("--eval_batch_size=8", ("set", "eval_batch_size", 8)),
    "predict_batch_size": ("--predict_batch_size=8", ("set", "eval_batch_size", 8)),
    "learning_rate": ("--learning_rate=3e-5", ("set", "learning_rate", 3e-5)),
    "train_step": ("--train_step=10000", ("set", "num_train_steps", 10000)),
    "warmup_step": ("--warmup_step=1000", ("set", "warmup_steps", 1000)),
    "num_train_epochs": ("--num_train_epochs=2.0", ("set", "num_train_epochs", 2.0)),
    "warmup_proportion": ("--warmup_proportion=.1", ("set", "warmup_proportion", 0.1)),
    "save_checkpoints_steps": ("--save_checkpoints_steps=9", ("set", "save_checkpoints_steps", 9)),
    "keep_checkpoint_max": ("--keep_checkpoint_max=5", ("set", "keep_checkpoint_max", 5)),
    "num_keep_checkpoint": ("--num_keep_checkpoint=5", ("set", "keep_checkpoint_max", 5)),
    "optimizer": ("--optimizer=lamb", ("set", "optimizer", "lamb")),
    "use_tpu": ("--use_tpu", ("set", "strategy", "tpu")),
    "tpu_name": ("--tpu_name=my-tpu", ("set", "tpu", "my-tpu")),
    "master": ("--master=grpc://10.0.0.2:8470", ("set", "tpu", "grpc://10.0.0.2:8470")),
    "export_dir": ("--export_dir=serving", ("set", "export_dir", "serving")),
    "train_file": ("--train_file=train.json", ("set", "train_file", "train.json")),
    "predict_file": ("--predict_file=dev.json", ("set", "predict_file", "dev.json")),
    "doc_stride": ("--doc_stride=64", ("set", "doc_stride", 64)),
    "max_query_length": ("--max_query_length=32", ("set", "max_query_length", 32)),
    "n_best_size": ("--n_best_size=10", ("set", "n_best_size", 10)),
    "max_answer_length": ("--max_answer_length=20", ("set", "max_answer_length", 20)),
    "start_n_top": ("--start_n_top=3", ("set", "start_n_top", 3)),
    "end_n_top": ("--end_n_top=4", ("set", "end_n_top", 4)),
    "dropout_prob": ("--dropout_prob=0.2", ("set", "classifier_dropout", 0.2)),
    "max_qa_length": ("--max_qa_length=64", ("set", "max_qa_length", 64)),
    "high_only": ("--high_only", ("set", "high_only", True)),
    "middle_only": ("--middle_only", ("set", "middle_only", True)),
    "iterations_per_loop": ("--iterations_per_loop=1000", ("no effect",)),  # off TPU
    "vocab_file": ("--vocab_file=30k-clean.vocab", ("no effect",)),
    "cached_dir": ("--cached_dir=cache", ("no effect",)),
    "train_feature_file": ("--train_feature_file=f.tfrecord", ("no effect",)),
    "predict_feature_file": ("--predict_feature_file=f.tfrecord", ("no effect",)),
    "predict_feature_left_file": ("--predict_feature_left_file=f.pkl", ("no effect",)),
    "tpu_zone": ("--tpu_zone=us-central1-b", ("no effect",)),
    "gcp_project": ("--gcp_project=p", ("no effect",)),
    "num_tpu_cores": ("--num_tpu_cores=8", ("no effect",)),
    "use_einsum": ("--nouse_einsum", ("no effect",)),
    "eval_file": ("--eval_file=eval.tfrecord", ("no effect",)),
    "init_checkpoint": ("--init_checkpoint=", ("set", "init_checkpoint", "")),
    "albert_config_file": ("--albert_config_file=c.json", ("refused", "use --preset")),
    "albert_hub_module_handle": (
        "--albert_hub_module_handle=https://tfhub.dev/google/albert_base/3",
        ("set", "init_checkpoint", "https://tfhub.dev/google/albert_base/3"),
    ),
    "threshold_to_export": ("--threshold_to_export=0.5", ("refused", "probabilities")),
}  # fmt: skip
PER_SCRIPT = {  # where one name means something else in one script
    ("run_race.py", "task_name"): ("--task_name=RACE", ("accepted",)),
    ("run_race.py", "train_file"): ("--train_file=train.tfrecord", ("no effect",)),
    ("run_race.py", "predict_file"): ("--predict_file=test.tfrecord", ("no effect",)),
}


def _parse(script, *args):
    """(FlagValues, table) after parsing `args` as the script would, original flags applied."""
    data_cls, required = SCRIPTS[script]
    values = flags.FlagValues()
    define_flags(FinetuneParams, values)
    define_flags(data_cls, values)
    table = original_flags.TABLES[script]
    original_flags.define_original_flags(table, values)
    values([script, "--output_dir=out", "--preset=albert_tiny", *required, *args])
    original_flags.apply_original_flags(table, values)
    return values


@pytest.mark.parametrize("script", sorted(ORIGINAL))
def test_every_original_flag_has_a_rule(script):
    same_table = [s for s, t in original_flags.TABLES.items() if t is original_flags.TABLES[script]]
    flags_of_scripts = {f for s in same_table for f in ORIGINAL[s]}  # run_squad: v1 and v2
    assert sorted(original_flags.TABLES[script]) == sorted(flags_of_scripts)


CASES = [(s, f) for s in sorted(ORIGINAL) for f in ORIGINAL[s]]


@pytest.mark.parametrize("script,flag", CASES, ids=[f"{s}:{f}" for s, f in CASES])
def test_original_flag(script, flag, caplog):
    argument, expected = PER_SCRIPT.get((script, flag), SAME[flag])
    if expected[0] == "refused":
        with pytest.raises(InvalidFlagError, match=f"--{flag}.*{expected[1]}") as raised:
            _parse(script, argument)
        assert "\n" not in str(raised.value)
        return
    with caplog.at_level(logging.INFO, logger="absl"):
        values = _parse(script, argument)
    if expected[0] == "no effect":
        assert f"--{flag}" in caplog.text and "no effect" in caplog.text
    if expected[0] != "set":
        return
    _, setting, value = expected
    data_cls = SCRIPTS[script][0]
    settings = {**vars(from_flags(FinetuneParams, values)), **vars(from_flags(data_cls, values))}
    assert settings[setting] == value


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--train_step=10", "--num_train_steps=20"], "--train_step=10 means --num_train_steps"),
        (["--warmup_step=1", "--warmup_steps=2"], "--warmup_step=1 means --warmup_steps"),
        (["--predict_batch_size=8", "--eval_batch_size=16"], "--predict_batch_size=8 means"),
        (["--tpu_name=a", "--master=b"], "--master=b and --tpu_name=a both set --tpu"),
        (["--nouse_tpu", "--strategy=tpu"], "--use_tpu=false contradicts --strategy=tpu"),
        (["--task_name=mnli"], "run_race.py runs RACE only"),
        (
            ["--init_checkpoint=albert_base_v1", "--albert_hub_module_handle=h"],
            "--albert_hub_module_handle=h means --init_checkpoint=h here, but",
        ),
    ],
)
def test_two_values_for_one_setting_are_refused(args, fragment):
    with pytest.raises(InvalidFlagError, match=fragment):
        _parse("run_race.py", *args)


def test_same_value_twice_is_fine_and_iterations_per_loop_on_tpu():
    values = _parse(
        "run_race.py",
        "--train_step=12000",
        "--num_train_steps=12000",
        "--use_tpu",
        "--iterations_per_loop=1000",
        "--save_checkpoints_steps=100",
    )
    params = from_flags(FinetuneParams, values)
    assert (params.num_train_steps, params.strategy, params.steps_per_execution) == (
        12000,
        "tpu",
        100,  # the original: min(iterations_per_loop, save_checkpoints_steps)
    )


# ---------------------------------------------------------------- original checkpoints
@pytest.fixture(scope="module")
def original_checkpoint(tmp_path_factory, spm_model_file):
    """A tiny pretrainer as the original's TF1 checkpoint + albert_config.json, and the same
    model as our model directory."""
    from albert_tf.config import AlbertConfig
    from albert_tf.convert.original import to_original
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    root = tmp_path_factory.mktemp("original")
    config = AlbertConfig.from_preset(
        "albert_tiny", vocab_size=1000, num_hidden_layers=2, hidden_dropout_prob=0.0
    )
    pretrainer = AlbertPretrainer(AlbertModel(config))
    to_original(pretrainer, str(root / "tf1"))
    model_dir.save(pretrainer, str(root / "ours"), spm_model=spm_model_file)
    return root


def test_albert_config_file_must_match_a_model_directory(original_checkpoint, tmp_path):
    ours = str(original_checkpoint / "ours")
    config = original_checkpoint / "tf1" / "albert_config.json"
    values = _parse(  # the same config: accepted
        "run_squad_v1.py", f"--albert_config_file={config}", f"--init_checkpoint={ours}"
    )
    assert values.init_checkpoint == ours
    other = json.loads(config.read_text())
    other["num_hidden_layers"] = 3
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(InvalidFlagError, match="differs .* in num_hidden_layers"):
        _parse(
            "run_squad_v1.py",
            f"--albert_config_file={tmp_path / 'other.json'}",
            f"--init_checkpoint={ours}",
        )


def test_unlabelled_predict_file_is_answered_not_scored(tmp_path, spm_model_file):
    from albert_tf.finetune.squad import SquadTask

    contexts = [{"context": "The cat sat on the mat.", "qas": [{"id": "q1", "question": "Who?"}]}]
    path = tmp_path / "test.json"
    path.write_text(json.dumps({"data": [{"paragraphs": contexts}]}))
    data = SquadData(predict_file=str(path), doc_stride=24, max_query_length=24)
    task = SquadTask(dataclasses.replace(data, feature_cache_dir=str(tmp_path / "c")))
    task.configure_text(spm_model_file, max_seq_length=64)
    task.load(["test"])
    assert task.loaded_splits == ("test",) and task.features("test").labels is None


# ---------------------------------------------------------------- end to end
def _ok(result):
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_run_squad_v2_original_command_line(original_checkpoint, spm_model_file, tmp_path):
    from albert_tf.data.docstring_qa import write_docstring_squad

    train, dev = str(tmp_path / "train-v2.0.json"), str(tmp_path / "dev-v2.0.json")
    write_docstring_squad(train, dev, max_paragraphs=8, version_2_with_negative=True)
    out, tf1 = tmp_path / "out", original_checkpoint / "tf1"
    args = [
        f"--albert_config_file={tf1 / 'albert_config.json'}",
        f"--init_checkpoint={tf1 / 'model.ckpt'}",
        f"--spm_model_file={spm_model_file}",
        "--vocab_file=30k-clean.vocab",
        f"--output_dir={out}",
        f"--train_file={train}",
        f"--predict_file={dev}",
        f"--train_feature_file={tmp_path / 'train.tfrecord'}",
        f"--predict_feature_file={tmp_path / 'dev.tfrecord'}",
        f"--predict_feature_left_file={tmp_path / 'left.pkl'}",
        "--do_lower_case",
        "--max_seq_length=64",
        "--doc_stride=24",
        "--max_query_length=24",
        "--do_train",
        "--do_predict",
        "--train_batch_size=16",
        "--predict_batch_size=32",
        "--learning_rate=1e-3",
        "--num_train_epochs=0.2",
        "--warmup_proportion=.1",
        "--save_checkpoints_steps=1000",
        "--iterations_per_loop=1000",
        "--n_best_size=20",
        "--max_answer_length=30",
        "--use_tpu=false",
        "--start_n_top=3",
        "--end_n_top=3",
        "--dropout_prob=0.1",
        "--version_2_with_negative",
        f"--feature_cache_dir={tmp_path / 'cache'}",
        "--verbose=0",
    ]
    result = _ok(run("run_squad.py", *args))
    assert "is an original TF1 checkpoint: converting it" in result.stderr
    assert "warmup steps" in result.stderr
    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
        assert (out / name).exists(), name
    results = json.loads((out / "eval_results.json").read_text())
    assert "eval_f1" in results["history"][-1] and "eval_best_f1" in results["history"][-1]
    key = original_flags.conversion_key(str(tf1 / "model.ckpt"), str(tf1 / "albert_config.json"))
    assert (out / original_flags.CONVERTED_DIR / key / "config.json").exists()
    # Another checkpoint (here: the same weights, another config file) gets its own conversion.
    assert key != original_flags.conversion_key(str(tf1 / "model.ckpt"))
    assert key == original_flags.conversion_key(str(tf1), str(tf1 / "albert_config.json"))


def test_run_classifier_original_command_line(original_checkpoint, spm_model_file, tmp_path):
    rows = ["gj04\t1\t\tThe file was read.", "gj04\t0\t*\tFile the was read the."] * 8
    (tmp_path / "CoLA").mkdir()
    for split in ("train", "dev"):
        (tmp_path / "CoLA" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    result = run(
        "run_classifier.py",
        f"--data_dir={tmp_path}",
        f"--init_checkpoint={original_checkpoint / 'ours'}",
        f"--albert_config_file={original_checkpoint / 'tf1' / 'albert_config.json'}",
        f"--spm_model_file={spm_model_file}",
        "--vocab_file=30k-clean.vocab",
        "--task_name=cola",
        f"--output_dir={out}",
        f"--cached_dir={tmp_path / 'cache'}",
        "--do_train",
        "--do_eval",
        "--do_lower_case",
        "--max_seq_length=32",
        "--optimizer=adamw",
        "--train_batch_size=8",
        "--eval_batch_size=8",
        "--predict_batch_size=8",
        "--learning_rate=1e-5",
        "--train_step=2",
        "--warmup_step=1",
        "--save_checkpoints_steps=2",
        "--keep_checkpoint_max=5",
        "--iterations_per_loop=1000",
        "--use_tpu=false",
        "--num_tpu_cores=8",
        "--verbose=0",
    )
    _ok(result)
    history = json.loads((out / "eval_results.json").read_text())["history"]
    assert [h["step"] for h in history] == [2]


def test_run_race_original_command_line(spm_model_file, tmp_path):
    sentences = ["The cat sat on the mat.", "A dog ran home.", "Birds sing.", "Fish swim."]
    for split in ("train", "dev"):
        directory = tmp_path / "RACE" / split / "high"
        directory.mkdir(parents=True)
        records = [
            {
                "article": " ".join(sentences[i:] + sentences[:i]),
                "questions": ["Which sentence is in the article?"],
                "options": [sentences[i:] + sentences[:i]],
                "answers": ["A"],
                "id": f"{i}.txt",
            }
            for i in range(4)
        ]
        (directory / "all.txt").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    _ok(
        run(
            "run_race.py",
            f"--data_dir={tmp_path}",
            "--preset=albert_tiny",
            f"--spm_model_file={spm_model_file}",
            f"--output_dir={out}",
            "--task_name=race",
            f"--train_file={tmp_path / 'train.tfrecord'}",
            f"--eval_file={tmp_path / 'eval.tfrecord'}",
            "--do_lower_case",
            "--dropout_prob=0.1",
            "--max_seq_length=32",
            "--max_qa_length=16",
            "--num_keep_checkpoint=5",
            "--high_only",
            "--do_train",
            "--do_eval",
            "--train_batch_size=4",
            "--eval_batch_size=4",
            "--predict_batch_size=4",
            "--learning_rate=1e-5",
            "--train_step=2",
            "--warmup_step=1",
            "--save_checkpoints_steps=2",
            "--iterations_per_loop=1000",
            "--verbose=0",
        )
    )
    assert json.loads((out / "eval_results.json").read_text())["best"]["step"] == 2


def test_hub_module_names_the_release_and_offline_says_so_in_one_line(tmp_path):
    """--albert_hub_module_handle is the release archive's model: with ALBERT_TF_OFFLINE=1 and an
    empty cache the script stops in one line naming the handle and the variable."""
    result = run(
        "run_classifier.py",
        "--task_name=mrpc",
        f"--data_dir={tmp_path}",
        f"--output_dir={tmp_path / 'out'}",
        "--albert_hub_module_handle=https://tfhub.dev/google/albert_base/3",
        env={"ALBERT_TF_OFFLINE": "1", "ALBERT_TF_HOME": str(tmp_path / "cache")},
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "run_classifier.py: error: https://tfhub.dev/google/albert_base/3: not in the cache"
    )
    assert "ALBERT_TF_OFFLINE=1 forbids downloading" in last
    assert "albert_models/albert_base_v2.tar.gz" in last


def test_the_original_readme_hub_command_line(caplog):
    """The original README's fine-tuning flags: a TF Hub handle names the model, with the
    Colab's placeholder --spm_model_file=from_tf_hub and a config file that the named model's
    own config replaces (logged)."""
    handle = "https://tfhub.dev/google/albert_base/1"
    with caplog.at_level(logging.INFO, logger="absl"):
        values = _parse(
            "run_race.py",
            f"--albert_hub_module_handle={handle}",
            "--spm_model_file=from_tf_hub",
            "--albert_config_file=albert_config.json",
        )
    params = from_flags(FinetuneParams, values)
    assert (params.init_checkpoint, params.spm_model_file) == (handle, None)
    assert "from_tf_hub: using the model's own SentencePiece model" in caplog.text
    assert "--albert_config_file=albert_config.json has no effect" in caplog.text
