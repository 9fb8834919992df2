"""TF2 Hub ALBERT encoders: the SavedModels TF Model Garden's `export_tfhub` writes, read without
running them.

Such a directory (e.g. `tensorflow/albert_en_base/3`) holds saved_model.pb, variables/ (an
object-based checkpoint), assets/ with the SentencePiece model, and, from TF 2.5 on,
keras_metadata.pb. `from_tfhub` builds an `AlbertPretrainer` from it reading only files:

* the weights from variables/ with `tf.train.load_checkpoint`. Each variable is stored under an
  object-graph key (`variables/7/.ATTRIBUTES/VARIABLE_VALUE`, `mlm/variables/25/...`); the
  checkpoint's own object graph records the Keras variable name of each key (e.g.
  `transformer/self_attention/query/kernel`), and those names go through the flat table
  `TFHUB_ALBERT`. A name may start with the name of the Keras model that created it (the
  pretrainer's MLM head: `bert/cls/predictions/...`); that scope is dropped.
* the configuration from the variables' shapes (vocabulary, embedding, hidden, intermediate,
  positions, token types, heads: the attention kernels are stored per head, [H, N, H/N]) and,
  for what shapes cannot tell (number of layers, activation, dropout, initializer range), the
  `get_config()` of Model Garden's `AlbertEncoder` that Keras recorded: in keras_metadata.pb, or
  in the object graph of saved_model.pb for exports written before TF 2.5. Recorded values that
  contradict the shapes are an error.
* the MLM head (`cls/predictions/*`) when the export has the `.mlm` pretrainer
  (`--export_type=model_with_mlm`); without it the head, and always the SOP head (no export
  holds one), keep their fresh initialisation, with a logged warning.
* the SentencePiece model: the `sp_model_file` asset of the root object, named in
  saved_model.pb (`spm_model_path`).

Model Garden's `AlbertEncoder` shares one transformer block across all layers, as
`AlbertConfig(num_hidden_groups=1, inner_group_num=1)`; its "gelu" (`Text>gelu`) is the tanh
approximation. A SavedModel of another encoder (Model Garden's BERT, `Text>BertEncoder`) is
refused naming what it holds; TF1 Hub modules (tfhub_module.pb, the `google/albert_base/*`
handles) hold the original's variable names and read with
`albert_tf.convert.original.from_original`.

Text settings (`TEXT_SETTINGS`, keyword arguments of `albert_tf.models.model_dir.save`): an
ALBERT export records no `do_lower_case` (Model Garden writes that variable for WordPiece
vocabularies only); export_tfhub documents its SentencePiece models as lowercased with
diacritics stripped, and its preprocessing SavedModel (`albert_en_preprocess`) does so (NFD,
drop combining marks, case folding) before SentencePiece. The published weights come from the
original ALBERT's pretraining, whose text rules albert_tf's tokenizer applies by default:
lowercase, accents stripped, the digit-comma rule (which Model Garden's preprocessing model
lacks; its offline data tools have it), no TeX-quote replacement.

>>> from albert_tf.convert.tfhub import from_tfhub, is_tfhub_saved_model, spm_model_path
>>> is_tfhub_saved_model("albert_en_base_3/")  # doctest: +SKIP
True
>>> pretrainer = from_tfhub("albert_en_base_3/")  # doctest: +SKIP
>>> spm_model_path("albert_en_base_3/")  # doctest: +SKIP
'albert_en_base_3/assets/30k-clean.model'
"""

import json
import re

import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import saved_model_pb2, trackable_object_graph_pb2

from albert_tf.config import AlbertConfig
from albert_tf.convert.names import NONE, Reshape, Rule
from albert_tf.convert.weights import Checkpoint, ConversionError, load_weights

SAVED_MODEL_FILE = "saved_model.pb"
KERAS_METADATA_FILE = "keras_metadata.pb"
VARIABLES_PREFIX = "variables/variables"
TF1_MODULE_FILE = "tfhub_module.pb"
SPM_ASSET = "sp_model_file"  # the root object's child: the SentencePiece model (ALBERT)
VOCAB_ASSET = "vocab_file"  # ... the WordPiece vocabulary (BERT exports)
ALBERT_ENCODER = "Text>AlbertEncoder"
# The Keras class names of Model Garden's ALBERT encoder: AlbertEncoder, and its earlier name
# AlbertTransformerEncoder (2020: the same layer names and get_config keys, plus sequence_length).
ALBERT_ENCODERS = (ALBERT_ENCODER, "Text>AlbertTransformerEncoder")
PRETRAINER = "Text>BertPretrainerV2"
TEXT_SETTINGS = {"tex_quotes": False, "lower_case": True, "albert_rules": True}

