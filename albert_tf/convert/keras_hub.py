"""keras-hub ALBERT presets (what keras-hub 0.32's `save_to_preset` writes), both directions,
read and written without importing keras_hub.

A preset directory:

    config.json                      the serialized AlbertBackbone (its constructor arguments)
    model.weights.h5                 its weights, a Keras 3 weights file
    tokenizer.json                   the serialized AlbertTokenizer
    assets/tokenizer/vocabulary.spm  its SentencePiece model
    metadata.json                    keras / keras-hub versions, parameter count, date, tasks
  and for a task preset (AlbertTextClassifier or AlbertMaskedLM):
    task.json                        the serialized task (its backbone, preprocessor, head sizes)
    task.weights.h5                  the head's weights (the backbone's are in model.weights.h5)
    preprocessor.json                the serialized preprocessor (sequence_length, truncate)

`from_keras_hub(directory)` reads the weights through the name table `names.KERAS_HUB` (the
Keras layer names of each variable, then its index in the layer) into an `AlbertPretrainer`:
the MLM head from an AlbertMaskedLM preset, the SOP head always fresh (keras-hub has none). An
AlbertTextClassifier preset becomes an `AlbertClassifier` (`names.KERAS_HUB_CLASSIFIER`: the
same pooled output -> dropout -> dense head) with an `AlbertPreprocessor` of the preset's
vocabulary attached, so `predict` takes raw text.

`to_keras_hub(model, directory, spm_model)` writes an `AlbertPretrainer` (backbone plus an
AlbertMaskedLM task with its MLM head) or an `AlbertClassifier` (an AlbertTextClassifier task)
as a preset that `keras_hub.models.AlbertBackbone.from_preset`, `AlbertTokenizer.from_preset`,
`AlbertMaskedLM.from_preset` / `AlbertTextClassifier.from_preset` load unchanged. keras-hub's
AlbertBackbone fixes what albert_tf configures, so some models cannot be written (a
ConversionError names the field): hidden_act other than "gelu_tanh", layer_norm_eps other than
1e-12, a `sharing` whose attention and feed-forward weights are grouped differently. It always
has the E -> H projection: with E == H the identity with zero bias is written (and read back).

Text: keras-hub's AlbertTokenizer hands the text to SentencePiece as it is (no lowercasing,
accent stripping, whitespace collapse, TeX quotes or digit-comma rule). A model read from a
preset therefore records `TEXT_SETTINGS` (lower_case and albert_rules false) in its text.json,
so albert_tf's ids equal keras-hub's. On export, albert_tf's rules are folded into the
vocabulary's own normalizer (`albert_tf.export.litert_text.compose_model_proto`) so keras-hub
lowercases and strips accents as albert_tf does; what a normalizer cannot express is logged
(the digit-comma rule: keras-hub keeps pieces such as "▁1," whole; a capital sigma ending the
text; a Hangul syllable followed by a conjoining final consonant).

keras-hub's MaskedLMHead normalises with epsilon 1e-5, albert_tf's MLM head with the config's
layer_norm_eps (1e-12): MLM logits of a converted head differ slightly (a warning says so).

>>> from albert_tf.convert.keras_hub import from_keras_hub, to_keras_hub
>>> pretrainer = from_keras_hub("albert_base_en_uncased/")  # doctest: +SKIP
>>> to_keras_hub(pretrainer, "albert_again/", spm_model="albert_base_en_uncased/"
...              "assets/tokenizer/vocabulary.spm")  # doctest: +SKIP
"""

import datetime
import json
import os
import re
import shutil
import tempfile

import numpy as np
from absl import logging

from albert_tf import files
from albert_tf.config import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert.weights import Checkpoint, ConversionError, export_weights, load_weights

KERAS_HUB_VERSION = "0.32.0"  # the keras-hub whose preset layout this module reads and writes
CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
WEIGHTS_FILE = "model.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
VOCABULARY_FILE = "assets/tokenizer/vocabulary.spm"
TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
PREPROCESSOR_FILE = "preprocessor.json"
PRESET_FILES = (
    CONFIG_FILE,
    METADATA_FILE,
    WEIGHTS_FILE,
    TOKENIZER_FILE,
    TASK_FILE,
    TASK_WEIGHTS_FILE,
    PREPROCESSOR_FILE,
    "assets",
)

# The text settings (albert_tf.models.model_dir text.json) of keras-hub's AlbertTokenizer.
TEXT_SETTINGS = {"tex_quotes": False, "lower_case": False, "albert_rules": False}

