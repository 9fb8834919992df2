"""Hugging Face ALBERT checkpoints (config.json + model.safetensors), both directions.

Import reads the AlbertModel layout (no prefix, no heads), AlbertForMaskedLM ("albert." prefix,
`predictions.*`, no pooler) and AlbertForPreTraining (also `sop_classifier.*`) through the flat
table `names.HUGGINGFACE`. Export writes the AlbertForPreTraining layout. In an HF config.json
"gelu" is the exact erf GELU and "gelu_new" the tanh one; `AlbertConfig` keeps that apart.

HF always has the E -> H projection (`embedding_hidden_mapping_in`); ours exists only when
E != H. A checkpoint with E == H therefore converts only if that projection is the identity
with zero bias (exactly what `to_huggingface` writes for such a model); any other E == H
projection cannot be represented and is an error.
"""
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging
from safetensors import numpy as safetensors_numpy

from albert_tf.config import AlbertConfig
from albert_tf import files
from albert_tf.convert import names
from albert_tf.convert.weights import (Checkpoint, ConversionError, check_whole_block_sharing,
                                       export_weights, load_weights, shared_groups)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
_PREFIX = "albert."
_HEAD_PREFIXES = ("predictions.", "sop_classifier.")
_PROJECTION = ("albert.encoder.embedding_hidden_mapping_in.weight",
               "albert.encoder.embedding_hidden_mapping_in.bias")
_WORD_TABLE = "albert.embeddings.word_embeddings.weight"
# Written into exported config.json files besides the model's own fields.
_EXPORT_EXTRAS = dict(model_type="albert", architectures=["AlbertForPreTraining"],
                      position_embedding_type="absolute", classifier_dropout_prob=0.1,
                      pad_token_id=0, bos_token_id=2, eos_token_id=3)


def read_huggingface_config(path):
    """An `AlbertConfig` from an HF config.json ("gelu" = erf, "gelu_new" = tanh)."""
    values = files.read_json(path)
    model_type = values.get("model_type", "albert")
    if model_type != "albert":
        raise ConversionError(f"{path}: model_type is {model_type!r}, not 'albert'")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ConversionError(
            f"{path}: position_embedding_type {position_type!r} is not supported (only "
            f"'absolute', as in every released ALBERT)")
    check_whole_block_sharing(values, path)
    return AlbertConfig.from_dict(values, dialect="huggingface", source=path)


def _load_safetensors(path):
    if not tf.io.gfile.exists(path):
        directory = os.path.dirname(path)
        present = sorted(tf.io.gfile.listdir(directory)) if tf.io.gfile.isdir(directory) else []
        raise FileNotFoundError(
            f"No {WEIGHTS_FILE} at {path} (found: {', '.join(present) or 'nothing'}); save the "
            f"HF model with save_pretrained(..., safe_serialization=True)")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        return safetensors_numpy.load(data)
    except Exception as e:  # safetensors raises its own error types (e.g. for bfloat16)
        raise ConversionError(
            f"{path}: cannot read the tensors ({type(e).__name__}: {e}); only dtypes NumPy "
            f"knows (float32, float16) can be read, so save bfloat16 models as float32 "
            f"(model.float().save_pretrained(...))") from None


def _normalize(tensors, path, config):
    """Renames a checkpoint to the AlbertForPreTraining layout and resolves tied/redundant tensors.

    Returns (tensors, display) where display maps each new name to the stored one.
    """
    prefixed = any(name.startswith(_PREFIX) for name in tensors)
    renamed, display = {}, {}
    for name, array in tensors.items():
        key = name
        if not prefixed and not name.startswith(_HEAD_PREFIXES):
            key = _PREFIX + name  # AlbertModel layout
        renamed[key], display[key] = array, name

    # The MLM decoder is tied: its weight is the word table, its bias is predictions.bias.
    decoder_weight = renamed.pop("predictions.decoder.weight", None)
    if decoder_weight is not None:
        table = renamed.get(_WORD_TABLE)
        if table is None or not np.array_equal(decoder_weight, table):
            raise ConversionError(
                f"{path}: predictions.decoder.weight differs from {display.get(_WORD_TABLE, _WORD_TABLE)}; "
                f"albert_tf ties the MLM output matrix to the word table and cannot hold an "
                f"untied decoder")
    decoder_bias = renamed.pop("predictions.decoder.bias", None)
    if decoder_bias is not None:
        bias = renamed.setdefault("predictions.bias", decoder_bias)
        display.setdefault("predictions.bias", "predictions.decoder.bias")
        if not np.array_equal(bias, decoder_bias):
            raise ConversionError(
                f"{path}: predictions.decoder.bias differs from predictions.bias; they are one "
                f"tied tensor in HF ALBERT")

    if not config.has_embedding_projection and any(n in renamed for n in _PROJECTION):
        weight = renamed.get(_PROJECTION[0])
        bias = renamed.get(_PROJECTION[1])
        identity = (weight is not None and bias is not None
                    and np.array_equal(weight, np.eye(config.hidden_size, dtype=weight.dtype))
                    and not np.any(bias))
        if not identity:
            raise ConversionError(
                f"{path}: {display.get(_PROJECTION[0], _PROJECTION[0])} is a learned projection "
                f"but embedding_size == hidden_size ({config.hidden_size}); albert_tf, like the "
                f"original ALBERT, has no projection when E == H, so only an identity "
                f"projection with zero bias can be converted")
        logging.info("%s: dropping the identity embedding projection (E == H)", path)
        for name in _PROJECTION:
            renamed.pop(name)
    return renamed, display


