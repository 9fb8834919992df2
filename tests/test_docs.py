"""Every fenced code block of README.md and docs/*.md runs here, so the docs cannot drift.

Languages: ```python blocks are executed in this process, one namespace per document, in order;
```bash, ```sh and ```shell blocks run in `bash -e -o pipefail` (```console: the `$ ` lines).
Any other language (text, json, ...) is shown, not run. A fence without a language fails.

Each document runs in a fresh temporary working directory shared by its blocks in order (a
document is a flow: a block may use the files an earlier one wrote). The directory holds the
repository's `scripts/` and `flags/` (so commands run as from the repository root), `python`
and `.venv/bin/python` (this interpreter), and small stand-ins for the files the docs name:
`corpus.txt` and `corpus/part-0.txt` (stdlib docstrings, one sentence per line),
`30k-clean.model` and `spm.model` (a 1000-piece SentencePiece model with ALBERT's ids),
`pretrained/` and `demo_output/pretrain/export/` (a random albert_tiny with that vocabulary and
its spm.model), `glue_data/MRPC/`, `train.csv` / `dev.csv` (columns review, stars),
`conll/eng.*`, `squad/*-v1.1.json`, `race_data/RACE/`, `albert_base/` (an original TF1
checkpoint `model.ckpt-best`, its albert_config.json and 30k-clean.model), `albert-base-v2/`
(Hugging Face), `tiny/albert_config.json` and the tiny flagfiles `tiny/*.flags` (TINY_FLAGS
below); docs/train.md also gets `data/` (records of sequence
length 64, as docs/data.md writes them).

Directives, HTML comments on the lines right above a fence (GitHub does not show them):
    <!-- test: skip REASON -->           not run; only for what cannot run here (a TPU, gs://,
                                          Docker, a TF Serving server), REASON required
    <!-- test: replace "OLD" "NEW" -->   replace OLD (which must occur) by NEW before running:
                                          tiny sizes, local paths
    <!-- test: flags FILE -->             append --flagfile=FILE to every `scripts/*.py`
                                          command of the block (later flags win: tiny sizes)
    <!-- test: slow -->                   a measurement's command (still tiny): run only with
                                          ALBERT_TF_SLOW_DOCS=1, to keep this test near 90 s
A failure names the document and the line of the block.

A block that only repeats what another test runs in full (FLAGS_ONLY below, each entry naming
that test) runs its `scripts/*.py` commands with absl's `--only_check_args`: the flags and
flagfiles are parsed and checked (an unknown or misspelt flag, a bad value or a missing flagfile
fails), nothing is trained.
"""

import dataclasses
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import traceback

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md"] + sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
PYTHON = {"python"}
SHELL = {"bash", "sh", "shell", "console"}
SHOWN = {"text", "json", "tsv", "csv", "yaml", "toml", "ini", "protobuf"}
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*test:\s*(\w+)\s*(.*?)\s*-->\s*$")
SCRIPT_COMMAND = re.compile(r"scripts/\w+\.py\b")
TIMEOUT = 300

