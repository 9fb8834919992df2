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


def _controller(directory, y=Y, actions=(), x=X, task=None, input_hook=None, **settings):
    """A Controller over a fresh zero-initialised linear model trained with Adam; `input_hook`
    maps the training input (from its position on) to another dataset."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="zeros")]
        )
        optimizer = keras.optimizers.Adam(LEARNING_RATE)
    trainer = Trainer(
        strategy, task or LinearRegression(), model, optimizer, clip_norm=0, jit_compile=False
    )
    data = tf.data.Dataset.from_tensor_slices({"x": x, "y": y}).batch(BATCH)
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

    def train(position):  # the input from batch `position` on
        dataset = data.repeat().skip(position)
        if input_hook is not None:
            dataset = input_hook(dataset)
        return iter(strategy.experimental_distribute_dataset(dataset))

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
    )  # max_consecutive_recoveries=0
    with pytest.raises(NonFiniteLossError) as error:
        controller.train(train)
    last_good = str(tmp_path / "checkpoints" / "ckpt-4")
    assert str(error.value) == (
        "training diverged (loss or gradient norm NaN or Inf at step 5) and "
        f"--max_consecutive_recoveries=0; stopping. The newest checkpoint ({last_good}) is the "
        "last good one. Lower --learning_rate, check --clip_norm, or inspect the input data"
    )
    values = checkpoint_values(last_good)
    assert values and all(np.isfinite(v).all() for v in values.values())
    # The loop ended at the bad step; the diverged weights are never saved.
    with pytest.raises(NonFiniteLossError, match="model weights are NaN or Inf at step 5"):
        controller.save()


def _preempted_then_resumed(tmp_path, settings, **preempting):
    """Runs `settings` uninterrupted and with `preempting` (which sends SIGTERM), then resumes the
    latter to the end; checks the final weights are equal; returns the `Preempted` stop."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGTERM is caught in the main thread only")  # else it would end pytest
    reference, train = _controller(str(tmp_path / "reference"), **settings)
    reference.train(train)
    directory = str(tmp_path / "preempted")
    controller, train = _controller(directory, **preempting, **settings)
    with pytest.raises(checkpointing.Preempted) as stop:
        controller.train(train)
    assert os.path.basename(stop.value.checkpoint) == f"ckpt-{stop.value.step}"
    resumed, train = _controller(directory, **settings)  # restores that checkpoint
    assert resumed.trainer.step == stop.value.step
    resumed.train(train)
    assert resumed.trainer.step == settings["total_steps"]
    _same_final_weights(directory, str(tmp_path / "reference"), settings["total_steps"])
    return stop.value


def test_a_preempted_run_resumes_to_the_uninterrupted_weights(tmp_path):
    settings = dict(total_steps=8, steps_per_loop=3, save_every=4, eval_every=0)
    preempt = Action(lambda step: os.kill(os.getpid(), signal.SIGTERM), every=5)
    assert _preempted_then_resumed(tmp_path, settings, actions=[preempt]).step == 5


def _same_final_weights(directory, reference, step=8):
    """Asserts the model and optimizer of two runs' ckpt-`step` are equal; returns ours."""
    ours = checkpoint_values(os.path.join(directory, "checkpoints", f"ckpt-{step}"))
    theirs = checkpoint_values(os.path.join(reference, "checkpoints", f"ckpt-{step}"))
    for key in theirs:
        if "skipped_batches" not in key and "recoveries" not in key:
            np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    return ours


class LinearRegressionWithLoss(LinearRegression):
    def metrics(self, stats):
        metrics = super().metrics(stats)
        return dict(metrics, loss=metrics["mse"])


