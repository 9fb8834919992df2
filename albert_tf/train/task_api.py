"""`Task`: what `albert_tf.train.loop.Trainer` and `albert_tf.train.controller.Controller` ask of a
training task. They know no model; a task supplies the loss, its summed statistics and the
metrics (with how they read in the log). `albert_tf.train.task.PretrainingTask` is ALBERT's.

Statistics are *local sums* (over this replica's batch) that the loop adds over replicas and
steps, so metrics derived from them are exact over any number of both. Building the model and
its input is the runner's business, not this interface's.

>>> class Halves(Task):
...     stat_keys = ("examples",)
...     def normalizers(self, batch):
...         return {"examples": 2.0}
...     def loss_and_statistics(self, model, batch, totals, training=True):
...         return 0.0, {"examples": 2.0}
...     def metrics(self, stats):
...         return {"examples": float(stats["examples"])}
>>> Halves().format_progress({"examples": 8.0, "loss": 0.25})
'examples 8 | loss 0.25'
"""

import abc
from typing import Dict, Mapping, Sequence, Tuple

import tensorflow as tf


class Task(abc.ABC):
    """A trainable task: loss, summed statistics, metrics and their log text."""

    #: Names of the statistics `loss_and_statistics` returns (each a scalar local sum).
    stat_keys: Sequence[str] = ()

    @abc.abstractmethod
    def normalizers(self, batch) -> Mapping[str, tf.Tensor]:
        """Local counts of `batch` (e.g. its number of examples); the loop sums them over the
        replicas and passes the global totals to `loss_and_statistics`."""

    @abc.abstractmethod
    def loss_and_statistics(
        self, model, batch, totals, training=True
    ) -> Tuple[tf.Tensor, Mapping[str, tf.Tensor]]:
        """(this replica's share of the global-batch loss, local sums of `stat_keys`).

        Divide local sums by the global `totals`: the shares then add up over the replicas to
        the loss of the global batch, whatever the replica count."""

    def eval_statistics(self, model, batch) -> Mapping[str, tf.Tensor]:
        """Local sums for `eval_metrics`; by default the `stat_keys` of an inference pass."""
        return self.loss_and_statistics(model, batch, self.normalizers(batch), training=False)[1]

    @abc.abstractmethod
    def metrics(self, stats) -> Dict[str, float]:
        """Python floats from summed `stat_keys` statistics (numpy values). The controller logs
        them (`format_progress`) and writes every one to the train and eval summaries."""

    def eval_metrics(self, stats) -> Dict[str, float]:
        """Metrics of an evaluation from summed `eval_statistics` (saved as eval results);
        by default `metrics`. Only the keys of `metrics` go to the eval summaries."""
        return self.metrics(stats)

    def format_progress(self, metrics) -> str:
        """The metrics' part of the progress line after each loop of training steps."""
        return " | ".join(f"{name} {value:.4g}" for name, value in metrics.items())

    def format_eval_size(self, metrics, steps) -> str:
        """How much data an evaluation of `steps` batches saw (`metrics`: its `eval_metrics`)."""
        return f"{steps} batches"

    def format_eval(self, metrics) -> str:
        """The metrics' part of the evaluation line, from `eval_metrics`."""
        return self.format_progress(metrics)
