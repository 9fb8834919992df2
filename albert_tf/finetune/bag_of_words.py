"""A bag-of-words text classifier: TF-IDF of words and word pairs + multinomial logistic regression.

The comparison a fine-tuned ALBERT has to beat before pretraining can be said to have helped:
it knows nothing of language beyond which words occur. NumPy only (no scikit-learn), small data
only (the feature matrix is dense: examples x features).

Features: lowercased word unigrams and bigrams (`\\w+` runs), those seen in at least `min_df`
training texts, at most `max_features` of them (the most frequent); a pair's second text gets
its own features. Weights: tf * idf with idf = ln((1 + n) / (1 + df)) + 1, rows L2-normalized
(scikit-learn's TfidfVectorizer defaults). The classifier minimises the mean cross-entropy plus
`l2 / 2 * |W|^2` by full-batch gradient descent with Nesterov momentum (convex: it converges to
the one optimum).

>>> model = BagOfWordsClassifier(min_df=1).fit(
...     ["a fine film", "a great film", "a dull film", "a bad film"], [1, 1, 0, 0])
>>> model.predict(["great", "dull"]).tolist()
[1, 0]
"""

import collections
import re

import numpy as np

_WORD = re.compile(r"\w+")


def _terms(text, prefix=""):
    words = _WORD.findall(text.lower())
    return [prefix + w for w in words] + [f"{prefix}{a} {b}" for a, b in zip(words, words[1:])]


def _example_terms(example):
    """Terms of one example: a text, or a (text, text_pair) pair."""
    if isinstance(example, str):
        return _terms(example)
    first, second = example
    return _terms(first) + _terms(second, prefix="b:")


class BagOfWordsClassifier:
    """TF-IDF + logistic regression; `fit(texts, labels)`, `predict(texts)`, `score(texts,
    labels)` (accuracy). A text is a string or a (text, text_pair) pair."""

    def __init__(self, min_df=2, max_features=20000, l2=1e-4, steps=300, learning_rate=2.0):
        self.min_df = min_df
        self.max_features = max_features
        self.l2 = l2
        self.steps = steps
        self.learning_rate = learning_rate

    def _features(self, examples):
        x = np.zeros([len(examples), len(self.vocabulary)], np.float32)
        for row, example in enumerate(examples):
            for term, count in collections.Counter(_example_terms(example)).items():
                column = self.vocabulary.get(term)
                if column is not None:
                    x[row, column] = count
        x *= self.idf
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.maximum(norms, 1e-12)

    def fit(self, examples, labels):
        labels = np.asarray(labels, np.int64)
        if len(examples) != len(labels) or not len(labels):
            raise ValueError(
                f"need as many labels as texts (> 0): {len(examples)} vs {len(labels)}"
            )
        document_frequency = collections.Counter()
        for example in examples:
            document_frequency.update(set(_example_terms(example)))
        kept = [(df, t) for t, df in document_frequency.items() if df >= self.min_df]
        kept = sorted(kept, key=lambda item: (-item[0], item[1]))[: self.max_features]
        self.vocabulary = {term: i for i, (_, term) in enumerate(kept)}
        df = np.array([d for d, _ in kept], np.float32)
        self.idf = np.log((1 + len(examples)) / (1 + df)) + 1
        x = self._features(examples)
        self.num_classes = int(labels.max()) + 1
        onehot = np.eye(self.num_classes, dtype=np.float32)[labels]
        weights = np.zeros([x.shape[1], self.num_classes], np.float32)
        bias = np.zeros([self.num_classes], np.float32)
        velocity_w, velocity_b = np.zeros_like(weights), np.zeros_like(bias)
        for _ in range(self.steps):  # Nesterov: the gradient at the look-ahead point
            ahead_w, ahead_b = weights + 0.9 * velocity_w, bias + 0.9 * velocity_b
            error = _softmax(x @ ahead_w + ahead_b) - onehot
            grad_w = x.T @ error / len(x) + self.l2 * ahead_w
            grad_b = error.mean(axis=0)
            velocity_w = 0.9 * velocity_w - self.learning_rate * grad_w
            velocity_b = 0.9 * velocity_b - self.learning_rate * grad_b
            weights, bias = weights + velocity_w, bias + velocity_b
        self.weights, self.bias = weights, bias
        return self

    def predict_proba(self, examples):
        return _softmax(self._features(examples) @ self.weights + self.bias)

    def predict(self, examples):
        return self.predict_proba(examples).argmax(axis=1)

    def score(self, examples, labels):
        """Accuracy on (examples, labels)."""
        return float(np.mean(self.predict(examples) == np.asarray(labels)))


def _softmax(logits):
    logits = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)