@pytest.mark.parametrize("fault", ["nan", "max_loss"])
def test_a_divergence_restores_the_last_checkpoint_and_skips_its_batches(tmp_path, caplog, fault):
    y = Y.copy()
    y[4 * BATCH + 2] = np.nan if fault == "nan" else 1e4  # in the batch of step 5
    settings = dict(total_steps=8, steps_per_loop=2, save_every=2, task=LinearRegressionWithLoss())
    directory = str(tmp_path / "recovered")
    controller, train = _controller(
        directory, y=y, max_consecutive_recoveries=1, max_loss=100.0, **settings
    )
    with caplog.at_level(logging.WARNING, logger="absl"):
        controller.train(train)
    assert controller.trainer.step == 8 and controller.recoveries == 1
    (warning,) = [
        r.getMessage() for r in caplog.records if r.name == "absl" and r.levelno == logging.WARNING
    ]
    failure = (
        "loss or gradient norm NaN or Inf at step 5"
        if fault == "nan"
        else r"mean loss [\d.e+]+ > --max_loss=100 at steps 5-6"
    )
    skipped = 1 if fault == "nan" else 2  # the loop ends at a NaN step, not at a large loss
    assert re.fullmatch(
        rf"Training diverged \({failure}\): restored \S+ckpt-4 and skipped the {skipped} "
        r"batches read since it \(recovery 1 of at most 1 in a row\)",
        warning,
    ), warning
    assert _tags(str(tmp_path / "recovered" / "summaries" / "train"))["recoveries"] == [4]
    # Equal to a run on the data without the skipped batches.
    keep = np.r_[0 : 4 * BATCH, (4 + skipped) * BATCH : len(X)]
    reference = str(tmp_path / "reference")
    clean, train = _controller(reference, x=X[keep], y=Y[keep], **settings)
    clean.train(train)
    ours = _same_final_weights(directory, reference)
    assert int(ours["skipped_batches/.ATTRIBUTES/VARIABLE_VALUE"]) == skipped
    assert int(ours["recoveries/.ATTRIBUTES/VARIABLE_VALUE"]) == 1
    resumed, _ = _controller(directory, **settings)
    assert resumed.checkpointer.input_position == 8 + skipped and resumed.recoveries == 1


def test_divergences_in_a_row_stop_naming_the_steps(tmp_path):
    y = Y.copy()
    y[4 * BATCH :] = np.nan  # every batch from step 5 on
    controller, train = _controller(
        str(tmp_path), y=y, total_steps=8, steps_per_loop=2, save_every=2,
        max_consecutive_recoveries=2,
    )  # fmt: skip
    with pytest.raises(NonFiniteLossError) as error:
        controller.train(train)
    assert str(error.value).startswith(
        "training diverged (loss or gradient norm NaN or Inf at step 5; loss or gradient norm "
        "NaN or Inf at step 5; loss or gradient norm NaN or Inf at step 5) and 3 divergences "
        f"in a row (--max_consecutive_recoveries=2); stopping. The newest checkpoint "
        f"({tmp_path / 'checkpoints' / 'ckpt-4'}) is the last good one."
    )
    assert controller.recoveries == 2


def test_sigterm_in_a_long_loop_stops_at_the_next_step(tmp_path):
    settings = dict(total_steps=40, steps_per_loop=1000, save_every=100, eval_every=0)

    def kill_at_batch_10(dataset):  # SIGTERM while the loop's tf.function runs
        def hook(index, batch):
            def kill(i):
                if int(i) == 10:
                    os.kill(os.getpid(), signal.SIGTERM)
                return i

            return tf.py_function(kill, [index], tf.int64), batch

        return dataset.enumerate().map(hook).map(lambda index, batch: batch)

    stop = _preempted_then_resumed(tmp_path, settings, input_hook=kill_at_batch_10)
    assert 1 <= stop.step < 40  # not at the end of the 40-step loop


def test_profile_steps_write_a_trace(tmp_path, caplog):
    profile = str(tmp_path / "summaries" / "profile")
    controller, train = _controller(
        str(tmp_path), total_steps=4, steps_per_loop=4, save_every=4, profile_steps=(2, 3),
        profile_dir=profile,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="absl"):
        controller.train(train)
    lines = [r.getMessage() for r in caplog.records if r.name == "absl"]
    assert [line.split()[1] for line in lines if line.startswith("step ")] == ["1/4", "3/4", "4/4"]
    assert f"Profiling steps 2-3 into {profile}" in lines
    assert glob.glob(os.path.join(profile, "plugins", "profile", "*", "*.xplane.pb"))
