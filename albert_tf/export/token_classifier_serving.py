"""Named entities from raw text or words in a SavedModel: `export_token_classifier`, IOB2
chunking, and the served tags' agreement with the runner's dev predictions.

The served graph: raw text -> words with character offsets (`graph_words.split_words` under
the export's word convention: "whitespace", or "punctuation" = whitespace and each punctuation
character its own word; decided from the training data by `albert_tf.data.word_convention`
and recorded in the description as "word_convention") -> each word's SentencePiece ids
(`graph_words.WordTokenizer`, the tokenizer used for training by `word_windows.WordWindows`)
-> sliding windows with the max-context owner of each word (`graph_windows`) -> the
`AlbertTokenClassifier` -> each word's first-piece logits from its owning window -> softmax ->
one tag per word -> entities. The `words` signature starts at the words (a client's own
tokens, as CoNLL-style clients send them), so its tags align with them whatever the convention.

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
- `words(words: tf.string [B, W], num_words: int64 [B])`: the first `num_words[b]` entries of
  row b are its words (the rest padding, ignored) -> `word_tags` string [B, W] (padding ""),
  `word_tag_id` int64 [B, W] (padding -1), `word_score` float32 [B, W] (padding 0), and the
  entities by word index: `entity_type` string [B, E], `entity_word_start`, `entity_word_end`
  int64 [B, E] (end exclusive; padding -1), `entity_score` float32 [B, E], `num_entities`
  int64 [B]. A row of any length gets a tag per word (sliding windows, as raw text); a
  `num_words` above W or below 0 is an InvalidArgumentError naming `num_words`.
- `predict_ids(input_word_ids, input_mask, input_type_ids: int32 [B, S])` -> `logits`,
  `probabilities` float32 [B, S, C], `tag_id` int64 [B, S], `tag` string [B, S].

Agreement with the runner (`dev_agreement`, stored as "agreement_with_dev_predictions" in
assets.extra/albert_tf.json when the dev predictions are known): the dev sentences' words joined
by single spaces go through serving_default, and the words themselves through `words`; each is
compared word by word with the runner's dev predictions (dev_predictions.txt). The raw-text
path is aligned by character offsets: a dev word agrees when one served word has exactly its
span and the runner's tag; a dev word the served split cuts differently disagrees (a client
could not align a tag to it). For the entity F1 against the gold tags, each dev word takes the
tag of the served word that starts where it starts ("O" when none does), as a word's first
piece carries its tag. Below `MIN_AGREEMENT` a WARNING names the cause.

Offsets count Unicode code points, so in Python `text[entity_start:entity_end] == entity_text`.
The export loads with only `tensorflow` and `tensorflow_text` imported.

>>> labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
>>> chunks = iob2_chunks(tf.ragged.constant([[1, 2, 0, 2, 4, 3]]), labels)
>>> [t.decode() for t in chunks["type"][0].numpy()]
['PER', 'PER', 'LOC', 'LOC']
>>> chunks["start"].to_list(), chunks["end"].to_list()
([[0, 3, 4, 5]], [[2, 4, 5, 6]])
"""

import collections

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.data import word_convention as conventions
from albert_tf.export import saved_model
from albert_tf.export.serving_spec import SavedModelSpec
from albert_tf.metrics.entity_metrics import entity_scores
from albert_tf.text.graph_windows import INPUT_KEYS, owner_logits, word_windows
from albert_tf.text.graph_words import WordTokenizer, split_words
from albert_tf.text.word_windows import window_sizes

_TEXT = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)
_WORDS = [tf.TensorSpec([None, None], tf.string), tf.TensorSpec([None], tf.int64)]
# The least word agreement of the served tags with the runner's dev predictions without a
# WARNING.
MIN_AGREEMENT = 0.99
# Dev sentences the agreement is measured on at most (the first ones).
AGREEMENT_SENTENCES = 2000


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


def _entity_outputs(tags, word_score, labels, located):
    """The entity_* outputs from the word tags (ragged [B, (W)]) and their probabilities:
    type and score, with `located(row, first, last)` -> {name: (flat values, padding)} (each
    entity's row, first and last flat word index) giving where each entity is."""
    inside, entity, first, last, kind, types = _flat_chunks(tags, labels)
    row = tf.gather(tags.value_rowids(), first)
    values = {
        "entity_type": (tf.gather(tf.constant(types + [""], tf.string), kind), ""),
        **located(row, first, last),
        "entity_score": (tf.math.segment_mean(tf.gather(word_score, inside), entity), 0.0),
    }
    ragged = {
        name: tf.RaggedTensor.from_value_rowids(v, row, nrows=tags.nrows())
        for name, (v, _) in values.items()
    }
    outputs = {name: _padded(ragged[name], pad) for name, (_, pad) in values.items()}
    outputs["num_entities"] = ragged["entity_type"].row_lengths()
    return outputs


