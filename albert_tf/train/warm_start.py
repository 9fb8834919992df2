"""Warm-starting a model from a saved ALBERT directory or an earlier training checkpoint.

`--init_checkpoint` may name
* a directory written by `albert_tf.save` / `albert_tf.models.model_dir.save` (converted original or
  Hugging Face weights included): it is loaded with `albert_tf.load`;
* a training checkpoint of `run_pretraining` (a `ckpt-N` prefix, its directory, or the run's
  output directory): its model weights are read, the optimizer state is not (as the original,
  which restored no Adam/LAMB slots from `init_checkpoint`).

With `init_from_group0=True` (the original's `--init_from_group0`) the source may have fewer
groups than the target: group 0 of every stacked encoder weight is copied into every group, so
a model with 1 shared group can initialise, e.g., a 12-group (BERT-style) model.

`build_model(config)` builds an empty model of the source's architecture (from the
`albert_config.json` beside a training checkpoint); the pretraining runner passes
`lambda config: PretrainingTask(config).build_model()`. Below, a 4-layer model with one shared
group (as every released ALBERT) initialises a model with 2 groups, both taking the saved
group's weights:

>>> import tempfile
>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models import model_dir
>>> from albert_tf.models.backbone import AlbertModel
>>> from albert_tf.models.pretrainer import AlbertPretrainer
>>> def build_model(config):
...     return AlbertPretrainer(AlbertModel(config))
>>> shared = build_model(AlbertConfig.from_preset("albert_tiny", vocab_size=100))
>>> model = build_model(AlbertConfig.from_preset("albert_tiny", vocab_size=100,
...                                              num_hidden_groups=2))
>>> with tempfile.TemporaryDirectory() as directory:
...     model_dir.save(shared, directory)
...     copied = warm_start(model, directory, build_model, init_from_group0=True)
>>> copied[:2]
['albert/encoder/attention/query_kernel', 'albert/encoder/attention/query_bias']
>>> saved = shared.backbone.encoder.attention_weights["query_kernel"].numpy()  # [1, 1, H, H]
>>> kernel = model.backbone.encoder.attention_weights["query_kernel"].numpy()  # [2, 1, H, H]
>>> bool(np.array_equal(kernel[0], saved[0]) and np.array_equal(kernel[1], saved[0]))
True

A training checkpoint (a `ckpt-N` prefix, local or gs://) is read the same way; with equal
group counts nothing is copied from group 0:

>>> warm_start(model, "gs://bucket/run/checkpoints/ckpt-1000", build_model)  # doctest: +SKIP
[]
"""

import os

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.settings import InvalidFlagError

CONFIG_NAMES = ("albert_config.json", "config.json")


def _find_config(directory):
    for name in CONFIG_NAMES:
        path = os.path.join(directory, name)
        if tf.io.gfile.exists(path):
            return path
    return None


def checkpoint_prefix(path):
    """A training-checkpoint prefix from a prefix, a checkpoint dir or a run's output dir (None:
    `path` holds no training checkpoint)."""
    if tf.io.gfile.exists(path + ".index"):
        return path
    for directory in (path, os.path.join(path, "checkpoints")):
        if tf.io.gfile.isdir(directory):
            latest = tf.train.latest_checkpoint(directory)
            if latest:
                return latest
    return None


def source_config(path):
    """The `AlbertConfig` of the model at `path` (a model directory, or a training checkpoint
    with albert_config.json beside it or in its parent directory)."""
    prefix = checkpoint_prefix(path)
    directories = [path] if prefix is None else [os.path.dirname(prefix)]
    directories.append(os.path.dirname(directories[0]))
    for directory in directories:
        config_path = _find_config(directory)
        if config_path:
            return AlbertConfig.from_json_file(config_path)
    raise InvalidFlagError(
        f"--init_checkpoint={path!r} has no albert_config.json or config.json: give its model's "
        "--albert_config_file or --preset"
    )


def load_source(path, build_model):
    """The model held at `path` (see module doc); `build_model(config)` builds an empty one."""
    prefix = checkpoint_prefix(path)
    if prefix is None:
        if tf.io.gfile.isdir(path) and _find_config(path):
            from albert_tf.models import model_dir

            return model_dir.load(path)
        raise FileNotFoundError(
            f"--init_checkpoint={path!r}: neither a saved albert_tf model directory (with "
            "config.json) nor a training checkpoint (ckpt-N.index, or a directory holding one)"
        )
    directory = os.path.dirname(prefix)
    config_path = _find_config(directory) or _find_config(os.path.dirname(directory))
    if config_path is None:
        raise FileNotFoundError(
            f"--init_checkpoint={path!r}: found checkpoint {prefix} but no albert_config.json "
            "beside it or in its parent directory to build the model it holds"
        )
    source = build_model(AlbertConfig.from_json_file(config_path))
    tf.train.Checkpoint(model=source).restore(
        prefix
    ).expect_partial().assert_existing_objects_matched()
    logging.info("Read model weights of %s (config %s)", prefix, config_path)
    return source


def copy_weights(source, target, init_from_group0=False):
    """Assigns every variable of `target` from the variable of `source` with the same path.

    With `init_from_group0`, a stacked encoder weight [groups, ...] whose source has another
    number of groups takes the source's group 0 in every group. Raises ValueError naming the
    first variable that is missing or has an incompatible shape.
    """
    by_path = {v.path: v for v in source.variables}
    copied_from_group0 = []
    for variable in target.variables:
        src = by_path.get(variable.path)
        if src is None:
            raise InvalidFlagError(
                f"--init_checkpoint: the source model has no variable {variable.path!r}"
            )
        if tuple(src.shape) == tuple(variable.shape):
            variable.assign(src.value)
        elif (
            init_from_group0
            and len(variable.shape) >= 2
            and len(src.shape) == len(variable.shape)
            and tuple(src.shape[1:]) == tuple(variable.shape[1:])
        ):
            variable.assign(tf.broadcast_to(src.value[:1], variable.shape))
            copied_from_group0.append(variable.path)
        else:
            hint = (
                ""
                if init_from_group0
                else " (a model with more groups can start from group 0 with --init_from_group0)"
            )
            raise InvalidFlagError(
                f"--init_checkpoint: variable {variable.path!r} has shape "
                f"{tuple(src.shape)} in the source, {tuple(variable.shape)} here{hint}"
            )
    if copied_from_group0:
        logging.info(
            "init_from_group0: copied group 0 into every group of %d variables",
            len(copied_from_group0),
        )
    return copied_from_group0


def warm_start(model, path, build_model, init_from_group0=False):
    """Initialises `model` from `path` (see module doc); returns the paths copied from group 0."""
    source = load_source(path, build_model)
    copied = copy_weights(source, model, init_from_group0=init_from_group0)
    logging.info("Warm-started from %s", path)
    return copied
