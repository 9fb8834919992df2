"""SQuAD heads: `AlbertQuestionAnswerer` (v1.1 span logits, the original's `cls/squad`) and
`AlbertSquadV2Model` (v2.0, the original's XLNet-style head: a start/end beam and an
answerability logit). Both are `AlbertHeadModel`s: `compile()` has the fine-tuning defaults.

Labels for `fit` / `evaluate` are a dict: {"start_positions", "end_positions"} (int [B]) and,
for v2, "is_impossible" (0/1 [B]). They are matched to the outputs "start_logits",
"end_logits" and "cls_logits" (`LABEL_OUTPUTS`); the default loss is the original's:
0.5 * (start CE + end CE) (+ 0.5 * sigmoid CE(is_impossible) for v2).

>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models.backbone import AlbertModel
>>> model = AlbertQuestionAnswerer(
...     AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)))
>>> inputs = {"input_word_ids": np.array([[2, 7, 3, 9, 8, 3]], "int32"),
...           "input_mask": np.ones([1, 6], "int32"), "input_type_ids": np.zeros([1, 6], "int32")}
>>> {k: tuple(v.shape) for k, v in model(inputs).items()}
{'start_logits': (1, 6), 'end_logits': (1, 6)}

Raw text (with a preprocessor, see `_SquadModel`): `predict` answers (question, context) pairs
as the SavedModel export does; `fit` / `evaluate` take them with the answers' character
offsets in the contexts.
"""

import warnings

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from albert_tf.models import model_dir, text_inputs
from albert_tf.models.backbone import INPUT_KEYS
from albert_tf.models.head_model import AlbertHeadModel, load_backbone

# Label key -> the output the loss and metrics compare it with.
LABEL_OUTPUTS = {
    "start_positions": "start_logits",
    "end_positions": "end_logits",
    "is_impossible": "cls_logits",
}
# The original's masking: logits * (1 - p_mask) - MASK * p_mask.
MASK = 1e30

# The heads read the sequence output: the backbone's pooler gets no gradient, by design.
warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables .*pooler")


def _int(value):
    """An integer tensor (a distribute strategy's symbolic build may feed float copies)."""
    value = tf.convert_to_tensor(value)
    return value if value.dtype.is_integer else tf.cast(value, tf.int32)


def _masked(logits, p_mask):
    """The original's masking of positions that cannot be an answer (p_mask 1), float32."""
    p_mask = tf.cast(p_mask, tf.float32)
    return logits * (1.0 - p_mask) - MASK * p_mask


