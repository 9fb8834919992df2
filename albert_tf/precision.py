"""`precision="auto"`: the compute precision and XLA setting that are fastest on this hardware.

    TPU                                    mixed_bfloat16 with XLA (TPUStrategy compiles the step)
    CPU with amx_bf16 or avx512_bf16       mixed_bfloat16 without XLA (oneDNN's bf16 kernels)
    other CPUs                             float32 without XLA
    GPU, compute capability >= 8.0         mixed_bfloat16 with XLA (bf16 tensor cores)
    GPU, compute capability 7.x            mixed_float16 with XLA where the loop scales the loss
                                           (`float16=True`: the pretraining loop), else float32
    older GPUs                             float32 with XLA (no bf16 tensor cores)

On CPUs XLA is off by default: oneDNN's kernels beat XLA's (docs/train.md, "Precision").
"float32" and "mixed_bfloat16" choose the precision explicitly;
an explicit `jit_compile` always wins. "mixed_float16" needs a loop with dynamic loss scaling
(`float16=True`; `keras.Model.fit` fine-tuning does not take it) and is refused on TPU.
`choose` is the pure decision (devices and CPU flags as arguments), `resolve` detects them and
logs one line.

>>> choice = choose("auto", device="CPU", cpu_flags={"avx512f", "avx512_bf16"})
>>> choice.policy, choice.jit_compile
('mixed_bfloat16', False)
>>> choice.log_line()
'precision: mixed_bfloat16 without XLA (CPU has avx512_bf16; oneDNN beats XLA on CPU)'
>>> choose("auto", device="GPU", gpu_capabilities=[(7, 5)]).log_line()
'precision: float32 with XLA (GPU compute capability 7.5 has no bfloat16 tensor cores)'
>>> choose("auto", device="GPU", gpu_capabilities=[(7, 0)], float16=True).policy
'mixed_float16'
>>> choose("float32", jit_compile=True, device="CPU").log_line()
'precision: float32 with XLA (float32 requested; XLA requested)'
"""

import dataclasses

from albert_tf.errors import UserError

PRECISIONS = ("auto", "float32", "mixed_bfloat16")
# With mixed_float16: the choices of a loop with dynamic loss scaling (`float16=True`).
FLOAT16_PRECISIONS = PRECISIONS + ("mixed_float16",)
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
DEVICES = ("CPU", "GPU", "TPU")
# /proc/cpuinfo flags of CPUs with native bfloat16 dot products (oneDNN uses them).
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
MIN_BF16_GPU_CAPABILITY = (8, 0)  # Ampere and later
MIN_FP16_GPU_CAPABILITY = (7, 0)  # Volta and Turing: float16 tensor cores


class PrecisionError(UserError, ValueError):
    """A precision this device (or this training loop) cannot run: one line naming the device
    and the choices."""


@dataclasses.dataclass(frozen=True)
class Precision:
    """A resolved choice: the Keras dtype policy, whether to XLA-compile, why, and the device
    kind it was made for."""

    policy: str
    jit_compile: bool
    reason: str
    device: str = "CPU"

    def log_line(self):
        """'precision: mixed_bfloat16 without XLA (CPU has avx512_bf16; ...)'."""
        xla = "with" if self.jit_compile else "without"
        return f"precision: {self.policy} {xla} XLA ({self.reason})"


def _device_choice(device, cpu_flags, gpu_capabilities, float16):
    """(policy, jit_compile, precision reason, jit reason) that `device` runs fastest with."""
    if device == "TPU":
        return "mixed_bfloat16", True, "TPU", None
    if device == "GPU":
        capability = min(gpu_capabilities) if gpu_capabilities else (0, 0)
        name = f"GPU compute capability {capability[0]}.{capability[1]}"
        if tuple(capability) >= MIN_BF16_GPU_CAPABILITY:
            return "mixed_bfloat16", True, f"{name} has bfloat16 tensor cores", None
        if float16 and tuple(capability) >= MIN_FP16_GPU_CAPABILITY:
            reason = f"{name} has float16 but no bfloat16 tensor cores; dynamic loss scaling"
            return "mixed_float16", True, reason, None
        return "float32", True, f"{name} has no bfloat16 tensor cores", None
    found = [flag for flag in BF16_CPU_FLAGS if flag in set(cpu_flags)]
    if found:
        reason = f"CPU has {' and '.join(found)}"
        return "mixed_bfloat16", False, reason, "oneDNN beats XLA on CPU"
    reason = f"CPU has no {' or '.join(BF16_CPU_FLAGS)}"
    return "float32", False, reason, "oneDNN beats XLA on CPU"


