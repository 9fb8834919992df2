"""TensorBoard summaries and the one-line progress log of the training loops (pretraining's
controller and fine-tuning's `fit` chunks).

Only the chief writes summaries (other workers get a no-op writer). TF 2.21 needs the
`tensorboard` package for `tf.summary.scalar`; `SummaryWriter` says so if it is missing.

>>> format_progress(200, 1000, ["loss 5.123", "lr 1.23e-03", "412 examples/s"], 192.0)
'step 200/1000 (20%) | loss 5.123 | lr 1.23e-03 | 412 examples/s | ETA 3m12s'
"""

import os

import tensorflow as tf


def _require_tensorboard():
    if not hasattr(tf.summary, "scalar"):
        raise ImportError(
            "tf.summary.scalar is missing: TensorFlow >= 2.21 needs the `tensorboard` package for "
            "summaries (pip install tensorboard)"
        )


class SummaryWriter:
    """Writes scalar dicts under `directory/<name>` on the chief; a no-op elsewhere.

    >>> import tempfile
    >>> writer = SummaryWriter(tempfile.mkdtemp(), "train")
    >>> writer.scalars(10, {"loss": 1.5})
    >>> writer.close()
    """

    def __init__(self, directory, name, chief=True):
        if chief:
            _require_tensorboard()
            self.logdir = os.path.join(directory, name)
            self._writer = tf.summary.create_file_writer(self.logdir)
        else:
            self.logdir = None
            self._writer = tf.summary.create_noop_writer()

    def scalars(self, step, values):
        with self._writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)
        self._writer.flush()

    def close(self):
        self._writer.close()


def format_duration(seconds):
    """'1h02m', '3m12s' or '45s'."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_progress(step, total_steps, fields, eta_seconds):
    """The log line printed after every loop of training steps: the step, `fields` (texts such
    as "loss 5.123") and the estimated time left."""
    return " | ".join(
        [f"step {step}/{total_steps} ({100.0 * step / max(total_steps, 1):.0f}%)", *fields]
        + [f"ETA {format_duration(eta_seconds)}"]
    )


class StepTimer:
    """Seconds per training step for the ETA, leaving out the first loop after `start_step`
    (it includes tracing and compilation); `smoothing` weighs each new loop (1.0: the latest
    loop alone).

    >>> timer = StepTimer(start_step=0, smoothing=0.5)
    >>> timer.update(10, 10, 50.0)  # the first loop: tracing included, used until the next
    >>> timer.update(20, 10, 10.0)
    >>> timer.eta(100)
    300.0
    """

    def __init__(self, start_step, smoothing=1.0):
        self.start_step = start_step
        self.smoothing = smoothing
        self.seconds_per_step = None

    def update(self, step, steps, elapsed):
        """A loop of `steps` steps that ended at `step` took `elapsed` seconds."""
        if steps and (self.seconds_per_step is None or step - steps > self.start_step):
            recent = elapsed / steps
            if self.seconds_per_step is None:
                self.seconds_per_step = recent
            else:
                w = self.smoothing
                self.seconds_per_step = (1 - w) * self.seconds_per_step + w * recent

    def eta(self, remaining_steps):
        """Seconds left for `remaining_steps` (0 before the first update)."""
        return (self.seconds_per_step or 0.0) * remaining_steps
