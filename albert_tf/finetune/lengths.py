"""Sequence lengths of a task's data: percentiles, the `--max_seq_length` they suggest, and how
far an evaluation split's padding can be cut.

Lengths are in SentencePiece pieces with [CLS] and [SEP] (`FinetuneTask.sequence_lengths`).
When 99% of the examples fit in half of `--max_seq_length` or less, most of each window is
padding: the hint suggests the 99th percentile rounded up to a multiple of 16 and says what
share of the examples it would truncate.

>>> summary = length_summary([12] * 90 + [30] * 9 + [300], max_seq_length=512)
>>> [summary[k] for k in ("p50", "p90", "p99", "max", "suggested_max_seq_length")]
[12, 12, 30, 300, 32]
>>> print(hint(summary))  # doctest: +ELLIPSIS
hint: 99% of the 100 train examples fit in 30 pieces (max 300) but --max_seq_length=512: ...
"""

import numpy as np

PERCENTILES = (50, 90, 99)
#: The suggested --max_seq_length is a multiple of this.
HINT_MULTIPLE = 16


def round_up(value, multiple):
    """`value` rounded up to a multiple of `multiple`.

    >>> round_up(58, 16), round_up(64, 16)
    (64, 64)
    """
    return -(-int(value) // multiple) * multiple


def length_summary(lengths, max_seq_length, split="train"):
    """{"split", "examples", "p50", "p90", "p99", "max", "max_seq_length", "truncated" (examples
    longer than max_seq_length), "suggested_max_seq_length" (None without a hint),
    "truncated_at_suggested"} of a split's `lengths`; pQ is the smallest length that Q% of the
    examples do not exceed."""
    lengths = np.asarray(lengths, np.int64).reshape(-1)
    summary = {"split": split, "examples": int(lengths.size), "max_seq_length": int(max_seq_length)}
    if not lengths.size:
        return summary
    for q in PERCENTILES:
        summary[f"p{q}"] = int(np.percentile(lengths, q, method="inverted_cdf"))
    summary["max"] = int(lengths.max())
    summary["truncated"] = int(np.sum(lengths > max_seq_length))
    suggested = None
    if summary["p99"] <= max_seq_length // 2:
        suggested = min(int(max_seq_length), round_up(max(summary["p99"], 1), HINT_MULTIPLE))
        summary["truncated_at_suggested"] = int(np.sum(lengths > suggested))
    summary["suggested_max_seq_length"] = suggested
    return summary


def describe(summary):
    """One log line of a `length_summary`."""
    if summary["examples"] == 0:
        return f"{summary['split']}: no examples"
    return (
        f"{summary['split']} lengths in pieces with [CLS]/[SEP] ({summary['examples']} examples): "
        f"p50 {summary['p50']}, p90 {summary['p90']}, p99 {summary['p99']}, max {summary['max']}"
        f"; {summary['truncated']} longer than --max_seq_length={summary['max_seq_length']}"
    )


def hint(summary):
    """The hint line when most of each window is padding (see the module docstring), else
    None."""
    suggested = summary.get("suggested_max_seq_length")
    if not suggested or suggested >= summary["max_seq_length"]:
        return None
    share = summary["truncated_at_suggested"] / summary["examples"]
    return (
        f"hint: 99% of the {summary['examples']} {summary['split']} examples fit in "
        f"{summary['p99']} pieces (max {summary['max']}) but --max_seq_length="
        f"{summary['max_seq_length']}: most of each window is padding. --max_seq_length="
        f"{suggested} would truncate {summary['truncated_at_suggested']} of them ({share:.1%}) "
        "and bound every batch's length (a batch is as long as its longest example; on TPU, "
        "every batch is --max_seq_length long)"
    )


def padded_length(lengths, max_seq_length, bucket=8):
    """The length an evaluation split's batches can be cut to: its longest example rounded up
    to a multiple of `bucket`, at most `max_seq_length` (which it is without `lengths`).

    >>> padded_length([5, 17, 9], 128), padded_length(None, 128), padded_length([700], 512)
    (24, 128, 512)
    """
    if lengths is None or not len(lengths):
        return int(max_seq_length)
    return min(int(max_seq_length), round_up(max(int(np.max(lengths)), 1), bucket))
