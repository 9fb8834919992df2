"""albert_tf.data: corpora, pretraining-instance creation, the TFRecord schema and tf.data
pipelines.

Modules (each imported on first use, `albert_tf.data.corpora` included, so that worker processes
stay light):
- `corpora`: `iter_documents(spec, ...)`, documents as lists of sentences (files, gs://, TFDS,
  builtin).
- `corpus_layout`: refuses a file read one sentence per line that holds one document per line.
- `masking`: ALBERT's n-gram whole-word masking (pure Python, seeded).
- `instances`: segments A/B and SOP/NSP labels for one document.
- `schema`: the original TFRecord feature names/dtypes and a pure-Python Example encoder.
- `writer`: shard names, bounded shuffle buffer, atomic sharded TFRecord writing.
- `pretraining`: `create_pretraining_data(...)`, the streaming multi-process driver.
- `pipeline`: `pretraining_dataset(...)` and `dynamic_masking_dataset(...)` for training.
- `input_checks`: the training files checked before training; a corrupt record blamed on its file.
"""

from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
