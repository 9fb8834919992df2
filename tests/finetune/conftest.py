"""Fixtures for the fine-tuning tests: a tiny preprocessor and a briefly trained classifier."""
import numpy as np
import pytest

SEQ_LENGTH = 32


def sentence_task(corpus_file, limit=256):
    """A small real task from the corpus: does the sentence mention "file"? (texts, labels)."""
    with open(corpus_file, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    positives = [s for s in sentences if " file" in s.lower()][:limit // 2]
    negatives = [s for s in sentences if "file" not in s.lower()][:limit // 2]
    texts = positives + negatives
    labels = np.array([1] * len(positives) + [0] * len(negatives), np.int32)
    order = np.random.default_rng(0).permutation(len(texts))
    return [texts[i] for i in order], labels[order]


@pytest.fixture(scope="session")
def make_sentence_task(corpus_file):
    """`sentence_task` on the shared corpus, as a fixture (conftest modules are not importable)."""
    return lambda limit=256: sentence_task(corpus_file, limit)


@pytest.fixture(scope="session")
def preprocessor(spm_model_file):
    import keras

    from albert_tf.models.preprocessor import AlbertPreprocessor

    # Seed first: tf.random.set_seed clears TF's kernel cache, which deletes the SentencePiece
    # resources of tokenizers created before it.
    keras.utils.set_random_seed(1)
    return AlbertPreprocessor(spm_model_file, seq_length=SEQ_LENGTH)


@pytest.fixture(scope="session")
def trained(preprocessor, corpus_file):
    """(classifier, texts, labels, history) after a short fit on the corpus task."""
    from albert_tf.config import AlbertConfig
    from albert_tf.data.tasks import Examples, make_dataset
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier

    texts, labels = sentence_task(corpus_file)
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=2)
    model = AlbertClassifier(AlbertModel(config), labels=["other", "file"], dropout=0.0)
    model.compile(learning_rate=5e-4)  # defaults otherwise: AdamW, warmup + decay, clipping
    dataset = make_dataset(Examples(texts, labels=labels), preprocessor, 32, training=True, seed=0)
    history = model.fit(dataset, epochs=3, steps_per_epoch=6, verbose=0)
    return model, texts, labels, history
