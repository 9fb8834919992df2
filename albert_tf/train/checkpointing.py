"""Checkpoints for the pretraining loop: chief-aware saving, exact resume, preemption.

* `Checkpointer` wraps `tf.train.CheckpointManager` over {model, optimizer} (the optimizer holds
  the global step, its `iterations`). The chief writes to `directory` (any gs:// path); other
  workers of a multi-worker job must take part in every save too, so they write to a local
  temporary directory that is emptied after each save and deleted on `close()`. Every process
  restores from the chief's directory.
* The input position is the step plus `skipped_batches`, stored with the checkpoint: the batches
  a divergence recovery skipped (`albert_tf.train.controller`). The runner rebuilds the input
  pipeline and skips to that position (see `albert_tf.train.runner`). The checkpoint also counts
  the run's `recoveries`. Checkpoints written before these existed restore them as 0.
* Before restoring, `restore_latest` compares the checkpoint's variables (names and shapes, as
  `tf.train.list_variables` gives them) with the model's and raises InvalidFlagError saying the
  directory holds a run of another model and which settings differ (from the shapes; a runner
  that stored its config compares those fields first with `check_same_settings`).
* `PreemptionWatcher` turns SIGTERM (how Cloud TPU / GKE / Slurm announce preemption) into a
  flag, and at once into a stop request that the host loop checks between steps; the controller
  then saves and exits.

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

from albert_tf.settings import InvalidFlagError

# (variable path suffix, axis, the AlbertConfig setting that sizes that axis): how a shape
# difference is told as a setting.
SHAPE_SETTINGS = (
    ("embeddings/word_embeddings", 0, "vocab_size"),
    ("embeddings/word_embeddings", 1, "embedding_size"),
    ("embeddings/position_embeddings", 0, "max_position_embeddings"),
    ("embeddings/token_type_embeddings", 0, "type_vocab_size"),
    ("embeddings/embedding_projection/kernel", 1, "hidden_size"),
    ("encoder/attention/query_kernel", 0, "num_hidden_groups (or sharing)"),
    ("encoder/attention/query_kernel", 1, "inner_group_num"),
    ("encoder/ffn/intermediate_kernel", 3, "intermediate_size"),
)


class Preempted(Exception):
    """SIGTERM (or Ctrl-C) was received; a checkpoint was saved at `step`."""

    def __init__(self, step, checkpoint):
        super().__init__(f"preempted: saved checkpoint {checkpoint} at step {step}")
        self.step = step
        self.checkpoint = checkpoint


class Checkpointer:
    """Saves and restores {model, optimizer, skipped_batches, recoveries} every N steps; only the
    chief keeps its files.

    Args:
        directory: where the chief's checkpoints live (created if missing; gs:// allowed).
        model, optimizer: the objects to checkpoint (the optimizer must be built).
        max_to_keep: how many recent checkpoints the chief keeps.
        chief: False for non-chief workers (writes go to a temporary directory).
        extra: {name: trackable} saved and restored with them (e.g. the loss scale).
    """

    def __init__(self, directory, model, optimizer, max_to_keep=5, chief=True, extra=None):
        self.directory = directory
        self.chief = chief
        self.model, self.optimizer = model, optimizer
        # The optimizer reaches every trainable variable; the non-trainable ones (dropout seed
        # states among them) are listed too, so a resumed run draws the same dropout masks.
        with tf.device("/cpu:0"):
            self.skipped_batches = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.recoveries = tf.Variable(0, dtype=tf.int64, trainable=False)
        objects = dict(
            model=model,
            optimizer=optimizer,
            non_trainable_variables=list(model.non_trainable_variables),
            **(extra or {}),
        )
        self.checkpoint = tf.train.Checkpoint(
            **objects, skipped_batches=self.skipped_batches, recoveries=self.recoveries
        )
        self._older_checkpoint = tf.train.Checkpoint(**objects)  # one without the run state
        if chief:
            tf.io.gfile.makedirs(directory)
            self._write_dir = directory
        else:
            self._write_dir = tempfile.mkdtemp(prefix="albert_tf_worker_ckpt_")
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            self._write_dir,
            max_to_keep=max_to_keep if chief else 1,
            step_counter=optimizer.iterations,
            checkpoint_name="ckpt",
        )

    def latest(self):
        """Path prefix of the newest checkpoint in the chief's directory, or None."""
        return tf.train.latest_checkpoint(self.directory)

    def restore_latest(self, what=None):
        """Restores the newest checkpoint (every process reads the chief's); returns its path or
        None. A checkpoint of another model raises InvalidFlagError naming `what` (default: the
        directory) and the settings that differ."""
        path = self.latest()
        if path:
            differences = shape_differences(self.checkpoint, path, self.model.variables)
            if differences:
                raise InvalidFlagError(
                    f"{what or self.directory} holds a run of another model "
                    f"({describe_shape_differences(differences)}): resume it with its own "
                    "settings or use a new --output_dir"
                )
            reader = tf.train.load_checkpoint(path)
            if reader.has_tensor("skipped_batches/.ATTRIBUTES/VARIABLE_VALUE"):
                self.checkpoint.restore(path).assert_existing_objects_matched()
            else:
                self.skipped_batches.assign(0)
                self.recoveries.assign(0)
                self._older_checkpoint.restore(path).assert_existing_objects_matched()
            logging.info("Restored %s (step %d)", path, int(self.optimizer.iterations.numpy()))
        return path

    @property
    def input_position(self):
        """How many batches the input consumed before the current step (a Python int)."""
        return int(self.optimizer.iterations.numpy()) + int(self.skipped_batches.numpy())

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