def choose(
    precision="auto",
    jit_compile=None,
    device="CPU",
    cpu_flags=(),
    gpu_capabilities=(),
    float16=False,
):
    """The `Precision` for a requested `precision` ("auto", "float32", "mixed_bfloat16", or with
    `float16` "mixed_float16") and `jit_compile` (None: the device's default) on `device` ("CPU",
    "GPU" or "TPU").

    `cpu_flags`: the CPU's feature flags (as in /proc/cpuinfo); `gpu_capabilities`: the
    (major, minor) compute capabilities of the GPUs (the smallest decides); `float16`: the
    caller scales the loss, so mixed_float16 may be chosen (auto on GPUs of capability 7.x).
    """
    allowed = FLOAT16_PRECISIONS if float16 else PRECISIONS
    if device not in DEVICES:
        raise ValueError(f"device={device!r}: expected one of {', '.join(DEVICES)}")
    if precision not in FLOAT16_PRECISIONS:
        raise PrecisionError(f"precision={precision!r}: expected one of {', '.join(allowed)}")
    if precision not in allowed:
        raise PrecisionError(
            f"precision={precision!r} cannot run here: this training loop does no dynamic loss "
            f"scaling (keras.Model.fit fine-tuning on a {device}): choose one of "
            f"{', '.join(allowed)}"
        )
    if precision == "mixed_float16" and device == "TPU":
        choices = ", ".join(p for p in allowed if p != "mixed_float16")
        raise PrecisionError(
            f"precision='mixed_float16' cannot run on a TPU (no float16 matmuls): choose one of "
            f"{choices}"
        )
    policy, jit, policy_reason, jit_reason = _device_choice(
        device, cpu_flags, gpu_capabilities, float16
    )
    if precision != "auto":
        policy, policy_reason = precision, f"{precision} requested"
        jit_reason = None if device == "TPU" else f"XLA {'on' if jit else 'off'} on {device}"
    if jit_compile is not None and device != "TPU":  # TPUStrategy compiles the step anyway
        jit, jit_reason = bool(jit_compile), "XLA requested" if jit_compile else "XLA off requested"
    reason = "; ".join(part for part in (policy_reason, jit_reason) if part)
    return Precision(policy, jit, reason, device)


def cpu_flags(path="/proc/cpuinfo"):
    """The feature flags of the first CPU in `path` (an empty set where there is no such file)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def is_tpu(strategy):
    """Whether `strategy` is a TPUStrategy."""
    import tensorflow as tf

    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def device_kind(strategy=None):
    """ "TPU", "GPU" or "CPU": where `strategy` (default: the current one) computes."""
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    if is_tpu(strategy):
        return "TPU"
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: TensorFlow places ops on a GPU when it has one
        return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    return "GPU" if any("GPU" in d.upper() for d in devices) else "CPU"


def gpu_capabilities():
    """[(major, minor)] compute capabilities of the visible GPUs."""
    import tensorflow as tf

    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability:
            found.append(tuple(capability))
    return found


def resolve(precision="auto", jit_compile=None, strategy=None, log=True, float16=False):
    """`choose` for this machine and `strategy`; logs the choice's one line (with `log`)."""
    from absl import logging

    device = device_kind(strategy)
    choice = choose(
        precision,
        jit_compile,
        device=device,
        cpu_flags=cpu_flags() if device == "CPU" else (),
        gpu_capabilities=gpu_capabilities() if device == "GPU" else (),
        float16=float16,
    )
    if log:
        logging.info("%s", choice.log_line())
    return choice


def apply_to_params(params, strategy=None, float16=False):
    """Resolves `params.precision` and `params.jit_compile` for `strategy` (logged; `float16`:
    as in `choose`), sets the global Keras dtype policy to the choice (before models are built)
    and returns (`params` with the resolved values, the previous global policy for the caller to
    restore)."""
    import dataclasses

    import keras

    choice = resolve(params.precision, params.jit_compile, strategy, float16=float16)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(choice.policy)
    resolved = dataclasses.replace(params, precision=choice.policy, jit_compile=choice.jit_compile)
    return resolved, previous
