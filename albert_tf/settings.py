"""Settings dataclasses as absl flags: one source for every name, default and help text.

A settings class is a dataclass whose fields carry their help text (and, for a closed set of
values, their choices) in the field metadata. `define_flags` declares one absl flag per field;
`from_flags` builds the dataclass back from parsed flags. Field types map to flag types:
bool -> DEFINE_bool, int -> DEFINE_integer, float -> DEFINE_float, str -> DEFINE_string (or
DEFINE_enum with choices), list -> DEFINE_list; `Optional[...]` defaults to None.

>>> import dataclasses
>>> from absl import flags
>>> @dataclasses.dataclass
... class Example:
...     steps: int = setting(10, "Training steps.")
...     mode: str = setting("fast", "Speed.", choices=("fast", "slow"))
>>> values = flags.FlagValues()
>>> define_flags(Example, values)
>>> _ = values(["prog", "--steps=3"])
>>> from_flags(Example, values)
Example(steps=3, mode='fast')
"""

import dataclasses
import re
import typing

from albert_tf.errors import UserError


class InvalidFlagError(UserError, ValueError):
    """A setting is invalid; the message names its flag."""


def setting(default, help_text, choices=None, required=False, bounds=None):
    """A dataclass field with its flag help (and choices); `required` fields have no default;
    `bounds` (">= 1", "> 0", "in [3, 512]", "in [0, 1)") are checked by `check_bounds`."""
    if bounds is not None:
        _parse_bounds(bounds)  # a malformed bound fails where it is declared
    metadata = {
        "help": help_text,
        "choices": tuple(choices) if choices else None,
        "required": required,
        "bounds": bounds,
    }
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _parse_bounds(bounds):
    """(low, low included, high, high included) of a `setting` bound; None for no limit."""
    match = re.fullmatch(r"(>=?) (-?[\d.]+)|in ([\[(])(-?[\d.]+), (-?[\d.]+)([\])])", bounds)
    if not match:
        raise ValueError(f"bounds {bounds!r}: expected '>= N', '> N' or 'in [A, B]' ('(', ')')")
    operator, limit, opening, low, high, closing = match.groups()
    if operator:
        return float(limit), operator == ">=", None, False
    return float(low), opening == "[", float(high), closing == "]"


def in_bounds(value, bounds):
    """Whether `value` satisfies `bounds` (see `setting`).

    >>> in_bounds(0, ">= 1"), in_bounds(0.5, "in [0, 1)"), in_bounds(1.0, "in [0, 1)")
    (False, True, False)
    """
    low, low_included, high, high_included = _parse_bounds(bounds)
    above = value >= low if low_included else value > low
    below = high is None or (value <= high if high_included else value < high)
    return above and below


def check_bounds(params):
    """Raises InvalidFlagError "--NAME must be BOUNDS, got VALUE" for the first field of the
    dataclass instance `params` (in field order) whose value is outside its `bounds`; None
    passes."""
    for field in dataclasses.fields(params):
        bounds, value = field.metadata.get("bounds"), getattr(params, field.name)
        if bounds and value is not None and not in_bounds(value, bounds):
            raise InvalidFlagError(f"--{field.name} must be {bounds}, got {value}")


def _base_type(annotation):
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(kinds[0])
    if origin in (list, typing.List):
        return list
    return annotation


def define_flags(cls, flag_values=None, skip=()):
    """Declares one absl flag per field of dataclass `cls` (fields named in `skip` excepted)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        meta = field.metadata
        if "help" not in meta:
            raise TypeError(
                f"{cls.__name__}.{field.name} has no help text: declare it with "
                "setting(default, help)"
            )
        default = (
            field.default_factory()
            if field.default_factory is not dataclasses.MISSING
            else field.default
        )
        kind = _base_type(hints[field.name])
        args = dict(name=field.name, default=default, help=meta["help"], flag_values=flag_values)
        if meta.get("choices"):
            flags.DEFINE_enum(enum_values=list(meta["choices"]), **args)
        elif kind is bool:
            flags.DEFINE_bool(**args)
        elif kind is int:
            flags.DEFINE_integer(**args)
        elif kind is float:
            flags.DEFINE_float(**args)
        elif kind is list:
            flags.DEFINE_list(**args)
        else:
            flags.DEFINE_string(**args)
        if meta.get("required"):
            flags.mark_flag_as_required(field.name, flag_values=flag_values)


def from_flags(cls, flag_values=None, **overrides):
    """An instance of `cls` with every field read from the parsed flags (then `overrides`)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    values = {
        f.name: getattr(flag_values, f.name)
        for f in dataclasses.fields(cls)
        if f.name in flag_values and f.name not in overrides
    }
    return cls(**values, **overrides)
