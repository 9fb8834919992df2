"""`AlbertPreprocessor`: raw strings (single texts or pairs) -> ALBERT model inputs, in the graph.

It composes the text package's `TextTokenizer` (ALBERT's normalization + SentencePiece, ids
equal to the Python tokenizer) and `SegmentPacker` ([CLS] a [SEP] (b [SEP]), truncation,
padding). The same layer runs in `tf.data.Dataset.map` while fine-tuning and inside the exported
SavedModel, so training and serving tokenize identically.

Padding: `dynamic_padding=False` pads every batch to `max_seq_length` (static shapes, needed on
TPU); `dynamic_padding=True` pads to the longest sequence of the batch rounded up to a multiple of
`bucket`, which is much faster when texts are short.

>>> pre = AlbertPreprocessor("30k-clean.model", max_seq_length=128)
>>> inputs = pre({"text": ["A first sentence."], "text_pair": ["Its pair."]})
>>> sorted(inputs)
['input_mask', 'input_type_ids', 'input_word_ids']
"""

import base64

import keras
import tensorflow as tf

from albert_tf.text.preprocessing_layers import (
    TRUNCATIONS,
    SegmentPacker,
    TextTokenizer,
    renamed_config,
)
from albert_tf.text.tokenizer import SentencePieceTokenizer