# ------------------------------------------------------------ the name table
# Keras variable names of Model Garden's AlbertEncoder (official/nlp/modeling/networks/
# albert_encoder.py) and of the MaskedLM of its BertPretrainerV2 (scope dropped, see above).
# Model Garden's attention (EinsumDense) keeps its weights per head, as keras-hub's: query/key/
# value kernels [H, N, H/N] with biases [N, H/N], the output kernel [N, H/N, H]; the rows reshape
# them (row-major: head n is columns n*H/N ... (n+1)*H/N - 1, as in the original's [H, H]).
_BLOCK = "transformer"
_ATTENTION = f"{_BLOCK}/self_attention"
_HEADS_IN = Reshape(("hidden_size", "num_attention_heads", "head_size"))
_HEADS_BIAS = Reshape(("num_attention_heads", "head_size"))
_HEADS_OUT = Reshape(("num_attention_heads", "head_size", "hidden_size"))
TFHUB_ALBERT = (
    Rule("word_embeddings/embeddings", "embeddings/word_embeddings", NONE, "embeddings"),
    Rule("position_embedding/embeddings", "embeddings/position_embeddings", NONE, "embeddings"),
    Rule("type_embeddings/embeddings", "embeddings/token_type_embeddings", NONE, "embeddings"),
    Rule("embeddings/layer_norm/gamma", "embeddings/layer_norm/gamma", NONE, "embeddings"),
    Rule("embeddings/layer_norm/beta", "embeddings/layer_norm/beta", NONE, "embeddings"),
    Rule(
        "embedding_projection/kernel",
        "embeddings/embedding_projection/kernel",
        NONE,
        "projection",
    ),
    Rule("embedding_projection/bias", "embeddings/embedding_projection/bias", NONE, "projection"),
    Rule(f"{_ATTENTION}/query/kernel", "encoder/attention/query_kernel", _HEADS_IN, "encoder"),
    Rule(f"{_ATTENTION}/query/bias", "encoder/attention/query_bias", _HEADS_BIAS, "encoder"),
    Rule(f"{_ATTENTION}/key/kernel", "encoder/attention/key_kernel", _HEADS_IN, "encoder"),
    Rule(f"{_ATTENTION}/key/bias", "encoder/attention/key_bias", _HEADS_BIAS, "encoder"),
    Rule(f"{_ATTENTION}/value/kernel", "encoder/attention/value_kernel", _HEADS_IN, "encoder"),
    Rule(f"{_ATTENTION}/value/bias", "encoder/attention/value_bias", _HEADS_BIAS, "encoder"),
    Rule(
        f"{_ATTENTION}/attention_output/kernel",
        "encoder/attention/output_kernel",
        _HEADS_OUT,
        "encoder",
    ),
    Rule(f"{_ATTENTION}/attention_output/bias", "encoder/attention/output_bias", NONE, "encoder"),
    Rule(
        f"{_BLOCK}/self_attention_layer_norm/gamma",
        "encoder/attention/layer_norm_gamma",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_BLOCK}/self_attention_layer_norm/beta",
        "encoder/attention/layer_norm_beta",
        NONE,
        "encoder",
    ),
    Rule(f"{_BLOCK}/intermediate/kernel", "encoder/ffn/intermediate_kernel", NONE, "encoder"),
    Rule(f"{_BLOCK}/intermediate/bias", "encoder/ffn/intermediate_bias", NONE, "encoder"),
    Rule(f"{_BLOCK}/output/kernel", "encoder/ffn/output_kernel", NONE, "encoder"),
    Rule(f"{_BLOCK}/output/bias", "encoder/ffn/output_bias", NONE, "encoder"),
    Rule(f"{_BLOCK}/output_layer_norm/gamma", "encoder/ffn/layer_norm_gamma", NONE, "encoder"),
    Rule(f"{_BLOCK}/output_layer_norm/beta", "encoder/ffn/layer_norm_beta", NONE, "encoder"),
    Rule("pooler_transform/kernel", "pooler/kernel", NONE, "pooler"),
    Rule("pooler_transform/bias", "pooler/bias", NONE, "pooler"),
    Rule("cls/predictions/transform/dense/kernel", "masked_lm/dense/kernel", NONE, "masked_lm"),
    Rule("cls/predictions/transform/dense/bias", "masked_lm/dense/bias", NONE, "masked_lm"),
    Rule(
        "cls/predictions/transform/LayerNorm/gamma", "masked_lm/layer_norm/gamma", NONE, "masked_lm"
    ),
    Rule(
        "cls/predictions/transform/LayerNorm/beta", "masked_lm/layer_norm/beta", NONE, "masked_lm"
    ),
    Rule("cls/predictions/output_bias/bias", "masked_lm/output_bias", NONE, "masked_lm"),
    # export_tfhub's `.mlm` pretrainer has no classification heads: no export holds a
    # sentence-order head.
    Rule(None, "sentence_order/dense/kernel", NONE, "sentence_order"),
    Rule(None, "sentence_order/dense/bias", NONE, "sentence_order"),
)

