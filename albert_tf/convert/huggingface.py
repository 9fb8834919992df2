"""Hugging Face ALBERT checkpoints (config.json + model.safetensors), both directions.

Import reads the AlbertModel layout (no prefix, no heads), AlbertForMaskedLM ("albert." prefix,
`predictions.*`, no pooler) and AlbertForPreTraining (also `sop_classifier.*`) through the flat
table `names.HUGGINGFACE`. Export writes the AlbertForPreTraining layout. In an HF config.json
"gelu" is the exact erf GELU and "gelu_new" the tanh one; `AlbertConfig` keeps that apart.

Fine-tuned heads: `head_model_from_huggingface` reads AlbertForSequenceClassification (into an
`AlbertClassifier`), AlbertForTokenClassification (`AlbertTokenClassifier`) and
AlbertForMultipleChoice (`AlbertMultipleChoice`) through `names.HUGGINGFACE_CLASSIFIER` (the
same backbone rows plus `classifier.*`), and AlbertForQuestionAnswering
(`AlbertQuestionAnswerer`) through `names.HUGGINGFACE_QUESTION_ANSWERING` (`qa_outputs.*`);
`head_model_to_huggingface` writes them back (classifiers with their labels, id2label /
label2id). HF has no counterpart of `AlbertSquadV2Model` (see `albert_tf.convert.original`).

HF always has the E -> H projection (`embedding_hidden_mapping_in`); ours exists only when
E != H. A checkpoint with E == H therefore converts only if that projection is the identity
with zero bias (exactly what `to_huggingface` writes for such a model); any other E == H
projection cannot be represented and is an error.
"""

import os
import re

import numpy as np
import tensorflow as tf
from absl import logging
from safetensors import numpy as safetensors_numpy

from albert_tf import files
from albert_tf.config import AlbertConfig
from albert_tf.convert import names
from albert_tf.convert.weights import (
    Checkpoint,
    ConversionError,
    check_whole_block_sharing,
    export_weights,
    load_weights,
    shared_groups,
)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
_PREFIX = "albert."
_HEAD_PREFIXES = ("predictions.", "sop_classifier.")
_PROJECTION = (
    "albert.encoder.embedding_hidden_mapping_in.weight",
    "albert.encoder.embedding_hidden_mapping_in.bias",
)
_WORD_TABLE = "albert.embeddings.word_embeddings.weight"
# Written into exported config.json files besides the model's own fields.
_EXPORT_EXTRAS = dict(
    model_type="albert",
    architectures=["AlbertForPreTraining"],
    position_embedding_type="absolute",
    classifier_dropout_prob=0.1,
    pad_token_id=0,
    bos_token_id=2,
    eos_token_id=3,
)
SEQUENCE_CLASSIFICATION = "AlbertForSequenceClassification"
TOKEN_CLASSIFICATION = "AlbertForTokenClassification"
QUESTION_ANSWERING = "AlbertForQuestionAnswering"
MULTIPLE_CHOICE = "AlbertForMultipleChoice"
# Each fine-tuned head architecture -> its name table.
HEAD_TABLES = {
    SEQUENCE_CLASSIFICATION: names.HUGGINGFACE_CLASSIFIER,
    TOKEN_CLASSIFICATION: names.HUGGINGFACE_CLASSIFIER,
    QUESTION_ANSWERING: names.HUGGINGFACE_QUESTION_ANSWERING,
    MULTIPLE_CHOICE: names.HUGGINGFACE_CLASSIFIER,
}
HEAD_ARCHITECTURES = tuple(HEAD_TABLES)
_NO_POOLER = (TOKEN_CLASSIFICATION, QUESTION_ANSWERING)  # built with add_pooling_layer=False
_POOLER = tuple(r.source for r in names.HUGGINGFACE_CLASSIFIER if r.part == "pooler")
DEFAULT_NUM_CHOICES = 4  # RACE; HF's config does not store it (our exports add num_choices)


