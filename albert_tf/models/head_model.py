"""`AlbertHeadModel`: what every fine-tuning model shares (backbone, dropout, dense logits,
fine-tuning optimizer defaults, `from_pretrained`, Keras serialization).

A subclass chooses what the head reads (`head_input`: the pooled [CLS] vector for
`AlbertClassifier`, the sequence output for `AlbertTokenClassifier`) and its default loss and
metrics (`default_loss`, `default_metrics`).

`compile()` with "auto" arguments uses bias-corrected AdamW (`albert_tf.optim.AdamW`, LayerNorm
and biases excluded from decay), the peak lr of the model's size (1e-3 below base, 2e-5 for
base and large, 1e-5 above: `albert_tf.optim.learning_rates`) warmed up linearly over 10% of
the steps and decayed linearly to 0, global-norm clipping at 1.0; `optimizer="adamw_original"`
(the original's `AdamWeightDecay`, no bias correction) and `optimizer="lamb"` take the same
schedule. Without `num_train_steps`, the first `fit` sets it to epochs x steps per epoch.

Raw text: a model with an attached `AlbertPreprocessor` (`preprocessor=`, or `from_pretrained`,
which attaches the directory's) takes raw text in `fit`, `evaluate` and `predict` as well as the
ids dict; each subclass states the accepted forms (`text_form`, see
`albert_tf.models.text_inputs`) and `predict` on text returns what its SavedModel export's
serving_default returns. Without a preprocessor, raw text is an error naming it.

Large and xlarge v2 models are known to diverge or stay at chance when fine-tuned with higher
rates or small batches (google-research/albert #197, #207; keras-hub #831): keep lr <= 2e-5
(1e-5 or 5e-6 for xlarge), keep warmup and clipping.
"""

import dataclasses
import math
import numbers
import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import keras_internals
from albert_tf.layers.encoder import stacked_axes
from albert_tf.models import model_dir, text_inputs
from albert_tf.models.backbone import INPUT_KEYS, AlbertModel
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.optim.accumulation import accumulate, split_micro_batches
from albert_tf.optim.learning_rates import default_learning_rate
from albert_tf.optim.optimizers import OPTIMIZERS, create_optimizer
from albert_tf.optim.schedules import WarmupPolynomialDecay


def warmup_step_count(num_train_steps, warmup_steps=None, warmup_ratio=0.1):
    """The linear warmup's length: `warmup_steps` when given, else `warmup_ratio` of the steps.

    >>> warmup_step_count(1000), warmup_step_count(1000, warmup_steps=7)
    (100, 7)
    """
    if warmup_steps is not None:
        return int(warmup_steps)
    return int(round(warmup_ratio * num_train_steps))


