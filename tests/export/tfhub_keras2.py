"""The TF Hub export used the way TensorFlow's text tutorials use TF Hub's BERT and ALBERT models:
Keras 2 (tf-keras) and tensorflow_hub, run by tests/export/test_tfhub_export.py in a process of
its own with TF_USE_LEGACY_KERAS=1 (Keras 2 and Keras 3 do not mix in one process).

    python tests/export/tfhub_keras2.py EXPORT_DIR WORK_DIR PAIRS_JSON

Builds text -> hub.KerasLayer(preprocessor) -> hub.KerasLayer(encoder, trainable=True) ->
pooled_output -> Dense, fits it a few steps, saves it as a Keras 2 .keras file, reloads it, and
packs text pairs through `tokenize` and `bert_pack_inputs` wrapped in hub.KerasLayer. Prints
one JSON line of what the test checks; imports no albert_tf.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

TEXTS = [
    "open the file",
    "A short sentence about a file.",
    "returns a tensor of zeros",
    "raise ValueError if empty",
] * 2
LABELS = [1.0, 0.0, 1.0, 0.0] * 2


def classifier(export_dir):
    text = tf.keras.layers.Input(shape=(), dtype=tf.string, name="text")
    encoder_inputs = hub.KerasLayer(f"{export_dir}/preprocessor", name="preprocessing")(text)
    encoder = hub.KerasLayer(f"{export_dir}/encoder", trainable=True, name="encoder")
    pooled = encoder(encoder_inputs)["pooled_output"]
    logits = tf.keras.layers.Dense(1, name="classifier")(pooled)
    return tf.keras.Model(text, logits), encoder


def pack_pairs(export_dir, pairs, seq_length):
    preprocessor = hub.load(f"{export_dir}/preprocessor")
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments={"seq_length": seq_length})
    first = tf.keras.layers.Input(shape=(), dtype=tf.string)
    second = tf.keras.layers.Input(shape=(), dtype=tf.string)
    model = tf.keras.Model([first, second], pack([tokenize(first), tokenize(second)]))
    a, b = (tf.constant([pair[i] for pair in pairs]) for i in (0, 1))
    return {key: value.numpy().tolist() for key, value in model([a, b]).items()}


def main(export_dir, work_dir, pairs_json):
    model, encoder = classifier(export_dir)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(1e-2),
        loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
    )
    texts, labels = np.array(TEXTS, object), np.array(LABELS, "float32")
    before = [w.numpy().copy() for w in encoder.trainable_weights]
    model.fit(texts, labels, epochs=1, batch_size=4, verbose=0)
    after = [w.numpy().copy() for w in encoder.trainable_weights]
    predictions = model.predict(texts, verbose=0)
    path = os.path.join(work_dir, "classifier.keras")
    model.save(path)
    reloaded = tf.keras.models.load_model(path, custom_objects={"KerasLayer": hub.KerasLayer})
    reloaded_encoder = reloaded.get_layer("encoder").trainable_weights
    spec = json.loads(pairs_json)
    print(
        json.dumps(
            {
                "keras": type(model).__module__.split(".")[0],  # tf_keras: Keras 2
                "trainable_weights": len(after),
                "changed_weights": sum(not np.array_equal(b, a) for b, a in zip(before, after)),
                "reloaded_weights_equal": all(
                    np.array_equal(a, w.numpy()) for a, w in zip(after, reloaded_encoder)
                ),
                "prediction_difference": float(
                    np.abs(predictions - reloaded.predict(texts, verbose=0)).max()
                ),
                "pairs": pack_pairs(export_dir, spec["pairs"], spec["seq_length"]),
                "imported_albert_tf": any(m.startswith("albert_tf") for m in sys.modules),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
