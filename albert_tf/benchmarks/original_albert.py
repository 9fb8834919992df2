"""The original google-research/albert pretraining step as a benchmark peer, run from a checkout
of its released code under TensorFlow 2's `tf.compat.v1` (graph and session).

Nothing of the original is shipped with albert_tf: `load(code_dir)` imports `modeling.py`,
`lamb_optimizer.py` and `optimization.py` from a checkout at run time (as the package `albert`,
which is how they import each other), and takes `get_masked_lm_output`,
`get_sentence_order_output` and `gather_indexes` out of its `run_pretraining.py` (parsed with
`ast`, so its flags and TPUEstimator imports never run). The original needs what TensorFlow 2
no longer has; while its modules load, this module puts stand-ins written here with
`tf.compat.v1` ops into `sys.modules`, and removes them afterwards:

    tensorflow.contrib.layers.layer_norm   LayerNorm over the last axis (beta, gamma; eps 1e-12)
    tensorflow.contrib.tpu                 CrossShardOptimizer refuses (only for use_tpu=True)
    tf.compat.v1.layers.dense              a kernel and a bias (Keras 3 removed it), seen only
                                           by the original's modules

`pretraining_step` builds the original's graph as its `model_fn` does in training (AlbertModel
with `is_training=True` and `use_one_hot_embeddings=False`, as on CPU, masked-LM and
sentence-order heads, `optimization.create_optimizer` with LAMB, global-norm clipping to 1.0)
in its own `tf.Graph`, so the process stays eager for everything else, and returns a function
that runs one training step in a `tf.compat.v1.Session`.

    git clone https://github.com/google-research/albert /tmp/albert_original

>>> original = load("/tmp/albert_original")                          # doctest: +SKIP
>>> step = pretraining_step(original, config, features)              # doctest: +SKIP
>>> loss = step()                                                    # doctest: +SKIP
"""

import ast
import contextlib
import importlib
import os
import sys
import types

import tensorflow as tf

tf1 = tf.compat.v1

FILES = ("modeling.py", "lamb_optimizer.py", "optimization.py", "run_pretraining.py")
# What the pretraining step takes from run_pretraining.py.
RUN_PRETRAINING_FUNCTIONS = ("gather_indexes", "get_masked_lm_output", "get_sentence_order_output")
# The original's feature names (its input_fn's), with their dtypes.
FEATURES = {
    "input_ids": tf.int32,
    "input_mask": tf.int32,
    "segment_ids": tf.int32,
    "masked_lm_positions": tf.int32,
    "masked_lm_ids": tf.int32,
    "masked_lm_weights": tf.float32,
    "next_sentence_labels": tf.int32,
}
PACKAGE = "albert"  # the original's modules import each other as `from albert import ...`


# ----------------------------------------------------------------------------- stand-ins
def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    """contrib's `layer_norm` as the original calls it: normalised over the last axis, with
    beta and gamma variables of the last axis' size in scope `scope` (default "LayerNorm")."""
    if begin_norm_axis != -1 or begin_params_axis != -1:
        raise ValueError("this stand-in normalises over the last axis only")
    with tf1.variable_scope(scope, default_name="LayerNorm"):
        shape = inputs.shape[-1:]
        beta = tf1.get_variable("beta", shape, initializer=tf1.zeros_initializer())
        gamma = tf1.get_variable("gamma", shape, initializer=tf1.ones_initializer())
        mean, variance = tf.nn.moments(inputs, [-1], keepdims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, 1e-12)


def dense(inputs, units, activation=None, kernel_initializer=None, name=None):
    """`tf.compat.v1.layers.dense` for rank-2 inputs: variables `kernel` and `bias` in scope
    `name` (default "dense")."""
    inputs = tf.convert_to_tensor(inputs)
    if inputs.shape.rank != 2:
        raise ValueError("this stand-in takes rank-2 inputs only")
    with tf1.variable_scope(name, default_name="dense"):
        kernel = tf1.get_variable(
            "kernel", [inputs.shape[-1], units], initializer=kernel_initializer
        )
        bias = tf1.get_variable("bias", [units], initializer=tf1.zeros_initializer())
        outputs = tf.nn.bias_add(tf.matmul(inputs, kernel), bias)
        return activation(outputs) if activation is not None else outputs


class _CrossShardOptimizer:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the benchmark runs the original with use_tpu=False")


def _compat_v1_with_layers():
    """A module forwarding to `tf.compat.v1`, with `layers.dense` (`dense`) added."""
    module = types.ModuleType("tensorflow.compat.v1")
    module.__getattr__ = lambda name: getattr(tf1, name)
    module.layers = types.SimpleNamespace(dense=dense)
    return module


