"""`Controller`: the outer training loop (orbit style). It knows no model: it runs a `Trainer`'s
loops of steps for any `albert_tf.train.task_api.Task`, logs and summarises the metrics that task
returns, and calls small actions between loops:

* after each loop: stop on a NaN/Inf loss or gradient norm (`NonFiniteLossError`; the newest
  checkpoint is the last good one), one progress line and one train summary;
* `Action`s at multiples of their interval, in order: evaluation (`eval_every`, not at the last
  step: the runner evaluates at the end), checkpoint (`save_every` and the last step), then any
  given ones;
* preemption: after SIGTERM (on any worker) it saves a checkpoint and raises
  `checkpointing.Preempted` (scripts exit with 143; re-running resumes).

Loops end at every action's boundary, so intervals hold whatever `steps_per_loop` is.

>>> controller = Controller(trainer, checkpointer, total_steps=1000, steps_per_loop=100,
...                         global_batch_size=64, learning_rate=schedule, save_every=500,
...                         train_writer=writer)                           # doctest: +SKIP
>>> controller.train(lambda step: iter(dataset.skip(step)))                 # doctest: +SKIP
{'loss': 0.12, ..., 'gradient_norm': 0.9}
"""

import dataclasses
import time
from typing import Callable

import tensorflow as tf
from absl import logging

from albert_tf.train import checkpointing, summaries
from albert_tf.train import strategy as strategy_lib


class NonFiniteLossError(RuntimeError):
    """The loss or gradient norm became NaN or Inf; the newest checkpoint is the last good one."""


