"""Checkpoints for the pretraining loop: chief-aware saving, exact resume, preemption.

* `Checkpointer` wraps `tf.train.CheckpointManager` over {model, optimizer} (the optimizer holds
  the global step, its `iterations`). The chief writes to `directory` (any gs:// path); other
  workers of a multi-worker job must take part in every save too, so they write to a local
  temporary directory that is emptied after each save and deleted on `close()`. Every process
  restores from the chief's directory.
* The input position is not stored: the runner rebuilds the input pipeline and skips to the
  restored step (see `albert_tf.train.runner`).
* `PreemptionWatcher` turns SIGTERM (how Cloud TPU / GKE / Slurm announce preemption) into a
  flag the loop checks between loops; the runner then saves and exits.

>>> import keras, tensorflow as tf, tempfile
>>> from albert_tf.optim import Lamb
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> optimizer = Lamb(learning_rate=0.1); optimizer.build(model.trainable_variables)
>>> keeper = Checkpointer(tempfile.mkdtemp(), model, optimizer, max_to_keep=2)
>>> keeper.restore_latest() is None
True
>>> keeper.save().endswith("ckpt-0")
True
"""
import os
import shutil
import signal
import tempfile
import threading

import tensorflow as tf
from absl import logging


class Preempted(Exception):
    """SIGTERM (or Ctrl-C) was received; a checkpoint was saved at `step`."""

    def __init__(self, step, checkpoint):
        super().__init__(f"preempted: saved checkpoint {checkpoint} at step {step}")
        self.step = step
        self.checkpoint = checkpoint


class Checkpointer:
    """Saves and restores {model, optimizer} every N steps; only the chief keeps its files.

    Args:
        directory: where the chief's checkpoints live (created if missing; gs:// allowed).
        model, optimizer: the objects to checkpoint (the optimizer must be built).
        max_to_keep: how many recent checkpoints the chief keeps.
        chief: False for non-chief workers (writes go to a temporary directory).
    """

    def __init__(self, directory, model, optimizer, max_to_keep=5, chief=True):
        self.directory = directory
        self.chief = chief
        self.optimizer = optimizer
        # The optimizer reaches every trainable variable; the non-trainable ones (dropout seed
        # states among them) are listed too, so a resumed run draws the same dropout masks.
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer,
            non_trainable_variables=list(model.non_trainable_variables))
        if chief:
            tf.io.gfile.makedirs(directory)
            self._write_dir = directory
        else:
            self._write_dir = tempfile.mkdtemp(prefix="albert_tf_worker_ckpt_")
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._write_dir, max_to_keep=max_to_keep if chief else 1,
            step_counter=optimizer.iterations, checkpoint_name="ckpt")

    def latest(self):
        """Path prefix of the newest checkpoint in the chief's directory, or None."""
        return tf.train.latest_checkpoint(self.directory)

    def restore_latest(self):
        """Restores the newest checkpoint (every process reads the chief's); returns its path or None."""
        path = self.latest()
        if path:
            self.checkpoint.restore(path).assert_existing_objects_matched()
            logging.info("Restored %s (step %d)", path, int(self.optimizer.iterations.numpy()))
        return path

    def save(self):
        """Saves at the current step; returns the path (the chief's) of the new checkpoint."""
        step = int(self.optimizer.iterations.numpy())
        path = self.manager.save(checkpoint_number=step)
        if not self.chief:
            for name in tf.io.gfile.listdir(self._write_dir):
                tf.io.gfile.remove(os.path.join(self._write_dir, name))
            return os.path.join(self.directory, os.path.basename(path))
        logging.info("Saved checkpoint %s", path)
        return path

    def close(self):
        if not self.chief and os.path.isdir(self._write_dir):
            shutil.rmtree(self._write_dir, ignore_errors=True)


# What a fine-tuning run treats as "save and stop": preemption and Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PreemptionWatcher:
    """Context manager: while active, SIGTERM (and any of `signals`) sets `requested` instead of
    killing the process; with SIGINT watched, a second Ctrl-C interrupts at once.

    Only the main thread can install signal handlers; elsewhere the watcher is inert. The previous
    handler is restored on exit.

    >>> with PreemptionWatcher() as watcher:
    ...     watcher.requested
    False
    """

    def __init__(self, signals=(signal.SIGTERM,)):
        self.signals = signals
        self.requested = False
        self._previous = {}

    def _handle(self, signum, frame):
        del frame
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C stops at once
        if not self.requested:
            logging.warning("Received signal %d: saving a checkpoint at the end of this loop, then "
                            "exiting", signum)
        self.requested = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        return False