def read_huggingface_checkpoint(directory, config):
    """A `Checkpoint` over `directory/model.safetensors`, renamed to the AlbertForPreTraining layout."""
    path = os.path.join(directory, WEIGHTS_FILE)
    tensors, display = _normalize(_load_safetensors(path), path, config)
    return Checkpoint(path, {k: v.shape for k, v in tensors.items()}, tensors.__getitem__, display)


def from_huggingface(directory, ignore_variables=()):
    """An `AlbertPretrainer` from an HF ALBERT directory (config.json + model.safetensors).

    Args:
        directory: what `save_pretrained(directory, safe_serialization=True)` wrote for an
            AlbertModel, AlbertForMaskedLM or AlbertForPreTraining (local or gs://).
        ignore_variables: regexes (re.search, on the stored names) of tensors to skip on
            purpose, e.g. a fine-tuned "^classifier\\." head.

    Returns:
        An AlbertPretrainer whose `.backbone` is the AlbertModel. Parts the checkpoint lacks
        (AlbertModel: both heads; AlbertForMaskedLM: pooler and SOP head) keep their fresh
        initialisation, with a logged warning.

    Example:
        >>> from albert_tf.convert import from_huggingface
        >>> pretrainer = from_huggingface("albert-base-v2/")  # doctest: +SKIP
    """
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    config_path = os.path.join(directory, CONFIG_FILE)
    config = read_huggingface_config(config_path)
    checkpoint = read_huggingface_checkpoint(directory, config)
    patterns = [re.compile(p) for p in ignore_variables]
    ignored = names.HUGGINGFACE_IGNORED + tuple(
        re.compile("^" + re.escape(name) + "$") for name in checkpoint.shapes
        if any(p.search(checkpoint.display(name)) for p in patterns))
    pretrainer = AlbertPretrainer(AlbertModel(config))
    load_weights(pretrainer, checkpoint, names.HUGGINGFACE, ignored=ignored,
                 config_source=config_path)
    return pretrainer


def huggingface_config(config):
    """The HF config.json dict for an `AlbertConfig`, or a ConversionError if HF cannot express it."""
    groups = shared_groups(config)
    values = config.to_json_dict("huggingface")
    values.pop("sharing")
    values["num_hidden_groups"] = groups
    values.update(_EXPORT_EXTRAS)
    return values


def to_huggingface(pretrainer, directory):
    """Writes `directory/config.json` + `model.safetensors` in the AlbertForPreTraining layout.

    `AlbertForPreTraining.from_pretrained(directory)` then computes the same outputs, and
    `from_huggingface(directory)` gives back identical weights. With E == H the HF projection is
    written as the identity with zero bias (HF always applies one).

    Example:
        >>> from albert_tf.convert import to_huggingface
        >>> to_huggingface(pretrainer, "/tmp/albert_hf")  # doctest: +SKIP
    """
    from albert_tf.models.pretrainer import AlbertPretrainer

    if not isinstance(pretrainer, AlbertPretrainer):
        raise TypeError(f"to_huggingface needs an AlbertPretrainer, got {type(pretrainer).__name__}; "
                        f"wrap a backbone as AlbertPretrainer(backbone) (its heads are then new)")
    config = pretrainer.backbone.config
    values = huggingface_config(config)
    tensors = export_weights(pretrainer, names.HUGGINGFACE)
    if not config.has_embedding_projection:
        tensors[_PROJECTION[0]] = np.eye(config.hidden_size, dtype=np.float32)
        tensors[_PROJECTION[1]] = np.zeros([config.hidden_size], np.float32)
    tf.io.gfile.makedirs(directory)
    files.write_atomic(os.path.join(directory, WEIGHTS_FILE),
                       safetensors_numpy.save(tensors, metadata={"format": "pt"}))
    files.write_json(os.path.join(directory, CONFIG_FILE), values)
    logging.info("Wrote %d tensors (AlbertForPreTraining layout) to %s", len(tensors), directory)
