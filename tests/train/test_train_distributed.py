"""Distribution: MirroredStrategy over 2 logical CPUs == one device (also with gradient
accumulation); MultiWorkerMirroredStrategy with 2 worker processes; --strategy=tpu without a TPU
fails clearly. Every run is a subprocess (logical devices and collectives must be set up before
TensorFlow starts)."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
from train_support import REPO, checkpoint_values, max_difference, run_script, tiny_flags

STEPS = 4


def test_mirrored_two_cpus_equals_one_device(records, tmp_path):
    # clip_norm far below the gradient norm: the clip is active at every step, so a per-replica
    # clip (before the all-reduce) would give different weights.
    common = dict(
        num_train_steps=STEPS,
        num_warmup_steps=1,
        clip_norm=0.05,
        save_checkpoints_steps=STEPS,
        precision="float32",  # bf16 rounds a batch of 8 and two of 4 differently
    )
    runs = {
        "one_device": tiny_flags(records, str(tmp_path / "one"), strategy="one_device", **common),
        "mirrored": tiny_flags(
            records, str(tmp_path / "mirrored"), strategy="mirrored", logical_cpus=2, **common
        ),
        # 2 micro-batches of 2 rows per replica: still the update of the 8-row batch
        "accumulated": tiny_flags(
            records,
            str(tmp_path / "accumulated"),
            strategy="mirrored",
            logical_cpus=2,
            gradient_accumulation_steps=2,
            **common,
        ),
    }
    processes = {
        name: run_script(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for name, args in runs.items()
    }
    logs = {name: p.communicate(timeout=300)[1] for name, p in processes.items()}
    for name, p in processes.items():
        assert p.returncode == 0, logs[name][-3000:]
    assert "MirroredStrategy: 2 replica(s) in sync" in logs["mirrored"]
    norms = [
        float(line.split("grad_norm ")[1].split()[0])
        for line in logs["mirrored"].splitlines()
        if "grad_norm " in line
    ]
    assert norms and min(norms) > 0.05  # clipping was active
    one = checkpoint_values(str(tmp_path / "one" / "checkpoints" / f"ckpt-{STEPS}"))
    two = checkpoint_values(str(tmp_path / "mirrored" / "checkpoints" / f"ckpt-{STEPS}"))
    assert max_difference(one, two) < 1e-5
    assert "micro-batch 2 x 2 accumulation step(s) x 2 replica(s)" in logs["accumulated"]
    accumulated = tmp_path / "accumulated" / "checkpoints" / f"ckpt-{STEPS}"
    assert max_difference(one, checkpoint_values(str(accumulated))) < 1e-5


_WORKER = """
import json, sys
import numpy as np
from albert_tf.train import runner
params = runner.PretrainingParams(**json.loads(sys.argv[1]))
result = runner.run_pretraining(params)
np.savez(sys.argv[2], **{v.path.replace("/", "|"): v.numpy() for v in result["model"].variables})
"""


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_multi_worker_two_processes(records, tmp_path):
    out = str(tmp_path / "run")
    temp_dirs = [tmp_path / f"tmp{i}" for i in range(2)]
    params = dict(
        input_file=records["train"],
        output_dir=out,
        albert_config_file=records["config"],
        max_seq_length=32,
        max_predictions_per_seq=5,
        train_batch_size=8,
        eval_batch_size=8,
        learning_rate=0.01,
        num_train_steps=STEPS,
        num_warmup_steps=1,
        save_checkpoints_steps=2,
        steps_per_loop=2,
        eval_input_files=records["eval"],
        export=False,
        strategy="multi_worker",
    )
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    processes = []
    for index in range(2):
        temp_dirs[index].mkdir()
        env = dict(
            os.environ,
            KERAS_BACKEND="tensorflow",
            TF_CPP_MIN_LOG_LEVEL="2",
            PYTHONPATH=REPO,
            TMPDIR=str(temp_dirs[index]),
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        )
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _WORKER,
                    json.dumps(params),
                    str(tmp_path / f"worker{index}.npz"),
                ],
                env=env,
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    logs = [p.communicate(timeout=300)[1] for p in processes]
    for p, log in zip(processes, logs):
        assert p.returncode == 0, log[-3000:]
    weights = [np.load(tmp_path / f"worker{i}.npz") for i in range(2)]
    assert sorted(weights[0].files) == sorted(weights[1].files)
    assert all(np.array_equal(weights[0][k], weights[1][k]) for k in weights[0].files)
    # Only the chief (worker 0) wrote: one event file per writer, checkpoints only in output_dir,
    # and the other worker's temporary checkpoint directory is gone.
    for name in ("train", "eval"):
        assert len(os.listdir(os.path.join(out, "summaries", name))) == 1
    assert sorted(
        f for f in os.listdir(os.path.join(out, "checkpoints")) if f.endswith(".index")
    ) == ["ckpt-2.index", "ckpt-4.index"]
    assert not [d for d in os.listdir(temp_dirs[1]) if d.startswith("albert_tf_worker_ckpt_")]
    with open(os.path.join(out, "eval_results.json")) as f:
        assert json.load(f)["global_step"] == STEPS


def test_tpu_strategy_without_tpu_fails_clearly(records, tmp_path):
    result = run_script(tiny_flags(records, str(tmp_path / "tpu"), strategy="tpu"))
    assert result.returncode == 1, result.stderr[-2000:]
    assert "--strategy=tpu: no TPU found at --tpu='local'" in result.stderr
    assert "Cloud TPU VM" in result.stderr
    assert not os.path.exists(tmp_path / "tpu" / "checkpoints")