@dataclasses.dataclass
class Action:
    """`run(step)` after the loop that ends at a multiple of `every` (0: never), or at the last
    step when `at_last_step`. The controller's loops end at every action's boundary."""

    run: Callable[[int], object]
    every: int = 0
    at_last_step: bool = False

    def due(self, step, total_steps):
        if step == total_steps:
            return self.at_last_step
        return bool(self.every) and step % self.every == 0

    def next_boundary(self, step, total_steps):
        return (step // self.every + 1) * self.every if self.every else total_steps


class Controller:
    """Trains `trainer.task` with `trainer` up to `total_steps`, with the actions above.

    Args:
        trainer: an `albert_tf.train.loop.Trainer` (its strategy, task, model and optimizer).
        checkpointer: an `albert_tf.train.checkpointing.Checkpointer` of that model.
        total_steps: the step to train to (--num_train_steps).
        steps_per_loop: steps per host loop (one progress line and summary each).
        global_batch_size: examples per step, for examples/s.
        learning_rate: step -> learning rate (the schedule), for the log and summaries.
        save_every: checkpoint every this many steps (and at `total_steps`).
        train_writer, eval_writer: `summaries.SummaryWriter`s (eval_writer with eval_dataset).
        eval_dataset: distributed evaluation data for `evaluate` (None: no evaluation).
        eval_every: evaluate every this many steps during training (0: never).
        max_eval_steps: at most this many batches per evaluation.
        actions: further `Action`s, run after the evaluation and checkpoint ones.
    """

    def __init__(
        self,
        trainer,
        checkpointer,
        *,
        total_steps,
        steps_per_loop,
        global_batch_size,
        learning_rate,
        save_every,
        train_writer,
        eval_writer=None,
        eval_dataset=None,
        eval_every=0,
        max_eval_steps=100,
        actions=(),
    ):
        self.trainer = trainer
        self.task = trainer.task
        self.strategy = trainer.strategy
        self.checkpointer = checkpointer
        self.total_steps = total_steps
        self.steps_per_loop = steps_per_loop
        self.global_batch_size = global_batch_size
        self.learning_rate = learning_rate
        self.train_writer = train_writer
        self.eval_writer = eval_writer
        self.eval_dataset = eval_dataset
        self.max_eval_steps = max_eval_steps
        self.workers = strategy_lib.num_workers(self.strategy)
        self.actions = []
        if eval_dataset is not None and eval_every:
            self.actions.append(Action(lambda step: self.evaluate(), every=eval_every))
        self.actions.append(Action(lambda step: self.save(), every=save_every, at_last_step=True))
        self.actions.extend(actions)
        self._flag_sum = None

    # ------------------------------------------------------------------ actions
    def save(self):
        """Saves a checkpoint (after checking the weights are finite); returns its path."""
        if not self.trainer.weights_are_finite():
            raise NonFiniteLossError(
                f"model weights are NaN or Inf at step {self.trainer.step}; not saving. The newest "
                f"checkpoint ({self.checkpointer.latest()}) is the last good one"
            )
        return self.checkpointer.save()

    def evaluate(self):
        """Evaluates on `eval_dataset`; returns the task's eval metrics with eval_steps and
        global_step, after writing the eval summary and logging one line."""
        start, step = time.time(), self.trainer.step
        result = self.trainer.evaluate(self.eval_dataset, self.max_eval_steps)
        metrics = self.task.eval_metrics(result.stats)
        size = self.task.format_eval_size(metrics, result.steps)
        text = self.task.format_eval(metrics)
        metrics["eval_steps"] = result.steps
        metrics["global_step"] = step
        self.eval_writer.scalars(step, {k: metrics[k] for k in self.task.metrics(result.stats)})
        logging.info("eval at step %d (%s, %.1fs): %s", step, size, time.time() - start, text)
        return metrics

    def _any_worker(self, flag):
        """True when `flag` is set on any worker (one tiny all-reduce under multi-worker)."""
        if self.workers <= 1:
            return flag
        if self._flag_sum is None:
            strategy = self.strategy
            self._flag_sum = tf.function(
                lambda x: strategy.reduce(
                    tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(x,)), axis=None
                )
            )
        return float(self._flag_sum(tf.constant(float(flag)))) > 0

    # ------------------------------------------------------------------ loop
    def _check_finite(self, step, result):
        if result.first_nonfinite_step is not None:
            bad = step + result.first_nonfinite_step + 1
            raise NonFiniteLossError(
                f"the loss or gradient norm became NaN or Inf at step {bad}; stopping. The "
                f"newest checkpoint ({self.checkpointer.latest()}) is the last good one. "
                "Lower --learning_rate, check --clip_norm, or inspect the input data"
            )

    def _report(self, steps, result, elapsed, timer):
        """Logs the progress line and writes the train summary of a loop; returns its metrics."""
        step = self.trainer.step
        learning_rate = float(self.learning_rate(step))
        timer.update(step, steps, elapsed)
        metrics = self.task.metrics(result.stats)
        examples_per_second = steps * self.global_batch_size / max(elapsed, 1e-9)
        fields = [
            self.task.format_progress(metrics),
            f"lr {learning_rate:.2e}",
            f"grad_norm {result.gradient_norm:.3f}",
            *(f"{name} {value:g}" for name, value in result.summaries.items()),
            f"{examples_per_second:.0f} examples/s",
        ]
        eta = timer.eta(self.total_steps - step)
        logging.info(summaries.format_progress(step, self.total_steps, fields, eta))
        self.train_writer.scalars(
            step,
            {
                **metrics,
                "learning_rate": learning_rate,
                "gradient_norm": result.gradient_norm,
                "examples_per_second": examples_per_second,
                **result.summaries,
            },
        )
        return dict(metrics, gradient_norm=result.gradient_norm)

    def train(self, make_iterator):
        """Trains from the current step to `total_steps`; `make_iterator(step)` gives the
        training input from `step` on. Returns the metrics of the last loop (with
        gradient_norm), or None when the run had already reached `total_steps`."""
        start_step = step = self.trainer.step
        if step >= self.total_steps:
            logging.info(
                "Step %d >= --num_train_steps=%d: nothing to train", step, self.total_steps
            )
            return None
        iterator = make_iterator(step)
        logging.info(
            "Training steps %d -> %d, global batch %d over %d replica(s)",
            step,
            self.total_steps,
            self.global_batch_size,
            self.strategy.num_replicas_in_sync,
        )
        timer = summaries.StepTimer(start_step, smoothing=0.3)
        last_metrics = None
        with checkpointing.PreemptionWatcher() as watcher:
            while step < self.total_steps:
                n = min(
                    self.steps_per_loop,
                    self.total_steps - step,
                    *(a.next_boundary(step, self.total_steps) - step for a in self.actions),
                )
                began = time.time()
                result = self.trainer.train(iterator, n)
                elapsed = time.time() - began
                self._check_finite(step, result)
                last_metrics = self._report(n, result, elapsed, timer)
                step = self.trainer.step
                # Evaluation comes before the checkpoint: a run killed in between resumes
                # before this step and evaluates it again, instead of losing the evaluation.
                for action in self.actions:
                    if action.due(step, self.total_steps):
                        action.run(step)
                if self._any_worker(watcher.requested):
                    raise checkpointing.Preempted(step, self.save())
        return last_metrics