def head_weight(architecture):
    """The head's weight tensor of an HF head architecture, e.g. "classifier.weight"."""
    return next(
        rule.source
        for rule in HEAD_TABLES[architecture]
        if rule.part == "classifier" and rule.source.endswith(".weight")
    )


def read_huggingface_config(path):
    """An `AlbertConfig` from an HF config.json ("gelu" = erf, "gelu_new" = tanh)."""
    values = files.read_json(path)
    model_type = values.get("model_type", "albert")
    if model_type != "albert":
        raise ConversionError(f"{path}: model_type is {model_type!r}, not 'albert'")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ConversionError(
            f"{path}: position_embedding_type {position_type!r} is not supported (only "
            f"'absolute', as in every released ALBERT)"
        )
    check_whole_block_sharing(values, path)
    return AlbertConfig.from_dict(values, dialect="huggingface", source=path)


def _load_safetensors(path):
    if not tf.io.gfile.exists(path):
        directory = os.path.dirname(path)
        present = sorted(tf.io.gfile.listdir(directory)) if tf.io.gfile.isdir(directory) else []
        raise FileNotFoundError(
            f"No {WEIGHTS_FILE} at {path} (found: {', '.join(present) or 'nothing'}); save the "
            f"HF model with save_pretrained(..., safe_serialization=True)"
        )
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        return safetensors_numpy.load(data)
    except Exception as e:  # safetensors raises its own error types (e.g. for bfloat16)
        raise ConversionError(
            f"{path}: cannot read the tensors ({type(e).__name__}: {e}); only dtypes NumPy "
            f"knows (float32, float16) can be read, so save bfloat16 models as float32 "
            f"(model.float().save_pretrained(...))"
        ) from None


def _normalize(tensors, path, config):
    """Renames a checkpoint to the AlbertForPreTraining layout and resolves tied/redundant tensors.

    Returns (tensors, display) where display maps each new name to the stored one.
    """
    prefixed = any(name.startswith(_PREFIX) for name in tensors)
    renamed, display = {}, {}
    for name, array in tensors.items():
        key = name
        if not prefixed and not name.startswith(_HEAD_PREFIXES):
            key = _PREFIX + name  # AlbertModel layout
        renamed[key], display[key] = array, name

    # The MLM decoder is tied: its weight is the word table, its bias is predictions.bias.
    decoder_weight = renamed.pop("predictions.decoder.weight", None)
    if decoder_weight is not None:
        table = renamed.get(_WORD_TABLE)
        if table is None or not np.array_equal(decoder_weight, table):
            raise ConversionError(
                f"{path}: predictions.decoder.weight differs from "
                f"{display.get(_WORD_TABLE, _WORD_TABLE)}; "
                f"albert_tf ties the MLM output matrix to the word table and cannot hold an "
                f"untied decoder"
            )
    decoder_bias = renamed.pop("predictions.decoder.bias", None)
    if decoder_bias is not None:
        bias = renamed.setdefault("predictions.bias", decoder_bias)
        display.setdefault("predictions.bias", "predictions.decoder.bias")
        if not np.array_equal(bias, decoder_bias):
            raise ConversionError(
                f"{path}: predictions.decoder.bias differs from predictions.bias; they are one "
                f"tied tensor in HF ALBERT"
            )

    if not config.has_embedding_projection and any(n in renamed for n in _PROJECTION):
        weight = renamed.get(_PROJECTION[0])
        bias = renamed.get(_PROJECTION[1])
        identity = (
            weight is not None
            and bias is not None
            and np.array_equal(weight, np.eye(config.hidden_size, dtype=weight.dtype))
            and not np.any(bias)
        )
        if not identity:
            raise ConversionError(
                f"{path}: {display.get(_PROJECTION[0], _PROJECTION[0])} is a learned projection "
                f"but embedding_size == hidden_size ({config.hidden_size}); albert_tf, like the "
                f"original ALBERT, has no projection when E == H, so only an identity "
                f"projection with zero bias can be converted"
            )
        logging.info("%s: dropping the identity embedding projection (E == H)", path)
        for name in _PROJECTION:
            renamed.pop(name)
    return renamed, display


