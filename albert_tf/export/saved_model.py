"""SavedModels for TF Serving that take raw text: tokenization and packing run in the graph.

`export_classifier` writes EXPORT_DIR/<version>/ with three signatures:

- serving_default: text (+ text_pair for pair tasks), tf.string [B] -> probabilities [B, C],
  logits [B, C], label int64 [B] (+ label_name [B] when the classifier has label names);
  regression: score [B].
- predict_ids: input_word_ids, input_mask, input_type_ids, int32 [B, S] -> the same.
- encode: the same text inputs as serving_default -> pooled_output [B, H],
  sequence_output [B, S, H], input_mask [B, S].

`export_backbone` writes an embeddings model: serving_default = encode (raw text) and
encode_ids (token ids).

The model is re-created outside any distribution strategy under `compute_dtype`'s policy and
gets the trained weights: "float32" (default; a mixed_bfloat16 or TPU-trained model serves in
float32) or "bfloat16" (bfloat16 weights and matmuls, float32 outputs: faster on CPUs with
AVX512-BF16 or AMX; `measure_agreement` states how far it is from float32).
The preprocessor pads each request batch to its longest text (rounded up to a
multiple of 8), so a short sentence does not pay for `max_seq_length` positions, and the
classifier runs the texts of each padded width together (`length_chunks`), so short texts do
not pay for a long one in the same request. The export needs
only TensorFlow and TensorFlow Text ops, which stock TF Serving links.
`assets.extra/tf_serving_warmup_requests` holds a few requests (when tensorflow-serving-api is
installed) and `assets.extra/albert_tf.json` describes the export.

>>> path = export_classifier(classifier, preprocessor, "/tmp/serving/albert")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> serve = tf.saved_model.load(path).signatures["serving_default"]  # doctest: +SKIP
>>> serve(text=tf.constant(["Great!"]))["probabilities"]  # doctest: +SKIP
"""

import json
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import precision
from albert_tf.export import batching, length_chunks, versions, warmup
from albert_tf.export.serving_spec import SavedModelSpec

# Texts replayed by TF Serving at load time: short, long, empty, non-ASCII.
WARMUP_TEXTS = (
    "A short sentence.",
    "",
    "Ein Satz mit Umlauten: Grüße aus Köln! 東京",
    "A much longer sentence that keeps going " * 40,
)
_TEXT = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)


# export compute_dtype -> the Keras dtype policy the served copy is rebuilt under. "bfloat16"
# stores the weights in bfloat16 (no cast of every weight on every request, as mixed_bfloat16
# would do), except the layers pinned to float32 (the embedding LayerNorm, the
# logits); LayerNorm and softmax compute in float32 either way, and every output is float32.
COMPUTE_DTYPES = {"float32": "float32", "bfloat16": "bfloat16"}
# compute dtypes whose served encoder stores its weights in the serving layout (kernels
# [out, in]: oneDNN's bfloat16 MatMuls read them as stored; in float32 the training layout is
# as fast; docs/benchmarks.md, serving).
SERVING_LAYOUT_DTYPES = ("bfloat16",)


def float32_copy(model):
    """A fresh copy of a Keras model under the float32 policy with the same weights."""
    return policy_copy(model, "float32")


def policy_copy(model, policy, serving_layout=False):
    """A fresh copy of a Keras model under dtype policy `policy` with the same weights (without
    an attached preprocessor: a served copy runs on ids, the export tracks its own); with
    `serving_layout`, its encoder keeps them in the serving layout (inference only; see
    `albert_tf.layers.block_weights`)."""
    config = _policy_config(model.get_config(), policy, serving_layout)
    if config.get("preprocessor") is not None:
        config["preprocessor"] = None
    clone = type(model).from_config(config)
    if not serving_layout:
        clone.set_weights(model.get_weights())
        return clone
    encoders = [_encoder(m) for m in (model, clone)]
    stacked = [{id(v) for v in e.attention.weights + e.ffn.weights} for e in encoders]
    others = [[v for v in m.weights if id(v) not in ids] for m, ids in zip((model, clone), stacked)]
    for source, target in zip(*others):
        target.assign(tf.cast(source, target.dtype))
    encoders[1].load_training_layout(encoders[0])
    return clone


def _encoder(model):
    from albert_tf import keras_internals
    from albert_tf.layers.encoder import AlbertEncoder

    (encoder,) = [
        layer for layer in keras_internals.sublayers(model) if isinstance(layer, AlbertEncoder)
    ]
    return encoder


