"""SavedModels for TF Serving that take raw text: tokenization and packing run in the graph.

`export_classifier` writes EXPORT_DIR/<version>/ with three signatures:

| signature | inputs | outputs |
|---|---|---|
| serving_default | text (+ text_pair for pair tasks): tf.string [B] | probabilities [B, C], logits [B, C], label int64 [B] (+ label_name [B] when the classifier has label names); regression: score [B] |
| predict_ids | input_word_ids, input_mask, input_type_ids: int32 [B, S] | the same |
| encode | the same text inputs as serving_default | pooled_output [B, H], sequence_output [B, S, H], input_mask [B, S] |

`export_backbone` writes an embeddings model: serving_default = encode (raw text) and
encode_ids (token ids).

The model is re-created under the float32 policy outside any distribution strategy and gets the
trained weights (a mixed_bfloat16 or TPU-trained model serves in float32 on CPUs). The
preprocessor pads each request batch to its longest text (rounded up to a multiple of 8), so a
short sentence does not pay for `seq_length` positions. The export needs only TensorFlow and
TensorFlow Text ops, which stock TF Serving links. `assets.extra/tf_serving_warmup_requests`
holds a few requests (when tensorflow-serving-api is installed) and `assets.extra/albert_tf.json`
describes the export.

>>> path = export_classifier(classifier, preprocessor, "/tmp/serving/albert")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(["Great!"]))  # doctest: +SKIP
"""

import json
import os

import keras
import tensorflow as tf
from absl import logging

from albert_tf.export import versions, warmup

# Texts replayed by TF Serving at load time: short, long, empty, non-ASCII.
WARMUP_TEXTS = (
    "A short sentence.",
    "",
    "Ein Satz mit Umlauten: Grüße aus Köln! 東京",
    "A much longer sentence that keeps going " * 40,
)
_TEXT = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)


def float32_copy(model):
    """A fresh copy of a Keras model under the float32 policy with the same weights."""
    config = _float32_config(model.get_config())
    clone = type(model).from_config(config)
    clone.set_weights(model.get_weights())
    return clone


def _float32_config(config):
    if isinstance(config, dict):
        return {
            k: ("float32" if k == "dtype" and v is not None else _float32_config(v))
            for k, v in config.items()
        }
    if isinstance(config, list):
        return [_float32_config(v) for v in config]
    return config


def _text_endpoint(preprocessor, pair, body):
    """Wraps body(model_inputs) as fn(text) or fn(text, text_pair) with the matching signature."""
    if pair:

        def fn(text, text_pair):
            return body(preprocessor({"text": text, "text_pair": text_pair}))

        return fn, [_TEXT, _TEXT]

    def fn(text):
        return body(preprocessor({"text": text}))

    return fn, [_TEXT]


def _ids_endpoint(body):
    def fn(input_word_ids, input_mask, input_type_ids):
        return body(
            {
                "input_word_ids": input_word_ids,
                "input_mask": input_mask,
                "input_type_ids": input_type_ids,
            }
        )

    return fn, [_IDS, _IDS, _IDS]


def _encode_body(backbone):
    def body(inputs):
        outputs = backbone(inputs, training=False)
        return {
            "pooled_output": outputs["pooled_output"],
            "sequence_output": outputs["sequence_output"],
            "input_mask": inputs["input_mask"],
        }

    return body


def _classifier_body(classifier):
    labels = classifier.labels

    def body(inputs):
        logits = tf.cast(classifier(inputs, training=False), tf.float32)
        if classifier.is_regression:
            return {"score": logits[:, 0]}
        label = tf.argmax(logits, axis=-1, output_type=tf.int64)
        outputs = {
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "logits": logits,
            "label": label,
        }
        if labels:
            outputs["label_name"] = tf.gather(tf.constant(labels), label)
        return outputs

    return body


def _warmup_batches(pair):
    texts = list(WARMUP_TEXTS)
    batches = [{"text": texts[:1]}, {"text": texts}]
    if pair:
        batches = [dict(b, text_pair=list(reversed(b["text"]))) for b in batches]
    return batches


def _write(archive, export_dir, version, pair, description, write_warmup):
    return write_export(
        archive, export_dir, version, description, write_warmup, _warmup_batches(pair)
    )


