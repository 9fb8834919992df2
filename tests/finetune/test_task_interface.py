"""The `FinetuneTask` interface: its required members, the documented minimal task run end to
end by the runner (exported by the default `export`), the descriptions (finetune.json) the
shared defaults build, and the export options each task kind declares."""

import doctest
import inspect
import json
import os

import pytest

from albert_tf.data import glue
from albert_tf.finetune import task as task_lib
from albert_tf.finetune.task import FinetuneTask

REQUIRED = {
    "load",
    "build_model",
    "features",
    "postprocess",
    "evaluate",
    "write_predictions",
    "serving_spec",
}


def test_required_members_are_the_documented_ones():
    assert FinetuneTask.__abstractmethods__ == REQUIRED
    summary = FinetuneTask.__doc__.split(">>>")[0]
    assert all(f"`{name}`" in summary for name in REQUIRED)


def _documented_task():
    """The minimal task of `FinetuneTask`'s docstring, defined by running its examples."""
    namespace = dict(vars(task_lib))
    for example in doctest.DocTestParser().get_examples(FinetuneTask.__doc__):
        if "class LongTextTask" in example.source or "import" in example.source:
            exec(compile(example.source, "<FinetuneTask docstring>", "exec"), namespace)
    return namespace["LongTextTask"], namespace["ClassificationData"]


def test_documented_minimal_task_trains_evaluates_and_is_rebuilt(tmp_path, spm_model_file):
    from albert_tf.finetune.params import FinetuneParams
    from albert_tf.finetune.runner import run_finetuning

    task_class, data_class = _documented_task()
    params = FinetuneParams(
        output_dir=str(tmp_path),
        preset="albert_tiny",
        spm_model_file=spm_model_file,
        max_seq_length=16,
        train_batch_size=2,
        eval_batch_size=2,
        num_train_steps=2,
        save_checkpoints_steps=2,
        learning_rate=1e-3,
        verbose=0,
        export_dir=str(tmp_path / "serving"),
    )
    result = run_finetuning(params, task_class(data_class()))
    assert result["global_step"] == 2
    # the default export builds the SavedModel of the documented `serving_spec`
    assert result["export"] == str(tmp_path / "serving" / "1")
    with open(tmp_path / "serving" / "1" / "assets.extra" / "albert_tf.json") as f:
        assert json.load(f)["kind"] == "classifier"
    assert (result["best"]["metric"], result["best"]["step"]) == ("accuracy", 2)
    with open(tmp_path / "dev_results.tsv", encoding="utf-8") as f:
        assert f.read().splitlines()[0] == "index\tprediction"
    with open(tmp_path / "finetune.json", encoding="utf-8") as f:
        description = json.load(f)["task"]
    assert description["kind"] == description["name"] == "long_text"
    rebuilt = task_class.from_description(description, str(tmp_path))
    assert rebuilt.data == data_class()
    assert rebuilt.preprocessor.max_seq_length == 16
    assert os.path.isfile(rebuilt.preprocessor.source)


def test_descriptions_keep_their_entries(spm_model_file):
    """The entries of finetune.json per task kind, built by the shared `describe` default."""
    from albert_tf.finetune.classification import SentenceClassificationTask
    from albert_tf.finetune.race import RaceTask
    from albert_tf.finetune.tagging import TokenClassificationTask
    from albert_tf.finetune.task_data import ClassificationData, RaceData, TaggingData

    common = {"kind", "name", "data", "preprocessor", task_lib.SPM_MODEL_KEY}
    race = RaceTask(RaceData(data_dir="race", max_qa_length=8))
    tagging = TokenClassificationTask(TaggingData(task_name="ner"), labels=["O", "B-X"])
    for task in (race, tagging):
        task.configure_text(spm_model_file, max_seq_length=32)
    assert set(race.describe()) == common
    assert set(tagging.describe()) == common | {"labels", "word_convention"}
    rebuilt = task_lib.task_from_description(tagging.describe())
    assert (rebuilt.labels, rebuilt.data) == (["O", "B-X"], tagging.data)
    assert rebuilt.word_convention == tagging.word_convention
    rebuilt = task_lib.task_from_description(race.describe())
    assert isinstance(rebuilt, RaceTask) and rebuilt.data == race.data
    assert rebuilt.preprocessor.get_config() == race.preprocessor.get_config()

    classification = SentenceClassificationTask(
        ClassificationData(task_name="mrpc"), spec=glue.get_task("mrpc")
    )
    classification.configure_text(spm_model_file, max_seq_length=32)
    extra = {"spec", "seed", "pair", "labels", "regression"}
    assert set(classification.describe()) == common | extra
    assert classification.vocab_size == race.vocab_size == tagging.vocab_size == 1000


def test_export_options_are_those_the_savedmodel_makers_take():
    """`export_compute_dtypes` / `export_agreement_texts` (what export_saved_model.py offers)
    against the parameters of each task kind's SavedModel maker."""
    from albert_tf.export import saved_model
    from albert_tf.export.multiple_choice_serving import multiple_choice_spec
    from albert_tf.export.squad_serving import question_answerer_spec
    from albert_tf.export.token_classifier_serving import token_classifier_spec

    makers = {
        "classification": saved_model.classifier_spec,
        "token_classification": token_classifier_spec,
        "squad": question_answerer_spec,
        "race": multiple_choice_spec,
    }
    assert set(makers) == set(task_lib.TASK_KINDS)
    for kind, maker in makers.items():
        task_class, taken = task_lib.task_class(kind), inspect.signature(maker).parameters
        assert ("compute_dtype" in taken) == ("bfloat16" in task_class.export_compute_dtypes)
        assert ("agreement_texts" in taken) == task_class.export_agreement_texts, kind
    assert FinetuneTask.export_compute_dtypes == ("float32",)


def test_default_export_refuses_a_compute_dtype_the_task_does_not_serve():
    from albert_tf.finetune.race import RaceTask
    from albert_tf.finetune.task_data import RaceData

    with pytest.raises(
        ValueError, match=r"^compute_dtype='bfloat16': a race export computes in float32$"
    ):
        RaceTask(RaceData(data_dir="race")).export(None, "unused", compute_dtype="bfloat16")