def _policy_config(config, policy, serving_layout=False):
    """`config` with every layer's dtype policy `policy` and the backbone's `serving_layout`."""
    if isinstance(config, list):
        return [_policy_config(v, policy, serving_layout) for v in config]
    if not isinstance(config, dict):
        return config
    replaced = {k: _policy_config(v, policy, serving_layout) for k, v in config.items()}
    if replaced.get("dtype") is not None:
        replaced["dtype"] = policy
    if "serving_layout" in replaced:
        replaced["serving_layout"] = serving_layout
    return replaced


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
            "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
            "input_mask": inputs["input_mask"],
        }

    return body


def classifier_body(classifier, length_chunked=True):
    """body(ids dict) -> the classifier's served outputs (see the module docstring): the
    serving_default and predict_ids signatures, and `AlbertClassifier.predict` on raw text.
    With `length_chunked` the rows run in chunks of one padded width (`length_chunks`);
    without, the whole batch at its given shape (static shapes)."""
    labels = classifier.labels
    per_class = tf.TensorSpec([None, classifier.num_classes], tf.float32)
    if classifier.is_regression:
        specs = {"score": tf.TensorSpec([None], tf.float32)}
    else:
        specs = {"probabilities": per_class, "logits": per_class}
        specs["label"] = tf.TensorSpec([None], tf.int64)
        if labels:
            specs["label_name"] = tf.TensorSpec([None], tf.string)

    def chunk_body(inputs):
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

    def body(inputs):
        if not length_chunked:
            return chunk_body(inputs)
        return length_chunks.run_in_length_chunks(chunk_body, inputs, specs)

    return body


def warmup_batches(pair):
    """serving_default warmup batches of `WARMUP_TEXTS` (with `text_pair` when `pair`)."""
    texts = list(WARMUP_TEXTS)
    batches = [{"text": texts[:1]}, {"text": texts}]
    if pair:
        batches = [dict(b, text_pair=list(reversed(b["text"]))) for b in batches]
    return batches


def build(spec, export_dir, version=None, write_warmup="auto"):
    """Writes a `serving_spec.SavedModelSpec` as EXPORT_DIR/<version> (`write_export`);
    returns the version path."""
    archive = keras.export.ExportArchive()
    for tracked in spec.tracked:
        archive.track(tracked)
    for name, (fn, signature) in spec.endpoints.items():
        archive.add_endpoint(name, fn, signature)
    return write_export(archive, export_dir, version, spec.description, write_warmup, spec.warmup)


def write_export(archive, export_dir, version, description, write_warmup, warmup_batches):
    """Writes a keras.export.ExportArchive as EXPORT_DIR/<version> (a temporary directory
    renamed into place), with assets.extra/albert_tf.json = `description`,
    assets.extra/batching_parameters.txt (TF Serving's --batching_parameters_file,
    `batching.SERVING_PARAMETERS`) and, when
    `write_warmup` (True, or "auto" with tensorflow-serving-api installed), TF Serving warmup
    requests of `warmup_batches` (dicts of input name -> list of values) for serving_default.
    Returns the version path."""
    with versions.publish_version(export_dir, version) as (tmp_dir, version):
        archive.write_out(tmp_dir, verbose=False)
        extra = os.path.join(tmp_dir, "assets.extra")
        tf.io.gfile.makedirs(extra)
        with tf.io.gfile.GFile(os.path.join(extra, "albert_tf.json"), "w") as f:
            f.write(json.dumps(description, indent=2) + "\n")
        with tf.io.gfile.GFile(os.path.join(extra, batching.BATCHING_FILE), "w") as f:
            f.write(batching.SERVING_PARAMETERS.to_text_proto())
        if write_warmup == "auto" and not warmup.serving_api_available():
            logging.warning(
                "tensorflow-serving-api is not installed: no warmup requests written "
                "(pip install albert_tf[serving])"
            )
        elif write_warmup:
            warmup.write_warmup_requests(tmp_dir, "serving_default", list(warmup_batches))
    path = os.path.join(export_dir, str(version))
    logging.info("Exported %s to %s", description["kind"], path)
    logging.info("%s", precision_note(description.get("compute_dtype", "float32")))
    return path


def _serving_preprocessor(preprocessor, dynamic_padding):
    if not hasattr(preprocessor, "with_padding"):
        raise TypeError(
            f"preprocessor must be an AlbertPreprocessor, got {type(preprocessor).__name__}"
        )
    return preprocessor.with_padding(dynamic_padding)