def default_optimizer(
    learning_rate=2e-5,
    num_train_steps=None,
    warmup_steps=None,
    warmup_ratio=0.1,
    weight_decay_rate=0.01,
    global_clipnorm=1.0,
    name="adamw",
    stacked_axes=None,
):
    """The fine-tuning optimizer `name` ("adamw": bias-corrected AdamW; "adamw_original";
    "lamb", with `stacked_axes` from `albert_tf.layers.encoder.stacked_axes`) with linear warmup
    and decay (a constant rate without `num_train_steps`) and global-norm clipping.

    >>> optimizer = default_optimizer(1e-4, num_train_steps=100)
    >>> type(optimizer).__name__, float(optimizer.learning_rate)
    ('AdamW', 0.0)
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    if learning_rate <= 0:
        raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
    if num_train_steps is not None and num_train_steps < 1:
        raise ValueError(f"num_train_steps must be >= 1, got {num_train_steps}")
    if not 0.0 <= warmup_ratio < 1.0:
        raise ValueError(f"warmup_ratio must be in [0, 1), got {warmup_ratio}")
    schedule = learning_rate
    if num_train_steps:
        warmup = warmup_step_count(num_train_steps, warmup_steps, warmup_ratio)
        schedule = WarmupPolynomialDecay(
            learning_rate, decay_steps=int(num_train_steps), warmup_steps=warmup, power=1.0
        )
    return create_optimizer(
        name,
        schedule,
        weight_decay_rate=weight_decay_rate,
        epsilon=1e-6,
        stacked_axes=stacked_axes if name == "lamb" else None,
        global_clipnorm=global_clipnorm or None,
    )


# The highest peak learning rate at which each optimizer learned on every task of the
# fine-tuning study (docs/finetune.md, "Choosing the optimizer"); above it a warning says so.
MAX_SAFE_LEARNING_RATES = {"adamw": 1e-3, "adamw_original": 1e-4, "lamb": 3e-3}


def warn_if_unsafe_learning_rate(name, learning_rate, flag="learning_rate"):
    """Logs a warning (and returns its text) when `learning_rate` is above
    `MAX_SAFE_LEARNING_RATES[name]`; returns None otherwise.

    >>> warn_if_unsafe_learning_rate("adamw", 2e-5) is None
    True
    >>> print(warn_if_unsafe_learning_rate("adamw_original", 1e-3))  # doctest: +ELLIPSIS
    learning_rate=0.001 is above 0.0001, the highest rate at which adamw_original fine-tuned ...
    """
    highest = MAX_SAFE_LEARNING_RATES[name]
    if learning_rate <= highest:
        return None
    message = (
        f"{flag}={learning_rate:g} is above {highest:g}, the highest rate at which {name} "
        "fine-tuned every task of the study in docs/finetune.md without collapsing to one "
        "answer: lower it"
        + (" or use optimizer adamw (bias-corrected)" if name == "adamw_original" else "")
    )
    logging.warning("%s", message)
    return message


def load_backbone(
    directory, hidden_dropout_prob=None, attention_probs_dropout_prob=None, dtype=None
):
    """The backbone saved in `directory`, optionally with other dropout rates (Table 14's
    "ALBERT DR" column: 0.1 for QQP, RTE, WNLI, RACE)."""
    backbone = model_dir.load_backbone(directory, dtype=dtype)
    overrides = {
        k: v
        for k, v in (
            ("hidden_dropout_prob", hidden_dropout_prob),
            ("attention_probs_dropout_prob", attention_probs_dropout_prob),
        )
        if v is not None
    }
    if not overrides:
        return backbone
    replaced = AlbertModel(
        dataclasses.replace(backbone.config, **overrides),
        dtype=backbone.dtype_policy,
        name=backbone.name,
    )
    replaced.set_weights(backbone.get_weights())
    return replaced


def load_fine_tuned(path, dtype=None):
    """The fine-tuned head model saved at `path` (a .keras file, local or gs://), uncompiled,
    computing in `dtype` ("float32" or "mixed_bfloat16"; default: the global Keras dtype policy,
    float32 unless set).

    model.keras records the precision it was trained in (a run with `precision="auto"` on a
    CPU with bfloat16 dot products, or on TPU, saves a mixed_bfloat16 model); evaluation and
    export compute in the precision asked for, so that a float32 score or export is float32.
    The change is logged.

    >>> model = load_fine_tuned("out/mrpc/model.keras")  # doctest: +SKIP
    >>> model.dtype_policy.name  # doctest: +SKIP
    'float32'
    """
    dtype = dtype or keras.config.dtype_policy().name
    local = tempfile.mkdtemp(prefix="albert_tf_head_")
    try:
        if not os.path.exists(path):  # Keras reads local files: copy gs:// ones first
            tf.io.gfile.copy(path, os.path.join(local, model_dir.HEAD_MODEL_FILE))
            path = os.path.join(local, model_dir.HEAD_MODEL_FILE)
        model = keras.saving.load_model(path, compile=False)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    trained = model.dtype_policy.name
    if isinstance(model, AlbertHeadModel) and trained != dtype:
        model.set_compute_precision(dtype)
        logging.info(
            "%s was trained in %s; it computes in %s here (pass dtype= to choose)",
            path,
            trained,
            dtype,
        )
    return model


class AlbertHeadModel(keras.Model):
    """Base class: backbone -> `head_input` -> dropout -> dense float32 logits.

    Args:
        backbone: an `AlbertModel`.
        num_classes: output width. Defaults to len(labels) or 2.
        dropout: dropout before the dense layer (the original hard-codes 0.1).
        labels: optional label names in id order; kept in the config and used by exports.
        preprocessor: optional `AlbertPreprocessor`: with it, `fit`, `evaluate` and `predict`
            also take raw text (the forms of the subclass' `text_form`); saved with the model.
        name: model name.
    """

    default_name = "albert_head_model"
    #: The max_seq_length of the preprocessor `from_pretrained` attaches (capped at the model's
    #: max_position_embeddings).
    default_max_seq_length = 128
    #: The subclass' raw-text examples (`text_inputs.TextForm`); None: ids only.
    text_form = None
    #: Keyword arguments of fit / evaluate / predict on raw text, with their defaults.
    text_options = {}

    def __init__(
        self,
        backbone,
        num_classes=None,
        dropout=0.1,
        labels=None,
        name=None,
        preprocessor=None,
        **kwargs,
    ):
        if not isinstance(backbone, AlbertModel):
            raise TypeError(
                f"{type(self).__name__} needs an AlbertModel backbone, got "
                f"{type(backbone).__name__}"
            )
        labels = None if labels is None else [str(label) for label in labels]
        if num_classes is None:
            num_classes = len(labels) if labels else 2
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
        if labels is not None and len(labels) != num_classes:
            raise ValueError(f"labels has {len(labels)} names but num_classes is {num_classes}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if preprocessor is not None and not isinstance(preprocessor, AlbertPreprocessor):
            raise TypeError(
                f"preprocessor must be an AlbertPreprocessor, got {type(preprocessor).__name__}"
            )
        kwargs.setdefault("dtype", backbone.dtype_policy)
        super().__init__(name=name or self.default_name, **kwargs)
        self.backbone = backbone
        self.num_classes = num_classes
        self.dropout_rate = float(dropout)
        self.labels = labels
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        # Logits (and the loss) stay in float32 under mixed precision.
        self.logits = keras.layers.Dense(
            num_classes,
            dtype="float32",
            name="logits",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=backbone.config.initializer_range
            ),
        )
        self.preprocessor = preprocessor
        self.text_functions = text_inputs.FunctionCache()
        self._auto_compile = None
        self._auto_steps_pending = False
        self.gradient_accumulation_steps = 1
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.logits.build((None, self.backbone.config.hidden_size))
        self.built = True

    # ------------------------------------------------------------------ forward
    def head_input(self, backbone_outputs):
        """The backbone output the head reads; each subclass chooses (AlbertHeadModel is
        abstract)."""
        raise NotImplementedError(f"{type(self).__name__} must define head_input()")

    def call(self, inputs, training=False):
        self.check_ids(inputs)
        if isinstance(inputs, dict):
            # Keras' symbolic build under a tf.distribute strategy feeds a MEAN-reduced (float)
            # copy of the first batch; ids are integers, so cast such inputs back.
            inputs = {
                k: inputs[k] if inputs[k].dtype.is_integer else tf.cast(inputs[k], tf.int32)
                for k in INPUT_KEYS
                if k in inputs
            }
        features = self.head_input(self.backbone(inputs, training=training))
        return self.logits(self.dropout(features, training=training))

    def check_ids(self, inputs):
        """A TypeError naming the preprocessor when `inputs` is not the ids dict."""
        if isinstance(inputs, dict) and "input_word_ids" in inputs:
            return
        if text_inputs.is_raw_text(inputs):
            raise TypeError(
                f"{type(self).__name__} is called on the ids dict {{{', '.join(INPUT_KEYS)}}}; "
                "raw text goes to fit / evaluate / predict, which tokenize it with the model's "
                "preprocessor, or through AlbertPreprocessor first"
            )

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def pretrained_preprocessor(
        cls, directory, preprocessor="auto", max_seq_length=None, config=None
    ):
        """The preprocessor `from_pretrained` attaches: `preprocessor` itself when it is an
        `AlbertPreprocessor`; None for None / False; for "auto" (or True, which requires one),
        `AlbertPreprocessor.from_pretrained(directory)` when the directory has its spm.model,
        with `max_seq_length` (default `default_max_seq_length`, at most the model's
        max_position_embeddings) and dynamic padding except on TPU (static shapes)."""
        if preprocessor is None or preprocessor is False:
            return None
        if isinstance(preprocessor, AlbertPreprocessor):
            return preprocessor
        if preprocessor not in ("auto", True):
            raise ValueError(
                f"preprocessor must be 'auto', True, False, None or an AlbertPreprocessor, "
                f"got {preprocessor!r}"
            )
        if preprocessor == "auto" and model_dir.spm_model_path(directory) is None:
            logging.info("%s has no %s: no preprocessor attached", directory, model_dir.SPM_FILE)
            return None
        from albert_tf.precision import device_kind

        if max_seq_length is None:
            max_seq_length = cls.default_max_seq_length
            if config is not None:
                max_seq_length = min(max_seq_length, config.max_position_embeddings)
        return AlbertPreprocessor.from_pretrained(
            directory, max_seq_length=max_seq_length, dynamic_padding=device_kind() != "TPU"
        )

    @classmethod
    def from_pretrained(
        cls,
        directory,
        num_classes=None,
        dropout=0.1,
        labels=None,
        hidden_dropout_prob=None,
        attention_probs_dropout_prob=None,
        dtype=None,
        preprocessor="auto",
        max_seq_length=None,
        **kwargs,
    ):
        """A model on the backbone saved in `directory` (by `albert_tf.models.model_dir.save`),
        with the directory's `AlbertPreprocessor` attached (see `pretrained_preprocessor`:
        `preprocessor=None` attaches none, `max_seq_length` sets its length).

        `hidden_dropout_prob` / `attention_probs_dropout_prob` override the backbone config's
        dropout (the paper's "ALBERT DR" column of Table 14).

        `directory` may also name a released model (`albert_base_v2`), `hf://<repo_id>`, an
        https:// or gs:// address, a TF Hub handle, a Hugging Face directory, a keras-hub preset
        or a TF Hub SavedModel: fetched or converted once and cached (`albert_tf.sources`).

        A directory holding a fine-tuned model of this class (its `model.keras`: a run's
        output, a converted Hugging Face `AlbertFor*` head, a keras-hub `AlbertTextClassifier`
        preset) gives that model, head included, when no argument asks for another head
        (`num_classes`, `labels`) or backbone (dropout); it computes in `dtype` (default: the
        global Keras dtype policy, float32 unless set), whatever it was trained in
        (`load_fine_tuned`).

        >>> from albert_tf.models.classifier import AlbertClassifier
        >>> model = AlbertClassifier.from_pretrained(
        ...     "albert_base_v2", num_classes=2)  # doctest: +SKIP
        """
        directory = model_dir.local_directory(directory)  # a name: fetched and cached
        asks_other = (num_classes, labels, hidden_dropout_prob, attention_probs_dropout_prob)
        fine_tuned = None
        if all(value is None for value in asks_other):
            fine_tuned = cls._fine_tuned(directory, dtype)
        if fine_tuned is not None:
            if preprocessor is None or preprocessor is False:
                fine_tuned.preprocessor = None
            elif isinstance(preprocessor, AlbertPreprocessor) or fine_tuned.preprocessor is None:
                fine_tuned.preprocessor = cls.pretrained_preprocessor(
                    directory, preprocessor, max_seq_length, fine_tuned.backbone.config
                )
            logging.info("%s with its fine-tuned head from %s", cls.__name__, directory)
            return fine_tuned
        backbone = load_backbone(
            directory, hidden_dropout_prob, attention_probs_dropout_prob, dtype
        )
        logging.info(
            "%s on %s (%s classes)",
            cls.__name__,
            directory,
            num_classes or (len(labels) if labels else 2),
        )
        kwargs["preprocessor"] = cls.pretrained_preprocessor(
            directory, preprocessor, max_seq_length, backbone.config
        )
        return cls(backbone, num_classes=num_classes, dropout=dropout, labels=labels, **kwargs)

    @classmethod
    def _fine_tuned(cls, directory, dtype=None):
        """The fine-tuned model of this class saved as `directory`/model.keras (computing in
        `dtype`, as `load_fine_tuned`), or None."""
        path = f"{directory.rstrip('/')}/{model_dir.HEAD_MODEL_FILE}"
        if not tf.io.gfile.exists(path):
            return None
        model = load_fine_tuned(path, dtype)
        if type(model) is not cls:
            logging.info(
                "%s holds a fine-tuned %s: a new %s head goes on its backbone",
                directory,
                type(model).__name__,
                cls.__name__,
            )
            return None
        return model

    def default_loss(self):
        """The loss of compile(loss="auto"); each subclass chooses."""
        raise NotImplementedError(f"{type(self).__name__} must define default_loss()")

    def default_metrics(self):
        """The metrics of compile(metrics="auto"); each subclass chooses."""
        raise NotImplementedError(f"{type(self).__name__} must define default_metrics()")

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        *,
        learning_rate=None,
        num_train_steps=None,
        warmup_steps=None,
        warmup_ratio=0.1,
        weight_decay_rate=0.01,
        global_clipnorm=1.0,
        precision="auto",
        gradient_accumulation_steps=1,
        **kwargs,
    ):
        """`keras.Model.compile` with fine-tuning defaults for "auto" arguments.

        optimizer="auto" (bias-corrected AdamW), "adamw", "adamw_original" or "lamb":
        `default_optimizer(learning_rate, num_train_steps, warmup_steps, warmup_ratio,
        weight_decay_rate, global_clipnorm, name)` (learning_rate None: the default of the
        model's size, `albert_tf.optim.learning_rates.default_learning_rate`, logged), with a
        warning when `learning_rate` is far outside the range the fine-tuning study found safe
        for it; if `num_train_steps` is None,
        the first `fit` sets it to epochs x steps per epoch. Any other optimizer (an instance or a
        Keras name) is used as given. loss/metrics="auto": the subclass's
        defaults. precision: "auto" (`albert_tf.precision`'s choice for this machine, logged),
        "float32" or "mixed_bfloat16": the compute dtype the model runs in from now on (its
        float32-pinned layers stay float32); without `jit_compile`, XLA follows the choice.
        gradient_accumulation_steps=N (any optimizer): each training batch is split into N
        micro-batches run one after the other, and their gradients make ONE optimizer update
        equal to that of the whole batch (see `train_step`); the batch size must be a multiple
        of N (per replica). Other keyword arguments (steps_per_execution, jit_compile, ...) go
        to Keras.
        """
        from albert_tf.precision import resolve as resolve_precision

        if (
            isinstance(gradient_accumulation_steps, bool)
            or not isinstance(gradient_accumulation_steps, numbers.Integral)
            or gradient_accumulation_steps < 1
        ):
            raise ValueError(
                "gradient_accumulation_steps must be an integer >= 1, got "
                f"{gradient_accumulation_steps!r}"
            )
        self.gradient_accumulation_steps = int(gradient_accumulation_steps)

        jit = kwargs.get("jit_compile", "auto")
        choice = resolve_precision(
            precision, None if jit == "auto" else jit, self.distribute_strategy, precision == "auto"
        )
        self.set_compute_precision(choice.policy)
        if jit == "auto" and choice.device != "TPU":  # on TPU, Keras' own choice
            kwargs["jit_compile"] = choice.jit_compile
        if optimizer == "auto" or optimizer in OPTIMIZERS:
            name = "adamw" if optimizer == "auto" else optimizer
            if learning_rate is None:  # the default of this model's size (logged)
                learning_rate, why = default_learning_rate(self.backbone.config.hidden_size, name)
                logging.info("learning rate %g for %s: %s", learning_rate, name, why)
            warn_if_unsafe_learning_rate(name, learning_rate)
            self._auto_compile = dict(
                optimizer=optimizer,
                loss=loss,
                metrics=metrics,
                learning_rate=learning_rate,
                warmup_steps=warmup_steps,
                warmup_ratio=warmup_ratio,
                weight_decay_rate=weight_decay_rate,
                global_clipnorm=global_clipnorm,
                precision=choice.policy,
                gradient_accumulation_steps=gradient_accumulation_steps,
                **kwargs,
            )
            optimizer = default_optimizer(
                learning_rate,
                num_train_steps,
                warmup_steps,
                warmup_ratio,
                weight_decay_rate,
                global_clipnorm,
                name=name,
                stacked_axes=stacked_axes(self) if name == "lamb" else None,
            )
            self._auto_steps_pending = num_train_steps is None
        else:
            self._auto_compile = None
            self._auto_steps_pending = False
        if loss == "auto":
            loss = self.default_loss()
        if metrics == "auto":
            metrics = self.default_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def set_compute_precision(self, policy):
        """Runs the model in `policy` ("float32" or "mixed_bfloat16") from now on: every layer
        that follows the model's dtype policy gets the new one (variables stay float32; layers
        pinned to float32, such as LayerNorm and the logits, are left alone)."""
        followers = {id(self.dtype_policy), id(self.backbone.dtype_policy)}
        if {self.dtype_policy.name, self.backbone.dtype_policy.name} == {policy}:
            return
        new = keras.dtype_policies.get(policy)
        for layer in keras_internals.sublayers(self, include_self=True):
            if id(layer.dtype_policy) in followers:
                layer.dtype_policy = new

    # ------------------------------------------------------------------ raw text
    def encode_text(self, options):
        """fn(columns, labels) -> (ids, labels) on a batch of raw-text columns, in the graph
        (labels may be None); each subclass with a `text_form` defines it."""
        raise NotImplementedError(f"{type(self).__name__} does not take raw text")

    def text_predict_function(self, options):
        """fn(columns) -> outputs on a batch of raw-text columns, in the graph: the subclass'
        SavedModel export's serving_default."""
        raise NotImplementedError(f"{type(self).__name__} does not take raw text")

    def text_labels(self, y, columns, options=None):
        """Python labels of raw-text examples -> what tf.data slices (default: an array, label
        names mapped to their ids)."""
        return np.asarray(text_inputs.python_label_ids(list(y), self.labels, type(self).__name__))

    def text_dataset(self, x, y, sample_weight, batch_size, shuffle, options, what):
        """The (ids, labels[, weights]) batches `fit` / `evaluate` run on raw text `x`."""
        return text_inputs.labelled_dataset(
            self, x, y, sample_weight, batch_size, shuffle, options, what
        )

    def _text_setup(self, kwargs, what):
        """The raw-text options (popped from kwargs); errors without a preprocessor."""
        if self.preprocessor is None:
            raise text_inputs.no_preprocessor_error(self, "raw text")
        if self.text_form is None:
            raise TypeError(f"{type(self).__name__} does not take raw text")
        options = dict(self.text_options)
        for name in list(kwargs):
            if name in options:
                options[name] = kwargs.pop(name)
        return options

    def _text_fit_arguments(self, x, y, batch_size, kwargs):
        """fit's (x, y, kwargs) with raw text (training and validation) turned into datasets."""
        what = f"{type(self).__name__}.fit"
        options = self._text_setup(kwargs, what)
        sample_weight = kwargs.pop("sample_weight", None)
        shuffle = kwargs.pop("shuffle", True)
        split = kwargs.pop("validation_split", 0.0)
        if split:
            if kwargs.get("validation_data") is not None:
                raise ValueError(f"{what}: pass validation_split or validation_data, not both")
            (x, y, sample_weight), validation = text_inputs.split_validation(
                x, y, sample_weight, split, self.text_form, what
            )
            kwargs["validation_data"] = validation
        validation = kwargs.get("validation_data")
        if validation is not None:
            if isinstance(validation, tf.data.Dataset):
                vx, vy, vw = validation, None, None
            else:
                vx, vy, vw = (tuple(validation) + (None,))[:3]
            if text_inputs.is_raw_text(vx):
                kwargs["validation_data"] = self.text_dataset(
                    vx,
                    vy,
                    vw,
                    kwargs.pop("validation_batch_size", None) or batch_size,
                    False,
                    options,
                    f"{what} validation_data",
                )
        dataset = self.text_dataset(x, y, sample_weight, batch_size, shuffle, options, what)
        kwargs["shuffle"] = False  # the dataset shuffles (Keras would warn that it does not)
        return dataset, None, kwargs

    def fit(self, x=None, y=None, batch_size=None, epochs=1, steps_per_epoch=None, **kwargs):
        if text_inputs.is_raw_text(x):
            x, y, kwargs = self._text_fit_arguments(x, y, batch_size, kwargs)
            batch_size = None
        if self._auto_compile is not None and self._auto_steps_pending:
            # Keras has no hook between knowing the run's length and building the optimizer
            # (under a strategy it builds it before any callback runs), so the schedule's
            # length is set by calling the public `compile` again, before `super().fit`, with
            # the arguments of the "auto" compile and the step count.
            steps = _infer_steps(
                x, y, batch_size, epochs, steps_per_epoch, kwargs.get("initial_epoch", 0)
            )
            settings = dict(self._auto_compile)
            logging.info(
                "%s: %d training steps: linear warmup over %d steps, then linear decay",
                type(self).__name__,
                steps,
                warmup_step_count(steps, settings["warmup_steps"], settings["warmup_ratio"]),
            )
            self.compile(num_train_steps=steps, **settings)
        self.build_optimizer()
        return super().fit(
            x, y, batch_size=batch_size, epochs=epochs, steps_per_epoch=steps_per_epoch, **kwargs
        )

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        if text_inputs.is_raw_text(x):
            what = f"{type(self).__name__}.evaluate"
            options = self._text_setup(kwargs, what)
            x = self.text_dataset(
                x, y, kwargs.pop("sample_weight", None), batch_size, False, options, what
            )
            y = batch_size = None
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **options):
        """`keras.Model.predict` on the ids dict; on raw text (with a preprocessor) the outputs
        of the subclass' SavedModel export for the same texts (a dict of NumPy arrays, strings
        as str), with the subclass' `text_options` as keyword arguments."""
        if not text_inputs.is_raw_text(x):
            if options:
                raise TypeError(f"predict got {sorted(options)}: they apply to raw text only")
            return super().predict(
                x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks
            )
        what = f"{type(self).__name__}.predict"
        settings = self._text_setup(options, what)
        if options:
            raise TypeError(
                f"{what} got unknown keyword arguments {sorted(options)}; raw-text options: "
                f"{sorted(self.text_options) or 'none'}"
            )
        return text_inputs.predict_text(self, x, batch_size, verbose, steps, callbacks, settings)

    # ------------------------------------------------------------------ gradient accumulation
    def micro_batch_weights(self, y, sample_weight):
        """The weight of each micro-batch's loss in an accumulated update: float32 [N], summing
        to 1, from the labels (and sample weights) split as [N, micro-batch, ...].

        A loss that is a mean over the examples of its micro-batch gets 1/N each (the mean of N
        equal-sized means is the mean over the whole batch). A subclass whose loss divides by
        another count (`AlbertTokenClassifier`: the labelled positions) weights each micro-batch
        by its share of that count, so the update is still the whole batch's.
        """
        del sample_weight
        n = tf.shape(keras.tree.flatten(y)[0])[0]
        return tf.fill([n], 1.0 / tf.cast(n, tf.float32))

    def train_step(self, data):
        """Keras' step, or with `gradient_accumulation_steps=N` > 1: the batch (per replica)
        split into N micro-batches, each run forward and backward in turn inside one
        `tf.while_loop` (so only one micro-batch's activations are alive at a time), their
        gradients summed with the weights of `micro_batch_weights`, then ONE `apply_gradients`
        (one all-reduce across replicas, clipping of the accumulated gradient, one step of the
        schedule and of `optimizer.iterations`). Metrics are updated per micro-batch (means
        over examples or positions, so they equal those of the whole batch)."""
        steps = self.gradient_accumulation_steps
        if steps == 1:
            return super().train_step(data)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        rows = tf.shape(keras.tree.flatten(x)[0])[0]
        micro_x, micro_y, micro_weight = split_micro_batches((x, y, sample_weight), steps)
        weights = tf.cast(self.micro_batch_weights(micro_y, micro_weight), tf.float32)
        variables = self.trainable_weights

        def micro_step(k):
            pick = lambda t: None if t is None else t[k]  # noqa: E731
            xk, yk, wk = tf.nest.map_structure(pick, (micro_x, micro_y, micro_weight))
            with tf.GradientTape() as tape:
                y_pred = self(xk, training=True)
                loss = self.compute_loss(xk, yk, y_pred, wk, training=True)
                weighted = loss * tf.cast(weights[k], loss.dtype)
                scaled = self.optimizer.scale_loss(weighted)
            self.compute_metrics(xk, yk, y_pred, wk)  # updates their states
            return tape.gradient(scaled, variables), tf.cast(weighted, tf.float32)

        gradients, loss = accumulate(micro_step, steps, variables, tf.constant(0.0))
        replicas = tf.distribute.get_strategy().num_replicas_in_sync  # the loss is 1/replicas
        keras_internals.loss_tracker(self).update_state(loss * replicas, sample_weight=rows)
        self.optimizer.apply_gradients(zip(gradients, variables))
        return self.get_metrics_result()

    def train_on_batch(self, *args, **kwargs):
        self.build_optimizer()
        return super().train_on_batch(*args, **kwargs)

    def build_optimizer(self):
        """Creates the optimizer's variables now (in the strategy's scope).

        Under a tf.distribute strategy, creating them inside the traced step fails
        (keras#23085, not fixed in 3.15); a checkpoint restore also needs them to exist; and
        without a strategy, Keras creates them inside the first trace of the step, which makes
        TensorFlow trace the whole step a second time. `fit` and `train_on_batch` call it.
        """
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            with self.distribute_strategy.scope():
                optimizer.build(self.trainable_variables)

    def compile_from_config(self, config):
        """Restores the compiled state saved in a `.keras` file (optimizer, loss, metrics)."""
        config = keras.saving.deserialize_keras_object(config)
        self._auto_compile = None
        self._auto_steps_pending = False
        keras.Model.compile(self, **config)
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_classes": self.num_classes,
            "dropout": self.dropout_rate,
            "labels": self.labels,
            "preprocessor": (
                None
                if self.preprocessor is None
                else keras.saving.serialize_keras_object(self.preprocessor)
            ),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def _infer_steps(x, y, batch_size, epochs, steps_per_epoch, initial_epoch):
    if steps_per_epoch is None:
        if isinstance(x, tf.data.Dataset):
            cardinality = int(x.cardinality())
            if cardinality < 0:
                raise ValueError(
                    "compile() was called without num_train_steps and the dataset's length "
                    "is unknown or infinite: pass steps_per_epoch to fit() or "
                    "num_train_steps to compile()"
                )
            steps_per_epoch = cardinality
        else:
            if y is None or batch_size is None:
                raise ValueError(
                    "compile() was called without num_train_steps: pass "
                    "steps_per_epoch (or arrays and batch_size) to fit()"
                )
            rows = len(keras.tree.flatten(y)[0])  # y may be a dict of arrays (SQuAD labels)
            steps_per_epoch = math.ceil(rows / batch_size)
    return max(1, int(steps_per_epoch) * (int(epochs) - int(initial_epoch)))
