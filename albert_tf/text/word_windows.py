"""Word <-> piece alignment for token classification (NER): model windows from labelled words.

Sentences come as lists of words (CoNLL tokens). Each word is tokenised on its own by
`graph_words.WordTokenizer` (the in-graph `TextTokenizer`, run eagerly: the export serves with
the same op, so training and serving pieces agree); a word that yields no piece gets `[UNK]`.

A sentence whose pieces fit in `max_seq_length - 2` is one window `[CLS] pieces [SEP]`. A longer
one becomes sliding windows of `max_seq_length - 2` pieces whose starts advance by `stride` (the
last may be shorter; the windows stop once one reaches the end), so no word is dropped. Only the
first piece of a word carries its label, in exactly one window: the one where that piece has
the most context, score = min(pieces left of it, pieces right of it in the window) + 0.01 *
window length, ties to the earlier window (the original BERT/ALBERT max-context rule).
`albert_tf.text.graph_windows` is the in-graph twin used by the serving export.

>>> windows = WordWindows.from_word_pieces([[[10], [11, 12], [13]], [[14]]], max_seq_length=5,
...                                        stride=1)
>>> windows.input_word_ids.tolist()
[[2, 10, 11, 12, 3], [2, 11, 12, 13, 3], [2, 14, 3, 0, 0]]
>>> windows.label_word.tolist()  # word 1 is read in window 0 (its 1st piece: 1 left, 1 right)
[[-1, 0, 1, -1, -1], [-1, -1, -1, 2, -1], [-1, 0, -1, -1, -1]]
>>> window_labels(windows, [[5, 6, 7], [8]]).tolist()
[[-1, 5, 6, -1, -1], [-1, -1, -1, 7, -1], [-1, 8, -1, -1, -1]]
>>> windows.num_long_sentences
1
"""

import numpy as np

IGNORE = -1  # the label of positions that carry none (as `token_classifier.IGNORE`)
_TOKENIZE_BATCH = 8192  # words per eager tokenizer call


