"""The weights of ALBERT's shared transformer block, named and shaped once.

Shapes are in `AlbertConfig` field names, per block; `AlbertEncoder` stacks each weight as
[groups, inner_group_num, *shape] and the checkpoint converters (`albert_tf.convert.names`)
map the original and Hugging Face names onto these. No TensorFlow import: the converters' name
tables use it too.

>>> BLOCK_WEIGHT_SHAPES["ffn"]["intermediate_kernel"]
('hidden_size', 'intermediate_size')
>>> shape("ffn", "intermediate_kernel", {"hidden_size": 768, "intermediate_size": 3072})
(768, 3072)
"""

BLOCK_WEIGHT_SHAPES = {
    "attention": {
        "query_kernel": ("hidden_size", "hidden_size"),
        "query_bias": ("hidden_size",),
        "key_kernel": ("hidden_size", "hidden_size"),
        "key_bias": ("hidden_size",),
        "value_kernel": ("hidden_size", "hidden_size"),
        "value_bias": ("hidden_size",),
        "output_kernel": ("hidden_size", "hidden_size"),
        "output_bias": ("hidden_size",),
        "layer_norm_gamma": ("hidden_size",),
        "layer_norm_beta": ("hidden_size",),
    },
    "ffn": {
        "intermediate_kernel": ("hidden_size", "intermediate_size"),
        "intermediate_bias": ("intermediate_size",),
        "output_kernel": ("intermediate_size", "hidden_size"),
        "output_bias": ("hidden_size",),
        "layer_norm_gamma": ("hidden_size",),
        "layer_norm_beta": ("hidden_size",),
    },
}
ATTENTION_WEIGHTS = tuple(BLOCK_WEIGHT_SHAPES["attention"])
FFN_WEIGHTS = tuple(BLOCK_WEIGHT_SHAPES["ffn"])


def shape(kind, name, sizes):
    """The shape of weight `name` of `kind` ("attention" or "ffn") for `sizes` (field -> int)."""
    return tuple(sizes[field] for field in BLOCK_WEIGHT_SHAPES[kind][name])