# Tiny overrides for the commands that train for real (appended, so they win over the doc's).
# `--export_dir=` skips the SavedModel export (7 s each; docs/finetune.md's Python flow exports).
TINY_FLAGS = {
    "data": [
        "--max_seq_length=64",
        "--max_predictions_per_seq=10",
        "--dupe_factor=1",
        "--num_output_shards=2",
        "--num_workers=1",
    ],
    "pretrain": [
        "--preset=",
        "--albert_config_file=tiny/albert_config.json",
        "--train_batch_size=8",
        "--eval_batch_size=8",
        "--num_train_steps=2",
        "--num_warmup_steps=1",
        "--steps_per_loop=1",
        "--save_checkpoints_steps=2",
        "--eval_every_steps=0",
        "--max_eval_steps=2",
        "--nojit_compile",
    ],
    "finetune": [
        "--max_seq_length=32",
        "--train_batch_size=4",
        "--eval_batch_size=16",
        "--num_train_steps=2",
        "--warmup_steps=0",
        "--save_checkpoints_steps=2",
        "--verbose=0",
        "--export_dir=",
    ],
    "squad": [
        "--max_seq_length=64",
        "--doc_stride=32",
        "--max_query_length=16",
        "--train_batch_size=4",
        "--eval_batch_size=16",
        "--num_train_steps=2",
        "--warmup_steps=0",
        "--save_checkpoints_steps=2",
        "--verbose=0",
        "--feature_cache_dir=squad_cache",
    ],
    "benchmark_serving": [
        "--preset=albert_tiny",
        "--fixed_length=64",
        "--latency_reps=2",
        "--throughput_batches=1",
        "--train_max_seq_length=32",
        "--train_batch_size=4",
        "--train_steps=1",
        "--work_dir=benchmark",
    ],
    "race": [
        "--max_seq_length=64",
        "--max_qa_length=24",
        "--train_batch_size=2",
        "--eval_batch_size=8",
        "--num_train_steps=2",
        "--warmup_steps=0",
        "--save_checkpoints_steps=2",
        "--verbose=0",
        "--export_dir=",
    ],
}


# (document, text of one block): why running the block in full would only repeat another test.
FLAGS_ONLY = {
    ("docs/finetune.md", "--flagfile=flags/glue_mnli.flags --gradient_accumulation_steps=16"): (
        'the first command of the block of "GLUE and your own data" (run_classifier.py, '
        "glue_mrpc.flags after the replace, glue_data, pretrained/), which runs in full, plus "
        "--gradient_accumulation_steps, which tests/finetune/test_finetune_resume.py::"
        "test_sigterm_sigkill_resume_equals_uninterrupted runs in full through run_classifier.py "
        "(micro-batch 2 x 2 accumulation steps: training, evaluation, export, resume)"
    ),
    ("docs/finetune.md", "--format=tfhub"): (
        "tests/export/test_tfhub_export.py runs the same command in full (a tiny pretrained "
        "model with its spm.model) and checks both SavedModels it writes"
    ),
}


@dataclasses.dataclass
class Block:
    document: str
    line: int  # of the opening fence, 1-based
    language: str
    source: str
    directives: list

    def __str__(self):
        return f"{self.document}:{self.line}"


def blocks(document):
    """The fenced blocks of `document` (a path relative to the repository), in order."""
    lines = (REPO / document).read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, language, start = match.group(1), match.group(2), i
        directives, j = [], i - 1
        while j >= 0 and DIRECTIVE.match(lines[j]):
            name, argument = DIRECTIVE.match(lines[j]).groups()
            directives.insert(0, (name, argument))
            j -= 1
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{document}:{start + 1}: the fence is never closed")
        found.append(Block(document, start + 1, language, "\n".join(body) + "\n", directives))
        i += 1
    return found


def directive_lines(document):
    """Line numbers (1-based) of every `<!-- test: ... -->` line of `document`."""
    lines = (REPO / document).read_text(encoding="utf-8").splitlines()
    return [n + 1 for n, line in enumerate(lines) if DIRECTIVE.match(line)]


def prepared_source(block):
    """The block's source after its replace and flags directives; None when skipped."""
    source = block.source
    for name, argument in block.directives:
        if name == "skip":
            assert argument, f"{block}: `test: skip` needs a reason"
            return None
        if name == "slow":
            if os.environ.get("ALBERT_TF_SLOW_DOCS") != "1":
                return None
        elif name == "replace":
            old, new = shlex.split(argument)
            assert old in source, f"{block}: `test: replace` text {old!r} is not in the block"
            source = source.replace(old, new)
        elif name == "flags":
            assert block.language in SHELL, f"{block}: `test: flags` applies to shell blocks"
            source = _append_flagfile(source, argument)
        else:
            raise AssertionError(f"{block}: unknown directive `test: {name}`")
    return source


def _append_flagfile(source, flagfile):
    """Appends --flagfile=FILE to each logical line that runs a scripts/*.py command."""
    source, count = _append_to_script_commands(source, f"--flagfile={flagfile}")
    assert count, f"`test: flags {flagfile}`: no scripts/*.py command in the block"
    return source


