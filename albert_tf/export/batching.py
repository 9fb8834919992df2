"""TF Serving's server-side batching parameters: the --batching_parameters_file of an export.

`tensorflow_model_server --enable_batching --batching_parameters_file=FILE` batches concurrent
requests of every model it serves; the SavedModel exports write the parameters measured to
serve them best (`SERVING_PARAMETERS`, docs/benchmarks.md, serving) to
`assets.extra/batching_parameters.txt`. `albert_tf.benchmarks.concurrency` emulates the
server's batching with these parameters.
"""

import dataclasses
import os
import re


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
    """TF Serving's batching parameters, each defaulting to what the server uses when the field is
    left out of the file (num_batch_threads: the number of CPUs). `allowed_batch_sizes` must
    increase and end at `max_batch_size`, as the server checks when it loads the model.

    >>> parameters = BatchingParameters(max_batch_size=8, batch_timeout_micros=2000,
    ...                                 num_batch_threads=2, allowed_batch_sizes=(4, 8))
    >>> print(parameters.to_text_proto(), end="")
    max_batch_size { value: 8 }
    batch_timeout_micros { value: 2000 }
    max_enqueued_batches { value: 10 }
    num_batch_threads { value: 2 }
    allowed_batch_sizes: 4
    allowed_batch_sizes: 8
    >>> parse_text_proto(parameters.to_text_proto()) == parameters
    True
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    allowed_batch_sizes: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "allowed_batch_sizes", tuple(self.allowed_batch_sizes))
        for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.batch_timeout_micros < 0:
            raise ValueError(f"batch_timeout_micros must be >= 0, got {self.batch_timeout_micros}")
        sizes = self.allowed_batch_sizes
        if sizes and (
            sizes[0] < 1
            or any(a >= b for a, b in zip(sizes, sizes[1:]))
            or sizes[-1] != self.max_batch_size
        ):
            raise ValueError(
                f"allowed_batch_sizes {list(sizes)} must be positive, increasing and end at "
                f"max_batch_size ({self.max_batch_size})"
            )

    def to_text_proto(self):
        """The batching_parameters_file text: the fields in the message's field-number order."""
        lines = [f"{name} {{ value: {getattr(self, name)} }}" for name in WRAPPED_FIELDS]
        lines += [f"allowed_batch_sizes: {size}" for size in self.allowed_batch_sizes]
        return "\n".join(lines) + "\n"


# The Int64Value fields of TF Serving's BatchingParameters, in field-number order (1-4).
WRAPPED_FIELDS = (
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "num_batch_threads",
)

_FIELD = re.compile(
    r"(\w+)\s*(?::?\s*\{\s*value\s*:\s*([^}]*?)\s*\}|:\s*\[([^\]]*)\]|:\s*([^\s\[{]+))"
)


def _count(name, value):
    if not re.fullmatch(r"\d+", value.strip()):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def parse_text_proto(text):
    """The BatchingParameters that a batching_parameters_file's `text` sets (omitted fields take
    the server's defaults). Fields this emulation does not model, such as thread_pool_name or
    pad_variable_length_inputs, are refused with ValueError."""
    text = re.sub(r"#[^\n]*", "", text)
    fields, allowed = {}, []
    for match in _FIELD.finditer(text):
        name, wrapped, listed, scalar = match.groups()
        if name in WRAPPED_FIELDS and wrapped is not None:
            if name in fields:
                raise ValueError(f"{name} is set twice")
            fields[name] = _count(name, wrapped)
        elif name == "allowed_batch_sizes" and wrapped is None:
            values = [scalar] if scalar is not None else [v for v in listed.split(",") if v.strip()]
            allowed += [_count(name, v) for v in values]
        else:
            raise ValueError(f"unsupported batching parameter: {match.group(0)!r}")
    rest = _FIELD.sub("", text).strip()
    if rest:
        raise ValueError(f"cannot read batching parameters near {rest[:60]!r}")
    return BatchingParameters(**fields, allowed_batch_sizes=allowed)


# What the exports ship (assets.extra/batching_parameters.txt): the best of those measured for
# single-sentence clients on a 2-core CPU (docs/benchmarks.md, serving), with TensorFlow's
# intra-op threads at 1 so that each batch thread runs one batch on one core: set
# num_batch_threads to the serving machine's core count.
SERVING_PARAMETERS = BatchingParameters(
    max_batch_size=8, batch_timeout_micros=1000, max_enqueued_batches=16, num_batch_threads=2
)
BATCHING_FILE = "batching_parameters.txt"
