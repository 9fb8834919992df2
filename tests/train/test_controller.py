"""The training controller with a task that is not ALBERT (linear regression, in process): it logs
and summarises that task's own metrics, stops on a NaN loss keeping the last good checkpoint, and
a run preempted by SIGTERM resumes to the weights of an uninterrupted one."""

import glob
import logging
import os
import re
import signal
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf
from train_support import checkpoint_values

from albert_tf.train import checkpointing, summaries
from albert_tf.train.controller import Action, Controller, NonFiniteLossError
from albert_tf.train.loop import Trainer
from albert_tf.train.task_api import Task

BATCH, LEARNING_RATE = 8, 0.05
RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 3)).astype("float32")
Y = (X @ np.array([1.5, -2.0, 0.5], "float32") + 0.3).astype("float32")


class LinearRegression(Task):
    """Squared-error regression; metrics mse and mae, shown as the base class formats them."""

    stat_keys = ("squared_error", "absolute_error", "examples")

    def normalizers(self, batch):
        return {"examples": tf.cast(tf.shape(batch["y"])[0], tf.float32)}

    def loss_and_statistics(self, model, batch, totals, training=True):
        error = model(batch["x"], training=training)[:, 0] - batch["y"]
        stats = {
            "squared_error": tf.reduce_sum(tf.square(error)),
            "absolute_error": tf.reduce_sum(tf.abs(error)),
            "examples": tf.cast(tf.size(error), tf.float32),
        }
        return stats["squared_error"] / totals["examples"], stats

    def metrics(self, stats):
        examples = float(stats["examples"])
        return {
            "mse": float(stats["squared_error"]) / examples,
            "mae": float(stats["absolute_error"]) / examples,
        }