BACKBONE = "AlbertBackbone"
TOKENIZER = "AlbertTokenizer"
TEXT_CLASSIFIER = "AlbertTextClassifier"
MASKED_LM = "AlbertMaskedLM"
_MODULES = {
    BACKBONE: "keras_hub.src.models.albert.albert_backbone",
    TOKENIZER: "keras_hub.src.models.albert.albert_tokenizer",
    TEXT_CLASSIFIER: "keras_hub.src.models.albert.albert_text_classifier",
    MASKED_LM: "keras_hub.src.models.albert.albert_masked_lm",
    "AlbertTextClassifierPreprocessor": (
        "keras_hub.src.models.albert.albert_text_classifier_preprocessor"
    ),
    "AlbertMaskedLMPreprocessor": "keras_hub.src.models.albert.albert_masked_lm_preprocessor",
}

# AlbertBackbone argument -> AlbertConfig field (its one `dropout` is both of ours).
CONFIG_FIELDS = (
    ("vocabulary_size", "vocab_size"),
    ("num_layers", "num_hidden_layers"),
    ("num_heads", "num_attention_heads"),
    ("num_groups", "num_hidden_groups"),
    ("num_inner_repetitions", "inner_group_num"),
    ("embedding_dim", "embedding_size"),
    ("hidden_dim", "hidden_size"),
    ("intermediate_dim", "intermediate_size"),
    ("dropout", "hidden_dropout_prob"),
    ("dropout", "attention_probs_dropout_prob"),
    ("max_sequence_length", "max_position_embeddings"),
    ("num_segments", "type_vocab_size"),
)
_CONFIG_DEFAULTS = dict(
    num_groups=1, num_inner_repetitions=1, dropout=0.0, max_sequence_length=512, num_segments=2
)
_CONFIG_KEYS = {"name", "trainable", "dtype"}  # Keras' own, besides the arguments
# What keras-hub's AlbertBackbone computes whatever its config says (tanh GELU, eps 1e-12).
FIXED_FIELDS = {"hidden_act": "gelu_tanh", "layer_norm_eps": 1e-12}
MLM_LAYER_NORM_EPS = 1e-5  # keras-hub's MaskedLMHead (AlbertMaskedLM passes no epsilon)
# The optimizer state a task preset carries in task.weights.h5: what keras-hub's default
# compile() builds (Adam: its iteration count 0 and learning rate), so that loading finds the
# two variables it expects.
OPTIMIZER_LEARNING_RATES = {"AlbertTextClassifier": 1e-5, "AlbertMaskedLM": 5e-5}
_CLASSIFIER_ACTIVATIONS = (None, "linear", "softmax")  # the logits, or their softmax

# Where keras-hub 0.32's weights files keep each layer of `names.KERAS_HUB`: a functional
# model's layers sit under "layers/", keyed by class name in creation order; sublayers under
# their attribute names; each layer's variables in "<path>/vars/<index>", its name in the
# attribute "name" of "<path>/vars". The transformer blocks are "transformer_encoder",
# "transformer_encoder_1", ... in group-major order.
BACKBONE_LAYER_PATHS = {
    "token_embedding": "layers/reversible_embedding",
    "position_embedding": "layers/position_embedding",
    "segment_embedding": "layers/embedding",
    "embeddings_layer_norm": "layers/layer_normalization",
    "embedding_projection": "layers/dense",
    "pooled_dense": "layers/dense_1",
}
TASK_LAYER_PATHS = {"logits": "layers/dense", "mlm_head": "layers/masked_lm_head"}
SUBLAYER_PATHS = {
    "self_attention_layer": "_self_attention_layer",
    "query": "query_dense",
    "key": "key_dense",
    "value": "value_dense",
    "attention_output": "output_dense",
    "self_attention_layer_norm": "_self_attention_layer_norm",
    "feedforward_intermediate_dense": "_feedforward_intermediate_dense",
    "feedforward_output_dense": "_feedforward_output_dense",
    "feedforward_layer_norm": "_feedforward_layer_norm",
    "intermediate_dense": "_intermediate_dense",
    "intermediate_layer_norm": "_intermediate_layer_norm",
}
_BLOCK = re.compile(r"group_(\d+)_inner_layer_(\d+)")
_TASK_LAYERS = ("logits", "mlm_head")
_PROJECTION = ("embedding_projection/0", "embedding_projection/1")
_CLASSIFIER_WEIGHT = "logits/0"


def _join(directory, name):
    return f"{directory.rstrip('/')}/{name}"


def _exists(path):
    import tensorflow as tf

    return tf.io.gfile.exists(path)


def _class_of(values):
    """(class name, "module") of a serialized Keras object, or (None, None)."""
    if not isinstance(values, dict):
        return None, None
    registered = str(values.get("registered_name") or "")
    name = values.get("class_name") or registered.split(">")[-1] or None
    return name, str(values.get("module") or registered.split(">")[0] or "")


def _is_keras_hub_object(values):
    _, module = _class_of(values)
    registered = str(values.get("registered_name") or "") if isinstance(values, dict) else ""
    return module.startswith("keras_hub") or registered.startswith("keras_hub>")


