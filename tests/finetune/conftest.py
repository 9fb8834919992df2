"""Fixtures for the fine-tuning tests: a tiny preprocessor and a briefly trained classifier."""

import numpy as np
import pytest
from finetune_support import sentence_task

SEQ_LENGTH = 32


@pytest.fixture(scope="session")
def make_sentence_task(corpus_file):
    """`sentence_task` on the shared corpus, as a fixture."""
    return lambda limit=256: sentence_task(corpus_file, limit)


@pytest.fixture(scope="session")
def preprocessor(spm_model_file):
    import keras

    from albert_tf.models.preprocessor import AlbertPreprocessor

    # Seed first: tf.random.set_seed clears TF's kernel cache, which deletes the SentencePiece
    # resources of tokenizers created before it.
    keras.utils.set_random_seed(1)
    return AlbertPreprocessor(spm_model_file, max_seq_length=SEQ_LENGTH)


@pytest.fixture(scope="session")
def trained(preprocessor, corpus_file):
    """(classifier, texts, labels, history) after a short fit on the corpus task."""
    from albert_tf.config import AlbertConfig
    from albert_tf.finetune.inputs import train_dataset
    from albert_tf.finetune.task import Features
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier

    texts, labels = sentence_task(corpus_file)
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, num_hidden_layers=2)
    model = AlbertClassifier(AlbertModel(config), labels=["other", "file"], dropout=0.0)
    # float32: the export tests compare served outputs (a float32 graph) with the model's to 1e-4.
    model.compile(learning_rate=2e-3, precision="float32")  # defaults otherwise: AdamW, ...
    features = Features({"text": np.asarray(texts, dtype=object)}, labels)
    dataset = train_dataset(features, 32, seed=0, transform=preprocessor)
    history = model.fit(dataset, epochs=3, steps_per_epoch=6, verbose=0)
    return model, texts, labels, history
