"""The ALBERT encoder: stacked group weights applied by ONE `tf.while_loop`.

Every sharing strategy is the same loop with different group counts
(`config.attention_groups`, `config.ffn_groups`; see AlbertConfig): the attention weights are
stacked [attention_groups, inner_group_num, ...] and the FFN weights [ffn_groups,
inner_group_num, ...]. Iteration i of the L * inner_group_num iterations is layer
l = i // inner_group_num, sublayer k = i % inner_group_num, and uses attention group
l // (L // attention_groups) and FFN group l // (L // ffn_groups) (the original's
group_idx = int(l / L * num_hidden_groups)). The graph therefore holds one block whatever the
depth; `unroll=True` builds the same math as a Python loop over the same weights.

What the backward pass keeps per iteration is what the loop's gradient accumulates: in
training graphs, the tensors the block's written-out gradient reads (13 per iteration and the
active dropout sites' masks, see block.py), or, with `recompute=True`, only the block's input
hidden state and its dropout masks, the block being run again in the backward pass (see
`recomputed`).
"""

import dataclasses

import keras
import tensorflow as tf

from albert_tf import keras_internals
from albert_tf.config import AlbertConfig
from albert_tf.layers import block, block_weights


@keras.saving.register_keras_serializable(package="albert_tf")
class StackedWeights(keras.layers.Layer):
    """The attention or FFN weights of `groups x inner` blocks, stacked on two leading axes.

    A weight container, never called: the encoder reads `flat_values()` once per call and
    gathers one block's weights per loop iteration. Each weight is an attribute
    (`stack.query_kernel`, ...) and `variables_by_name` maps the names of
    `block_weights.ATTENTION_WEIGHTS` or `block_weights.FFN_WEIGHTS` to the variables
    (`layout="serving"`: the names and shapes of `block_weights.SERVING_WEIGHT_SHAPES`). Kernels
    start truncated-normal(initializer_range),
    biases and LayerNorm beta at 0, LayerNorm gamma at 1. LayerNorm parameters are never
    autocast (they stay float32 under mixed precision).

    Example:
        >>> stack = StackedWeights("ffn", groups=2, inner=1, hidden_size=8, intermediate_size=16)
        >>> stack.build()
        >>> tuple(stack.intermediate_kernel.shape)
        (2, 1, 8, 16)
    """

    def __init__(
        self,
        kind,
        groups,
        inner,
        hidden_size,
        intermediate_size,
        initializer_range=0.02,
        layout="training",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if layout not in block_weights.LAYOUTS:
            raise ValueError(
                f"StackedWeights layout must be one of {sorted(block_weights.LAYOUTS)}, "
                f"got {layout!r}"
            )
        if kind not in block_weights.BLOCK_WEIGHT_SHAPES:
            raise ValueError(
                "StackedWeights kind must be one of "
                f"{sorted(block_weights.BLOCK_WEIGHT_SHAPES)}, got {kind!r}"
            )
        self.kind = kind
        self.groups = groups
        self.inner = inner
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.initializer_range = initializer_range
        self.layout = layout

    def build(self, input_shape=None):
        sizes = {"hidden_size": self.hidden_size, "intermediate_size": self.intermediate_size}
        for name in block_weights.LAYOUTS[self.layout][self.kind]:
            shape = (self.groups, self.inner) + block_weights.shape(
                self.kind, name, sizes, self.layout
            )
            if name.endswith("_kernel"):
                init = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
            elif name == "layer_norm_gamma":
                init = "ones"
            else:
                init = "zeros"
            variable = self.add_weight(
                shape=shape, initializer=init, name=name, autocast=not name.startswith("layer_norm")
            )
            setattr(self, name, variable)
        self.built = True

    @property
    def variables_by_name(self):
        """{weight name: variable} in block order."""
        return {name: getattr(self, name) for name in block_weights.LAYOUTS[self.layout][self.kind]}

    def flat_values(self):
        """{name: tensor [groups * inner, ...]}, read (and autocast) once."""
        return {
            name: tf.reshape(v.value, (self.groups * self.inner,) + tuple(v.shape[2:]))
            for name, v in self.variables_by_name.items()
        }

    def get_config(self):
        return {
            **super().get_config(),
            "kind": self.kind,
            "groups": self.groups,
            "inner": self.inner,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "initializer_range": self.initializer_range,
            "layout": self.layout,
        }


def stacked_axes(model):
    """{regex: 2} for every `StackedWeights` variable of `model` (the encoder's [groups, inner,
    ...] weights), as `albert_tf.optim.Lamb(stacked_axes=...)` takes it: one trust ratio per
    original per-layer variable, whatever the sharing layout.

    >>> from albert_tf.config import AlbertConfig
    >>> from albert_tf.models.backbone import AlbertModel
    >>> axes = stacked_axes(AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=100)))
    >>> sorted(set(axes.values()))
    [2]
    """
    prefixes = set()
    for layer in keras_internals.sublayers(model):
        if isinstance(layer, StackedWeights):
            for variable in layer.trainable_variables:
                prefixes.add(variable.path.rsplit("/", 1)[0])
    return {f"^{p}/": 2 for p in sorted(prefixes)}


def _selector(stacks):
    """A function index -> one block's weights from {name: [n, ...]} stacks.

    A single-entry stack (full sharing, every released model) is sliced here, once, outside
    the loop: sliced inside it, each iteration's slice would be an intermediate that the
    gradient of the `tf.while_loop` keeps (L copies of the weights).
    """
    if next(iter(stacks.values())).shape[0] == 1:
        weights = {k: v[0] for k, v in stacks.items()}
        return lambda index: weights
    return lambda index: {k: tf.gather(v, index) for k, v in stacks.items()}


def recomputed(fn, unpack=lambda masks: masks):
    """fn(hidden, attention, ffn, masks) -> hidden, with a gradient that runs fn again on its
    inputs: `call(hidden, attention, ffn, kept_masks, masks)`.

    The backward pass keeps only the block's input [B, S, H], the weights (loop invariants)
    and `kept_masks`, which `unpack` turns into fn's `masks` for the second run (the encoder
    keeps the dropout masks packed 8 to a byte), instead of every activation, at the cost of a
    second forward pass of the block. The first run gets `masks` as drawn (keeping them is
    faster than drawing them again: docs/notes/encoder_speed.md).
    `attention`, `ffn` and both masks are dicts of tensors (never variables); the masks get no
    gradient.

    Example:
        >>> import tensorflow as tf
        >>> square = recomputed(lambda h, a, f, m: h * h * a["w"] + f["b"])
        >>> h = tf.constant([3.0])
        >>> with tf.GradientTape() as tape:
        ...     tape.watch(h)
        ...     y = square(h, {"w": tf.constant([2.0])}, {"b": tf.constant([1.0])}, {}, {})
        >>> float(tape.gradient(y, h)[0])
        12.0
    """

    @tf.custom_gradient
    def call(hidden, attention, ffn, kept_masks, masks):
        def grad(dy):
            inputs = (hidden, attention, ffn)
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                out = fn(*inputs, unpack(kept_masks))
            grads = tape.gradient(
                out, inputs, output_gradients=dy, unconnected_gradients=tf.UnconnectedGradients.ZERO
            )
            no_gradient = [{site: None for site in m} for m in (kept_masks, masks)]
            return grads + tuple(no_gradient)

        return fn(hidden, attention, ffn, masks), grad

    return call


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(keras.layers.Layer):
    """The transformer stack with ALBERT's cross-layer parameter sharing.

    Call: `encoder(hidden [B, S, H], input_mask [B, S], training=False)` -> dict with
    "sequence_output" [B, S, H] and, if `output_encoder_outputs`, "encoder_outputs"
    [L * inner_group_num, B, S, H] (every block's output, the last equal to sequence_output).

    Args:
        config: an AlbertConfig (or its dict).
        output_encoder_outputs: also return every block's output.
        unroll: build a Python loop instead of `tf.while_loop` (same weights, same math).
        recompute: keep only each block's input for the backward pass and run the block again
            there (gradient checkpointing; same gradients, less memory, about one more forward
            pass of time).
        serving_layout: store the block weights in `block_weights`' serving layout (kernels
            [out, in], query/key/value fused), which inference MatMuls on bfloat16 weights read
            faster; such an encoder only infers. `load_training_layout` fills it from a
            training-layout encoder (served bfloat16 exports are built so).
        seed: seed of the dropout masks (used only with dropout > 0 and training=True).

    Attribute `written_gradient` (True; set it before a training call is traced): training
    graphs run the blocks with their written-out gradient and XLA-compiled elementwise kernels.
    False runs them as plain TF ops that TF differentiates (the same gradients, slower): what a
    SavedModel fine-tuned after loading needs (`albert_tf.export.tfhub`), since a custom
    gradient inside the loop cannot be differentiated once loaded (TF finds the tensors it
    kept out of scope).

    Variables: `encoder/attention/<name>` [attention_groups, inner_group_num, ...] and
    `encoder/ffn/<name>` [ffn_groups, inner_group_num, ...] (see StackedWeights);
    `attention_weights` / `ffn_weights` map names to them.

    Example:
        >>> import tensorflow as tf
        >>> from albert_tf.config import AlbertConfig
        >>> config = AlbertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2,
        ...                       intermediate_size=16, num_hidden_layers=4, num_hidden_groups=2)
        >>> encoder = AlbertEncoder(config, output_encoder_outputs=True)
        >>> out = encoder(tf.random.normal([2, 5, 8]), tf.ones([2, 5], tf.int32))
        >>> out["encoder_outputs"].shape
        TensorShape([4, 2, 5, 8])
    """

    def __init__(
        self,
        config,
        output_encoder_outputs=False,
        unroll=False,
        seed=None,
        recompute=False,
        serving_layout=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig(**config)
        self.config = config
        self.output_encoder_outputs = bool(output_encoder_outputs)
        self.unroll = bool(unroll)
        self.seed = seed
        self.recompute = bool(recompute)
        self.serving_layout = bool(serving_layout)
        self.written_gradient = True  # see the class docstring
        self.settings = block.BlockSettings.from_config(config)
        stack = dict(
            inner=config.inner_group_num,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            initializer_range=config.initializer_range,
            layout="serving" if self.serving_layout else "training",
            dtype=self.dtype_policy,
        )
        self.attention = StackedWeights(
            "attention", config.attention_groups, name="attention", **stack
        )
        self.ffn = StackedWeights("ffn", config.ffn_groups, name="ffn", **stack)
        self.seed_generator = None
        if config.hidden_dropout_prob or config.attention_probs_dropout_prob:
            self.seed_generator = keras.random.SeedGenerator(seed, name="dropout_seed")

    @property
    def num_iterations(self):
        """Sublayer applications: num_hidden_layers * inner_group_num."""
        return self.config.num_hidden_layers * self.config.inner_group_num

    @property
    def attention_weights(self):
        return self.attention.variables_by_name

    @property
    def ffn_weights(self):
        return self.ffn.variables_by_name

    def build(self, input_shape=None):
        self.attention.build()
        self.ffn.build()
        self.built = True

    def load_training_layout(self, source):
        """Set this serving-layout encoder's weights from `source`, an encoder of the same config
        in the training layout (values converted by `block_weights.to_serving`)."""
        if not self.serving_layout or source.serving_layout:
            raise ValueError(
                "load_training_layout copies a training-layout encoder into a serving-layout one"
            )
        for kind in ("attention", "ffn"):
            target, values = getattr(self, kind), getattr(source, kind).variables_by_name
            served = block_weights.to_serving(kind, {k: v.numpy() for k, v in values.items()})
            for name, variable in target.variables_by_name.items():
                variable.assign(tf.cast(served[name], variable.dtype))

    def block_indices(self, iteration):
        """(flat attention index, flat FFN index) into [groups * inner] for an iteration.

        Works on Python ints and on scalar int32 tensors alike.
        """
        c = self.config
        inner = c.inner_group_num
        layer, sublayer = iteration // inner, iteration % inner
        attention_group = layer // (c.num_hidden_layers // c.attention_groups)
        ffn_group = layer // (c.num_hidden_layers // c.ffn_groups)
        return attention_group * inner + sublayer, ffn_group * inner + sublayer

    def call(self, hidden, input_mask, training=False):
        hidden = tf.cast(hidden, self.compute_dtype)  # loop-variable dtype stays fixed
        bias = block.attention_bias(input_mask)
        if self.serving_layout and training:
            raise ValueError("an encoder in the serving layout only infers (training=False)")
        attention, ffn = self.attention.flat_values(), self.ffn.flat_values()
        if self.serving_layout:  # biases in float32 once, not in every iteration's dense
            attention, ffn = (
                {k: tf.cast(v, tf.float32) if k.endswith("_bias") else v for k, v in w.items()}
                for w in (attention, ffn)
            )
        else:
            attention = block.fuse_query_key_value(attention)
        attention, ffn = _selector(attention), _selector(ffn)
        use_dropout = bool(training) and self.seed_generator is not None
        # Training graphs run the block with its written-out gradient and the elementwise math
        # as XLA kernels (unless `written_gradient` is off); inference graphs (exported
        # SavedModels) stay plain TF ops, so that serving them needs no XLA JIT.
        settings = dataclasses.replace(
            self.settings, fused=bool(training) and self.written_gradient
        )
        n = self.num_iterations
        masks = None
        if use_dropout:
            masks = block.block_masks(hidden, settings, self.seed_generator.next())

        def run(settings):
            """The blocks' loop with these block settings."""

            def step(i, h):
                a, f = self.block_indices(i)

                def apply(h, attention_weights, ffn_weights, iteration_masks):
                    return block.transformer_block(
                        h,
                        bias,
                        attention_weights,
                        ffn_weights,
                        settings,
                        training=use_dropout,
                        masks=iteration_masks,
                    )

                drawn = masks.at(i) if use_dropout else {}
                if not self.recompute:
                    return apply(h, attention(a), ffn(f), drawn)
                # The backward pass keeps the masks packed 8 to a byte (31 MB instead of 252 at
                # ALBERT-large, seq 512, 24 layers) and unpacks them to run the block again.
                if not use_dropout:
                    return recomputed(apply)(h, attention(a), ffn(f), {}, {})
                packed = masks.pack(drawn)
                return recomputed(apply, masks.unpack)(h, attention(a), ffn(f), packed, drawn)

            if self.unroll:
                h, outputs = hidden, []
                for i in range(n):
                    h = step(i, h)
                    outputs.append(h)
                result = {"sequence_output": h}
                if self.output_encoder_outputs:
                    result["encoder_outputs"] = tf.stack(outputs)
                return result

            def body(i, h, *array):
                h = step(i, h)
                return (i + 1, h) + tuple(a.write(i, h) for a in array)

            loop_vars = (tf.constant(0, tf.int32), hidden)
            if self.output_encoder_outputs:
                loop_vars += (
                    tf.TensorArray(
                        hidden.dtype, size=n, dynamic_size=False, element_shape=hidden.shape
                    ),
                )
            # The forward iterations are sequential anyway (through h); the backward loop (which
            # inherits this setting) may start an iteration while the previous one finishes its
            # weight gradients, which the unrolled graph also overlaps (2 measured best:
            # docs/notes/encoder_speed.md). With `recompute`, each backward iteration's
            # recomputation needs only its kept input, so the executor would run several recomputed
            # blocks at once and hold all their activations: one at a time.
            final = tf.while_loop(
                lambda i, *_: i < n,
                body,
                loop_vars,
                maximum_iterations=n,
                parallel_iterations=1 if self.recompute else 2,
            )
            result = {"sequence_output": final[1]}
            if self.output_encoder_outputs:
                result["encoder_outputs"] = final[2].stack()
            return result

        if not self.serving_layout:
            return run(settings)
        few_tokens = tf.size(input_mask) <= block.SERVING_WEIGHTS_FIRST_TOKENS
        return tf.cond(
            few_tokens,
            lambda: run(dataclasses.replace(settings, serving_product="weights_first")),
            lambda: run(dataclasses.replace(settings, serving_product="activations_first")),
        )

    def get_config(self):
        return {
            **super().get_config(),
            "config": self.config.to_dict(),
            "output_encoder_outputs": self.output_encoder_outputs,
            "unroll": self.unroll,
            "seed": self.seed,
            "recompute": self.recompute,
            "serving_layout": self.serving_layout,
        }
