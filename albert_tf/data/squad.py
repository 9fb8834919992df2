"""SQuAD v1.1 / v2.0 question answering data: the official JSON, windows of pieces, a cache.

Examples come from the official JSON (``data[].paragraphs[].context`` and ``qas[]`` with ``id``,
``question``, ``answers[{text, answer_start}]`` and, in v2.0, ``is_impossible``). Features are
built as the original ALBERT run_squad does: the question is cut to `max_query_length` pieces;
the context's pieces are aligned back to the characters of the original context by a
character-level LCS; sliding windows of ``max_seq_length - len(question) - 3`` context pieces,
`doc_stride` apart, each packed as ``[CLS] question [SEP] context [SEP]``. Every context piece
keeps its character span in the original context, so an answer is always a slice of it.

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.json")
>>> context = "The Eiffel Tower is in Paris. It opened in 1889."
>>> qas = [{"id": "q1", "question": "When did it open?",
...         "answers": [{"text": "1889", "answer_start": context.index("1889")}]}]
>>> _ = open(path, "w").write(json.dumps({"data": [{"paragraphs": [
...     {"context": context, "qas": qas}]}]}))
>>> examples = read_squad_examples(path)
>>> examples[0].answer_text, examples[0].gold_answers
('1889', ['1889'])
>>> from albert_tf.text.tokenizer import SentencePieceTokenizer
>>> settings = FeatureSettings(max_seq_length=32, doc_stride=8, max_query_length=8)
>>> features = build_features(examples, SentencePieceTokenizer("30k-clean.model"), settings)
>>> features.input_word_ids.shape, features.is_impossible.tolist()  # 2 windows; the 2nd has it
((2, 32), [1, 0])
>>> start, end = features.start_positions[1], features.end_positions[1]
>>> context[features.piece_start_char[1, start]:features.piece_end_char[1, end]]
'1889'
"""

import dataclasses
import functools
import hashlib
import json
import os
from typing import List, Tuple

import numpy as np
from absl import logging

from albert_tf.data.task_spec import DataError
from albert_tf.data.text_files import read_text
from albert_tf.files import temporary_path
from albert_tf.text.normalize import preprocess_text

#: Bumped whenever the features change for the same inputs; part of every cache key.
FEATURES_VERSION = 1
#: Feature building logs its progress every this many examples.
LOG_EVERY = 1000
#: How many question ids a warning lists.
IDS_IN_WARNINGS = 5


