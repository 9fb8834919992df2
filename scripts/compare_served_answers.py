"""Do the answers a SQuAD SavedModel serves equal the run's predictions.json?

For a finished `run_squad.py` output directory and its export, answers every question of the
run's --predict_file three ways and counts how often they agree:

- `predictions.json`: what the run wrote (its model in the run's compute precision, e.g.
  mixed_bfloat16 on CPUs with AMX, then the Python post-processing);
- `served`: the SavedModel's `serving_default(question, context)` (raw text in, float32 graph);
- `python_float32`: the run's model.keras recomputed in float32, then the same Python
  post-processing as predictions.json.

`served` against `python_float32` tests the code (same precision, two implementations);
`predictions.json` against `python_float32` shows what the precision alone changes. Prints one
JSON line with the counts and up to --show differing questions.

    python scripts/compare_served_answers.py --run_dir=out/squad --saved_model=out/serving/1
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli, input_paths  # noqa: E402
from albert_tf.settings import InvalidFlagError  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("run_dir", None, "A finished run_squad.py --output_dir.")
flags.DEFINE_string("saved_model", None, "The SavedModel version directory of its export.")
flags.DEFINE_integer("batch_size", 32, "Questions per serving call.", lower_bound=1)
flags.DEFINE_integer("show", 5, "Differing questions to print.", lower_bound=0)


def _python_float32(run_dir, task):
    from albert_tf.convert.checkpoint import load_head_model
    from albert_tf.finetune import squad_predictions

    model = load_head_model(os.path.join(run_dir, "model.keras"), dtype="float32")
    outputs = model.predict(task.features("dev").inputs, batch_size=64, verbose=0)
    predictions = task.postprocess(outputs, "dev")
    answers = predictions["predictions"]
    if task.version_2:
        answers = squad_predictions.apply_null_threshold(
            answers, predictions["null_odds"], task.null_threshold
        )
    return answers


def _served(saved_model, examples, batch_size):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece ops)

    serve = tf.saved_model.load(saved_model).signatures["serving_default"]
    answers = {}
    for i in range(0, len(examples), batch_size):
        batch = examples[i : i + batch_size]
        out = serve(
            question=tf.constant([e.question_text for e in batch]),
            context=tf.constant([e.context_text for e in batch]),
        )
        for example, answer in zip(batch, out["answer"].numpy()):
            answers[example.qas_id] = answer.decode("utf-8")
    return answers


def main(argv):
    del argv
    for flag in ("run_dir", "saved_model"):
        if not getattr(FLAGS, flag):
            raise InvalidFlagError(f"--{flag} is required")
    input_paths.check_exists("saved_model", FLAGS.saved_model)
    for name in ("finetune.json", "predictions.json", "model.keras"):
        if not os.path.exists(os.path.join(FLAGS.run_dir, name)):
            raise InvalidFlagError(f"--run_dir={FLAGS.run_dir} has no {name} (a finished run?)")
    cli.load_tensorflow()
    from albert_tf import files
    from albert_tf.finetune.task import task_from_description

    info = files.read_json(os.path.join(FLAGS.run_dir, "finetune.json"))
    if info["task"].get("kind") != "squad":
        raise InvalidFlagError(f"--run_dir={FLAGS.run_dir} is a {info['task'].get('kind')} run")
    task = task_from_description(info["task"], FLAGS.run_dir)
    task.load(["dev"])
    examples = list(task.examples["dev"])
    written = files.read_json(os.path.join(FLAGS.run_dir, "predictions.json"))
    variants = {
        "predictions.json": written,
        "served": _served(FLAGS.saved_model, examples, FLAGS.batch_size),
        "python_float32": _python_float32(FLAGS.run_dir, task),
    }
    ids = [e.qas_id for e in examples]
    pairs = [("served", "predictions.json"), ("served", "python_float32")]
    pairs.append(("predictions.json", "python_float32"))
    result = {"questions": len(ids), "precision": info["params"].get("precision")}
    for a, b in pairs:
        result[f"{a} == {b}"] = sum(variants[a][i] == variants[b][i] for i in ids)
    differing = [i for i in ids if variants["served"][i] != variants["python_float32"][i]]
    result["served != python_float32"] = [
        {"id": i, **{name: answers[i] for name, answers in variants.items()}}
        for i in differing[: FLAGS.show]
    ]
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    cli.run(main)