def read_huggingface_checkpoint(directory, config):
    """A `Checkpoint` over `directory/model.safetensors`, renamed to the AlbertForPreTraining
    layout."""
    path = os.path.join(directory, WEIGHTS_FILE)
    tensors, display = _normalize(_load_safetensors(path), path, config)
    return Checkpoint(path, {k: v.shape for k, v in tensors.items()}, tensors.__getitem__, display)


def from_huggingface(directory, ignore_variables=()):
    """An `AlbertPretrainer` from an HF ALBERT directory (config.json + model.safetensors).

    Args:
        directory: what `save_pretrained(directory, safe_serialization=True)` wrote for an
            AlbertModel, AlbertForMaskedLM or AlbertForPreTraining (local or gs://).
        ignore_variables: regexes (re.search, on the stored names) of tensors to skip on
            purpose, e.g. a fine-tuned "^classifier\\." head.

    Returns:
        An AlbertPretrainer whose `.backbone` is the AlbertModel. Parts the checkpoint lacks
        (AlbertModel: both heads; AlbertForMaskedLM: pooler and SOP head) keep their fresh
        initialisation, with a logged warning.

    Example:
        >>> from albert_tf.convert import from_huggingface
        >>> pretrainer = from_huggingface("albert-base-v2/")  # doctest: +SKIP
    """
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    config_path = os.path.join(directory, CONFIG_FILE)
    config = read_huggingface_config(config_path)
    checkpoint = read_huggingface_checkpoint(directory, config)
    ignored = _ignored(checkpoint, ignore_variables)
    architecture = huggingface_architecture(directory)
    if architecture in HEAD_ARCHITECTURES and not _is_ignored(head_weight(architecture), ignored):
        layer = head_weight(architecture).split(".")[0]
        raise ConversionError(
            f"{directory} holds an {architecture} (a fine-tuned head); read it with "
            f"head_model_from_huggingface, or pass ignore_variables=[r'^{layer}\\.'] to take "
            f"its backbone only"
        )
    pretrainer = AlbertPretrainer(AlbertModel(config))
    load_weights(
        pretrainer, checkpoint, names.HUGGINGFACE, ignored=ignored, config_source=config_path
    )
    return pretrainer


def _ignored(checkpoint, ignore_variables):
    """The format's ignore list plus exact patterns for the names `ignore_variables` match."""
    patterns = [re.compile(p) for p in ignore_variables]
    return names.HUGGINGFACE_IGNORED + tuple(
        re.compile("^" + re.escape(name) + "$")
        for name in checkpoint.shapes
        if any(p.search(checkpoint.display(name)) for p in patterns)
    )


def _is_ignored(name, ignored):
    return any(p.search(name) for p in ignored)