_EXPECTED = (
    "AlbertPreprocessor: expected texts of shape [batch] or pairs [batch, 2] (a list of "
    "[text, text_pair] rows, or a dict {'text', 'text_pair'})"
)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPreprocessor(keras.layers.Layer):
    """Maps tf.string [batch] texts (and optional pairs) to input_word_ids, input_mask and
    input_type_ids.

    Args:
        spm_model: SentencePiece model: a path (local or gs://) or the serialized bytes.
        lower_case: lowercase while normalizing (True for the released uncased models).
        max_seq_length: maximum sequence length including [CLS] and [SEP]s.
        truncation: "round_robin" (for pairs this is the original GLUE code's rule: drop from
            the end of the longer text) or "longest_first" (tensorflow-text's
            ShrinkLongestTrimmer; ties cut the first text). See `SegmentPacker`.
        dynamic_padding: pad to the batch's longest sequence (rounded up to `bucket`) instead of
            `max_seq_length`.
        bucket: padded lengths are multiples of this with dynamic padding.
        tex_quotes: replace the TeX quotes `` and '' with " while normalizing, as Hugging
            Face's `AlbertTokenizer` does (False: the original ALBERT, which keeps them).
        albert_rules: ALBERT's whitespace collapse, accent stripping and digit-comma rule
            (False: SentencePiece on the text as given, as keras-hub's `AlbertTokenizer`; a
            model converted from a keras-hub preset records it, see `from_pretrained`).

    Call with a batch of texts or of pairs; it returns a dict of int32 [B, S] tensors:
    - texts: a Python list of B strings, or a string array / tensor [B] (or [B, 1]);
    - pairs: a list of B rows [text, text_pair], an array / tensor [B, 2], or a dict
      {"text": [B], "text_pair": [B]} (a dict with "text" alone: texts);
    - segments: a list or tuple of one or two string tensors / arrays [B] (not Python lists:
      a nested Python list is read as rows).
    Any other shape (a single string, [B, 3], rows of other lengths) is a ValueError naming
    the shapes it takes.

    Example:
        >>> pre = AlbertPreprocessor("30k-clean.model", max_seq_length=32)
        >>> pre(tf.constant(["Hello world!"]))["input_word_ids"].shape
        TensorShape([1, 32])
        >>> pre(["Hello world!", "Two texts."])["input_word_ids"].shape
        TensorShape([2, 32])
        >>> pairs = pre([["A question?", "Its answer."], ["Short.", "Pair."]])
        >>> pairs["input_type_ids"].numpy().max(axis=1).tolist()
        [1, 1]
    """

    def __init__(
        self,
        spm_model,
        lower_case=True,
        max_seq_length=128,
        truncation="round_robin",
        dynamic_padding=False,
        bucket=8,
        tex_quotes=False,
        albert_rules=True,
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # String inputs: no float autocasting or tensor conversion of the (dict) argument.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if not isinstance(max_seq_length, int) or max_seq_length < 3:
            raise ValueError(
                "max_seq_length must be an integer >= 3 ([CLS] a [SEP] b [SEP]), "
                f"got {max_seq_length!r}"
            )
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        if not isinstance(bucket, int) or bucket < 1:
            raise ValueError(f"bucket must be a positive integer, got {bucket!r}")
        self.lower_case = bool(lower_case)
        self.tex_quotes = bool(tex_quotes)
        self.albert_rules = bool(albert_rules)
        # Read and checked from the path itself, so an error names the file.
        python_tokenizer = SentencePieceTokenizer(
            spm_model,
            lower_case=self.lower_case,
            tex_quotes=self.tex_quotes,
            albert_rules=self.albert_rules,
        )
        self.model_proto = python_tokenizer.model_proto
        self.source = python_tokenizer.source  # the .model path (None after from_config)
        self.max_seq_length = max_seq_length
        self.truncation = truncation
        self.dynamic_padding = bool(dynamic_padding)
        self.bucket = bucket
        self.vocab_size = python_tokenizer.vocab_size
        self.special_ids = {
            "cls_id": python_tokenizer.cls_id,
            "sep_id": python_tokenizer.sep_id,
            "pad_id": python_tokenizer.pad_id,
            "mask_id": python_tokenizer.mask_id,
        }
        self.tokenizer = TextTokenizer(
            self.model_proto,
            lower_case=self.lower_case,
            tex_quotes=self.tex_quotes,
            albert_rules=self.albert_rules,
            name="tokenizer",
        )
        self.packer = SegmentPacker(
            max_seq_length,
            cls_id=python_tokenizer.cls_id,
            sep_id=python_tokenizer.sep_id,
            pad_id=python_tokenizer.pad_id,
            truncation=truncation,
            pad_to="longest" if self.dynamic_padding else "fixed",
            bucket=bucket if self.dynamic_padding else None,
            name="packer",
        )
        self.built = True  # no weights: usable (and exportable) before the first call
        # tensorflow-text creates the SentencePiece resource on first use; if that first use is
        # inside a tf.data or tf.function graph, the handle dies with that graph ("Resource
        # ... SentencepieceOp ... does not exist", keras-hub #1573). Create it eagerly now.
        with tf.init_scope():
            self.tokenizer(tf.constant([""]))

    @classmethod
    def from_pretrained(cls, directory, spm_model=None, **kwargs):
        """A preprocessor for the model saved in `directory` (by `albert_tf.save` or
        convert_checkpoint.py): its spm.model (or `spm_model`) and the text settings it
        records (`albert_tf.models.model_dir.text_settings`: tex_quotes, and lower_case and
        albert_rules where recorded); `kwargs` as the constructor's, overriding them.
        `directory` may name a model to fetch, as `albert_tf.sources` accepts."""
        from albert_tf.models import model_dir

        directory = model_dir.local_directory(directory)

        spm_model = spm_model or model_dir.spm_model_path(directory)
        if spm_model is None:
            raise FileNotFoundError(f"{directory} has no {model_dir.SPM_FILE}: pass spm_model")
        return cls(spm_model, **{**model_dir.text_settings(directory), **kwargs})

    @staticmethod
    def _segment_list(inputs):
        """The one or two text segments of `inputs` (see the class docstring), unconverted."""
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - {"text", "text_pair"})
            if "text" not in inputs or unknown:
                raise KeyError(
                    f"AlbertPreprocessor: expected keys 'text' and optionally "
                    f"'text_pair', got {sorted(inputs)}"
                )
            return [inputs["text"]] + ([inputs["text_pair"]] if "text_pair" in inputs else [])
        if isinstance(inputs, (str, bytes)):
            raise ValueError(f"{_EXPECTED}, got a single string: pass a list, e.g. [{inputs!r}]")
        if isinstance(inputs, (list, tuple)):
            if not inputs:
                raise ValueError(f"{_EXPECTED}, got an empty {type(inputs).__name__}")
            if all(isinstance(v, (str, bytes)) for v in inputs):
                return [list(inputs)]  # a batch of texts
            if all(isinstance(v, (list, tuple)) for v in inputs):  # rows
                widths = sorted({len(v) for v in inputs})
                if widths not in ([1], [2]) or not all(
                    isinstance(t, (str, bytes)) for row in inputs for t in row
                ):
                    raise ValueError(f"{_EXPECTED}, got rows of {' and '.join(map(str, widths))}")
                return [[row[i] for row in inputs] for i in range(widths[0])]
            if not 1 <= len(inputs) <= 2:
                raise ValueError(f"{_EXPECTED}, got {len(inputs)} segments")
            return list(inputs)  # segments: tensors or arrays [batch]
        shape = getattr(inputs, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] in (1, 2):  # [B, 1] or [B, 2]
            return [inputs[:, i] for i in range(shape[1])]
        return [inputs]

    @staticmethod
    def _segments(inputs):
        tensors = []
        for segment in AlbertPreprocessor._segment_list(inputs):
            segment = tf.convert_to_tensor(segment)
            if segment.dtype != tf.string:
                raise TypeError(f"AlbertPreprocessor: texts must be tf.string, got {segment.dtype}")
            if segment.shape.rank is not None and segment.shape.rank != 1:
                raise ValueError(f"{_EXPECTED}, got {segment.shape.as_list()}")
            tensors.append(segment)
        return tensors

    def call(self, inputs):
        return self.packer([self.tokenizer(segment) for segment in self._segments(inputs)])

    def token_lengths(self, texts):
        """Number of SentencePiece ids of each text (int32 [batch]), before truncation."""
        return self.tokenizer(tf.convert_to_tensor(texts, tf.string)).row_lengths()

    def with_padding(self, dynamic_padding, max_seq_length=None):
        """A copy of this preprocessor with another padding mode (and maybe `max_seq_length`)."""
        config = self.get_config()
        config.update(dynamic_padding=dynamic_padding, name=f"{self.name}_copy")
        if max_seq_length is not None:
            config["max_seq_length"] = max_seq_length
        return type(self).from_config(config)

    def compute_output_spec(self, inputs):
        first = self._segment_list(inputs)[0]
        length = None if self.dynamic_padding else self.max_seq_length
        # One KerasTensor per output: a shared one would make every output of a functional
        # model built on this layer the same tensor.
        return {
            key: keras.KerasTensor((first.shape[0], length), dtype="int32")
            for key in ("input_word_ids", "input_mask", "input_type_ids")
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            spm_model=base64.b64encode(self.model_proto).decode("ascii"),
            lower_case=self.lower_case,
            max_seq_length=self.max_seq_length,
            truncation=self.truncation,
            dynamic_padding=self.dynamic_padding,
            bucket=self.bucket,
            tex_quotes=self.tex_quotes,
            albert_rules=self.albert_rules,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = renamed_config(config)
        if isinstance(config.get("spm_model"), str):
            config["spm_model"] = base64.b64decode(config["spm_model"])
        return cls(**config)
