"""albert_tf.benchmarks.original_albert: the stand-ins for what TensorFlow 2 lacks, and loading a
checkout without running its flag definitions or leaving modules behind.

The checkout here is a small stand-in written by the test with the original's import lines
(the real one is not in the repository: scripts/benchmark_pretraining.py loads it from
--original_code_dir).
"""

import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from albert_tf.benchmarks import original_albert

tf1 = tf.compat.v1

CHECKOUT = {
    "modeling.py": """
        import tensorflow.compat.v1 as tf
        from tensorflow.contrib import layers as contrib_layers

        def layer_norm(input_tensor, name=None):
          return contrib_layers.layer_norm(
              inputs=input_tensor, begin_norm_axis=-1, begin_params_axis=-1, scope=name)

        def pooler(x):
          with tf.variable_scope("pooler"):
            return tf.layers.dense(x, 3, activation=tf.tanh)
    """,
    "lamb_optimizer.py": """
        import tensorflow.compat.v1 as tf

        class LAMBOptimizer(tf.train.Optimizer):
          pass
    """,
    "optimization.py": """
        from albert import lamb_optimizer
        import tensorflow.compat.v1 as tf
        from tensorflow.contrib import tpu as contrib_tpu

        def optimizer_class():
          return lamb_optimizer.LAMBOptimizer
    """,
    "run_pretraining.py": """
        import tensorflow.compat.v1 as tf
        from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver

        flags = tf.flags
        flags.DEFINE_string("original_checkout_flag", None, "Must never be defined.")

        def gather_indexes(sequence_tensor, positions):
          return tf.gather(sequence_tensor, positions)

        def get_masked_lm_output(x):
          return modeling.layer_norm(x, name="mlm")

        def get_sentence_order_output(x):
          return modeling.pooler(x)
    """,
}


def _run(build):
    """Builds `build()` in a fresh graph and returns its value after initialisation."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        output = build()
        initialize = tf1.global_variables_initializer()
        names = sorted(v.name for v in tf1.global_variables())
    with tf1.Session(graph=graph) as session:
        session.run(initialize)
        return session.run(output), names


def test_layer_norm_normalises_the_last_axis_with_beta_and_gamma():
    x = np.random.default_rng(0).normal(size=[2, 3, 8]).astype("float32") * 3 + 1
    value, names = _run(lambda: original_albert.layer_norm(tf.constant(x)))
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(value, expected, atol=1e-5)
    assert names == ["LayerNorm/beta:0", "LayerNorm/gamma:0"]
    with pytest.raises(ValueError, match="last axis"):
        original_albert.layer_norm(tf.constant(x), begin_norm_axis=1)


def test_dense_is_a_kernel_and_a_bias():
    x = np.arange(6, dtype="float32").reshape(2, 3)

    def build():
        with tf1.variable_scope("pooler"):
            out = original_albert.dense(x, 4, activation=tf.nn.relu)
        return out, {v.name: v for v in tf1.global_variables()}

    (value, variables), names = _run(build)
    kernel = variables["pooler/dense/kernel:0"]
    np.testing.assert_allclose(value, np.maximum(x @ kernel, 0), rtol=1e-6)
    assert names == ["pooler/dense/bias:0", "pooler/dense/kernel:0"]


def test_load_takes_the_functions_without_running_the_flags_or_keeping_the_stand_ins(tmp_path):
    for name, text in CHECKOUT.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    before = set(sys.modules)
    original = original_albert.load(str(tmp_path))
    left = [m for m in set(sys.modules) - before if m.startswith(("albert", "tensorflow.contrib"))]
    assert left == []
    assert "original_checkout_flag" not in flags.FLAGS
    assert original.optimization.optimizer_class().__name__ == "LAMBOptimizer"
    x = np.random.default_rng(1).normal(size=[4, 5]).astype("float32")
    (mlm, sop), names = _run(
        lambda: (original.get_masked_lm_output(x), original.get_sentence_order_output(x))
    )
    assert mlm.shape == (4, 5) and sop.shape == (4, 3)
    np.testing.assert_allclose(mlm.mean(-1), 0, atol=1e-5)
    assert names == [
        "mlm/beta:0",
        "mlm/gamma:0",
        "pooler/dense/bias:0",
        "pooler/dense/kernel:0",
    ]


def test_load_names_a_missing_file(tmp_path):
    (tmp_path / "modeling.py").write_text("")
    with pytest.raises(FileNotFoundError, match="has no lamb_optimizer.py"):
        original_albert.load(str(tmp_path))
