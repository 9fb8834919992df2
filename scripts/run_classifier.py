"""Fine-tunes ALBERT on a GLUE task or any labelled text file with keras.Model.fit.

The paper's recipes are in flags/glue_<task>.flags (Table 14):

    python scripts/run_classifier.py --flagfile=flags/glue_mrpc.flags \\
        --init_checkpoint=pretrained/ --data_dir=glue_data --output_dir=out/mrpc

Any CSV/TSV/JSONL file with named columns:

    python scripts/run_classifier.py --task_name=reviews --train_file=train.csv \\
        --dev_file=dev.csv --text_column=review --label_column=stars --init_checkpoint=pretrained/

Every --save_checkpoints_steps steps the dev set is scored with the task's metrics
(eval_results.json); the best weights by the task's main metric are kept, saved as
classifier.keras and, with --export_dir, exported for TF Serving.
"""
import json
import math
import os

from absl import app, flags, logging

FLAGS = flags.FLAGS

flags.DEFINE_string("task_name", None, "GLUE task (cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, "
                    "qnli, rte, wnli), 'docstring-source' (built in), or any name with "
                    "--train_file.")
flags.DEFINE_string("data_dir", None, "GLUE download root (holding CoLA/, MNLI/, ...).")
flags.DEFINE_bool("use_tfds", False, "Read GLUE from prepared TFDS glue/* instead of TSV files.")
flags.DEFINE_string("tfds_data_dir", None, "TFDS data directory (default ~/tensorflow_datasets).")
flags.DEFINE_string("train_file", None, "CSV/TSV/JSONL training file with named columns.")
flags.DEFINE_string("dev_file", None, "Evaluation file (same columns as --train_file).")
flags.DEFINE_string("test_file", None, "Unlabelled file to predict (text columns only).")
flags.DEFINE_string("text_column", "text", "Column of the first text (files).")
flags.DEFINE_string("text_pair_column", None, "Column of the second text (files, pair tasks).")
flags.DEFINE_string("label_column", "label", "Column of the label (files).")
flags.DEFINE_list("labels", None, "Label names in id order (files; default: sorted labels "
                  "found in --train_file).")
flags.DEFINE_bool("regression", False, "The label is a real number (files).")
flags.DEFINE_bool("skip_bad_lines", False, "Skip malformed lines (logged) instead of failing.")

flags.DEFINE_string("init_checkpoint", None, "Pretrained model directory (albert_tf.save).")
flags.DEFINE_string("preset", None, "Start from a randomly initialised preset instead "
                    "(for smoke tests).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (default: the model dir's).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase text (True for the released models).")
flags.DEFINE_integer("max_seq_length", 512, "Maximum tokens incl. [CLS]/[SEP].")
flags.DEFINE_enum("truncation", "round_robin", ["round_robin", "longest_first"],
                  "How pairs are truncated (round_robin = the original's _truncate_seq_pair).")
flags.DEFINE_bool("dynamic_padding", False, "Pad each batch to its longest example (multiple "
                  "of 8) instead of max_seq_length. Not on TPU.")

flags.DEFINE_bool("do_train", True, "Fine-tune.")
flags.DEFINE_bool("do_eval", True, "Score the dev set.")
flags.DEFINE_bool("do_predict", False, "Predict the test set (test_results.tsv).")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
flags.DEFINE_float("learning_rate", 2e-5, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 1000, "Training steps (Table 14 'Train steps').")
flags.DEFINE_integer("warmup_steps", None, "Linear warmup steps (default 10% of training).")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout on the pooled output.")
flags.DEFINE_float("albert_dropout", None, "Override the backbone's hidden and attention "
                   "dropout (Table 14 'ALBERT DR'); default: the config's.")
flags.DEFINE_float("weight_decay_rate", 0.01, "AdamW weight decay.")
flags.DEFINE_float("clip_norm", 1.0, "Global-norm gradient clipping.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Evaluate/checkpoint every N steps.")
flags.DEFINE_integer("steps_per_execution", 1, "Steps per tf.function call (tens-hundreds on TPU).")
flags.DEFINE_enum("strategy", "one_device", ["one_device", "mirrored", "tpu"],
                  "Distribution strategy (Keras fit does not support multi-worker).")
flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
flags.DEFINE_integer("logical_cpus", 0, "Mirror over this many logical CPUs (testing).")
flags.DEFINE_enum("precision", "float32", ["float32", "mixed_bfloat16"], "Compute dtype policy.")
flags.DEFINE_integer("seed", 12345, "Random seed.")
flags.DEFINE_string("output_dir", None, "Checkpoints, TensorBoard logs, eval_results.json.")
flags.DEFINE_string("export_dir", None, "Export the best model here for TF Serving "
                    "(EXPORT_DIR/<version>).")
flags.DEFINE_integer("verbose", 1, "Keras progress output: 0 silent, 1 progress bar, 2 lines.")

flags.mark_flag_as_required("task_name")
flags.mark_flag_as_required("output_dir")


def _validate():
    if not (FLAGS.init_checkpoint or FLAGS.preset):
        raise app.UsageError("give --init_checkpoint (a pretrained model dir) or --preset")
    for name in ("train_batch_size", "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
                 "steps_per_execution"):
        if getattr(FLAGS, name) < 1:
            raise app.UsageError(f"--{name} must be >= 1, got {getattr(FLAGS, name)}")
    if FLAGS.learning_rate <= 0:
        raise app.UsageError(f"--learning_rate must be > 0, got {FLAGS.learning_rate}")
    if FLAGS.max_seq_length < 3 or FLAGS.max_seq_length > 512:
        raise app.UsageError(f"--max_seq_length must be in [3, 512], got {FLAGS.max_seq_length}")
    if FLAGS.warmup_steps is not None and not 0 <= FLAGS.warmup_steps < FLAGS.num_train_steps:
        raise app.UsageError(f"--warmup_steps must be in [0, --num_train_steps), got "
                             f"{FLAGS.warmup_steps}")
    if FLAGS.strategy == "mirrored" and FLAGS.steps_per_execution > 1:
        raise app.UsageError("--steps_per_execution > 1 fails under --strategy=mirrored with Keras "
                             "3.15 (placeholder error in the multi-step loop); use 1")
    if FLAGS.strategy == "tpu" and FLAGS.dynamic_padding:
        raise app.UsageError("--dynamic_padding needs static shapes off: not with --strategy=tpu")
    if not FLAGS.train_file and not FLAGS.data_dir and not FLAGS.use_tfds and (
            FLAGS.task_name.lower() not in ("docstring-source", "docstring_source")):
        raise app.UsageError("give --data_dir (GLUE TSVs), --use_tfds, or --train_file")