def window_sizes(max_seq_length, stride=None):
    """Validated (pieces per window, stride); stride defaults to half a window.

    >>> window_sizes(16, 7)
    (14, 7)
    """
    if (
        isinstance(max_seq_length, bool)
        or not isinstance(max_seq_length, (int, np.integer))
        or max_seq_length < 3
    ):
        raise ValueError(
            "max_seq_length must be an integer >= 3 ([CLS], a piece, [SEP]), "
            f"got {max_seq_length!r}"
        )
    max_len = int(max_seq_length) - 2
    if stride is None:
        stride = max(1, max_len // 2)
    if (
        isinstance(stride, bool)
        or not isinstance(stride, (int, np.integer))
        or not 1 <= stride <= max_len
    ):
        raise ValueError(
            f"stride must be an integer in [1, max_seq_length - 2 = {max_len}], got {stride!r}"
        )
    return max_len, int(stride)


def _spans(num_pieces, max_len, stride):
    """(start, length) of each window over `num_pieces` pieces."""
    spans, start = [], 0
    while True:
        length = min(num_pieces - start, max_len)
        spans.append((start, length))
        if start + length >= num_pieces:
            return spans
        start += stride


def _owner(piece, spans):
    """Index of the span giving `piece` the most context (first on ties); scores x 100."""
    best, best_score = None, None
    for i, (start, length) in enumerate(spans):
        if not start <= piece < start + length:
            continue
        score = 100 * min(piece - start, start + length - 1 - piece) + length
        if best is None or score > best_score:
            best, best_score = i, score
    return best


class WordWindows:
    """Windows of word pieces with each word's label position; build with `build`.

    Attributes (NumPy): `input_word_ids`, `input_mask`, `input_type_ids`, `label_word` (int32
    [N, max_seq_length]; `label_word` is the word index, within its sentence, whose label the
    position carries, -1 elsewhere), `window_sentence` (int32 [N]), `words_per_sentence` (int32
    [num sentences]), `max_seq_length`, `stride`.
    """

    def __init__(
        self,
        input_word_ids,
        input_mask,
        input_type_ids,
        label_word,
        window_sentence,
        words_per_sentence,
        max_seq_length,
        stride,
    ):
        self.input_word_ids, self.input_mask = input_word_ids, input_mask
        self.input_type_ids, self.label_word = input_type_ids, label_word
        self.window_sentence, self.words_per_sentence = window_sentence, words_per_sentence
        self.max_seq_length, self.stride = max_seq_length, stride

    @classmethod
    def build(cls, sentences, tokenizer, max_seq_length, stride=None, lower_case=True):
        """Tokenises each word of `sentences` (lists of str) and windows them.

        Args:
          sentences: list of sentences, each a list of words.
          tokenizer: an `AlbertPreprocessor`, `TextTokenizer`, `SentencePieceTokenizer`, a
            `graph_words.WordTokenizer`, or a SentencePiece model path or bytes.
          max_seq_length: window length with [CLS] and [SEP].
          stride: pieces between window starts, 1 <= stride <= max_seq_length - 2 (default: half a
            window).
          lower_case: casing, for a model path or bytes.

        >>> windows = WordWindows.build([["Ann", "lives", "in", "Köln", "."]],
        ...                             "30k-clean.model", max_seq_length=128)  # doctest: +SKIP
        """
        from albert_tf.text.graph_words import WordTokenizer

        window_sizes(max_seq_length, stride)
        words = (
            tokenizer
            if isinstance(tokenizer, WordTokenizer)
            else WordTokenizer(tokenizer, lower_case=lower_case)
        )
        flat = [str(w) for sentence in sentences for w in sentence]
        ids = []
        for i in range(0, len(flat), _TOKENIZE_BATCH):
            ids.extend(words(np.array(flat[i : i + _TOKENIZE_BATCH], dtype=object)).to_list())
        word_pieces, i = [], 0
        for sentence in sentences:
            word_pieces.append(ids[i : i + len(sentence)])
            i += len(sentence)
        return cls.from_word_pieces(
            word_pieces,
            max_seq_length,
            stride,
            cls_id=words.cls_id,
            sep_id=words.sep_id,
            pad_id=words.pad_id,
        )

    @classmethod
    def from_word_pieces(
        cls, word_pieces, max_seq_length, stride=None, cls_id=2, sep_id=3, pad_id=0
    ):
        """Windows from already tokenised words: `word_pieces[sentence][word]` is a non-empty
        list of ids. Special ids default to ALBERT's."""
        max_len, stride = window_sizes(max_seq_length, stride)
        rows_ids, rows_word, window_sentence = [], [], []
        for s, sentence in enumerate(word_pieces):
            pieces, first_piece = [], []
            for w, ids in enumerate(sentence):
                if len(ids) == 0:
                    raise ValueError(f"sentence {s} word {w} has no pieces; give it [UNK]")
                first_piece.append(len(pieces))
                pieces.extend(int(i) for i in ids)
            spans = _spans(len(pieces), max_len, stride)
            label_word = [[IGNORE] * max_seq_length for _ in spans]
            for w, piece in enumerate(first_piece):
                k = _owner(piece, spans)
                label_word[k][1 + piece - spans[k][0]] = w
            for (start, length), labels in zip(spans, label_word):
                rows_ids.append([cls_id] + pieces[start : start + length] + [sep_id])
                rows_word.append(labels)
                window_sentence.append(s)
        n = len(rows_ids)
        input_word_ids = np.full([n, max_seq_length], pad_id, np.int32)
        input_mask = np.zeros([n, max_seq_length], np.int32)
        for i, row in enumerate(rows_ids):
            input_word_ids[i, : len(row)] = row
            input_mask[i, : len(row)] = 1
        return cls(
            input_word_ids,
            input_mask,
            np.zeros([n, max_seq_length], np.int32),
            np.array(rows_word, np.int32).reshape([n, max_seq_length]),
            np.array(window_sentence, np.int32),
            np.array([len(s) for s in word_pieces], np.int32),
            max_seq_length,
            stride,
        )

    @property
    def inputs(self):
        """The model inputs: {input_word_ids, input_mask, input_type_ids}."""
        return {
            "input_word_ids": self.input_word_ids,
            "input_mask": self.input_mask,
            "input_type_ids": self.input_type_ids,
        }

    @property
    def num_windows(self):
        return len(self.window_sentence)

    @property
    def num_sentences(self):
        return len(self.words_per_sentence)

    @property
    def num_long_sentences(self):
        """Sentences that need more than one window (for logging)."""
        return int(np.sum(np.bincount(self.window_sentence, minlength=self.num_sentences) > 1))

    def __repr__(self):
        return (
            f"WordWindows({self.num_sentences} sentences, {self.num_windows} windows, "
            f"{self.num_long_sentences} sentences in several windows, max_seq_length="
            f"{self.max_seq_length}, stride={self.stride})"
        )


def window_labels(windows, tag_ids_per_sentence):
    """Per-word tag ids -> int32 [N, max_seq_length] labels, `IGNORE` (-1) where `label_word` is -1.

    `tag_ids_per_sentence[s]` holds one tag id per word of sentence s.
    """
    if len(tag_ids_per_sentence) != windows.num_sentences:
        raise ValueError(
            f"{len(tag_ids_per_sentence)} tag lists for {windows.num_sentences} sentences"
        )
    labels = np.full(windows.label_word.shape, IGNORE, np.int32)
    for s, tags in enumerate(tag_ids_per_sentence):
        if len(tags) != windows.words_per_sentence[s]:
            raise ValueError(
                f"sentence {s} has {windows.words_per_sentence[s]} words but {len(tags)} tags"
            )
    for i, s in enumerate(windows.window_sentence):
        row = windows.label_word[i]
        where = np.nonzero(row >= 0)[0]
        labels[i, where] = np.asarray(tag_ids_per_sentence[s], np.int32)[row[where]]
    return labels


def word_logits(windows, logits):
    """Model outputs [N, max_seq_length, C] -> per sentence, float [num words, C], each word's row
    taken from the window that owns it."""
    logits = np.asarray(logits)
    if logits.shape[:2] != windows.label_word.shape:
        raise ValueError(
            f"logits of shape {logits.shape} for windows of shape {windows.label_word.shape}"
        )
    out = [np.zeros([n, logits.shape[-1]], logits.dtype) for n in windows.words_per_sentence]
    for i, s in enumerate(windows.window_sentence):
        where = np.nonzero(windows.label_word[i] >= 0)[0]
        out[s][windows.label_word[i, where]] = logits[i, where]
    return out