def is_keras_hub_preset(directory):
    """Whether `directory` holds a keras-hub preset: a config.json that serializes a keras_hub
    class (any model; `from_keras_hub` reads ALBERT ones)."""
    path = _join(directory, CONFIG_FILE)
    if not _exists(path):
        return False
    try:
        return _is_keras_hub_object(files.read_json(path))
    except ValueError:
        return False


def _check_class(values, expected, path):
    name, module = _class_of(values)
    if not _is_keras_hub_object(values):
        raise ConversionError(
            f"{path}: not a keras-hub preset file (no keras_hub class: module {module!r}, "
            f"class_name {name!r})"
        )
    if name not in expected:
        raise ConversionError(
            f"{path} holds a keras-hub {name} ({module}); albert_tf reads "
            f"{' / '.join(expected)} (keras-hub's ALBERT) only"
        )
    return name


def _check_dtype(dtype, path):
    """Float policies only (the weights are read as float32); a quantized preset is refused."""
    name = dtype
    if isinstance(dtype, dict):
        name = (dtype.get("config") or {}).get("name")
        if dtype.get("class_name") not in (None, "DTypePolicy", "FloatDTypePolicy"):
            name = None
    if name is not None and not re.fullmatch(r"(mixed_)?(float16|bfloat16|float32)", str(name)):
        name = None
    if dtype is not None and name is None:
        raise ConversionError(
            f"{path}: dtype {json.dumps(dtype)[:120]} is not a float policy; quantized presets "
            f"cannot be read (save the model unquantized)"
        )


def keras_hub_config(values, path):
    """The `AlbertConfig` of a serialized AlbertBackbone (config.json's dict)."""
    _check_class(values, (BACKBONE,), path)
    arguments = values.get("config")
    if not isinstance(arguments, dict):
        raise ConversionError(f"{path}: no 'config' object (the AlbertBackbone arguments)")
    known = {theirs for theirs, _ in CONFIG_FIELDS} | _CONFIG_KEYS
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise ConversionError(
            f"{path}: AlbertBackbone argument {unknown[0]!r} is not one keras-hub "
            f"{KERAS_HUB_VERSION} writes ({', '.join(sorted(known - _CONFIG_KEYS))}); albert_tf "
            f"cannot tell what it changes"
        )
    _check_dtype(arguments.get("dtype"), path)
    arguments = {**_CONFIG_DEFAULTS, **arguments}
    missing = [theirs for theirs, _ in CONFIG_FIELDS if theirs not in arguments]
    if missing:
        raise ConversionError(f"{path}: the AlbertBackbone config has no {missing[0]}")
    fields = {ours: arguments[theirs] for theirs, ours in CONFIG_FIELDS}
    try:
        return AlbertConfig(**fields, **FIXED_FIELDS)
    except (TypeError, ValueError) as e:
        raise ConversionError(f"{path}: {e}") from None


def backbone_arguments(config):
    """The AlbertBackbone arguments of `config`, or a ConversionError naming the field that
    keras-hub cannot represent."""
    for field, value in FIXED_FIELDS.items():
        if getattr(config, field) != value:
            raise ConversionError(
                f"{field}={getattr(config, field)!r} cannot be written as a keras-hub preset: "
                f"keras-hub's AlbertBackbone always computes {field}={value!r}"
            )
    if config.attention_groups != config.ffn_groups:
        raise ConversionError(
            f"sharing={config.sharing!r} with num_hidden_groups={config.num_hidden_groups} "
            f"cannot be written as a keras-hub preset: its {config.attention_groups} attention "
            f"and {config.ffn_groups} feed-forward weight groups differ, and keras-hub's "
            f"AlbertBackbone shares whole blocks (num_groups)"
        )
    if config.attention_probs_dropout_prob != config.hidden_dropout_prob:
        logging.warning(
            "keras-hub's AlbertBackbone has one dropout rate: writing dropout=%s "
            "(hidden_dropout_prob); attention_probs_dropout_prob=%s is not kept",
            config.hidden_dropout_prob,
            config.attention_probs_dropout_prob,
        )
    values = {}
    for theirs, ours in CONFIG_FIELDS:
        values.setdefault(theirs, getattr(config, ours))  # dropout: hidden_dropout_prob
    values["num_groups"] = config.attention_groups
    return values


# ----------------------------------------------------------------------------- reading
class _LocalFiles:
    """Local paths of a preset's files (copies of remote ones, removed by `close`)."""

    def __init__(self, directory):
        self.directory = directory
        self._temporary = None

    def path(self, name):
        path = _join(self.directory, name)
        if "://" not in path:
            return path
        import tensorflow as tf

        if self._temporary is None:
            self._temporary = tempfile.mkdtemp(prefix="albert_tf_keras_hub_")
        local = os.path.join(self._temporary, name.replace("/", "_"))
        if not os.path.exists(local):
            tf.io.gfile.copy(path, local)
        return local

    def close(self):
        if self._temporary:
            shutil.rmtree(self._temporary, ignore_errors=True)


