"""n-gram whole-word masking: distributions, 80/10/10, special ids, whole words, budget."""

import collections
import random

import pytest

from albert_tf.data import masking

THEORY = [6 / 11, 3 / 11, 2 / 11]  # p(n) proportional to 1/n, n <= 3


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return masking.MaskingVocab.from_tokenizer(tokenizer)


@pytest.fixture(scope="module")
def sequences(tokenizer, corpus_file):
    """[CLS] sentence [SEP] next sentence [SEP] from the real corpus, with word starts."""
    text = open(corpus_file, encoding="utf-8").read()
    lines = [line for line in text.splitlines() if line.strip()]
    out = []
    for a, b in zip(lines[0:800:2], lines[1:800:2]):
        ids_a, ids_b = tokenizer.encode_ids(a)[:60], tokenizer.encode_ids(b)[:60]
        ids = [tokenizer.cls_id] + ids_a + [tokenizer.sep_id] + ids_b + [tokenizer.sep_id]
        starts = [
            1
            if i in (tokenizer.cls_id, tokenizer.sep_id)
            else int(tokenizer.is_start_piece(tokenizer.id_to_piece(i)))
            for i in ids
        ]
        out.append((ids, starts))
    return out


def test_vocab_excludes_special_and_control_pieces(vocab, tokenizer):
    assert set(vocab.special_ids) >= {0, 1, 2, 3, 4}
    assert not set(vocab.replacement_ids) & set(vocab.special_ids)
    assert len(vocab.replacement_ids) == tokenizer.vocab_size - len(vocab.special_ids)


def test_ngram_sampler_follows_one_over_n():
    probs = masking.ngram_probabilities(3)
    assert probs == pytest.approx(THEORY)
    assert masking.ngram_probabilities(3, favor_shorter_ngram=False) == pytest.approx(THEORY[::-1])
    rng = random.Random(0)
    counts = collections.Counter(masking.sample_ngram_length(rng, probs, 3) for _ in range(200_000))
    assert [counts[n] / 200_000 for n in (1, 2, 3)] == pytest.approx(THEORY, abs=0.005)
    # Only lengths that fit are drawn, renormalised: max_n=2 -> 2/3, 1/3.
    counts = collections.Counter(masking.sample_ngram_length(rng, probs, 2) for _ in range(100_000))
    assert set(counts) == {1, 2} and counts[1] / 100_000 == pytest.approx(2 / 3, abs=0.01)


def test_realised_span_lengths_close_to_one_over_n():
    """Long sequences of one-piece words: the chosen n-grams follow 1/n (overlap rejection biases
    slightly towards short spans, as in the original)."""
    vocab = masking.MaskingVocab(4, (0, 1, 2, 3, 4), tuple(range(5, 1000)))
    config = masking.MaskingConfig(0.15, 150)
    counts = collections.Counter()
    for seed in range(150):
        rng = random.Random(seed)
        ids = [2] + [rng.randrange(5, 1000) for _ in range(1000)] + [3]
        counts.update(masking.mask_sequence(ids, [1] * len(ids), rng, config, vocab).span_lengths)
    total = sum(counts.values())
    fractions = [counts[n] / total for n in (1, 2, 3)]
    assert fractions == pytest.approx(THEORY, abs=0.03)
    assert fractions[0] > fractions[1] > fractions[2]


def test_masking_statistics_on_real_text(sequences, vocab, tokenizer):
    config = masking.MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=40)
    masked = tokens = kept = mask_token = replaced = 0
    for seed, (ids, starts) in enumerate(sequences * 5):
        out = masking.mask_sequence(ids, starts, random.Random(seed), config, vocab)
        assert out.positions == sorted(set(out.positions))
        assert len(out.positions) == masking.num_to_predict(
            len(ids), config
        )  # budget filled exactly
        assert out.labels == [ids[p] for p in out.positions]
        words, _ = masking.group_words(ids, starts, set(vocab.special_ids))
        chosen = set(out.positions)
        for start, end in words:  # whole words: all pieces of a word or none
            assert len(chosen & set(range(start, end))) in (0, end - start)
        for p in out.positions:
            assert ids[p] not in (tokenizer.cls_id, tokenizer.sep_id)
            new = out.token_ids[p]
            if new == tokenizer.mask_id:
                mask_token += 1
            elif new == ids[p]:
                kept += 1
            else:
                replaced += 1
                assert new not in vocab.special_ids
        unmasked = [i for i in range(len(ids)) if i not in chosen]
        assert [out.token_ids[i] for i in unmasked] == [ids[i] for i in unmasked]
        masked += len(out.positions)
        tokens += len(ids)
    assert masked / tokens == pytest.approx(0.15, abs=0.01)
    assert mask_token / masked == pytest.approx(0.8, abs=0.02)
    assert kept / masked == pytest.approx(0.1, abs=0.015)
    assert replaced / masked == pytest.approx(0.1, abs=0.015)


def test_words_and_ngrams_never_cross_special_tokens():
    # [CLS] a b [SEP] c d [SEP] where c is not a start piece: it still starts a word after [SEP].
    words, segments = masking.group_words([2, 10, 11, 3, 12, 13, 3], [1, 1, 0, 1, 0, 0, 1], {2, 3})
    assert words == [[1, 3], [4, 6]] and segments == [0, 1]
    vocab = masking.MaskingVocab(4, (0, 1, 2, 3, 4), tuple(range(5, 50)))
    config = masking.MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=20, ngram=3)
    for seed in range(200):
        out = masking.mask_sequence(
            [2, 10, 3, 11, 3], [1, 1, 1, 1, 1], random.Random(seed), config, vocab
        )
        assert out.span_lengths == [1, 1]  # one word per segment: no 2-gram across [SEP]


def test_piece_masking_when_whole_word_mask_is_off(sequences, vocab):
    config = masking.MaskingConfig(0.15, 40, ngram=1, do_whole_word_mask=False)
    split_words = 0
    for seed, (ids, starts) in enumerate(sequences[:200]):
        out = masking.mask_sequence(ids, starts, random.Random(seed), config, vocab)
        chosen = set(out.positions)
        words, _ = masking.group_words(ids, starts, set(vocab.special_ids))
        split_words += sum(0 < len(chosen & set(range(s, e))) < e - s for s, e in words)
    assert split_words > 0


def test_same_seed_same_masks(sequences, vocab):
    ids, starts = sequences[0]
    config = masking.MaskingConfig()
    a = masking.mask_sequence(ids, starts, random.Random(7), config, vocab)
    b = masking.mask_sequence(ids, starts, random.Random(7), config, vocab)
    c = masking.mask_sequence(ids, starts, random.Random(8), config, vocab)
    assert a == b and a.positions != c.positions