def _served_copy(model, preprocessor, dynamic_padding, compute_dtype):
    """(copy of `model` under `compute_dtype`, serving preprocessor)."""
    from albert_tf.text.vocab_check import check_vocabulary_matches

    check_compute_dtype(compute_dtype)
    pre = _serving_preprocessor(preprocessor, dynamic_padding)
    check_vocabulary_matches(
        preprocessor,
        getattr(model, "backbone", model).config,
        model=f"the exported {type(model).__name__}",
    )
    return served_copy(model, compute_dtype), pre


def check_compute_dtype(compute_dtype):
    """ValueError unless `compute_dtype` is one of COMPUTE_DTYPES."""
    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(
            f"compute_dtype must be one of {', '.join(COMPUTE_DTYPES)}, got {compute_dtype!r}"
        )


def served_copy(model, compute_dtype="float32"):
    """The copy of `model` an export serves: under `compute_dtype`'s policy, its encoder in the
    serving layout for bfloat16."""
    check_compute_dtype(compute_dtype)
    return policy_copy(model, COMPUTE_DTYPES[compute_dtype], compute_dtype in SERVING_LAYOUT_DTYPES)


def cpu_bfloat16_flags(path="/proc/cpuinfo"):
    """The bfloat16 matmul features of this CPU (`precision.BF16_CPU_FLAGS` among its flags)."""
    flags = precision.cpu_flags(path)
    return [flag for flag in precision.BF16_CPU_FLAGS if flag in flags]


def precision_note(compute_dtype):
    """One line saying what the served graph computes in and where bfloat16 pays off."""
    here = ", ".join(cpu_bfloat16_flags()) or "neither"
    if compute_dtype == "float32":
        return (
            "The export computes in float32. compute_dtype='bfloat16' serves faster on CPUs "
            f"with AMX or AVX512-BF16 (this one: {here}) and usually slower on CPUs without them."
        )
    return (
        "The export computes in bfloat16 (weights and matmuls; LayerNorm, softmax and outputs "
        "in float32): faster than float32 on CPUs with AMX or AVX512-BF16 (this one: "
        f"{here}), usually slower on CPUs without them."
    )


def measure_agreement(reference, candidate, preprocessor, texts, pair=False, batch_size=32):
    """How closely `candidate` (e.g. the bfloat16 serving copy) follows `reference` (float32).

    Both are `AlbertClassifier`s or both `AlbertModel`s; `texts` are held-out strings, or
    (text, text_pair) tuples when `pair`. Returns {"texts": N, ...} with, for a classifier,
    "top1_agreement" (fraction of texts with the same label) and "max_probability_difference"
    (largest |p - p_ref| over texts and classes); for regression "max_score_difference"; for a
    backbone "min_pooled_cosine" and "max_pooled_difference" (pooled_output).

    >>> measure_agreement(classifier, bf16_copy, pre, ["A held-out text."])  # doctest: +SKIP
    {'texts': 1, 'top1_agreement': 1.0, 'max_probability_difference': 0.0012}
    """
    classifier = hasattr(reference, "is_regression")

    def outputs(model, inputs):
        out = model(inputs, training=False)
        out = out if classifier else out["pooled_output"]
        return tf.cast(out, tf.float32).numpy()

    ref, cand = [], []
    texts = list(texts)
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        if pair:
            request = {"text": [a for a, _ in batch], "text_pair": [b for _, b in batch]}
        else:
            request = {"text": batch}
        inputs = preprocessor({k: tf.constant(v, tf.string) for k, v in request.items()})
        ref.append(outputs(reference, inputs))
        cand.append(outputs(candidate, inputs))
    ref, cand = np.concatenate(ref), np.concatenate(cand)
    result = {"texts": len(texts)}
    if not classifier:
        cosine = np.sum(ref * cand, -1) / (
            np.linalg.norm(ref, axis=-1) * np.linalg.norm(cand, axis=-1) + 1e-12
        )
        result.update(
            min_pooled_cosine=float(cosine.min()),
            max_pooled_difference=float(np.abs(ref - cand).max()),
        )
    elif reference.is_regression:
        result["max_score_difference"] = float(np.abs(ref - cand).max())
    else:
        p_ref, p_cand = _softmax(ref), _softmax(cand)
        result.update(
            top1_agreement=float(np.mean(ref.argmax(-1) == cand.argmax(-1))),
            max_probability_difference=float(np.abs(p_ref - p_cand).max()),
        )
    return result


