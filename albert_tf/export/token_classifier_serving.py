"""Named entities from raw text in a SavedModel: `export_token_classifier` and IOB2 chunking.

The served graph: raw text -> words with character offsets (`graph_words.split_words`: split on
whitespace, each punctuation character its own word, as CoNLL data) -> each word's
SentencePiece ids (`graph_words.WordTokenizer`, the tokenizer used for training by
`word_windows.WordWindows`) -> sliding windows with the max-context owner of each word
(`graph_windows`) -> the float32 `AlbertTokenClassifier` -> each word's first-piece logits from
its owning window -> softmax -> one tag per word -> entities.

Entities follow conlleval's chunking of IOB2 tags: an entity starts at B-X, or at I-X after O or
after a tag of another type, and continues over the following I-X; any tag that is not B-X or
I-X is outside. An entity's score is the mean over its words of the word's highest tag
probability (the probability of the predicted tag).

Signatures:
- `serving_default(text: tf.string [B])` -> dense, padded tensors (the counts say how many
  entries of each row are real):
  - `entity_type`, `entity_text`: string [B, E] (padding ""); `entity_start`, `entity_end`:
    int64 [B, E] (character offsets, end exclusive; padding -1); `entity_score`: float32
    [B, E] (padding 0); `num_entities`: int64 [B].
  - `words`, `word_tags`: string [B, W]; `word_start`, `word_end`: int64 [B, W];
    `word_score`: float32 [B, W] (the predicted tag's probability); `num_words`: int64 [B]
    (padding as for entities). A text of any length gets a tag per word (sliding windows).
- `predict_ids(input_word_ids, input_mask, input_type_ids: int32 [B, S])` -> `logits`,
  `probabilities` float32 [B, S, C], `tag_id` int64 [B, S], `tag` string [B, S].

Offsets count Unicode code points, so in Python `text[entity_start:entity_end] == entity_text`.
The export loads with only `tensorflow` and `tensorflow_text` imported.

>>> labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
>>> chunks = iob2_chunks(tf.ragged.constant([[1, 2, 0, 2, 4, 3]]), labels)
>>> [t.decode() for t in chunks["type"][0].numpy()]
['PER', 'PER', 'LOC', 'LOC']
>>> chunks["start"].to_list(), chunks["end"].to_list()
([[0, 3, 4, 5]], [[2, 4, 5, 6]])
"""

import numpy as np
import tensorflow as tf

from albert_tf.export import saved_model
from albert_tf.export.serving_spec import SavedModelSpec
from albert_tf.text.graph_windows import INPUT_KEYS, owner_logits, word_windows
from albert_tf.text.graph_words import WordTokenizer, split_words
from albert_tf.text.word_windows import window_sizes

_TEXT = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)


def _tag_tables(labels):
    """(entity types, type index per tag (-1: outside), is-B per tag) for IOB2 tag names."""
    types, type_index, begins = [], [], []
    for label in labels:
        prefix, kind = label[:2], label[2:]
        if prefix in ("B-", "I-") and kind:
            if kind not in types:
                types.append(kind)
            type_index.append(types.index(kind))
        else:
            type_index.append(-1)
        begins.append(prefix == "B-" and bool(kind))
    return types, np.array(type_index, np.int64), np.array(begins, bool)


def _flat_chunks(tag_ids, labels):
    """Chunks over the flat words of ragged `tag_ids` [B, (W)].

    Returns (inside: int64 indices of the words in an entity, entity: the entity index of each
    of them, first, last: each entity's first and last flat word, type: its type index,
    types: the type names).
    """
    types, type_table, begin_table = _tag_tables(labels)
    tags = tf.cast(tag_ids.flat_values, tf.int64)
    row = tag_ids.value_rowids()
    kind = tf.gather(tf.constant(type_table), tags)
    begin = tf.gather(tf.constant(begin_table), tags)
    n = tf.shape(tags, out_type=tf.int64)[0]
    first_in_row = tf.equal(tf.range(n), tf.gather(tf.cast(tag_ids.row_splits, tf.int64), row))
    previous = tf.where(
        first_in_row, tf.constant(-1, tf.int64), tf.concat([[-1], kind[:-1]], axis=0)
    )
    inside = kind >= 0
    starts = inside & (begin | tf.not_equal(previous, kind))
    entity_of_word = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    words = tf.reshape(tf.where(inside), [-1])
    entity = tf.gather(entity_of_word, words)
    first = tf.math.segment_min(words, entity)
    last = tf.math.segment_max(words, entity)
    return words, entity, first, last, tf.gather(kind, first), types


