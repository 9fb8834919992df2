"""The chain with every path on gs://, against a local GCS emulator (tests/gcs_support.py).

create_pretraining_data, run_pretraining (SIGKILLed, then resumed to the weights of an
uninterrupted run), run_classifier and export_saved_model read and write gs://albert-test/...
through TensorFlow's own GCS filesystem; and what a reader sees after a model directory save to
gs:// is cut off (docs/train.md, "Object stores").
"""

import concurrent.futures
import json
import os
import signal
import subprocess
import sys

import pytest
import tensorflow as tf
from signal_support import run_until
from train_support import REPO, checkpoint_values, max_difference, tiny_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gcs_support import GcsEmulator, emulator_available  # noqa: E402

from albert_tf import files  # noqa: E402

pytestmark = pytest.mark.skipif(
    not emulator_available(),
    reason="needs the gcp-storage-emulator and cryptography packages (pip install "
    "gcp-storage-emulator) for a local GCS endpoint",
)

BUCKET = "gs://albert-test"
STEPS = 6


@pytest.fixture(scope="module")
def config(records):
    """The tiny config of the training tests, with the 1000 pieces of the spm_model_file."""
    with open(records["config"]) as f:
        return dict(json.load(f), vocab_size=1000)


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """The emulator, with this process's environment (and so its scripts') pointed at it."""
    emulator = GcsEmulator(tmp_path_factory.mktemp("gcs")).start()
    saved = {k: os.environ.get(k) for k in emulator.env()}
    os.environ.update(emulator.env())
    yield emulator
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    emulator.stop()


def _script(name, args, **popen):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    command = [sys.executable, os.path.join(REPO, "scripts", name), *args]
    if popen:
        return subprocess.Popen(command, env=env, cwd=REPO, **popen)
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def _hidden(directory):
    return [p for p in tf.io.gfile.glob(f"{directory}/*") if "/.tmp-" in p]


def test_atomic_writes_and_stale_clean_up_on_gcs(gcs):
    target = f"{BUCKET}/files/values.json"
    stale = files.temporary_path(target)
    with tf.io.gfile.GFile(stale, "w") as f:  # what a killed writer leaves
        f.write('{"half": ')
    files.write_json(target, {"a": 1})
    assert files.read_json(target) == {"a": 1}
    files.write_atomic(f"{BUCKET}/files/blob.bin", b"\x00\x01")
    with tf.io.gfile.GFile(f"{BUCKET}/files/blob.bin", "rb") as f:
        assert f.read() == b"\x00\x01"
    assert _hidden(f"{BUCKET}/files") == []


