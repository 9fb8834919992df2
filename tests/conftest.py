"""Shared test fixtures: environment, a small real-prose corpus and a tiny SentencePiece model.

Each area of the package has its own test folder (tests/model, tests/text, ...) with its own
conftest.py for fixtures only it needs.
"""

import ast
import os
import pathlib
import re
import sysconfig

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

_STDLIB_MODULES = (
    "argparse",
    "collections/__init__",
    "dataclasses",
    "json/__init__",
    "logging/__init__",
    "pathlib",
    "shutil",
    "subprocess",
    "tarfile",
    "textwrap",
    "typing",
    "zipfile",
)


def _stdlib_documents():
    """Docstrings of a few stdlib modules: real English prose, present on every Python."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    documents = []
    for name in _STDLIB_MODULES:
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if not doc:
                    continue
                text = " ".join(doc.split())
                sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 3]
                if len(sentences) >= 2:
                    documents.append(sentences)
    return documents


# The modules with the longest tests (end-to-end runs of a minute or more), collected first,
# slowest first. `make test` runs `-n 2 --dist worksteal`: each worker starts on a contiguous
# half of the collection and an idle worker steals from the end of the other's queue, so the
# suite ends on short tests instead of one worker finishing a long one while the other waits.
SLOW_MODULES_FIRST = (
    "tests/finetune/test_learns.py",
    "tests/test_docs.py",
    "tests/finetune/test_squad_run.py",
    "tests/scripts/test_original_flags.py",
    "tests/finetune/test_token_classifier_run.py",
    "tests/model/test_text_inputs.py",
    "tests/finetune/test_finetune_resume.py",
    "tests/finetune/test_squad_export.py",
    "tests/train/test_gcs.py",
    "tests/faults/test_faults_preemption.py",
    "tests/finetune/test_gradient_accumulation.py",
)
_ROOT = pathlib.Path(__file__).resolve().parent.parent
_missing = [m for m in SLOW_MODULES_FIRST if not (_ROOT / m).is_file()]
assert not _missing, f"SLOW_MODULES_FIRST names missing test modules: {_missing}"


def pytest_collection_modifyitems(items):
    """Moves SLOW_MODULES_FIRST's tests to the front (a stable sort: the rest keep their order)."""
    rank = {module: i for i, module in enumerate(SLOW_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """A corpus in the original format: one sentence per line, blank line between documents."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    docs = _stdlib_documents()
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def spm_model_file(corpus_file, tmp_path_factory):
    """A 1000-piece SentencePiece unigram model with ALBERT's id layout (<pad>=0 ... [MASK]=4)."""
    import sentencepiece as spm

    prefix = tmp_path_factory.mktemp("spm") / "tiny"
    spm.SentencePieceTrainer.train(
        input=corpus_file,
        model_prefix=str(prefix),
        vocab_size=1000,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        character_coverage=0.99995,
        normalization_rule_name="nmt_nfkc",
        minloglevel=2,
    )
    return f"{prefix}.model"
