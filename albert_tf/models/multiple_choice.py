"""`AlbertMultipleChoice`: one score per (context, choice) sequence, softmax over the choices.

Inputs are the backbone's id dict with a choice axis, int [B, num_choices, S]; the model folds it
into the batch ([B * num_choices, S]), reads the pooled [CLS] output, applies dropout and a
one-unit dense layer and unfolds the scores into float32 logits [B, num_choices]. The default
loss is the softmax cross-entropy over the choices (labels: int [B], the right choice's index).

>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models.backbone import AlbertModel
>>> model = AlbertMultipleChoice(
...     AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)), num_choices=4)
>>> inputs = {"input_word_ids": np.full([2, 4, 5], 7, "int32"),
...           "input_mask": np.ones([2, 4, 5], "int32"),
...           "input_type_ids": np.zeros([2, 4, 5], "int32")}
>>> model(inputs).shape
TensorShape([2, 4])

With a preprocessor, `fit`, `evaluate` and `predict` take raw (article, question, options)
examples, packed in the graph as the RACE task and the SavedModel export pack them.
"""

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models import model_dir
from albert_tf.models.backbone import INPUT_KEYS
from albert_tf.models.head_model import AlbertHeadModel, load_backbone
from albert_tf.models.text_inputs import TextForm, label_ids, python_label_ids

