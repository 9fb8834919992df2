"""`AlbertTokenClassifier`: sequence output -> dropout -> dense, one label per token (NER, tagging).

Labels are int [B, S] with `IGNORE` (-1) where a position carries no label: [CLS], [SEP],
padding, the second and later SentencePiece pieces of a word, and the context positions of a
sliding window. The default loss is the cross-entropy averaged over the labelled positions,
the default metric the accuracy over them (`TokenAccuracy`).

>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models.backbone import AlbertModel
>>> model = AlbertTokenClassifier(
...     AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)),
...     labels=["O", "B-PER", "I-PER"])
>>> inputs = {"input_word_ids": np.array([[2, 7, 9, 3]], "int32"),
...           "input_mask": np.ones([1, 4], "int32"), "input_type_ids": np.zeros([1, 4], "int32")}
>>> model(inputs).shape
TensorShape([1, 4, 3])
>>> loss = model.default_loss()
>>> logits = np.log(np.array([[[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]], "float32"))
>>> round(float(loss(np.array([[0, -1]]), logits)), 4)  # only position 0 counts: -log(0.5)
0.6931

With a preprocessor, `fit` and `evaluate` take raw texts (or lists of words) with one tag per
word, and `predict` tags raw text as the entities export does (see `AlbertTokenClassifier`).
"""

import warnings

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from albert_tf.models.backbone import INPUT_KEYS
from albert_tf.models.head_model import AlbertHeadModel
from albert_tf.models.text_inputs import TextForm, label_ids, python_label_ids

IGNORE = -1

# The tagging head reads the sequence output: the backbone's pooler gets no gradient, by design.
warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables .*pooler")