def iob2_chunks(tag_ids, labels):
    """Entities of IOB2 tag ids (int ragged [B, (words)]; `labels` names them in id order).

    Returns ragged [B, (entities)]: `type` (tf.string), `start` and `end` (int64 word indices in
    the text, end exclusive). See the module docstring for the rule.
    """
    _, _, first, last, kind, types = _flat_chunks(tag_ids, labels)
    splits = tf.cast(tag_ids.row_splits, tf.int64)
    row = tf.gather(tag_ids.value_rowids(), first)
    base = tf.gather(splits, row)
    values = {
        "type": tf.gather(tf.constant(types + [""], tf.string), kind),
        "start": first - base,
        "end": last + 1 - base,
    }
    return {
        k: tf.RaggedTensor.from_value_rowids(v, row, nrows=tag_ids.nrows())
        for k, v in values.items()
    }


def _padded(values, pad):
    return values.to_tensor(default_value=pad)


def _word_probabilities(model, words_tokenizer, words, max_seq_length, stride):
    """Ragged words [B, (W)] -> float32 ragged [B, (W), C] tag probabilities."""
    windows = word_windows(
        words_tokenizer(words),
        max_seq_length,
        stride,
        words_tokenizer.cls_id,
        words_tokenizer.sep_id,
        words_tokenizer.pad_id,
    )
    logits = tf.cast(model({k: windows[k] for k in INPUT_KEYS}, training=False), tf.float32)
    per_word = owner_logits(windows, logits)
    return per_word.with_values(tf.nn.softmax(per_word.values, axis=-1))


def _entity_outputs(text, split, tags, word_score, labels):
    """The entity_* outputs from the word tags (ragged [B, (W)]) and their probabilities."""
    inside, entity, first, last, kind, types = _flat_chunks(tags, labels)
    row = tf.gather(tags.value_rowids(), first)
    byte_start = tf.gather(split["byte_start"].flat_values, first)
    byte_end = tf.gather(split["byte_end"].flat_values, last)
    values = {
        "entity_type": (tf.gather(tf.constant(types + [""], tf.string), kind), ""),
        "entity_text": (
            tf.strings.substr(tf.gather(text, row), byte_start, byte_end - byte_start),
            "",
        ),
        "entity_start": (tf.gather(split["start"].flat_values, first), -1),
        "entity_end": (tf.gather(split["end"].flat_values, last), -1),
        "entity_score": (tf.math.segment_mean(tf.gather(word_score, inside), entity), 0.0),
    }
    ragged = {
        name: tf.RaggedTensor.from_value_rowids(v, row, nrows=tags.nrows())
        for name, (v, _) in values.items()
    }
    outputs = {name: _padded(ragged[name], pad) for name, (_, pad) in values.items()}
    outputs["num_entities"] = ragged["entity_type"].row_lengths()
    return outputs


def entity_body(model, words_tokenizer, labels, max_seq_length, stride):
    """serve(text [B]) -> the serving_default outputs (see the module docstring) of `model` with
    `words_tokenizer` (a `WordTokenizer`), tag names `labels` and windows of `max_seq_length`,
    `stride` apart; also `AlbertTokenClassifier.predict` on raw text."""
    names = tf.constant(labels, tf.string)

    def serve(text):
        split = split_words(text)
        probabilities = _word_probabilities(
            model, words_tokenizer, split["words"], max_seq_length, stride
        )
        tag = tf.argmax(probabilities.values, axis=-1)
        tags = probabilities.with_values(tag)  # ragged [B, (W)]
        word_score = tf.reduce_max(probabilities.values, axis=-1)
        outputs = _entity_outputs(text, split, tags, word_score, labels)
        outputs.update(
            words=_padded(split["words"], ""),
            word_tags=_padded(tags.with_values(tf.gather(names, tag)), ""),
            word_start=_padded(split["start"], -1),
            word_end=_padded(split["end"], -1),
            word_score=_padded(tags.with_values(word_score), 0.0),
            num_words=split["words"].row_lengths(),
        )
        return outputs

    return serve


