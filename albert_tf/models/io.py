"""Saving and loading ALBERT models as a directory (local or gs://).

Layout of a model directory:

    config.json             AlbertConfig in the original albert_config.json dialect
    pretrainer.weights.h5   Keras weights of an AlbertPretrainer (backbone + MLM + SOP heads)
      or backbone.weights.h5  Keras weights of a bare AlbertModel (exactly one of the two)
    spm.model               optional SentencePiece model

`load(directory)` always returns an AlbertPretrainer: from a backbone-only directory its heads
are freshly initialised (a warning is logged). `load_backbone(directory)` returns the
AlbertModel from either kind. A new directory is written in a temporary sibling directory and
renamed into place; into an existing directory (e.g. one that also holds checkpoints) each of
our files is replaced atomically and nothing else is touched.

>>> import tempfile
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models import io
>>> from albert_tf.models.backbone import AlbertModel
>>> from albert_tf.models.pretrainer import AlbertPretrainer
>>> path = tempfile.mkdtemp() + "/tiny"
>>> model = AlbertPretrainer(AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)))
>>> io.save(model, path)
>>> io.load(path).backbone.config.hidden_size
128
"""
import os
import shutil
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.files import temporary_path
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer

CONFIG_FILE = "config.json"
PRETRAINER_WEIGHTS = "pretrainer.weights.h5"
BACKBONE_WEIGHTS = "backbone.weights.h5"
SPM_FILE = "spm.model"
_LAYOUT = (f"{CONFIG_FILE} plus {PRETRAINER_WEIGHTS} or {BACKBONE_WEIGHTS} "
           f"(and optionally {SPM_FILE})")


def _join(directory, name):
    return f"{directory.rstrip('/')}/{name}"


def save(model, directory, spm_model_file=None):
    """Writes `model` (an AlbertPretrainer or AlbertModel) into `directory`.

    Args:
        model: the model to save; a pretrainer keeps its heads, a backbone is saved alone.
        directory: a local or gs:// directory; created (with parents) if missing.
        spm_model_file: optional SentencePiece model file, copied in as `spm.model`.
    """
    if isinstance(model, AlbertPretrainer):
        weights_name, stale_name = PRETRAINER_WEIGHTS, BACKBONE_WEIGHTS
        config = model.backbone.config
    elif isinstance(model, AlbertModel):
        weights_name, stale_name = BACKBONE_WEIGHTS, PRETRAINER_WEIGHTS
        config = model.config
    else:
        raise TypeError(f"save() needs an AlbertPretrainer or AlbertModel, got "
                        f"{type(model).__name__}")
    if spm_model_file is not None and not tf.io.gfile.exists(spm_model_file):
        raise FileNotFoundError(f"spm_model_file not found: {spm_model_file}")

    local = tempfile.mkdtemp(prefix="albert_tf_save_")
    try:
        config.to_json_file(os.path.join(local, CONFIG_FILE), dialect="original")
        model.save_weights(os.path.join(local, weights_name))
        names = [CONFIG_FILE, weights_name]
        if spm_model_file is not None:
            tf.io.gfile.copy(spm_model_file, os.path.join(local, SPM_FILE), overwrite=True)
            names.append(SPM_FILE)
        if tf.io.gfile.isdir(directory):
            _replace_files(local, names, directory)
            stale = _join(directory, stale_name)
            if tf.io.gfile.exists(stale):
                tf.io.gfile.remove(stale)
        else:
            _publish_new_directory(local, names, directory)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    logging.info("Saved %s (%s) to %s", type(model).__name__, ", ".join(names), directory)


def _publish_new_directory(local, names, directory):
    parent = os.path.dirname(directory.rstrip("/"))
    if parent:
        tf.io.gfile.makedirs(parent)
    staging = temporary_path(directory)
    tf.io.gfile.makedirs(staging)
    try:
        for name in names:
            tf.io.gfile.copy(os.path.join(local, name), _join(staging, name), overwrite=True)
        tf.io.gfile.rename(staging, directory)
    except BaseException:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
        raise


def _replace_files(local, names, directory):
    for name in names:
        target = _join(directory, name)
        tmp = temporary_path(target)
        tf.io.gfile.copy(os.path.join(local, name), tmp, overwrite=True)
        tf.io.gfile.rename(tmp, target, overwrite=True)


def _inspect(directory):
    """(config, weights file name) of a saved directory, with clear errors for broken ones."""
    if not tf.io.gfile.isdir(directory):
        raise FileNotFoundError(f"Model directory not found: {directory} (expected {_LAYOUT})")
    present = set(tf.io.gfile.listdir(directory))
    if CONFIG_FILE not in present:
        raise FileNotFoundError(f"{directory} has no {CONFIG_FILE}; found {sorted(present)}, "
                                f"expected {_LAYOUT}")
    weights = [n for n in (PRETRAINER_WEIGHTS, BACKBONE_WEIGHTS) if n in present]
    if not weights:
        raise FileNotFoundError(f"{directory} has no weights file; found {sorted(present)}, "
                                f"expected {_LAYOUT}")
    if len(weights) == 2:
        raise ValueError(f"{directory} holds both {PRETRAINER_WEIGHTS} and {BACKBONE_WEIGHTS}; "
                         "remove the one you do not mean to load")
    return AlbertConfig.from_json_file(_join(directory, CONFIG_FILE)), weights[0]


def _load_weights(model, directory, name):
    path = _join(directory, name)
    if os.path.exists(path):
        model.load_weights(path)
        return
    local = tempfile.mkdtemp(prefix="albert_tf_load_")
    try:  # h5py reads local files only: copy remote (gs://) weights first
        tf.io.gfile.copy(path, os.path.join(local, name))
        model.load_weights(os.path.join(local, name))
    finally:
        shutil.rmtree(local, ignore_errors=True)


def load(directory, dtype=None, output_encoder_outputs=False, unroll=False):
    """Loads an AlbertPretrainer from a directory written by `save`.

    A directory holding only a backbone gives a pretrainer with freshly initialised heads (a
    warning says so). `dtype`, `output_encoder_outputs` and `unroll` are passed to AlbertModel.
    """
    config, weights = _inspect(directory)
    backbone = AlbertModel(config, output_encoder_outputs=output_encoder_outputs, unroll=unroll,
                           dtype=dtype)
    if weights == BACKBONE_WEIGHTS:
        _load_weights(backbone, directory, weights)
        logging.warning("%s holds a backbone only: the MLM and SOP heads are freshly "
                        "initialised", directory)
        return AlbertPretrainer(backbone)
    model = AlbertPretrainer(backbone)
    _load_weights(model, directory, weights)
    logging.info("Loaded AlbertPretrainer from %s", directory)
    return model


def load_backbone(directory, dtype=None, output_encoder_outputs=False, unroll=False):
    """Loads just the AlbertModel from a directory written by `save` (either kind)."""
    config, weights = _inspect(directory)
    if weights == PRETRAINER_WEIGHTS:
        return load(directory, dtype, output_encoder_outputs, unroll).backbone
    backbone = AlbertModel(config, output_encoder_outputs=output_encoder_outputs, unroll=unroll,
                           dtype=dtype)
    _load_weights(backbone, directory, weights)
    return backbone


def spm_model_path(directory):
    """The path of the SentencePiece model saved with the model, or None if there is none."""
    path = _join(directory, SPM_FILE)
    return path if tf.io.gfile.exists(path) else None