def _saved_shapes(checkpoint, path):
    """{id(variable): shape saved for it in `path`}, matching objects to the checkpoint's object
    graph as `restore` does (Keras variables are saved under the optimizer's lists, not names)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    view = tf.train.TrackableView(checkpoint)
    saved, visited, pending = {}, set(), [(checkpoint, 0)]
    while pending:
        trackable, node_id = pending.pop()
        if node_id in visited:
            continue
        visited.add(node_id)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE" and attribute.checkpoint_key in shapes:
                saved[id(trackable)] = tuple(shapes[attribute.checkpoint_key])
        children = view.children(trackable)
        pending.extend(
            (children[ref.local_name], ref.node_id)
            for ref in node.children
            if ref.local_name in children
        )
    return saved


def shape_differences(checkpoint, path, variables):
    """[(variable path, shape in `path` or None when absent, shape now)] for each of
    `variables` (reachable from the tf.train.Checkpoint `checkpoint`) that does not match."""
    saved = _saved_shapes(checkpoint, path)
    differences = []
    for variable in variables:
        shape = saved.get(id(variable))
        if shape != tuple(variable.shape):
            differences.append(
                (getattr(variable, "path", variable.name), shape, tuple(variable.shape))
            )
    return differences


def describe_shape_differences(differences, limit=4):
    """The settings behind shape differences ("hidden_size 32 there vs 64 now"), or else the
    variables themselves."""
    settings = {}
    for name, saved, now in differences:
        for suffix, axis, setting in SHAPE_SETTINGS:
            if saved and name.endswith(suffix) and saved[axis] != now[axis]:
                settings.setdefault(setting, f"{setting} {saved[axis]} there vs {now[axis]} now")
    if settings:
        return ", ".join(list(settings.values())[:limit])
    return ", ".join(
        f"{name}: {'absent' if saved is None else saved} there vs {now} now"
        for name, saved, now in differences[:limit]
    )


def check_same_settings(previous, current, what, limit=4):
    """Raises InvalidFlagError when the dicts `previous` (stored by an earlier run in `what`)
    and `current` differ, naming the settings: "hidden_size: 32 there vs 64 now"."""
    differing = sorted(k for k in set(previous) | set(current) if previous.get(k) != current.get(k))
    if differing:
        detail = ", ".join(
            f"{k}: {previous.get(k)} there vs {current.get(k)} now" for k in differing[:limit]
        )
        raise InvalidFlagError(
            f"{what} holds a run of another model ({detail}): resume it with "
            "its own settings or use a new --output_dir"
        )


# What a fine-tuning run treats as "save and stop": preemption and Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PreemptionWatcher:
    """Context manager: while active, SIGTERM (and any of `signals`) sets `requested` instead of
    killing the process; with SIGINT watched, a second Ctrl-C interrupts at once.

    `on_signal()`, when given, is called at once from a helper thread (through
    `signal.set_wakeup_fd`), even while the main thread is busy in TensorFlow, where Python runs
    no signal handler until the op returns: the training loop passes `Trainer.request_stop`, so a
    loop of many steps ends at the next step boundary.

    Only the main thread can install signal handlers; elsewhere the watcher is inert. The previous
    handlers (and wakeup fd) are restored on exit.

    >>> with PreemptionWatcher() as watcher:
    ...     watcher.requested
    False
    """

    def __init__(self, signals=(signal.SIGTERM,), on_signal=None):
        self.signals = signals
        self.on_signal = on_signal
        self.requested = False
        self._previous = {}
        self._wakeup = None  # (read fd, write fd, previous wakeup fd, thread)

    def _handle(self, signum, frame):
        del frame
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C stops at once
        if not self.requested:
            logging.warning(
                "Received signal %d: saving a checkpoint at the next step boundary, then exiting",
                signum,
            )
        self.requested = True

    def _forward(self, read_fd):
        """Helper thread: calls `on_signal` for each watched signal written to the wakeup fd;
        a 0 byte ends it."""
        watched = {int(sig) for sig in self.signals}
        while True:
            data = os.read(read_fd, 64)
            if not data or 0 in data:
                return
            if watched.intersection(data):
                self.on_signal()

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
            if self.on_signal is not None:
                read_fd, write_fd = os.pipe()
                os.set_blocking(write_fd, False)
                previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
                thread = threading.Thread(target=self._forward, args=(read_fd,), daemon=True)
                thread.start()
                self._wakeup = (read_fd, write_fd, previous, thread)
        return self

    def __exit__(self, *exc):
        if self._wakeup is not None:
            read_fd, write_fd, previous, thread = self._wakeup
            signal.set_wakeup_fd(previous)
            os.write(write_fd, b"\0")
            thread.join()
            os.close(read_fd)
            os.close(write_fd)
            self._wakeup = None
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        return False
