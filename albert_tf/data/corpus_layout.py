"""Refuses a corpus file read as --input_format=sentences that holds one document per line.

The "sentences" format is ALBERT's: one sentence per line, a blank line between documents. A
dump with one document per line and no blank line, read that way, becomes one huge document
whose "sentences" are whole documents: each is cut to the window and sentence order is lost
(nearly every SOP label 1). Before any work, the first 64 KiB of each file (the bytes
`corpora.check_text_file` reads) are sampled, and the file is refused when:

1. more than half (`MOSTLY`) of its non-blank lines are longer than the window, max_seq_length
   - 3 pieces: most instances would then be one cut line paired with another document's text,
   whatever the layout. On the sentence-per-line corpora at hand (the test corpus, the demo's
   and builtin:docstrings) at most 11% of lines are that long at max_seq_length=64 and 2% at
   128 (44% at 32 with a 1000-piece vocabulary; 66-84% at 16, refused);
2. or the sample is one document (no blank line between its lines) and more than half of its
   lines are longer than the window or hold several sentences (`albert_tf.text.sentences`;
   under 0.5% of the lines of those corpora do, 90% of a dump of the test corpus's documents).

A book written one sentence per line without blank lines passes (its lines are short single
sentences); one written a paragraph per line does not: read it with --input_format=lines, or
as it is with --nocheck_input_format. A cut last line of the sample counts only when it already
qualifies.

>>> sample = sample_layout(b"One doc. Its second sentence.\\nAnother doc. With two sentences.\\n",
...                        count_pieces=lambda line: len(line.split()), max_seq_length=64)
>>> sample
LayoutSample(lines=2, long_lines=0, multi_sentence_lines=2, one_document=True, whole_file=True)
>>> print(refusal(sample, max_seq_length=64))  # doctest: +NORMALIZE_WHITESPACE
the whole file is one document (no blank line) and 2 of its 2 lines (100%) hold several
sentences: it looks like one document per line; pass --input_format=lines (or
--nocheck_input_format to read it as it is)
"""

import dataclasses
from typing import Callable, Optional

from albert_tf.data.corpora import SNIFF_BYTES
from albert_tf.data.task_spec import DataError
from albert_tf.text.sentences import split_sentences

MOSTLY = 0.5  # more than this fraction of the sampled lines
FLAG = "--input_format=lines"
OVERRIDE = "--nocheck_input_format"


@dataclasses.dataclass(frozen=True)
class LayoutSample:
    """Counts of the non-blank lines of a file's first `SNIFF_BYTES`."""

    lines: int
    long_lines: int  # more than max_seq_length - 3 pieces
    multi_sentence_lines: int  # several sentences (not counted again when long)
    one_document: bool  # no blank line between two non-blank lines
    whole_file: bool  # the sample is the whole file


def sample_layout(
    head: bytes, count_pieces: Callable[[str], int], max_seq_length: int
) -> LayoutSample:
    """The `LayoutSample` of `head`, a file's first bytes (all of it when shorter than
    `SNIFF_BYTES`); `count_pieces(line)` gives a line's SentencePiece count."""
    whole = len(head) < SNIFF_BYTES
    raw_lines = head.split(b"\n")
    last = len(raw_lines) - 1  # unless the sample is the whole file, it may end inside a line
    lines = long_lines = multi = 0
    blank_after_text = blank_inside = False
    for index, raw in enumerate(raw_lines):
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            blank_after_text = blank_after_text or lines > 0
            continue
        is_long = count_pieces(text) > max_seq_length - 3
        is_multi = not is_long and len(split_sentences(text)) > 1
        if index == last and not whole and not (is_long or is_multi):
            continue  # a cut line that does not qualify yet: left out
        blank_inside = blank_inside or blank_after_text
        lines += 1
        long_lines += is_long
        multi += is_multi
    return LayoutSample(lines, long_lines, multi, lines > 0 and not blank_inside, whole)


def refusal(sample: LayoutSample, max_seq_length: int) -> Optional[str]:
    """Why the sampled file does not look like one sentence per line and what to pass instead,
    or None (the rules are in the module docstring)."""
    if not sample.lines:
        return None
    lines = f"{sample.lines} lines" if sample.whole_file else f"first {sample.lines} lines"
    if sample.long_lines > MOSTLY * sample.lines:
        return (
            f"{sample.long_lines} of its {lines} ({sample.long_lines / sample.lines:.0%}) are "
            f"longer than the {max_seq_length - 3} pieces a sentence may have at "
            f"--max_seq_length={max_seq_length} (they would be cut, and sentence order lost): "
            f"pass {FLAG} if each line is a document, a larger --max_seq_length if each is a "
            f"sentence, or {OVERRIDE} to read it as it is"
        )
    document_like = sample.long_lines + sample.multi_sentence_lines
    if sample.one_document and document_like > MOSTLY * sample.lines:
        scope = (
            "the whole file is" if sample.whole_file else f"its first {SNIFF_BYTES >> 10} KiB are"
        )
        return (
            f"{scope} one document (no blank line) and {document_like} of its {lines} "
            f"({document_like / sample.lines:.0%}) hold several sentences"
            + (" or are too long" if sample.long_lines else "")
            + f": it looks like one document per line; pass {FLAG} (or {OVERRIDE} to read it as "
            "it is)"
        )
    return None


def check_sentences_layout(
    path: str, head: bytes, count_pieces: Callable[[str], int], max_seq_length: int
) -> None:
    """Raises DataError naming `path` and --input_format=lines when its first bytes `head` look
    like one document per line (see the module docstring)."""
    reason = refusal(sample_layout(head, count_pieces, max_seq_length), max_seq_length)
    if reason:
        raise DataError(
            f"{path}: read as --input_format=sentences (one sentence per line, a blank line "
            f"between documents), but {reason}"
        )