def test_chain_on_gcs_with_kill_and_resume(gcs, config, corpus_file, spm_model_file, tmp_path):
    data, run, cls = f"{BUCKET}/chain/data", f"{BUCKET}/chain/run", f"{BUCKET}/chain/cls"
    corpus, spm = f"{BUCKET}/chain/in/corpus.txt", f"{BUCKET}/chain/in/spm.model"
    tf.io.gfile.makedirs(f"{BUCKET}/chain/in")
    tf.io.gfile.copy(str(corpus_file), corpus, overwrite=True)
    tf.io.gfile.copy(str(spm_model_file), spm, overwrite=True)
    config_file = f"{BUCKET}/chain/in/albert_config.json"
    files.write_json(config_file, config)

    created = _script(
        "create_pretraining_data.py",
        [
            f"--input_file={corpus}",
            f"--output_file={data}/train",
            "--num_output_shards=2",
            f"--spm_model_file={spm}",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--dupe_factor=2",
        ],
    )
    assert created.returncode == 0, created.stderr[-3000:]
    shards = tf.io.gfile.glob(f"{data}/train-*")
    assert len(shards) == 2, tf.io.gfile.glob(f"{data}/*")
    assert _hidden(data) == []

    records = {"config": config_file, "train": f"{data}/train-*"}
    common = dict(
        num_train_steps=STEPS,
        save_checkpoints_steps=2,
        steps_per_loop=1,
        keep_checkpoint_max=10,
        jit_compile=False,
        spm_model_file=spm,
    )
    # The uninterrupted reference shares nothing with the killed and resumed run but its input
    # (the gs:// records): it runs in another process meanwhile (the machine has a second core).
    reference = str(tmp_path / "uninterrupted")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        uninterrupted = pool.submit(
            _script, "run_pretraining.py", tiny_flags(records, reference, **common)
        )
        process = _script(
            "run_pretraining.py",
            tiny_flags(records, run, **common),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        code, log = run_until(process, f"step 4/{STEPS}", signal.SIGKILL, timeout=300)
        assert code == -signal.SIGKILL, log[-3000:]
        latest = tf.train.latest_checkpoint(f"{run}/checkpoints")
        assert latest is not None and int(latest.rsplit("-", 1)[1]) < STEPS, latest

        resumed = _script("run_pretraining.py", tiny_flags(records, run, export=True, **common))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "Resuming from" in resumed.stderr
        uninterrupted = uninterrupted.result()
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    assert (
        max_difference(
            checkpoint_values(f"{run}/checkpoints/ckpt-{STEPS}"),
            checkpoint_values(f"{reference}/checkpoints/ckpt-{STEPS}"),
        )
        == 0.0
    )
    assert sorted(tf.io.gfile.listdir(f"{run}/export")) == [
        "config.json",
        "pretrainer.weights.h5",
        "spm.model",
        "text.json",
    ]

    tuned = _script(
        "run_classifier.py",
        [
            "--task_name=mentions-file",
            f"--init_checkpoint={run}/export",
            f"--train_file={_tsv(tmp_path, corpus_file, 'train')}",
            f"--dev_file={_tsv(tmp_path, corpus_file, 'dev')}",
            "--text_column=sentence",
            "--max_seq_length=32",
            "--train_batch_size=8",
            "--eval_batch_size=16",
            "--num_train_steps=2",
            "--save_checkpoints_steps=2",
            f"--output_dir={cls}",
            "--verbose=0",
        ],
    )
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    exported = _script(
        "export_saved_model.py", [f"--model_dir={cls}", f"--export_dir={BUCKET}/serving"]
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert tf.io.gfile.exists(f"{BUCKET}/serving/1/saved_model.pb"), tf.io.gfile.glob(
        f"{BUCKET}/serving/*"
    )
    assert _hidden(f"{BUCKET}/serving") == [] and _hidden(run) == []


def _tsv(tmp_path, corpus_file, split):
    """A gs:// copy of the fine-tuning split `split` (train/dev.tsv of finetune_support)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "finetune"))
    from finetune_support import write_tsv_splits

    paths, _ = write_tsv_splits(str(tmp_path), corpus_file)
    target = f"{BUCKET}/chain/in/{split}.tsv"
    tf.io.gfile.copy(paths[split], target, overwrite=True)
    return target


def test_cut_off_model_directory_save_on_gcs(gcs, config, monkeypatch):
    """The documented guarantee: each file is whole (the old or the new one), the directory may
    mix both, hidden staging files may stay, and the next save leaves it whole and clean."""
    from albert_tf.config import AlbertConfig
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel

    directory = f"{BUCKET}/cut/model"
    old = AlbertModel(AlbertConfig.from_dict(dict(config)))
    model_dir.save(old, directory)
    before = _contents(directory)
    new = AlbertModel(AlbertConfig.from_dict(dict(config, initializer_range=0.5)))

    rename, renamed = tf.io.gfile.rename, []

    def cut_off(source, target, overwrite=False):  # the process dies after its first file
        if not target.startswith(directory):  # local files staged before the upload
            return rename(source, target, overwrite=overwrite)
        if renamed:
            raise KeyboardInterrupt("killed")
        renamed.append(target)
        rename(source, target, overwrite=overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", cut_off)
    with pytest.raises(KeyboardInterrupt):
        model_dir.save(new, directory)
    monkeypatch.setattr(tf.io.gfile, "rename", rename)

    after = _contents(directory)
    visible = {k: v for k, v in after.items() if not k.startswith(".tmp-")}
    assert sorted(visible) == sorted(before)
    changed = [k for k in visible if visible[k] != before[k]]
    assert [f"{directory}/{k}" for k in changed] == renamed  # the one renamed file is new
    assert any(k.startswith(".tmp-") for k in after)  # the staged next file stays hidden

    model_dir.save(new, directory)
    final = _contents(directory)
    assert not any(k.startswith(".tmp-") for k in final)
    assert all(final[k] != before[k] for k in final if k != "text.json" and k != "config.json")
    assert model_dir.load_backbone(directory).config.initializer_range == 0.5


def _contents(directory):
    out = {}
    for name in tf.io.gfile.listdir(directory):
        with tf.io.gfile.GFile(f"{directory}/{name}", "rb") as f:
            out[name.rstrip("/")] = f.read()
    return out


def test_cut_off_export_publish_on_gcs(gcs, monkeypatch):
    """A version directory on gs:// is complete exactly when it holds saved_model.pb (moved
    last); the next export removes one a killed publish left and takes its number again."""
    from albert_tf.export import versions

    base = f"{BUCKET}/cut/serving"
    layout = ("assets/spm.model", "saved_model.pb", "variables/variables.index")

    def export(tmp_dir):
        for name in layout:
            with tf.io.gfile.GFile(f"{tmp_dir}/{name}", "w") as f:
                f.write(name)

    rename, moved = tf.io.gfile.rename, []

    def cut_off(source, target, overwrite=False):  # the process dies before its last file
        if len(moved) == len(layout) - 1:
            raise KeyboardInterrupt("killed")
        moved.append(target[len(base) + len("/1/") :])
        rename(source, target, overwrite=overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", cut_off)
    with pytest.raises(KeyboardInterrupt):
        with versions.publish_version(base) as (tmp_dir, version):
            export(tmp_dir)
    monkeypatch.setattr(tf.io.gfile, "rename", rename)
    assert version == 1 and "saved_model.pb" not in moved
    assert versions.list_versions(base) == [1]
    assert not tf.io.gfile.exists(f"{base}/1/saved_model.pb")

    with versions.publish_version(base) as (tmp_dir, version):
        export(tmp_dir)
    assert version == 1
    assert sorted(
        f"{root[len(base) + 3 :].strip('/')}/{name}".lstrip("/")
        for root, _, names in tf.io.gfile.walk(f"{base}/1")
        for name in names
    ) == sorted(layout)
    assert [p for p in tf.io.gfile.listdir(base) if p.startswith(".tmp-")] == []