#: Letters naming the choices (RACE's answers); labels may be them or the choice's index.
LETTERS = "ABCD"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(AlbertHeadModel):
    """ALBERT with a multiple-choice head: pooled [CLS] output -> dropout -> dense(1) per choice.

    Called on {"input_word_ids", "input_mask", "input_type_ids"} (int [B, num_choices, S]) it
    returns float32 logits [B, num_choices].

    Args:
        backbone: an `AlbertModel`.
        num_choices: number of choices per example (4 for RACE).
        dropout: dropout on the pooled output (the original hard-codes 0.1).
        name: model name.

    `compile()` defaults: the original AdamW with warmup and linear decay (see
    `albert_tf.models.head_model`), sparse softmax cross-entropy over the choices and accuracy.
    The dense bias shifts every choice's score alike, so the softmax ignores it (it gets no
    gradient); it is kept for the original's and Hugging Face's checkpoints, which have it.

    Raw text (with a preprocessor; 4 choices, as the export): examples are rows
    (article, question, [4 options]) or a dict {"article" [N], "question" [N], "options"
    [N, 4]} (or a batched tf.data.Dataset of such dicts); a "_" in the question is filled with
    each option, else the option follows the question (`albert_tf.data.race`). Labels are the
    right option's index or letter ("A".."D"). `predict` returns the export's serving_default
    outputs (`albert_tf.export.multiple_choice_serving.choices_body`): "probabilities" [N, 4] and
    "answer" [N] (the chosen option's index). Option: max_qa_length (pieces kept from the end
    of question + option; default min(128, (max_seq_length - 3) // 2)).

    Example:
        >>> model = AlbertMultipleChoice.from_pretrained("pretrained/")  # doctest: +SKIP
        >>> model.compile(learning_rate=2e-5, num_train_steps=12000)   # doctest: +SKIP
        >>> model.predict([("Tom has a cat.", "Tom has a _ .", ["cat", "dog", "car", "hat"])],
        ...               verbose=0)["answer"]                          # doctest: +SKIP
        array([0])
    """

    default_name = "albert_multiple_choice"
    default_max_seq_length = 512
    text_form = TextForm(
        ("article", "question", "options"),
        required=3,
        vectors=("options",),
        vector_width=len(LETTERS),
        expected="(article, question, options) rows with 4 options each, or a dict "
        "{'article': [batch], 'question': [batch], 'options': [batch, 4]}",
    )
    text_options = {"max_qa_length": None}

    def __init__(self, backbone, num_choices=4, dropout=0.1, name=None, **kwargs):
        if not isinstance(num_choices, int) or isinstance(num_choices, bool) or num_choices < 1:
            raise ValueError(f"num_choices must be a positive integer, got {num_choices!r}")
        # The base class' `num_classes` is the dense layer's width: one score per choice.
        kwargs.pop("num_classes", None)
        kwargs.pop("labels", None)
        super().__init__(backbone, num_classes=1, dropout=dropout, labels=None, name=name, **kwargs)
        self.num_choices = num_choices

    def head_input(self, backbone_outputs):
        return backbone_outputs["pooled_output"]

    def call(self, inputs, training=False):
        self.check_ids(inputs)
        if not isinstance(inputs, dict):
            raise TypeError(
                f"{type(self).__name__} takes a dict of {INPUT_KEYS}, got {type(inputs).__name__}"
            )
        flat = {}
        for key in INPUT_KEYS:
            if key not in inputs:
                continue
            ids = tf.convert_to_tensor(inputs[key])
            if not ids.dtype.is_integer:  # a distribute strategy's symbolic build feeds floats
                ids = tf.cast(ids, tf.int32)
            if ids.shape.rank != 3:
                raise ValueError(f"{key} must be [batch, num_choices, seq], got {ids.shape}")
            if ids.shape[1] is not None and ids.shape[1] != self.num_choices:
                raise ValueError(f"{key} has {ids.shape[1]} choices, the model {self.num_choices}")
            flat[key] = tf.reshape(ids, [-1, tf.shape(ids)[2]])
        pooled = self.head_input(self.backbone(flat, training=training))
        scores = self.logits(self.dropout(pooled, training=training))
        return tf.reshape(scores, [-1, self.num_choices])

    @classmethod
    def from_pretrained(
        cls,
        directory,
        num_choices=4,
        dropout=0.1,
        hidden_dropout_prob=None,
        attention_probs_dropout_prob=None,
        dtype=None,
        preprocessor="auto",
        max_seq_length=None,
        **kwargs,
    ):
        """A model on the backbone saved in `directory` (by `albert_tf.models.model_dir.save`), with
        optional backbone dropout overrides (Table 14's "ALBERT DR": 0.1 for RACE) and the
        directory's preprocessor (`AlbertHeadModel.pretrained_preprocessor`; default
        max_seq_length 512)."""
        kwargs.pop("num_classes", None)
        kwargs.pop("labels", None)
        directory = model_dir.local_directory(directory)  # a name: fetched and cached
        backbone = load_backbone(
            directory, hidden_dropout_prob, attention_probs_dropout_prob, dtype
        )
        logging.info("%s on %s (%d choices)", cls.__name__, directory, num_choices)
        kwargs["preprocessor"] = cls.pretrained_preprocessor(
            directory, preprocessor, max_seq_length, backbone.config
        )
        return cls(backbone, num_choices=num_choices, dropout=dropout, **kwargs)

    # ------------------------------------------------------------------ raw text
    def _text_settings(self, options):
        """(max_seq_length, max_qa_length) of the raw-text path."""
        if self.num_choices != len(LETTERS):
            raise ValueError(
                f"raw text takes {len(LETTERS)} options per question (as the export); this "
                f"model has num_choices={self.num_choices}"
            )
        max_seq_length = self.preprocessor.max_seq_length
        max_qa_length = options["max_qa_length"]
        if max_qa_length is None:
            max_qa_length = min(128, (max_seq_length - 3) // 2)
        return max_seq_length, max_qa_length

    def text_labels(self, y, columns, options=None):
        return np.asarray(python_label_ids(list(y), list(LETTERS), type(self).__name__))

    def encode_text(self, options):
        from albert_tf.export.multiple_choice_serving import BUCKET, pack_choices

        max_seq_length, max_qa_length = self._text_settings(options)
        pre = self.preprocessor
        special = pre.special_ids
        # Fixed padding (TPU): one bucket of max_seq_length pads every batch to it.
        bucket = BUCKET if pre.dynamic_padding else max_seq_length

        def encode(columns, y):
            ids = pack_choices(
                pre.tokenizer,
                columns["article"],
                columns["question"],
                columns["options"],
                max_seq_length,
                max_qa_length,
                special["cls_id"],
                special["sep_id"],
                special["pad_id"],
                pre.lower_case,
                bucket=bucket,
            )
            return ids, None if y is None else label_ids(y, list(LETTERS))

        return encode

    def text_predict_function(self, options):
        from albert_tf.export.multiple_choice_serving import choices_body

        max_seq_length, max_qa_length = self._text_settings(options)
        pre = self.preprocessor
        body = choices_body(
            self, pre.tokenizer, pre.special_ids, pre.lower_case, max_seq_length, max_qa_length
        )
        return lambda columns: body(columns["article"], columns["question"], columns["options"])

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def get_config(self):
        config = super().get_config()
        del config["num_classes"], config["labels"]
        config["num_choices"] = self.num_choices
        return config