def _stored_arrays(path):
    """{name: (weights-file path, shape)} of a Keras 3 weights file, named by its layers' names
    (the "name" attribute of each layer's "vars" group) and the variable's index; top-level
    entries that are not layers ("optimizer") keep their key."""
    import h5py

    found = {}

    def visit(key, item):
        if not isinstance(item, h5py.Dataset):
            return
        parts = key.split("/")
        if len(parts) < 2 or parts[-2] != "vars":
            return
        layers, group = [], item.file
        for depth, part in enumerate(parts[:-2]):
            group = group[part]
            named = group.get("vars")
            if depth == 0 and part != "layers":
                layers.append(part)
            elif named is not None and "name" in named.attrs:
                name = named.attrs["name"]
                layers.append(name.decode() if isinstance(name, bytes) else str(name))
        name = "/".join(layers + [parts[-1]])
        if name in found:
            raise ConversionError(
                f"{path}: two variables read as {name} ({found[name][0]} and {key})"
            )
        found[name] = (key, tuple(item.shape))

    with h5py.File(path, "r") as h5:
        h5.visititems(visit)
    return found


def _read_array(path, key):
    import h5py

    with h5py.File(path, "r") as h5:
        array = np.asarray(h5[key][()])
    if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
        raise ConversionError(f"{path}: {key} holds {array.dtype} values, not floats")
    return array.astype(np.float32)


def read_keras_hub_checkpoint(local, config, with_task):
    """A `Checkpoint` over model.weights.h5 (and task.weights.h5), named as `names.KERAS_HUB`;
    with E == H the identity projection keras-hub always has is dropped (any other E == H
    projection is a ConversionError)."""
    shapes, where = {}, {}
    for name in (WEIGHTS_FILE, TASK_WEIGHTS_FILE) if with_task else (WEIGHTS_FILE,):
        if not _exists(_join(local.directory, name)):
            raise FileNotFoundError(f"{_join(local.directory, name)}: not found")
        path = local.path(name)
        for stored, (key, shape) in _stored_arrays(path).items():
            if stored in shapes:
                raise ConversionError(
                    f"{local.directory}: {stored} is in both {where[stored][2]} and {name}"
                )
            shapes[stored], where[stored] = shape, (path, key, name)

    def read(stored):
        path, key, _ = where[stored]
        return _read_array(path, key)

    display = {n: f"{where[n][2]}:{where[n][1]}" for n in shapes}
    if not config.has_embedding_projection and all(n in shapes for n in _PROJECTION):
        kernel, bias = read(_PROJECTION[0]), read(_PROJECTION[1])
        if kernel.shape != (config.hidden_size,) * 2 or not (
            np.array_equal(kernel, np.eye(config.hidden_size)) and not np.any(bias)
        ):
            raise ConversionError(
                f"{local.directory}: {display[_PROJECTION[0]]} is a learned projection but "
                f"embedding_dim == "
                f"hidden_dim ({config.hidden_size}); albert_tf, like the original ALBERT, has "
                f"no projection when E == H, so only an identity projection with zero bias "
                f"converts"
            )
        logging.info("%s: dropping the identity embedding projection (E == H)", local.directory)
        for name in _PROJECTION:
            del shapes[name]
    return Checkpoint(local.directory, shapes, read, display)


def _read_task(directory, config):
    """(task class name or None, task.json's config dict)."""
    path = _join(directory, TASK_FILE)
    if not _exists(path):
        return None, {}
    values = files.read_json(path)
    name = _check_class(values, (TEXT_CLASSIFIER, MASKED_LM), path)
    task = values.get("config") or {}
    backbone = task.get("backbone")
    if isinstance(backbone, dict) and keras_hub_config(backbone, path) != config:
        raise ConversionError(
            f"{path}: its backbone config differs from {_join(directory, CONFIG_FILE)}'s"
        )
    if not _exists(_join(directory, TASK_WEIGHTS_FILE)):
        raise FileNotFoundError(
            f"{directory} has {TASK_FILE} (a {name}) but no {TASK_WEIGHTS_FILE}"
        )
    return name, task


def vocabulary_path(directory):
    """The preset's SentencePiece model (assets/tokenizer/vocabulary.spm), or None."""
    path = _join(directory, VOCABULARY_FILE)
    return path if _exists(path) else None


def _check_tokenizer(directory):
    path = _join(directory, TOKENIZER_FILE)
    if _exists(path):
        _check_class(files.read_json(path), (TOKENIZER,), path)


def _ignored(checkpoint, ignore_variables):
    patterns = [re.compile(p) for p in ignore_variables]
    return names.KERAS_HUB_IGNORED + tuple(
        re.compile("^" + re.escape(name) + "$")
        for name in checkpoint.shapes
        if any(p.search(name) or p.search(checkpoint.display(name)) for p in patterns)
    )


