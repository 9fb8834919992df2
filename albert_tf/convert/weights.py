"""Applies a name table (names.py) to a model: import with full checking, and export.

Import checks, each a `ConversionError` that names the variable:
  * a variable the table needs is missing (a required part, or half of an optional one);
  * a variable's shape does not match the model the config describes (the message names the
    config fields behind the expected shape);
  * the checkpoint holds variables nothing uses (after the format's explicit ignore list), e.g.
    extra groups, a projection the config does not have, or fine-tuning heads.
Optional parts (pooler, MLM head, SOP head) absent as a whole keep their fresh initialisation,
with a logged warning; so do parts a format cannot hold (rows whose source is None).
"""

import re

import numpy as np
from absl import logging

from albert_tf.convert import names
from albert_tf.errors import UserError

_MAX_LISTED = 8


class ConversionError(UserError, ValueError):
    """A checkpoint does not fit the model its config describes (names the variable)."""


class Checkpoint:
    """A read-only view of a foreign checkpoint: names, shapes and lazily read arrays.

    Args:
        location: the file or prefix, for messages.
        shapes: {name: shape tuple} of every stored variable.
        read: name -> np.ndarray.
        display: optional {name: name as stored}, when the reader renamed variables.
    """

    def __init__(self, location, shapes, read, display=None):
        self.location = location
        self.shapes = {name: tuple(int(d) for d in shape) for name, shape in shapes.items()}
        self._read = read
        self._display = dict(display or {})

    def read(self, name):
        return np.asarray(self._read(name))

    def display(self, name):
        return self._display.get(name, name)


def _listed(items):
    items = sorted(items)
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def model_variables(pretrainer):
    """{target name: variable} for an AlbertPretrainer: variable paths without the model name."""
    prefixes = (pretrainer.backbone.name + "/", pretrainer.name + "/")
    variables = {}
    for variable in pretrainer.weights:
        if not variable.trainable and "seed_generator" in variable.path:
            continue  # dropout RNG state, not a model weight
        key = next(
            (variable.path[len(p) :] for p in prefixes if variable.path.startswith(p)),
            variable.path,
        )
        if key not in names.TARGET_SHAPES:
            raise ConversionError(
                f"Model variable {variable.path} has no conversion rule (known: "
                f"{_listed(names.TARGET_SHAPES)}); the model and albert_tf.convert.names disagree"
            )
        variables[key] = variable
    return variables


def _expand(rule, variable):
    """[(source name, (g, k) or None)] covered by one rule for the model's variable."""
    if not names.is_stacked(rule.target):
        return [(rule.source, None)]
    groups, inner = variable.shape[0], variable.shape[1]
    return [(rule.source.format(g=g, k=k), (g, k)) for g in range(groups) for k in range(inner)]


def _plan(table, variables):
    """[(source name, rule, (g, k) or None)] for every model variable; each needs a rule (a
    rule whose source is None covers a variable the format has no counterpart for)."""
    plan = []
    covered = set()
    for rule in table:
        variable = variables.get(rule.target)
        if variable is None:
            continue  # e.g. the projection when E == H
        covered.add(rule.target)
        if rule.source is None:
            continue
        plan += [(source, rule, index) for source, index in _expand(rule, variable)]
    uncovered = set(variables) - covered
    if uncovered:
        raise ConversionError(f"No rule in the table covers model variable(s) {_listed(uncovered)}")
    return plan


def _transform(array, transform, shape):
    """The array `transform` makes of `array`; `shape` is the result's (for a Reshape)."""
    if transform == names.TRANSPOSE:
        return np.transpose(array)
    if isinstance(transform, names.Reshape):
        return np.reshape(array, shape)
    return array


def _stored_shape(transform, config):
    """The foreign shape of a Reshape rule, from the config's fields."""
    return tuple(int(getattr(config, field)) for field in transform.shape)


def _dims(rule, config):
    shape = names.TARGET_SHAPES[rule.target]
    if isinstance(rule.transform, names.Reshape):
        shape = shape + rule.transform.shape
    fields = dict.fromkeys(
        f for f in shape if isinstance(f, str) and f not in ("groups", "inner", "head_size")
    )
    return ", ".join(f"{f}={getattr(config, f)}" for f in fields)


