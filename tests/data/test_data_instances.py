"""Segments A/B, SOP swaps checked against the source sentences, NSP negatives, layout."""

import random

import pytest

from albert_tf.data import instances, masking

CLS, SEP = 2, 3
VOCAB = masking.MaskingVocab(4, (0, 1, 2, 3, 4), tuple(range(5, 5000)))


def _documents(num_documents=40, seed=0):
    """Synthetic documents whose every piece names its (document, sentence)."""
    rng = random.Random(seed)
    docs, origin = [], {}
    for d in range(num_documents):
        sentences = []
        for k in range(rng.randint(2, 12)):
            piece = 10 + d * 100 + k
            origin[piece] = (d, k)
            sentences.append([piece] * rng.randint(3, 15))
        docs.append(instances.Document(sentences, [[1] * len(s) for s in sentences]))
    return docs, origin


def _create(config, docs, passes=5):
    out = []
    for dupe in range(passes):
        for index in range(len(docs)):
            rng = instances.document_rng(1, dupe, index)
            for inst in instances.create_instances(docs, index, rng, config, VOCAB, CLS, SEP):
                out.append((index, inst))
    return out


def _segments(inst):
    first_sep = inst.input_ids.index(SEP)
    return inst.input_ids[1:first_sep], inst.input_ids[first_sep + 1 : -1]


def test_sop_label_balance_and_swaps_against_source():
    docs, origin = _documents(120)
    config = instances.InstanceConfig(max_seq_length=64, short_seq_prob=0.1, masking=None)
    results = _create(config, docs, passes=6)
    sop = [(i, inst) for i, inst in results if not inst.is_random_document]
    assert len(sop) > 500
    swapped = sum(inst.next_sentence_label for _, inst in sop) / len(sop)
    assert swapped == pytest.approx(0.5, abs=0.05)
    for index, inst in sop:
        a, b = _segments(inst)
        sentences_a = sorted({origin[p][1] for p in a})
        sentences_b = sorted({origin[p][1] for p in b})
        assert {origin[p][0] for p in a + b} == {index}  # both from the instance's own document
        if inst.next_sentence_label == 0:
            assert sentences_a[-1] < sentences_b[0]  # A then B, in order
        else:
            assert sentences_b[-1] < sentences_a[0]  # swapped: B's sentences come before A's
        # Contiguous sentences on each side (truncation only trims the ends).
        for side in (sentences_a, sentences_b):
            assert side == list(range(side[0], side[-1] + 1))
    # One-sentence chunks (a sentence reaching the target) take B from another document.
    for index, inst in results:
        if inst.is_random_document:
            a, b = _segments(inst)
            assert inst.next_sentence_label == 1 and {origin[p][0] for p in b} != {index}


def test_nsp_random_next_sentence():
    docs, origin = _documents(120)
    # Targets longer than any document: the first chunk is the whole document (>= 2 sentences),
    # so its coin is a clean 50/50 (later chunks of one sentence are always random, as in the
    # original).
    config = instances.InstanceConfig(
        max_seq_length=512, short_seq_prob=0.0, random_next_sentence=True, masking=None
    )
    results = _create(config, docs, passes=6)
    first_of_each = [
        instances.create_instances(
            docs, i, instances.document_rng(1, dupe, i), config, VOCAB, CLS, SEP
        )[0]
        for dupe in range(6)
        for i in range(len(docs))
    ]
    random_docs = sum(inst.is_random_document for inst in first_of_each) / len(first_of_each)
    assert len(first_of_each) == 720
    assert random_docs == pytest.approx(0.5, abs=0.06)
    for index, inst in results:
        a, b = _segments(inst)
        if inst.next_sentence_label == 0:
            assert max(origin[p][1] for p in a) < min(origin[p][1] for p in b)
        else:
            assert {origin[p][0] for p in b} != {index}


def test_layout_lengths_and_masking():
    docs, _ = _documents()
    config = instances.InstanceConfig(
        max_seq_length=32,
        short_seq_prob=0.5,
        masking=masking.MaskingConfig(max_predictions_per_seq=5),
    )
    short = 0
    for _, inst in _create(config, docs, passes=2):
        ids, segments = inst.input_ids, inst.segment_ids
        a, b = _segments(inst)
        assert len(ids) <= 32 and a and b
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
        assert segments == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        assert (
            inst.token_boundary[0]
            == inst.token_boundary[len(a) + 1]
            == inst.token_boundary[-1]
            == 1
        )
        assert 1 <= len(inst.masked_lm_positions) <= 5
        assert all(0 < p < len(ids) - 1 and p != len(a) + 1 for p in inst.masked_lm_positions)
        short += len(ids) < 20
    assert short > 0  # short_seq_prob yields shorter targets


def test_per_document_rng_is_independent_of_processing_order():
    docs, _ = _documents(10)
    config = instances.InstanceConfig(max_seq_length=48)
    forward = {
        i: instances.create_instances(
            docs, i, instances.document_rng(3, 0, i), config, VOCAB, CLS, SEP
        )
        for i in range(10)
    }
    backward = {
        i: instances.create_instances(
            docs, i, instances.document_rng(3, 0, i), config, VOCAB, CLS, SEP
        )
        for i in reversed(range(10))
    }
    assert forward == backward
    other = instances.create_instances(
        docs, 0, instances.document_rng(4, 0, 0), config, VOCAB, CLS, SEP
    )
    assert other != forward[0]


def test_config_errors_name_the_value():
    with pytest.raises(ValueError, match="max_seq_length must be >= 5"):
        instances.InstanceConfig(max_seq_length=4)
    with pytest.raises(
        ValueError, match="max_predictions_per_seq .30. exceeds max_seq_length .16."
    ):
        instances.InstanceConfig(
            max_seq_length=16, masking=masking.MaskingConfig(max_predictions_per_seq=30)
        )