def _is_ignored(name, ignored):
    return any(p.search(name) for p in ignored)


def _preprocessor_settings(task):
    """(sequence_length, truncate) of a task's serialized preprocessor (keras-hub's defaults:
    512, round_robin)."""
    preprocessor = task.get("preprocessor") or {}
    values = preprocessor.get("config") or {} if isinstance(preprocessor, dict) else {}
    return int(values.get("sequence_length") or 512), values.get("truncate", "round_robin")


def _attached_preprocessor(vocabulary, task, config):
    """The AlbertPreprocessor an imported AlbertTextClassifier carries: the preset's
    vocabulary, keras-hub's text settings and its preprocessor's length."""
    from albert_tf.models.preprocessor import AlbertPreprocessor

    length, truncate = _preprocessor_settings(task)
    if truncate != "round_robin":
        logging.warning(
            "keras-hub's truncate=%r has no albert_tf counterpart: text pairs are truncated "
            "round_robin",
            truncate,
        )
    return AlbertPreprocessor(
        vocabulary,
        max_seq_length=min(length, config.max_position_embeddings),
        dynamic_padding=True,
        **TEXT_SETTINGS,
    )


def _warn_if_uncased(tokenizer):
    """keras-hub's albert_*_en_uncased presets: their pieces hold no capital letter, but its
    tokenizer does not lowercase (capitals become <unk>); albert_tf keeps keras-hub's ids."""
    pieces = tokenizer.vocab()
    if any(c.isupper() for p in pieces if not p.startswith(("[", "<")) for c in p):
        return
    logging.warning(
        "%s is an uncased vocabulary (no piece holds a capital letter) but keras-hub's "
        "tokenizer does not lowercase: capitals become <unk>. The converted model records "
        "lower_case=false to give keras-hub's ids; lowercase the text yourself, or pass "
        "lower_case=True (--do_lower_case) for ALBERT's uncased input",
        tokenizer.source,
    )


def from_keras_hub(directory, ignore_variables=()):
    """The albert_tf model of a keras-hub ALBERT preset directory (local or gs://).

    Args:
        directory: what keras-hub's `save_to_preset` wrote for an AlbertBackbone (or its
            AlbertTokenizer beside it), an AlbertMaskedLM or an AlbertTextClassifier.
        ignore_variables: regexes (re.search, on the names of `names.KERAS_HUB` or the
            weights-file paths) of variables to skip on purpose, e.g. "^logits/" to take only
            the backbone of a classifier.

    Returns:
        An `AlbertPretrainer` (the MLM head of an AlbertMaskedLM preset, else fresh; the SOP
        head fresh), or for an AlbertTextClassifier preset an `AlbertClassifier` (num_classes
        and dropout from task.json) with an `AlbertPreprocessor` of the preset's vocabulary
        and keras-hub's text settings attached (`TEXT_SETTINGS`).

    Raises:
        ConversionError naming the file: another keras-hub model (BertBackbone, ...), an
        argument or a variable albert_tf cannot hold, a shape that does not match the config;
        VocabularyError naming vocabulary.spm when its size is not the embedding table's.
    """
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.text.vocab_check import check_vocabulary_matches

    config_path = _join(directory, CONFIG_FILE)
    if not _exists(config_path):
        raise FileNotFoundError(f"{directory} has no {CONFIG_FILE}: not a keras-hub preset")
    config = keras_hub_config(files.read_json(config_path), config_path)
    task_name, task = _read_task(directory, config)
    _check_tokenizer(directory)
    vocabulary = vocabulary_path(directory)
    if vocabulary is None:
        logging.warning("%s has no %s: the model gets no vocabulary", directory, VOCABULARY_FILE)
    else:
        _warn_if_uncased(check_vocabulary_matches(vocabulary, config, model=config_path))
    local = _LocalFiles(directory)
    try:
        checkpoint = read_keras_hub_checkpoint(local, config, task_name is not None)
        ignored = _ignored(checkpoint, ignore_variables)
        if task_name == TEXT_CLASSIFIER and not _is_ignored(_CLASSIFIER_WEIGHT, ignored):
            activation = task.get("activation")
            if activation not in _CLASSIFIER_ACTIVATIONS:
                raise ConversionError(
                    f"{_join(directory, TASK_FILE)}: activation {activation!r} has no albert_tf "
                    f"counterpart (AlbertClassifier gives logits and their softmax)"
                )
            preprocessor = None
            if vocabulary is not None:
                preprocessor = _attached_preprocessor(vocabulary, task, config)
            model = AlbertClassifier(
                AlbertModel(config),
                num_classes=int(task["num_classes"]),
                dropout=float(task.get("dropout", 0.1)),
                preprocessor=preprocessor,
            )
            table = names.KERAS_HUB_CLASSIFIER
        else:
            model = AlbertPretrainer(AlbertModel(config))
            table = names.KERAS_HUB
        result = load_weights(model, checkpoint, table, ignored=ignored, config_source=config_path)
    finally:
        local.close()
    if "masked_lm" in result["loaded"]:
        logging.warning(
            "%s: keras-hub's MaskedLMHead normalises with epsilon %g, albert_tf's MLM head with "
            "layer_norm_eps=%g: the MLM logits differ slightly from keras-hub's",
            directory,
            MLM_LAYER_NORM_EPS,
            config.layer_norm_eps,
        )
    logging.info("%s: keras-hub %s -> %s", directory, task_name or BACKBONE, type(model).__name__)
    return model