def huggingface_architecture(directory):
    """The first `architectures` entry of `directory/config.json`, or None if there is none."""
    path = os.path.join(directory, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return None
    architectures = files.read_json(path).get("architectures") or [None]
    return architectures[0]


def _head_labels(values, path):
    """(num_labels, label names in id order or None) from an HF config dict."""
    id2label, num_labels = values.get("id2label"), values.get("num_labels")
    labels = None
    if id2label:
        try:
            by_id = {int(k): str(v) for k, v in id2label.items()}
        except ValueError:
            raise ConversionError(
                f"{path}: id2label keys must be label ids (0, 1, ...), got {sorted(id2label)}"
            ) from None
        if sorted(by_id) != list(range(len(by_id))):
            raise ConversionError(
                f"{path}: id2label has ids {sorted(by_id)}; expected 0 to {len(by_id) - 1}"
            )
        labels = [by_id[i] for i in range(len(by_id))]
        if num_labels is not None and num_labels != len(labels):
            raise ConversionError(
                f"{path}: num_labels is {num_labels} but id2label names {len(labels)} labels"
            )
        num_labels = len(labels)
    elif num_labels is None:
        num_labels = 2  # HF's default
    if labels and labels == [f"LABEL_{i}" for i in range(len(labels))]:
        labels = None  # HF's placeholder names, not real labels
    return num_labels, labels


def _head_dropout(values):
    """HF's dropout before the classifier: classifier_dropout_prob (default 0.1), or for the
    token classifier hidden_dropout_prob when it is null."""
    rate = values.get("classifier_dropout_prob", 0.1)
    if rate is None:  # AlbertForTokenClassification's fallback (the sequence one would fail)
        rate = values.get("hidden_dropout_prob", 0.0)
    return float(rate)


def head_model_from_huggingface(directory, ignore_variables=(), num_choices=None):
    """The albert_tf head model of a fine-tuned HF ALBERT directory.

    Args:
        directory: what `save_pretrained(directory, safe_serialization=True)` wrote for an
            AlbertForSequenceClassification, AlbertForTokenClassification,
            AlbertForQuestionAnswering or AlbertForMultipleChoice (config.json `architectures`
            says which).
        ignore_variables: regexes (re.search, on the stored names) of tensors to skip on purpose.
        num_choices: choices per example of a multiple-choice model (default: config.json's
            `num_choices`, which our exports write, else 4 as RACE).

    Returns:
        - AlbertForSequenceClassification / AlbertForTokenClassification: an `AlbertClassifier`
          / `AlbertTokenClassifier`: `num_classes` from num_labels / id2label, `labels` the
          id2label names in id order (None for HF's LABEL_i placeholders), `dropout` HF's
          classifier dropout, and `classifier.weight` / `.bias` in its `logits` layer.
          num_labels == 1 (or problem_type "regression") is a regression `AlbertClassifier`.
        - AlbertForQuestionAnswering: an `AlbertQuestionAnswerer` (`qa_outputs` [2, H] in its
          `logits`; dropout 0 as HF).
        - AlbertForMultipleChoice: an `AlbertMultipleChoice` (`classifier` [1, H] in its
          `logits`; dropout HF's classifier_dropout_prob).
        HF's token classifier and question answerer have no pooler; ours keep their own
        (unused) initial one.

    Example:
        >>> from albert_tf.convert import head_model_from_huggingface
        >>> model = head_model_from_huggingface("albert-base-v2-mnli/")  # doctest: +SKIP
        >>> model.labels  # doctest: +SKIP
        ['entailment', 'neutral', 'contradiction']
    """
    from albert_tf.models.backbone import AlbertModel

    config_path = os.path.join(directory, CONFIG_FILE)
    config = read_huggingface_config(config_path)
    values = files.read_json(config_path)
    architecture = huggingface_architecture(directory)
    if architecture not in HEAD_ARCHITECTURES:
        raise ConversionError(
            f"{config_path}: architectures is {values.get('architectures')!r}; "
            f"head_model_from_huggingface reads {' or '.join(HEAD_ARCHITECTURES)} (use "
            f"from_huggingface for AlbertModel, AlbertForMaskedLM and AlbertForPreTraining)"
        )
    cls, arguments, (width, meaning) = _head_arguments(
        architecture, values, config_path, num_choices
    )

    checkpoint = read_huggingface_checkpoint(directory, config)
    weight = head_weight(architecture)
    stored = checkpoint.shapes.get(weight)
    if stored is not None and len(stored) == 2 and stored[0] != width:
        raise ConversionError(
            f"{checkpoint.location}: {weight} has shape {list(stored)}, i.e. {stored[0]} {meaning}"
        )
    model = cls(AlbertModel(config), **arguments)
    table = HEAD_TABLES[architecture]
    if architecture in _NO_POOLER and not any(n in checkpoint.shapes for n in _POOLER):
        # HF built this head without a pooler; ours keeps its initial one (it never reads it).
        own = export_weights(model, table)
        shapes = {**checkpoint.shapes, **{n: own[n].shape for n in _POOLER}}
        read = checkpoint.read
        checkpoint = Checkpoint(
            checkpoint.location,
            shapes,
            lambda name: own[name] if name in _POOLER else read(name),
            {n: checkpoint.display(n) for n in checkpoint.shapes},
        )
    load_weights(
        model,
        checkpoint,
        table,
        ignored=_ignored(checkpoint, ignore_variables),
        config_source=config_path,
    )
    logging.info("%s: %s %s", directory, type(model).__name__, arguments)
    return model


def _head_arguments(architecture, values, path, num_choices):
    """(model class, constructor arguments, (head width, what a wrong width means))."""
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.models.question_answering import AlbertQuestionAnswerer
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    if architecture == QUESTION_ANSWERING:
        return (
            AlbertQuestionAnswerer,
            dict(dropout=0.0),
            (2, f"outputs, but {QUESTION_ANSWERING} has 2 (start and end logits)"),
        )
    if architecture == MULTIPLE_CHOICE:
        choices = num_choices or values.get("num_choices", DEFAULT_NUM_CHOICES)
        return (
            AlbertMultipleChoice,
            dict(num_choices=choices, dropout=_head_dropout(values)),
            (1, f"outputs, but {MULTIPLE_CHOICE} scores each choice with 1"),
        )
    num_labels, labels = _head_labels(values, path)
    problem_type = values.get("problem_type")
    if architecture == SEQUENCE_CLASSIFICATION and problem_type not in (
        None,
        "single_label_classification",
        "regression",
    ):
        raise ConversionError(
            f"{path}: problem_type {problem_type!r} is not supported: AlbertClassifier is "
            f"single-label (softmax) classification, or regression with num_labels=1"
        )
    if (
        architecture == SEQUENCE_CLASSIFICATION
        and problem_type == "regression"
        and (num_labels != 1)
    ):
        raise ConversionError(
            f"{path}: problem_type 'regression' with num_labels={num_labels}; "
            f"AlbertClassifier regresses one score (num_labels=1)"
        )
    cls = AlbertClassifier if architecture == SEQUENCE_CLASSIFICATION else AlbertTokenClassifier
    return (
        cls,
        dict(num_classes=num_labels, dropout=_head_dropout(values), labels=labels),
        (num_labels, f"labels, but {path} gives {num_labels} (num_labels / id2label)"),
    )


def huggingface_config(config):
    """The HF config.json dict for an `AlbertConfig`, or a ConversionError if HF cannot express
    it."""
    groups = shared_groups(config)
    values = config.to_json_dict("huggingface")
    values.pop("sharing")
    values["num_hidden_groups"] = groups
    values.update(_EXPORT_EXTRAS)
    return values


def to_huggingface(pretrainer, directory):
    """Writes `directory/config.json` + `model.safetensors` in the AlbertForPreTraining layout.

    `AlbertForPreTraining.from_pretrained(directory)` then computes the same outputs, and
    `from_huggingface(directory)` gives back identical weights. With E == H the HF projection is
    written as the identity with zero bias (HF always applies one).

    Example:
        >>> from albert_tf.convert import to_huggingface
        >>> to_huggingface(pretrainer, "/tmp/albert_hf")  # doctest: +SKIP
    """
    from albert_tf.models.pretrainer import AlbertPretrainer

    if not isinstance(pretrainer, AlbertPretrainer):
        raise TypeError(
            f"to_huggingface needs an AlbertPretrainer, got {type(pretrainer).__name__}; "
            f"wrap a backbone as AlbertPretrainer(backbone) (its heads are then new)"
        )
    config = pretrainer.backbone.config
    values = huggingface_config(config)
    tensors = export_weights(pretrainer, names.HUGGINGFACE)
    _write(directory, config, values, tensors)


def _write(directory, config, values, tensors):
    """Writes model.safetensors (with HF's identity projection when E == H) and config.json."""
    if not config.has_embedding_projection:
        tensors[_PROJECTION[0]] = np.eye(config.hidden_size, dtype=np.float32)
        tensors[_PROJECTION[1]] = np.zeros([config.hidden_size], np.float32)
    tf.io.gfile.makedirs(directory)
    files.write_atomic(
        os.path.join(directory, WEIGHTS_FILE),
        safetensors_numpy.save(tensors, metadata={"format": "pt"}),
    )
    files.write_json(os.path.join(directory, CONFIG_FILE), values)
    logging.info(
        "Wrote %d tensors (%s layout) to %s", len(tensors), values["architectures"][0], directory
    )


def head_model_to_huggingface(model, directory):
    """Writes a fine-tuned head model as an HF directory.

    `AlbertClassifier` -> AlbertForSequenceClassification, `AlbertTokenClassifier` ->
    AlbertForTokenClassification (no pooler), `AlbertQuestionAnswerer` ->
    AlbertForQuestionAnswering (no pooler, `qa_outputs`), `AlbertMultipleChoice` ->
    AlbertForMultipleChoice; `AlbertForXxx.from_pretrained(directory)` then loads it with no
    missing or unexpected keys and computes the same logits. config.json carries, for the
    classifiers, num_labels, id2label / label2id (the model's labels, or HF's LABEL_i),
    classifier_dropout_prob and, for AlbertClassifier, problem_type ("regression" when
    num_classes == 1); for multiple choice classifier_dropout_prob and num_choices.

    Example:
        >>> from albert_tf.convert import head_model_to_huggingface
        >>> head_model_to_huggingface(classifier, "/tmp/albert_mnli_hf")  # doctest: +SKIP
    """
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    architectures = (
        (AlbertClassifier, SEQUENCE_CLASSIFICATION),
        (AlbertTokenClassifier, TOKEN_CLASSIFICATION),
        (AlbertQuestionAnswerer, QUESTION_ANSWERING),
        (AlbertMultipleChoice, MULTIPLE_CHOICE),
    )
    architecture = next((a for cls, a in architectures if isinstance(model, cls)), None)
    if isinstance(model, AlbertSquadV2Model):
        raise TypeError(
            "Hugging Face has no ALBERT model with the original's SQuAD v2 head "
            "(answerability and beam search); write an AlbertSquadV2Model with "
            "head_model_to_original, or keep it as an albert_tf model"
        )
    if architecture is None:
        raise TypeError(
            f"head_model_to_huggingface needs an AlbertClassifier or "
            f"AlbertTokenClassifier, got {type(model).__name__} (an "
            f"AlbertQuestionAnswerer or AlbertMultipleChoice also converts; use "
            f"to_huggingface for an AlbertPretrainer)"
        )
    config = model.backbone.config
    values = huggingface_config(config)
    values["architectures"] = [architecture]
    if architecture == QUESTION_ANSWERING:
        values["num_labels"] = 2  # the width of HF's qa_outputs: start and end
    elif architecture == MULTIPLE_CHOICE:
        values.update(classifier_dropout_prob=model.dropout_rate, num_choices=model.num_choices)
    else:
        values.update(_label_values(model), classifier_dropout_prob=model.dropout_rate)
        if architecture == SEQUENCE_CLASSIFICATION:
            values["problem_type"] = (
                "regression" if model.num_classes == 1 else "single_label_classification"
            )
    tensors = export_weights(model, HEAD_TABLES[architecture])
    if architecture in _NO_POOLER:
        for name in _POOLER:
            del tensors[name]
    _write(directory, config, values, tensors)


def _label_values(model):
    """num_labels, id2label and label2id of a classifier (HF's LABEL_i without labels)."""
    labels = model.labels or [f"LABEL_{i}" for i in range(model.num_classes)]
    if len(set(labels)) != len(labels):
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        raise ConversionError(
            f"The model's labels repeat {duplicates}; HF's label2id needs distinct names"
        )
    return dict(
        num_labels=model.num_classes,
        id2label={str(i): label for i, label in enumerate(labels)},
        label2id={label: i for i, label in enumerate(labels)},
    )
