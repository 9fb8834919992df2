"""Fine-tuning through the runner equals a plain training loop written here, for every task kind.

From the same initial weights (the model a `do_train=False` run of the same settings saves) and
on the same batches (`inputs.train_dataset`, the seeded row stream), a loop that computes the
head, the loss, global-norm clipping, the learning-rate schedule and bias-corrected AdamW by hand
(the formulas of the original `optimization.py` plus Adam's bias correction, as torch's AdamW and
Hugging Face's fine-tuning scripts) must reach the weights `run_finetuning` reaches (to 2e-5;
the loops differ by about 3e-6 after 12 steps, the original's optimizer without bias correction by
more than 2e-3). Only the backbone is shared: its forward and backward passes are checked
against Hugging Face and the original elsewhere (tests/convert, tests/model).

These catch a regression in the runner, the heads, the losses or the optimizer even when both
runs are below a baseline, which `test_learns.py` (learning above a baseline) cannot.
"""

import re

import numpy as np
import tensorflow as tf

from albert_tf.finetune import inputs
from albert_tf.finetune.params import FinetuneParams
from albert_tf.finetune.runner import MODEL_FILE, run_finetuning

STEPS = 12
SETTINGS = dict(
    preset="albert_tiny",  # hidden and attention dropout 0
    optimizer="adamw",
    learning_rate=1e-3,
    warmup_steps=3,
    weight_decay_rate=0.01,
    clip_norm=1.0,
    classifier_dropout=0.0,
    train_batch_size=16,
    eval_batch_size=64,
    num_train_steps=STEPS,
    save_checkpoints_steps=STEPS,
    keep_checkpoint_max=1,
    precision="float32",
    seed=5,
    verbose=0,
)
# AdamW's constants (the original's AdamWeightDecayOptimizer) and its decay exclusions.
BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-6
NO_DECAY = re.compile(r"bias|gamma|beta|LayerNorm|layer_norm")


# ----------------------------------------------------------------------------- the plain loop
def _cross_entropy(labels, logits):
    """Per-row softmax cross-entropy, written out."""
    log_probabilities = logits - tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
    return -tf.gather(log_probabilities, labels, batch_dims=len(labels.shape))


def _loss(kind, backbone, kernel, bias, x, y):
    """The task's loss from the backbone's outputs and the head's kernel and bias."""
    if kind == "race":  # [B, 4, S] -> one score per choice from the pooled [CLS] vector
        flat = {
            k: tf.reshape(x[k], [-1, x[k].shape[-1]])
            for k in ("input_word_ids", "input_mask", "input_type_ids")
        }
        pooled = backbone(flat, training=True)["pooled_output"]
        scores = tf.reshape(tf.matmul(pooled, kernel) + bias, [-1, x["input_word_ids"].shape[1]])
        return tf.reduce_mean(_cross_entropy(tf.cast(y, tf.int32), scores))
    outputs = backbone(x, training=True)
    if kind == "classification":
        logits = tf.matmul(outputs["pooled_output"], kernel) + bias
        return tf.reduce_mean(_cross_entropy(tf.cast(y, tf.int32), logits))
    logits = tf.einsum("bsh,hc->bsc", outputs["sequence_output"], kernel) + bias
    if kind == "token_classification":  # the first piece of each word carries its tag; -1: none
        labelled = tf.not_equal(y, -1)
        losses = _cross_entropy(tf.maximum(tf.cast(y, tf.int32), 0), logits)
        weights = tf.cast(labelled, tf.float32)
        return tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
    # SQuAD v1.1: the mean of the start and end cross-entropies (the original's run_squad)
    start = _cross_entropy(tf.cast(y["start_positions"], tf.int32), logits[..., 0])
    end = _cross_entropy(tf.cast(y["end_positions"], tf.int32), logits[..., 1])
    return (tf.reduce_mean(start) + tf.reduce_mean(end)) / 2.0


def _learning_rate(step, settings):
    """Linear warmup, then linear decay to 0 at num_train_steps (the original's schedule)."""
    peak, warmup, total = (
        settings[k] for k in ("learning_rate", "warmup_steps", "num_train_steps")
    )
    if step < warmup:
        return peak * step / warmup
    return peak * (1.0 - min(step, total) / total)


def plain_finetune(kind, model, batches, settings, bias_correction=True):
    """Trains `model`'s backbone and head weights in place with the loop above."""
    head = [model.logits.kernel, model.logits.bias]
    trained_bias = model.logits.bias.trainable  # SQuAD's position bias is not trained
    variables = list(model.backbone.trainable_variables) + head[: 1 + trained_bias]
    slots = [(np.zeros(v.shape, np.float32), np.zeros(v.shape, np.float32)) for v in variables]

    @tf.function(reduce_retracing=True)
    def loss_and_gradients(x, y):
        with tf.GradientTape() as tape:
            loss = _loss(kind, model.backbone, head[0], head[1], x, y)
        gradients = tape.gradient(loss, variables)
        return loss, [None if g is None else tf.convert_to_tensor(g) for g in gradients]

    for step, (x, y) in enumerate(batches):
        _, gradients = loss_and_gradients(x, y)
        gradients = [None if g is None else g.numpy() for g in gradients]
        norm = np.sqrt(
            sum(float(np.sum(g.astype(np.float64) ** 2)) for g in gradients if g is not None)
        )
        clip = min(1.0, settings["clip_norm"] / max(norm, 1e-12))
        rate = _learning_rate(step, settings)
        t = step + 1
        for variable, gradient, (m, v) in zip(variables, gradients, slots):
            if gradient is None:  # not on the loss' path (the pooler of sequence heads)
                continue
            g = gradient * clip
            m[...] = BETA_1 * m + (1 - BETA_1) * g
            v[...] = BETA_2 * v + (1 - BETA_2) * g * g
            m_hat, v_hat = (m / (1 - BETA_1**t), v / (1 - BETA_2**t)) if bias_correction else (m, v)
            update = m_hat / (np.sqrt(v_hat) + EPSILON)
            if not NO_DECAY.search(variable.path):
                update = update + settings["weight_decay_rate"] * variable.numpy()
            variable.assign(variable.numpy() - rate * update)