# ----------------------------------------------------------------------------- writing
def _serialized(class_name, config):
    return {
        "module": _MODULES[class_name],
        "class_name": class_name,
        "config": config,
        "registered_name": f"keras_hub>{class_name}",
    }


def _dtype(name):
    return {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": name},
        "registered_name": None,
    }


def _backbone_json(arguments):
    config = {"name": "albert_backbone", "trainable": True, "dtype": _dtype("float32")}
    return _serialized(BACKBONE, {**config, **arguments})


def _tokenizer_json():
    return _serialized(
        TOKENIZER,
        {
            "name": "albert_tokenizer",
            "trainable": True,
            "dtype": _dtype("int32"),
            "config_file": TOKENIZER_FILE,
            "proto": None,
            "sequence_length": None,
            "add_bos": False,
            "add_eos": False,
        },
    )


def _preprocessor_json(class_name, sequence_length, **extra):
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()
    return _serialized(
        class_name,
        {
            "name": name,
            "trainable": True,
            "dtype": _dtype("float32"),
            "tokenizer": _tokenizer_json(),
            "config_file": PREPROCESSOR_FILE,
            "sequence_length": sequence_length,
            "truncate": "round_robin",
            **extra,
        },
    )


def _keras_path(name, inner, layer_paths):
    """([(weights-file group, layer name)] from the outer layer in, variable index) of a
    `names.KERAS_HUB` name."""
    layer, *sublayers, index = name.split("/")
    block = _BLOCK.fullmatch(layer)
    if block:
        number = int(block.group(1)) * inner + int(block.group(2))
        top = "layers/transformer_encoder" + (f"_{number}" if number else "")
    else:
        top = layer_paths[layer]
    return [(top, layer)] + [(SUBLAYER_PATHS[s], s) for s in sublayers], index


def _write_weights(path, arrays, inner, layer_paths, model_name, learning_rate=None):
    """A Keras 3 weights file holding `arrays` ({names.KERAS_HUB name: array}) where Keras
    would keep them for keras-hub's model (and, for a task, its optimizer's initial state)."""
    import h5py

    with h5py.File(path, "w") as h5:
        h5.create_group("vars").attrs["name"] = model_name
        if learning_rate is not None:
            optimizer = h5.create_group("optimizer/vars")
            optimizer.attrs["name"] = "adam"
            optimizer.create_dataset("0", data=np.int64(0))
            optimizer.create_dataset("1", data=np.float32(learning_rate))
        for name in sorted(arrays):
            groups, index = _keras_path(name, inner, layer_paths)
            location = ""
            for key, layer in groups:
                location = f"{location}/{key}" if location else key
                h5.require_group(f"{location}/vars").attrs["name"] = layer
            h5[f"{location}/vars"].create_dataset(index, data=arrays[name])


def _vocabulary(spm_model, config, lower_case, tex_quotes, albert_rules):
    """The vocabulary.spm bytes: `spm_model` with albert_tf's text rules folded into its
    normalizer where a normalizer can hold them (logged where not)."""
    from albert_tf.text.tokenizer import split_digit_comma
    from albert_tf.text.vocab_check import check_vocabulary_matches

    tokenizer = check_vocabulary_matches(spm_model, config, flag="spm_model")
    proto = tokenizer.model_proto
    if not albert_rules:
        if lower_case or tex_quotes:
            logging.warning(
                "The model records albert_rules=false with lower_case=%s, tex_quotes=%s: "
                "keras-hub's tokenizer gets the vocabulary unchanged and will not apply them",
                lower_case,
                tex_quotes,
            )
        return proto
    from albert_tf.export.litert_text import compose_model_proto

    composed = compose_model_proto(proto, lower=lower_case, tex_quotes=tex_quotes)
    vocab = tokenizer.vocab()
    split = [p for p in vocab if split_digit_comma([p], lambda text: [text]) != [p]]
    logging.warning(
        "keras-hub's AlbertTokenizer applies only the vocabulary's normalizer: albert_tf's "
        "text rules (%s) are folded into it, but keras-hub will not apply the digit-comma rule "
        "(%d pieces of this vocabulary, e.g. %s, stay whole where albert_tf splits off the "
        "comma) and tokenizes differently a capital sigma ending a text (σ, not ς), a Hangul "
        "syllable followed by a conjoining final consonant, and invalid UTF-8 (<unk>, not "
        "U+FFFD). Measured: 98.2%% of 12,379 held-out docstring sentences (code-heavy, "
        "many '[0, 1]') and 17 of the 18 texts of tests/text's torture set tokenize "
        "identically; every difference was the digit-comma rule",
        ", ".join(
            ["whitespace collapse", "accent stripping"]
            + (["lowercasing"] if lower_case else [])
            + (["TeX quotes"] if tex_quotes else [])
        ),
        len(split),
        ", ".join(repr(p) for p in split[:3]) or "none",
    )
    return composed


