"""The bag-of-words comparison classifier (albert_tf.finetune.bag_of_words)."""

import numpy as np
import pytest

from albert_tf.finetune.bag_of_words import BagOfWordsClassifier


def test_learns_words_and_scores_held_out_texts():
    rng = np.random.default_rng(0)
    cues = {0: ["tensor", "graph"], 1: ["array", "dtype"], 2: ["layer", "fit"]}
    filler = ["the", "a", "of", "returns", "value", "input", "shape"]

    def sample(n):
        labels = rng.integers(0, 3, n)
        texts = [" ".join(rng.choice(filler, 5).tolist() + [rng.choice(cues[y])]) for y in labels]
        return texts, labels

    model = BagOfWordsClassifier(min_df=1).fit(*sample(300))
    texts, labels = sample(100)
    assert model.score(texts, labels) == 1.0
    probabilities = model.predict_proba(texts)
    assert probabilities.shape == (100, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)


def test_pairs_keep_the_second_text_apart():
    # The label depends on which text holds the word: one bag for both could not tell.
    pairs = [("good", "plain"), ("plain", "good")] * 20
    labels = [0, 1] * 20
    model = BagOfWordsClassifier(min_df=1).fit(pairs, labels)
    assert model.predict([("good", "plain"), ("plain", "good")]).tolist() == [0, 1]


def test_refuses_mismatched_labels():
    with pytest.raises(ValueError, match="as many labels as texts"):
        BagOfWordsClassifier().fit(["a", "b"], [0])
