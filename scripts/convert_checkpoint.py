"""Converts ALBERT checkpoints between the original TF1, Hugging Face, keras-hub and albert_tf
formats.

The original release (model.ckpt-best + albert_config.json + 30k-clean.model) to albert_tf:

    python scripts/convert_checkpoint.py --source_format=original \\
        --input=albert_base/model.ckpt-best --config_file=albert_base/albert_config.json \\
        --spm_model_file=albert_base/30k-clean.model --output_dir=albert_base_tf2

A Hugging Face directory (config.json + model.safetensors) to albert_tf, and back:

    python scripts/convert_checkpoint.py --source_format=huggingface --input=albert-base-v2 \\
        --output_dir=albert_base_v2
    python scripts/convert_checkpoint.py --source_format=albert_tf --input=albert_base_v2 \\
        --target_format=huggingface --output_dir=albert_base_v2_hf

A fine-tuned Hugging Face AlbertForSequenceClassification or AlbertForTokenClassification
directory becomes an albert_tf head directory (model.keras, an AlbertClassifier or
AlbertTokenClassifier, beside its backbone directory), and back:

    python scripts/convert_checkpoint.py --source_format=huggingface --input=albert-mnli \
        --output_dir=albert_mnli
    python scripts/convert_checkpoint.py --source_format=albert_tf --input=albert_mnli \
        --target_format=huggingface --output_dir=albert_mnli_hf

A keras-hub preset (what `save_to_preset` wrote for an AlbertBackbone, AlbertMaskedLM or
AlbertTextClassifier) to albert_tf, and an albert_tf model (a pretrainer, or a fine-tuned
AlbertClassifier) to a preset that keras_hub's `from_preset` loads:

    python scripts/convert_checkpoint.py --source_format=keras_hub --input=albert_preset \
        --output_dir=albert_from_keras_hub
    python scripts/convert_checkpoint.py --source_format=albert_tf --input=albert_base_v2 \
        --target_format=keras_hub --output_dir=albert_base_v2_keras_hub

A released model, Hugging Face repository, address or TF Hub handle by name (fetched, checked,
converted and cached as `albert_tf.sources` describes; --source_format is then not needed):

    python scripts/convert_checkpoint.py --input=albert_base_v2 --target_format=huggingface \
        --output_dir=albert_base_v2_hf

`albert_tf.load(output_dir)` reads an albert_tf output directory;
`keras.saving.load_model(output_dir + "/model.keras")` a fine-tuned one. Errors are one line on
stderr with exit code 1.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli, input_paths, sources  # noqa: E402
from albert_tf.convert.checkpoint import (  # noqa: E402
    SOURCE_FORMATS,
    TARGET_FORMATS,
    VOCABULARY_FORMATS,
)

FLAGS = flags.FLAGS

flags.DEFINE_enum(
    "source_format",
    None,
    list(SOURCE_FORMATS),
    "original: a TF1 checkpoint prefix (or its directory) + albert_config.json; "
    "huggingface: a directory with config.json + model.safetensors; keras_hub: a keras-hub "
    "preset directory (config.json + model.weights.h5, save_to_preset); albert_tf: a "
    "directory written by albert_tf.save, or one with a fine-tuned model.keras. Not needed "
    "for a named --input (detected).",
)
flags.DEFINE_string(
    "input",
    None,
    "The checkpoint prefix or directory to convert, or a model by name: albert_base_v2 (a "
    "released model), hf://<repo_id>[@revision], an https:// or gs:// address, a TF Hub handle.",
)
flags.DEFINE_string(
    "config_file",
    None,
    "The original albert_config.json (source_format="
    "original; default: albert_config.json beside the checkpoint).",
)
flags.DEFINE_enum(
    "target_format",
    "albert_tf",
    list(TARGET_FORMATS),
    "albert_tf (for albert_tf.load; fine-tuned heads add model.keras), "
    "huggingface (AlbertForPreTraining layout; fine-tuned heads as "
    "AlbertForSequenceClassification / AlbertForTokenClassification), original "
    "(a TF1 checkpoint + albert_config.json; pretraining models only) or keras_hub (a "
    "keras-hub preset: pretraining models and AlbertClassifier, with the tokenizer).",
)
flags.DEFINE_string("output_dir", None, "Where to write the converted model.")
flags.DEFINE_string(
    "spm_model_file",
    None,
    "SentencePiece model stored with the converted model (target_format=albert_tf or "
    "keras_hub; default: the input's own, for albert_tf and keras_hub inputs).",
)
flags.DEFINE_list(
    "ignore_variables",
    [],
    "Regexes of checkpoint variables to skip on purpose "
    "(e.g. a fine-tuned classifier); anything else unused is an error.",
)

flags.mark_flags_as_required(["input", "output_dir"])


@flags.multi_flags_validator(
    ["source_format", "target_format"],
    message="--source_format and --target_format are the same: nothing to convert",
)
def _formats_differ(values):
    return values["source_format"] != values["target_format"]


@flags.multi_flags_validator(
    ["source_format", "config_file"],
    message="--config_file applies to --source_format=original only "
    "(other formats keep config.json in their directory)",
)
def _config_only_for_original(values):
    return values["config_file"] is None or values["source_format"] == "original"


@flags.multi_flags_validator(
    ["target_format", "spm_model_file"],
    message="--spm_model_file is stored with --target_format=albert_tf or keras_hub only",
)
def _spm_only_with_a_tokenizer(values):
    return values["spm_model_file"] is None or values["target_format"] in VOCABULARY_FORMATS


@flags.multi_flags_validator(
    ["source_format", "ignore_variables"],
    message="--ignore_variables applies to --source_format=original, huggingface or keras_hub only",
)
def _ignore_only_for_foreign(values):
    return not values["ignore_variables"] or values["source_format"] != "albert_tf"


def _fetched(value, source_format):
    """Whether --input is a model to fetch by name (a gs:// path with --source_format is read
    in place, as a local one)."""
    return sources.is_named(value) and not (value.startswith("gs://") and source_format)


def main(argv):
    del argv  # cli.run refuses positional arguments
    source_format, path = FLAGS.source_format, FLAGS.input
    fetched = _fetched(path, source_format)
    if fetched:
        sources.check_spec("input", path)
    elif source_format is None:
        cli.fail(
            f"--source_format is required for --input={path} ({', '.join(SOURCE_FORMATS)}); "
            "models by name need none"
        )
    else:  # an original checkpoint may be a prefix, or its directory
        sources.check_spec("input", path, checkpoint=source_format == "original")
    input_paths.check_fields(FLAGS, ("config_file", "spm_model_file"))
    cli.load_tensorflow()
    from albert_tf.convert.checkpoint import convert_checkpoint

    if fetched:
        if source_format is not None:
            logging.info("--source_format=%s: %s is detected on fetching", source_format, path)
        sources.save_as(path, FLAGS.output_dir, FLAGS.target_format, FLAGS.spm_model_file)
        return
    convert_checkpoint(
        source_format,
        path,
        FLAGS.output_dir,
        target_format=FLAGS.target_format,
        config_file=FLAGS.config_file,
        spm_model=FLAGS.spm_model_file,
        ignore_variables=FLAGS.ignore_variables,
    )


if __name__ == "__main__":
    # The converters raise ValueError (ConversionError) and TypeError for checkpoints that cannot
    # be converted; each message names the file, variable or format.
    cli.run(main, expected=(ValueError, TypeError))