def _append_to_script_commands(source, argument):
    """(source with `argument` appended to each logical line running a scripts/*.py command,
    the number of such lines)."""
    logical = source.replace("\\\n", " ").splitlines()
    out, count = [], 0
    for line in logical:
        if SCRIPT_COMMAND.search(line) and not line.lstrip().startswith("#"):
            code, comment = re.match(r"(.*?)(\s+#[^'\"]*)?$", line).groups()
            line = f"{code} {argument}{comment or ''}"
            count += 1
        out.append(line)
    return "\n".join(out) + "\n", count


def flags_only(block):
    """The FLAGS_ONLY reason for `block`, or None: it then runs with --only_check_args."""
    reasons = [
        reason
        for (document, text), reason in FLAGS_ONLY.items()
        if document == block.document and text in block.source
    ]
    assert len(reasons) <= 1, f"{block}: more than one FLAGS_ONLY entry"
    return reasons[0] if reasons else None


def _write_glue_and_csv(root, sentences):
    mrpc = root / "glue_data" / "MRPC"
    mrpc.mkdir(parents=True)
    for split, part in (("train", sentences[:48]), ("dev", sentences[48:72])):
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        rows += [
            f"{i % 2}\t{i}\t{i + 1}\t{a}\t{b}"
            for i, (a, b) in enumerate(zip(part[::2], part[1::2]))
        ]
        (mrpc / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        rows = ["review,stars"] + [
            f'"{s.replace(chr(34), "")}",{1 + i % 3}' for i, s in enumerate(part)
        ]
        (root / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _write_race(root, documents):
    """RACE/{train,dev,test}/{middle,high}/1.txt: which sentence is from the article."""
    for split in ("train", "dev", "test"):
        for level in ("middle", "high"):
            directory = root / "race_data" / "RACE" / split / level
            directory.mkdir(parents=True)
            picked = documents[:4] if split == "train" else documents[4:6]
            record = {"article": [], "questions": [], "options": [], "answers": [], "id": "1.txt"}
            articles = []
            for n, document in enumerate(picked):
                others = [d[0] for d in documents[8:11]]
                articles.append(" ".join(document))
                record["questions"].append("Which sentence is in the passage?")
                record["options"].append(others[: n % 4] + [document[0]] + others[n % 4 :])
                record["answers"].append("ABCD"[n % 4])
            record["article"] = " ".join(articles)
            (directory / "1.txt").write_text(json.dumps(record), encoding="utf-8")


def _write_checkpoints(root, corpus_file):
    """albert_base/ (original TF1) and albert-base-v2/ (Hugging Face): the convert fixtures."""
    import sentencepiece as spm

    fixtures = REPO / "tests" / "convert" / "fixtures"
    shutil.copytree(fixtures / "hf_shared_tanh", root / "albert-base-v2")
    original = root / "albert_base"
    original.mkdir()
    shutil.copyfile(
        fixtures / "original_groups" / "albert_config.json", original / "albert_config.json"
    )
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copyfile(
            fixtures / "original_groups" / f"model.ckpt-7{suffix}",
            original / f"model.ckpt-best{suffix}",
        )
    vocab_size = json.loads((original / "albert_config.json").read_text())["vocab_size"]
    spm.SentencePieceTrainer.train(
        input=corpus_file,
        model_prefix=str(original / "30k-clean"),
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
    )


@pytest.fixture(scope="session")
def stand_ins(corpus_file, spm_model_file, tmp_path_factory):
    """The stand-in files, built once; each document gets a copy."""
    import albert_tf
    from albert_tf.config import AlbertConfig
    from albert_tf.data.docstring_entities import conll_text, docstring_code_splits
    from albert_tf.data.docstring_qa import write_docstring_squad
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    root = tmp_path_factory.mktemp("docs_stand_ins")
    shutil.copyfile(corpus_file, root / "corpus.txt")
    (root / "corpus").mkdir()
    shutil.copyfile(corpus_file, root / "corpus" / "part-0.txt")
    for name in ("30k-clean.model", "spm.model"):
        shutil.copyfile(spm_model_file, root / name)
    (root / "tiny").mkdir()
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000)
    config.to_json_file(str(root / "tiny" / "albert_config.json"))
    for name, lines in TINY_FLAGS.items():
        (root / "tiny" / f"{name}.flags").write_text("\n".join(lines) + "\n", encoding="utf-8")
    albert_tf.save(
        AlbertPretrainer(AlbertModel(config)),
        str(root / "pretrained"),
        spm_model=spm_model_file,
    )
    shutil.copytree(root / "pretrained", root / "demo_output" / "pretrain" / "export")
    documents = [
        d.split("\n")
        for d in pathlib.Path(corpus_file).read_text(encoding="utf-8").split("\n\n")
        if d.strip()
    ]
    _write_glue_and_csv(root, [s for d in documents for s in d])
    _write_race(root, documents)
    (root / "conll").mkdir()
    splits = docstring_code_splits(max_sentences=120)
    for split, name in (("train", "eng.train"), ("dev", "eng.testa"), ("test", "eng.testb")):
        (root / "conll" / name).write_text(conll_text(splits[split]), encoding="utf-8")
    (root / "squad").mkdir()
    write_docstring_squad(
        str(root / "squad" / "train-v1.1.json"),
        str(root / "squad" / "dev-v1.1.json"),
        max_paragraphs=20,
    )
    _write_checkpoints(root, corpus_file)
    interpreter = f'#!/bin/sh\nexec "{sys.executable}" "$@"\n'
    for directory in (root / "bin", root / ".venv" / "bin"):
        directory.mkdir(parents=True)
        (directory / "python").write_text(interpreter)
        (directory / "python").chmod(0o755)
    return root


@pytest.fixture(scope="session")
def pretraining_records(stand_ins, tmp_path_factory):
    """data/train-*.tfrecord and data/heldout.tfrecord as docs/data.md's command writes them."""
    from albert_tf.data.instances import InstanceConfig
    from albert_tf.data.masking import MaskingConfig
    from albert_tf.data.pretraining import CreationConfig, create_pretraining_data

    root = tmp_path_factory.mktemp("docs_records")
    instance = InstanceConfig(max_seq_length=64, masking=MaskingConfig(max_predictions_per_seq=10))
    config = CreationConfig(instance=instance, dupe_factor=1)
    create_pretraining_data(
        str(stand_ins / "corpus.txt"),
        str(root / "data" / "train"),
        str(stand_ins / "spm.model"),
        config=config,
        num_output_shards=2,
    )
    create_pretraining_data(
        str(stand_ins / "corpus.txt"),
        str(root / "data" / "heldout.tfrecord"),
        str(stand_ins / "spm.model"),
        config=config,
    )
    return root / "data"


def _working_directory(document, stand_ins, request, tmp_path):
    shutil.copytree(stand_ins, tmp_path, dirs_exist_ok=True, symlinks=True)
    for name in ("scripts", "flags"):
        (tmp_path / name).symlink_to(REPO / name)
    if document == "docs/train.md":
        shutil.copytree(request.getfixturevalue("pretraining_records"), tmp_path / "data")
    return tmp_path


def _shell_script(block, source):
    if block.language == "console":
        source = "\n".join(line[2:] for line in source.splitlines() if line.startswith("$ "))
    return source


def _run_shell(block, source, cwd):
    env = dict(
        os.environ,
        PATH=f"{cwd / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        KERAS_BACKEND="tensorflow",
        TF_CPP_MIN_LOG_LEVEL="2",
    )
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", _shell_script(block, source)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if result.returncode:
        pytest.fail(
            f"{block}: the {block.language} block exited with {result.returncode}:\n"
            f"{source}\n--- stdout (tail) ---\n{result.stdout[-3000:]}\n"
            f"--- stderr (tail) ---\n{result.stderr[-6000:]}",
            pytrace=False,
        )


def _run_python(block, source, namespace):
    # Padding keeps the document's line numbers in tracebacks; the filename is the document.
    code = compile("\n" * block.line + source, str(REPO / block.document), "exec")
    try:
        exec(code, namespace)  # noqa: S102 - the documentation's own example
    except Exception:  # noqa: BLE001 - reported with the document's line
        pytest.fail(f"{block}: the python block failed:\n{traceback.format_exc()}", pytrace=False)


def test_every_fence_declares_a_known_language():
    for document in DOCUMENTS:
        for block in blocks(document):
            assert block.language, f"{block}: a fence needs a language (```text if not code)"
            assert block.language in PYTHON | SHELL | SHOWN, (
                f"{block}: unknown language {block.language!r}; add it to PYTHON, SHELL or SHOWN"
            )


def test_every_directive_belongs_to_a_block():
    for document in DOCUMENTS:
        attached = {b.line - 1 - k for b in blocks(document) for k in range(len(b.directives))}
        stray = [n for n in directive_lines(document) if n not in attached]
        assert not stray, (
            f"{document}: lines {stray}: a `test:` directive must be right above a fence"
        )


def test_every_flags_only_entry_names_one_shell_block():
    """A FLAGS_ONLY entry that matches no block (the doc changed) or a non-shell one fails."""
    for document, text in FLAGS_ONLY:
        matches = [b for b in blocks(document) if text in b.source]
        assert len(matches) == 1, f"FLAGS_ONLY {text!r}: {len(matches)} blocks of {document}"
        assert matches[0].language in SHELL, f"{matches[0]}: FLAGS_ONLY applies to shell blocks"


def test_directives_parse_and_apply(monkeypatch):
    block = Block(
        "x.md",
        3,
        "bash",
        "python scripts/a.py --n=5 \\\n    --m=1  # note\nls\n",
        [("replace", '"--n=5" "--n=1"'), ("flags", "tiny/f.flags")],
    )
    assert prepared_source(block) == (
        "python scripts/a.py --n=1      --m=1 --flagfile=tiny/f.flags  # note\nls\n"
    )
    assert prepared_source(dataclasses.replace(block, directives=[("skip", "a TPU")])) is None
    slow = dataclasses.replace(block, directives=[("slow", ""), ("replace", '"--m=1" "--m=2"')])
    monkeypatch.delenv("ALBERT_TF_SLOW_DOCS", raising=False)
    assert prepared_source(slow) is None
    monkeypatch.setenv("ALBERT_TF_SLOW_DOCS", "1")  # then the other directives apply as usual
    assert prepared_source(slow) == block.source.replace("--m=1", "--m=2")
    monkeypatch.delenv("ALBERT_TF_SLOW_DOCS")
    with pytest.raises(AssertionError, match="x.md:3: `test: replace` text '--k' is not in"):
        prepared_source(dataclasses.replace(block, directives=[("replace", '"--k" "--j"')]))
    with pytest.raises(AssertionError, match="needs a reason"):
        prepared_source(dataclasses.replace(block, directives=[("skip", "")]))


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_code_runs(document, stand_ins, request, tmp_path, monkeypatch):
    import keras

    runnable = [b for b in blocks(document) if b.language in PYTHON | SHELL]
    cwd = _working_directory(document, stand_ins, request, tmp_path)
    monkeypatch.chdir(cwd)
    policy = keras.mixed_precision.global_policy()
    namespace = {"__name__": "__docs__"}
    try:
        for block in runnable:
            source = prepared_source(block)
            if source is None:  # skipped; a python block must still compile
                if block.language in PYTHON:
                    compile(block.source, str(block), "exec")
                continue
            if block.language in PYTHON:
                _run_python(block, source, namespace)
            else:
                if flags_only(block):  # what another test runs in full: flags checked only
                    source, count = _append_to_script_commands(source, "--only_check_args")
                    assert count, f"{block}: a FLAGS_ONLY block needs a scripts/*.py command"
                _run_shell(block, source, cwd)
    finally:
        keras.mixed_precision.set_global_policy(policy)