# ---------------------------------------------------------------------------------- examples
@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    Attributes:
        qas_id: the question's id.
        question_text / context_text: as in the file.
        answer_text / answer_start: the first answer and its character offset in the context
            (the training label); "" and -1 when there is none (unanswerable, unlabelled, or
            kept for evaluation although its `answer_start` does not match).
        is_impossible: a v2.0 question without an answer.
        gold_answers: the texts of all answers (what evaluation compares with); [] when none.
    """

    qas_id: str
    question_text: str
    context_text: str
    answer_text: str = ""
    answer_start: int = -1
    is_impossible: bool = False
    gold_answers: List[str] = dataclasses.field(default_factory=list)


class SquadExamples(list):
    """A list of `SquadExample`s that remembers its file and the questions whose first answer
    does not match the context at its `answer_start` (`mismatched_ids`)."""

    def __init__(self, examples=(), source="", mismatched_ids=()):
        super().__init__(examples)
        self.source = source
        self.mismatched_ids = list(mismatched_ids)


def read_squad_examples(path, version_2_with_negative=False, labelled=True, skip_mismatched=True):
    """The questions of a SQuAD JSON file (v1.1, or v2.0 with `version_2_with_negative`).

    Args:
        path: the file (local or gs://).
        version_2_with_negative: the file may hold unanswerable questions (``is_impossible``).
        labelled: every answerable question must have an answer (train and dev files); False
            for a file to predict on (answers are not read).
        skip_mismatched: a labelled question whose first answer's text differs from
            ``context[answer_start:answer_start + len(text)]`` is skipped (for training); False
            keeps it with answer_start -1 (for evaluation, which only needs the texts). Either
            way such questions are counted in `SquadExamples.mismatched_ids` and a warning
            lists the first ids.

    Raises:
        DataError: invalid JSON ("file:line:col: ..."), a missing key, an empty context or
            question, a duplicate id, a question without answers that is not marked
            impossible, or an impossible question in a v1.1 reading; it names the file and
            the question id.
    """
    dataset = _parse_json(path)
    examples, mismatched, seen = [], [], set()
    for where, context, qa in _questions(path, dataset):
        example = _example(path, where, context, qa, version_2_with_negative, labelled)
        if example.qas_id in seen:
            raise DataError(f"{path}: question {example.qas_id!r}: duplicate question id")
        seen.add(example.qas_id)
        if labelled and not example.is_impossible and not _answer_matches(example):
            mismatched.append(example.qas_id)
            if skip_mismatched:
                continue
            example.answer_text, example.answer_start = "", -1
        examples.append(example)
    if not seen:
        raise DataError(f"{path}: no questions (expected data[].paragraphs[].qas[])")
    if mismatched:
        logging.warning(
            "%s: %d of %d questions have an answer whose text differs from the context at its "
            "answer_start (%s): %s%s",
            path,
            len(mismatched),
            len(seen),
            "skipped" if skip_mismatched else "kept for evaluation without a span label",
            ", ".join(mismatched[:IDS_IN_WARNINGS]),
            ", ..." if len(mismatched) > IDS_IN_WARNINGS else "",
        )
    impossible = sum(e.is_impossible for e in examples)
    logging.info(
        "%s: %d questions (%d unanswerable), %d skipped for a mismatched answer",
        path,
        len(examples),
        impossible,
        len(mismatched) if skip_mismatched else 0,
    )
    return SquadExamples(examples, path, mismatched)


def has_answers(path):
    """Whether the SQuAD JSON file at `path` is labelled: some question has answers or is
    marked impossible (a dev file), rather than none (a file to answer only).

    Raises DataError as `read_squad_examples` for a file that is not SQuAD JSON.
    """
    return any(
        bool(qa.get("answers")) or qa.get("is_impossible") is True
        for _, _, qa in _questions(path, _parse_json(path))
        if isinstance(qa, dict)
    )


def _parse_json(path):
    text = read_text(path)
    try:
        dataset = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise DataError(f"{path}: expected a SQuAD JSON object with a 'data' list")
    return dataset


def _questions(path, dataset):
    """Yields (where, context, qa) for every question; checks the nesting on the way."""
    for a, article in enumerate(dataset["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataError(f"{path}: data[{a}]: missing 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise DataError(f"{path}: {where}: missing 'qas' list")
            context = paragraph.get("context")
            first = _question_id(path, f"{where}.qas[0]", qas[0]) if qas else None
            named = f"question {first!r} ({where})" if first else where
            if not isinstance(context, str):
                raise DataError(f"{path}: {named}: missing 'context' string")
            if not context.strip():
                raise DataError(f"{path}: {named}: empty context")
            for q, qa in enumerate(qas):
                yield f"{where}.qas[{q}]", context, qa


def _question_id(path, where, qa):
    if not isinstance(qa, dict) or "id" not in qa:
        raise DataError(f"{path}: {where}: question without an 'id'")
    qas_id = qa["id"]
    if not isinstance(qas_id, (str, int)) or isinstance(qas_id, bool) or str(qas_id) == "":
        raise DataError(
            f"{path}: {where}: question id must be a non-empty string, found {qas_id!r}"
        )
    return str(qas_id)


def _example(path, where, context, qa, version_2_with_negative, labelled):
    qas_id = _question_id(path, where, qa)
    named = f"{path}: question {qas_id!r}"
    question = qa.get("question")
    if not isinstance(question, str):
        raise DataError(f"{named}: missing 'question' string")
    if not question.strip():
        raise DataError(f"{named}: empty question")
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(f"{named}: is_impossible must be true or false, found {impossible!r}")
    if impossible and not version_2_with_negative:
        raise DataError(
            f"{named}: is_impossible is true in a SQuAD v1.1 reading; unanswerable "
            "questions need version_2_with_negative=True (SQuAD v2.0)"
        )
    example = SquadExample(qas_id, question, context, is_impossible=impossible)
    if not labelled:
        return example
    answers = _answers(named, qa)
    if impossible:
        if answers:
            raise DataError(f"{named}: is_impossible is true but 'answers' is not empty")
        return example
    if not answers:
        hint = (
            ""
            if version_2_with_negative
            else "; unanswerable questions need version_2_with_negative=True (SQuAD v2.0)"
        )
        raise DataError(f"{named}: no answers and is_impossible is not true{hint}")
    example.gold_answers = [text for text, _ in answers]
    example.answer_text, example.answer_start = answers[0]
    return example


def _answers(named, qa):
    answers = qa.get("answers")
    if not isinstance(answers, list):
        raise DataError(f"{named}: missing 'answers' list")
    out = []
    for i, answer in enumerate(answers):
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise DataError(f"{named}: answers[{i}]: missing 'text' string")
        if not isinstance(start, int) or isinstance(start, bool):
            raise DataError(
                f"{named}: answers[{i}]: answer_start must be an integer, found {start!r}"
            )
        out.append((text, start))
    return out


def _answer_matches(example):
    start, text = example.answer_start, example.answer_text
    return (
        bool(text.strip())
        and 0 <= start
        and example.context_text[start : start + len(text)] == text
    )


# ---------------------------------------------------------------------------------- settings
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


# -------------------------------------------------------------------------------- alignment
@functools.lru_cache(maxsize=65536)
def _normalized_char(char, lower_case):
    """One context character as `preprocess_text` would spell it (whitespace as a space)."""
    return " " if char.isspace() else preprocess_text(char, lower=lower_case)


@dataclasses.dataclass
class PieceAlignment:
    """Character spans of a context's pieces in the original context (end exclusive).

    Attributes:
        piece_start_char / piece_end_char: per piece, its span in the context, without the
            whitespace at its ends (a piece that is only whitespace keeps it).
        char_to_tok / tok_to_piece: the character maps behind them (context character ->
            character of the detokenised pieces, None where unmatched; that character ->
            its piece).
    """

    piece_start_char: List[int]
    piece_end_char: List[int]
    char_to_tok: list = dataclasses.field(repr=False, default_factory=list)
    tok_to_piece: List[int] = dataclasses.field(repr=False, default_factory=list)

    def pieces_of_span(self, start, end):
        """(first piece, last piece) holding context characters [start, end), mapped as the
        original maps an answer (unmatched characters go to their nearest matched ones)."""
        first = _nearest_index(self.char_to_tok, start, is_start=True)
        last = _nearest_index(self.char_to_tok, end - 1, is_start=False)
        return self.tok_to_piece[first], self.tok_to_piece[last]


def align_pieces(context, pieces, lower_case=True, tex_quotes=False):
    """Aligns `pieces` (of `context`, with "▁" word starts) to the characters of `context`.

    The original ALBERT alignment: an LCS over characters of the detokenised pieces ("▁" as a
    space) and the context (each character preprocessed alone), restricted to a band of
    ``|n - m| + 5`` around the diagonal, widened once to twice that when fewer than 80% of
    the context's characters match. Returns None when the alignment still fails. With
    `tex_quotes` the pieces come from text whose `` and '' became " (`preprocess_text`): each
    such pair is one character, as in `albert_tf.text.graph_offsets`.

    >>> alignment = align_pieces("Café  au lait", ["\u2581cafe", "\u2581au", "\u2581la", "it"])
    >>> alignment.piece_start_char, alignment.piece_end_char
    ([0, 6, 9, 11], [4, 8, 11, 13])
    """
    tok_text = "".join(pieces).replace("\u2581", " ")
    tok_to_piece, tok_starts, tok_ends = [], [], []
    for index, piece in enumerate(pieces):
        tok_starts.append(len(tok_to_piece))
        tok_to_piece.extend([index] * len(piece))
        tok_ends.append(len(tok_to_piece) - 1)
    normalized = [_normalized_char(c, lower_case) for c in context]
    pairs = _tex_quote_pairs(context) if tex_quotes else ()
    for i in pairs:  # the pair's '"' on its first character, nothing on its second
        normalized[i], normalized[i + 1] = '"', ""
    matched = _character_alignment(normalized, tok_text)
    if matched is None:
        return None
    orig_to_tok, tok_to_orig = matched
    for i in pairs:
        orig_to_tok[i + 1] = orig_to_tok[i]
    n = len(context)
    starts, ends = [], []
    for tok_start, tok_end in zip(tok_starts, tok_ends):
        start = _nearest_index(tok_to_orig, tok_start, n, is_start=True)
        end = _nearest_index(tok_to_orig, tok_end, n, is_start=False) + 1
        if end - 1 in pairs:
            end += 1
        end = max(end, start)
        trimmed_start, trimmed_end = start, end
        while trimmed_start < trimmed_end and context[trimmed_start].isspace():
            trimmed_start += 1
        while trimmed_end > trimmed_start and context[trimmed_end - 1].isspace():
            trimmed_end -= 1
        if trimmed_start < trimmed_end:
            start, end = trimmed_start, trimmed_end
        starts.append(start)
        ends.append(end)
    return PieceAlignment(starts, ends, orig_to_tok, tok_to_piece)


def _tex_quote_pairs(context):
    """First indices of the `` and '' pairs that `preprocess_text(tex_quotes=True)` replaces
    (each found left to right without overlaps)."""
    pairs = set()
    for quote in "`'":
        i = 0
        while i < len(context) - 1:
            if context[i] == context[i + 1] == quote:
                pairs.add(i)
                i += 2
            else:
                i += 1
    return pairs


def _character_alignment(normalized, tok_text):
    """(orig -> tok, tok -> orig) character maps (None where unmatched), or None on failure."""
    n, m = len(normalized), len(tok_text)
    shift = len(tok_text) - len(tok_text.lstrip(" "))
    if "".join(normalized) == tok_text[shift:] and all(len(c) == 1 for c in normalized):
        # The LCS of a string and itself after leading spaces is the shifted identity.
        return list(range(shift, m)), [None] * shift + list(range(n))
    max_dist = abs(n - m) + 5
    score, back = _banded_lcs(normalized, tok_text, max_dist)
    if score <= 0.8 * n:
        max_dist *= 2
        score, back = _banded_lcs(normalized, tok_text, max_dist)
    orig_to_tok, tok_to_orig = [None] * n, [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0:
        step = back[i][j - i + max_dist] if 0 <= j - i + max_dist < 2 * max_dist else -1
        if step == 2:
            orig_to_tok[i], tok_to_orig[j] = j, i
            i, j = i - 1, j - 1
        elif step == 1:
            j -= 1
        elif step == 0:
            i -= 1
        else:
            break
    if score < 0.8 * n or all(v is None for v in orig_to_tok):
        return None
    return orig_to_tok, tok_to_orig


def _banded_lcs(normalized, tok_text, max_dist):
    """The original's LCS table over j in [i - max_dist, i + max_dist): (f[n-1][m-1], moves).

    Row i of `moves` holds, at j - i + max_dist, 0 (from above), 1 (from the left), 2 (a
    match) or -1 (never set, which stops the backtrace), with the original's tie-breaking.
    """
    n, m = len(normalized), len(tok_text)
    width = 2 * max_dist
    previous = [0] * width
    moves = []
    for i in range(n):
        row, move = [0] * width, [-1] * width
        char = normalized[i]
        for k in range(width):
            j = i - max_dist + k
            if j < 0 or j >= m:
                continue
            best = 0
            if i > 0:
                move[k] = 0
                best = previous[k + 1] if k + 1 < width else 0
            if j > 0 and k > 0 and row[k - 1] > best:
                move[k], best = 1, row[k - 1]
            diagonal = previous[k] if i > 0 and j > 0 else 0
            if char == tok_text[j] and diagonal + 1 > best:
                move[k], best = 2, diagonal + 1
            row[k] = best
        moves.append(move)
        previous = row
    last = m - 1 - (n - 1) + max_dist
    return (previous[last] if 0 <= last < width else 0), moves


def _nearest_index(index, pos, length=None, is_start=True):
    """The original `_convert_index`: index[pos], or a neighbour's value when it is None."""
    if index[pos] is not None:
        return index[pos]
    rear = pos
    while rear < len(index) - 1 and index[rear] is None:
        rear += 1
    front = pos
    while front > 0 and index[front] is None:
        front -= 1
    if index[front] is None:
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if length is not None and index[front] < length - 1:
            return index[front] + 1 if is_start else length - 1
        return index[front]
    if index[rear] > index[front] + 1:
        return index[front] + 1 if is_start else index[rear] - 1
    return index[rear] if is_start else index[front]


# ----------------------------------------------------------------------------------- windows
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


# ---------------------------------------------------------------------------------- features
_SEQUENCE_FIELDS = (
    "input_word_ids",
    "input_mask",
    "input_type_ids",
    "p_mask",
    "token_is_max_context",
    "piece_start_char",
    "piece_end_char",
)
_ROW_FIELDS = ("start_positions", "end_positions", "is_impossible", "example_index")


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
        return {name: getattr(self, name) for name in _SEQUENCE_FIELDS + _ROW_FIELDS}


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
    rows = {name: [] for name in _SEQUENCE_FIELDS + _ROW_FIELDS}
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
            for name in _SEQUENCE_FIELDS + _ROW_FIELDS[:3]:
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
    for name in _SEQUENCE_FIELDS:
        dtype = bool if name == "token_is_max_context" else np.int32
        arrays[name] = (
            np.stack(rows[name]).astype(dtype) if rows[name] else np.zeros((0, seq), dtype)
        )
    for name in _ROW_FIELDS:
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
        row = {name: np.zeros(seq, np.int32) for name in _SEQUENCE_FIELDS}
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


# ------------------------------------------------------------------------------------- cache
def cache_key(
    examples_path,
    tokenizer_path,
    settings,
    labelled,
    version_2_with_negative=False,
    skip_mismatched=True,
):
    """A hex digest of everything the cached features depend on: the bytes of the examples file
    and of the SentencePiece model, the settings, the reading flags and `FEATURES_VERSION`."""
    from albert_tf.text.tokenizer import read_model_proto

    material = {
        "examples_sha256": _file_sha256(examples_path),
        "spm_sha256": hashlib.sha256(read_model_proto(tokenizer_path)).hexdigest(),
        "settings": dataclasses.asdict(settings),
        "labelled": bool(labelled),
        "version_2_with_negative": bool(version_2_with_negative),
        "skip_mismatched": bool(skip_mismatched),
        "features_version": FEATURES_VERSION,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def cache_path(
    examples_path,
    tokenizer_path,
    settings,
    labelled,
    cache_dir,
    version_2_with_negative=False,
    skip_mismatched=True,
):
    """CACHE_DIR/<examples file stem>-seq<S>-stride<D>-query<Q>-<key>.tfrecord."""
    key = cache_key(
        examples_path, tokenizer_path, settings, labelled, version_2_with_negative, skip_mismatched
    )
    stem = os.path.splitext(os.path.basename(examples_path.rstrip("/")))[0]
    name = (
        f"{stem}-seq{settings.max_seq_length}-stride{settings.doc_stride}"
        f"-query{settings.max_query_length}-{key[:16]}.tfrecord"
    )
    return f"{cache_dir.rstrip('/')}/{name}"


def cached_features(
    examples_path,
    tokenizer_path,
    settings,
    labelled,
    cache_dir,
    version_2_with_negative=False,
    skip_mismatched=True,
):
    """`build_features` of a SQuAD file, cached in `cache_dir` as a TFRecord file (one
    tf.train.Example per window) plus a JSON file of `FeatureStats` beside it.

    The file name holds `cache_key`, so a changed file, model, setting or flag builds new
    features; both files are written under hidden temporary names and renamed into place.
    Read the examples for post-processing with `read_squad_examples` and the same
    `version_2_with_negative`, `labelled` and `skip_mismatched`.

    >>> features = cached_features("train.json", "30k-clean.model", FeatureSettings(),
    ...                            True, "/tmp/squad_cache")  # doctest: +SKIP
    """
    import tensorflow as tf

    path = cache_path(
        examples_path,
        tokenizer_path,
        settings,
        labelled,
        cache_dir,
        version_2_with_negative,
        skip_mismatched,
    )
    stats_path = path[: -len(".tfrecord")] + ".json"
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(stats_path):
        logging.info("SQuAD features: reading the cache %s", path)
        return read_features(path, stats_path, settings.max_seq_length)
    examples = read_squad_examples(
        examples_path, version_2_with_negative, labelled, skip_mismatched
    )
    features = build_features(examples, tokenizer_path, settings, labelled)
    tf.io.gfile.makedirs(cache_dir)
    write_features(features, path, stats_path)
    logging.info("SQuAD features: cached %d windows in %s", len(features), path)
    return features


def write_features(features, path, stats_path):
    """Writes `features` as TFRecords to `path` and its stats as JSON to `stats_path`."""
    import tensorflow as tf

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    arrays = features.arrays()
    tmp = temporary_path(path)
    with tf.io.TFRecordWriter(tmp) as writer:
        for row in range(len(features)):
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        name: int_feature(
                            np.atleast_1d(arrays[name][row]).astype(np.int64).tolist()
                        )
                        for name in arrays
                    }
                )
            )
            writer.write(example.SerializeToString())
    tf.io.gfile.rename(tmp, path, overwrite=True)
    tmp = temporary_path(stats_path)
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(dataclasses.asdict(features.stats), indent=2) + "\n")
    tf.io.gfile.rename(tmp, stats_path, overwrite=True)


def read_features(path, stats_path, seq_length):
    """`SquadFeatures` from files `write_features` wrote."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in _SEQUENCE_FIELDS}
    spec.update({name: tf.io.FixedLenFeature([1], tf.int64) for name in _ROW_FIELDS})
    parts = {name: [] for name in spec}
    dataset = (
        tf.data.TFRecordDataset(path)
        .batch(4096)
        .map(lambda records: tf.io.parse_example(records, spec))
    )
    for batch in dataset:
        for name, values in batch.items():
            parts[name].append(values.numpy())
    arrays = {}
    for name in spec:
        values = (
            np.concatenate(parts[name])
            if parts[name]
            else np.zeros((0, spec[name].shape[0]), np.int64)
        )
        if name in _ROW_FIELDS:
            values = values.reshape(-1)
        arrays[name] = values.astype(bool if name == "token_is_max_context" else np.int32)
    with tf.io.gfile.GFile(stats_path, "r") as f:
        stats = FeatureStats(**json.load(f))
    return SquadFeatures(**arrays, stats=stats)


def _file_sha256(path):
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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
