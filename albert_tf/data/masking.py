"""ALBERT's n-gram whole-word masking, in pure Python (shared by the offline and on-the-fly paths).

The algorithm follows the original `create_masked_lm_predictions` (reference/albert_original.md
section 2.3) with these deliberate fixes:

* every random draw comes from the `random.Random` passed in (the original drew n-gram lengths
  from NumPy's unseeded global RNG, so its output was not reproducible);
* random replacements are drawn from `MaskingVocab.replacement_ids`, which excludes special and
  control pieces (the original could insert `<pad>`, `[CLS]`, `[MASK]`...);
* a word or an n-gram never crosses a special token (`[CLS]`, `[SEP]`, padding), and an n-gram
  that would run past the end of its segment is sampled from the lengths that fit
  (p(n) renormalised) instead of being silently truncated.

>>> import random
>>> vocab = MaskingVocab(mask_id=4, special_ids=(0, 1, 2, 3, 4),
...                      replacement_ids=tuple(range(5, 100)))
>>> config = MaskingConfig(masked_lm_prob=0.5, max_predictions_per_seq=4)
>>> out = mask_sequence([2, 10, 11, 12, 3], [1, 1, 1, 1, 1], random.Random(0), config, vocab)
>>> len(out.positions) == len(out.labels) <= 4
True
"""

import bisect
import dataclasses
import random
from typing import List, Sequence, Tuple

MASK_RATE = 0.8  # fraction of chosen positions replaced by [MASK]
KEEP_RATE = 0.5  # of the rest: fraction kept unchanged (the other half get a random piece)


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """Hyper-parameters of masked-LM instance creation (the original flags of the same names)."""

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True  # False: every piece is a word of its own

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be >= 1, got {self.max_predictions_per_seq}"
            )
        if self.ngram < 1:
            raise ValueError(f"ngram must be >= 1, got {self.ngram}")


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """What masking needs to know about the vocabulary.

    `special_ids` are never masked and delimit words; `replacement_ids` are the ids a random
    replacement may draw (ordinary pieces only).
    """

    mask_id: int
    special_ids: Tuple[int, ...]
    replacement_ids: Tuple[int, ...]

    def __post_init__(self):
        if not self.replacement_ids:
            raise ValueError(
                "MaskingVocab.replacement_ids is empty: the vocabulary has no ordinary pieces"
            )

    @classmethod
    def from_tokenizer(cls, tokenizer):
        """Builds it from an `albert_tf.text.SentencePieceTokenizer` (or anything with the same
        API).

        Special = pad/unk/[CLS]/[SEP]/[MASK] plus every piece the SentencePiece model marks as
        control, unknown or unused.
        """
        special = {
            tokenizer.pad_id,
            tokenizer.unk_id,
            tokenizer.cls_id,
            tokenizer.sep_id,
            tokenizer.mask_id,
        }
        special.update(_control_ids(tokenizer))
        special.discard(None)
        special = {i for i in special if i is not None and i >= 0}
        replacement = tuple(i for i in range(tokenizer.vocab_size) if i not in special)
        return cls(
            mask_id=tokenizer.mask_id,
            special_ids=tuple(sorted(special)),
            replacement_ids=replacement,
        )


def _control_ids(tokenizer):
    """Ids of control/unknown/unused pieces, read from the SentencePiece model proto."""
    proto = getattr(tokenizer, "model_proto", None)
    if not proto:
        return set()
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=proto)
    return {
        i
        for i in range(processor.get_piece_size())
        if processor.is_control(i) or processor.is_unknown(i) or processor.is_unused(i)
    }


def ngram_probabilities(ngram: int, favor_shorter_ngram: bool = True) -> List[float]:
    """p(n) for n = 1..ngram: proportional to 1/n, or reversed when `favor_shorter_ngram` is
    False."""
    weights = [1.0 / n for n in range(1, ngram + 1)]
    total = sum(weights)
    probs = [w / total for w in weights]
    return probs if favor_shorter_ngram else probs[::-1]


def sample_ngram_length(rng: random.Random, probs: Sequence[float], max_n: int) -> int:
    """Draws n in 1..max_n with probability probs[n-1], renormalised over the lengths allowed."""
    allowed = probs[:max_n]
    cumulative = []
    total = 0.0
    for p in allowed:
        total += p
        cumulative.append(total)
    return min(bisect.bisect_right(cumulative, rng.random() * total), max_n - 1) + 1


def group_words(
    token_ids: Sequence[int], word_starts: Sequence[int], special_ids
) -> Tuple[list, list]:
    """Groups piece positions into words.

    Returns (words, segments): words[k] = [start, end) piece range of word k; segments[k] = index of
    the run of non-special tokens holding it (words of different runs are never joined).
    """
    special = special_ids if isinstance(special_ids, (set, frozenset)) else frozenset(special_ids)
    words, segments = [], []
    segment = 0
    after_special = True
    for i, token in enumerate(token_ids):
        if token in special:
            if not after_special:
                segment += 1
            after_special = True
            continue
        if after_special or word_starts[i]:
            words.append([i, i + 1])
            segments.append(segment)
        else:
            words[-1][1] = i + 1
        after_special = False
    return words, segments


@dataclasses.dataclass
class MaskedSequence:
    """Result of `mask_sequence`: the input ids after masking and the sorted predictions."""

    token_ids: List[int]
    positions: List[int]
    labels: List[int]
    span_lengths: List[int]  # n (in words) of every n-gram chosen, in selection order


def num_to_predict(length: int, config: MaskingConfig) -> int:
    """The original budget: min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))."""
    return min(config.max_predictions_per_seq, max(1, int(round(length * config.masked_lm_prob))))


def mask_sequence(
    token_ids: Sequence[int],
    word_starts: Sequence[int],
    rng: random.Random,
    config: MaskingConfig,
    vocab: MaskingVocab,
) -> MaskedSequence:
    """Chooses n-gram whole-word spans and applies 80% [MASK] / 10% keep / 10% random piece.

    `token_ids` is the full sequence ([CLS] A [SEP] B [SEP], no padding); `word_starts[i]` is
    truthy when piece i starts a word (the `token_boundary` feature).
    """
    special = frozenset(vocab.special_ids)
    if not config.do_whole_word_mask:
        word_starts = [1] * len(token_ids)
    words, segments = group_words(token_ids, word_starts, special)
    budget = num_to_predict(len(token_ids), config)
    probs = ngram_probabilities(config.ngram, config.favor_shorter_ngram)
    output = list(token_ids)
    covered = bytearray(len(token_ids))
    positions, spans = [], []
    order = list(range(len(words)))
    rng.shuffle(order)
    for first in order:
        if len(positions) >= budget:
            break
        max_n = 1
        while (
            max_n < config.ngram
            and first + max_n < len(words)
            and segments[first + max_n] == segments[first]
        ):
            max_n += 1
        n = sample_ngram_length(rng, probs, max_n)
        start = words[first][0]
        while n > 0 and len(positions) + words[first + n - 1][1] - start > budget:
            n -= 1
        if n == 0:
            continue
        end = words[first + n - 1][1]
        if any(covered[start:end]):
            continue
        spans.append(n)
        for index in range(start, end):
            covered[index] = 1
            positions.append(index)
            if rng.random() < MASK_RATE:
                output[index] = vocab.mask_id
            elif rng.random() >= KEEP_RATE:
                output[index] = vocab.replacement_ids[rng.randrange(len(vocab.replacement_ids))]
    positions.sort()
    return MaskedSequence(output, positions, [token_ids[p] for p in positions], spans)
