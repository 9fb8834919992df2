r"""The built-in corpus "builtin:docstrings": English prose from the docstrings of the installed
tensorflow, keras and numpy sources (about 11 MB, no download), cached after the first read.

`albert_tf.data.corpora.iter_documents("builtin:docstrings")` reads it; this module finds the
source files, extracts prose sentences (code, markup and argument lists removed) and keys the
cache by the packages' versions and `DOCSTRINGS_FORMAT_VERSION`.

>>> docstring_sentences("Adds two tensors.\n\nArgs:\n  x: a tensor, the first term.")
['Adds two tensors.']
"""

import ast
import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import time

import tensorflow as tf
from absl import logging

from albert_tf.files import temporary_path
from albert_tf.text.sentences import split_sentences

BUILTIN_PACKAGES = ("tensorflow", "keras", "numpy")
DOCSTRINGS_FORMAT_VERSION = 2  # bump when the extraction rules below change (invalidates caches)


def default_cache_dir():
    return os.environ.get("ALBERT_TF_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "albert_tf"
    )


def docstrings_cache_path(packages=BUILTIN_PACKAGES, cache_dir=None):
    """The cache file for `packages`, keyed by their installed versions and the extraction rules."""
    versions = []
    for name in packages:
        try:
            versions.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name}=?")
    key = hashlib.sha256(f"{DOCSTRINGS_FORMAT_VERSION}|{'|'.join(versions)}".encode()).hexdigest()[
        :16
    ]
    return os.path.join(
        cache_dir or default_cache_dir(), f"docstrings-{'-'.join(packages)}-{key}.txt"
    )


def package_source_files(packages=BUILTIN_PACKAGES):
    """Sorted .py files of the installed `packages` (found with importlib, without importing
    them)."""
    files = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"builtin:docstrings: package {name!r} is not installed")
        for location in sorted(spec.submodule_search_locations):
            for root, dirs, names in os.walk(location):
                dirs[:] = [d for d in dirs if d not in ("tests", "testing", "__pycache__")]
                files.extend(
                    os.path.join(root, n)
                    for n in names
                    if n.endswith(".py")
                    and not n.endswith("_test.py")
                    and not n.startswith("test_")
                )
    return sorted(files)


def documents_writing_cache(files, cache_path):
    """Documents of the docstrings of `files`, written to `cache_path` as they are read (the
    cache appears, atomically, only when every file has been read)."""
    tf.io.gfile.makedirs(os.path.dirname(cache_path))
    tmp_path = temporary_path(cache_path)
    start, size = time.time(), 0
    try:
        with tf.io.gfile.GFile(tmp_path, "w") as out:
            for n, path in enumerate(files):
                if n % 500 == 0:
                    logging.info(
                        "builtin:docstrings: %d/%d source files, %.1f MB of text",
                        n,
                        len(files),
                        size / 1e6,
                    )
                for document in file_docstrings(path):
                    text = "\n".join(document) + "\n\n"
                    size += len(text.encode("utf-8"))
                    out.write(text)
                    yield document
        tf.io.gfile.rename(tmp_path, cache_path, overwrite=True)
        logging.info(
            "builtin:docstrings: %.1f MB from %d files in %.1fs, cached in %s",
            size / 1e6,
            len(files),
            time.time() - start,
            cache_path,
        )
    finally:
        if tf.io.gfile.exists(tmp_path):
            tf.io.gfile.remove(tmp_path)


def file_docstrings(path):
    """Documents (lists of prose sentences) from the docstrings of one Python source file."""
    with open(path, "rb") as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                document = docstring_sentences(doc)
                if document:
                    yield document


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Attributes|"
    r"Input shape|Output shape|Call arguments|Notes?|See Also|References|Warnings?|"
    r"Examples?|Usage|Example usage|Standalone usage|Methods|Properties)\s*:?$",
    re.I,
)
_CODE_SECTION = re.compile(
    r"^(Examples?|Usage|Example usage|Standalone usage|Methods|Properties|"
    r"See Also|References)\b",
    re.I,
)
_UNDERLINE = re.compile(r"^\s*([-=~^*#`]{3,})\s*$")
_ARG_HEAD = re.compile(r"^\s*\*{0,2}[A-Za-z_][\w.*]*(\s*\([^)]*\))?\s*:\s*")
_NUMPY_PARAM = re.compile(r"^[A-Za-z_*][\w*, ]*\s:(\s|$)")  # "x, y : array_like, optional"
_ROLE = re.compile(r":[a-z]+(:[a-z]+)?:`~?([^`<]*?)(\s*<[^>]*>)?`")
_CODE_LIKE = re.compile(
    r"(^\s*(>>>|\.\.\.|\.\. |@|#|\$|import |from \w+ import|def |class |"
    r"\||\+[-=]|[{}\[\]]|[A-Za-z_][\w.]*\s*=[^=])|[;{}]|=>|==|\w\(.*\)\s*$|"
    r"https?://)"
)
_WORD = re.compile(r"[A-Za-z]+")


def _is_prose_line(line):
    stripped = line.strip()
    if not stripped or _CODE_LIKE.search(stripped):
        return False
    letters = sum(c.isalpha() for c in stripped)
    return letters >= 0.6 * len(stripped.replace(" ", ""))


def docstring_sentences(doc):
    """Prose sentences of one docstring, code and markup removed; [] when nothing prose-like
    remains.

    Removed: doctest blocks (>>> to the next blank line), fenced ``` blocks, the indented block
    after a line ending in "::", Example/Usage sections, section headers and underlines, argument
    names before their descriptions, tables, and lines that look like code (assignments, calls,
    brackets, URLs) or are less than 60% letters.
    """
    paragraphs, current = [], []
    in_fence = in_doctest = skip_section = False
    literal_indent = None
    for raw in inspect.cleandoc(doc).split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if in_doctest:
            if stripped:
                continue
            in_doctest = False
        if stripped.startswith(">>>"):
            in_doctest = True
            continue
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        if not stripped:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        if indent == 0 and _SECTION.match(stripped):
            skip_section = bool(_CODE_SECTION.match(stripped))
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        if skip_section and indent == 0 and not _CODE_SECTION.match(stripped):
            skip_section = False
        if skip_section or _UNDERLINE.match(stripped) or _NUMPY_PARAM.match(stripped):
            continue
        literal_block_follows = stripped.endswith("::")
        if literal_block_follows:
            literal_indent = indent
            stripped = stripped[:-1]
        if _ARG_HEAD.match(stripped) and indent > 0:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            stripped = _ARG_HEAD.sub("", stripped, count=1)
        stripped = _ROLE.sub(r"\2", stripped)
        if _is_prose_line(stripped):
            current.append(stripped)
            if not literal_block_follows:
                continue
        if current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    sentences = []
    for paragraph in paragraphs:
        for sentence in split_sentences(paragraph):
            words = _WORD.findall(sentence)
            if (
                len(words) >= 3
                and (sentence[0].isupper() or sentence[0] == "`")
                and sentence[-1] in ".!?:)\"'"
            ):
                sentences.append(sentence)
    return sentences
