"""Creates ALBERT pretraining TFRecords (SOP or NSP, n-gram whole-word masking) from raw text.

The original tool's flags keep their names and defaults, so existing command lines work:

  python scripts/create_pretraining_data.py --input_file=corpus/*.txt \
      --output_file=data/train.tfrecord --spm_model_file=30k-clean.model \
      --max_seq_length=512 --dupe_factor=40

New: --num_workers, --num_output_shards (with --output_file as a prefix), --input_format,
--check_input_format, --tfds_name/--tfds_data_dir/--tfds_split/--tfds_feature, --strict,
--no_masking (for albert_tf.data.pipeline.dynamic_masking_dataset), --document_window,
--shuffle_buffer_size.
--input_file=builtin:docstrings needs no download. A summary JSON is written next to the output.

--runner=DirectRunner|DataflowRunner|FlinkRunner|SparkRunner runs the same work as an Apache Beam
pipeline (pip install 'albert_tf[beam]'); Beam's own options go in one string, e.g.
--beam_options="--project=p --region=r --temp_location=gs://b/tmp". See docs/data.md.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli, input_paths  # noqa: E402

FLAGS = flags.FLAGS

# The original tool's flags.
flags.DEFINE_string(
    "input_file",
    None,
    "Corpus: comma-separated files/globs/directories, 'tfds:NAME' or "
    "'builtin:docstrings'. Format: see --input_format.",
)
flags.DEFINE_string(
    "output_file",
    None,
    "Comma-separated TFRecord files (written round-robin), or a prefix "
    "with --num_output_shards > 1.",
)
flags.DEFINE_string(
    "vocab_file",
    None,
    "Accepted for compatibility with the original command lines; "
    "unused (the vocabulary is the SentencePiece model's).",
)
flags.DEFINE_string(
    "spm_model_file", None, "SentencePiece model (ALBERT ids: <pad>=0 <unk>=1 [CLS] [SEP] [MASK])."
)
flags.DEFINE_string(
    "input_file_mode", "r", "Accepted for compatibility; files are always read as UTF-8 bytes."
)
flags.DEFINE_bool("do_lower_case", True, "Lowercase the text (inside ALBERT's preprocess_text).")
flags.DEFINE_bool("do_whole_word_mask", True, "Mask all pieces of a word together.")
flags.DEFINE_bool(
    "do_permutation",
    False,
    "The original's permuted-span objective: not supported (must stay False).",
)
flags.DEFINE_bool(
    "favor_shorter_ngram",
    True,
    "n-gram length n drawn with p(n) proportional to 1/n (else reversed).",
)
flags.DEFINE_bool(
    "random_next_sentence",
    False,
    "BERT NSP (random-document negatives) instead of SOP (swapped order).",
)
flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length, [CLS] and [SEP]s included.")
flags.DEFINE_integer("ngram", 3, "Maximum n-gram length, in words.")
flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "Maximum number of masked positions per sequence."
)
flags.DEFINE_integer(
    "random_seed", 12345, "Seed of every random choice (output is byte-identical for a seed)."
)
flags.DEFINE_integer(
    "dupe_factor", 40, "Passes over the corpus, each with different segments and masks."
)
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens to mask.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length for a document.")
# New flags.
flags.DEFINE_enum(
    "input_format",
    "sentences",
    ["sentences", "lines"],
    "File format: 'sentences' (one sentence "
    "per line, blank line between documents) or 'lines' (one document per line).",
)
flags.DEFINE_bool(
    "check_input_format",
    True,
    "With --input_format=sentences, refuse a file whose first 64 KiB look like one document per "
    "line (see docs/data.md); --nocheck_input_format reads it as it is.",
)
flags.DEFINE_string("tfds_name", None, "Read this prepared TFDS dataset instead of --input_file.")
flags.DEFINE_string("tfds_data_dir", None, "TFDS data directory.")
flags.DEFINE_string("tfds_split", "train", "TFDS split.")
flags.DEFINE_string("tfds_feature", "text", "TFDS text feature.")
flags.DEFINE_bool(
    "strict",
    False,
    "Fail on a line that is not valid UTF-8 (default: skip it, count it, log file:line).",
)
flags.DEFINE_integer("num_workers", 1, "Worker processes (output does not depend on it).")
flags.DEFINE_integer(
    "num_output_shards", 1, "With > 1, --output_file is a prefix: PREFIX-0000i-of-0000N.tfrecord."
)
flags.DEFINE_bool(
    "no_masking",
    False,
    "Write unmasked records (for on-the-fly masking with "
    "albert_tf.data.pipeline.dynamic_masking_dataset); use with --dupe_factor=1.",
)
flags.DEFINE_integer(
    "document_window",
    1000,
    "Documents per work unit; random-document negatives are drawn "
    "from the same window (the original drew from the whole corpus).",
)
flags.DEFINE_enum(
    "runner",
    None,
    ["DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner"],
    "Run as an Apache Beam pipeline on this runner (default: local processes).",
)
flags.DEFINE_string(
    "beam_options",
    "",
    "With --runner: Beam's pipeline options, one "
    'shell-quoted string, e.g. "--project=p --region=r --temp_location=gs://b/t".',
)
flags.DEFINE_integer(
    "shuffle_buffer_size",
    10000,
    "Instances shuffled within a buffer of this size "
    "(the original shuffled all instances in memory).",
)


def _check(condition, flag, message):
    if not condition:
        cli.fail(f"--{flag}: {message}")


def main(argv):
    del argv  # cli.run refuses positional arguments
    _check(
        bool(FLAGS.input_file) != bool(FLAGS.tfds_name),
        "input_file",
        "give exactly one of --input_file and --tfds_name",
    )
    _check(FLAGS.output_file, "output_file", "is required")
    _check(
        FLAGS.spm_model_file,
        "spm_model_file",
        "is required (WordPiece vocab files are not supported)",
    )
    _check(
        not FLAGS.do_permutation, "do_permutation", "the permuted-span objective is not supported"
    )
    _check(FLAGS.num_workers >= 1, "num_workers", f"must be >= 1, got {FLAGS.num_workers}")
    _check(not FLAGS.beam_options or FLAGS.runner, "beam_options", "needs --runner")
    _check(
        not FLAGS.runner or FLAGS.num_workers == 1,
        "num_workers",
        "with --runner the Beam "
        "runner's workers do the work: set them in --beam_options (e.g. --direct_num_workers=2)",
    )
    # The local input paths, before anything loads TensorFlow (albert_tf/cli.py).
    input_paths.check_matches("input_file", FLAGS.input_file or "", corpus=True)
    input_paths.check_exists("spm_model_file", FLAGS.spm_model_file)
    from albert_tf.data import instances, masking, pretraining

    if FLAGS.no_masking and FLAGS.dupe_factor > 1:
        logging.warning(
            "--no_masking with --dupe_factor=%d: the copies differ only in their segments; "
            "dynamic masking already gives fresh masks every epoch",
            FLAGS.dupe_factor,
        )
    if FLAGS.input_file_mode != "r":
        logging.info(
            "--input_file_mode=%s is ignored: files are read as bytes and decoded as UTF-8",
            FLAGS.input_file_mode,
        )
    # Settings and input errors raise ValueError naming the flag or file (see cli.run below).
    masking_config = (
        None
        if FLAGS.no_masking
        else masking.MaskingConfig(
            FLAGS.masked_lm_prob,
            FLAGS.max_predictions_per_seq,
            FLAGS.ngram,
            FLAGS.favor_shorter_ngram,
            FLAGS.do_whole_word_mask,
        )
    )
    config = pretraining.CreationConfig(
        instance=instances.InstanceConfig(
            FLAGS.max_seq_length, FLAGS.short_seq_prob, FLAGS.random_next_sentence, masking_config
        ),
        dupe_factor=FLAGS.dupe_factor,
        random_seed=FLAGS.random_seed,
        document_window=FLAGS.document_window,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
    )
    spec = FLAGS.input_file or f"tfds:{FLAGS.tfds_name}"
    common = dict(
        lower_case=FLAGS.do_lower_case,
        config=config,
        input_format=FLAGS.input_format,
        num_output_shards=FLAGS.num_output_shards,
        strict=FLAGS.strict,
        check_input_format=FLAGS.check_input_format,
    )
    if FLAGS.runner:
        from albert_tf.data import beam_pipeline  # imports apache_beam

        beam_pipeline.create_pretraining_data(
            spec,
            FLAGS.output_file,
            FLAGS.spm_model_file,
            runner=FLAGS.runner,
            beam_options=FLAGS.beam_options,
            **common,
        )
        return
    pretraining.create_pretraining_data(
        spec,
        FLAGS.output_file,
        FLAGS.spm_model_file,
        num_workers=FLAGS.num_workers,
        tfds_data_dir=FLAGS.tfds_data_dir,
        tfds_split=FLAGS.tfds_split,
        tfds_feature=FLAGS.tfds_feature,
        **common,
    )


if __name__ == "__main__":
    cli.run(main, expected=(ValueError,))