def word_tagger(model, words_tokenizer, max_seq_length, stride):
    """tag(words: ragged tf.string [B, (W)], int64 row splits) -> (tag ids int64, the tags'
    probabilities float32), ragged as the words: `model` over windows of `max_seq_length`,
    `stride` apart. One `tf.function`, so that the signatures that call it share one traced
    and saved copy of the model's graph."""
    spec = tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1, row_splits_dtype=tf.int64)

    @tf.function(input_signature=[spec], autograph=False)
    def tag(words):
        probabilities = _word_probabilities(model, words_tokenizer, words, max_seq_length, stride)
        tags = probabilities.with_values(tf.argmax(probabilities.values, axis=-1))
        return tags, tags.with_values(tf.reduce_max(probabilities.values, axis=-1))

    return tag


def entity_body(
    model, words_tokenizer, labels, max_seq_length, stride, convention="punctuation", tagger=None
):
    """serve(text [B]) -> the serving_default outputs (see the module docstring) of `model` with
    `words_tokenizer` (a `WordTokenizer`), tag names `labels`, windows of `max_seq_length`,
    `stride` apart, and words split by `convention`; also `AlbertTokenClassifier.predict` on
    raw text. `tagger`: the `word_tagger` of these (made here when not given)."""
    names = tf.constant(labels, tf.string)
    tag = tagger or word_tagger(model, words_tokenizer, max_seq_length, stride)

    def serve(text):
        split = split_words(text, convention)
        tags, word_score = tag(split["words"])
        word_score = word_score.values

        def located(row, first, last):
            byte_start = tf.gather(split["byte_start"].flat_values, first)
            byte_end = tf.gather(split["byte_end"].flat_values, last)
            substr = tf.strings.substr(tf.gather(text, row), byte_start, byte_end - byte_start)
            return {
                "entity_text": (substr, ""),
                "entity_start": (tf.gather(split["start"].flat_values, first), -1),
                "entity_end": (tf.gather(split["end"].flat_values, last), -1),
            }

        outputs = _entity_outputs(tags, word_score, labels, located)
        outputs.update(
            words=_padded(split["words"], ""),
            word_tags=_padded(tags.with_values(tf.gather(names, tags.values)), ""),
            word_start=_padded(split["start"], -1),
            word_end=_padded(split["end"], -1),
            word_score=_padded(tags.with_values(word_score), 0.0),
            num_words=split["words"].row_lengths(),
        )
        return outputs

    return serve


def words_body(model, words_tokenizer, labels, max_seq_length, stride, tagger=None):
    """serve(words [B, W], num_words [B]) -> the `words` signature's outputs (see the module
    docstring); arguments as `entity_body`."""
    names = tf.constant(labels, tf.string)
    tag = tagger or word_tagger(model, words_tokenizer, max_seq_length, stride)

    def serve(words, num_words):
        width = tf.shape(words, out_type=tf.int64)[1]
        checks = [
            tf.debugging.assert_less_equal(
                num_words, width, message="num_words exceeds the width W of words [B, W]"
            ),
            tf.debugging.assert_non_negative(num_words, message="num_words must be >= 0"),
            tf.debugging.assert_equal(
                tf.shape(num_words)[0],
                tf.shape(words)[0],
                message="words [B, W] and num_words [B] differ in B",
            ),
        ]
        with tf.control_dependencies(checks):
            ragged = tf.RaggedTensor.from_tensor(words, lengths=num_words)
        tags, word_score = tag(ragged)
        word_score = word_score.values
        splits = tf.cast(tags.row_splits, tf.int64)

        def located(row, first, last):
            base = tf.gather(splits, row)
            return {
                "entity_word_start": (first - base, -1),
                "entity_word_end": (last + 1 - base, -1),
            }

        shape = tf.stack([tags.nrows(), width])
        outputs = _entity_outputs(tags, word_score, labels, located)
        outputs.update(
            word_tags=tags.with_values(tf.gather(names, tags.values)).to_tensor("", shape=shape),
            word_tag_id=tags.to_tensor(-1, shape=shape),
            word_score=tags.with_values(word_score).to_tensor(0.0, shape=shape),
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
    word_convention="punctuation",
    dev_reference=None,
):
    """Exports an `AlbertTokenClassifier` that tags raw text or words; returns
    EXPORT_DIR/<version>.

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
        word_convention: how serving_default splits raw text into words: "punctuation" or
            "whitespace" (`albert_tf.data.word_convention`; a fine-tuned task decides it from its
            training data).
        dev_reference: (dev words, the runner's predicted tags, gold tags or None) per
            sentence: `dev_agreement` of the export on them is logged and stored in the
            description ("agreement_with_dev_predictions").

    >>> path = export_token_classifier(tagger, preprocessor, "/tmp/serving/ner")  # doctest: +SKIP
    >>> out = tf.saved_model.load(path).signatures["serving_default"](
    ...     text=tf.constant(["Ann lives in Köln."]))                            # doctest: +SKIP
    """
    spec = token_classifier_spec(
        model,
        tokenizer,
        max_seq_length,
        stride,
        labels,
        lower_case,
        compute_dtype,
        word_convention,
        dev_reference,
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
    word_convention="punctuation",
    dev_reference=None,
):
    """The `SavedModelSpec` of `export_token_classifier` (arguments as there)."""
    conventions.check_convention(word_convention)
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
    tagger = word_tagger(served, words, max_seq_length, stride)
    text_fn = entity_body(
        served, words, labels, max_seq_length, stride, word_convention, tagger=tagger
    )
    words_fn = words_body(served, words, labels, max_seq_length, stride, tagger=tagger)
    endpoints = {
        "serving_default": (text_fn, [_TEXT]),
        "words": (words_fn, _WORDS),
        "predict_ids": (_ids_body(served, labels), [_IDS, _IDS, _IDS]),
    }
    description = {
        "kind": "token_classifier",
        "compute_dtype": compute_dtype,
        "signatures": list(endpoints),
        "seq_length": int(max_seq_length),
        "stride": stride,
        "lower_case": words.lower_case,
        "labels": labels,
        "word_convention": word_convention,
        "words": conventions.DESCRIPTIONS[word_convention],
        "entity_score": "mean over the entity's words of the top tag probability",
    }
    if dev_reference is not None:
        text_words, word_tags = served_dev_outputs(text_fn, words_fn, dev_reference.words)
        description["agreement_with_dev_predictions"] = dev_agreement(
            dev_reference.words,
            dev_reference.predicted,
            dev_reference.gold,
            labels,
            text_words,
            word_tags,
            word_convention,
            runner_precision=dev_reference.precision,
        )
    return SavedModelSpec(
        (served, words.text_tokenizer), endpoints, description, saved_model.warmup_batches(False)
    )