# Activations as Model Garden's configs serialize them -> ours. "Text>gelu" is Model Garden's
# own (official.modeling.activations.gelu, the tanh form); plain "gelu" is Keras's, whose
# default is the exact erf form.
ACTIVATIONS = {
    "Text>gelu": "gelu_tanh",
    "gelu": "gelu_erf",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
    "Text>identity": "linear",
}
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_NETWORK_IDENTIFIERS = ("_tf_keras_network", "_tf_keras_model")


def _join(directory, name):
    return f"{directory.rstrip('/')}/{name}"


def is_tfhub_saved_model(directory):
    """Whether `directory` holds a TF Hub SavedModel: saved_model.pb and
    variables/variables.index (files only; nothing is parsed or run)."""
    return tf.io.gfile.exists(_join(directory, SAVED_MODEL_FILE)) and tf.io.gfile.exists(
        _join(directory, VARIABLES_PREFIX + ".index")
    )


# ------------------------------------------------------------ reading the SavedModel's metadata
def _read_saved_model(directory):
    path = _join(directory, SAVED_MODEL_FILE)
    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        saved_model.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError, whatever its module
        raise ConversionError(f"{path}: not a SavedModel proto ({type(e).__name__})") from None
    if not saved_model.meta_graphs:
        raise ConversionError(f"{path}: the SavedModel holds no MetaGraph")
    return saved_model.meta_graphs[0]


def _varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _proto_fields(data):
    """(field number, value) of a serialized protobuf message: ints for varints, bytes for
    length-delimited fields (and the raw bytes of fixed-width ones)."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _varint(data, pos)
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            value, pos = data[pos : pos + width], pos + width
        else:
            raise ValueError(f"wire type {wire_type}")
        yield number, value


def read_keras_metadata(path):
    """[(node id, node path, identifier, metadata JSON text)] of a keras_metadata.pb: tf_keras's
    SavedMetadata (nodes = 1), each a SavedObject (node_id = 2, node_path = 3, identifier = 4,
    metadata = 5), read without tf_keras. The node id indexes saved_model.pb's object graph."""
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    nodes = []
    try:
        for number, node in _proto_fields(data):
            if number != 1:
                continue
            fields = dict(_proto_fields(node))
            text = [fields.get(n, b"").decode("utf-8") for n in (3, 4, 5)]
            nodes.append((int(fields.get(2, 0)), *text))
    except (ValueError, TypeError, IndexError, UnicodeDecodeError):
        raise ConversionError(f"{path}: not a Keras SavedMetadata proto") from None
    return nodes


def _keras_metadata(directory, meta_graph):
    """(file, [(identifier, metadata dict)]) of every Keras object the SavedModel records:
    keras_metadata.pb, or before TF 2.5 the object graph in saved_model.pb."""
    path = _join(directory, KERAS_METADATA_FILE)
    if tf.io.gfile.exists(path):
        records = [(i, m) for _, _, i, m in read_keras_metadata(path)]
    else:
        path = _join(directory, SAVED_MODEL_FILE)
        records = [
            (node.user_object.identifier, node.user_object.metadata)
            for node in meta_graph.object_graph_def.nodes
            if node.WhichOneof("kind") == "user_object" and node.user_object.metadata
        ]
    parsed = []
    for identifier, text in records:
        try:
            parsed.append((identifier, json.loads(text)))
        except json.JSONDecodeError:
            continue  # Keras writes JSON; anything else is not a layer's record
    return path, parsed


