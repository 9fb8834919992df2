"""The one check that a SentencePiece vocabulary belongs to a model, wherever the two are paired
(pretraining, fine-tuning, export, conversion, `albert_tf.save`).

A vocabulary fits a model when it has exactly `config.vocab_size` pieces and ALBERT's special
pieces: <pad>=0 and <unk>=1 (what padding and the data pipeline assume), [CLS], [SEP] and
[MASK]. When the model comes with its own vocabulary (the spm.model of its directory), the five
special ids must equal that one's, and other pieces are logged as a warning.

>>> from albert_tf.config import AlbertConfig
>>> check_vocabulary_matches("30k-clean.model", AlbertConfig(vocab_size=1000)).vocab_size
1000
>>> check_vocabulary_matches("30k-clean.model", AlbertConfig.from_preset("albert_tiny"),
...                          flag="--spm_model_file", model="albert_config.json")
Traceback (most recent call last):
...
albert_tf.text.tokenizer.VocabularyError: --spm_model_file=30k-clean.model has 1000 pieces but ...
"""

from absl import logging

from albert_tf.text.tokenizer import SentencePieceTokenizer, VocabularyError, spm_name

SPECIAL_IDS = ("pad_id", "unk_id", "cls_id", "sep_id", "mask_id")
ALBERT_IDS = {"pad_id": 0, "unk_id": 1}  # <pad>=0, <unk>=1 whatever the model


def _tokenizer(vocabulary):
    if isinstance(vocabulary, SentencePieceTokenizer):
        return vocabulary
    proto = getattr(vocabulary, "model_proto", None)  # a TextTokenizer or AlbertPreprocessor
    tokenizer = SentencePieceTokenizer(vocabulary if proto is None else proto)
    tokenizer.source = getattr(vocabulary, "source", tokenizer.source)
    return tokenizer


def _name(vocabulary, flag):
    source = vocabulary.source
    if flag:
        return f"{flag}={source}" if source else flag
    return source or spm_name(vocabulary.model_proto)


def check_vocabulary_matches(vocabulary, config, flag=None, model=None, reference=None):
    """Checks that `vocabulary` belongs to the model of `config`; returns its tokenizer.

    Args:
      vocabulary: a `.model` path (local or gs://) or its bytes, a `SentencePieceTokenizer`, or a
        layer holding `model_proto` (`TextTokenizer`, `AlbertPreprocessor`).
      config: the model's `AlbertConfig` (None: the size is not checked, as for a preset that
        takes the vocabulary's size).
      flag: the flag (or argument) that gave the vocabulary, named in errors with its path.
      model: what the config comes from (a config file, a model directory, a preset), named in
        errors.
      reference: the vocabulary the model was saved with (path, bytes or tokenizer), if any.
    Raises:
      VocabularyError (a UserError) naming the file, the flag and the model: not a SentencePiece
      model, a missing special piece, another size, or other special ids.
    """
    try:
        tokenizer = _tokenizer(vocabulary)
    except FileNotFoundError:
        raise VocabularyError(f"{flag + '=' if flag else ''}{vocabulary}: file not found") from None
    except VocabularyError as e:  # its message starts with the path, when there is one
        if flag:
            raise VocabularyError(
                f"{flag}{'=' if isinstance(vocabulary, str) else ': '}{e}"
            ) from None
        raise
    name = _name(tokenizer, flag)
    model = f" ({model})" if model else ""
    if config is not None and tokenizer.vocab_size != config.vocab_size:
        raise VocabularyError(
            f"{name} has {tokenizer.vocab_size} pieces but the model{model} has vocab_size "
            f"{config.vocab_size}: the tokenizer does not belong to this model"
        )
    expected, against = ALBERT_IDS, "ALBERT's <pad>=0, <unk>=1"
    if reference is not None:
        reference = _tokenizer(reference)
        expected = {k: getattr(reference, k) for k in SPECIAL_IDS}
        against = f"the model's own {_name(reference, None)}"
    differing = [k for k in expected if getattr(tokenizer, k) != expected[k]]
    if differing:
        detail = ", ".join(f"{k} {getattr(tokenizer, k)} vs {expected[k]}" for k in differing)
        raise VocabularyError(
            f"{name}: special ids differ from {against} ({detail}); the "
            f"tokenizer does not belong to the model{model}"
        )
    if reference is not None and tokenizer.model_proto != reference.model_proto:
        logging.warning(
            "%s differs from the model's own %s (same size and special ids): make "
            "sure it is the pretraining vocabulary",
            name,
            _name(reference, None),
        )
    return tokenizer