# ----------------------------------------------------------------------------- agreement
def served_dev_outputs(serve_text, serve_words, sentences, batch_size=32):
    """(text_words, word_tags) of `dev_agreement` from the served functions (`entity_body`'s,
    `words_body`'s) on `sentences` (lists of words): the raw-text path on the words joined by
    single spaces, and the `words` signature on the words."""
    text_words, word_tags = [], []

    def strings(row, n):
        return [t.decode("utf-8") for t in row[:n]]

    for begin in range(0, len(sentences), batch_size):
        batch = [list(words) for words in sentences[begin : begin + batch_size]]
        out = serve_text(tf.constant([" ".join(words) for words in batch], tf.string))
        out = {k: v.numpy() for k, v in out.items()}
        for i, n in enumerate(out["num_words"]):
            text_words.append(
                list(
                    zip(
                        out["word_start"][i, :n].tolist(),
                        out["word_end"][i, :n].tolist(),
                        strings(out["word_tags"][i], n),
                    )
                )
            )
        lengths = [len(words) for words in batch]
        width = max(lengths, default=0)
        padded = tf.constant(
            [words + [""] * (width - len(words)) for words in batch],
            tf.string,
            shape=[len(batch), width],
        )
        tags = serve_words(padded, tf.constant(lengths, tf.int64))["word_tags"].numpy()
        word_tags.extend(strings(row, n) for row, n in zip(tags, lengths))
    return text_words, word_tags


def _starts(words):
    """Character offsets of `words` joined by single spaces: [(start, end)]."""
    spans, at = [], 0
    for word in words:
        spans.append((at, at + len(word)))
        at += len(word) + 1
    return spans


def _tag_scores(gold, predicted, labels):
    """{"f1"} (entity F1, for IOB2 entity tags) or {"token_accuracy"} (a plain tag set)."""
    if any(label[:2] in ("B-", "I-") for label in labels):
        return {"f1": entity_scores(gold, predicted)["f1"]}
    correct = sum(g == p for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps))
    return {"token_accuracy": correct / max(sum(len(gs) for gs in gold), 1)}


class DevReference(collections.namedtuple("DevReference", "words predicted gold precision")):
    """What an export's tags are measured against: per dev sentence its words, the runner's
    predicted tags and the gold tags (None: unlabelled), and the precision the runner computed
    its predictions in (None: not recorded)."""


