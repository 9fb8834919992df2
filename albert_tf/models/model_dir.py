"""Saving and loading ALBERT models as a directory (local or gs://).

Layout of a model directory:

    config.json             AlbertConfig in the original albert_config.json dialect
    pretrainer.weights.h5   Keras weights of an AlbertPretrainer (backbone + MLM + SOP heads)
      or backbone.weights.h5  Keras weights of a bare AlbertModel (exactly one of the two)
    spm.model               optional SentencePiece model (checked against vocab_size)
    text.json               the text settings the model's ids follow: {"tex_quotes": bool}
                            (True for a model converted from Hugging Face, whose tokenizer
                            replaces `` and '' by "); a directory without it reads as False.
                            A model converted from a keras-hub preset also records
                            "lower_case": false and "albert_rules": false (its tokenizer feeds
                            the text to SentencePiece as given: no lowercasing, accent
                            stripping, whitespace collapse or digit-comma rule)
    model.keras             optional fine-tuned head model (albert_tf.convert.checkpoint)

`text_settings(directory)` reads text.json; tokenizers built from the directory's spm.model
(`AlbertPreprocessor.from_pretrained`, the fine-tuning runner) follow it. A recorded lower_case
is the model's default: an explicit `lower_case=` (or --do_lower_case) still overrides it.

`load(directory)` always returns an AlbertPretrainer: from a backbone-only directory its heads
are freshly initialised (a warning is logged). `load_backbone(directory)` returns the
AlbertModel from either kind.

A directory is written whole, so it never mixes files of two saves (such as a stale spm.model):
* local: the new directory is built under a hidden name beside it (`files.temporary_path`), then
  the two are exchanged in one atomic step (Linux renameat2) and the old one deleted. A save
  killed before the swap leaves the previous directory as it was (its staging directory is
  removed by the next save). Where the exchange is not available, the old one is renamed aside
  and the new one renamed in: between the two renames (microseconds) `directory` is missing,
  its previous version then under `.tmp-<name>-...` beside it.
* gs:// and other object stores, where a directory cannot be renamed atomically: each file is
  written under a hidden name and renamed into place (per-object atomic), then the layout files
  this save did not write are deleted. A save killed midway can leave new and old files mixed;
  save again.
An existing directory that holds anything but these files (checkpoints, a fine-tuning run) is
refused rather than replaced.

>>> import tempfile
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models import model_dir
>>> from albert_tf.models.backbone import AlbertModel
>>> from albert_tf.models.pretrainer import AlbertPretrainer
>>> path = tempfile.mkdtemp() + "/tiny"
>>> model = AlbertPretrainer(AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)))
>>> model_dir.save(model, path)
>>> model_dir.load(path).backbone.config.hidden_size
128
"""

import json
import os
import shutil
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.files import (
    TEMPORARY_PREFIX,
    exchange_paths,
    read_json,
    remove_stale_temporaries,
    temporary_path,
    write_json,
)
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer

CONFIG_FILE = "config.json"
PRETRAINER_WEIGHTS = "pretrainer.weights.h5"
BACKBONE_WEIGHTS = "backbone.weights.h5"
SPM_FILE = "spm.model"
TEXT_FILE = "text.json"
HEAD_MODEL_FILE = "model.keras"  # written by albert_tf.convert.checkpoint.save_head_model
LAYOUT_FILES = (
    CONFIG_FILE,
    PRETRAINER_WEIGHTS,
    BACKBONE_WEIGHTS,
    SPM_FILE,
    TEXT_FILE,
    HEAD_MODEL_FILE,
)
# The text settings of a directory without text.json (saved before they were recorded).
DEFAULT_TEXT_SETTINGS = {"tex_quotes": False}
# Settings text.json holds only when a model needs them (a keras-hub preset's "lower_case":
# false, "albert_rules": false); absent, the tokenizers' own defaults apply (lower_case: the
# caller's, e.g. --do_lower_case, default true; albert_rules: true).
OPTIONAL_TEXT_SETTINGS = ("lower_case", "albert_rules")
_LAYOUT = (
    f"{CONFIG_FILE} plus {PRETRAINER_WEIGHTS} or {BACKBONE_WEIGHTS} (and optionally {SPM_FILE})"
)


class ModelDirectoryError(UserError, ValueError):
    """A model directory cannot be written where asked; the message names it."""


def _join(directory, name):
    return f"{directory.rstrip('/')}/{name}"


