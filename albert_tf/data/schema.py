"""The pretraining TFRecord schema (the original ALBERT feature names and dtypes) and its codec.

Records hold one `tf.train.Example` each:

| feature | dtype | length |
|---|---|---|
| input_ids, input_mask, segment_ids, token_boundary | int64 | max_seq_length |
| masked_lm_positions, masked_lm_ids | int64 | max_predictions_per_seq |
| masked_lm_weights | float32 | max_predictions_per_seq |
| next_sentence_labels | int64 | 1 (SOP: 0 = in order, 1 = swapped / random) |

Unmasked records (`create_pretraining_data --no_masking`, for on-the-fly masking) leave out the
three masked_lm_* features. `encode_example` writes the protobuf wire format in pure Python
(no TensorFlow import, so worker processes stay light, and map entries in sorted order, so the
bytes are deterministic); TensorFlow parses it as any other `tf.train.Example`.

>>> data = encode_example({"input_ids": [2, 5, 3]}, {"masked_lm_weights": [1.0]})
>>> isinstance(data, bytes)
True
"""

import functools
import struct
from typing import Dict, Sequence

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
LABEL_FEATURE = "next_sentence_labels"
FLOAT_FEATURES = ("masked_lm_weights",)

# Record feature name -> model input name (TF-Hub / Model Garden names used by albert_tf models).
MODEL_INPUT_NAMES = {
    "input_ids": "input_word_ids",
    "input_mask": "input_mask",
    "segment_ids": "input_type_ids",
    "masked_lm_positions": "masked_lm_positions",
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "next_sentence_labels",
}


def feature_spec(
    max_seq_length: int,
    max_predictions_per_seq: int,
    masked: bool = True,
    token_boundary: bool = False,
) -> dict:
    """`tf.io.FixedLenFeature`s for `tf.io.parse_example`.

    token_boundary is optional in the original tool's readers, so it is parsed only when asked.
    """
    import tensorflow as tf

    names = [(name, max_seq_length) for name in SEQUENCE_FEATURES]
    if not token_boundary:
        names = [(name, length) for name, length in names if name != "token_boundary"]
    if masked:
        names += [(name, max_predictions_per_seq) for name in PREDICTION_FEATURES]
    names.append((LABEL_FEATURE, 1))
    return {
        name: tf.io.FixedLenFeature([length], tf.float32 if name in FLOAT_FEATURES else tf.int64)
        for name, length in names
    }


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 -> two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@functools.lru_cache(maxsize=1)
def _varint_table() -> list:
    """Encodings of 0 .. 2**16 - 1 (piece ids and positions), built once."""
    return [_varint(i) for i in range(1 << 16)]


def _packed_varints(values: Sequence[int]) -> bytes:
    """The payload of a packed repeated int64 field."""
    if not values:
        return b""
    low, high = min(values), max(values)
    if low >= 0 and high < 128:  # masks, segment ids, boundaries, labels: one byte each
        return bytes(values)
    table = _varint_table()
    if low >= 0 and high < len(table):
        return b"".join(map(table.__getitem__, values))
    return b"".join(_varint(int(v)) for v in values)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2); field numbers here are < 16 (one-byte tags)."""
    size = len(payload)
    return bytes((number << 3 | 2,)) + (bytes((size,)) if size < 128 else _varint(size)) + payload


def encode_example(
    int_features: Dict[str, Sequence[int]], float_features: Dict[str, Sequence[float]] = None
) -> bytes:
    """Serializes a tf.train.Example holding int64 and float lists (packed encoding)."""
    features = {}
    for name, values in int_features.items():
        features[name] = _field(3, _field(1, _packed_varints(list(values))))  # int64_list
    for name, values in (float_features or {}).items():
        features[name] = _field(
            2, _field(1, struct.pack(f"<{len(values)}f", *values))
        )  # float_list
    entries = b"".join(
        _field(1, _field(1, name.encode("utf-8")) + _field(2, feature))
        for name, feature in sorted(features.items())
    )
    return _field(1, entries)  # Example.features


def pad(values: Sequence, length: int, fill=0) -> list:
    """values + fill up to `length` (values must not be longer)."""
    if len(values) > length:
        raise ValueError(f"{len(values)} values do not fit in a feature of length {length}")
    return list(values) + [fill] * (length - len(values))


def encode_instance(
    input_ids,
    segment_ids,
    token_boundary,
    next_sentence_label: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    masked_lm_positions=None,
    masked_lm_ids=None,
) -> bytes:
    """One instance as a serialized Example, zero-padded like the original tool.

    With masked_lm_positions=None the record is unmasked (no masked_lm_* features).
    """
    ints = {
        "input_ids": pad(input_ids, max_seq_length),
        "input_mask": pad([1] * len(input_ids), max_seq_length),
        "segment_ids": pad(segment_ids, max_seq_length),
        "token_boundary": pad(token_boundary, max_seq_length),
        LABEL_FEATURE: [int(next_sentence_label)],
    }
    floats = {}
    if masked_lm_positions is not None:
        ints["masked_lm_positions"] = pad(masked_lm_positions, max_predictions_per_seq)
        ints["masked_lm_ids"] = pad(masked_lm_ids, max_predictions_per_seq)
        floats["masked_lm_weights"] = pad(
            [1.0] * len(masked_lm_positions), max_predictions_per_seq, 0.0
        )
    return encode_example(ints, floats)