def write_export(archive, export_dir, version, description, write_warmup, warmup_batches):
    """Writes a keras.export.ExportArchive as EXPORT_DIR/<version> (a temporary directory
    renamed into place), with assets.extra/albert_tf.json = `description` and, when
    `write_warmup` (True, or "auto" with tensorflow-serving-api installed), TF Serving warmup
    requests of `warmup_batches` (dicts of input name -> list of values) for serving_default.
    Returns the version path."""
    with versions.publish_version(export_dir, version) as (tmp_dir, version):
        archive.write_out(tmp_dir, verbose=False)
        extra = os.path.join(tmp_dir, "assets.extra")
        tf.io.gfile.makedirs(extra)
        with tf.io.gfile.GFile(os.path.join(extra, "albert_tf.json"), "w") as f:
            f.write(json.dumps(description, indent=2) + "\n")
        if write_warmup == "auto" and not warmup.serving_api_available():
            logging.warning(
                "tensorflow-serving-api is not installed: no warmup requests written "
                "(pip install albert_tf[serving])"
            )
        elif write_warmup:
            warmup.write_warmup_requests(tmp_dir, "serving_default", list(warmup_batches))
    path = os.path.join(export_dir, str(version))
    logging.info("Exported %s to %s", description["kind"], path)
    return path


def _serving_preprocessor(preprocessor, dynamic_padding):
    if not hasattr(preprocessor, "with_padding"):
        raise TypeError(
            f"preprocessor must be an AlbertPreprocessor, got {type(preprocessor).__name__}"
        )
    return preprocessor.with_padding(dynamic_padding)


def _start_archive(model, preprocessor, dynamic_padding):
    """(float32 copy of `model`, serving preprocessor, ExportArchive tracking both)."""
    from albert_tf.text.vocab_check import check_vocabulary_matches

    pre = _serving_preprocessor(preprocessor, dynamic_padding)
    check_vocabulary_matches(
        preprocessor,
        getattr(model, "backbone", model).config,
        model=f"the exported {type(model).__name__}",
    )
    model = float32_copy(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(pre)
    return model, pre, archive


def _description(kind, preprocessor, pair, signatures, **extra):
    return {
        "kind": kind,
        "signatures": signatures,
        "pair": pair,
        "seq_length": preprocessor.seq_length,
        "lower_case": preprocessor.lower_case,
        "truncation": preprocessor.truncation,
        "dynamic_padding": preprocessor.dynamic_padding,
        **extra,
    }


def export_classifier(
    classifier,
    preprocessor,
    export_dir,
    pair=False,
    version=None,
    dynamic_padding=True,
    write_warmup="auto",
):
    """Exports an `AlbertClassifier` with raw-text signatures; returns EXPORT_DIR/<version>.

    Args:
        classifier: a trained `AlbertClassifier`.
        preprocessor: the `AlbertPreprocessor` used for training (its vocabulary, casing,
            seq_length and truncation are exported).
        export_dir: base directory (local or gs://); versions are integer subdirectories.
        pair: serving_default and encode take `text` and `text_pair`.
        version: integer version (default: one more than the highest existing).
        dynamic_padding: pad each request batch to its longest text instead of seq_length.
        write_warmup: True, False, or "auto" (write when tensorflow-serving-api is installed).
    """
    model, pre, archive = _start_archive(classifier, preprocessor, dynamic_padding)
    head = _classifier_body(model)
    archive.add_endpoint("serving_default", *_text_endpoint(pre, pair, head))
    archive.add_endpoint("predict_ids", *_ids_endpoint(head))
    archive.add_endpoint("encode", *_text_endpoint(pre, pair, _encode_body(model.backbone)))
    description = _description(
        "classifier",
        pre,
        pair,
        ["serving_default", "predict_ids", "encode"],
        num_classes=model.num_classes,
        labels=model.labels,
        regression=model.is_regression,
    )
    return _write(archive, export_dir, version, pair, description, write_warmup)


def export_backbone(
    backbone,
    preprocessor,
    export_dir,
    pair=False,
    version=None,
    dynamic_padding=True,
    write_warmup="auto",
):
    """Exports an `AlbertModel` for embeddings: serving_default (= encode, raw text) and encode_ids.

    Outputs: pooled_output [B, H], sequence_output [B, S, H] and input_mask [B, S] (to average
    over real tokens). Arguments as in `export_classifier`.
    """
    model, pre, archive = _start_archive(backbone, preprocessor, dynamic_padding)
    body = _encode_body(model)
    archive.add_endpoint("serving_default", *_text_endpoint(pre, pair, body))
    archive.add_endpoint("encode_ids", *_ids_endpoint(body))
    description = _description(
        "backbone",
        pre,
        pair,
        ["serving_default", "encode_ids"],
        hidden_size=model.config.hidden_size,
    )
    return _write(archive, export_dir, version, pair, description, write_warmup)
