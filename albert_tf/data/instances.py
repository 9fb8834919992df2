"""Pretraining instances from one tokenized document: segments A/B, SOP (or NSP) labels, masking.

Follows the original `create_instances_from_document` (reference/albert_original.md section 2.2):
a target length (max_seq_length - 3, or with probability short_seq_prob a random length in
[2, max]), sentences accumulated into a chunk until it reaches the target, A = the first
randint(1, len-1) sentences, B = the rest; with probability 0.5 A and B are swapped (SOP,
label 1), or with --random_next_sentence B comes from another document (NSP, label 1). A
one-sentence chunk always takes B from another document (the original's behaviour).

Differences from the original, all for determinism and bounded memory:
* every draw comes from the `random.Random` given (build it with `document_rng`, from the seed,
  the dupe pass and the global document index), so results do not depend on how documents are
  split between worker processes;
* "another document" is drawn from `window`, a bounded list of neighbouring documents (the
  caller's work unit), not from the whole corpus.

>>> import random
>>> from albert_tf.data.masking import MaskingConfig, MaskingVocab
>>> vocab = MaskingVocab(mask_id=4, special_ids=(0, 1, 2, 3, 4),
...                      replacement_ids=tuple(range(5, 50)))
>>> config = InstanceConfig(max_seq_length=16, masking=MaskingConfig(max_predictions_per_seq=3))
>>> doc = Document(sentences=[[5, 6, 7], [8, 9], [10, 11, 12]],
...                word_starts=[[1, 1, 0], [1, 1], [1, 0, 1]])
>>> out = create_instances([doc], 0, random.Random(0), config, vocab, cls_id=2, sep_id=3)
>>> out[0].input_ids[0], out[0].input_ids[-1]
(2, 3)
"""

import dataclasses
import random
from typing import List, Optional, Sequence

from albert_tf.data import masking as masking_lib


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """Hyper-parameters of instance creation; masking=None writes unmasked instances."""

    max_seq_length: int = 512
    short_seq_prob: float = 0.1
    random_next_sentence: bool = False
    masking: Optional[masking_lib.MaskingConfig] = dataclasses.field(
        default_factory=masking_lib.MaskingConfig
    )

    def __post_init__(self):
        if self.max_seq_length < 5:
            raise ValueError(
                f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}"
            )
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.masking is not None and self.masking.max_predictions_per_seq > self.max_seq_length:
            raise ValueError(
                f"max_predictions_per_seq ({self.masking.max_predictions_per_seq}) exceeds "
                f"max_seq_length ({self.max_seq_length})"
            )


@dataclasses.dataclass
class Document:
    """A tokenized document: per sentence, the piece ids and the word-start flags of each piece."""

    sentences: List[List[int]]
    word_starts: List[List[int]]


@dataclasses.dataclass
class Instance:
    """One training example before padding (see `albert_tf.data.schema.encode_instance`)."""

    input_ids: List[int]
    segment_ids: List[int]
    token_boundary: List[int]
    next_sentence_label: int
    is_random_document: bool
    masked_lm_positions: Optional[List[int]] = None
    masked_lm_ids: Optional[List[int]] = None
    ngram_lengths: Optional[List[int]] = None


def document_rng(seed: int, dupe_pass: int, document_index: int) -> random.Random:
    """The RNG of one document in one dupe pass (string seeds are hashed with SHA-512: stable)."""
    return random.Random(f"albert_tf:{seed}:{dupe_pass}:{document_index}")


def _truncate_pair(a: list, b: list, max_num_tokens: int, rng: random.Random) -> None:
    """The original truncate_seq_pair: drop one piece from the longer side, front or back 50/50."""
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _random_document(window: Sequence[Document], index: int, rng: random.Random) -> Document:
    """Another document of the window, uniformly (the same one only if the window has one)."""
    if len(window) == 1:
        return window[0]
    other = rng.randrange(len(window) - 1)
    return window[other + (other >= index)]


def create_instances(
    window: Sequence[Document],
    index: int,
    rng: random.Random,
    config: InstanceConfig,
    vocab: masking_lib.MaskingVocab,
    cls_id: int,
    sep_id: int,
) -> List[Instance]:
    """All instances of window[index] for one dupe pass."""
    document = window[index]
    sentences = list(zip(document.sentences, document.word_starts))
    max_num_tokens = config.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances = []
    chunk, chunk_length = [], 0
    i = 0
    while i < len(sentences):
        chunk.append(sentences[i])
        chunk_length += len(sentences[i][0])
        if i == len(sentences) - 1 or chunk_length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [piece for sentence in chunk[:a_end] for piece in zip(*sentence)]
            is_random_document = False
            if len(chunk) == 1 or (config.random_next_sentence and rng.random() < 0.5):
                is_random_document = True
                label = 1
                other = _random_document(window, index, rng)
                b = []
                for j in range(rng.randrange(len(other.sentences)), len(other.sentences)):
                    b.extend(zip(other.sentences[j], other.word_starts[j]))
                    if len(b) >= target - len(a):
                        break
                i -= len(chunk) - a_end  # put the unused sentences back
            else:
                b = [piece for sentence in chunk[a_end:] for piece in zip(*sentence)]
                label = 0
                if not config.random_next_sentence and rng.random() < 0.5:
                    a, b = b, a
                    label = 1
            _truncate_pair(a, b, max_num_tokens, rng)
            if a and b:
                instances.append(
                    _make_instance(
                        a, b, label, is_random_document, rng, config, vocab, cls_id, sep_id
                    )
                )
            chunk, chunk_length = [], 0
        i += 1
    return instances


def _make_instance(a, b, label, is_random_document, rng, config, vocab, cls_id, sep_id) -> Instance:
    input_ids = [cls_id] + [p for p, _ in a] + [sep_id] + [p for p, _ in b] + [sep_id]
    segment_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    token_boundary = [1] + [int(s) for _, s in a] + [1] + [int(s) for _, s in b] + [1]
    instance = Instance(input_ids, segment_ids, token_boundary, label, is_random_document)
    if config.masking is not None:
        masked = masking_lib.mask_sequence(input_ids, token_boundary, rng, config.masking, vocab)
        instance.input_ids = masked.token_ids
        instance.masked_lm_positions = masked.positions
        instance.masked_lm_ids = masked.labels
        instance.ngram_lengths = masked.span_lengths
    return instance