def save(
    model,
    directory,
    spm_model=None,
    extra_files=None,
    tex_quotes=False,
    lower_case=None,
    albert_rules=True,
):
    """Writes `model` (an AlbertPretrainer or AlbertModel) as the directory `directory`, whole.

    Args:
        model: the model to save; a pretrainer keeps its heads, a backbone is saved alone.
        directory: a local or gs:// directory; created (with parents) if missing, replaced
            whole if it is a model directory (see the module docstring), refused otherwise.
        spm_model: optional SentencePiece model file (a path), copied in as `spm.model` after
            `check_vocabulary_matches` against the model's config.
        extra_files: optional {name in LAYOUT_FILES: callable(local_path)} writing more files
            into the same directory (the fine-tuned head's model.keras).
        tex_quotes: recorded in text.json: whether the model's ids come from text with the
            TeX quotes `` and '' replaced by " (Hugging Face's tokenizer; False: the original).
        lower_case: recorded in text.json when not None: whether the model's ids come from
            lowercased text (None: not recorded, the caller's choice, true by default).
        albert_rules: recorded in text.json when False: the ids come from SentencePiece on the
            text as given, without ALBERT's whitespace collapse, accent stripping and
            digit-comma rule (keras-hub's tokenizer).
    """
    if isinstance(model, AlbertPretrainer):
        weights_name, config = PRETRAINER_WEIGHTS, model.backbone.config
    elif isinstance(model, AlbertModel):
        weights_name, config = BACKBONE_WEIGHTS, model.config
    else:
        raise TypeError(
            f"save() needs an AlbertPretrainer or AlbertModel, got {type(model).__name__}"
        )
    if spm_model is not None:
        if not tf.io.gfile.exists(spm_model):
            raise FileNotFoundError(f"spm_model not found: {spm_model}")
        from albert_tf.text.vocab_check import check_vocabulary_matches

        check_vocabulary_matches(
            spm_model,
            config,
            flag="spm_model",
            model=f"the {type(model).__name__} saved to {directory}",
        )
    text = {"tex_quotes": tex_quotes}
    if lower_case is not None:
        text["lower_case"] = lower_case
    if albert_rules is not True:
        text["albert_rules"] = albert_rules
    for name, value in text.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r}")
    writers = {
        CONFIG_FILE: lambda path: config.to_json_file(path, dialect="original"),
        weights_name: model.save_weights,
        TEXT_FILE: lambda path: write_json(path, text),
    }
    if spm_model is not None:
        writers[SPM_FILE] = lambda path: tf.io.gfile.copy(spm_model, path, overwrite=True)
    writers.update(extra_files or {})
    _check_replaceable(directory)
    if "://" in directory:
        _write_in_place(writers, directory)
    else:
        _write_and_swap(writers, directory)
    logging.info("Saved %s (%s) to %s", type(model).__name__, ", ".join(writers), directory)


def text_settings(directory):
    """{"tex_quotes": bool, plus "lower_case" and "albert_rules" where recorded}: the text
    settings of `directory`'s text.json, as keyword arguments of `SentencePieceTokenizer` /
    `AlbertPreprocessor`; the defaults (`DEFAULT_TEXT_SETTINGS`) for a directory saved before
    they were recorded."""
    path = _join(directory, TEXT_FILE)
    if not tf.io.gfile.exists(path):
        return dict(DEFAULT_TEXT_SETTINGS)
    try:
        values = read_json(path)
    except ValueError as e:
        raise ModelDirectoryError(str(e)) from None
    settings = dict(DEFAULT_TEXT_SETTINGS)
    settings.update({n: values[n] for n in OPTIONAL_TEXT_SETTINGS if n in values})
    for name in settings:
        value = values.get(name, settings[name])
        if not isinstance(value, bool):
            raise ModelDirectoryError(
                f"{path}: {name} must be true or false, got {json.dumps(value)}"
            )
        settings[name] = value
    return settings


def _check_replaceable(directory):
    """Refuses to replace a file, or a directory holding more than a saved model."""
    if not tf.io.gfile.exists(directory):
        return
    if not tf.io.gfile.isdir(directory):
        raise ModelDirectoryError(f"{directory} is a file, not a model directory")
    other = sorted(
        name.rstrip("/")
        for name in tf.io.gfile.listdir(directory)
        if name.rstrip("/") not in LAYOUT_FILES and not name.startswith(TEMPORARY_PREFIX)
    )
    if other:
        raise ModelDirectoryError(
            f"{directory} holds more than a saved model ({', '.join(other[:5])}); a model "
            "directory is replaced whole: save to a new directory or remove those files"
        )