# ----------------------------------------------------------------------------- the comparison
def _params(output_dir, spm_model_file, **overrides):
    return FinetuneParams(
        output_dir=str(output_dir), spm_model_file=spm_model_file, **{**SETTINGS, **overrides}
    )


def _compare(make_task, tmp_path, spm_model_file, **overrides):
    """Runs the library and the plain loop from the same initial model; returns (the library's
    trained model, the task, the batches, the settings)."""
    from albert_tf.convert.checkpoint import load_head_model

    initial_run = tmp_path / "initial"
    run_finetuning(_params(initial_run, spm_model_file, do_train=False, **overrides), make_task())
    task = make_task()
    results = run_finetuning(_params(tmp_path / "run", spm_model_file, **overrides), task)
    settings = {**SETTINGS, **overrides}
    batches = list(
        inputs.train_dataset(
            task.features("train"),
            settings["train_batch_size"],
            settings["seed"],
            transform=task.input_transform(),
            trim=True,
        ).take(STEPS)
    )
    plain = load_head_model(str(initial_run / MODEL_FILE))
    initial = plain.get_weights()
    plain_finetune(task.kind, plain, batches, settings)
    library = results["model"]
    names = [w.path for w in library.weights]
    assert names == [w.path for w in plain.weights]
    moved = max(float(np.abs(a - b).max()) for a, b in zip(plain.get_weights(), initial))
    assert moved > 1e-3  # the loop did train (an Adam step moves a weight by about the rate)
    for name, a, b in zip(names, library.get_weights(), plain.get_weights()):
        if task.kind == "race" and name.endswith("logits/bias"):
            # Adds one value to every choice: no softmax over the choices depends on it, its
            # gradient is rounding noise, which Adam turns into steps (different in each loop).
            continue
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=0, err_msg=name)
    return library, task, batches, settings


def test_classification_equals_the_plain_loop(spm_model_file, tmp_path):
    from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask

    def make_task():
        return SentenceClassificationTask(ClassificationData(task_name="docstring-source"))

    library, task, batches, settings = _compare(
        make_task, tmp_path, spm_model_file, max_seq_length=32
    )
    # The comparison would see a changed optimizer: without Adam's bias correction (the
    # original's AdamWeightDecay) the same loop ends far from the library's weights.
    from albert_tf.convert.checkpoint import load_head_model

    other = load_head_model(str(tmp_path / "initial" / MODEL_FILE))
    plain_finetune(task.kind, other, batches, settings, bias_correction=False)
    differences = [np.abs(a - b).max() for a, b in zip(library.get_weights(), other.get_weights())]
    assert max(differences) > 100 * 2e-5


def test_token_classification_equals_the_plain_loop(spm_model_file, tmp_path):
    from albert_tf.data import conll
    from albert_tf.data.docstring_entities import docstring_code_splits
    from albert_tf.finetune.tagging import TaggingData, TokenClassificationTask

    # The tag set, for the run without training (it reads no training data to find it in).
    labels = conll.tag_vocabulary([t for doc in docstring_code_splits()["train"] for _, t in doc])
    _compare(
        lambda: TokenClassificationTask(TaggingData(task_name="docstring-code", labels=labels)),
        tmp_path,
        spm_model_file,
        max_seq_length=32,
    )


def test_squad_equals_the_plain_loop(spm_model_file, tmp_path):
    from albert_tf.data.docstring_qa import write_docstring_squad
    from albert_tf.finetune.squad import SquadData, SquadTask

    train, dev = str(tmp_path / "train.json"), str(tmp_path / "dev.json")
    write_docstring_squad(train, dev, max_paragraphs=60)
    data = dict(train_file=train, predict_file=dev, doc_stride=16, max_query_length=16)
    _compare(lambda: SquadTask(SquadData(**data)), tmp_path, spm_model_file, max_seq_length=48)


def test_multiple_choice_equals_the_plain_loop(spm_model_file, tmp_path):
    from albert_tf.data.docstring_race import write_docstring_race
    from albert_tf.finetune.race import RaceData, RaceTask

    write_docstring_race(str(tmp_path / "race"), max_articles=60)
    _compare(
        lambda: RaceTask(RaceData(data_dir=str(tmp_path / "race"), max_qa_length=16)),
        tmp_path,
        spm_model_file,
        max_seq_length=48,
        train_batch_size=8,
    )
