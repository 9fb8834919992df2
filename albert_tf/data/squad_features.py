"""SQuAD windows and features, as the original ALBERT run_squad builds them.

The question is cut to `max_query_length` pieces; the context's pieces are aligned to its
characters (`squad_alignment`); sliding windows of ``max_seq_length - len(question) - 3``
context pieces, `doc_stride` apart (`window_spans`), each packed as
``[CLS] question [SEP] context [SEP]``, each piece marked in the window where it has its most
context (`max_context_windows`). Every context piece keeps its character span in the original
context. The SavedModel's ragged graph (`export.squad_serving.question_windows`) and
LiteRT's dense graph (`export.litert_qa.question_windows`) are the in-graph twins of these
windows (tests/export/test_squad_runtimes.py holds the three equal).

>>> from albert_tf.data.squad_examples import SquadExample
>>> from albert_tf.text.tokenizer import SentencePieceTokenizer
>>> context = "The Eiffel Tower is in Paris. It opened in 1889."
>>> example = SquadExample("q1", "When did it open?", context, "1889", context.index("1889"))
>>> settings = FeatureSettings(max_seq_length=32, doc_stride=8, max_query_length=8)
>>> features = build_features([example], SentencePieceTokenizer("30k-clean.model"), settings)
>>> features.input_word_ids.shape, features.is_impossible.tolist()  # 2 windows; the 2nd has it
((2, 32), [1, 0])
>>> start, end = features.start_positions[1], features.end_positions[1]
>>> context[features.piece_start_char[1, start]:features.piece_end_char[1, end]]
'1889'
"""

import dataclasses
from typing import List, Tuple

import numpy as np
from absl import logging

from albert_tf.data.squad_alignment import align_pieces
from albert_tf.data.squad_examples import IDS_IN_WARNINGS

#: Feature building logs its progress every this many examples.
LOG_EVERY = 1000


@dataclasses.dataclass(frozen=True)
class FeatureSettings:
    """How examples become windows (the original run_squad flags of the same names)."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    lower_case: bool = True
    tex_quotes: bool = False  # Hugging Face's rule: `` and '' become " (SentencePieceTokenizer)

    def __post_init__(self):
        if self.max_query_length < 1 or self.doc_stride < 1:
            raise ValueError(
                f"max_query_length ({self.max_query_length}) and doc_stride "
                f"({self.doc_stride}) must be positive"
            )
        if self.max_seq_length < self.max_query_length + 4:
            raise ValueError(
                f"max_seq_length {self.max_seq_length} leaves no room for the "
                f"context after [CLS], {self.max_query_length} question pieces "
                "and two [SEP]s; raise it or lower max_query_length"
            )


@dataclasses.dataclass
class FeatureStats:
    """Counts from building features: examples, windows (and how many hold their answer),
    ids of examples whose context could not be aligned (they have no windows), and how many
    questions were read with a mismatched answer_start."""

    num_examples: int = 0
    num_windows: int = 0
    num_windows_with_answer: int = 0
    alignment_failures: List[str] = dataclasses.field(default_factory=list)
    answer_mismatches: int = 0


#: The start + end score of the placeholder answer "" given when no span is valid, each (as
#: the original; the graph exports' score of "" is twice this).
EMPTY_SCORE = -1e6
#: v2: the null score of a question without windows (the original's starting value).
NO_WINDOW_NULL_SCORE = 1e6


def window_spans(num_pieces, window_length, doc_stride):
    """(start, length) of the original's sliding windows over `num_pieces` context pieces.

    >>> window_spans(10, 6, 3)
    [(0, 6), (3, 6), (6, 4)]
    """
    spans, start = [], 0
    while start < num_pieces:
        length = min(num_pieces - start, window_length)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


def max_context_windows(spans, num_pieces):
    """Per piece, the window where it has the most context: the original rule, the highest
    ``min(left, right) + 0.01 * window length``, the first window on ties.

    >>> max_context_windows([(0, 6), (3, 6), (6, 4)], 10)
    [0, 0, 0, 0, 0, 1, 1, 1, 2, 2]
    """
    best_window, best_score = [0] * num_pieces, [None] * num_pieces
    for window, (start, length) in enumerate(spans):
        end = start + length - 1
        for position in range(start, end + 1):
            score = min(position - start, end - position) + 0.01 * length
            if best_score[position] is None or score > best_score[position]:
                best_window[position], best_score[position] = window, score
    return best_window


SEQUENCE_FIELDS = (
    "input_word_ids",
    "input_mask",
    "input_type_ids",
    "p_mask",
    "token_is_max_context",
    "piece_start_char",
    "piece_end_char",
)
ROW_FIELDS = ("start_positions", "end_positions", "is_impossible", "example_index")


@dataclasses.dataclass
class SquadFeatures:
    """Windows of all examples as NumPy arrays, one row per window (N rows, S = seq length).

    input_word_ids, input_mask, input_type_ids, p_mask: int32 [N, S] (p_mask is 1 for the
    question, the [SEP]s and padding; 0 for the context and [CLS]). token_is_max_context:
    bool [N, S]. piece_start_char / piece_end_char: int32 [N, S], the span of each context
    piece in the original context (end exclusive), -1 elsewhere. start_positions,
    end_positions, is_impossible: int32 [N] labels (0, 0, 1 for a window without the answer;
    all 0 when unlabelled). example_index: int32 [N], the window's example in the list the
    features were built from. stats: a `FeatureStats`.
    """

    input_word_ids: np.ndarray
    input_mask: np.ndarray
    input_type_ids: np.ndarray
    p_mask: np.ndarray
    token_is_max_context: np.ndarray
    piece_start_char: np.ndarray
    piece_end_char: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    is_impossible: np.ndarray
    example_index: np.ndarray
    stats: FeatureStats = dataclasses.field(default_factory=FeatureStats)

    def __len__(self):
        return len(self.example_index)

    def model_inputs(self):
        """The backbone's inputs: {input_word_ids, input_mask, input_type_ids}."""
        return {
            name: getattr(self, name) for name in ("input_word_ids", "input_mask", "input_type_ids")
        }

    def arrays(self):
        """All arrays by field name."""
        return {name: getattr(self, name) for name in SEQUENCE_FIELDS + ROW_FIELDS}