def _softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _agreement(model, served, pre, pair, compute_dtype, agreement_texts):
    """{"agreement_with_float32": ...} for the description (empty for float32 or no texts)."""
    if compute_dtype == "float32" or agreement_texts is None:
        return {}
    result = measure_agreement(float32_copy(model), served, pre, agreement_texts, pair=pair)
    logging.info("%s export vs float32: %s", compute_dtype, result)
    return {"agreement_with_float32": result}


def _description(kind, preprocessor, pair, signatures, **extra):
    return {
        "kind": kind,
        "signatures": signatures,
        "pair": pair,
        "seq_length": preprocessor.max_seq_length,
        "lower_case": preprocessor.lower_case,
        "tex_quotes": preprocessor.tex_quotes,
        "albert_rules": preprocessor.albert_rules,
        "truncation": preprocessor.truncation,
        "dynamic_padding": preprocessor.dynamic_padding,
        **extra,
    }


def classifier_spec(
    classifier,
    preprocessor,
    pair=False,
    dynamic_padding=True,
    compute_dtype="float32",
    agreement_texts=None,
):
    """The `SavedModelSpec` of `export_classifier` (arguments as there)."""
    model, pre = _served_copy(classifier, preprocessor, dynamic_padding, compute_dtype)
    head = classifier_body(model, length_chunked=dynamic_padding)
    description = _description(
        "classifier",
        pre,
        pair,
        ["serving_default", "predict_ids", "encode"],
        num_classes=model.num_classes,
        labels=model.labels,
        regression=model.is_regression,
        compute_dtype=compute_dtype,
        **_agreement(classifier, model, pre, pair, compute_dtype, agreement_texts),
    )
    endpoints = {
        "serving_default": _text_endpoint(pre, pair, head),
        "predict_ids": _ids_endpoint(head),
        "encode": _text_endpoint(pre, pair, _encode_body(model.backbone)),
    }
    return SavedModelSpec((model, pre), endpoints, description, warmup_batches(pair))


def export_classifier(
    classifier,
    preprocessor,
    export_dir,
    pair=False,
    version=None,
    dynamic_padding=True,
    write_warmup="auto",
    compute_dtype="float32",
    agreement_texts=None,
):
    """Exports an `AlbertClassifier` with raw-text signatures; returns EXPORT_DIR/<version>.

    Args:
        classifier: a trained `AlbertClassifier`.
        preprocessor: the `AlbertPreprocessor` used for training (its vocabulary, casing,
            max_seq_length and truncation are exported).
        export_dir: base directory (local or gs://); versions are integer subdirectories.
        pair: serving_default and encode take `text` and `text_pair`.
        version: integer version (default: one more than the highest existing).
        dynamic_padding: pad each request batch to its longest text instead of max_seq_length,
            and run its texts in chunks of one padded width (`length_chunks`); False keeps
            static shapes (every batch [B, max_seq_length]).
        write_warmup: True, False, or "auto" (write when tensorflow-serving-api is installed).
        compute_dtype: "float32" or "bfloat16" (bfloat16 weights and matmuls: faster on CPUs
            with AVX512-BF16 or AMX; outputs stay float32).
        agreement_texts: held-out texts ((text, text_pair) tuples when `pair`): with a
            bfloat16 export, `measure_agreement` with the float32 model on them is logged and
            stored in assets.extra/albert_tf.json ("agreement_with_float32").
    """
    spec = classifier_spec(
        classifier, preprocessor, pair, dynamic_padding, compute_dtype, agreement_texts
    )
    return build(spec, export_dir, version, write_warmup)


def export_backbone(
    backbone,
    preprocessor,
    export_dir,
    pair=False,
    version=None,
    dynamic_padding=True,
    write_warmup="auto",
    compute_dtype="float32",
    agreement_texts=None,
):
    """Exports an `AlbertModel` for embeddings: serving_default (= encode, raw text) and encode_ids.

    Outputs: pooled_output [B, H], sequence_output [B, S, H] and input_mask [B, S] (to average
    over real tokens). Arguments as in `export_classifier`.
    """
    model, pre = _served_copy(backbone, preprocessor, dynamic_padding, compute_dtype)
    body = _encode_body(model)
    description = _description(
        "backbone",
        pre,
        pair,
        ["serving_default", "encode_ids"],
        hidden_size=model.config.hidden_size,
        compute_dtype=compute_dtype,
        **_agreement(backbone, model, pre, pair, compute_dtype, agreement_texts),
    )
    endpoints = {
        "serving_default": _text_endpoint(pre, pair, body),
        "encode_ids": _ids_endpoint(body),
    }
    spec = SavedModelSpec((model, pre), endpoints, description, warmup_batches(pair))
    return build(spec, export_dir, version, write_warmup)
