"""TensorBoard summaries and the one-line progress log of the pretraining loop.

Only the chief writes summaries (other workers get a no-op writer). TF 2.21 needs the
`tensorboard` package for `tf.summary.scalar`; `SummaryWriter` says so if it is missing.

>>> format_progress(200, 1000, {"loss": 5.1234, "masked_lm_accuracy": 0.2134,
...                              "sentence_order_accuracy": 0.61}, 0.00123, 0.83, 412.0, 192.0)
'step 200/1000 (20%) | loss 5.123 | mlm_acc 21.34% | sop_acc 61.00% | lr 1.23e-03 | grad_norm 0.830 | 412 examples/s | ETA 3m12s'
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


def format_progress(
    step, total_steps, metrics, learning_rate, gradient_norm, examples_per_second, eta_seconds
):
    """The log line printed after every loop of training steps."""
    return (
        f"step {step}/{total_steps} ({100.0 * step / max(total_steps, 1):.0f}%) | "
        f"loss {metrics['loss']:.3f} | mlm_acc {100 * metrics['masked_lm_accuracy']:.2f}% | "
        f"sop_acc {100 * metrics['sentence_order_accuracy']:.2f}% | lr {learning_rate:.2e} | "
        f"grad_norm {gradient_norm:.3f} | {examples_per_second:.0f} examples/s | "
        f"ETA {format_duration(eta_seconds)}"
    )
