"""Keras layers for in-graph text preprocessing: `TextTokenizer` and `SegmentPacker`.

Both are plain TF ops inside (tensorflow-text for SentencePiece and packing), with no Python
control flow on tensors, so they run in tf.data, in `tf.function(autograph=False)` and in a
SavedModel written by `keras.export.ExportArchive` (track the layer; the SentencePiece model is
embedded in the graph, no asset file).
"""

import base64

import keras
import tensorflow as tf
import tensorflow_text as tft

from albert_tf.text import graph_ops
from albert_tf.text.tokenizer import load_processor

TRUNCATIONS = ("round_robin", "longest_first")
PAD_TO = ("fixed", "longest")


def bucketed_length(length, bucket, max_length):
    """`length` (an integer tensor) rounded up to a multiple of `bucket`, at most `max_length`:
    the padded length of a batch (or chunk) whose longest row has `length` pieces.

    >>> bucketed_length(tf.constant([1, 8, 9, 70]), 8, 64).numpy().tolist()
    [8, 8, 16, 64]
    """
    return tf.minimum((length + bucket - 1) // bucket * bucket, max_length)


def renamed_config(config):
    """A copy of a layer config with the key older versions wrote, `seq_length`, renamed
    `max_seq_length`, so saved models and descriptions from before the rename still load.

    >>> renamed_config({"seq_length": 128, "cls_id": 2})
    {'cls_id': 2, 'max_seq_length': 128}
    """
    config = dict(config)
    if "seq_length" in config:
        config["max_seq_length"] = config.pop("seq_length")
    return config


class _StringLayer(keras.layers.Layer):
    """A preprocessing layer: inputs are strings or ragged ids, not float tensors to autocast."""

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True  # no weights; built so that ExportArchive can track it right away


@keras.saving.register_keras_serializable(package="albert_tf")
class TextTokenizer(_StringLayer):
    """Raw text -> SentencePiece ids in-graph, equal to `SentencePieceTokenizer.encode_ids`.

    ALBERT's `preprocess_text` (whitespace collapse, optionally Hugging Face's TeX quotes, NFKD
    without combining marks, optional lowercase), SentencePiece (tensorflow-text, model bytes
    embedded), then the digit-comma rule. Invalid UTF-8 becomes U+FFFD, as in the Python path.
    With `albert_rules=False` (keras-hub's tokenizer) there is no whitespace collapse, accent
    stripping or digit-comma rule.

    Args:
      spm_model: `.model` path (local or gs://) or serialized model bytes.
      lower_case: lowercase during preprocessing.
      tex_quotes: replace the TeX quotes `` and '' with " as Hugging Face's `AlbertTokenizer`
        does (False: the original ALBERT, which keeps them).
      albert_rules: ALBERT's whitespace collapse, accent stripping and digit-comma rule (False:
        SentencePiece on the text as given, as keras-hub's `AlbertTokenizer`).
      model_proto_base64: the model as base64 text (what `get_config` stores), instead of the
        first argument.

    Example:
    >>> from albert_tf.text import SentencePieceTokenizer
    >>> tokenizer = TextTokenizer("30k-clean.model")
    >>> ids = tokenizer(tf.constant(["Hello, World 9,000!", ""]))
    >>> python = SentencePieceTokenizer("30k-clean.model")
    >>> ids.to_list() == [python.encode_ids("Hello, World 9,000!"), []]
    True
    """

    def __init__(
        self,
        spm_model=None,
        lower_case=True,
        model_proto_base64=None,
        tex_quotes=False,
        albert_rules=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if (spm_model is None) == (model_proto_base64 is None):
            raise ValueError("TextTokenizer needs exactly one of spm_model and model_proto_base64")
        if model_proto_base64 is not None:
            spm_model = base64.b64decode(model_proto_base64)
        # Checked here: tensorflow-text would fail later, in the graph, quoting the bytes.
        self.model_proto, _ = load_processor(spm_model)
        self.lower_case = bool(lower_case)
        self.tex_quotes = bool(tex_quotes)
        self.albert_rules = bool(albert_rules)
        self.sentencepiece = tft.SentencepieceTokenizer(model=self.model_proto, out_type=tf.string)

    def call(self, texts):
        """tf.string [B] (or a scalar, or [B, 1]) -> int32 RaggedTensor [B, (pieces)]."""
        pieces = self.tokenize_to_pieces(texts)
        return pieces.with_flat_values(self.sentencepiece.string_to_id(pieces.flat_values))

    def tokenize_to_pieces(self, texts):
        """tf.string [B] -> tf.string RaggedTensor [B, (pieces)] after the digit-comma rule."""
        texts = tf.convert_to_tensor(texts, tf.string)
        if texts.shape.rank == 2:
            texts = tf.squeeze(texts, axis=1)
        elif texts.shape.rank == 0:
            texts = tf.reshape(texts, [1])
        elif texts.shape.rank != 1:
            raise ValueError(
                f"TextTokenizer expects texts of shape [batch] or [batch, 1], got {texts.shape}"
            )
        normalized = graph_ops.normalize(
            texts,
            lower=self.lower_case,
            tex_quotes=self.tex_quotes,
            albert_rules=self.albert_rules,
        )
        pieces = self.sentencepiece.tokenize(normalized)
        if not self.albert_rules:
            return pieces
        return graph_ops.split_digit_comma(pieces, self.sentencepiece.tokenize)

    @property
    def vocab_size(self):
        return int(self.sentencepiece.vocab_size())

    def id_to_piece(self, ids):
        return self.sentencepiece.id_to_string(ids)

    def get_config(self):
        config = super().get_config()
        config.update(
            lower_case=self.lower_case,
            tex_quotes=self.tex_quotes,
            albert_rules=self.albert_rules,
            model_proto_base64=base64.b64encode(self.model_proto).decode("ascii"),
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class SegmentPacker(_StringLayer):
    """Packs one or two ragged id segments as `[CLS] A [SEP] (B [SEP])` model inputs.

    Args:
      max_seq_length: maximum (and, with pad_to="fixed", exact) output length, special ids included.
      cls_id, sep_id, pad_id: special ids (ALBERT: 2, 3, 0).
      truncation: how segments are cut to fit `max_seq_length`:
        "round_robin" (default): the budget is dealt one id at a time to each segment in turn, so a
          short segment keeps all its ids and two long ones split it evenly (the first gets the odd
          one). For two segments this equals the original ALBERT/BERT `_truncate_seq_pair`
          (drop from the end of the longer segment, the second on ties).
        "longest_first": tensorflow-text's ShrinkLongestTrimmer: repeatedly drop the last id of the
          longest segment, the first on ties (so the second segment gets the odd one).
      pad_to: "fixed" pads to `max_seq_length`; "longest" pads to the longest packed row of the
        batch.
      bucket: with pad_to="longest", round the padded length up to a multiple of `bucket`
        (capped at `max_seq_length`), to bound the number of distinct shapes.

    Call with a list of 1 or 2 int RaggedTensors [B, (n)] (or [B, (words), (n)]: the ragged
    dimensions after the batch are merged first); returns a dict of int32 [B, L]:
    `input_word_ids`, `input_mask` (1 for real ids), `input_type_ids` (0 for CLS, A and its SEP;
    1 for B and its SEP). `max_seq_length=` in the call (an int or a scalar int tensor, e.g. a
    SavedModel argument) replaces the layer's for that call.

    Example:
    >>> packer = SegmentPacker(8, cls_id=2, sep_id=3, pad_id=0)
    >>> out = packer([tf.ragged.constant([[10, 11, 12]]), tf.ragged.constant([[20, 21, 22, 23]])])
    >>> out["input_word_ids"].numpy().tolist()
    [[2, 10, 11, 12, 3, 20, 21, 3]]
    >>> out["input_type_ids"].numpy().tolist()
    [[0, 0, 0, 0, 0, 1, 1, 1]]
    """

    def __init__(
        self,
        max_seq_length,
        cls_id,
        sep_id,
        pad_id=0,
        truncation="round_robin",
        pad_to="fixed",
        bucket=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(max_seq_length) < 2:
            raise ValueError(
                f"max_seq_length must be at least 2 ([CLS] and [SEP]), got {max_seq_length}"
            )
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        if pad_to not in PAD_TO:
            raise ValueError(f"pad_to must be one of {PAD_TO}, got {pad_to!r}")
        if bucket is not None and (int(bucket) < 1 or pad_to != "longest"):
            raise ValueError(
                f"bucket must be a positive int and needs pad_to='longest', got bucket={bucket!r} "
                f"with pad_to={pad_to!r}"
            )
        self.max_seq_length = int(max_seq_length)
        self.cls_id, self.sep_id, self.pad_id = int(cls_id), int(sep_id), int(pad_id)
        self.truncation, self.pad_to = truncation, pad_to
        self.bucket = None if bucket is None else int(bucket)

    def call(self, segments, max_seq_length=None):
        if isinstance(segments, (tf.Tensor, tf.RaggedTensor)):
            segments = [segments]
        segments = list(segments)
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"SegmentPacker packs 1 or 2 segments, got {len(segments)}")
        if max_seq_length is None:
            max_seq_length = self.max_seq_length
        if not isinstance(max_seq_length, int):
            max_seq_length = tf.cast(max_seq_length, tf.int32)  # what the trimmers take
            check = tf.debugging.assert_greater_equal(
                max_seq_length,
                1 + len(segments),
                message=f"max_seq_length leaves no room for {len(segments)} segments",
            )
            with tf.control_dependencies([check]):
                max_seq_length = tf.identity(max_seq_length)
        elif max_seq_length - 1 - len(segments) < 0:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves no room for {len(segments)} segments"
            )
        budget = max_seq_length - 1 - len(segments)
        segments = [
            s if isinstance(s, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(s)
            for s in segments
        ]
        segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
        segments = [tf.cast(s, tf.int64) for s in segments]
        trimmer_class = (
            tft.RoundRobinTrimmer if self.truncation == "round_robin" else tft.ShrinkLongestTrimmer
        )
        trimmed = trimmer_class(max_seq_length=budget).trim(segments)
        ids, type_ids = tft.combine_segments(
            trimmed, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id
        )
        shape = self._padded_shape(ids, max_seq_length)
        word_ids = ids.to_tensor(default_value=self.pad_id, shape=shape)
        mask = tf.ones_like(ids).to_tensor(default_value=0, shape=shape)
        type_ids = type_ids.to_tensor(default_value=0, shape=shape)
        return {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32),
        }

    def _padded_shape(self, ids, max_seq_length):
        if isinstance(max_seq_length, int):
            if self.pad_to == "fixed":
                return [None, max_seq_length]  # static
            shortest = min(2, max_seq_length)
        else:
            max_seq_length = tf.cast(max_seq_length, tf.int64)
            if self.pad_to == "fixed":
                return tf.stack([ids.nrows(), max_seq_length])
            shortest = tf.minimum(tf.constant(2, tf.int64), max_seq_length)
        # At least [CLS] [SEP]: an empty request batch still gets a valid (0, 2+) shape.
        longest = tf.reduce_max(tf.concat([ids.row_lengths(), [shortest]], axis=0))
        if self.bucket:
            longest = bucketed_length(longest, self.bucket, max_seq_length)
        return tf.stack([ids.nrows(), longest])

    def get_config(self):
        config = super().get_config()
        config.update(
            max_seq_length=self.max_seq_length,
            cls_id=self.cls_id,
            sep_id=self.sep_id,
            pad_id=self.pad_id,
            truncation=self.truncation,
            pad_to=self.pad_to,
            bucket=self.bucket,
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**renamed_config(config))
