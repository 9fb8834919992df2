"""tf.data input pipelines for pretraining: TPU-ready static shapes, per-host sharding.

* `pretraining_dataset` reads masked records (ours or the original tool's).
* `dynamic_masking_dataset` reads unmasked records (`create_pretraining_data --no_masking`, or
  masked ones with token_boundary, whose masks it undoes) and applies ALBERT's n-gram whole-word
  masking on the fly, fresh every epoch.

Both yield dicts of int32 tensors of static shape input_word_ids, input_mask, input_type_ids
[B, max_seq_length]; masked_lm_positions, masked_lm_ids [B, max_predictions_per_seq];
next_sentence_labels [B]; and float32 masked_lm_weights [B, max_predictions_per_seq].

>>> ds = pretraining_dataset("gs://bucket/data/train-*", batch_size=32, max_seq_length=512,
...                          max_predictions_per_seq=20)              # doctest: +SKIP
>>> strategy.distribute_datasets_from_function(lambda ctx: pretraining_dataset(
...     files, ctx.get_per_replica_batch_size(4096), 512, 20, input_context=ctx))  # doctest: +SKIP
"""

import random
from typing import Optional, Sequence, Union

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import files as files_lib
from albert_tf.data import masking, schema, writer

_AUTOTUNE = tf.data.AUTOTUNE


def is_side_file(path: str) -> bool:
    """True for what create_pretraining_data writes beside its records: the summary JSON and
    hidden staging files (a glob such as data/* matches them; they are not records)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.endswith(writer.SUMMARY_SUFFIX) or name.startswith(files_lib.TEMPORARY_PREFIX)


def match_files(file_patterns: Union[str, Sequence[str]]) -> tuple:
    """(sorted record files, sorted side files left out) matching comma-separated patterns (globs,
    gs:// allowed); FileNotFoundError naming a pattern that matches no record file."""
    patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
    patterns = [p.strip() for item in patterns for p in str(item).split(",") if p.strip()]
    if not patterns:
        raise ValueError("file_patterns is empty")
    records, side = set(), set()
    for pattern in patterns:
        matched = tf.io.gfile.glob(pattern)
        kept = [path for path in matched if not is_side_file(path)]
        if not kept:
            only = f" (only {', '.join(sorted(matched))})" if matched else ""
            raise FileNotFoundError(f"no TFRecord file matches {pattern!r}{only}")
        records.update(kept)
        side.update(set(matched) - set(kept))
    return sorted(records), sorted(side)


def list_files(file_patterns: Union[str, Sequence[str]]) -> list:
    """Sorted record files matching comma-separated patterns (summaries and staging files left
    out, see `is_side_file`); FileNotFoundError when a pattern matches none."""
    return match_files(file_patterns)[0]


def _read_records(
    files: list, is_training: bool, input_context, seed: Optional[int], cycle_length: int
) -> tf.data.Dataset:
    """Serialized records of this input pipeline's share of `files` (repeated when training).

    Files are sharded by input_pipeline_id when there are at least as many files as pipelines;
    otherwise every pipeline reads all files in a fixed order and keeps every n-th record.
    """
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    dataset = tf.data.Dataset.from_tensor_slices(files)
    shard_elements = num_pipelines > 1 and len(files) < num_pipelines
    if num_pipelines > 1 and not shard_elements:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    elif shard_elements:
        logging.warning(
            "%d files for %d input pipelines: sharding by record (every pipeline reads every "
            "file); write at least as many files as hosts",
            len(files),
            num_pipelines,
        )
    if is_training:
        if not shard_elements:
            dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        cycle_length=max(1, min(cycle_length, len(files))),
        num_parallel_calls=_AUTOTUNE,
        deterministic=(seed is not None or not is_training),
    )
    if shard_elements:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = seed is not None or not is_training
    return dataset.with_options(options)


def _to_model_inputs(features: dict) -> dict:
    """Record names -> model input names; int64 -> int32; labels [B, 1] -> [B]."""
    out = {}
    for name, key in schema.MODEL_INPUT_NAMES.items():
        value = features[name]
        if value.dtype == tf.int64:
            value = tf.cast(value, tf.int32)
        out[key] = value
    out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [-1])
    return out


def _check_args(batch_size, max_seq_length, max_predictions_per_seq):
    for name, value in (
        ("batch_size", batch_size),
        ("max_seq_length", max_seq_length),
        ("max_predictions_per_seq", max_predictions_per_seq),
    ):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def pretraining_dataset(
    file_patterns,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    is_training: bool = True,
    input_context: Optional[tf.distribute.InputContext] = None,
    seed: Optional[int] = None,
    shuffle_buffer_size: int = 1000,
    cycle_length: int = 8,
) -> tf.data.Dataset:
    """Batches of masked pretraining records, ready for `AlbertPretrainer`.

    Training: this pipeline's files (see `_read_records`), shuffled, repeated, interleaved, records
    shuffled; evaluation: files in order, once, no shuffling. `batch_size` is per replica;
    drop_remainder=True. With a seed, the order is reproducible.
    """
    _check_args(batch_size, max_seq_length, max_predictions_per_seq)
    files = list_files(file_patterns)
    dataset = _read_records(files, is_training, input_context, seed, cycle_length)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    spec = schema.feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(
        lambda records: _to_model_inputs(tf.io.parse_example(records, spec)),
        num_parallel_calls=_AUTOTUNE,
        deterministic=seed is not None or not is_training,
    )
    return dataset.prefetch(_AUTOTUNE)


