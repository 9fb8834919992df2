"""`AlbertClassifier`: pooled output -> dropout -> dense, for classification or regression.

A plain keras.Model: compile it (defaults: the original's AdamW, lr 2e-5, 10% linear warmup and
linear decay, global-norm clipping at 1.0) and `fit` it on a tf.data.Dataset of (inputs, labels)
where inputs are the backbone's id dict (an `AlbertPreprocessor` makes them from raw text in
`Dataset.map`). `num_classes=1` is regression (MSE, one score per example).

Large and xlarge v2 models are known to diverge or stay at chance when fine-tuned with higher
rates or small batches (google-research/albert #197, #207; keras-hub #831): keep lr <= 2e-5
(1e-5 or 5e-6 for xlarge), keep warmup and clipping.

>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.models.backbone import AlbertModel
>>> model = AlbertClassifier(AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)),
...                          num_classes=3)
>>> inputs = {"input_word_ids": np.array([[2, 7, 3]], "int32"), "input_mask": np.ones([1, 3], "int32"),
...           "input_type_ids": np.zeros([1, 3], "int32")}
>>> model(inputs).shape
TensorShape([1, 3])
"""
import dataclasses
import math

import keras
import tensorflow as tf
from absl import logging

from albert_tf.models import io
from albert_tf.models.backbone import INPUT_KEYS, AlbertModel
from albert_tf.optim.optimizers import AdamWeightDecay
from albert_tf.optim.schedules import WarmupPolynomialDecay


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(keras.Model):
    """ALBERT with a classification (or regression) head on the pooled [CLS] output.

    Called on {"input_word_ids", "input_mask", "input_type_ids"} (int [B, S]) it returns
    float32 logits [B, num_classes] ([B, 1] scores for regression).

    Args:
        backbone: an `AlbertModel`.
        num_classes: number of labels; 1 means regression. Defaults to len(labels) or 2.
        dropout: dropout on the pooled output (the original hard-codes 0.1).
        labels: optional label names in id order; kept in the config and used by the export.
        name: model name.

    Example:
        >>> model = AlbertClassifier.from_pretrained("pretrained/", num_classes=2)  # doctest: +SKIP
        >>> model.compile(num_train_steps=1000)                                    # doctest: +SKIP
        >>> model.fit(train_ds, epochs=1, steps_per_epoch=1000)                     # doctest: +SKIP
    """

    def __init__(self, backbone, num_classes=None, dropout=0.1, labels=None,
                 name="albert_classifier", **kwargs):
        if not isinstance(backbone, AlbertModel):
            raise TypeError(f"AlbertClassifier needs an AlbertModel backbone, got "
                            f"{type(backbone).__name__}")
        labels = None if labels is None else [str(label) for label in labels]
        if num_classes is None:
            num_classes = len(labels) if labels else 2
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
        if labels is not None and len(labels) != num_classes:
            raise ValueError(f"labels has {len(labels)} names but num_classes is {num_classes}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        kwargs.setdefault("dtype", backbone.dtype_policy)
        super().__init__(name=name, **kwargs)
        self.backbone = backbone
        self.num_classes = num_classes
        self.dropout_rate = float(dropout)
        self.labels = labels
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        # Logits (and the loss) stay in float32 under mixed precision.
        self.logits = keras.layers.Dense(
            num_classes, dtype="float32", name="logits",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=backbone.config.initializer_range))
        self._auto_compile = None
        self.build()

    @property
    def is_regression(self):
        return self.num_classes == 1

    def build(self, input_shape=None):
        if self.built:
            return
        self.logits.build((None, self.backbone.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):
            # Keras' symbolic build under a tf.distribute strategy feeds a MEAN-reduced (float)
            # copy of the first batch; ids are integers, so cast such inputs back.
            inputs = {k: inputs[k] if inputs[k].dtype.is_integer else tf.cast(inputs[k], tf.int32)
                      for k in INPUT_KEYS if k in inputs}
        pooled = self.backbone(inputs, training=training)["pooled_output"]
        return self.logits(self.dropout(pooled, training=training))

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_pretrained(cls, directory, num_classes=None, dropout=0.1, labels=None,
                        hidden_dropout_prob=None, attention_probs_dropout_prob=None, dtype=None,
                        **kwargs):
        """A classifier on the backbone saved in `directory` (by `albert_tf.models.io.save`).

        `hidden_dropout_prob` / `attention_probs_dropout_prob` override the backbone config's
        dropout (the paper's "ALBERT DR" column of Table 14: 0.1 for QQP, RTE, WNLI, RACE).
        """
        backbone = io.load_backbone(directory, dtype=dtype)
        overrides = {k: v for k, v in (("hidden_dropout_prob", hidden_dropout_prob),
                                       ("attention_probs_dropout_prob",
                                        attention_probs_dropout_prob)) if v is not None}
        if overrides:
            loaded = backbone
            backbone = AlbertModel(dataclasses.replace(loaded.config, **overrides),
                                   dtype=loaded.dtype_policy, name=loaded.name)
            backbone.set_weights(loaded.get_weights())
        logging.info("AlbertClassifier on %s (%s classes)", directory,
                     num_classes or (len(labels) if labels else 2))
        return cls(backbone, num_classes=num_classes, dropout=dropout, labels=labels, **kwargs)

    # ------------------------------------------------------------------ training defaults
    def compile(self, optimizer="auto", loss="auto", metrics="auto", *, learning_rate=2e-5,
                num_train_steps=None, warmup_steps=None, warmup_ratio=0.1,
                weight_decay_rate=0.01, global_clipnorm=1.0, **kwargs):
        """`keras.Model.compile` with fine-tuning defaults for "auto" arguments.

        optimizer="auto": `AdamWeightDecay` (the original AdamW; LayerNorm and biases excluded
        from decay) with `learning_rate` warmed up linearly over `warmup_steps` (default
        `warmup_ratio` of the total) and decayed linearly to 0 at `num_train_steps`, gradients
        clipped to global norm `global_clipnorm`. If `num_train_steps` is None, the first `fit`
        sets it to epochs x steps per epoch (from `steps_per_epoch` or the dataset's cardinality).
        loss="auto": sparse categorical cross-entropy from logits, or MSE for regression.
        metrics="auto": accuracy, or mean absolute error for regression.
        Other keyword arguments (steps_per_execution, jit_compile, ...) go to Keras.
        """
        if optimizer == "auto":
            self._auto_compile = dict(
                loss=loss, metrics=metrics, learning_rate=learning_rate,
                warmup_steps=warmup_steps, warmup_ratio=warmup_ratio,
                weight_decay_rate=weight_decay_rate, global_clipnorm=global_clipnorm, **kwargs)
            optimizer = self.default_optimizer(learning_rate, num_train_steps, warmup_steps,
                                               warmup_ratio, weight_decay_rate, global_clipnorm)
            self._auto_steps_pending = num_train_steps is None
        else:
            self._auto_compile = None
            self._auto_steps_pending = False
        if loss == "auto":
            loss = (keras.losses.MeanSquaredError() if self.is_regression else
                    keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if metrics == "auto":
            metrics = ([keras.metrics.MeanAbsoluteError(name="mae")] if self.is_regression else
                       [keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    @staticmethod
    def default_optimizer(learning_rate=2e-5, num_train_steps=None, warmup_steps=None,
                          warmup_ratio=0.1, weight_decay_rate=0.01, global_clipnorm=1.0):
        """The default fine-tuning optimizer (see `compile`); a constant rate without steps."""
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        if num_train_steps is not None and num_train_steps < 1:
            raise ValueError(f"num_train_steps must be >= 1, got {num_train_steps}")
        if not 0.0 <= warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {warmup_ratio}")
        schedule = learning_rate
        if num_train_steps:
            warmup = (int(warmup_steps) if warmup_steps is not None
                      else int(round(warmup_ratio * num_train_steps)))
            schedule = WarmupPolynomialDecay(learning_rate, decay_steps=int(num_train_steps),
                                             warmup_steps=warmup, power=1.0)
        return AdamWeightDecay(learning_rate=schedule, weight_decay_rate=weight_decay_rate,
                               epsilon=1e-6, global_clipnorm=global_clipnorm)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, steps_per_epoch=None, **kwargs):
        if self._auto_compile is not None and self._auto_steps_pending:
            steps = self._infer_steps(x, y, batch_size, epochs, steps_per_epoch,
                                      kwargs.get("initial_epoch", 0))
            settings = dict(self._auto_compile)
            logging.info("AlbertClassifier: %d training steps: linear warmup over %s steps, "
                         "then linear decay", steps, settings["warmup_steps"] if
                         settings["warmup_steps"] is not None else
                         int(round(settings["warmup_ratio"] * steps)))
            self.compile(num_train_steps=steps, **settings)
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            # Create the optimizer's variables before tracing: under a tf.distribute strategy,
            # creating them inside the traced step fails (keras#23085, not fixed in 3.15).
            with self.distribute_strategy.scope():
                optimizer.build(self.trainable_variables)
        return super().fit(x, y, batch_size=batch_size, epochs=epochs,
                           steps_per_epoch=steps_per_epoch, **kwargs)

    @staticmethod
    def _infer_steps(x, y, batch_size, epochs, steps_per_epoch, initial_epoch):
        if steps_per_epoch is None:
            if isinstance(x, tf.data.Dataset):
                cardinality = int(x.cardinality())
                if cardinality < 0:
                    raise ValueError(
                        "compile() was called without num_train_steps and the dataset's length "
                        "is unknown or infinite: pass steps_per_epoch to fit() or "
                        "num_train_steps to compile()")
                steps_per_epoch = cardinality
            else:
                labels = y if y is not None else None
                if labels is None or batch_size is None:
                    raise ValueError("compile() was called without num_train_steps: pass "
                                     "steps_per_epoch (or arrays and batch_size) to fit()")
                steps_per_epoch = math.ceil(len(labels) / batch_size)
        return max(1, int(steps_per_epoch) * (int(epochs) - int(initial_epoch)))

    def compile_from_config(self, config):
        """Restores the compiled state saved in a `.keras` file (optimizer, loss, metrics)."""
        config = keras.saving.deserialize_keras_object(config)
        self._auto_compile = None
        self._auto_steps_pending = False
        keras.Model.compile(self, **config)
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {"backbone": keras.saving.serialize_keras_object(self.backbone),
                "num_classes": self.num_classes, "dropout": self.dropout_rate,
                "labels": self.labels, "name": self.name, "trainable": self.trainable,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
