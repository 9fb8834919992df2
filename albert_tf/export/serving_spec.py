"""What a task serves, in the form the export builders consume.

A fine-tuning task's `serving_spec(model, max_seq_length=None)` returns a `ServingSpec`: how to
make its `SavedModelSpec` (read by `saved_model.build`, the one SavedModel builder) and its
`LiteRTSpec` (read by `litert.build`, the one LiteRT builder). Each part is made when asked
for: a LiteRT export never builds the SavedModel graph and the reverse.
"""

import dataclasses
from typing import Any, Callable, Optional


@dataclasses.dataclass(frozen=True)
class SavedModelSpec:
    """A SavedModel's pieces.

    Attributes:
        tracked: the objects the archive tracks (the served model copy, its text layers).
        endpoints: signature name -> (function, input signature); "serving_default" first.
        description: written as assets.extra/albert_tf.json ("kind" names the export).
        warmup: TF Serving warmup request batches of serving_default (dicts of input name ->
            list of values).
    """

    tracked: tuple
    endpoints: dict
    description: dict
    warmup: tuple


@dataclasses.dataclass(frozen=True)
class LiteRTSpec:
    """A `.tflite` export's pieces and the reference it is measured against.

    Attributes:
        function: the `tf.function` (raw text in) converted to each variant.
        inputs: the dev inputs measured on: input name -> list of str.
        calibration: (count, batch_size) -> "int8" calibration batches (lists of arrays in
            the signature's order).
        run: (path, inputs, batch_size) -> the `.tflite` file's outputs (NumPy).
        reference: inputs -> the reference's outputs on them.
        header: reference outputs -> the report's fields before "variants".
        score: (outputs, reference outputs) -> the variant's agreement fields.
        format_report: report -> its text table.
        unit: what the dev inputs are counted in (texts, words, questions).
    """

    function: Any
    inputs: dict
    calibration: Callable
    run: Callable
    reference: Callable
    header: Callable
    score: Callable
    format_report: Callable
    unit: str = "rows"


@dataclasses.dataclass(frozen=True)
class ServingSpec:
    """A task's serving: makers of its SavedModel and LiteRT parts.

    Attributes:
        kind: what is served (the task's kind).
        saved_model: (**options) -> `SavedModelSpec`.
        litert: (**options) -> `LiteRTSpec`; None when the task has no LiteRT export.
    """

    kind: str
    saved_model: Callable[..., SavedModelSpec]
    litert: Optional[Callable[..., LiteRTSpec]] = None

    def litert_spec(self, **options):
        """The `LiteRTSpec` (ValueError when the task has no LiteRT export)."""
        if self.litert is None:
            raise ValueError(
                f"{self.kind!r} has no LiteRT export (LiteRT: classification, "
                "token_classification and squad); its SavedModel serves it"
            )
        return self.litert(**options)