def _stacked_pattern(rule):
    pattern = re.escape(rule.source).replace(r"\{g\}", r"(\d+)").replace(r"\{k\}", r"(\d+)")
    return re.compile(pattern + "$")


def _unused_hint(unused, table, config):
    """Explains the usual cause of unused variables: a group structure or E/H disagreement."""
    hints = []
    indices = []
    for rule in table:
        if rule.source and "{g}" in rule.source:
            pattern = _stacked_pattern(rule)
            indices += [tuple(int(i) for i in m.groups()) for m in map(pattern.match, unused) if m]
    if indices:
        groups = max(g for g, _ in indices) + 1
        inner = max(k for _, k in indices) + 1
        hints.append(
            f"the checkpoint has encoder blocks up to group {groups - 1}, inner group "
            f"{inner - 1}, but the config gives num_hidden_groups={config.num_hidden_groups}, "
            f"inner_group_num={config.inner_group_num} (sharing={config.sharing!r})"
        )
    projection = {r.source for r in table if r.part == "projection"}
    if projection & set(unused) and not config.has_embedding_projection:
        hints.append(
            f"the checkpoint has an embedding projection but the config has embedding_size == "
            f"hidden_size ({config.hidden_size}), where the model has none"
        )
    return ("; " + "; ".join(hints)) if hints else ""


def load_weights(pretrainer, checkpoint, table, ignored=(), config_source="the config"):
    """Assigns every model variable from `checkpoint` according to `table`.

    Args:
        pretrainer: an AlbertPretrainer built from the checkpoint's config.
        checkpoint: a `Checkpoint`.
        table: a tuple of `names.Rule`.
        ignored: compiled regexes of checkpoint names that are not model weights (optimizer
            slots, buffers, user-requested skips); each one skipped is logged.
        config_source: where the config came from, for messages.

    Returns:
        {"loaded": [part, ...], "initialized": [part, ...], "ignored": [name, ...]}.
    """
    config = pretrainer.backbone.config
    variables = model_variables(pretrainer)
    absent = sorted(
        {r.part for r in table if r.source is None and r.target in variables}
        - {r.part for r in table if r.source is not None and r.target in variables}
    )
    skipped = sorted(n for n in checkpoint.shapes if any(p.search(n) for p in ignored))
    if skipped:
        logging.info(
            "%s: ignoring %d non-model variables (optimizer slots, step counters, "
            "buffers), e.g. %s",
            checkpoint.location,
            len(skipped),
            _listed(skipped),
        )
    available = set(checkpoint.shapes) - set(skipped)

    wanted = {}  # part -> [(source name, rule, index)]
    for source, rule, index in _plan(table, variables):
        wanted.setdefault(rule.part, []).append((source, rule, index))

    loaded, initialized, used = [], [], set()
    for part in absent:
        logging.warning(
            "%s: this format has no %s weights; they keep their fresh random initialisation",
            checkpoint.location,
            part,
        )
        initialized.append(part)
    for part, entries in wanted.items():
        missing = [checkpoint.display(s) for s, _, _ in entries if s not in available]
        if missing and part in names.OPTIONAL_PARTS and len(missing) == len(entries):
            logging.warning(
                "%s has no %s weights (e.g. %s); they keep their fresh random initialisation",
                checkpoint.location,
                part,
                missing[0],
            )
            initialized.append(part)
            continue
        if missing:
            hint = ""
            if any(
                index is not None for s, _, index in entries if checkpoint.display(s) in missing
            ):
                hint = (
                    f" (the config gives num_hidden_groups={config.num_hidden_groups}, "
                    f"inner_group_num={config.inner_group_num}, sharing={config.sharing!r})"
                )
            elif part == "projection":
                hint = (
                    f" (the config has embedding_size={config.embedding_size} != "
                    f"hidden_size={config.hidden_size}, which needs an embedding projection)"
                )
            raise ConversionError(
                f"{checkpoint.location}: missing variable {missing[0]} for the {part} weights"
                f"{hint}; {len(missing)} missing in all: {_listed(missing)}"
            )
        used.update(s for s, _, _ in entries)
        loaded.append(part)

    # Shapes (the config's sizes), then unused names (its structure), then read and assign: a
    # failing conversion reads no tensor and changes nothing.
    for part in loaded:
        for source, rule, index in wanted[part]:
            variable = variables[rule.target]
            expected = tuple(variable.shape[2:] if index is not None else variable.shape)
            stored = checkpoint.shapes[source]
            if rule.transform == names.TRANSPOSE:
                needed = tuple(reversed(expected))
            elif isinstance(rule.transform, names.Reshape):
                needed = _stored_shape(rule.transform, config)
            else:
                needed = expected
            if stored != needed:
                raise ConversionError(
                    f"{checkpoint.location}: variable {checkpoint.display(source)} has shape "
                    f"{list(stored)} but the model built from {config_source} needs "
                    f"{list(needed)} ({_dims(rule, config)}): the config does not match "
                    f"the checkpoint"
                )
    unused = sorted(available - used)
    if unused:
        shown = [checkpoint.display(n) for n in unused]
        raise ConversionError(
            f"{checkpoint.location}: unexpected variable {shown[0]} is not used by the model built "
            f"from {config_source}{_unused_hint(unused, table, config)}; {len(unused)} unused in "
            f"all: {_listed(shown)} (pass them as ignored variables to skip them on purpose)"
        )

    values = {}
    for part in loaded:
        for source, rule, index in wanted[part]:
            variable = variables[rule.target]
            shape = tuple(variable.shape[2:] if index is not None else variable.shape)
            array = _transform(checkpoint.read(source), rule.transform, shape)
            if index is None:
                values[rule.target] = array
            else:
                if rule.target not in values:
                    values[rule.target] = np.zeros(variable.shape, variable.dtype)
                values[rule.target][index] = array
    for target, array in values.items():
        variables[target].assign(np.asarray(array, variables[target].dtype))
    logging.info(
        "%s: loaded %d variables (%s)%s",
        checkpoint.location,
        len(used),
        ", ".join(loaded),
        f"; freshly initialised: {', '.join(initialized)}" if initialized else "",
    )
    return {"loaded": loaded, "initialized": initialized, "ignored": skipped}