def _record_features(path: str) -> set:
    """Feature names of the first record of `path` (to tell masked from unmasked records)."""
    for record in tf.data.TFRecordDataset(path).take(1):
        return set(tf.train.Example.FromString(record.numpy()).features.feature)
    raise ValueError(f"{path} holds no record")


class _BatchMasker:
    """The numpy side of dynamic masking: `albert_tf.data.masking.mask_sequence` per row."""

    def __init__(self, config: masking.MaskingConfig, vocab: masking.MaskingVocab):
        self.config = config
        self.vocab = vocab

    def __call__(self, input_ids, input_mask, token_boundary, seeds, positions, labels, weights):
        batch, width = input_ids.shape[0], self.config.max_predictions_per_seq
        out_ids = input_ids.copy()
        out_positions = np.zeros([batch, width], np.int64)
        out_labels = np.zeros([batch, width], np.int64)
        out_weights = np.zeros([batch, width], np.float32)
        for row in range(batch):
            length = int(input_mask[row].sum())
            tokens = input_ids[row, :length].copy()
            real = weights[row] > 0
            tokens[positions[row][real]] = labels[row][real]  # undo the record's own masks, if any
            result = masking.mask_sequence(
                tokens.tolist(),
                token_boundary[row, :length].tolist(),
                random.Random(int(seeds[row])),
                self.config,
                self.vocab,
            )
            n = len(result.positions)
            out_ids[row, :length] = result.token_ids
            out_positions[row, :n] = result.positions
            out_labels[row, :n] = result.labels
            out_weights[row, :n] = 1.0
        return out_ids, out_positions, out_labels, out_weights


def dynamic_masking_dataset(
    file_patterns,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    spm_model=None,
    *,
    vocab: Optional[masking.MaskingVocab] = None,
    masked_lm_prob: float = 0.15,
    ngram: int = 3,
    favor_shorter_ngram: bool = True,
    is_training: bool = True,
    input_context: Optional[tf.distribute.InputContext] = None,
    seed: Optional[int] = None,
    shuffle_buffer_size: int = 1000,
    cycle_length: int = 8,
) -> tf.data.Dataset:
    """Like `pretraining_dataset`, but masks on the fly (new masks every epoch).

    Reads records with input_ids, input_mask, segment_ids, token_boundary and
    next_sentence_labels: those of `create_pretraining_data --no_masking`, or masked ones (ours or
    the original tool's, which keep token_boundary), whose masks are undone first. The masking is
    `albert_tf.data.masking.mask_sequence` (the offline code) run through `tf.numpy_function` on
    the host, one batch per call; each record gets a seed from
    `tf.data.Dataset.random(seed, rerandomize_each_iteration=True)`, so masks differ between
    epochs (and between iterations of the dataset) yet repeat exactly for the same seed. Needs a
    Python host (not tf.data service workers). The vocabulary comes from `spm_model` (or
    pass `vocab`): random replacements never draw special pieces.
    """
    _check_args(batch_size, max_seq_length, max_predictions_per_seq)
    if vocab is None:
        if spm_model is None:
            raise ValueError("dynamic_masking_dataset needs spm_model (or vocab=MaskingVocab)")
        from albert_tf.text.tokenizer import SentencePieceTokenizer

        vocab = masking.MaskingVocab.from_tokenizer(SentencePieceTokenizer(spm_model))
    config = masking.MaskingConfig(
        masked_lm_prob, max_predictions_per_seq, ngram, favor_shorter_ngram
    )
    files = list_files(file_patterns)
    names = _record_features(files[0])
    if "token_boundary" not in names:
        raise ValueError(
            f"{files[0]} has no token_boundary feature: dynamic masking needs word boundaries "
            "(write records with albert_tf's create_pretraining_data)"
        )
    masked = "masked_lm_positions" in names
    spec = schema.feature_spec(
        max_seq_length, max_predictions_per_seq, masked=masked, token_boundary=True
    )
    if seed is None:
        seed = random.SystemRandom().randrange(2**62)
        deterministic = False
    else:
        deterministic = True
    records = _read_records(
        files, is_training, input_context, seed if deterministic else None, cycle_length
    )
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    dataset = tf.data.Dataset.zip((records, seeds))
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    masker = _BatchMasker(config, vocab)

    def apply_masks(serialized, element_seeds):
        features = tf.io.parse_example(serialized, spec)
        if masked:
            old = (
                features["masked_lm_positions"],
                features["masked_lm_ids"],
                features["masked_lm_weights"],
            )
        else:
            zeros = tf.zeros([batch_size, max_predictions_per_seq], tf.int64)
            old = (zeros, zeros, tf.zeros([batch_size, max_predictions_per_seq], tf.float32))
        ids, positions, labels, weights = tf.numpy_function(
            masker,
            [
                features["input_ids"],
                features["input_mask"],
                features["token_boundary"],
                element_seeds,
                *old,
            ],
            [tf.int64, tf.int64, tf.int64, tf.float32],
            stateful=False,
        )
        features["input_ids"] = tf.ensure_shape(ids, [batch_size, max_seq_length])
        features["masked_lm_positions"] = tf.ensure_shape(
            positions, [batch_size, max_predictions_per_seq]
        )
        features["masked_lm_ids"] = tf.ensure_shape(labels, [batch_size, max_predictions_per_seq])
        features["masked_lm_weights"] = tf.ensure_shape(
            weights, [batch_size, max_predictions_per_seq]
        )
        return _to_model_inputs(features)

    dataset = dataset.map(apply_masks, num_parallel_calls=_AUTOTUNE, deterministic=deterministic)
    return dataset.prefetch(_AUTOTUNE)
