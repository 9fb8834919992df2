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
