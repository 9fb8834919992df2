"""A strategy-agnostic custom training loop (orbit style): it knows nothing of ALBERT.

The task (an `albert_tf.train.task_api.Task`) supplies the model-specific parts (`stat_keys`,
`normalizers(batch)`, `loss_and_statistics(model, batch, totals, training)`,
`eval_statistics(model, batch)`); this module runs them under any tf.distribute strategy:

* `train(iterator, num_steps)` is one `tf.function` call that runs up to `num_steps` steps in a
  `while` loop (a tensor count, so it is traced once), each step `strategy.run(step)`.
* A replica step: (1) all-reduce the task's normalisers (global counts); (2) forward and
  backward pass, XLA-compiled with `jit_compile` (off TPU: TPUStrategy compiles the whole step
  anyway); with `gradient_accumulation_steps=N` > 1 the replica's batch is split into N
  micro-batches run forward and backward one after the other in a `tf.while_loop`, their
  gradients and statistics summed (`albert_tf.optim.accumulation`): each micro-batch's loss is
  its local sum over the global normalisers of the WHOLE batch, so the sum is the gradient of
  the whole batch, in the memory of one micro-batch; (3) all-reduce (sum) the gradients;
  (4) clip them by *global* norm, after the all-reduce, so the clipped update is that of the
  global batch whatever the replica count;
  (5) apply the optimizer's `update_step` to every variable in cross-replica context
  (`merge_call` + `extended.update`) so Keras does not all-reduce a second time.
  Collectives stay outside the XLA cluster: XLA + MirroredStrategy on CPU works this way.
* Statistics are local sums, reduced (summed) over replicas and steps; the loop also reports the
  mean pre-clip gradient norm and the first step whose statistics or gradient norm were not
  finite, where it ends early.
* With `loss_scale` (an `albert_tf.optim.loss_scale.DynamicLossScale`, for mixed_float16) the
  loss is scaled before the backward pass and the gradients unscaled; a step whose all-reduced
  gradient is not finite is an overflow: no variable is updated, the scale halves, and the step
  still counts (the data position and the schedule advance). Its norm is left out of the mean
  and of the non-finite check (the loss statistics still count); `LoopResult.summaries` carries
  the scale and the skipped steps.
* `request_stop()` (from any thread, e.g. on SIGTERM) ends the running loop after the step in
  progress; under several workers the request is all-reduced each step, so all stop together.

The optimizer must be built (`optimizer.build(model.trainable_variables)`) inside
`strategy.scope()` before the first call (keras#23085); `Trainer` does it.

>>> import tensorflow as tf
>>> trainer = Trainer(tf.distribute.get_strategy(), task, model, optimizer)  # doctest: +SKIP
>>> result = trainer.train(iterator, 100)                                     # doctest: +SKIP
>>> result.stats["examples"], result.gradient_norm, result.first_nonfinite_step  # doctest: +SKIP
"""

import dataclasses
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from albert_tf.optim.accumulation import accumulate, split_micro_batches
from albert_tf.optim.clipping import clip_by_global_norm, global_norm, to_dense
from albert_tf.train.strategy import is_tpu, num_workers


@dataclasses.dataclass
class LoopResult:
    """Summed statistics of one `train`/`evaluate` call."""

    steps: int
    stats: Dict[str, np.ndarray]
    gradient_norm: float = float("nan")  # mean pre-clip global norm over the steps (train only)
    first_nonfinite_step: Optional[int] = None  # 0-based index within the call (train only)
    summaries: Dict[str, float] = dataclasses.field(default_factory=dict)  # extra train scalars


