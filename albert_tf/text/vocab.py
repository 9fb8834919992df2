"""Training an ALBERT SentencePiece vocabulary (the original README's `spm_train` recipe).

Layout: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4 (control symbols), then the user-defined
symbols, then the learned pieces. Text is normalized with `preprocess_text` first (as the
pretraining data will be), and at most `input_sentence_size` sentences are sampled (reservoir
sampling inside SentencePiece), so a corpus of any size streams through.

Training on the built-in corpus takes most of a minute, so the test suite skips this example:

>>> from albert_tf.data.corpora import iter_documents
>>> documents = iter_documents("builtin:docstrings")  # doctest: +SKIP
>>> train_sentencepiece(documents, "/tmp/docs8k", vocab_size=8000)  # doctest: +SKIP
'/tmp/docs8k.model'
"""

import os
import tempfile
import time

import tensorflow as tf
from absl import logging

from albert_tf.files import temporary_path
from albert_tf.text.normalize import preprocess_text

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
# The original README command: --user_defined_symbols="(,),\",-,.,–,£,€"
ORIGINAL_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
MODEL_TYPES = ("unigram", "bpe", "char", "word")


class _SentenceStream:
    """Normalized non-empty sentences; keeps the first exception, which SentencePiece would hide."""

    def __init__(self, documents, lower_case):
        self.documents, self.lower_case = documents, lower_case
        self.count, self.error = 0, None

    def __iter__(self):
        try:
            yield from self._sentences()
        except Exception as e:  # re-raised by train_sentencepiece after SentencePiece returns
            self.error = e

    def _sentences(self):
        start = time.time()
        for document in self.documents:
            for sentence in document:
                sentence = preprocess_text(sentence, lower=self.lower_case)
                if sentence:
                    self.count += 1
                    if self.count % 1_000_000 == 0:
                        logging.info(
                            "train_sentencepiece: read %d sentences (%.0fs)",
                            self.count,
                            time.time() - start,
                        )
                    yield sentence
        logging.info("train_sentencepiece: read %d sentences in total", self.count)


def train_sentencepiece(
    documents,
    model_prefix,
    vocab_size=30000,
    lower_case=True,
    input_sentence_size=10_000_000,
    shuffle_input_sentence=True,
    character_coverage=0.99995,
    model_type="unigram",
    user_defined_symbols=ORIGINAL_USER_DEFINED_SYMBOLS,
    hard_vocab_limit=True,
    seed=12345,
    num_threads=None,
    verbose=False,
):
    """Trains a SentencePiece model with ALBERT's special ids; writes `{model_prefix}.model/.vocab`.

    Args:
      documents: an iterable of documents, each a list of sentence strings (for files, TFDS or
        the built-in corpus: `albert_tf.data.corpora.iter_documents(spec)`).
      model_prefix: output prefix, local or gs://; both files are written atomically.
      vocab_size: number of pieces, special and user-defined symbols included.
      lower_case: lowercase in `preprocess_text` (must match the tokenizer's `lower_case`).
      input_sentence_size: at most this many sentences are sampled for training (0 = all).
      shuffle_input_sentence: sample uniformly (reservoir) instead of taking the first ones.
      character_coverage, model_type, hard_vocab_limit: SentencePiece trainer options.
      user_defined_symbols: pieces always kept whole (default: the original recipe's).
      seed: SentencePiece's random seed (sampling is then reproducible).
      num_threads: trainer threads (default: all CPUs).
      verbose: show SentencePiece's own log.
    Returns:
      The path of the written `.model` file.
    """
    import sentencepiece as spm

    if isinstance(documents, (str, bytes)):
        raise TypeError(
            "train_sentencepiece takes documents, not a path: pass "
            f"albert_tf.data.corpora.iter_documents({documents!r})"
        )
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    user_defined_symbols = tuple(user_defined_symbols or ())
    reserved = 2 + len(CONTROL_SYMBOLS) + len(user_defined_symbols)
    if int(vocab_size) <= reserved:
        raise ValueError(
            f"vocab_size={vocab_size} must exceed the {reserved} special and user-defined pieces"
        )
    if int(input_sentence_size) < 0:
        raise ValueError(f"input_sentence_size must be >= 0, got {input_sentence_size}")
    if not 0.0 < float(character_coverage) <= 1.0:
        raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage}")
    clash = sorted(set(user_defined_symbols) & {"<pad>", "<unk>", *CONTROL_SYMBOLS})
    if clash:
        raise ValueError(f"user_defined_symbols must not repeat the special pieces: {clash}")
    out_dir = os.path.dirname(model_prefix)
    if out_dir:
        tf.io.gfile.makedirs(out_dir)
    stream = _SentenceStream(documents, lower_case)
    if seed is not None:
        spm.set_random_generator_seed(int(seed))
    with tempfile.TemporaryDirectory(prefix="albert_tf_spm_") as tmp:
        local_prefix = os.path.join(tmp, "spm")
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(stream),
                model_prefix=local_prefix,
                vocab_size=int(vocab_size),
                model_type=model_type,
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                control_symbols=list(CONTROL_SYMBOLS),
                user_defined_symbols=list(user_defined_symbols),
                input_sentence_size=int(input_sentence_size),
                shuffle_input_sentence=bool(shuffle_input_sentence),
                character_coverage=float(character_coverage),
                hard_vocab_limit=bool(hard_vocab_limit),
                num_threads=int(num_threads or os.cpu_count() or 1),
                minloglevel=0 if verbose else 2,
            )
        except RuntimeError as e:
            if stream.error is not None:
                raise stream.error
            if stream.count == 0:
                raise ValueError("the corpus holds no text (not one non-empty sentence)") from None
            hint = ""
            if "Vocabulary size too high" in str(e):
                hint = (
                    " (the corpus is too small for this vocab_size: lower it, or pass "
                    "hard_vocab_limit=False)"
                )
            raise ValueError(f"SentencePiece training failed: {e}{hint}") from None
        if stream.error is not None:
            raise stream.error
        for ext in (".model", ".vocab"):
            _atomic_copy(local_prefix + ext, model_prefix + ext)
    logging.info("train_sentencepiece: wrote %s.model and %s.vocab", model_prefix, model_prefix)
    return model_prefix + ".model"


def _atomic_copy(src, dst):
    tmp = temporary_path(dst)
    try:
        tf.io.gfile.copy(src, tmp, overwrite=True)
        tf.io.gfile.rename(tmp, dst, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