def dev_agreement(
    words,
    predicted,
    gold,
    labels,
    text_words,
    word_tags=None,
    convention="punctuation",
    min_agreement=MIN_AGREEMENT,
    served="served",
    runner_precision=None,
):
    """How the served tags follow the runner's dev predictions (see the module docstring).

    Args:
        words, predicted, gold: per dev sentence its words, the runner's tags of them and the
            gold tags (`gold` None: no F1); only the sentences of `text_words` are measured.
        labels: the tag names (IOB2 entity tags give entity F1, others token accuracy).
        text_words: per sentence, the raw-text path's words on `" ".join(words)`: [(start,
            end, tag)] (character offsets; the words it did not tag left out).
        word_tags: per sentence, the `words` signature's tags (None: not measured).
        convention: the raw-text path's word convention (for the warning).
        min_agreement: below it, a WARNING naming the cause.
        served: what is measured, for the log and the warnings.
        runner_precision: the precision of the runner's predictions (recorded as
            "runner_precision"; the served tags are float32 or bfloat16, as the export says).

    Returns {"sentences", "dev_words", "word_convention", "raw_text": {"word_agreement" (dev
    words served with the same span and tag), "same_words" (with the same span), "untagged"
    (no served word at or after them: beyond what the raw-text path tags), "f1" or
    "token_accuracy"}, "words_signature": {"word_agreement", "f1"...} (with `word_tags`),
    "runner": {"f1"...}, "warnings": [...]}; each warning is logged.
    """
    count = len(text_words)
    total = same_span = text_agree = untagged = 0
    projected, cut = [], collections.Counter()
    for sentence, tags, served_words in zip(words, predicted, text_words):
        by_start = {start: (end, tag) for start, end, tag in served_words}
        last = max((end for _, end, _ in served_words), default=0)
        row = []
        for word, tag, (start, end) in zip(sentence, tags, _starts(sentence)):
            served_end, served_tag = by_start.get(start, (None, "O"))
            row.append(served_tag)
            total += 1
            if served_end == end:
                same_span += 1
                text_agree += served_tag == tag
            elif served_end is None and start >= last:
                untagged += 1
            else:
                cut[word] += 1
        projected.append(row)
    result = {
        "sentences": count,
        "dev_words": total,
        "word_convention": convention,
        "runner_precision": runner_precision,
        "raw_text": {
            "word_agreement": text_agree / max(total, 1),
            "same_words": same_span / max(total, 1),
            "untagged": untagged / max(total, 1),
        },
    }
    if word_tags is not None:
        agree = sum(
            p == w
            for tags, served_tags in zip(predicted[:count], word_tags)
            for p, w in zip(tags, served_tags)
        )
        result["words_signature"] = {"word_agreement": agree / max(total, 1)}
    if gold is not None:
        gold = list(gold)[:count]
        result["raw_text"].update(_tag_scores(gold, projected, labels))
        if word_tags is not None:
            result["words_signature"].update(_tag_scores(gold, word_tags, labels))
        result["runner"] = _tag_scores(gold, list(predicted)[:count], labels)
    result["warnings"] = _agreement_warnings(
        result, cut, convention, min_agreement, served, word_tags is not None
    )
    logging.info(
        "%s tags vs the runner's dev predictions: %s",
        served,
        {k: v for k, v in result.items() if k != "warnings"},
    )
    for warning in result["warnings"]:
        logging.warning("%s", warning)
    return result


def _agreement_warnings(result, cut, convention, min_agreement, served, words_signature):
    warnings = []
    text, total = result["raw_text"], result["dev_words"]
    if text["word_agreement"] < min_agreement:
        causes = []
        if cut:
            remedies = ["send pre-split words to the `words` signature"] if words_signature else []
            if convention == "punctuation":
                remedies.append("export with --word_split=whitespace")
            examples = ", ".join(repr(w) for w, _ in cut.most_common(3))
            causes.append(
                f"the {served} word split ({convention}) differs from the training data's on "
                f"{sum(cut.values()) / max(total, 1):.1%} of the dev words: tokens such as "
                f"{examples} are not served as one word"
                + (f"; {' or '.join(remedies)}" if remedies else "")
            )
        if text["untagged"]:
            causes.append(
                f"{text['untagged']:.1%} of the dev words are not tagged (beyond the first window)"
            )
        if not causes:
            causes.append("the tags differ on words split as in the training data")
        warnings.append(
            f"{served} tags of raw text agree with the runner's dev predictions on "
            f"{text['word_agreement']:.1%} of {total} dev words, below {min_agreement:.0%}: "
            + "; ".join(causes)
        )
    by_words = result.get("words_signature")
    if by_words is not None and by_words["word_agreement"] < min_agreement:
        warnings.append(
            f"{served} `words` signature agrees with the runner's dev predictions on "
            f"{by_words['word_agreement']:.1%} of {total} dev words, below {min_agreement:.0%} "
            "(the same words: a precision or window difference; the runner's predictions "
            f"were computed in {result.get('runner_precision') or 'a precision not recorded'})"
        )
    return warnings
