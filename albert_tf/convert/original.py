"""The original google-research/albert TF1 checkpoints (`model.ckpt-*` + albert_config.json).

Reads any name-based TF1 checkpoint the original code wrote (training checkpoints with
adam_m/adam_v slots and global_step, the released `model.ckpt-best`, TF-Hub exports whose
variables carry a `module/` prefix), with any num_hidden_groups / inner_group_num, the pooler
and the MLM and SOP heads, through the flat table `names.ORIGINAL`.

Fine-tuned SQuAD heads (run_squad_v1.py's `cls/squad/*`, run_squad_v2.py's `start_logits/*`,
`end_logits/*`, `answer_class/*`) convert with `head_model_from_original` /
`head_model_to_original` to and from `AlbertQuestionAnswerer` / `AlbertSquadV2Model`, through
`names.ORIGINAL_SQUAD` and `names.ORIGINAL_SQUAD_V2`.
"""

import os
import re

import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf.config import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert.weights import (
    Checkpoint,
    ConversionError,
    check_whole_block_sharing,
    export_weights,
    load_weights,
    shared_groups,
)

_HUB_PREFIX = "module/"
# A variable that marks each fine-tuned SQuAD head -> (model class name, regex of its variables).
SQUAD_HEADS = {
    "cls/squad/output_weights": ("AlbertQuestionAnswerer", r"^cls/squad/"),
    "start_logits/dense/kernel": (
        "AlbertSquadV2Model",
        r"^(start_logits|end_logits|answer_class)/",
    ),
}


def read_original_config(path):
    """An `AlbertConfig` from an original albert_config.json ("gelu" is the tanh GELU there)."""
    values = files.read_json(path)
    check_whole_block_sharing(values, path)
    return AlbertConfig.from_dict(values, dialect="original", source=path)


def resolve_checkpoint_prefix(path):
    """The checkpoint prefix for `path`: a prefix itself, or a directory holding one checkpoint.

    A directory resolves through its `checkpoint` state file, or else to its only `*.index`
    file (the released archives ship `model.ckpt-best` without a state file).
    """
    if tf.io.gfile.exists(path + ".index"):
        return path
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(tf.io.gfile.glob(os.path.join(path, "*.index")))
        if len(indexes) == 1:
            return indexes[0][: -len(".index")]
        if indexes:
            raise ValueError(
                f"{path} holds several checkpoints "
                f"({', '.join(os.path.basename(i) for i in indexes)}); "
                f"pass the prefix of one, e.g. {indexes[-1][: -len('.index')]}"
            )
        raise FileNotFoundError(f"No TF1 checkpoint (*.index) in directory {path}")
    raise FileNotFoundError(
        f"No TF1 checkpoint at {path}: expected the prefix of {path}.index and "
        f"{path}.data-*, or a directory holding them"
    )


def read_original_checkpoint(prefix):
    """A `Checkpoint` over a TF1 checkpoint; a TF-Hub `module/` prefix is removed from names."""
    reader = tf.train.load_checkpoint(prefix)
    stored = reader.get_variable_to_shape_map()
    if any(".ATTRIBUTES/" in name for name in stored):
        raise ConversionError(
            f"{prefix} is a TF2 object-based checkpoint, not an original TF1 one; albert_tf's "
            f"own checkpoints and saved models load with albert_tf.load"
        )
    shapes, display = {}, {}
    for name, shape in stored.items():
        key = name[len(_HUB_PREFIX) :] if name.startswith(_HUB_PREFIX) else name
        if key in shapes:
            raise ConversionError(
                f"{prefix}: variable {key} is stored both with and without "
                f"the TF-Hub prefix {_HUB_PREFIX!r}"
            )
        shapes[key], display[key] = shape, name
    return Checkpoint(prefix, shapes, lambda key: reader.get_tensor(display[key]), display)


