"""Entity-level scores for token classification, defined as CoNLL's conlleval script does.

An entity is a run of IOB2 tags of one type. It starts at B-X, or at an I-X that does not
continue an entity of type X (a "broken" start after O or after another type; conlleval reads
it as a start too), and goes on over the following I-X tags. A predicted entity is correct
when its type, first word and last word all match a gold entity. Precision, recall and F1 are
micro-averaged over all entities, and also computed for each type.

>>> extract_entities(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"])
[('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5)]
>>> scores = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-ORG"]])
>>> scores["precision"], scores["recall"], scores["PER_f1"], scores["LOC_recall"]
(0.5, 0.5, 1.0, 0.0)
"""

import collections


def extract_entities(tags):
    """The entities of one sentence's IOB2 tags: a list of (type, start, end_exclusive).

    Raises ValueError for a tag other than "O", B-<TYPE> or I-<TYPE>.
    """
    entities = []
    start, kind = 0, None  # kind: type of the entity being read, None outside entities
    for position, tag in enumerate(tags):
        prefix, tag_kind = _split(tag, position)
        continues = prefix == "I" and tag_kind == kind
        if kind is not None and not continues:
            entities.append((kind, start, position))
            kind = None
        if prefix != "O" and not continues:
            start, kind = position, tag_kind
    if kind is not None:
        entities.append((kind, start, len(tags)))
    return entities


def entity_scores(gold_tag_lists, predicted_tag_lists):
    """conlleval's scores for parallel lists of gold and predicted IOB2 tag sequences.

    Returns a dict: overall "precision", "recall", "f1" (exact type and span matches,
    micro-averaged; 0.0 when undefined), "token_accuracy" (over all words), per entity type
    "<TYPE>_precision", "<TYPE>_recall", "<TYPE>_f1", "<TYPE>_support" (gold entities), and
    the counts "num_gold_entities", "num_predicted_entities", "num_correct_entities".
    """
    if len(gold_tag_lists) != len(predicted_tag_lists):
        raise ValueError(
            f"{len(gold_tag_lists)} gold sequences but "
            f"{len(predicted_tag_lists)} predicted sequences"
        )
    gold_counts, predicted_counts, correct_counts = (collections.Counter() for _ in range(3))
    words = correct_words = 0
    for index, (gold, predicted) in enumerate(zip(gold_tag_lists, predicted_tag_lists)):
        if len(gold) != len(predicted):
            raise ValueError(
                f"sequence {index}: {len(gold)} gold tags but {len(predicted)} predicted tags"
            )
        words += len(gold)
        correct_words += sum(g == p for g, p in zip(gold, predicted))
        gold_entities = set(extract_entities(gold))
        predicted_entities = set(extract_entities(predicted))
        gold_counts.update(kind for kind, _, _ in gold_entities)
        predicted_counts.update(kind for kind, _, _ in predicted_entities)
        correct_counts.update(kind for kind, _, _ in gold_entities & predicted_entities)
    num_gold, num_predicted = sum(gold_counts.values()), sum(predicted_counts.values())
    num_correct = sum(correct_counts.values())
    scores = _precision_recall_f1(num_correct, num_predicted, num_gold)
    scores["token_accuracy"] = correct_words / words if words else 0.0
    for kind in sorted(set(gold_counts) | set(predicted_counts)):
        kind_scores = _precision_recall_f1(
            correct_counts[kind], predicted_counts[kind], gold_counts[kind]
        )
        for name, value in kind_scores.items():
            scores[f"{kind}_{name}"] = value
        scores[f"{kind}_support"] = gold_counts[kind]
    scores.update(
        num_gold_entities=num_gold,
        num_predicted_entities=num_predicted,
        num_correct_entities=num_correct,
    )
    return scores


class MostFrequentTagBaseline:
    """Tags each word with its most frequent training tag, and unseen words with `default_tag`.

    Predictions are the raw per-word tags, not repaired to valid IOB2: an I-X after O is a
    broken start, which `entity_scores` (like conlleval) reads as the start of an entity.

    >>> baseline = most_frequent_tag_baseline([["New", "York", "is", "big"]],
    ...                                       [["B-LOC", "I-LOC", "O", "O"]])
    >>> baseline.predict([["York", "is", "new"]])
    [['I-LOC', 'O', 'O']]
    """

    def __init__(self, tag_of_word, default_tag):
        self.tag_of_word = dict(tag_of_word)
        self.default_tag = default_tag

    def predict(self, word_lists):
        """One tag list per word list."""
        return [
            [self.tag_of_word.get(word, self.default_tag) for word in words] for words in word_lists
        ]


def most_frequent_tag_baseline(train_words, train_tags):
    """A `MostFrequentTagBaseline` counted on parallel lists of word and tag lists.

    A word's tag is its most frequent training tag (ties: the lexicographically smaller tag).
    Unseen words get "O" if the training tags have it, else the most frequent tag overall.
    """
    if len(train_words) != len(train_tags):
        raise ValueError(f"{len(train_words)} word sequences but {len(train_tags)} tag sequences")
    per_word = collections.defaultdict(collections.Counter)
    overall = collections.Counter()
    for index, (words, tags) in enumerate(zip(train_words, train_tags)):
        if len(words) != len(tags):
            raise ValueError(f"sequence {index}: {len(words)} words but {len(tags)} tags")
        for word, tag in zip(words, tags):
            per_word[word][tag] += 1
            overall[tag] += 1
    if not overall:
        raise ValueError("no training words to count tags on")
    tag_of_word = {word: _most_frequent(counts) for word, counts in per_word.items()}
    return MostFrequentTagBaseline(tag_of_word, "O" if "O" in overall else _most_frequent(overall))


def _most_frequent(counts):
    """The most frequent key of a Counter; ties go to the smallest key."""
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]


def _precision_recall_f1(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _split(tag, position):
    """(prefix, type) of an IOB2 tag: ("O", None), ("B", type) or ("I", type)."""
    if tag == "O":
        return "O", None
    if len(tag) > 2 and tag[0] in "BI" and tag[1] == "-":
        return tag[0], tag[2:]
    raise ValueError(
        f"tag {position} {tag!r} is not IOB2 (expected 'O', B-<TYPE> or "
        f"I-<TYPE>); convert with albert_tf.data.conll.normalize_tags"
    )
