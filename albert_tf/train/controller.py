"""`Controller`: the outer training loop (orbit style). It knows no model: it runs a `Trainer`'s
loops of steps for any `albert_tf.train.task_api.Task`, logs and summarises the metrics that task
returns, and calls small actions between loops:

* after each loop: on a NaN/Inf loss or gradient norm (the loop ends at that step) or a loss
  above `max_loss`, recover: restore the newest checkpoint (the last good one) and go on with
  the input where it is, so the batches read since that checkpoint are skipped (the checkpoint
  stores how many were skipped, so a resumed run reads on from the same place); after
  `max_consecutive_recoveries` recoveries with no checkpoint saved in between, stop with
  `NonFiniteLossError` naming the steps. Otherwise one progress line and one train summary;
* `Action`s at multiples of their interval, in order: evaluation (`eval_every`, not at the last
  step: the runner evaluates at the end), checkpoint (`save_every` and the last step), then any
  given ones;
* preemption: SIGTERM (on any worker) ends the running loop at the next step boundary (all
  workers at the same step); the controller saves a checkpoint and raises
  `checkpointing.Preempted` (scripts exit with 143; re-running resumes);
* profiling: with `profile_steps=(A, B)`, a TensorBoard trace of steps A..B (1-based, as the
  progress lines count) into `profile_dir`.

Loops end at every action's boundary (and at A - 1 and B), so intervals hold whatever
`steps_per_loop` is.

>>> controller = Controller(trainer, checkpointer, total_steps=1000, steps_per_loop=100,
...                         global_batch_size=64, learning_rate=schedule, save_every=500,
...                         train_writer=writer)                           # doctest: +SKIP
>>> controller.train(lambda position: iter(dataset.skip(position)))         # doctest: +SKIP
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
        max_loss: recover when a loop's mean `loss` metric exceeds this (None: never).
        max_consecutive_recoveries: recover from at most this many divergences in a row (with
            no checkpoint saved in between); 0: stop at the first (`NonFiniteLossError`).
        profile_steps: (first, last) step to trace with the TensorBoard profiler, or None.
        profile_dir: where the trace goes (required with profile_steps).
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
        max_loss=None,
        max_consecutive_recoveries=0,
        profile_steps=None,
        profile_dir=None,
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
        self.max_loss = max_loss
        self.max_consecutive_recoveries = max_consecutive_recoveries
        self.profile_steps = profile_steps
        self.profile_dir = profile_dir
        self._failures = []  # descriptions of the divergences since the last checkpoint
        self._flag_sum = None

    # ------------------------------------------------------------------ actions
    def save(self):
        """Saves a checkpoint (after checking the weights are finite); returns its path."""
        if not self.trainer.weights_are_finite():
            raise NonFiniteLossError(
                f"model weights are NaN or Inf at step {self.trainer.step}; not saving. The newest "
                f"checkpoint ({self.checkpointer.latest()}) is the last good one"
            )
        path = self.checkpointer.save()
        self._failures = []
        return path

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
    def _divergence(self, step, result):
        """A description of the loop's divergence ("loss or gradient norm NaN or Inf at step 5"),
        or None."""
        if result.first_nonfinite_step is not None:
            bad = step + result.first_nonfinite_step + 1
            return f"loss or gradient norm NaN or Inf at step {bad}"
        if self.max_loss is not None and result.steps:
            loss = self.task.metrics(result.stats)["loss"]
            if loss > self.max_loss:
                last = step + result.steps
                steps = f"step {last}" if result.steps == 1 else f"steps {step + 1}-{last}"
                return f"mean loss {loss:.4g} > --max_loss={self.max_loss:g} at {steps}"
        return None

    def _recover(self, failure):
        """Restores the newest checkpoint, keeping the input where it is (the batches read since
        are skipped); raises NonFiniteLossError when there is none or after too many failures in
        a row. Returns the restored step."""
        self._failures.append(failure)
        latest = self.checkpointer.latest()
        if latest is None or len(self._failures) > self.max_consecutive_recoveries:
            if latest is None and self.max_consecutive_recoveries:
                reason = "no checkpoint to recover from yet"
            elif self.max_consecutive_recoveries:
                reason = (
                    f"{len(self._failures)} divergences in a row (--max_consecutive_recoveries="
                    f"{self.max_consecutive_recoveries})"
                )
            else:
                reason = "--max_consecutive_recoveries=0"
            good = (
                f"The newest checkpoint ({latest}) is the last good one"
                if latest
                else "No checkpoint was saved yet"
            )
            raise NonFiniteLossError(
                f"training diverged ({'; '.join(self._failures)}) and {reason}; stopping. "
                f"{good}. Lower --learning_rate, check --clip_norm, or inspect the input data"
            )
        position = self.checkpointer.input_position  # before the restore
        recoveries = int(self.checkpointer.recoveries.numpy()) + 1
        self.checkpointer.restore_latest()
        step = self.trainer.step
        skipped = position - self.checkpointer.input_position
        self.checkpointer.skipped_batches.assign_add(skipped)
        self.checkpointer.recoveries.assign(recoveries)
        logging.warning(
            "Training diverged (%s): restored %s and skipped the %d batches read since it "
            "(recovery %d of at most %d in a row)",
            failure,
            latest,
            skipped,
            len(self._failures),
            self.max_consecutive_recoveries,
        )
        self.train_writer.scalars(step, {"recoveries": recoveries})
        return step

    @property
    def recoveries(self):
        """How many times the run recovered from a divergence (all invocations)."""
        return int(self.checkpointer.recoveries.numpy())

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

    def _loop_size(self, step):
        """Steps of the next loop: up to the next action boundary or profiler start/stop."""
        ends = [self.total_steps, step + self.steps_per_loop]
        ends += [a.next_boundary(step, self.total_steps) for a in self.actions]
        if self.profile_steps:
            ends += [s for s in (self.profile_steps[0] - 1, self.profile_steps[1]) if s > step]
        return min(ends) - step

    def _profile(self, step, profiling):
        """Starts or stops the profiler at the bounds of profile_steps; returns whether on."""
        if not self.profile_steps:
            return False
        first, last = self.profile_steps
        if not profiling and first - 1 <= step < last:
            logging.info("Profiling steps %d-%d into %s", step + 1, last, self.profile_dir)
            tf.profiler.experimental.start(self.profile_dir)
            return True
        if profiling and step >= last:
            tf.profiler.experimental.stop()
            logging.info("Wrote the profile of steps %d-%d to %s", first, last, self.profile_dir)
            return False
        return profiling

    def train(self, make_iterator):
        """Trains from the current step to `total_steps`; `make_iterator(position)` gives the
        training input from batch `position` on (the step plus the batches skipped by
        recoveries). Returns the metrics of the last loop (with gradient_norm), or None when the
        run had already reached `total_steps`."""
        start_step = step = self.trainer.step
        if step >= self.total_steps:
            logging.info(
                "Step %d >= --num_train_steps=%d: nothing to train", step, self.total_steps
            )
            return None
        iterator = make_iterator(self.checkpointer.input_position)
        logging.info(
            "Training steps %d -> %d, global batch %d over %d replica(s)",
            step,
            self.total_steps,
            self.global_batch_size,
            self.strategy.num_replicas_in_sync,
        )
        timer = summaries.StepTimer(start_step, smoothing=0.3)
        last_metrics, profiling = None, False
        self.trainer.stop_requested.assign(False)
        watcher = checkpointing.PreemptionWatcher(on_signal=self.trainer.request_stop)
        try:
            with watcher:
                profiling = self._profile(step, profiling)
                while step < self.total_steps:
                    began = time.time()
                    result = self.trainer.train(iterator, self._loop_size(step))
                    elapsed = time.time() - began
                    failure = self._divergence(step, result)
                    if failure is not None:
                        step = self._recover(failure)
                        profiling = self._profile(step, profiling)
                        continue
                    if result.steps:  # none when stopped before the first step
                        last_metrics = self._report(result.steps, result, elapsed, timer)
                        step = self.trainer.step
                        profiling = self._profile(step, profiling)
                        # Evaluation comes before the checkpoint: a run killed in between
                        # resumes before this step and evaluates it again.
                        for action in self.actions:
                            if action.due(step, self.total_steps):
                                action.run(step)
                    # The variable is set at once by the watcher's thread; `requested` by the
                    # Python handler, which runs when the main thread is back in Python.
                    requested = watcher.requested or bool(self.trainer.stop_requested.numpy())
                    if self._any_worker(requested):
                        raise checkpointing.Preempted(step, self.save())
        finally:
            if profiling:
                tf.profiler.experimental.stop()
        return last_metrics