def _networks(metadata):
    """[(class name, record)] of the Keras models other than plain functional ones."""
    return [
        (record.get("class_name"), record)
        for identifier, record in metadata
        if identifier in _NETWORK_IDENTIFIERS
        and isinstance(record, dict)
        and record.get("class_name") not in ("Functional", "Model", "Sequential")
    ]


def _encoder_record(directory, where, metadata):
    """(the encoder's name, its recorded AlbertEncoder config, the pretrainer's record or None),
    or a ConversionError naming what the SavedModel holds instead."""
    networks = _networks(metadata)
    encoders = [n for n in networks if n[0] != PRETRAINER]
    if not metadata:
        raise ConversionError(
            f"{directory}: the SavedModel records no Keras objects (no {KERAS_METADATA_FILE}, no "
            f"Keras metadata in {SAVED_MODEL_FILE}), so it is not a TF Model Garden encoder "
            f"export; TF Hub ALBERT encoders (export_tfhub) record their AlbertEncoder config"
        )
    if not encoders:
        found = sorted({str(r.get("class_name")) for _, r in metadata if isinstance(r, dict)})
        raise ConversionError(
            f"{directory}: not a TF Model Garden encoder export: its Keras metadata names no "
            f"encoder model (found {', '.join(found[:8])}); expected {ALBERT_ENCODER}"
        )
    class_name, record = encoders[0]
    if class_name not in ALBERT_ENCODERS:
        raise ConversionError(
            f"{directory} holds a {class_name} (recorded in {where}), not an "
            f"ALBERT encoder ({ALBERT_ENCODER}); albert_tf reads TF Hub ALBERT encoders only"
        )
    config = record.get("config")
    if not isinstance(config, dict):
        raise ConversionError(f"{where}: the {class_name} record holds no config")
    pretrainer = next((r for c, r in networks if c == PRETRAINER), None)
    return record.get("name"), config, pretrainer


# ------------------------------------------------------------ assets
def _asset_filename(meta_graph, child_name):
    """The file name of the root object's asset child `child_name`, or None."""
    nodes = meta_graph.object_graph_def.nodes
    if not nodes:
        return None
    node_id = next((c.node_id for c in nodes[0].children if c.local_name == child_name), None)
    if node_id is None or nodes[node_id].WhichOneof("kind") != "asset":
        return None
    index = nodes[node_id].asset.asset_file_def_index
    if index >= len(meta_graph.asset_file_def):
        return None
    return meta_graph.asset_file_def[index].filename


def spm_model_path(directory, required=True):
    """The SentencePiece model of a TF Hub ALBERT SavedModel: `assets/<file>` of its
    `sp_model_file` asset, as saved_model.pb names it.

    With `required` a missing asset (not recorded, or recorded but its file absent) is a
    one-line ConversionError naming the file; otherwise it gives None.
    """
    return _spm_model(directory, _read_saved_model(directory), required)


def _spm_model(directory, meta_graph, required):
    filename = _asset_filename(meta_graph, SPM_ASSET)
    if filename is None:
        if not required:
            return None
        vocab = _asset_filename(meta_graph, VOCAB_ASSET)
        instead = f"; it has a WordPiece {VOCAB_ASSET} (assets/{vocab}) instead" if vocab else ""
        raise ConversionError(
            f"{directory}: the SavedModel has no {SPM_ASSET} asset (the SentencePiece model "
            f"Model Garden's export_tfhub attaches to ALBERT encoders){instead}"
        )
    path = _join(directory, f"assets/{filename}")
    if not tf.io.gfile.exists(path):
        if not required:
            return None
        raise ConversionError(
            f"{path} is missing: the SentencePiece model that {_join(directory, SAVED_MODEL_FILE)} "
            f"names as its {SPM_ASSET} asset; copy the whole TF Hub model directory"
        )
    return path