class _SquadModel(AlbertHeadModel):
    """What both SQuAD models share: sequence-output heads, dict labels renamed to the output
    keys for the compiled loss and metrics, the original's 0.5 loss weights, raw text.

    Raw text (with a preprocessor): (question, context) pairs as a list of rows, an array
    [N, 2] or a dict {"question", "context"} (`predict` also takes a batched tf.data.Dataset
    of these). `predict` returns the export's serving_default outputs
    (`albert_tf.export.squad_serving.answer_body`): "answer" [N], "score", "start", "end"
    (character offsets, end exclusive, -1 without an answer) and, for v2,
    "has_answer_probability". `fit` / `evaluate` labels: {"answer_start": character offsets,
    "answer_text": texts} (or "answer_end" instead of "answer_text"; -1 / "" for a question
    without an answer), or a list of SQuAD answers {"text", "answer_start"}; the windows and
    their start / end positions are built as the SQuAD task builds them
    (`albert_tf.data.squad_features.build_features`). Options (keyword arguments of fit / evaluate /
    predict): doc_stride (default min(128, max_seq_length // 3)), max_query_length (default
    min(64, max_seq_length // 2)), and for predict n_best_size (20), max_answer_length (30) and
    null_threshold (v2, 0.0), as `export_question_answerer`'s.
    """

    num_classes_fixed = 2  # the width of `logits`
    position_biases = ("logits",)  # dense layers whose bias shifts all positions alike
    window_inputs = ()  # arrays of the raw-text windows the model reads besides the ids
    default_max_seq_length = 384
    text_form = text_inputs.TextForm(
        ("question", "context"),
        required=2,
        expected="(question, context) pairs of shape [batch, 2] (or a dict "
        "{'question', 'context'})",
    )
    text_options = {
        "doc_stride": None,
        "max_query_length": None,
        "n_best_size": 20,
        "max_answer_length": 30,
        "null_threshold": 0.0,
    }

    def __init__(self, backbone, dropout, name=None, num_classes=None, labels=None, **kwargs):
        if num_classes not in (None, self.num_classes_fixed) or labels is not None:
            raise ValueError(
                f"{type(self).__name__} has a fixed head: pass neither num_classes "
                f"nor labels (got {num_classes!r}, {labels!r})"
            )
        super().__init__(
            backbone, num_classes=self.num_classes_fixed, dropout=dropout, name=name, **kwargs
        )

    def build(self, input_shape=None):
        if self.built:
            return
        super().build(input_shape)
        # These biases add the same value to every position's logit, so no softmax over the
        # positions (loss or prediction) depends on them and their gradient is zero up to
        # rounding (which Adam would turn into steps): kept for checkpoints, not trained.
        for name in self.position_biases:
            getattr(self, name).bias.trainable = False

    def head_input(self, backbone_outputs):
        return backbone_outputs["sequence_output"]

    def sequence_output(self, inputs, training):
        self.check_ids(inputs)
        if not isinstance(inputs, dict):
            raise TypeError(
                f"{type(self).__name__} takes a dict of inputs, got {type(inputs).__name__}"
            )
        ids = {k: _int(inputs[k]) for k in INPUT_KEYS if k in inputs}
        return self.head_input(self.backbone(ids, training=training))

    @classmethod
    def from_pretrained(
        cls,
        directory,
        hidden_dropout_prob=None,
        attention_probs_dropout_prob=None,
        dtype=None,
        preprocessor="auto",
        max_seq_length=None,
        **kwargs,
    ):
        """A model on the backbone saved in `directory` (by `albert_tf.models.model_dir.save`)
        with the directory's preprocessor (`AlbertHeadModel.pretrained_preprocessor`; default
        max_seq_length 384); `kwargs` go to the constructor."""
        directory = model_dir.local_directory(directory)  # a name: fetched and cached
        backbone = load_backbone(
            directory, hidden_dropout_prob, attention_probs_dropout_prob, dtype
        )
        logging.info("%s on %s", cls.__name__, directory)
        kwargs["preprocessor"] = cls.pretrained_preprocessor(
            directory, preprocessor, max_seq_length, backbone.config
        )
        return cls(backbone, **kwargs)

    # ------------------------------------------------------------------ raw text
    def feature_settings(self, options):
        """The `FeatureSettings` of the raw-text path: the preprocessor's length and casing."""
        from albert_tf.data.squad_features import FeatureSettings

        pre = self.preprocessor
        if not pre.albert_rules:
            raise ValueError(
                "The preprocessor has albert_rules=False (keras-hub's tokenizer): SQuAD's "
                "answer alignment follows ALBERT's text rules and does not support it yet"
            )
        max_seq_length = pre.max_seq_length
        doc_stride, query = options["doc_stride"], options["max_query_length"]
        return FeatureSettings(
            max_seq_length=max_seq_length,
            doc_stride=min(128, max_seq_length // 3) if doc_stride is None else doc_stride,
            max_query_length=min(64, max_seq_length // 2) if query is None else query,
            lower_case=pre.lower_case,
            tex_quotes=pre.tex_quotes,
        )

    def text_dataset(self, x, y, sample_weight, batch_size, shuffle, options, what):
        """(ids (+ p_mask for v2), {start_positions, end_positions (, is_impossible)})
        batches of the windows of raw (question, context) pairs with the answers `y`, built
        in Python as the SQuAD task builds them (so not from a tf.data.Dataset)."""
        from albert_tf.data.squad_examples import SquadExample
        from albert_tf.data.squad_features import build_features
        from albert_tf.text.tokenizer import SentencePieceTokenizer

        if isinstance(x, tf.data.Dataset):
            raise ValueError(
                f"{what}: SQuAD windows and answer positions are built in Python: pass "
                "(question, context) pairs as a list, an array or a dict with "
                "y={'answer_start': [...], 'answer_text': [...]}, or a dataset of ids"
            )
        if y is None:
            raise ValueError(f"{what}: raw text needs the answers y (see {type(self).__name__})")
        columns = text_inputs.read_columns(x, self.text_form, what)
        contexts = [str(c) for c in columns["context"]]
        answers = answer_spans(y, contexts, what)
        examples = [
            SquadExample(str(i), str(q), c, text, start, is_impossible=start < 0)
            for i, (q, c, (start, text)) in enumerate(zip(columns["question"], contexts, answers))
        ]
        pre = self.preprocessor
        tokenizer = SentencePieceTokenizer(
            pre.model_proto, lower_case=pre.lower_case, tex_quotes=pre.tex_quotes
        )
        features = build_features(examples, tokenizer, self.feature_settings(options))
        inputs = features.model_inputs()
        inputs.update({k: getattr(features, k) for k in self.window_inputs})
        outputs = self.default_loss()
        labels = {k: getattr(features, k) for k, out in LABEL_OUTPUTS.items() if out in outputs}
        parts = [inputs, labels]
        if sample_weight is not None:
            parts.append(np.asarray(sample_weight, np.float32)[features.example_index])
        return text_inputs.batched(parts, batch_size, shuffle).prefetch(tf.data.AUTOTUNE)

    def text_predict_function(self, options):
        from albert_tf.export.squad_serving import answer_body

        body = answer_body(
            self,
            self.preprocessor.tokenizer,
            self.feature_settings(options),
            options["n_best_size"],
            options["max_answer_length"],
            float(options["null_threshold"]),
        )
        return lambda columns: body(columns["question"], columns["context"])

    # ------------------------------------------------------------------ loss and metrics
    def default_loss_weights(self):
        return {key: 0.5 for key in self.default_loss()}

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`AlbertHeadModel.compile`; loss="auto" also sets the original's 0.5 loss weights."""
        if loss == "auto" and "loss_weights" not in kwargs:
            kwargs["loss_weights"] = self.default_loss_weights()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def _align(self, x, y, y_pred, training):
        """(labels keyed by output names, predictions) for the compiled loss and metrics."""
        if isinstance(y, dict):
            y = {LABEL_OUTPUTS.get(k, k): v for k, v in y.items()}
        return y, y_pred

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        y, y_pred = self._align(x, y, y_pred, training)
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        y, y_pred = self._align(x, y, y_pred, False)
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def get_config(self):
        config = super().get_config()
        del config["num_classes"], config["labels"]
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertQuestionAnswerer(_SquadModel):
    """SQuAD v1.1: a dense layer [H -> 2] over the sequence output gives start and end logits.

    Called on {"input_word_ids", "input_mask", "input_type_ids"} (int [B, S]) it returns
    {"start_logits", "end_logits"}: float32 [B, S] (also under mixed_bfloat16), unmasked as in
    the original and Hugging Face's AlbertForQuestionAnswering.

    Args:
        backbone: an `AlbertModel`.
        dropout: dropout on the sequence output (0: the original and HF have none).
        name: model name.

    Weights: the backbone's, and `logits` (kernel [H, 2], bias [2]): the original's
    `cls/squad/output_weights` (transposed) / `output_bias`, HF's `qa_outputs`. The bias adds
    one value to every position, so no softmax over positions depends on it: it is converted
    and saved but not trained (non-trainable).

    `compile()` defaults: the original AdamW with warmup and linear decay (see
    `albert_tf.models.head_model`); loss 0.5 * (start CE + end CE) from labels
    {"start_positions", "end_positions"} (int [B]); start and end accuracy.

    Example:
        >>> model = AlbertQuestionAnswerer.from_pretrained("pretrained/")  # doctest: +SKIP
        >>> model.compile(learning_rate=5e-5, num_train_steps=8000)       # doctest: +SKIP
        >>> model.fit(train_ds, epochs=1, steps_per_epoch=8000)            # doctest: +SKIP
    """

    default_name = "albert_question_answerer"

    def __init__(self, backbone, dropout=0.0, name=None, **kwargs):
        super().__init__(backbone, dropout=dropout, name=name, **kwargs)

    def call(self, inputs, training=False):
        features = self.sequence_output(inputs, training)
        logits = self.logits(self.dropout(features, training=training))
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def default_loss(self):
        return {
            key: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            for key in ("start_logits", "end_logits")
        }

    def default_metrics(self):
        return {
            "start_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "end_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSquadV2Model(_SquadModel):
    """SQuAD v2.0 with the original's answerability head (XLNet style).

    Inputs: {"input_word_ids", "input_mask", "input_type_ids", "p_mask"} (int [B, S]; p_mask 1
    marks positions that cannot be an answer: question, [SEP], padding), and optionally
    "start_positions" (int [B]).

    - Start logits: dense H -> 1 over the sequence output, masked (-1e30 where p_mask = 1).
    - End logits, given a start state s: dense_0([h_i ; s]) (2H -> H, tanh) -> LayerNorm ->
      dense_1 (H -> 1), masked.
    - Answerability: [sum_i p_start(i) h_i ; h_CLS] -> dense_0 (2H -> H, tanh) -> dropout ->
      dense_1 (H -> 1, no bias) = "cls_logits" [B] (the start-probability-weighted state, in
      training too, as the original).

    With "start_positions" in the inputs (what `fit` and `evaluate` do: they take them from
    the labels) the end logits are conditioned on the gold start and the model returns
    {"start_logits", "end_logits" (masked, float32 [B, S]), "cls_logits" [B]}. Without it
    (`predict`, serving) it runs the original's beam: the top `start_n_top` starts, for each
    the top `end_n_top` ends, and returns {"start_top_log_probs" [B, K1], "start_top_index"
    int32 [B, K1], "end_top_log_probs" [B, K1 * K2], "end_top_index" int32 [B, K1 * K2]
    (start-major: entry k1 * K2 + k2), "cls_logits" [B]}, all floats float32.

    Args:
        backbone: an `AlbertModel`.
        start_n_top: K1, starts kept by the beam (the original's flag, 5).
        end_n_top: K2, ends kept per start (5).
        dropout: dropout in the answerability head (the original's dropout_prob, 0.1).
        name: model name.

    Weights (original TF1 scope in brackets): `logits` [start_logits/dense], `end_dense_0`
    [end_logits/dense_0], `end_layer_norm` [end_logits/LayerNorm], `end_dense_1`
    [end_logits/dense_1], `answer_dense_0` [answer_class/dense_0], `answer_dense_1`
    [answer_class/dense_1]. The biases of `logits` and `end_dense_1` shift every position
    alike (no softmax depends on them): converted and saved, not trained.

    `compile()` defaults: the original AdamW (see `albert_tf.models.head_model`); loss
    0.5 * (start CE + end CE) + 0.5 * sigmoid CE(is_impossible) from labels
    {"start_positions", "end_positions", "is_impossible"}; start, end (given the gold start)
    and answerability accuracy.

    Example:
        >>> import numpy as np
        >>> from albert_tf.config import AlbertConfig
        >>> from albert_tf.models.backbone import AlbertModel
        >>> model = AlbertSquadV2Model(
        ...     AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)),
        ...     start_n_top=2, end_n_top=3)
        >>> inputs = {"input_word_ids": np.array([[2, 7, 3, 9, 8, 3]], "int32"),
        ...           "input_mask": np.ones([1, 6], "int32"),
        ...           "input_type_ids": np.array([[0, 0, 0, 1, 1, 1]], "int32"),
        ...           "p_mask": np.array([[0, 1, 1, 0, 0, 1]], "int32")}
        >>> outputs = model(inputs)
        >>> outputs["start_top_index"].shape, outputs["end_top_index"].shape
        (TensorShape([1, 2]), TensorShape([1, 6]))
        >>> outputs["cls_logits"].shape, outputs["end_top_log_probs"].dtype.name
        (TensorShape([1]), 'float32')
    """

    default_name = "albert_squad_v2"
    window_inputs = ("p_mask",)
    num_classes_fixed = 1  # `logits` is the start-logit layer
    position_biases = ("logits", "end_dense_1")

    def __init__(self, backbone, start_n_top=5, end_n_top=5, dropout=0.1, name=None, **kwargs):
        for key, value in (("start_n_top", start_n_top), ("end_n_top", end_n_top)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        super().__init__(backbone, dropout=dropout, name=name, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top

    def build(self, input_shape=None):
        if self.built:
            return
        config = self.backbone.config
        hidden = config.hidden_size

        def dense(units, name, dtype=self.dtype_policy, **options):
            layer = keras.layers.Dense(
                units,
                dtype=dtype,
                name=name,
                **options,
                kernel_initializer=keras.initializers.TruncatedNormal(
                    stddev=config.initializer_range
                ),
            )
            layer.build((None, 2 * hidden if name.endswith("_0") else hidden))
            return layer

        # end_dense_0 is applied as two halves of its [2H, H] kernel (see `end_logits`).
        self.end_dense_0 = dense(hidden, "end_dense_0")
        self.end_layer_norm = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_eps, dtype="float32", name="end_layer_norm"
        )
        self.end_layer_norm.build((None, hidden))
        self.end_dense_1 = dense(1, "end_dense_1", dtype="float32")
        self.answer_dense_0 = dense(hidden, "answer_dense_0", activation="tanh")
        self.answer_dense_1 = dense(1, "answer_dense_1", dtype="float32", use_bias=False)
        super().build(input_shape)

    # ------------------------------------------------------------------ forward
    def end_logits(self, sequence, start_states):
        """Unmasked float32 end logits [B, K, S] for start states [B, K, H] over [B, S, H].

        dense_0([h_i ; s]) = h_i W_top + s W_bottom + b: the [B, K, S, 2H] concatenation of the
        original is never built.
        """
        hidden = self.backbone.config.hidden_size
        dtype = sequence.dtype
        kernel = ops.cast(self.end_dense_0.kernel, dtype)
        from_positions = ops.matmul(sequence, kernel[:hidden])  # [B, S, H]
        from_starts = ops.matmul(ops.cast(start_states, dtype), kernel[hidden:])  # [B, K, H]
        states = ops.tanh(
            from_positions[:, None]
            + from_starts[:, :, None]
            + ops.cast(self.end_dense_0.bias, dtype)
        )
        return ops.squeeze(self.end_dense_1(self.end_layer_norm(states)), -1)

    def answer_logits(self, sequence, start_logits, training=False):
        """cls_logits [B] from the start-probability-weighted state and the [CLS] state."""
        sequence = ops.cast(sequence, "float32")
        start_probs = ops.softmax(start_logits, axis=-1)
        start_state = ops.einsum("bs,bsh->bh", start_probs, sequence)
        features = self.answer_dense_0(ops.concatenate([start_state, sequence[:, 0]], -1))
        features = self.dropout(features, training=training)
        return ops.squeeze(self.answer_dense_1(features), -1)

    def call(self, inputs, training=False):
        sequence = self.sequence_output(inputs, training)
        if "p_mask" not in inputs:
            raise ValueError(
                f"{type(self).__name__} needs 'p_mask' in its inputs (int [B, S], "
                f"1 where a position cannot be an answer)"
            )
        p_mask = _int(inputs["p_mask"])
        start_logits = _masked(ops.squeeze(self.logits(sequence), -1), p_mask)
        outputs = {"cls_logits": self.answer_logits(sequence, start_logits, training)}
        if "start_positions" in inputs:
            # One-hot as the original: an out-of-range start gives a zero state.
            starts = tf.one_hot(
                tf.reshape(_int(inputs["start_positions"]), [-1]),
                tf.shape(sequence)[1],
                dtype=sequence.dtype,
            )
            start_states = ops.einsum("bs,bsh->bh", starts, sequence)[:, None]
            end_logits = self.end_logits(sequence, start_states)[:, 0]
            outputs.update(start_logits=start_logits, end_logits=_masked(end_logits, p_mask))
            return outputs
        if training:
            raise ValueError(
                f"{type(self).__name__} trains on the gold start: pass "
                f"'start_positions' in the inputs (fit and evaluate take them "
                f"from the labels)"
            )
        return {**outputs, **self.beam(sequence, start_logits, p_mask)}

    def beam(self, sequence, start_logits, p_mask):
        """The original's inference: top start_n_top starts x top end_n_top ends each."""
        length = sequence.shape[1]
        if length is not None and length < max(self.start_n_top, self.end_n_top):
            raise ValueError(
                f"sequence length {length} is shorter than start_n_top="
                f"{self.start_n_top} / end_n_top={self.end_n_top}"
            )
        start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
        start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, self.start_n_top)
        start_states = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, K1, H]
        end_logits = _masked(self.end_logits(sequence, start_states), p_mask[:, None])
        end_log_probs = tf.nn.log_softmax(end_logits, axis=-1)  # [B, K1, S]
        end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, self.end_n_top)
        beam = self.start_n_top * self.end_n_top
        return {
            "start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_top_log_probs": tf.reshape(end_top_log_probs, [-1, beam]),
            "end_top_index": tf.reshape(end_top_index, [-1, beam]),
        }

    # ------------------------------------------------------------------ training
    def _with_start_positions(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if (
            isinstance(x, dict)
            and isinstance(y, dict)
            and "start_positions" in y
            and ("start_positions" not in x)
        ):
            x = {**x, "start_positions": y["start_positions"]}
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def train_step(self, data):
        return super().train_step(self._with_start_positions(data))

    def test_step(self, data):
        return super().test_step(self._with_start_positions(data))

    def _align(self, x, y, y_pred, training):
        # Written against Keras 3.15.1 (`albert_tf.keras_internals`, whose test fails if Keras
        # changes this): under a distribute strategy, Keras builds the compiled loss and
        # metrics on outputs of the model called without the labels (the beam's outputs). Only
        # then do they lack "end_logits" (`train_step` / `test_step` pass the gold start), and
        # the gold-start outputs are traced here, symbolically, for that build.
        if isinstance(y_pred, dict) and "end_logits" not in y_pred:
            x, _, _ = keras.utils.unpack_x_y_sample_weight(self._with_start_positions((x, y)))
            y_pred = self(x, training=training)
        return super()._align(x, y, y_pred, training)

    def default_loss(self):
        return {
            "start_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "end_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "cls_logits": keras.losses.BinaryCrossentropy(from_logits=True),
        }

    def default_metrics(self):
        return {
            "start_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "end_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "cls_logits": [keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")],
        }

    def get_config(self):
        return {
            **super().get_config(),
            "start_n_top": self.start_n_top,
            "end_n_top": self.end_n_top,
        }


def answer_spans(y, contexts, what=""):
    """[(answer_start, answer_text)] of raw-text SQuAD labels `y`: {"answer_start",
    "answer_text" (or "answer_end")} columns or a list of {"text", "answer_start"} dicts; -1 /
    "" for no answer. Each answer must be the context's text at its offset.

    >>> answer_spans({"answer_start": [4, -1], "answer_end": [9, -1]}, ["the Tower", "x"])
    [(4, 'Tower'), (-1, '')]
    """
    prefix = f"{what}: " if what else ""
    if isinstance(y, dict):
        if "answer_start" not in y or ("answer_text" in y) == ("answer_end" in y):
            raise ValueError(
                f"{prefix}labels need 'answer_start' and one of 'answer_text' / 'answer_end' "
                f"(character offsets in the contexts), got keys {sorted(y)}"
            )
        starts = [int(s) for s in y["answer_start"]]
        if "answer_text" in y:
            texts = [str(t) for t in y["answer_text"]]
        else:
            ends = [int(e) for e in y["answer_end"]]
            texts = [c[s:e] if s >= 0 else "" for c, s, e in zip(contexts, starts, ends)]
    elif isinstance(y, (list, tuple)) and all(isinstance(a, dict) for a in y):
        starts = [int(a.get("answer_start", -1)) for a in y]
        texts = [str(a.get("text", "")) for a in y]
    else:
        raise ValueError(
            f"{prefix}labels must be {{'answer_start': [...], 'answer_text': [...]}} or a list "
            f"of {{'text', 'answer_start'}} dicts, got {type(y).__name__}"
        )
    if len(starts) != len(contexts) or len(texts) != len(contexts):
        raise ValueError(f"{prefix}{len(contexts)} questions but {len(starts)} answers")
    spans = []
    for i, (context, start, text) in enumerate(zip(contexts, starts, texts)):
        if start < 0 or not text:
            spans.append((-1, ""))
            continue
        if context[start : start + len(text)] != text:
            raise ValueError(
                f"{prefix}answer {i} {text!r} is not at character {start} of its context "
                f"(which has {context[start : start + len(text)]!r} there)"
            )
        spans.append((start, text))
    return spans
