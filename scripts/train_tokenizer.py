"""Trains an ALBERT SentencePiece vocabulary (<pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4).

Example:
  python scripts/train_tokenizer.py --input=builtin:docstrings --model_prefix=/tmp/docs8k \
      --vocab_size=8000
  python scripts/train_tokenizer.py --input='gs://bucket/wiki/*.txt' --model_prefix=gs://bucket/spm/30k-clean
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli, input_paths  # noqa: E402

flags.DEFINE_string(
    "input",
    None,
    "Corpus spec: file, glob, directory or comma list (local or gs://), "
    "'tfds:NAME' (prepared TFDS dataset) or 'builtin:docstrings'.",
)
flags.DEFINE_enum(
    "input_format",
    "sentences",
    ["sentences", "lines"],
    "File format: 'sentences' (one sentence per line, blank line between documents) or "
    "'lines' (one document per line).",
)
flags.DEFINE_string("model_prefix", None, "Output prefix; writes PREFIX.model and PREFIX.vocab.")
flags.DEFINE_integer(
    "vocab_size", 30000, "Number of pieces, special and user-defined symbols included."
)
flags.DEFINE_bool(
    "do_lower_case", True, "Lowercase the text (must match the tokenizer's lower_case)."
)
flags.DEFINE_integer(
    "input_sentence_size",
    10_000_000,
    "Sample at most this many sentences for training (0 = use all).",
)
flags.DEFINE_bool(
    "shuffle_input_sentence", True, "Sample sentences uniformly instead of taking the first ones."
)
flags.DEFINE_float(
    "character_coverage", 0.99995, "Fraction of characters covered by the vocabulary."
)
flags.DEFINE_enum(
    "model_type", "unigram", ["unigram", "bpe", "char", "word"], "SentencePiece model type."
)
flags.DEFINE_string(
    "user_defined_symbols",
    '(,),",-,.,\u2013,\u00a3,\u20ac',
    "Comma-separated pieces always kept whole (default: the original ALBERT recipe, "
    "as in its spm_train command). Pass an empty value for none.",
)
flags.DEFINE_bool("hard_vocab_limit", True, "Fail when the corpus cannot fill vocab_size pieces.")
flags.DEFINE_integer("seed", 12345, "Random seed for sentence sampling.")
flags.DEFINE_integer("num_threads", None, "Trainer threads (default: all CPUs).")
flags.DEFINE_bool(
    "strict_utf8", False, "Fail on a line that is not valid UTF-8 instead of skipping it."
)
flags.DEFINE_string("tfds_data_dir", None, "TFDS data directory for 'tfds:' inputs.")
flags.DEFINE_string("tfds_split", "train", "TFDS split for 'tfds:' inputs.")
flags.DEFINE_string("tfds_feature", "text", "TFDS text feature for 'tfds:' inputs.")
flags.DEFINE_list(
    "builtin_packages", ["tensorflow", "keras", "numpy"], "Packages read by 'builtin:docstrings'."
)
flags.DEFINE_bool("verbose", False, "Show SentencePiece's own log.")

flags.mark_flags_as_required(["input", "model_prefix"])
FLAGS = flags.FLAGS


def user_defined_symbols():
    return [s for s in FLAGS.user_defined_symbols.split(",") if s]


def validate():
    if FLAGS.vocab_size <= 5 + len(user_defined_symbols()):
        cli.fail(
            f"--vocab_size={FLAGS.vocab_size} must exceed the 5 special pieces plus "
            f"{len(user_defined_symbols())} --user_defined_symbols"
        )
    if FLAGS.input_sentence_size < 0:
        cli.fail(f"--input_sentence_size must be >= 0, got {FLAGS.input_sentence_size}")
    if not 0.0 < FLAGS.character_coverage <= 1.0:
        cli.fail(f"--character_coverage must be in (0, 1], got {FLAGS.character_coverage}")
    if FLAGS.num_threads is not None and FLAGS.num_threads < 1:
        cli.fail(f"--num_threads must be >= 1, got {FLAGS.num_threads}")
    if FLAGS.model_prefix.endswith("/") or FLAGS.model_prefix.endswith(".model"):
        cli.fail(
            f"--model_prefix is a prefix (PREFIX.model is written), got {FLAGS.model_prefix!r}"
        )
    input_paths.check_matches("input", FLAGS.input, corpus=True)


def main(argv):
    del argv  # cli.run refuses positional arguments
    validate()
    from albert_tf.data.corpora import CorpusStats, iter_documents
    from albert_tf.text.vocab import train_sentencepiece

    stats = CorpusStats()
    documents = iter_documents(
        FLAGS.input,
        format=FLAGS.input_format,
        strict=FLAGS.strict_utf8,
        stats=stats,
        data_dir=FLAGS.tfds_data_dir,
        split=FLAGS.tfds_split,
        feature=FLAGS.tfds_feature,
        packages=tuple(FLAGS.builtin_packages),
    )
    path = train_sentencepiece(
        documents,
        FLAGS.model_prefix,
        vocab_size=FLAGS.vocab_size,
        lower_case=FLAGS.do_lower_case,
        input_sentence_size=FLAGS.input_sentence_size,
        shuffle_input_sentence=FLAGS.shuffle_input_sentence,
        character_coverage=FLAGS.character_coverage,
        model_type=FLAGS.model_type,
        user_defined_symbols=user_defined_symbols(),
        hard_vocab_limit=FLAGS.hard_vocab_limit,
        seed=FLAGS.seed,
        num_threads=FLAGS.num_threads,
        verbose=FLAGS.verbose,
    )
    logging.info(
        "Read %d documents, %d sentences from %d files; skipped %d lines that were not UTF-8%s",
        stats.documents,
        stats.sentences,
        stats.files,
        stats.skipped_lines,
        f" (first: {', '.join(stats.skipped_locations)})" if stats.skipped_lines else "",
    )
    print(path)


if __name__ == "__main__":
    # train_sentencepiece raises ValueError naming the setting or corpus it cannot use.
    cli.run(main, expected=(ValueError,))