def _metadata(config, tasks):
    import keras

    projection = 0 if config.has_embedding_projection else config.hidden_size**2
    return {
        "keras_version": keras.version(),
        "keras_hub_version": KERAS_HUB_VERSION,
        "parameter_count": config.num_parameters() + projection,
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        "tasks": tasks,
    }


def _check_replaceable(directory):
    """A ConversionError for an existing directory that holds more than a preset."""
    import tensorflow as tf

    if not tf.io.gfile.exists(directory):
        return
    if not tf.io.gfile.isdir(directory):
        raise ConversionError(f"{directory} is a file, not a preset directory")
    other = sorted(
        n.rstrip("/")
        for n in tf.io.gfile.listdir(directory)
        if n.rstrip("/") not in PRESET_FILES and not n.startswith(files.TEMPORARY_PREFIX)
    )
    if other:
        raise ConversionError(
            f"{directory} holds more than a keras-hub preset ({', '.join(other[:5])}); write "
            f"to a new directory or remove those files"
        )


def _place(staging, directory):
    """Moves the finished local `staging` directory to `directory`: a local one is swapped in
    whole (renames); a remote one (gs://) gets each file copied over."""
    import tensorflow as tf

    if "://" in directory:
        for root, _, names_ in os.walk(staging):
            for name in names_:
                relative = os.path.relpath(os.path.join(root, name), staging)
                target = _join(directory, relative.replace(os.sep, "/"))
                tf.io.gfile.makedirs(os.path.dirname(target))
                tf.io.gfile.copy(os.path.join(root, name), target, overwrite=True)
        shutil.rmtree(staging, ignore_errors=True)
        return
    directory = directory.rstrip("/") or directory
    if not os.path.exists(directory):
        os.rename(staging, directory)
        return
    if files.exchange_paths(staging, directory):
        shutil.rmtree(staging, ignore_errors=True)  # now the previous preset
        return
    aside = files.temporary_path(directory)
    os.rename(directory, aside)
    os.rename(staging, directory)
    shutil.rmtree(aside, ignore_errors=True)