def _controller(directory, y=Y, actions=(), **settings):
    """A Controller over a fresh zero-initialised linear model trained with Adam."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="zeros")]
        )
        optimizer = keras.optimizers.Adam(LEARNING_RATE)
    trainer = Trainer(
        strategy, LinearRegression(), model, optimizer, clip_norm=0, jit_compile=False
    )
    data = tf.data.Dataset.from_tensor_slices({"x": X, "y": y}).batch(BATCH)
    checkpointer = checkpointing.Checkpointer(
        os.path.join(directory, "checkpoints"), model, optimizer
    )
    checkpointer.restore_latest()
    logs = os.path.join(directory, "summaries")
    controller = Controller(
        trainer,
        checkpointer,
        global_batch_size=BATCH,
        learning_rate=lambda step: LEARNING_RATE,
        train_writer=summaries.SummaryWriter(logs, "train"),
        eval_writer=summaries.SummaryWriter(logs, "eval"),
        eval_dataset=strategy.experimental_distribute_dataset(data),
        actions=actions,
        **settings,
    )

    def train(step):  # the input from `step` on
        return iter(strategy.experimental_distribute_dataset(data.repeat().skip(step)))

    return controller, train


def _tags(logdir):
    """{tag: [steps]} of the events under `logdir`."""
    tags = {}
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return tags


def _adam_reference(steps):
    """(mse of each step before its update, mae likewise): Adam on the batches, in NumPy."""
    w, b = np.zeros(3), 0.0
    m, v = np.zeros(4), np.zeros(4)
    mse, mae = [], []
    for t in range(1, steps + 1):
        i = (t - 1) % (len(X) // BATCH)
        x, y = X[i * BATCH : (i + 1) * BATCH], Y[i * BATCH : (i + 1) * BATCH]
        error = x @ w + b - y
        mse.append(np.mean(error**2))
        mae.append(np.mean(np.abs(error)))
        gradient = np.append(2 * x.T @ error / BATCH, 2 * np.mean(error))
        m = 0.9 * m + 0.1 * gradient
        v = 0.999 * v + 0.001 * gradient**2
        alpha = LEARNING_RATE * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        update = alpha * m / (np.sqrt(v) + 1e-7)
        w, b = w - update[:3], b - update[3]
    return np.array(mse), np.array(mae)


def test_logs_and_summarises_the_tasks_own_metrics(tmp_path, caplog):
    controller, train = _controller(
        str(tmp_path), total_steps=6, steps_per_loop=4, save_every=4, eval_every=3
    )
    with caplog.at_level(logging.INFO, logger="absl"):
        last = controller.train(train)
    lines = [r.getMessage() for r in caplog.records if r.name == "absl"]
    progress = [line for line in lines if line.startswith("step ")]
    # loops end at the eval (3) and checkpoint (4) boundaries, then at the last step
    pattern = (
        r"step (\d)/6 \(\d+%\) \| mse ([\d.e+-]+) \| mae ([\d.e+-]+) \| lr 5\.00e-02 \| "
        r"grad_norm [\d.]+ \| \d+ examples/s \| ETA \d+s"
    )
    parsed = [re.fullmatch(pattern, line) for line in progress]
    assert all(parsed), progress
    assert [int(m[1]) for m in parsed] == [3, 4, 6]
    mse, mae = _adam_reference(6)
    for m, (begin, end) in zip(parsed, [(0, 3), (3, 4), (4, 6)]):  # each loop's mean
        np.testing.assert_allclose(float(m[2]), mse[begin:end].mean(), rtol=1e-3)
        np.testing.assert_allclose(float(m[3]), mae[begin:end].mean(), rtol=1e-3)
    (evaluated,) = [line for line in lines if line.startswith("eval at step")]
    assert re.fullmatch(
        r"eval at step 3 \(8 batches, \d+\.\ds\): mse [\d.]+ \| mae [\d.]+", evaluated
    )
    assert last["mse"] == pytest.approx(mse[4:].mean(), rel=1e-5)
    assert sorted(last) == ["gradient_norm", "mae", "mse"]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == [
        "checkpoint",
        "ckpt-4.data-00000-of-00001",
        "ckpt-4.index",
        "ckpt-6.data-00000-of-00001",
        "ckpt-6.index",
    ]
    evaluation = controller.evaluate()  # what a runner's final evaluation returns
    assert sorted(evaluation) == ["eval_steps", "global_step", "mae", "mse"]
    assert (evaluation["eval_steps"], evaluation["global_step"]) == (8, 6)
    train_tags = _tags(str(tmp_path / "summaries" / "train"))
    assert {k: sorted(v) for k, v in train_tags.items()} == {
        name: [3, 4, 6]
        for name in ("mse", "mae", "learning_rate", "gradient_norm", "examples_per_second")
    }
    assert _tags(str(tmp_path / "summaries" / "eval")) == {"mse": [3, 6], "mae": [3, 6]}


def test_a_nan_loss_stops_and_names_the_last_good_checkpoint(tmp_path, caplog):
    y = Y.copy()
    y[4 * BATCH + 2] = np.nan  # in the batch of step 5
    controller, train = _controller(
        str(tmp_path), y=y, total_steps=8, steps_per_loop=2, save_every=2
    )
    with pytest.raises(NonFiniteLossError) as error:
        controller.train(train)
    last_good = str(tmp_path / "checkpoints" / "ckpt-4")
    assert str(error.value) == (
        f"the loss or gradient norm became NaN or Inf at step 5; stopping. The newest checkpoint "
        f"({last_good}) is the last good one. Lower --learning_rate, check --clip_norm, or "
        "inspect the input data"
    )
    values = checkpoint_values(last_good)
    assert values and all(np.isfinite(v).all() for v in values.values())
    with pytest.raises(NonFiniteLossError, match="model weights are NaN or Inf at step 6"):
        controller.save()  # the diverged weights are never saved


def test_a_preempted_run_resumes_to_the_uninterrupted_weights(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGTERM is caught in the main thread only")  # else it would end pytest
    settings = dict(total_steps=8, steps_per_loop=3, save_every=4, eval_every=0)
    reference, train = _controller(str(tmp_path / "reference"), **settings)
    reference.train(train)

    directory = str(tmp_path / "preempted")
    preempt = Action(lambda step: os.kill(os.getpid(), signal.SIGTERM), every=5)
    controller, train = _controller(directory, actions=[preempt], **settings)
    with pytest.raises(checkpointing.Preempted) as stop:
        controller.train(train)
    assert (stop.value.step, os.path.basename(stop.value.checkpoint)) == (5, "ckpt-5")

    resumed, train = _controller(directory, **settings)  # restores ckpt-5
    assert resumed.trainer.step == 5
    resumed.train(train)
    assert resumed.trainer.step == 8
    ours = checkpoint_values(os.path.join(directory, "checkpoints", "ckpt-8"))
    theirs = checkpoint_values(str(tmp_path / "reference" / "checkpoints" / "ckpt-8"))
    assert sorted(ours) == sorted(theirs)
    for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