def from_original(checkpoint_prefix, config_path=None, ignore_variables=()):
    """An `AlbertPretrainer` holding the weights of an original ALBERT TF1 checkpoint.

    Args:
        checkpoint_prefix: e.g. ".../model.ckpt-best" (or the directory holding it).
        config_path: the original albert_config.json (default: albert_config.json beside the
            checkpoint).
        ignore_variables: regexes (re.search) of checkpoint variables to skip on purpose, e.g.
            a fine-tuned classifier's "^output_(weights|bias)$". Optimizer slots and global_step
            are always skipped.

    Returns:
        An AlbertPretrainer whose `.backbone` is the AlbertModel. Heads (and the pooler)
        missing from the checkpoint keep their fresh initialisation (a warning is logged).

    Example:
        >>> from albert_tf.convert import from_original
        >>> pretrainer = from_original("albert_base/model.ckpt-best",
        ...                            "albert_base/albert_config.json")  # doctest: +SKIP
        >>> backbone = pretrainer.backbone  # doctest: +SKIP
    """
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    prefix, config_path, config, checkpoint, ignored = _read(
        checkpoint_prefix, config_path, ignore_variables
    )
    head = squad_head(checkpoint, ignored)
    if head is not None:
        name, pattern = SQUAD_HEADS[head]
        raise ConversionError(
            f"{prefix} holds a fine-tuned SQuAD head ({head}, an {name}); read it with "
            f"head_model_from_original, or pass ignore_variables=[{pattern!r}] to take its "
            f"backbone only"
        )
    pretrainer = AlbertPretrainer(AlbertModel(config))
    load_weights(pretrainer, checkpoint, names.ORIGINAL, ignored=ignored, config_source=config_path)
    return pretrainer


def _read(checkpoint_prefix, config_path, ignore_variables):
    """(prefix, config path, AlbertConfig, Checkpoint, ignored regexes) of a TF1 checkpoint."""
    prefix = resolve_checkpoint_prefix(checkpoint_prefix)
    if config_path is None:
        config_path = os.path.join(os.path.dirname(prefix), "albert_config.json")
    config = read_original_config(config_path)
    logging.info("Converting original checkpoint %s with %s", prefix, config_path)
    ignored = names.ORIGINAL_IGNORED + tuple(re.compile(p) for p in ignore_variables)
    return prefix, config_path, config, read_original_checkpoint(prefix), ignored


def squad_head(checkpoint, ignored=()):
    """The `SQUAD_HEADS` key of the SQuAD head `checkpoint` holds (not ignored), or None."""
    found = [
        name
        for name in SQUAD_HEADS
        if name in checkpoint.shapes and not any(p.search(name) for p in ignored)
    ]
    if len(found) > 1:
        raise ConversionError(
            f"{checkpoint.location} holds both SQuAD heads ({', '.join(found)}); "
            f"ignore one with ignore_variables"
        )
    return found[0] if found else None


def head_model_from_original(
    checkpoint_prefix,
    config_path=None,
    ignore_variables=(),
    start_n_top=5,
    end_n_top=5,
    dropout=None,
):
    """The `AlbertQuestionAnswerer` or `AlbertSquadV2Model` of a fine-tuned original checkpoint.

    Args:
        checkpoint_prefix: what run_squad_v1.py / run_squad_v2.py saved (or its directory).
        config_path: the albert_config.json (default: beside the checkpoint).
        ignore_variables: regexes (re.search) of checkpoint variables to skip on purpose.
        start_n_top, end_n_top: the v2 model's beam (the original's flags; not stored).
        dropout: the head's dropout (default: 0 for v1 as the original, the original v2's
            dropout_prob 0.1 for v2).

    `cls/squad/output_weights` makes an AlbertQuestionAnswerer, `start_logits/dense/kernel`
    an AlbertSquadV2Model. The pooler is read if present (the original saves it unused).

    Example:
        >>> from albert_tf.convert import head_model_from_original
        >>> model = head_model_from_original("squad2_out/model.ckpt-best")  # doctest: +SKIP
        >>> type(model).__name__  # doctest: +SKIP
        'AlbertSquadV2Model'
    """
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

    prefix, config_path, config, checkpoint, ignored = _read(
        checkpoint_prefix, config_path, ignore_variables
    )
    head = squad_head(checkpoint, ignored)
    if head is None:
        raise ConversionError(
            f"{prefix} holds no fine-tuned SQuAD head (neither {' nor '.join(SQUAD_HEADS)}); "
            f"read pretraining checkpoints with from_original"
        )
    if SQUAD_HEADS[head][0] == "AlbertQuestionAnswerer":
        model = AlbertQuestionAnswerer(
            AlbertModel(config), dropout=0.0 if dropout is None else dropout
        )
        table = names.ORIGINAL_SQUAD
    else:
        model = AlbertSquadV2Model(
            AlbertModel(config),
            start_n_top=start_n_top,
            end_n_top=end_n_top,
            dropout=0.1 if dropout is None else dropout,
        )
        table = names.ORIGINAL_SQUAD_V2
    load_weights(model, checkpoint, table, ignored=ignored, config_source=config_path)
    return model