@contextlib.contextmanager
def _stand_ins(code_dir):
    """`tensorflow.contrib` stand-ins and the package `albert` (at `code_dir`) in
    sys.modules while the original's modules import; the earlier entries afterwards."""
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.layers = types.ModuleType("tensorflow.contrib.layers")
    contrib.layers.layer_norm = layer_norm
    contrib.tpu = types.ModuleType("tensorflow.contrib.tpu")
    contrib.tpu.CrossShardOptimizer = _CrossShardOptimizer
    package = types.ModuleType(PACKAGE)
    package.__path__ = [os.path.abspath(code_dir)]
    added = {
        "tensorflow.contrib": contrib,
        "tensorflow.contrib.layers": contrib.layers,
        "tensorflow.contrib.tpu": contrib.tpu,
        PACKAGE: package,
    }
    names = list(added) + [f"{PACKAGE}.{f[:-3]}" for f in FILES]
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    sys.modules.update(added)
    try:
        yield
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def _functions_of(path, names, namespace):
    """The top-level functions `names` of the Python file `path`, defined in `namespace`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in found}
    if missing:
        raise ValueError(f"{path} has no function(s) {', '.join(sorted(missing))}")
    exec(compile(ast.Module(body=found, type_ignores=[]), path, "exec"), namespace)
    return types.SimpleNamespace(**{name: namespace[name] for name in names})


def load(code_dir):
    """The original's modules from a checkout at `code_dir`: a namespace with `modeling`,
    `optimization` and run_pretraining.py's `get_masked_lm_output`,
    `get_sentence_order_output` (and `gather_indexes`). Raises FileNotFoundError naming a
    missing file."""
    for name in FILES:
        if not os.path.isfile(os.path.join(code_dir, name)):
            raise FileNotFoundError(
                f"{code_dir} has no {name}: not a google-research/albert checkout"
            )
    compat = _compat_v1_with_layers()
    with _stand_ins(code_dir):
        modules = {
            name: importlib.import_module(f"{PACKAGE}.{name}")
            for name in ("modeling", "lamb_optimizer", "optimization")
        }
    for module in modules.values():
        module.tf = compat  # their functions look `tf` up when they run
    heads = _functions_of(
        os.path.join(code_dir, "run_pretraining.py"),
        RUN_PRETRAINING_FUNCTIONS,
        {"tf": compat, "modeling": modules["modeling"]},
    )
    return types.SimpleNamespace(
        modeling=modules["modeling"], optimization=modules["optimization"], **vars(heads)
    )


# ----------------------------------------------------------------------------- the step
def pretraining_step(
    original,
    config,
    features,
    learning_rate=0.00176,
    num_train_steps=125000,
    num_warmup_steps=3125,
    seed=0,
):
    """A zero-argument function running one training step of the original (masked-LM +
    sentence-order loss, LAMB update) on `features` (numpy arrays under the original's
    feature names, `FEATURES`) and returning the loss.

    `original`: `load`'s namespace; `config`: an `AlbertConfig` (given to the original as its
    albert_config.json dict)."""
    albert_config = original.modeling.AlbertConfig.from_dict(config.to_json_dict("original"))
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        inputs = {
            name: tf1.placeholder(dtype, features[name].shape, name=name)
            for name, dtype in FEATURES.items()
        }
        model = original.modeling.AlbertModel(
            config=albert_config,
            is_training=True,
            input_ids=inputs["input_ids"],
            input_mask=inputs["input_mask"],
            token_type_ids=inputs["segment_ids"],
            use_one_hot_embeddings=False,
        )
        masked_lm_loss, _, _ = original.get_masked_lm_output(
            albert_config,
            model.get_sequence_output(),
            model.get_embedding_table(),
            inputs["masked_lm_positions"],
            inputs["masked_lm_ids"],
            inputs["masked_lm_weights"],
        )
        sentence_order_loss, _, _ = original.get_sentence_order_output(
            albert_config, model.get_pooled_output(), inputs["next_sentence_labels"]
        )
        loss = masked_lm_loss + sentence_order_loss
        train_op = original.optimization.create_optimizer(
            loss,
            learning_rate,
            num_train_steps,
            num_warmup_steps,
            use_tpu=False,
            optimizer="lamb",
        )
        initialize = tf1.global_variables_initializer()
    session = tf1.Session(graph=graph)
    session.run(initialize)
    feed = {inputs[name]: features[name] for name in FEATURES}

    def step():
        return float(session.run([train_op, loss], feed_dict=feed)[1])

    return step
