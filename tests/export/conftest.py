"""Fixtures for the LiteRT tests: a tiny classifier task on the shared corpus, and its model."""

import os
import random
import sys

import numpy as np
import pytest

for _folder in ("finetune", "scripts"):  # finetune_support, script_support
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), _folder))

SEQ_LENGTH = 16
SPREAD_TEXTS = [
    "open the file",
    "A short sentence about a file.",
    "returns a tensor of zeros",
    "Köln café naïve",
    "the object is read twice",
    "",
    "raise ValueError if empty",
    "numbers 1, 2 and 3",
    "東京",
    "keras layers and models",
]


@pytest.fixture(scope="session")
def litert_task(corpus_file, spm_model_file, tmp_path_factory):
    """A loaded `SentenceClassificationTask` (train/dev TSV files from the corpus)."""
    import keras
    from finetune_support import write_tsv_splits

    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask

    # Seed first: tf.random.set_seed clears TF's kernel cache, which deletes the SentencePiece
    # resources of tokenizers created before it.
    keras.utils.set_random_seed(3)
    paths, _ = write_tsv_splits(
        str(tmp_path_factory.mktemp("litert_data")), corpus_file, train=64, limit=96
    )
    task = SentenceClassificationTask(
        ClassificationData(
            task_name="mentions-file",
            train_file=paths["train"],
            dev_file=paths["dev"],
            text_column="sentence",
        )
    )
    task.configure_text(spm_model_file, max_seq_length=SEQ_LENGTH)
    task.load(["train", "dev"])
    return task


@pytest.fixture(scope="session")
def litert_classifier(litert_task):
    """A tiny untrained classifier whose head is spread so that texts get different outputs."""
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel

    random.seed(7)  # Keras draws the seeds of unseeded initializers from Python's `random`:
    # the same weights in every test process, without tf.random.set_seed (see litert_task)
    config = AlbertConfig.from_preset(
        "albert_tiny",
        vocab_size=litert_task.vocab_size,
        num_hidden_layers=2,
        embedding_size=128,
        intermediate_size=1024,
    )
    model = litert_task.build_model(AlbertModel(config), dropout=0.0)
    inputs = litert_task.preprocessor(np.array(["a"], object))
    model(inputs)
    # Point the head along the direction in which pooled outputs of different texts differ most,
    # scaled to a logit spread of about 2: outputs vary from text to text whatever the random
    # initialisation was (an untrained backbone gives nearly the same [CLS] vector for all).
    texts = np.array(SPREAD_TEXTS, object)
    pooled = model.backbone(litert_task.preprocessor(texts))["pooled_output"].numpy()
    centered = pooled - pooled.mean(axis=0)
    direction = np.linalg.svd(centered, full_matrices=False)[2][0]
    scale = 2.0 / (centered @ direction).std()
    kernel = np.zeros(model.logits.kernel.shape, "float32")
    kernel[:, 1] = direction * scale
    model.logits.kernel.assign(kernel)
    model.logits.bias.assign(np.array([0.0, -scale * pooled.mean(axis=0) @ direction], "float32"))
    return model
