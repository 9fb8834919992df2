"""Entity-level precision/recall/F1 (conlleval's definition) pinned on hand-counted sequences."""

import pytest

from albert_tf.metrics.entity_metrics import (
    entity_scores,
    extract_entities,
    most_frequent_tag_baseline,
)


def test_extract_entities():
    assert extract_entities([]) == []
    assert extract_entities(["O", "O"]) == []
    # Entity at the end of the sequence.
    assert extract_entities(["O", "O", "B-MISC", "I-MISC"]) == [("MISC", 2, 4)]
    # Adjacent entities of the same type: B- starts the second.
    assert extract_entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 1), ("PER", 1, 3)]
    # Broken starts: I- at the start, after O, after another type.
    assert extract_entities(["I-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert extract_entities(["B-LOC", "I-PER", "I-PER"]) == [("LOC", 0, 1), ("PER", 1, 3)]
    # Types may contain hyphens.
    assert extract_entities(["B-GPE-ORG", "I-GPE-ORG"]) == [("GPE-ORG", 0, 2)]
    with pytest.raises(ValueError, match="tag 1 'S-PER' is not IOB2"):
        extract_entities(["O", "S-PER"])
    with pytest.raises(ValueError, match="tag 0 'B-' is not IOB2"):
        extract_entities(["B-"])


def test_exact_match_of_type_and_span():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG", "O", "B-ORG", "O"]]
    scores = entity_scores(gold, predicted)
    # Gold: PER(0,2) LOC(3,4) ORG(5,7). Predicted: PER(0,2), ORG(3,4) (same span as the gold LOC,
    # wrong type), ORG(5,6) (right type, span too short). Correct: PER only.
    # P = R = 1/3, F1 = 1/3. Words: 7, differing at positions 3 and 6 -> accuracy 5/7.
    assert scores["precision"] == pytest.approx(1 / 3)
    assert scores["recall"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx(1 / 3)
    assert scores["token_accuracy"] == pytest.approx(5 / 7)
    assert (
        scores["num_gold_entities"],
        scores["num_predicted_entities"],
        scores["num_correct_entities"],
    ) == (3, 3, 1)
    # PER: 1/1 predicted correct, 1/1 gold found. LOC: nothing predicted (P undefined -> 0.0),
    # 0/1 found. ORG: 0/2 predicted correct, 0/1 gold found.
    assert (
        scores["PER_precision"],
        scores["PER_recall"],
        scores["PER_f1"],
        scores["PER_support"],
    ) == (1.0, 1.0, 1.0, 1)
    assert (
        scores["LOC_precision"],
        scores["LOC_recall"],
        scores["LOC_f1"],
        scores["LOC_support"],
    ) == (0.0, 0.0, 0.0, 1)
    assert (
        scores["ORG_precision"],
        scores["ORG_recall"],
        scores["ORG_f1"],
        scores["ORG_support"],
    ) == (0.0, 0.0, 0.0, 1)


def test_broken_starts_count_as_starts():
    # Predicted I-PER at the start and I-LOC after O (at the end) are read as PER(0,2) and
    # LOC(3,4), the same entities as the gold B- tags: P = R = F1 = 1, while only 2 of the 4
    # tags are equal (accuracy 0.5).
    scores = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["I-PER", "I-PER", "O", "I-LOC"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (1.0, 1.0, 1.0)
    assert scores["token_accuracy"] == 0.5


def test_adjacent_entities_of_one_type():
    gold = [["B-PER", "B-PER", "I-PER"]]  # PER(0,1), PER(1,3)
    # One merged PER(0,3): matches neither. P = 0/1, R = 0/2, F1 = 0; 2 of 3 tags equal.
    merged = entity_scores(gold, [["B-PER", "I-PER", "I-PER"]])
    assert (merged["precision"], merged["recall"], merged["f1"]) == (0.0, 0.0, 0.0)
    assert (merged["num_gold_entities"], merged["num_predicted_entities"]) == (2, 1)
    assert merged["token_accuracy"] == pytest.approx(2 / 3)
    # A broken start followed by B-: PER(0,1), PER(1,3), both correct.
    split = entity_scores(gold, [["I-PER", "B-PER", "I-PER"]])
    assert (split["precision"], split["recall"], split["num_correct_entities"]) == (1.0, 1.0, 2)


def test_empty_predictions_and_no_entities():
    # Two gold entities, none predicted: P undefined -> 0.0, R = 0/2, F1 = 0. Equal tags: the two
    # O's of sentence 1, none of sentence 2 -> 2 of 5.
    scores = entity_scores([["B-PER", "O", "O"], ["B-LOC", "I-LOC"]], [["O"] * 3, ["O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["num_predicted_entities"] == 0
    assert scores["token_accuracy"] == pytest.approx(2 / 5)
    assert scores["PER_support"] == 1 and scores["LOC_support"] == 1
    # No entities on either side: everything 0.0 except the token accuracy.
    scores = entity_scores([["O", "O"]], [["O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["token_accuracy"] == 1.0
    assert [key for key in scores if key.endswith("_support")] == []
    assert entity_scores([], [])["token_accuracy"] == 0.0


def test_micro_average_over_sentences():
    gold = [
        ["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"],
        ["B-PER", "I-PER", "O", "B-LOC"],
        ["B-PER", "O"],
    ]
    predicted = [
        ["B-PER", "I-PER", "O", "B-ORG", "O", "B-ORG", "O"],
        ["I-PER", "I-PER", "O", "I-LOC"],
        ["O", "O"],
    ]
    scores = entity_scores(gold, predicted)
    # Sentence 1: 3 gold, 3 predicted, 1 correct; sentence 2: 2, 2, 2; sentence 3: 1, 0, 0.
    # Totals 6 gold, 5 predicted, 3 correct: P = 3/5, R = 3/6, F1 = 2PR/(P+R) = 0.6/1.1 = 6/11.
    assert scores["precision"] == pytest.approx(0.6)
    assert scores["recall"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx(6 / 11)
    # PER: gold 3, predicted 2 (both correct): P = 1, R = 2/3, F1 = 2 * (2/3) / (5/3) = 0.8.
    assert scores["PER_precision"] == 1.0
    assert scores["PER_recall"] == pytest.approx(2 / 3)
    assert scores["PER_f1"] == pytest.approx(0.8)
    assert scores["PER_support"] == 3
    # ORG: gold 1, predicted 2, correct 0.
    assert (scores["ORG_precision"], scores["ORG_support"]) == (0.0, 1)
    # Words: 7 + 4 + 2 = 13; unequal: 2 + 2 + 1 = 5 -> accuracy 8/13.
    assert scores["token_accuracy"] == pytest.approx(8 / 13)


def test_entities_do_not_cross_sentences():
    # I-PER opening sentence 2 is a new (broken-start) entity, not a continuation.
    scores = entity_scores([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])
    assert (scores["num_gold_entities"], scores["num_correct_entities"]) == (2, 2)


def test_length_mismatches():
    with pytest.raises(ValueError, match="2 gold sequences but 1 predicted"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sequence 1: 2 gold tags but 1 predicted"):
        entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])


def test_most_frequent_tag_baseline():
    words = [
        ["John", "lives", "in", "New", "York"],
        ["Paris", "Hilton", "in", "Paris"],
        ["New", "ideas"],
    ]
    tags = [["B-PER", "O", "O", "B-LOC", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"], ["O", "O"]]
    baseline = most_frequent_tag_baseline(words, tags)
    # "Paris": B-PER once, B-LOC once -> tie, the smaller tag B-LOC. "New": B-LOC once, O once
    # -> tie, B-LOC < O. Unseen words -> "O".
    assert baseline.predict([["Paris", "New", "York", "Berlin"]]) == [
        ["B-LOC", "B-LOC", "I-LOC", "O"]
    ]
    # Raw predictions, scored with broken starts: "York" alone is I-LOC -> LOC(1,2).
    # Gold LOC(1,2): correct, so P = R = 1 over the one entity.
    dev_words, dev_tags = [["in", "York"]], [["O", "B-LOC"]]
    predicted = baseline.predict(dev_words)
    assert predicted == [["O", "I-LOC"]]
    scores = entity_scores(dev_tags, predicted)
    assert (scores["precision"], scores["recall"], scores["token_accuracy"]) == (1.0, 1.0, 0.5)


def test_baseline_without_o_tag():
    # POS tags: NN 2, VB 2 -> tie overall, NN (smaller) for unseen words.
    baseline = most_frequent_tag_baseline(
        [["run", "dogs", "run", "cats"]], [["VB", "NN", "NN", "VB"]]
    )
    assert baseline.predict([["run", "zebras"], []]) == [["NN", "NN"], []]
    assert baseline.default_tag == "NN"
    with pytest.raises(ValueError, match="sequence 0: 2 words but 1 tags"):
        most_frequent_tag_baseline([["a", "b"]], [["O"]])
    with pytest.raises(ValueError, match="no training words"):
        most_frequent_tag_baseline([], [])
