"""Fixtures for the LiteRT tests: a tiny classifier task on the shared corpus, and its model."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "finetune"))

SEQ_LENGTH = 16


@pytest.fixture(scope="session")
def litert_task(corpus_file, spm_model_file, tmp_path_factory):
    """A loaded `SentenceClassificationTask` (train/dev TSV files from the corpus)."""
    import keras
    from finetune_support import write_tsv_splits

    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask

    # Seed first: tf.random.set_seed clears TF's kernel cache, which deletes the SentencePiece
    # resources of tokenizers created before it.
    keras.utils.set_random_seed(3)
    paths, _ = write_tsv_splits(str(tmp_path_factory.mktemp("litert_data")), corpus_file,
                                train=64, limit=96)
    task = SentenceClassificationTask(ClassificationData(
        task_name="mentions-file", train_file=paths["train"], dev_file=paths["dev"],
        text_column="sentence"))
    task.configure_text(spm_model_file, seq_length=SEQ_LENGTH)
    task.load(["train", "dev"])
    return task


@pytest.fixture(scope="session")
def litert_classifier(litert_task):
    """A tiny untrained classifier whose head is spread so that texts get different outputs."""
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=litert_task.vocab_size,
                                      num_hidden_layers=2, embedding_size=128,
                                      intermediate_size=1024)
    model = litert_task.build_model(AlbertModel(config), dropout=0.0)
    inputs = litert_task.preprocessor(np.array(["a"], object))
    model(inputs)
    rng = np.random.default_rng(0)  # seeded weights: the same model in every test process
    model.set_weights([rng.normal(0.0, 0.02, w.shape).astype("float32") if len(w.shape) > 1
                       else w.numpy() for w in model.weights])
    kernel = rng.normal(0.0, 3.0, model.logits.kernel.shape)
    model.logits.kernel.assign(kernel.astype("float32"))
    return model
