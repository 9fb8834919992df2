"""Exports a SavedModel for TF Serving that takes raw text (EXPORT_DIR/<version>/).

A fine-tuned model (the --output_dir of any run_*.py fine-tuning script):

    python scripts/export_saved_model.py --model_dir=out/mrpc --export_dir=/models/mrpc

A pretrained backbone for embeddings (a directory written by albert_tf.save):

    python scripts/export_saved_model.py --pretrained_dir=pretrained/ --export_dir=/models/albert

or a released model by name, fetched and cached (`albert_tf.sources`):

    python scripts/export_saved_model.py --pretrained_dir=albert_base_v2 --export_dir=/models/albert

Run it in its own process (not inside a TPU job): the model is rebuilt under float32, or with
--compute_dtype=bfloat16 in bfloat16 (bfloat16 weights and matmuls, float32 outputs; faster on
CPUs with AVX512-BF16 or AMX; classifiers, token classifiers, SQuAD models and backbones). A
bfloat16 export of a classifier or a backbone is compared with float32 on held-out texts
(--agreement_file, or numpy docstring paragraphs): top-1 agreement and max probability
difference (backbone: pooled-output cosine), printed as one JSON line before the export path
and stored in assets.extra/albert_tf.json.

    python scripts/export_saved_model.py --model_dir=out/mrpc --export_dir=/models/mrpc_bf16 \
        --compute_dtype=bfloat16

A fine-tuned tagger (run_token_classifier.py) serves raw text split into words by the
convention its run recorded (whitespace, or whitespace and each punctuation character a word:
albert_tf.data.word_convention); --word_split overrides it (a WARNING when the training data
says otherwise). Its export is compared with the run's dev predictions (dev_predictions.txt and
the dev file named in finetune.json, when present): word agreement and entity F1 of the served
tags, printed as one JSON line and stored in assets.extra/albert_tf.json.

    python scripts/export_saved_model.py --model_dir=out/ner --export_dir=/models/ner \
        --word_split=whitespace

TF Hub reusable SavedModels of a pretrained model (--format=tfhub): EXPORT_DIR/encoder and
EXPORT_DIR/preprocessor, the TF Hub text API of albert_en_base/3 + albert_en_preprocess/3
(`albert_tf.export.tfhub`; not versioned; the encoder has `.mlm` when the directory holds the
pretraining heads):

    python scripts/export_saved_model.py --pretrained_dir=pretrained/ --format=tfhub \
        --export_dir=/models/albert_hub
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli, input_paths, sources  # noqa: E402
from albert_tf.data.word_convention import CHOICES as WORD_SPLITS  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_enum(
    "format",
    "saved_model",
    ["saved_model", "tfhub"],
    "saved_model: one SavedModel for TF Serving taking raw text (EXPORT_DIR/<version>); tfhub: "
    "TF Hub's encoder + preprocessor pair of a pretrained model (EXPORT_DIR/{encoder,"
    "preprocessor}).",
)
flags.DEFINE_string("model_dir", None, "Fine-tuning output dir (model.keras, finetune.json).")
flags.DEFINE_string(
    "pretrained_dir",
    None,
    "Pretrained model dir, or a model by name (albert_base_v2, hf://<repo_id>, an https:// or "
    "gs:// address, a TF Hub handle): export the backbone (encode).",
)
flags.DEFINE_string(
    "export_dir",
    None,
    "Base directory; versions are integer subdirectories (--format=tfhub: the directory to "
    "create, holding encoder/ and preprocessor/).",
)
flags.DEFINE_integer("version", None, "Version number (default: highest existing + 1).")
flags.DEFINE_string(
    "spm_model_file",
    None,
    "SentencePiece model (backbone export; default: the pretrained dir's spm.model).",
)
flags.DEFINE_bool(
    "do_lower_case",
    None,
    "Lowercase (backbone export; default: what the model records in text.json, else true).",
)
flags.DEFINE_integer(
    "max_seq_length",
    None,
    "Serving sequence length (default: the training one; 128 for a backbone and for "
    "--format=tfhub's preprocessor).",
)
flags.DEFINE_bool("pair", False, "Backbone export: encode takes text and text_pair.")
flags.DEFINE_bool(
    "dynamic_padding",
    True,
    "Backbone export: pad each request batch to its longest text (fine-tuned models always do).",
)
flags.DEFINE_enum("warmup", "auto", ["auto", "true", "false"], "Write TF Serving warmup requests.")
flags.DEFINE_enum(
    "compute_dtype",
    "float32",
    ["float32", "bfloat16"],
    "Serving compute dtype: bfloat16 = bfloat16 weights and matmuls, float32 outputs.",
)
flags.DEFINE_string(
    "agreement_file",
    None,
    "bfloat16 export: held-out texts to compare with float32, one per line (pair tasks: "
    "text<TAB>text_pair). Default: numpy docstring paragraphs.",
)
flags.DEFINE_integer(
    "agreement_texts", 256, "bfloat16 export: how many held-out texts are compared (at most)."
)

flags.DEFINE_enum(
    "word_split",
    "auto",
    list(WORD_SPLITS),
    "Fine-tuned tagger: the words serving_default cuts raw text into: whitespace, punctuation "
    "(whitespace and each punctuation character a word), or auto (what the run recorded).",
)

flags.mark_flag_as_required("export_dir")


def _agreement_texts(pair):
    """Held-out texts for the bfloat16 vs float32 comparison (None for a float32 export)."""
    if FLAGS.compute_dtype == "float32":
        return None
    count = FLAGS.agreement_texts
    if FLAGS.agreement_file:
        import tensorflow as tf

        with tf.io.gfile.GFile(FLAGS.agreement_file) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        if pair:
            lines = [(line.split("\t", 1) + [""])[:2] for line in lines]
            return [tuple(p) for p in lines[:count]]
        return lines[:count]
    from albert_tf.data.corpora import iter_documents

    texts = []
    for document in iter_documents("builtin:docstrings", packages=("numpy",)):
        texts.append(" ".join(document[:3]))
        if len(texts) > count:
            break
    return list(zip(texts, texts[1:])) if pair else texts[:count]


def _export_finetuned(write_warmup):
    import tensorflow as tf

    from albert_tf import files
    from albert_tf.convert.checkpoint import load_head_model
    from albert_tf.finetune.runner import INFO_FILE, MODEL_FILE
    from albert_tf.finetune.task import task_from_description

    for name in (MODEL_FILE, INFO_FILE):
        if not tf.io.gfile.exists(os.path.join(FLAGS.model_dir, name)):
            cli.fail(
                f"--model_dir={FLAGS.model_dir} has no {name} (is it the --output_dir of a "
                "finished run_*.py fine-tuning script?)"
            )
    info = files.read_json(os.path.join(FLAGS.model_dir, INFO_FILE))
    task = task_from_description(info["task"], FLAGS.model_dir)
    # What the task's export accepts: FinetuneTask.export_compute_dtypes and
    # export_agreement_texts (classification, whose spec says whether its texts are pairs).
    if FLAGS.compute_dtype not in task.export_compute_dtypes:
        cli.fail(
            f"--compute_dtype={FLAGS.compute_dtype}: a {task.kind} export runs in float32 "
            "only (bfloat16: classification, regression, tagging and SQuAD tasks, backbones)"
        )
    options = dict(compute_dtype=FLAGS.compute_dtype)
    options.update(task.word_split_options(FLAGS.word_split))
    if task.export_agreement_texts:
        options["agreement_texts"] = _agreement_texts(task.spec.is_pair)
    model = load_head_model(os.path.join(FLAGS.model_dir, MODEL_FILE))  # float32
    return task.export(
        model,
        FLAGS.export_dir,
        version=FLAGS.version,
        max_seq_length=FLAGS.max_seq_length,
        write_warmup=write_warmup,
        **options,
    )


def _export_backbone(write_warmup):
    from albert_tf.export.saved_model import export_backbone
    from albert_tf.models import model_dir
    from albert_tf.models.preprocessor import AlbertPreprocessor

    directory = sources.model_directory(FLAGS.pretrained_dir)  # a name: fetched and cached
    if not (FLAGS.spm_model_file or model_dir.spm_model_path(directory)):
        cli.fail("--spm_model_file is required: the pretrained dir has no spm.model")
    lower_case = {} if FLAGS.do_lower_case is None else {"lower_case": FLAGS.do_lower_case}
    preprocessor = AlbertPreprocessor.from_pretrained(  # with the dir's text settings
        directory,
        FLAGS.spm_model_file,
        max_seq_length=FLAGS.max_seq_length or 128,
        **lower_case,
    )
    return export_backbone(
        model_dir.load_backbone(directory),
        preprocessor,
        FLAGS.export_dir,
        pair=FLAGS.pair,
        version=FLAGS.version,
        dynamic_padding=FLAGS.dynamic_padding,
        write_warmup=write_warmup,
        compute_dtype=FLAGS.compute_dtype,
        agreement_texts=_agreement_texts(FLAGS.pair),
    )


# Flags of the TF Serving export that a TF Hub export (--format=tfhub) has no use for.
SAVED_MODEL_ONLY = (
    "version",
    "pair",
    "dynamic_padding",
    "warmup",
    "compute_dtype",
    "agreement_file",
    "agreement_texts",
    "word_split",
)


def _check_tfhub_flags():
    if FLAGS.model_dir:
        cli.fail(
            "--format=tfhub exports a pretrained model (--pretrained_dir), not a fine-tuned "
            "--model_dir"
        )
    given = [f"--{name}" for name in SAVED_MODEL_ONLY if FLAGS[name].present]
    if given:
        cli.fail(f"--format=tfhub does not take {', '.join(given)} (TF Serving export flags)")


def _export_tfhub():
    from albert_tf.export import tfhub

    return tfhub.export_pretrained(
        FLAGS.pretrained_dir,
        FLAGS.export_dir,
        spm_model=FLAGS.spm_model_file,
        lower_case=FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None,
        seq_length=FLAGS.max_seq_length or tfhub.DEFAULT_SEQ_LENGTH,
    )


def main(argv):
    del argv  # cli.run refuses positional arguments
    if FLAGS.format == "tfhub":
        _check_tfhub_flags()
    if bool(FLAGS.model_dir) == bool(FLAGS.pretrained_dir):
        cli.fail("give exactly one of --model_dir and --pretrained_dir")
    if FLAGS.pretrained_dir and FLAGS.word_split != "auto":
        cli.fail("--word_split applies to a fine-tuned tagger (--model_dir)")
    if FLAGS.version is not None and FLAGS.version < 1:
        cli.fail(f"--version must be >= 1, got {FLAGS.version}")
    if FLAGS.max_seq_length is not None and not 3 <= FLAGS.max_seq_length <= 512:
        cli.fail(f"--max_seq_length must be in [3, 512], got {FLAGS.max_seq_length}")
    if FLAGS.agreement_texts < 1:
        cli.fail(f"--agreement_texts must be >= 1, got {FLAGS.agreement_texts}")
    input_paths.check_fields(FLAGS, ("model_dir", "spm_model_file", "agreement_file"))
    if FLAGS.pretrained_dir:  # before TensorFlow loads; a name is fetched after
        sources.check_spec("pretrained_dir", FLAGS.pretrained_dir)
    cli.load_tensorflow()
    if FLAGS.format == "tfhub":
        print(_export_tfhub())
        return
    write_warmup = {"auto": "auto", "true": True, "false": False}[FLAGS.warmup]
    path = _export_finetuned(write_warmup) if FLAGS.model_dir else _export_backbone(write_warmup)
    logging.info("Exported %s", path)
    from albert_tf import files

    description = files.read_json(os.path.join(path, "assets.extra", "albert_tf.json"))
    for key in ("agreement_with_float32", "agreement_with_dev_predictions"):
        if key in description:
            print(json.dumps({key: description[key]}))
    print(path)


if __name__ == "__main__":
    cli.run(main)