@keras.saving.register_keras_serializable(package="albert_tf")
class TokenAccuracy(keras.metrics.Mean):
    """Accuracy over the labelled positions (label >= 0) of [B, S] labels and [B, S, C] logits."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        if len(y_true.shape) == len(y_pred.shape):
            y_true = ops.squeeze(y_true, axis=-1)
        correct = ops.cast(
            ops.equal(y_true, ops.cast(ops.argmax(y_pred, axis=-1), "int32")), self.dtype
        )
        weight = ops.cast(ops.greater_equal(y_true, 0), self.dtype)
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, self.dtype)
        return super().update_state(correct, sample_weight=weight)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(AlbertHeadModel):
    """ALBERT with a tagging head on every position of the sequence output.

    Called on {"input_word_ids", "input_mask", "input_type_ids"} (int [B, S]) it returns float32
    logits [B, S, num_classes].

    Args:
        backbone: an `AlbertModel`.
        num_classes: number of tags. Defaults to len(labels) or 2.
        dropout: dropout on the sequence output (0.1 as Hugging Face's
            AlbertForTokenClassification).
        labels: tag names in id order (e.g. ["O", "B-LOC", "I-LOC", ...]); kept in the config
            and used by the export to name entities.
        name: model name.

    `compile()` defaults: the original AdamW with warmup and linear decay (see
    `albert_tf.models.head_model`), cross-entropy over positions with label >= 0 and
    `TokenAccuracy`.

    Raw text (with a preprocessor), as the token-classification task and the entities export
    see it: a text's words are `albert_tf.text.graph_words.split_words`' under the option
    `word_split` ("punctuation", the default: whitespace, and each punctuation character a word
    of its own; "whitespace": whitespace only, for data whose tokens hold punctuation, as the
    run's recorded `word_convention` says), each word tokenized on its own, windows of the
    preprocessor's max_seq_length `stride` pieces apart (default half a window), each word read in
    the window where it has the most context. `fit` / `evaluate` take texts (a list, an array
    [N], a dict {"text"} or a batched dataset) or lists of words (CoNLL tokens, or a ragged
    dataset), with labels: one tag (id, or name from `labels`) per word. `predict` takes texts
    and returns the entities export's serving_default outputs (`entity_body`): "words",
    "word_tags", "word_start", "word_end", "word_score" [N, W], "num_words" [N] and the
    entities ("entity_type", "entity_text", "entity_start", "entity_end", "entity_score"
    [N, E], "num_entities" [N]), padded with "" / -1 / 0.
    """

    default_name = "albert_token_classifier"
    text_form = TextForm(
        ("text",),
        words=True,
        expected="texts of shape [batch] or, for fit / evaluate, lists of words (or a dict "
        "{'text'})",
    )
    text_options = {"stride": None, "word_split": "punctuation"}

    def head_input(self, backbone_outputs):
        return backbone_outputs["sequence_output"]

    def default_loss(self):
        # ignore_class masks the positions; mean_with_sample_weight divides by their count.
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=IGNORE, reduction="mean_with_sample_weight"
        )

    def default_metrics(self):
        return [TokenAccuracy(name="accuracy")]

    def micro_batch_weights(self, y, sample_weight):
        """Each micro-batch's share of the labelled positions (times their sample weights): the
        default loss divides by that count, so an accumulated update equals the whole batch's
        even when the micro-batches hold different numbers of labelled positions."""
        counts = tf.cast(tf.not_equal(y, IGNORE), tf.float32)
        if sample_weight is not None:
            weight = tf.cast(sample_weight, tf.float32)
            weight = tf.reshape(
                weight,
                tf.concat(
                    [tf.shape(weight), tf.ones([counts.shape.rank - weight.shape.rank], tf.int32)],
                    0,
                ),
            )
            counts = counts * weight
        counts = tf.reduce_sum(tf.reshape(counts, [tf.shape(counts)[0], -1]), axis=1)
        return tf.math.divide_no_nan(counts, tf.reduce_sum(counts))

    # ------------------------------------------------------------------ raw text
    def word_tokenizer(self):
        """The `WordTokenizer` of the attached preprocessor (made once)."""
        from albert_tf.text.graph_words import WordTokenizer

        cache = self.text_functions.functions
        if "word_tokenizer" not in cache:
            cache["word_tokenizer"] = WordTokenizer(self.preprocessor)
        return cache["word_tokenizer"]

    def text_labels(self, y, columns, options=None):
        from albert_tf.text.graph_words import split_words

        word_split = _word_split(options)
        what = f"{type(self).__name__}: labels"
        texts = columns["text"]
        if len(texts) and isinstance(texts[0], list):
            words = list(texts)
        else:
            split = split_words(tf.constant(texts), word_split)["words"].to_list()
            words = [[w.decode() for w in row] for row in split]
        tags = [python_label_ids(list(row), self.labels, what) for row in y]
        if len(tags) != len(words):
            raise ValueError(f"{what}: {len(words)} examples but {len(tags)} tag lists")
        for i, (row, tag_row) in enumerate(zip(words, tags)):
            if len(row) != len(tag_row):
                raise ValueError(
                    f"{what}: example {i} has {len(row)} words {row} but {len(tag_row)} tags "
                    "(one tag per word; words split on whitespace and punctuation)"
                )
        return tf.RaggedTensor.from_row_lengths(
            np.array([t for row in tags for t in row], np.int32).reshape([-1]),
            [len(row) for row in tags],
        )

    def encode_text(self, options):
        from albert_tf.text.graph_windows import word_windows
        from albert_tf.text.graph_words import split_words
        from albert_tf.text.word_windows import window_sizes

        words_tokenizer, labels = self.word_tokenizer(), self.labels
        word_split = _word_split(options)
        max_seq_length = self.preprocessor.max_seq_length
        _, stride = window_sizes(max_seq_length, options["stride"])
        fixed = not self.preprocessor.dynamic_padding
        special = (words_tokenizer.cls_id, words_tokenizer.sep_id, words_tokenizer.pad_id)

        def encode(columns, tags):
            text = columns["text"]
            words = (
                text
                if isinstance(text, tf.RaggedTensor)
                else split_words(text, word_split)["words"]
            )
            windows = word_windows(words_tokenizer(words), max_seq_length, stride, *special)
            ids = {k: windows[k] for k in INPUT_KEYS}
            if fixed:  # static shapes (TPU)
                pad = [[0, 0], [0, max_seq_length - tf.shape(ids["input_word_ids"])[1]]]
                ids = {
                    k: tf.ensure_shape(
                        tf.pad(v, pad, constant_values=special[2] if k == INPUT_KEYS[0] else 0),
                        [None, max_seq_length],
                    )
                    for k, v in ids.items()
                }
            if tags is None:
                return ids, None
            if not isinstance(tags, tf.RaggedTensor):
                raise TypeError(
                    "tags must be ragged [batch, (words)], one per word (Dataset.ragged_batch)"
                )
            tags = label_ids(tags, labels)
            check = tf.debugging.assert_equal(
                tf.cast(tags.row_lengths(), tf.int64),
                tf.cast(words.row_lengths(), tf.int64),
                message="each text needs one tag per word (words split on whitespace and "
                "punctuation, as albert_tf.text.graph_words.split_words)",
            )
            with tf.control_dependencies([check]):
                shape = tf.shape(ids["input_word_ids"])
            return ids, window_tag_labels(windows, tags.flat_values, shape)

        return encode

    def text_predict_function(self, options):
        from albert_tf.export.token_classifier_serving import entity_body
        from albert_tf.text.word_windows import window_sizes

        labels = list(self.labels or [])
        if len(labels) != self.num_classes:
            raise ValueError(
                f"{type(self).__name__}.predict on text names the tags: build the model with "
                f"labels=[...] (one name per class, {self.num_classes})"
            )
        max_seq_length = self.preprocessor.max_seq_length
        _, stride = window_sizes(max_seq_length, options["stride"])
        body = entity_body(
            self, self.word_tokenizer(), labels, max_seq_length, stride, _word_split(options)
        )
        return lambda columns: body(columns["text"])


def _word_split(options):
    """The raw-text option `word_split` (a `word_convention.CONVENTIONS` name), checked."""
    from albert_tf.data.word_convention import check_convention

    word_split = (options or {}).get("word_split", "punctuation")
    check_convention(word_split)
    return word_split


def window_tag_labels(windows, word_tags, shape):
    """Labels int32 `shape` [N, S] of `graph_windows.word_windows`' windows: each word's tag
    (`word_tags`, flat in word order) at the position of its first piece in its owning window,
    `IGNORE` elsewhere; the in-graph twin of `albert_tf.text.word_windows.window_labels`.

    >>> from albert_tf.text.graph_windows import word_windows
    >>> ids = tf.ragged.constant([[[10], [11, 12], [13]], [[14]]], ragged_rank=2)
    >>> windows = word_windows(ids, max_seq_length=5, stride=1, cls_id=2, sep_id=3)
    >>> window_tag_labels(windows, tf.constant([5, 6, 7, 8]), [3, 5]).numpy().tolist()
    [[-1, 5, 6, -1, -1], [-1, -1, -1, 7, -1], [-1, 8, -1, -1, -1]]
    """
    index = tf.stack([windows["owner_window"], windows["owner_position"]], axis=1)
    return tf.tensor_scatter_nd_update(
        tf.fill(shape, tf.constant(IGNORE, tf.int32)), index, tf.cast(word_tags, tf.int32)
    )
