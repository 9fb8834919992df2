"""tf.distribute strategy resolution and chief/worker roles for the pretraining loop.

One custom loop serves every strategy; this module only turns a name into a strategy and answers
"may this process write checkpoints and summaries?".

    tpu           TPUStrategy (`tpu`: a TPU name or grpc:// address; "local" on a TPU VM)
    multi_worker  MultiWorkerMirroredStrategy (cluster from the TF_CONFIG environment variable)
    mirrored      MirroredStrategy over the local GPUs, or over `logical_cpus` CPU devices
    one_device    OneDeviceStrategy on the first GPU, else the CPU

>>> from albert_tf.train.strategy import create_strategy
>>> strategy = create_strategy("one_device")
>>> strategy.num_replicas_in_sync
1
"""

import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.errors import UserError
from albert_tf.precision import is_tpu
from albert_tf.train.params import STRATEGIES  # re-exported: albert_tf.train.strategy.STRATEGIES


class StrategyError(UserError, RuntimeError):
    """The requested strategy cannot run here (no TPU, no TF_CONFIG, devices already set up)."""


def configure_logical_cpus(count):
    """Splits the first CPU into `count` logical devices (for MirroredStrategy on a CPU host).

    Must run before TensorFlow initialises its devices (before any op runs). Returns the list of
    logical CPU device names.
    """
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError:
        existing = tf.config.list_logical_devices("CPU")
        if len(existing) != count:
            raise StrategyError(
                f"--logical_cpus={count}: TensorFlow's devices are already initialised with "
                f"{len(existing)} logical CPU(s); configure logical CPUs before running any op"
            ) from None
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def _tpu_strategy(tpu):
    address = tpu or os.environ.get("TPU_NAME") or "local"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
        if address != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise StrategyError(
            f"--strategy=tpu: no TPU found at --tpu={address!r} ({first_line}). Run on a Cloud TPU "
            "VM with tensorflow-tpu installed (--tpu=local), or pass --tpu=NAME of a TPU node; on "
            "CPU or GPU use --strategy=one_device or --strategy=mirrored"
        ) from None
    return tf.distribute.TPUStrategy(resolver)


def _multi_worker_strategy():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyError(
            "--strategy=multi_worker needs the TF_CONFIG environment variable (cluster and task), "
            'e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
            '"task": {"type": "worker", "index": 0}}'
        )
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise StrategyError(
            f"--strategy=multi_worker: TF_CONFIG is not valid JSON ({e}): {raw!r}"
        ) from None
    if (
        not isinstance(config, dict)
        or "cluster" not in config
        or "type" not in config.get("task", {})
    ):
        raise StrategyError(
            f"--strategy=multi_worker: TF_CONFIG needs 'cluster' and 'task' "
            f"{{'type', 'index'}} entries, got {raw!r}"
        )
    return tf.distribute.MultiWorkerMirroredStrategy()


def create_strategy(name, tpu=None, logical_cpus=0):
    """Returns the tf.distribute strategy called `name` (one of STRATEGIES).

    Args:
        name: "tpu", "multi_worker", "mirrored" or "one_device".
        tpu: TPU name or address for "tpu" (default: $TPU_NAME, else "local").
        logical_cpus: for "mirrored" on a host without GPUs, split the CPU into this many
            logical devices and mirror over them (0: MirroredStrategy's own device choice).
    """
    if name not in STRATEGIES:
        raise ValueError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}")
    if name == "tpu":
        strategy = _tpu_strategy(tpu)
    elif name == "multi_worker":
        strategy = _multi_worker_strategy()
    elif name == "mirrored":
        devices = None
        if logical_cpus and not tf.config.list_physical_devices("GPU"):
            devices = configure_logical_cpus(logical_cpus)
        strategy = tf.distribute.MirroredStrategy(devices)
    else:
        device = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        strategy = tf.distribute.OneDeviceStrategy(device)
    logging.info(
        "Strategy %s: %d replica(s) in sync", type(strategy).__name__, strategy.num_replicas_in_sync
    )
    return strategy


def num_workers(strategy):
    """How many worker processes take part (1 except under multi-worker strategies)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or is_tpu(strategy):
        return 1
    spec = resolver.cluster_spec().as_dict()
    return max(1, sum(len(spec.get(job, [])) for job in ("chief", "worker")))


def is_chief(strategy):
    """True for the one process that writes checkpoints, summaries and exports.

    Under MultiWorkerMirroredStrategy that is the "chief" task, or worker 0 when the cluster has
    no chief; every other strategy runs in a single (chief) process.
    """
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return bool(strategy.extended.should_checkpoint)
    return True
