"""What albert_tf relies on in Keras where Keras 3 has no public API for it, in one place.

Written against Keras 3.15.1 (what TensorFlow 2.21 installs). `tests/model/test_keras_internals.py`
checks each assumption below against the installed Keras and fails when an upgrade changes one.

- `sublayers`: Keras 3 lists only a Model's direct layers publicly (`Model.layers`); the
  recursive walk through plain layers is the private `Layer._flatten_layers`.
- `loss_tracker`: the running mean of the loss that `fit` reports as "loss". The public route,
  used here, is the one Keras' "customizing fit" guide shows: the metric named "loss" in
  `Model.metrics`.
- Under a `tf.distribute` strategy, Keras' TensorFlow trainer builds the model, the compiled
  loss and the compiled metrics with one symbolic pass before training: `model(x)` on the data's
  x alone (mean-reduced across replicas, so integer ids may arrive as floats), then
  `compute_metrics` and `compute_loss` on those outputs. A model whose training outputs depend
  on the labels must accept outputs computed without them there: `AlbertSquadV2Model`, whose end
  logits are conditioned on the gold start, traces its gold-start outputs for that build (its
  `_align`, the only place that handles it).
"""

#: The Keras version the assumptions of this module were checked against.
WRITTEN_AGAINST = "3.15.1"


def sublayers(layer, include_self=False):
    """Every layer inside `layer`, recursively (and `layer` itself first with `include_self`).

    >>> import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> [type(layer).__name__ for layer in sublayers(model, include_self=True)]
    ['Sequential', 'Dense']
    """
    return list(layer._flatten_layers(include_self=include_self, recursive=True))


def loss_tracker(model):
    """The compiled `model`'s metric that `fit` reports as "loss" (a `keras.metrics.Mean`).

    >>> import keras
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile(loss="mse")
    >>> type(loss_tracker(model)).__name__
    'Mean'
    """
    found = [metric for metric in model.metrics if metric.name == "loss"]
    if len(found) != 1:
        raise ValueError(
            f"{type(model).__name__} has {len(found)} metrics named 'loss' (one after compile "
            f"in Keras {WRITTEN_AGAINST}); was it compiled?"
        )
    return found[0]
