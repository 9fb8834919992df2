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
import typing

from albert_tf.errors import UserError


class InvalidFlagError(UserError, ValueError):
    """A setting is invalid; the message names its flag."""


def setting(default, help_text, choices=None, required=False):
    """A dataclass field with its flag help (and choices); `required` fields have no default."""
    metadata = {
        "help": help_text,
        "choices": tuple(choices) if choices else None,
        "required": required,
    }
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


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