class Trainer:
    """Runs a task's training and evaluation steps under `strategy`.

    Args:
        strategy: any tf.distribute strategy; model and optimizer must be created in its scope.
        task: an `albert_tf.train.task_api.Task` (`stat_keys`, `normalizers`,
            `loss_and_statistics`, `eval_statistics`).
        model: the keras.Model to train.
        optimizer: a Keras optimizer implementing `update_step` (LAMB, AdamWeightDecay, Adam...);
            EMA and Keras' own gradient accumulation are not used by this loop.
        clip_norm: clip the all-reduced gradients to this global norm (None or 0: no clipping).
        jit_compile: XLA-compile the forward/backward pass (ignored under TPUStrategy, which
            compiles everything).
        gradient_accumulation_steps: micro-batches per update (each replica's batch must split
            evenly); one step is still one optimizer update.
        loss_scale: a `DynamicLossScale` created in `strategy.scope()` (mixed_float16), or None.
    """

    def __init__(
        self,
        strategy,
        task,
        model,
        optimizer,
        clip_norm=1.0,
        jit_compile=True,
        gradient_accumulation_steps=1,
        loss_scale=None,
    ):
        self.strategy = strategy
        self.task = task
        self.model = model
        self.optimizer = optimizer
        self.clip_norm = clip_norm
        self.loss_scale = loss_scale
        self.accumulation_steps = int(gradient_accumulation_steps)
        if self.accumulation_steps < 1:
            raise ValueError(
                f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}"
            )
        self.variables = list(model.trainable_variables)
        with strategy.scope():
            optimizer.build(self.variables)  # before tracing (keras#23085) and before restore
        # Read by the host loop's condition; set by `request_stop` (a host variable, so another
        # thread may set it while the loop runs).
        with tf.device("/cpu:0"):
            self.stop_requested = tf.Variable(False, trainable=False, name="stop_requested")
        self._several_workers = num_workers(strategy) > 1
        jit = bool(jit_compile) and not is_tpu(strategy)
        self._gradients_fn = tf.function(self._gradients, jit_compile=jit)
        self._eval_fn = tf.function(self._eval_statistics, jit_compile=jit)
        self._train_loop = tf.function(self._train_loop_body)
        self._eval_step = tf.function(self._eval_step_body)

    # ------------------------------------------------------------------ replica functions
    def _gradients(self, batch, totals, scale=None):
        with tf.GradientTape() as tape:
            loss, stats = self.task.loss_and_statistics(self.model, batch, totals, training=True)
            if scale is not None:
                loss = loss * scale
        gradients = [to_dense(g) for g in tape.gradient(loss, self.variables)]
        if scale is not None:
            gradients = [g / scale for g in gradients]
        return gradients, stats

    def _accumulated_gradients(self, batch, totals, scale=None):
        """`_gradients` summed over the micro-batches of `batch` (the totals stay the whole
        batch's, so the sum is the whole batch's gradient)."""
        steps, keys = self.accumulation_steps, list(self.task.stat_keys)
        micro = split_micro_batches(batch, steps)

        def micro_step(k):
            gradients, stats = self._gradients_fn(
                tf.nest.map_structure(lambda t: t[k], micro), totals, scale
            )
            return gradients, {key: stats[key] for key in keys}

        initial = {key: tf.constant(0.0) for key in keys}
        return accumulate(micro_step, steps, self.variables, initial)

    def _eval_statistics(self, batch):
        return self.task.eval_statistics(self.model, batch)

    def _apply(self, strategy, gradients, finite=None):
        """Cross-replica: one optimizer update of every variable with the reduced gradients
        (none where `finite` is given and False)."""
        learning_rate = self.optimizer.learning_rate

        def update(variable, gradient, lr):
            self.optimizer.update_step(gradient, variable, lr)

        def update_if_finite(variable, gradient, lr, finite):
            tf.cond(finite, lambda: update(variable, gradient, lr), lambda: None)

        for gradient, variable in zip(gradients, self.variables):
            if finite is None:
                strategy.extended.update(
                    variable.value, update, args=(gradient, learning_rate), group=False
                )
            else:
                strategy.extended.update(
                    variable.value,
                    update_if_finite,
                    args=(gradient, learning_rate, finite),
                    group=False,
                )
        self.optimizer.iterations.assign_add(1)

    def _replica_step(self, batch):
        context = tf.distribute.get_replica_context()
        totals = context.all_reduce(tf.distribute.ReduceOp.SUM, self.task.normalizers(batch))
        scale = None if self.loss_scale is None else self.loss_scale.scale.read_value()
        if self.accumulation_steps == 1:
            gradients, stats = self._gradients_fn(batch, totals, scale)
        else:
            gradients, stats = self._accumulated_gradients(batch, totals, scale)
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        norm = global_norm(gradients)
        if self.clip_norm:
            gradients, _ = clip_by_global_norm(gradients, self.clip_norm, norm)
        if self.loss_scale is None:
            context.merge_call(self._apply, args=(gradients,))
            return stats, norm, tf.constant(1.0)
        finite = tf.math.is_finite(norm)  # the same on every replica (all-reduced gradients)
        context.merge_call(self._apply, args=(gradients, finite))
        self.loss_scale.update(finite)
        return stats, norm, tf.cast(finite, tf.float32)

    # ------------------------------------------------------------------ host loops
    def _sum(self, per_replica):
        return tf.nest.map_structure(
            lambda v: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), per_replica
        )

    def _train_loop_body(self, iterator, num_steps):
        keys = sorted(self.task.stat_keys)
        sums = [tf.constant(0.0) for _ in keys]
        norm_sum, applied_steps = tf.constant(0.0), tf.constant(0.0)
        first_bad = tf.constant(-1, tf.int32)
        i = tf.constant(0, tf.int32)
        # Ends early, at a step boundary, on a stop request or at the first non-finite step.
        while i < num_steps and first_bad < 0 and not self._stop_agreed():
            stats, norm, applied = self.strategy.run(self._replica_step, args=(next(iterator),))
            stats = self._sum(stats)
            norm = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
            # 1.0 or 0.0, the same on every replica
            applied = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, applied, axis=None)
            values = [stats[k] for k in keys]
            checked = values if self.loss_scale is not None else values + [norm]
            finite = tf.reduce_all(tf.math.is_finite(tf.stack(checked)))
            first_bad = tf.where(finite, first_bad, i)
            sums = [s + v for s, v in zip(sums, values)]
            norm_sum += tf.where(applied > 0, norm, 0.0)
            applied_steps += applied
            i += 1
        return dict(zip(keys, sums)), norm_sum, applied_steps, first_bad, i

    def _stop_agreed(self):
        """The stop request, set on any worker: one scalar all-reduce per step when there are
        several workers (so every worker ends the loop at the same step), else a read."""
        if self._several_workers:
            flag = self.strategy.run(lambda: tf.cast(self.stop_requested, tf.float32))
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, flag, axis=None) > 0
        return self.stop_requested.read_value()

    def _eval_step_body(self, batch):
        # A Python replica function calling the compiled one: each replica then traces it with
        # its own variable copies (passing the tf.function to strategy.run directly makes XLA
        # read replica 1's variables from replica 0's device).
        return self._sum(self.strategy.run(lambda b: self._eval_fn(b), args=(batch,)))

    # ------------------------------------------------------------------ public API
    def train(self, iterator, num_steps):
        """Runs up to `num_steps` training steps; returns a LoopResult of summed statistics.

        The loop ends early, at a step boundary, after the first step whose statistics or
        gradient norm are not finite, or once `request_stop()` was called (from any thread,
        e.g. a signal watcher, while the loop runs); `LoopResult.steps` says how many ran."""
        stats, norm_sum, applied, first_bad, steps = self._train_loop(
            iterator, tf.constant(num_steps, tf.int32)
        )
        first_bad, applied, steps = int(first_bad), int(applied), int(steps)
        summaries = {}
        if self.loss_scale is not None:
            summaries = {
                "loss_scale": float(self.loss_scale.scale.numpy()),
                "skipped_steps": steps - applied,
            }
        return LoopResult(
            steps=steps,
            stats={k: v.numpy() for k, v in stats.items()},
            gradient_norm=float(norm_sum) / applied if applied else float("nan"),
            first_nonfinite_step=None if first_bad < 0 else first_bad,
            summaries=summaries,
        )

    def request_stop(self):
        """Makes the running (or next) `train` call end after the step in progress."""
        self.stop_requested.assign(True)

    def evaluate(self, dataset, max_steps):
        """Evaluates on a fresh pass over the distributed `dataset` (at most `max_steps`
        batches)."""
        sums, steps = None, 0
        for batch in dataset:
            if steps >= max_steps:
                break
            stats = {k: v.numpy() for k, v in self._eval_step(batch).items()}
            sums = stats if sums is None else {k: sums[k] + stats[k] for k in sums}
            steps += 1
        if sums is None:
            raise ValueError(
                "the evaluation data yielded no batch: it holds fewer examples than one "
                "global eval batch"
            )
        return LoopResult(steps=steps, stats=sums)

    def weights_are_finite(self):
        """True when every trainable variable is finite (checked before each checkpoint)."""
        return bool(self._all_finite())

    @tf.function
    def _all_finite(self):
        return tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.variables])

    @property
    def step(self):
        """The global step: the optimizer's iteration counter (a Python int)."""
        return int(self.optimizer.iterations.numpy())
