"""Exports a fine-tuned model to LiteRT (.tflite) files that take raw text, and measures them.

    python scripts/export_litert.py --model_dir=out/mrpc --output_dir=out/mrpc/litert \
        --variants=float32,int8_dynamic

--model_dir is the --output_dir of run_classifier.py, run_token_classifier.py or run_squad.py
(model.keras + finetune.json). For each variant it writes OUTPUT_DIR/model_<variant>.tflite and
prints a table (file size, size vs float32, top-1 agreement and max probability difference
against the SavedModel's float32 model on the dev texts, accuracy; SQuAD: the rate of answers
equal to the SavedModel QA export's, and exact match and F1 against the gold answers; whether
the agreement reaches --min_agreement, with a WARNING for a variant that does not);
OUTPUT_DIR/litert_report.json holds the same numbers. The task's train and dev files are read
again (train texts calibrate the "int8" variant). A tagger splits raw text into words by the
convention its run recorded (--word_split overrides it) and its report compares its tags with
the run's dev predictions (dev_predictions.txt): word agreement and entity F1. See
docs/litert.md.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli, input_paths  # noqa: E402
from albert_tf.data.word_convention import CHOICES as WORD_SPLITS  # noqa: E402

FLAGS = flags.FLAGS

VARIANTS = ("float32", "float16", "int8_dynamic", "int8")  # litert.VARIANTS
DEFAULT_VARIANTS = ("float32", "float16", "int8_dynamic")  # litert.DEFAULT_VARIANTS
flags.DEFINE_string("model_dir", None, "Fine-tuning output dir (model.keras, finetune.json).")
flags.DEFINE_string(
    "output_dir", None, "Directory for model_<variant>.tflite and litert_report.json."
)
flags.DEFINE_list(
    "variants",
    list(DEFAULT_VARIANTS),
    f"Variants to write, comma-separated, among {','.join(VARIANTS)} (full-integer int8 is not "
    "a default: it agrees with the SavedModel below --min_agreement on the models measured).",
)
flags.DEFINE_float(
    "min_agreement",
    0.99,  # litert.MIN_AGREEMENT
    "A variant that agrees with the reference (top-1; SQuAD: the answer) on less than this "
    "fraction of the dev texts gets a WARNING and passes=false in the report.",
    lower_bound=0.0,
    upper_bound=1.0,
)
flags.DEFINE_integer("max_seq_length", None, "Fixed packed length (default: the training one).")
flags.DEFINE_integer("num_representative", 100, "Train texts that calibrate the int8 variant.")
flags.DEFINE_integer("max_eval_examples", 1000, "Dev texts to compare on (0: all).")
flags.DEFINE_integer(
    "max_windows", 4, "SQuAD: doc-stride windows per question (longer contexts are truncated)."
)

flags.DEFINE_enum(
    "word_split",
    "auto",
    list(WORD_SPLITS),
    "Tagger: the words raw text is cut into: whitespace, punctuation (whitespace and each "
    "punctuation character a word), or auto (what the run recorded).",
)

flags.mark_flag_as_required("model_dir")
flags.mark_flag_as_required("output_dir")


def _variants():
    names = [v.strip() for v in FLAGS.variants if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        cli.fail(f"--variants must be among {','.join(VARIANTS)}, got {','.join(names)}")
    return list(dict.fromkeys(names))


def _load():
    """The `LiteRTSpec` of --model_dir's task and model."""
    import tensorflow as tf

    from albert_tf import files
    from albert_tf.convert.checkpoint import load_head_model
    from albert_tf.finetune.runner import INFO_FILE, MODEL_FILE
    from albert_tf.finetune.task import task_from_description

    for name in (MODEL_FILE, INFO_FILE):
        if not tf.io.gfile.exists(os.path.join(FLAGS.model_dir, name)):
            cli.fail(
                f"--model_dir={FLAGS.model_dir} has no {name} (is it the --output_dir of a "
                "finished run_classifier.py, run_token_classifier.py or run_squad.py?)"
            )
    try:
        info = files.read_json(os.path.join(FLAGS.model_dir, INFO_FILE))
    except ValueError as e:  # not valid JSON: names the file and line
        cli.fail(str(e))
    task = task_from_description(info["task"], FLAGS.model_dir)
    # In float32, whatever it was trained in: the reference the variants are measured against.
    model = load_head_model(os.path.join(FLAGS.model_dir, MODEL_FILE))
    serving = task.serving_spec(model, FLAGS.max_seq_length)
    if serving.litert is None:
        cli.fail(
            f"--model_dir={FLAGS.model_dir} holds a {task.kind!r} model, which has no LiteRT "
            "export (classification, token_classification and squad have one)"
        )
    # The task reads its splits when the spec asks for them.
    return serving.litert_spec(
        max_eval_examples=FLAGS.max_eval_examples or None,
        max_windows=FLAGS.max_windows,
        **task.word_split_options(FLAGS.word_split),
    )


def main(argv):
    del argv  # cli.run refuses positional arguments
    variants = _variants()
    if FLAGS.max_seq_length is not None and not 3 <= FLAGS.max_seq_length <= 512:
        cli.fail(f"--max_seq_length must be in [3, 512], got {FLAGS.max_seq_length}")
    if FLAGS.num_representative < 1:
        cli.fail(f"--num_representative must be >= 1, got {FLAGS.num_representative}")
    if FLAGS.max_eval_examples < 0:
        cli.fail(f"--max_eval_examples must be >= 0, got {FLAGS.max_eval_examples}")
    if FLAGS.max_windows < 1:
        cli.fail(f"--max_windows must be >= 1, got {FLAGS.max_windows}")
    input_paths.check_exists("model_dir", FLAGS.model_dir)
    cli.load_tensorflow()
    from albert_tf.export import litert, litert_quiet

    with litert_quiet.quiet():  # making the spec composes the tokenizer (C++ INFO lines)
        spec = _load()
        report = litert.build(
            spec,
            FLAGS.output_dir,
            variants,
            num_representative=FLAGS.num_representative,
            min_agreement=FLAGS.min_agreement,
        )
    print(spec.format_report(report))
    print(f"report: {os.path.join(FLAGS.output_dir, 'litert_report.json')}")


if __name__ == "__main__":
    cli.run(main)