def _write_and_swap(writers, directory):
    """Local: build the directory under a hidden name beside it, then swap it in."""
    directory = directory.rstrip("/") or directory
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    remove_stale_temporaries(directory)
    staging = temporary_path(directory)
    os.makedirs(staging)
    try:
        _write_through_local_files(writers, staging, shutil.copyfile)
        aside = None
        if os.path.isdir(directory):
            aside = staging
            if not exchange_paths(staging, directory):  # else: missing between two renames
                aside = temporary_path(directory)
                os.rename(directory, aside)
                try:
                    os.rename(staging, directory)
                except BaseException:
                    os.rename(aside, directory)
                    raise
        else:
            os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if aside:
        shutil.rmtree(aside, ignore_errors=True)


def _write_through_local_files(writers, directory, copy):
    """Runs each writer on a local temporary file, then `copy(local, directory/name)`: h5py and
    Keras write local files only, and a full target disk then fails in `copy` with a clear
    OSError instead of inside h5py."""
    local = tempfile.mkdtemp(prefix="albert_tf_save_")
    try:
        for name, write in writers.items():
            write(os.path.join(local, name))
            copy(os.path.join(local, name), _join(directory, name))
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _write_in_place(writers, directory):
    """gs:// (no atomic directory rename): each file atomically, then stale layout files go."""

    def copy_atomically(local_path, target):
        remove_stale_temporaries(target)
        tmp = temporary_path(target)
        tf.io.gfile.copy(local_path, tmp, overwrite=True)
        tf.io.gfile.rename(tmp, target, overwrite=True)

    tf.io.gfile.makedirs(directory)
    _write_through_local_files(writers, directory, copy_atomically)
    for name in set(LAYOUT_FILES) - set(writers):
        if tf.io.gfile.exists(_join(directory, name)):
            tf.io.gfile.remove(_join(directory, name))


def _inspect(directory):
    """(config, weights file name) of a saved directory, with clear errors for broken ones."""
    if not tf.io.gfile.isdir(directory):
        raise FileNotFoundError(f"Model directory not found: {directory} (expected {_LAYOUT})")
    present = set(tf.io.gfile.listdir(directory))
    if CONFIG_FILE not in present:
        raise FileNotFoundError(
            f"{directory} has no {CONFIG_FILE}; found {sorted(present)}, expected {_LAYOUT}"
        )
    weights = [n for n in (PRETRAINER_WEIGHTS, BACKBONE_WEIGHTS) if n in present]
    if not weights:
        raise FileNotFoundError(
            f"{directory} has no weights file; found {sorted(present)}, expected {_LAYOUT}"
        )
    if len(weights) == 2:
        raise ValueError(
            f"{directory} holds both {PRETRAINER_WEIGHTS} and {BACKBONE_WEIGHTS}; "
            "remove the one you do not mean to load"
        )
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
    backbone = AlbertModel(
        config, output_encoder_outputs=output_encoder_outputs, unroll=unroll, dtype=dtype
    )
    if weights == BACKBONE_WEIGHTS:
        _load_weights(backbone, directory, weights)
        logging.warning(
            "%s holds a backbone only: the MLM and SOP heads are freshly initialised", directory
        )
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
    backbone = AlbertModel(
        config, output_encoder_outputs=output_encoder_outputs, unroll=unroll, dtype=dtype
    )
    _load_weights(backbone, directory, weights)
    return backbone


# Names of models to fetch (albert_base_v2, hf://..., addresses, TF Hub handles) are turned into
# directories by `albert_tf.sources`, which sits above this package (it converts through
# albert_tf.convert, which builds models): `albert_tf.register_serializable_classes` installs
# it here with `set_name_resolver` whenever albert_tf loads its models.
_name_resolver = None


def set_name_resolver(resolver):
    """Installs `resolver(spec) -> directory`, which `local_directory` applies to names."""
    global _name_resolver
    _name_resolver = resolver


def local_directory(spec):
    """The model directory `spec` names: `spec` itself for a path; for a released model's name,
    an hf:// name, an address or a TF Hub handle, the directory the installed resolver fetched
    and cached (`albert_tf.sources`)."""
    return spec if _name_resolver is None else _name_resolver(spec)


def spm_model_path(directory):
    """The path of the SentencePiece model saved with the model, or None if there is none."""
    path = _join(directory, SPM_FILE)
    return path if tf.io.gfile.exists(path) else None
