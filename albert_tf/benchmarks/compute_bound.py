"""The compute bound of an ALBERT forward pass: its matmul FLOPs over this CPU's matmul rate.

`forward_flops` counts the multiply-adds (x2) of one forward pass over `tokens` positions of
one sequence: the embedding projection, every block's query/key/value, attention scores and
context, attention output and FFN matmuls, and the pooler (elementwise work is left out: it is
a small fraction of the FLOPs). `matmul_rate` measures how many FLOP/s TensorFlow's MatMul
reaches in `dtype` on a large product (the best case of this CPU, all its cores). Their ratio is
the time a request would take if it ran only matmuls at full speed; a served request's
latency over it says how much is overhead.

A short request is bound by reading the weights rather than by FLOPs: ALBERT shares one block's
weights across its layers, but they exceed a core's L2 cache, so every layer reads them again
(`weight_bytes` per request) at the rate `read_rate` measures.

>>> from albert_tf.config import AlbertConfig
>>> config = AlbertConfig(vocab_size=100, embedding_size=4, hidden_size=8,
...                       num_attention_heads=2, intermediate_size=16, num_hidden_layers=2)
>>> forward_flops(config, tokens=3)
7040
>>> weight_bytes(config, bytes_per_value=2)
2240
"""

import time

import numpy as np


def forward_flops(config, tokens):
    """Matmul FLOPs (2 per multiply-add) of one forward pass of `config` over one sequence of
    `tokens` positions, with the pooler."""
    hidden, inner = config.hidden_size, config.intermediate_size
    per_token_block = 2 * (4 * hidden * hidden + 2 * hidden * inner)  # qkv, output, FFN
    attention = 2 * 2 * tokens * tokens * hidden  # scores and context, over all heads
    blocks = config.num_hidden_layers * config.inner_group_num
    embedding = 2 * tokens * config.embedding_size * hidden
    pooler = 2 * hidden * hidden
    return embedding + blocks * (tokens * per_token_block + attention) + pooler


def matmul_rate(dtype="float32", rows=2048, inner=768, columns=3072, seconds=1.0):
    """FLOP/s of a [rows, inner] x [inner, columns] MatMul in `dtype` ("float32" or
    "bfloat16"), the median of repeated calls for about `seconds`."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    a = tf.cast(rng.normal(size=(rows, inner)).astype("float32"), dtype)
    b = tf.Variable(tf.cast(rng.normal(size=(inner, columns)).astype("float32"), dtype))
    product = tf.function(lambda x: tf.matmul(x, b))
    for _ in range(3):
        product(a).numpy()
    times = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(times) < 5:
        start = time.perf_counter()
        product(a).numpy()
        times.append(time.perf_counter() - start)
    return 2 * rows * inner * columns / float(np.median(times))


def weight_bytes(config, bytes_per_value):
    """Bytes of the matmul weights one forward pass reads: every block's kernels once per layer
    application, the embedding projection and the pooler once."""
    hidden, inner = config.hidden_size, config.intermediate_size
    block = 4 * hidden * hidden + 2 * hidden * inner
    blocks = config.num_hidden_layers * config.inner_group_num
    values = blocks * block + config.embedding_size * hidden + hidden * hidden
    return values * bytes_per_value


def read_rate(megabytes=16, seconds=0.5):
    """Bytes/s at which this CPU sums a float32 array of `megabytes` held in memory (all cores;
    16 MB, about one ALBERT-base block in bfloat16, comes from the last-level cache)."""
    import tensorflow as tf

    values = tf.Variable(tf.ones([megabytes * 2**20 // 4], tf.float32))
    total = tf.function(lambda: tf.reduce_sum(values))
    for _ in range(3):
        total().numpy()
    times = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(times) < 5:
        start = time.perf_counter()
        total().numpy()
        times.append(time.perf_counter() - start)
    return megabytes * 2**20 / float(np.median(times))
