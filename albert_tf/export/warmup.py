"""TF Serving warmup requests: `assets.extra/tf_serving_warmup_requests` in a SavedModel.

TF Serving replays these PredictRequests when it loads a version, so the first client request
does not pay for graph initialisation. Each TFRecord holds one serialized
`tensorflow.serving.PredictionLog(predict_log=PredictLog(request=PredictRequest(...)))`, built
with the `tensorflow-serving-api` protos (`pip install albert_tf[serving]`).

>>> write_warmup_requests("/tmp/model/1", "serving_default",
...                       [{"text": ["a short sentence"]}])  # doctest: +SKIP
"""

import os

import numpy as np
import tensorflow as tf

WARMUP_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TF Serving reads at most this many


def serving_api_available():
    try:
        from tensorflow_serving.apis import prediction_log_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def _protos():
    try:
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
    except ImportError:
        raise ImportError(
            "writing TF Serving warmup requests needs tensorflow-serving-api: "
            "pip install 'tensorflow-serving-api==<your TF minor>.*' "
            "(or albert_tf[serving])"
        ) from None
    return predict_pb2, prediction_log_pb2


def predict_request(signature_name, inputs, model_name="albert"):
    """A `PredictRequest` for `signature_name` with `inputs` {name: array-like}."""
    predict_pb2, _ = _protos()
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for key, value in inputs.items():
        array = np.asarray(value, dtype=object if _is_text(value) else None)
        request.inputs[key].CopyFrom(tf.make_tensor_proto(array))
    return request


def _is_text(value):
    flat = np.asarray(value, dtype=object).reshape(-1)
    return flat.size > 0 and isinstance(flat[0], (str, bytes))


def write_warmup_requests(saved_model_dir, signature_name, batches, model_name="albert"):
    """Writes one PredictionLog per entry of `batches` (each {input name: values}).

    Returns the path of the written file.
    """
    _, prediction_log_pb2 = _protos()
    if not 0 < len(batches) <= MAX_RECORDS:
        raise ValueError(f"between 1 and {MAX_RECORDS} warmup requests, got {len(batches)}")
    directory = os.path.join(saved_model_dir, "assets.extra")
    tf.io.gfile.makedirs(directory)
    path = os.path.join(directory, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for inputs in batches:
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(
                    request=predict_request(signature_name, inputs, model_name)
                )
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir):
    """The PredictRequests stored in a SavedModel's warmup file (for checks and tests)."""
    _, prediction_log_pb2 = _protos()
    path = os.path.join(saved_model_dir, "assets.extra", WARMUP_FILE)
    requests = []
    for record in tf.data.TFRecordDataset(path):
        requests.append(
            prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        )
    return requests
