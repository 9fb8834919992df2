"""The weights of ALBERT's shared transformer block, named and shaped once.

Shapes are in `AlbertConfig` field names, per block; `AlbertEncoder` stacks each weight as
[groups, inner_group_num, *shape] and the checkpoint converters (`albert_tf.convert.names`)
map the original and Hugging Face names onto these. No TensorFlow import: the converters' name
tables use it too.

>>> BLOCK_WEIGHT_SHAPES["ffn"]["intermediate_kernel"]
('hidden_size', 'intermediate_size')
>>> shape("ffn", "intermediate_kernel", {"hidden_size": 768, "intermediate_size": 3072})
(768, 3072)

Served bfloat16 exports keep the same weights in the "serving" layout (`SERVING_WEIGHT_SHAPES`,
`to_serving`): every kernel stored [out, in] and the query/key/value kernels and biases fused
into one `qkv_kernel` [3H, H] and `qkv_bias` [3H]. For short requests the block's inference
MatMuls then put the weights first (W [out, in] @ x^T), which oneDNN's bfloat16 (AMX) kernels
read as stored, where x @ W [in, out] has them repack W on every call; large requests multiply
activations first (x @ W^T), where the repacking pays off (see docs/benchmarks.md, serving).

>>> import numpy as np
>>> training = {n: np.zeros((2, 1) + shape("attention", n, {"hidden_size": 4}))
...             for n in BLOCK_WEIGHT_SHAPES["attention"]}
>>> to_serving("attention", training)["qkv_kernel"].shape
(2, 1, 12, 4)
"""

import numpy as np

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


SERVING_WEIGHT_SHAPES = {
    "attention": {
        "qkv_kernel": ("qkv_size", "hidden_size"),
        "qkv_bias": ("qkv_size",),
        "output_kernel": ("hidden_size", "hidden_size"),
        "output_bias": ("hidden_size",),
        "layer_norm_gamma": ("hidden_size",),
        "layer_norm_beta": ("hidden_size",),
    },
    "ffn": {
        "intermediate_kernel": ("intermediate_size", "hidden_size"),
        "intermediate_bias": ("intermediate_size",),
        "output_kernel": ("hidden_size", "intermediate_size"),
        "output_bias": ("hidden_size",),
        "layer_norm_gamma": ("hidden_size",),
        "layer_norm_beta": ("hidden_size",),
    },
}
LAYOUTS = {"training": BLOCK_WEIGHT_SHAPES, "serving": SERVING_WEIGHT_SHAPES}
QKV_NAMES = ("query", "key", "value")


def shape(kind, name, sizes, layout="training"):
    """The shape of weight `name` of `kind` ("attention" or "ffn") in `layout` for `sizes`
    (field -> int; "qkv_size", 3 * hidden_size, is derived)."""
    sizes = dict(sizes)
    if "hidden_size" in sizes:
        sizes["qkv_size"] = 3 * sizes["hidden_size"]
    return tuple(sizes[field] for field in LAYOUTS[layout][kind][name])


def to_serving(kind, weights):
    """{name: array [..., *shape]} of `kind` in the training layout -> the same weights in the
    serving layout (numpy arrays; leading stack axes kept)."""
    weights = {k: np.asarray(v) for k, v in weights.items()}
    if kind == "attention":
        qkv = [weights.pop(f"{n}_kernel") for n in QKV_NAMES]
        weights["qkv_kernel"] = np.concatenate(qkv, axis=-1)
        weights["qkv_bias"] = np.concatenate([weights.pop(f"{n}_bias") for n in QKV_NAMES], -1)
    serving = {}
    for name in SERVING_WEIGHT_SHAPES[kind]:
        value = weights[name]
        serving[name] = np.swapaxes(value, -1, -2) if name.endswith("_kernel") else value
    return serving
