"""SentencePiece pieces of a SQuAD context aligned back to its characters (the original
ALBERT run_squad's character-level LCS), so that an answer is always a slice of the context."""

import dataclasses
import functools
from typing import List

from albert_tf.text.normalize import preprocess_text


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