def _ids_body(model, labels):
    names = tf.constant(labels, tf.string)

    def predict_ids(input_word_ids, input_mask, input_type_ids):
        inputs = {
            "input_word_ids": input_word_ids,
            "input_mask": input_mask,
            "input_type_ids": input_type_ids,
        }
        logits = tf.cast(model(inputs, training=False), tf.float32)
        tag_id = tf.argmax(logits, axis=-1)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "tag_id": tag_id,
            "tag": tf.gather(names, tag_id),
        }

    return predict_ids


def export_token_classifier(
    model,
    tokenizer,
    export_dir,
    max_seq_length=None,
    stride=None,
    version=None,
    labels=None,
    lower_case=True,
    write_warmup="auto",
    compute_dtype="float32",
):
    """Exports an `AlbertTokenClassifier` that tags raw text; returns EXPORT_DIR/<version>.

    Args:
        model: a trained `AlbertTokenClassifier` (served as a copy in `compute_dtype`).
        tokenizer: what `WordWindows.build` was given for training: an `AlbertPreprocessor`,
            `TextTokenizer`, `SentencePieceTokenizer`, `WordTokenizer`, or a SentencePiece model
            path or bytes.
        export_dir: base directory (local or gs://); versions are integer subdirectories.
        max_seq_length: window length with [CLS] and [SEP] (default: the preprocessor's).
        stride: pieces between window starts (default: half a window), as in training.
        version: integer version (default: one more than the highest existing).
        labels: IOB2 tag names in id order (default: `model.labels`).
        lower_case: casing, for a model path or bytes.
        write_warmup: True, False, or "auto" (when tensorflow-serving-api is installed).
        compute_dtype: "float32" or "bfloat16" (as `saved_model.export_classifier`).

    >>> path = export_token_classifier(tagger, preprocessor, "/tmp/serving/ner")  # doctest: +SKIP
    >>> out = tf.saved_model.load(path).signatures["serving_default"](
    ...     text=tf.constant(["Ann lives in Köln."]))                            # doctest: +SKIP
    """
    spec = token_classifier_spec(
        model, tokenizer, max_seq_length, stride, labels, lower_case, compute_dtype
    )
    return saved_model.build(spec, export_dir, version, write_warmup)


def token_classifier_spec(
    model,
    tokenizer,
    max_seq_length=None,
    stride=None,
    labels=None,
    lower_case=True,
    compute_dtype="float32",
):
    """The `SavedModelSpec` of `export_token_classifier` (arguments as there)."""
    labels = list(labels if labels is not None else (model.labels or []))
    if len(labels) != model.num_classes:
        raise ValueError(
            f"the export needs one tag name per class ({model.num_classes}): pass "
            f"labels=[...] or build the model with labels, got {labels}"
        )
    if max_seq_length is None:
        max_seq_length = getattr(tokenizer, "max_seq_length", None)
        if max_seq_length is None:
            raise ValueError("max_seq_length is required unless tokenizer is an AlbertPreprocessor")
    _, stride = window_sizes(max_seq_length, stride)
    max_positions = model.backbone.config.max_position_embeddings
    if max_seq_length > max_positions:
        raise ValueError(
            f"max_seq_length={max_seq_length} exceeds the model's "
            f"max_position_embeddings={max_positions}"
        )
    served = saved_model.served_copy(model, compute_dtype)
    words = (
        tokenizer
        if isinstance(tokenizer, WordTokenizer)
        else WordTokenizer(tokenizer, lower_case=lower_case)
    )
    endpoints = {
        "serving_default": (entity_body(served, words, labels, max_seq_length, stride), [_TEXT]),
        "predict_ids": (_ids_body(served, labels), [_IDS, _IDS, _IDS]),
    }
    description = {
        "kind": "token_classifier",
        "compute_dtype": compute_dtype,
        "signatures": ["serving_default", "predict_ids"],
        "seq_length": int(max_seq_length),
        "stride": stride,
        "lower_case": words.lower_case,
        "labels": labels,
        "words": "whitespace and single punctuation characters",
        "entity_score": "mean over the entity's words of the top tag probability",
    }
    return SavedModelSpec(
        (served, words.text_tokenizer), endpoints, description, saved_model.warmup_batches(False)
    )