# ------------------------------------------------------------ variables
def read_tfhub_checkpoint(directory, scopes=()):
    """A `Checkpoint` over variables/ of a TF2 SavedModel, by Keras variable name.

    Names come from the checkpoint's object graph; a leading `scope/` in `scopes` (the Keras
    models that created the variables) is dropped. `display` gives each stored name.
    """
    prefix = _join(directory, VARIABLES_PREFIX)
    reader = tf.train.load_checkpoint(prefix)
    stored = reader.get_variable_to_shape_map()
    if _OBJECT_GRAPH_KEY not in stored:
        raise ConversionError(
            f"{prefix}: a name-based TF1 checkpoint, not a TF2 SavedModel's object-based one: a "
            f"TF1 Hub module (its variables have the original's names) reads with "
            f"albert_tf.convert.original.from_original and its albert_config.json"
        )
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
    keys, display = {}, {}
    for node in graph.nodes:
        for attribute in node.attributes:
            if attribute.name != "VARIABLE_VALUE" or attribute.checkpoint_key not in stored:
                continue
            full_name = attribute.full_name or attribute.checkpoint_key
            name = full_name
            for scope in scopes:
                if scope and name.startswith(scope + "/"):
                    name = name[len(scope) + 1 :]
                    break
            if name in keys:
                raise ConversionError(
                    f"{prefix}: two variables are named {name} ({display[name]} and "
                    f"{full_name}); the SavedModel is not one encoder"
                )
            keys[name], display[name] = attribute.checkpoint_key, full_name
    shapes = {name: stored[key] for name, key in keys.items()}
    return Checkpoint(prefix, shapes, lambda name: reader.get_tensor(keys[name]), display)


# ------------------------------------------------------------ configuration
def _activation(value, where, key):
    """Our activation name for a serialized Keras activation."""
    name = value
    if isinstance(value, dict):  # tf_keras >= 2.13: {"class_name": "function", "config": ...}
        name = value.get("config")
        if isinstance(name, dict):
            name = name.get("activation") or name.get("name")
    if name not in ACTIVATIONS:
        raise ConversionError(
            f"{where}: {key} {json.dumps(value)} is not an activation albert_tf has "
            f"(known: {', '.join(ACTIVATIONS)})"
        )
    return ACTIVATIONS[name]


def _stored_shape(stored, name, rank, location):
    shape = stored.get(name)
    if shape is None:
        raise ConversionError(
            f"{location}: missing variable {name}, which every {ALBERT_ENCODER} has"
        )
    if len(shape) != rank:
        raise ConversionError(f"{location}: variable {name} has shape {list(shape)}")
    return shape


def tfhub_config(encoder_config, stored, where, location):
    """The `AlbertConfig` of an AlbertEncoder: sizes from the stored shapes ({name: shape}), layers,
    activation, dropout and initializer range from its recorded `get_config()`."""
    vocab_size, embedding_size = _stored_shape(stored, "word_embeddings/embeddings", 2, location)
    positions = _stored_shape(stored, "position_embedding/embeddings", 2, location)[0]
    type_vocab_size = _stored_shape(stored, "type_embeddings/embeddings", 2, location)[0]
    hidden_size, heads, _ = _stored_shape(stored, f"{_ATTENTION}/query/kernel", 3, location)
    intermediate_size = _stored_shape(stored, f"{_BLOCK}/intermediate/kernel", 2, location)[1]
    from_shapes = dict(
        vocab_size=vocab_size,
        embedding_width=embedding_size,
        hidden_size=hidden_size,
        num_attention_heads=heads,
        max_sequence_length=positions,
        type_vocab_size=type_vocab_size,
        intermediate_size=intermediate_size,
    )
    for key, value in from_shapes.items():
        recorded = encoder_config.get(key)
        if recorded is not None and recorded != value:
            raise ConversionError(
                f"{where}: the recorded {ALBERT_ENCODER} config has {key}={recorded} but the "
                f"variables in {location} give {value}"
            )
    num_layers = encoder_config.get("num_layers")
    if not isinstance(num_layers, int) or num_layers < 1:
        raise ConversionError(
            f"{where}: the recorded {ALBERT_ENCODER} config has no num_layers (got {num_layers!r})"
        )
    initializer = encoder_config.get("initializer")
    stddev = 0.02
    if isinstance(initializer, dict):
        stddev = (initializer.get("config") or {}).get("stddev", stddev)
    return AlbertConfig(
        vocab_size=int(vocab_size),
        embedding_size=int(embedding_size),
        hidden_size=int(hidden_size),
        num_hidden_layers=num_layers,
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=int(heads),
        intermediate_size=int(intermediate_size),
        hidden_act=_activation(encoder_config.get("activation"), where, "activation"),
        hidden_dropout_prob=float(encoder_config.get("dropout_rate", 0.0)),
        attention_probs_dropout_prob=float(encoder_config.get("attention_dropout_rate", 0.0)),
        max_position_embeddings=int(positions),
        type_vocab_size=int(type_vocab_size),
        initializer_range=float(stddev),
        layer_norm_eps=1e-12,  # fixed in Model Garden's encoder block and MaskedLM
        sharing="all",
    )