def build_features(examples, tokenizer, settings=FeatureSettings(), labelled=True):
    """`SquadFeatures` of `examples` (see the module docstring).

    Args:
        examples: `SquadExample`s (e.g. from `read_squad_examples`).
        tokenizer: a `SentencePieceTokenizer` whose lower_case and tex_quotes are the
            settings', or a SentencePiece model path.
        settings: a `FeatureSettings`.
        labelled: build start/end/is_impossible labels from the examples' answers (an
            example without a span label, unanswerable or kept with a mismatched answer,
            gets 0, 0, 1 in every window).
    """
    tokenizer = _tokenizer(tokenizer, settings)
    seq = settings.max_seq_length
    rows = {name: [] for name in SEQUENCE_FIELDS + ROW_FIELDS}
    stats = FeatureStats(
        num_examples=len(examples), answer_mismatches=len(getattr(examples, "mismatched_ids", ()))
    )
    context = (None, None)  # (text, its pieces): questions on one context come together
    for example_index, example in enumerate(examples):
        if example_index and example_index % LOG_EVERY == 0:
            logging.info(
                "SQuAD features: %d/%d examples, %d windows",
                example_index,
                len(examples),
                len(rows["example_index"]),
            )
        if context[0] != example.context_text:
            context = (
                example.context_text,
                _context_pieces(example.context_text, tokenizer, settings),
            )
        windows = _example_windows(example, context[1], tokenizer, settings, labelled)
        if windows is None:
            stats.alignment_failures.append(example.qas_id)
            continue
        for window in windows:
            for name in SEQUENCE_FIELDS + ROW_FIELDS[:3]:
                rows[name].append(window[name])
            rows["example_index"].append(example_index)
            stats.num_windows_with_answer += int(labelled and not window["is_impossible"])
    stats.num_windows = len(rows["example_index"])
    if stats.alignment_failures:
        ids = stats.alignment_failures
        logging.warning(
            "SQuAD features: %d of %d questions have a context that could not "
            "be aligned with its pieces (they get no windows): %s%s",
            len(ids),
            len(examples),
            ", ".join(ids[:IDS_IN_WARNINGS]),
            ", ..." if len(ids) > IDS_IN_WARNINGS else "",
        )
    logging.info(
        "SQuAD features: %d examples -> %d windows of %d pieces (%d with an answer)",
        stats.num_examples,
        stats.num_windows,
        seq,
        stats.num_windows_with_answer,
    )
    arrays = {}
    for name in SEQUENCE_FIELDS:
        dtype = bool if name == "token_is_max_context" else np.int32
        arrays[name] = (
            np.stack(rows[name]).astype(dtype) if rows[name] else np.zeros((0, seq), dtype)
        )
    for name in ROW_FIELDS:
        arrays[name] = np.asarray(rows[name], np.int32).reshape(-1)
    return SquadFeatures(**arrays, stats=stats)