def check_whole_block_sharing(values, path):
    """Foreign configs share whole blocks per group; a `sharing` key other than "all" is an error.

    Removes the key (our own config.json files carry it) from the dict `values`.
    """
    sharing = values.pop("sharing", "all")
    if sharing != "all":
        raise ConversionError(
            f"{path}: sharing={sharing!r} is an albert_tf setting; the original and Hugging Face "
            f"formats share whole blocks per group (num_hidden_groups), so this is not one of "
            f"their configs (albert_tf directories load with albert_tf.load)"
        )


def shared_groups(config):
    """The num_hidden_groups of an equivalent whole-block-sharing model (HF, original).

    sharing="none" is one group per layer; "attention"/"ffn" sharing is expressible only when
    the attention and FFN group counts agree.
    """
    if config.attention_groups != config.ffn_groups:
        raise ConversionError(
            f"sharing={config.sharing!r} with num_hidden_groups={config.num_hidden_groups} has "
            f"{config.attention_groups} attention but {config.ffn_groups} feed-forward weight "
            f"groups; the original and Hugging Face ALBERT share whole blocks and cannot "
            f"express that"
        )
    return config.attention_groups


def export_weights(pretrainer, table):
    """{checkpoint name: float32 np.ndarray} for every model variable, named by `table`."""
    variables = model_variables(pretrainer)
    config = pretrainer.backbone.config
    values = {target: np.asarray(v.numpy(), np.float32) for target, v in variables.items()}
    arrays = {}
    for source, rule, index in _plan(table, variables):
        value = values[rule.target] if index is None else values[rule.target][index]
        shape = (
            _stored_shape(rule.transform, config)
            if isinstance(rule.transform, names.Reshape)
            else None
        )
        arrays[source] = np.ascontiguousarray(_transform(value, rule.transform, shape))
    return arrays