def main(argv):
    del argv
    _validate()
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.data import tasks
    from albert_tf.export.saved_model import export_classifier
    from albert_tf.models import io
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.files import write_json
    from albert_tf.models.metrics import TaskEvaluator, majority_baseline
    from albert_tf.models.preprocessor import AlbertPreprocessor
    from albert_tf.train.strategy import create_strategy, is_tpu
    from albert_tf.train.task import set_precision

    import keras

    keras.utils.set_random_seed(FLAGS.seed)
    strategy = create_strategy(FLAGS.strategy, tpu=FLAGS.tpu, logical_cpus=FLAGS.logical_cpus)
    tf.io.gfile.makedirs(FLAGS.output_dir)

    # ---- data
    task, splits = tasks.load_task_splits(
        FLAGS.task_name, data_dir=FLAGS.data_dir, use_tfds=FLAGS.use_tfds,
        tfds_data_dir=FLAGS.tfds_data_dir, train_file=FLAGS.train_file,
        dev_file=FLAGS.dev_file, test_file=FLAGS.test_file, text_column=FLAGS.text_column,
        text_pair_column=FLAGS.text_pair_column, label_column=FLAGS.label_column,
        labels=FLAGS.labels, regression=FLAGS.regression, skip_bad_lines=FLAGS.skip_bad_lines,
        wanted=[s for s, on in (("train", FLAGS.do_train), ("dev", FLAGS.do_eval),
                                ("test", FLAGS.do_predict)) if on], seed=FLAGS.seed)
    spm = FLAGS.spm_model_file or (io.spm_model_path(FLAGS.init_checkpoint)
                                   if FLAGS.init_checkpoint else None)
    if spm is None:
        raise app.UsageError("--spm_model_file is required: the model directory has no spm.model")
    preprocessor = AlbertPreprocessor(spm, lower_case=FLAGS.do_lower_case,
                                      seq_length=FLAGS.max_seq_length, truncation=FLAGS.truncation,
                                      dynamic_padding=FLAGS.dynamic_padding)
    for split, examples in splits.items():
        truncated = tasks.count_truncated(examples, preprocessor)
        logging.info("%s: %d examples from %s; %d (%.1f%%) longer than max_seq_length=%d are "
                     "truncated", split, len(examples), examples.source, truncated,
                     100.0 * truncated / len(examples), FLAGS.max_seq_length)

    # ---- model
    set_precision(FLAGS.precision)
    with strategy.scope():
        if FLAGS.init_checkpoint:
            model = AlbertClassifier.from_pretrained(
                FLAGS.init_checkpoint, num_classes=task.num_classes,
                dropout=FLAGS.classifier_dropout, labels=task.labels,
                hidden_dropout_prob=FLAGS.albert_dropout,
                attention_probs_dropout_prob=FLAGS.albert_dropout)
        else:
            config = AlbertConfig.from_preset(FLAGS.preset, vocab_size=preprocessor.vocab_size)
            model = AlbertClassifier(AlbertModel(config), num_classes=task.num_classes,
                                     dropout=FLAGS.classifier_dropout, labels=task.labels)
        model.compile(learning_rate=FLAGS.learning_rate, num_train_steps=FLAGS.num_train_steps,
                      warmup_steps=FLAGS.warmup_steps, weight_decay_rate=FLAGS.weight_decay_rate,
                      global_clipnorm=FLAGS.clip_norm,
                      steps_per_execution=FLAGS.steps_per_execution)

    tpu = is_tpu(strategy)
    evaluator = None
    if "dev" in splits:
        dev = tasks.make_dataset(splits["dev"], preprocessor, FLAGS.eval_batch_size,
                                 pad_to_batch=tpu)
        baseline = {}
        if "train" in splits and not task.is_regression:
            baseline["majority_baseline"] = majority_baseline(splits["train"].labels,
                                                              splits["dev"].labels)
            logging.info("dev majority-class baseline accuracy: %.4f",
                         baseline["majority_baseline"])
        evaluator = TaskEvaluator(dev, task.metrics, FLAGS.output_dir,
                                  regression=task.is_regression,
                                  steps_per_epoch=FLAGS.save_checkpoints_steps,
                                  num_examples=len(splits["dev"]), labels=splits["dev"].labels,
                                  baseline=baseline)
    if FLAGS.do_train:
        train = tasks.make_dataset(splits["train"], preprocessor, FLAGS.train_batch_size,
                                   training=True, seed=FLAGS.seed)
        epochs = math.ceil(FLAGS.num_train_steps / FLAGS.save_checkpoints_steps)
        callbacks = [
            keras.callbacks.BackupAndRestore(os.path.join(FLAGS.output_dir, "backup")),
            keras.callbacks.TensorBoard(os.path.join(FLAGS.output_dir, "logs")),
        ] + ([evaluator] if evaluator else [])
        logging.info("Training %d steps (%d evaluations), batch %d, on %d replica(s)",
                     FLAGS.num_train_steps, epochs, FLAGS.train_batch_size,
                     strategy.num_replicas_in_sync)
        model.fit(train, epochs=epochs, steps_per_epoch=FLAGS.save_checkpoints_steps,
                  callbacks=callbacks, verbose=FLAGS.verbose)
        if evaluator and evaluator.best_weights_path and tf.io.gfile.exists(
                evaluator.best_weights_path):
            model.load_weights(evaluator.best_weights_path)
            logging.info("Restored the best weights: %s", evaluator.best)
    elif evaluator:
        evaluator.set_model(model)
        evaluator.record(step=0)

    model.save(os.path.join(FLAGS.output_dir, "classifier.keras"))
    write_json(os.path.join(FLAGS.output_dir, "finetune.json"), {
        "task": task.name, "pair": task.is_pair, "labels": list(task.labels or []) or None,
        "regression": task.is_regression,
        "preprocessor": keras.saving.serialize_keras_object(preprocessor)})

    if "test" in splits:
        tasks.write_predictions(model, splits["test"], preprocessor, task, FLAGS.output_dir,
                                FLAGS.eval_batch_size)
    if FLAGS.export_dir:
        path = export_classifier(model, preprocessor, FLAGS.export_dir, pair=task.is_pair)
        logging.info("SavedModel for TF Serving: %s", path)
    if evaluator and evaluator.best:
        print(json.dumps({"best": evaluator.best}))


if __name__ == "__main__":
    app.run(main)