def to_keras_hub(
    model,
    directory,
    spm_model=None,
    tex_quotes=False,
    lower_case=None,
    albert_rules=True,
    sequence_length=None,
):
    """Writes `model` as a keras-hub preset directory (see the module docstring).

    Args:
        model: an `AlbertPretrainer` (written as an AlbertMaskedLM task preset: backbone and
            MLM head; the SOP head has no keras-hub counterpart) or an `AlbertClassifier`
            (an AlbertTextClassifier task preset; its labels are not kept).
        directory: the preset directory (local or gs://); a local one is written whole (built
            beside it, then renamed into place), an existing preset is replaced, a directory
            holding anything else is refused.
        spm_model: the SentencePiece model (path or bytes), checked against the model; None:
            the classifier's attached preprocessor's, else no tokenizer is written (a warning
            says so; AlbertBackbone.from_preset still loads).
        tex_quotes, lower_case, albert_rules: the model's text settings (its text.json;
            `albert_tf.models.model_dir.text_settings`), folded into the exported vocabulary's
            normalizer; lower_case None means True.
        sequence_length: the preprocessors' sequence_length (default: the classifier's
            preprocessor's max_seq_length, else min(512, max_position_embeddings)).

    Raises:
        ConversionError (nothing is written): a config keras-hub cannot represent (naming the
        field), a classifier head it cannot represent; VocabularyError: a vocabulary that does
        not belong to the model.
    """
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.pretrainer import AlbertPretrainer

    if isinstance(model, AlbertClassifier):
        if model.num_classes < 1:
            raise ConversionError(f"num_classes={model.num_classes} cannot be written")
        table, task = names.KERAS_HUB_CLASSIFIER, TEXT_CLASSIFIER
        preprocessor = model.preprocessor
        if model.labels:
            logging.warning(
                "keras-hub's AlbertTextClassifier keeps no label names: %s are not written",
                model.labels,
            )
    elif isinstance(model, AlbertPretrainer):
        table, task, preprocessor = names.KERAS_HUB, MASKED_LM, None
    else:
        raise TypeError(
            f"to_keras_hub writes an AlbertPretrainer or an AlbertClassifier, got "
            f"{type(model).__name__}"
        )
    config = model.backbone.config
    arguments = backbone_arguments(config)
    if spm_model is None and preprocessor is not None:
        spm_model = preprocessor.model_proto
    vocabulary = None
    if spm_model is not None:
        vocabulary = _vocabulary(
            spm_model, config, True if lower_case is None else lower_case, tex_quotes, albert_rules
        )
    else:
        logging.warning(
            "No SentencePiece model: the preset gets no tokenizer (AlbertBackbone.from_preset "
            "loads it; AlbertTokenizer and the task's preprocessor do not)"
        )
    if sequence_length is None:
        sequence_length = preprocessor.max_seq_length if preprocessor else 512
    sequence_length = min(int(sequence_length), config.max_position_embeddings)

    arrays = export_weights(model, table)
    if not config.has_embedding_projection:  # keras-hub always projects
        arrays[_PROJECTION[0]] = np.eye(config.hidden_size, dtype=np.float32)
        arrays[_PROJECTION[1]] = np.zeros([config.hidden_size], np.float32)
    head = {n: a for n, a in arrays.items() if n.split("/")[0] in _TASK_LAYERS}
    backbone = {n: a for n, a in arrays.items() if n not in head}

    _check_replaceable(directory)
    local_parent = None if "://" in directory else os.path.dirname(os.path.abspath(directory))
    if local_parent:
        os.makedirs(local_parent, exist_ok=True)
        files.remove_stale_temporaries(directory.rstrip("/"))
        staging = files.temporary_path(os.path.abspath(directory))
        os.makedirs(staging)
    else:
        staging = tempfile.mkdtemp(prefix="albert_tf_keras_hub_")
    try:
        _write_preset(
            staging,
            arguments,
            backbone,
            head,
            task,
            model,
            vocabulary,
            sequence_length,
            config,
        )
        _place(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logging.info(
        "Wrote %s as a keras-hub %s preset (%d backbone and %d head variables) to %s",
        type(model).__name__,
        task,
        len(backbone),
        len(head),
        directory,
    )


def _write_preset(staging, arguments, backbone, head, task, model, vocabulary, length, config):
    def write_json(name, values):
        with open(os.path.join(staging, name), "w", encoding="utf-8") as f:
            f.write(json.dumps(values, indent=4))

    inner = config.inner_group_num
    backbone_json = _backbone_json(arguments)
    write_json(CONFIG_FILE, backbone_json)
    _write_weights(
        os.path.join(staging, WEIGHTS_FILE),
        backbone,
        inner,
        BACKBONE_LAYER_PATHS,
        "albert_backbone",
    )
    write_json(METADATA_FILE, _metadata(config, ["MaskedLM", "TextClassifier"]))
    if vocabulary is not None:
        os.makedirs(os.path.join(staging, os.path.dirname(VOCABULARY_FILE)))
        with open(os.path.join(staging, VOCABULARY_FILE), "wb") as f:
            f.write(vocabulary)
        write_json(TOKENIZER_FILE, _tokenizer_json())
    if task == TEXT_CLASSIFIER:
        preprocessor = _preprocessor_json("AlbertTextClassifierPreprocessor", length)
        values = {
            "backbone": backbone_json,
            "preprocessor": preprocessor if vocabulary is not None else None,
            "name": "albert_text_classifier",
            "num_classes": model.num_classes,
            "activation": "linear",
            "dropout": model.dropout_rate,
        }
        model_name = "albert_text_classifier"
    else:
        preprocessor = _preprocessor_json(
            "AlbertMaskedLMPreprocessor",
            length,
            mask_selection_rate=0.15,
            mask_selection_length=96,
            mask_token_rate=0.8,
            random_token_rate=0.1,
        )
        values = {
            "backbone": backbone_json,
            "preprocessor": preprocessor if vocabulary is not None else None,
            "name": "albert_masked_lm",
        }
        model_name = "albert_masked_lm"
        logging.warning(
            "keras-hub's MaskedLMHead normalises with epsilon %g (albert_tf: layer_norm_eps=%g): "
            "AlbertMaskedLM's logits differ slightly from albert_tf's",
            MLM_LAYER_NORM_EPS,
            config.layer_norm_eps,
        )
    write_json(TASK_FILE, _serialized(task, values))
    _write_weights(
        os.path.join(staging, TASK_WEIGHTS_FILE),
        head,
        inner,
        TASK_LAYER_PATHS,
        model_name,
        OPTIMIZER_LEARNING_RATES[task],
    )
    if vocabulary is not None:
        write_json(PREPROCESSOR_FILE, preprocessor)