def _tokenizer(tokenizer, settings):
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    if not hasattr(tokenizer, "encode_pieces"):
        return SentencePieceTokenizer(
            tokenizer, lower_case=settings.lower_case, tex_quotes=settings.tex_quotes
        )
    for name in ("lower_case", "tex_quotes"):
        if getattr(tokenizer, name) != getattr(settings, name):
            raise ValueError(
                f"the tokenizer's {name}={getattr(tokenizer, name)} differs from "
                f"settings.{name}={getattr(settings, name)}"
            )
    return tokenizer


def _answer_pieces(example, alignment):
    """(first, last) context piece of the example's answer, None if it has no span label."""
    start = example.answer_start
    if example.is_impossible or start < 0:
        return None
    end = start + len(example.answer_text)
    context = example.context_text
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    return alignment.pieces_of_span(start, end) if start < end else None


def _context_pieces(context, tokenizer, settings):
    """(piece ids, `PieceAlignment`) of a context, or None when the alignment fails."""
    pieces = tokenizer.encode_pieces(context)
    alignment = align_pieces(context, pieces, settings.lower_case, settings.tex_quotes)
    return None if alignment is None else ([tokenizer.piece_to_id(p) for p in pieces], alignment)


def _example_windows(example, context_pieces, tokenizer, settings, labelled):
    """The windows of one example as dicts of rows, or None when its alignment fails."""
    if context_pieces is None:
        return None
    piece_ids, alignment = context_pieces
    answer = _answer_pieces(example, alignment) if labelled else None
    if answer is not None and answer[0] > answer[1]:
        return None
    query = tokenizer.encode_ids(example.question_text)[: settings.max_query_length]
    seq = settings.max_seq_length
    spans = window_spans(len(piece_ids), seq - len(query) - 3, settings.doc_stride)
    best_window = max_context_windows(spans, len(piece_ids))
    offset = len(query) + 2  # the first context position: after [CLS] question [SEP]
    windows = []
    for window, (start, length) in enumerate(spans):
        used = offset + length + 1
        context = slice(offset, offset + length)
        row = {name: np.zeros(seq, np.int32) for name in SEQUENCE_FIELDS}
        row["input_word_ids"][:used] = (
            [tokenizer.cls_id]
            + query
            + [tokenizer.sep_id]
            + piece_ids[start : start + length]
            + [tokenizer.sep_id]
        )
        row["input_mask"][:used] = 1
        row["input_type_ids"][offset:used] = 1
        row["p_mask"][1:] = 1
        row["p_mask"][context] = 0
        row["token_is_max_context"][context] = [
            best_window[p] == window for p in range(start, start + length)
        ]
        for name, values in (
            ("piece_start_char", alignment.piece_start_char),
            ("piece_end_char", alignment.piece_end_char),
        ):
            row[name][:] = -1
            row[name][context] = values[start : start + length]
        row["start_positions"] = row["end_positions"] = 0
        row["is_impossible"] = int(labelled)
        if answer is not None and start <= answer[0] and answer[1] < start + length:
            row["start_positions"] = answer[0] - start + offset
            row["end_positions"] = answer[1] - start + offset
            row["is_impossible"] = 0
        windows.append(row)
    return windows


def example_windows(features) -> List[Tuple[int, np.ndarray]]:
    """(example index, its feature rows) for every example that has windows, in order.

    >>> rows = example_windows(SquadFeatures(*[np.zeros((3, 2))] * 10, np.array([0, 0, 2])))
    >>> [(i, r.tolist()) for i, r in rows]
    [(0, [0, 1]), (2, [2])]
    """
    order = np.argsort(features.example_index, kind="stable")
    indices = features.example_index[order]
    boundaries = np.flatnonzero(np.diff(indices)) + 1
    return [
        (int(indices[group[0]]), order[group])
        for group in np.split(np.arange(len(order)), boundaries)
        if len(group)
    ]