def _check_mlm_activation(pretrainer, config, where):
    """Our MLM head applies the encoder's activation; a pretrainer with another is refused."""
    if pretrainer is None:
        return
    value = (pretrainer.get("config") or {}).get("mlm_activation")
    if value is not None and _activation(value, where, "mlm_activation") != config.hidden_act:
        raise ConversionError(
            f"{where}: the {PRETRAINER}'s mlm_activation {json.dumps(value)} differs from the "
            f"encoder's activation ({config.hidden_act}); albert_tf's MLM head uses the "
            f"encoder's activation"
        )


# ------------------------------------------------------------ the model
def from_tfhub(directory, ignore_variables=()):
    """An `AlbertPretrainer` holding the weights of a TF2 Hub ALBERT encoder SavedModel.

    Args:
        directory: what TF Model Garden's `export_tfhub` wrote for an ALBERT encoder
            (`--export_type=model` or `model_with_mlm`), e.g. an extracted
            `tensorflow/albert_en_base/3` (local or gs://). Nothing in it is run.
        ignore_variables: regexes (re.search, on the Keras variable names) of variables to
            skip on purpose.

    Returns:
        An AlbertPretrainer whose `.backbone` is the AlbertModel (one shared block, like
        Model Garden's). The MLM head is read when the export has its `.mlm` pretrainer; the
        SOP head is always freshly initialised (a warning is logged). Its SentencePiece model
        is `spm_model_path(directory)`; its text settings are `TEXT_SETTINGS`.

    Raises:
        ConversionError: the directory is not a TF2 Hub SavedModel of Model Garden's
            AlbertEncoder (e.g. a BERT encoder, named with what it holds), its SentencePiece
            asset is missing, or its variables do not fit the recorded config.

    Example:
        >>> from albert_tf.convert.tfhub import from_tfhub
        >>> pretrainer = from_tfhub("albert_en_base_3/")  # doctest: +SKIP
        >>> pretrainer.backbone.config.num_hidden_layers  # doctest: +SKIP
        12
    """
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    if not is_tfhub_saved_model(directory):
        raise ConversionError(
            f"{directory}: no TF Hub SavedModel ({SAVED_MODEL_FILE} and "
            f"{VARIABLES_PREFIX}.index expected)"
        )
    if tf.io.gfile.exists(_join(directory, TF1_MODULE_FILE)):
        raise ConversionError(
            f"{directory} is a TF1 Hub module ({TF1_MODULE_FILE}); its variables have the "
            f"original ALBERT's names: read {_join(directory, VARIABLES_PREFIX)} with "
            f"albert_tf.convert.original.from_original and its albert_config.json"
        )
    meta_graph = _read_saved_model(directory)
    where, metadata = _keras_metadata(directory, meta_graph)
    encoder_name, encoder_config, pretrainer_record = _encoder_record(directory, where, metadata)
    spm_model = _spm_model(directory, meta_graph, required=True)
    scopes = (encoder_name, (pretrainer_record or {}).get("name"))
    checkpoint = read_tfhub_checkpoint(directory, scopes=scopes)
    config = tfhub_config(encoder_config, checkpoint.shapes, where, checkpoint.location)
    _check_mlm_activation(pretrainer_record, config, where)
    logging.info(
        "Converting TF Hub ALBERT encoder %s (%d layers, hidden %d, SentencePiece %s)",
        directory,
        config.num_hidden_layers,
        config.hidden_size,
        spm_model,
    )
    patterns = [re.compile(p) for p in ignore_variables]
    ignored = tuple(
        re.compile("^" + re.escape(name) + "$")
        for name in checkpoint.shapes
        if any(p.search(checkpoint.display(name)) or p.search(name) for p in patterns)
    )
    pretrainer = AlbertPretrainer(AlbertModel(config))
    load_weights(
        pretrainer,
        checkpoint,
        TFHUB_ALBERT,
        ignored=ignored,
        config_source=f"{where} and the variables' shapes",
    )
    return pretrainer