def write_tf1_checkpoint(prefix, arrays):
    """Writes {name: np.ndarray} as a name-based TF1 checkpoint (`prefix.index`,
    `prefix.data-*`)."""
    names_ = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names_,
        shape_and_slices=[""] * len(names_),
        tensors=[tf.convert_to_tensor(arrays[n]) for n in names_],
    )


def to_original(pretrainer, directory, checkpoint_name="model.ckpt"):
    """Writes `directory/albert_config.json` + a TF1 checkpoint with the original variable names.

    Returns the checkpoint prefix. The original code reads "gelu" as the tanh GELU; a model
    with hidden_act "gelu_erf" (HF v1 configs) keeps that name, which the original code rejects.

    Example:
        >>> from albert_tf.convert.original import to_original
        >>> to_original(pretrainer, "/tmp/albert_tf1")  # doctest: +SKIP
        '/tmp/albert_tf1/model.ckpt'
    """
    from albert_tf.models.pretrainer import AlbertPretrainer

    if not isinstance(pretrainer, AlbertPretrainer):
        raise TypeError(
            f"to_original needs an AlbertPretrainer, got {type(pretrainer).__name__}"
            f"{' (use head_model_to_original)' if _squad_table(pretrainer) else ''}"
        )
    return _write(pretrainer, names.ORIGINAL, directory, checkpoint_name)


def _squad_table(model):
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

    if isinstance(model, AlbertSquadV2Model):
        return names.ORIGINAL_SQUAD_V2
    if isinstance(model, AlbertQuestionAnswerer):
        return names.ORIGINAL_SQUAD
    return None


def head_model_to_original(model, directory, checkpoint_name="model.ckpt"):
    """Writes an `AlbertQuestionAnswerer` / `AlbertSquadV2Model` as the original's fine-tuned
    SQuAD checkpoint (backbone with pooler + `cls/squad/*`, or the v2 head scopes) and its
    albert_config.json; returns the checkpoint prefix.

    Example:
        >>> from albert_tf.convert import head_model_to_original
        >>> head_model_to_original(squad_model, "/tmp/squad_tf1")  # doctest: +SKIP
        '/tmp/squad_tf1/model.ckpt'
    """
    table = _squad_table(model)
    if table is None:
        raise TypeError(
            f"head_model_to_original needs an AlbertQuestionAnswerer or "
            f"AlbertSquadV2Model, got {type(model).__name__}"
        )
    return _write(model, table, directory, checkpoint_name)


def _write(model, table, directory, checkpoint_name):
    """albert_config.json + the TF1 checkpoint of `model` named by `table`; the prefix."""
    config = model.backbone.config
    groups = shared_groups(config)
    if config.hidden_act == "gelu_erf":
        logging.warning(
            "hidden_act 'gelu_erf' has no name in the original albert_config.json "
            "(its 'gelu' is the tanh approximation); the original code will reject it"
        )
    values = config.to_json_dict("original")
    values.pop("sharing")
    values["num_hidden_groups"] = groups
    tf.io.gfile.makedirs(directory)
    prefix = os.path.join(directory, checkpoint_name)
    write_tf1_checkpoint(prefix, export_weights(model, table))
    files.write_json(os.path.join(directory, "albert_config.json"), values)
    logging.info("Wrote an original TF1 checkpoint to %s", prefix)
    return prefix
