"""SQuAD features cached as TFRecords, keyed by everything they depend on."""

import dataclasses
import hashlib
import json
import os

import numpy as np
from absl import logging

from albert_tf.data.squad_examples import read_squad_examples
from albert_tf.data.squad_features import (
    ROW_FIELDS,
    SEQUENCE_FIELDS,
    FeatureStats,
    SquadFeatures,
    build_features,
)
from albert_tf.files import temporary_path

#: Bumped whenever the features change for the same inputs; part of every cache key.
FEATURES_VERSION = 1


def cache_key(
    examples_path,
    tokenizer_path,
    settings,
    labelled,
    version_2_with_negative=False,
    skip_mismatched=True,
):
    """A hex digest of everything the cached features depend on: the bytes of the examples file
    and of the SentencePiece model, the settings, the reading flags and `FEATURES_VERSION`."""
    from albert_tf.text.tokenizer import read_model_proto

    material = {
        "examples_sha256": _file_sha256(examples_path),
        "spm_sha256": hashlib.sha256(read_model_proto(tokenizer_path)).hexdigest(),
        "settings": dataclasses.asdict(settings),
        "labelled": bool(labelled),
        "version_2_with_negative": bool(version_2_with_negative),
        "skip_mismatched": bool(skip_mismatched),
        "features_version": FEATURES_VERSION,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def cache_path(
    examples_path,
    tokenizer_path,
    settings,
    labelled,
    cache_dir,
    version_2_with_negative=False,
    skip_mismatched=True,
):
    """CACHE_DIR/<examples file stem>-seq<S>-stride<D>-query<Q>-<key>.tfrecord."""
    key = cache_key(
        examples_path, tokenizer_path, settings, labelled, version_2_with_negative, skip_mismatched
    )
    stem = os.path.splitext(os.path.basename(examples_path.rstrip("/")))[0]
    name = (
        f"{stem}-seq{settings.max_seq_length}-stride{settings.doc_stride}"
        f"-query{settings.max_query_length}-{key[:16]}.tfrecord"
    )
    return f"{cache_dir.rstrip('/')}/{name}"


def cached_features(
    examples_path,
    tokenizer_path,
    settings,
    labelled,
    cache_dir,
    version_2_with_negative=False,
    skip_mismatched=True,
):
    """`build_features` of a SQuAD file, cached in `cache_dir` as a TFRecord file (one
    tf.train.Example per window) plus a JSON file of `FeatureStats` beside it.

    The file name holds `cache_key`, so a changed file, model, setting or flag builds new
    features; both files are written under hidden temporary names and renamed into place.
    Read the examples for post-processing with `read_squad_examples` and the same
    `version_2_with_negative`, `labelled` and `skip_mismatched`.

    >>> features = cached_features("train.json", "30k-clean.model", FeatureSettings(),
    ...                            True, "/tmp/squad_cache")  # doctest: +SKIP
    """
    import tensorflow as tf

    path = cache_path(
        examples_path,
        tokenizer_path,
        settings,
        labelled,
        cache_dir,
        version_2_with_negative,
        skip_mismatched,
    )
    stats_path = path[: -len(".tfrecord")] + ".json"
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(stats_path):
        logging.info("SQuAD features: reading the cache %s", path)
        return read_features(path, stats_path, settings.max_seq_length)
    examples = read_squad_examples(
        examples_path, version_2_with_negative, labelled, skip_mismatched
    )
    features = build_features(examples, tokenizer_path, settings, labelled)
    tf.io.gfile.makedirs(cache_dir)
    write_features(features, path, stats_path)
    logging.info("SQuAD features: cached %d windows in %s", len(features), path)
    return features


def write_features(features, path, stats_path):
    """Writes `features` as TFRecords to `path` and its stats as JSON to `stats_path`."""
    import tensorflow as tf

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    arrays = features.arrays()
    tmp = temporary_path(path)
    with tf.io.TFRecordWriter(tmp) as writer:
        for row in range(len(features)):
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        name: int_feature(
                            np.atleast_1d(arrays[name][row]).astype(np.int64).tolist()
                        )
                        for name in arrays
                    }
                )
            )
            writer.write(example.SerializeToString())
    tf.io.gfile.rename(tmp, path, overwrite=True)
    tmp = temporary_path(stats_path)
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(dataclasses.asdict(features.stats), indent=2) + "\n")
    tf.io.gfile.rename(tmp, stats_path, overwrite=True)


def read_features(path, stats_path, max_seq_length):
    """`SquadFeatures` from files `write_features` wrote."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in SEQUENCE_FIELDS}
    spec.update({name: tf.io.FixedLenFeature([1], tf.int64) for name in ROW_FIELDS})
    parts = {name: [] for name in spec}
    dataset = (
        tf.data.TFRecordDataset(path)
        .batch(4096)
        .map(lambda records: tf.io.parse_example(records, spec))
    )
    for batch in dataset:
        for name, values in batch.items():
            parts[name].append(values.numpy())
    arrays = {}
    for name in spec:
        values = (
            np.concatenate(parts[name])
            if parts[name]
            else np.zeros((0, spec[name].shape[0]), np.int64)
        )
        if name in ROW_FIELDS:
            values = values.reshape(-1)
        arrays[name] = values.astype(bool if name == "token_is_max_context" else np.int32)
    with tf.io.gfile.GFile(stats_path, "r") as f:
        stats = FeatureStats(**json.load(f))
    return SquadFeatures(**arrays, stats=stats)


def _file_sha256(path):
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
