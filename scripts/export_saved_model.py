"""Exports a SavedModel for TF Serving that takes raw text (EXPORT_DIR/<version>/).

A fine-tuned classifier (the --output_dir of run_classifier.py):

    python scripts/export_saved_model.py --model_dir=out/mrpc --export_dir=/models/mrpc

A pretrained backbone for embeddings (a directory written by albert_tf.save):

    python scripts/export_saved_model.py --pretrained_dir=pretrained/ --export_dir=/models/albert

Run it in its own process (not inside a TPU job): the model is rebuilt under float32.
"""
import json
import os

from absl import app, flags, logging

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "run_classifier.py output dir (classifier.keras, "
                    "finetune.json).")
flags.DEFINE_string("pretrained_dir", None, "Pretrained model dir: export the backbone (encode).")
flags.DEFINE_string("export_dir", None, "Base directory; versions are integer subdirectories.")
flags.DEFINE_integer("version", None, "Version number (default: highest existing + 1).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (backbone export; default: the "
                    "pretrained dir's spm.model).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase (backbone export).")
flags.DEFINE_integer("max_seq_length", None, "Serving sequence length (default: the training one; "
                     "128 for a backbone).")
flags.DEFINE_bool("pair", False, "Backbone export: encode takes text and text_pair.")
flags.DEFINE_bool("dynamic_padding", True, "Pad each request batch to its longest text.")
flags.DEFINE_enum("warmup", "auto", ["auto", "true", "false"], "Write TF Serving warmup requests.")

flags.mark_flag_as_required("export_dir")


def main(argv):
    del argv
    if bool(FLAGS.model_dir) == bool(FLAGS.pretrained_dir):
        raise app.UsageError("give exactly one of --model_dir and --pretrained_dir")
    if FLAGS.version is not None and FLAGS.version < 1:
        raise app.UsageError(f"--version must be >= 1, got {FLAGS.version}")
    if FLAGS.max_seq_length is not None and not 3 <= FLAGS.max_seq_length <= 512:
        raise app.UsageError(f"--max_seq_length must be in [3, 512], got {FLAGS.max_seq_length}")
    import keras
    import tensorflow as tf

    from albert_tf.export.saved_model import export_backbone, export_classifier
    from albert_tf.models import classifier  # noqa: F401  (registers AlbertClassifier for loading)
    from albert_tf.models import io
    from albert_tf.models.preprocessor import AlbertPreprocessor

    write_warmup = {"auto": "auto", "true": True, "false": False}[FLAGS.warmup]
    if FLAGS.model_dir:
        for name in ("classifier.keras", "finetune.json"):
            if not tf.io.gfile.exists(os.path.join(FLAGS.model_dir, name)):
                raise app.UsageError(f"--model_dir={FLAGS.model_dir} has no {name} (is it a "
                                     "run_classifier.py --output_dir?)")
        with tf.io.gfile.GFile(os.path.join(FLAGS.model_dir, "finetune.json")) as f:
            info = json.load(f)
        preprocessor = keras.saving.deserialize_keras_object(info["preprocessor"])
        if FLAGS.max_seq_length:
            preprocessor = preprocessor.with_padding(preprocessor.dynamic_padding,
                                                     FLAGS.max_seq_length)
        model = keras.saving.load_model(os.path.join(FLAGS.model_dir, "classifier.keras"),
                                        compile=False)
        path = export_classifier(model, preprocessor, FLAGS.export_dir, pair=info["pair"],
                                 version=FLAGS.version, dynamic_padding=FLAGS.dynamic_padding,
                                 write_warmup=write_warmup)
    else:
        spm = FLAGS.spm_model_file or io.spm_model_path(FLAGS.pretrained_dir)
        if spm is None:
            raise app.UsageError("--spm_model_file is required: the pretrained dir has no spm.model")
        preprocessor = AlbertPreprocessor(spm, lower_case=FLAGS.do_lower_case,
                                          seq_length=FLAGS.max_seq_length or 128)
        path = export_backbone(io.load_backbone(FLAGS.pretrained_dir), preprocessor,
                               FLAGS.export_dir, pair=FLAGS.pair, version=FLAGS.version,
                               dynamic_padding=FLAGS.dynamic_padding, write_warmup=write_warmup)
    logging.info("Exported %s", path)
    print(path)


if __name__ == "__main__":
    app.run(main)
