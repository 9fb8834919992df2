"""What a bare `import albert_tf` gives: every name of the README's API table, and every saved
albert_tf model loadable by `keras.saving.load_model`."""

import os
import re
import subprocess
import sys

import albert_tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme_api_names():
    """Dotted names in the first column of README.md's API table (`albert_tf.x.y(...)`)."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        rows = [line for line in f if line.startswith("| `albert_tf")]
    names = []
    for row in rows:
        cell = row.split("|")[1]
        for code in re.findall(r"`([^`]+)`", cell):
            names.append(re.match(r"[\w.]+", code).group(0))
    return names


def test_readme_api_names_resolve_from_a_bare_import():
    # A name without the albert_tf. prefix is relative to an ancestor of the previous full
    # name (`to_huggingface` after `albert_tf.convert.from_original`).
    script = (
        "import albert_tf, functools, json, sys\n"
        "def resolve(name):\n"
        "    return functools.reduce(getattr, name.split('.')[1:], albert_tf)\n"
        "missing, previous = [], 'albert_tf'\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    parts = previous.split('.')\n"
        "    candidates = [name] if name.startswith('albert_tf.') else [\n"
        "        '.'.join(parts[:k] + [name]) for k in range(len(parts) - 1, 0, -1)]\n"
        "    for candidate in candidates:\n"
        "        try:\n"
        "            resolve(candidate)\n"
        "            previous = candidate\n"
        "            break\n"
        "        except AttributeError:\n"
        "            pass\n"
        "    else:\n"
        "        missing.append(name)\n"
        "print(json.dumps(missing))\n"
    )
    import json

    names = _readme_api_names()
    assert len(names) > 15
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(names)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_saved_models_load_after_a_bare_import(tmp_path):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    config = AlbertConfig.from_preset("albert_tiny", vocab_size=50, num_hidden_layers=1)
    paths = []
    for model in (
        AlbertClassifier(AlbertModel(config), num_classes=2),
        AlbertTokenClassifier(AlbertModel(config), num_classes=3),
    ):
        model.compile()
        paths.append(str(tmp_path / f"{type(model).__name__}.keras"))
        model.save(paths[-1])
    script = (
        "import sys, albert_tf, keras\n"
        "for path in sys.argv[1:]:\n"
        "    print(type(keras.saving.load_model(path)).__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["AlbertClassifier", "AlbertTokenClassifier"]


def test_every_module_with_serializable_classes_is_imported_with_the_package():
    package = os.path.join(REPO, "albert_tf")
    registering = set()
    for root, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    if "@keras.saving.register_keras_serializable" in f.read():
                        module = os.path.relpath(os.path.join(root, name[:-3]), REPO)
                        registering.add(module.replace(os.sep, "."))
    assert registering == set(albert_tf.SERIALIZABLE_MODULES)


def test_light_import_for_worker_processes_skips_tensorflow():
    script = (
        "import sys, albert_tf.data.pretraining, albert_tf.text.tokenizer\n"
        "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n"
    )
    env = dict(os.environ, **{albert_tf.LIGHT_IMPORT_ENV: "1"})
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
