"""Text corpora as a stream of documents, each a list of sentence strings.

Specs accepted by `iter_documents` (comma-separated lists may mix them):
- a file path, a glob or a directory (local or gs://, read through tf.io.gfile), in one of two
  formats: "sentences" (ALBERT's: one sentence per line, blank line between documents) or
  "lines" (one document per line, split into sentences by `albert_tf.text.sentences`);
- "tfds:NAME" (e.g. "tfds:wikipedia/20230601.en"): an already prepared TFDS dataset, one example
  per document (its `feature` split into paragraphs on newlines, then into sentences);
- "builtin:docstrings": English docstrings of the installed tensorflow, keras and numpy sources
  (about 11 MB of prose, no download), cached after the first read.

Nothing is loaded whole: documents are produced one at a time. Lines that are not valid UTF-8 are
skipped and counted in a `CorpusStats`, per file, with the documents lost whole to them (every
line of theirs bad: in the "lines" format, each bad line), or raise with file:line when
`strict=True`; `skipped_message` says it in one line at the end of a run. A file that is
not UTF-8 text at all raises a `DataError` naming it: binary (a NUL byte in its first 64 KiB),
UTF-16, or at least half of its non-blank lines undecodable (checked on the first 64 KiB when the
spec is resolved, and on the whole file once it has been read).

>>> stats = CorpusStats()
>>> for sentences in iter_documents("corpus/*.txt", stats=stats):   # doctest: +SKIP
...     pass
>>> stats.skipped_lines                                              # doctest: +SKIP
0
"""

import dataclasses
import os
import re
from typing import Optional

import tensorflow as tf
from absl import logging

from albert_tf.data import builtin_corpus
from albert_tf.data.builtin_corpus import BUILTIN_PACKAGES
from albert_tf.data.task_spec import DataError
from albert_tf.text.sentences import split_sentences

FORMATS = ("sentences", "lines")
_READ_CHUNK = 8 << 20
LOGGED_BAD_LINES = 10  # skipped lines logged and listed in the summary
SNIFF_BYTES = 64 << 10  # the head of each file checked before reading
_MOSTLY_UNDECODABLE = 0.5  # a file with this fraction of bad non-blank lines is not UTF-8 text
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclasses.dataclass
class SkippedLines:
    """The lines of one file (or TFDS split: examples) that were not valid UTF-8."""

    lines: int = 0
    first_line: Optional[int] = None  # 1-based line number (a TFDS example's index)
    documents: int = 0  # documents dropped whole: none of their lines was valid
    first_document_line: Optional[int] = None


@dataclasses.dataclass
class CorpusStats:
    """Counters filled while a corpus is read (pass one to `iter_documents(stats=...)`);
    `quiet`: no WARNING per skipped line (for a second pass over the same corpus)."""

    files: int = 0
    lines: int = 0
    documents: int = 0
    sentences: int = 0
    skipped_lines: int = 0
    skipped_locations: list = dataclasses.field(default_factory=list)  # first few "file:line"
    dropped_documents: int = 0
    skipped_by_source: dict = dataclasses.field(default_factory=dict)  # source -> SkippedLines
    quiet: bool = False

    def skip(self, source, line):
        """Counts line `line` of `source` (a file, or "tfds:NAME[SPLIT]" and an example index),
        which is not valid UTF-8."""
        self.skipped_lines += 1
        skipped = self.skipped_by_source.setdefault(source, SkippedLines())
        skipped.lines += 1
        if skipped.first_line is None:
            skipped.first_line = line
        if len(self.skipped_locations) < LOGGED_BAD_LINES:
            self.skipped_locations.append(f"{source}:{line}")
            if not self.quiet:
                logging.warning("Skipping a line that is not valid UTF-8 at %s:%s", source, line)

    def drop_document(self, source, line):
        """Counts a document of `source` lost whole to skipped lines (the first at `line`)."""
        self.dropped_documents += 1
        skipped = self.skipped_by_source.setdefault(source, SkippedLines())
        skipped.documents += 1
        if skipped.first_document_line is None:
            skipped.first_document_line = line

    def skipped_summary(self):
        """{source: SkippedLines as a dict} of the sources that had skipped lines (JSON-able)."""
        return {source: dataclasses.asdict(s) for source, s in self.skipped_by_source.items()}


def _count(number, noun):
    return f"{number} {noun}{'' if number == 1 else 's'}"


def skipped_message(source, skipped):
    """The end-of-run line of `skipped` (`SkippedLines` as a dict) in `source`.

    >>> skipped_message("dump.txt", {"lines": 3, "first_line": 7, "documents": 3,
    ...                              "first_document_line": 7})
    '3 documents dropped for non-UTF-8 bytes in dump.txt (first at line 7)'
    >>> skipped_message("c.txt", {"lines": 2, "first_line": 4, "documents": 0,
    ...                           "first_document_line": None})
    '2 lines skipped for non-UTF-8 bytes in c.txt (first at line 4); no document dropped'
    """
    unit = "example" if source.startswith("tfds:") else "line"
    lines, documents = skipped["lines"], skipped["documents"]
    first_line = f"(first at {unit} {skipped['first_line']})"
    if not documents:
        return (
            f"{_count(lines, unit)} skipped for non-UTF-8 bytes in {source} {first_line}; "
            "no document dropped"
        )
    message = (
        f"{_count(documents, 'document')} dropped for non-UTF-8 bytes in {source} (first at "
        f"{unit} {skipped['first_document_line']})"
    )
    if lines > documents:
        message += f"; {_count(lines, unit)} skipped in all {first_line}"
    return message


def iter_documents(
    spec,
    format="sentences",
    *,
    strict=False,
    stats=None,
    data_dir=None,
    split="train",
    feature="text",
    packages=BUILTIN_PACKAGES,
    cache_dir=None,
    check_file=None,
):
    """Returns an iterator over the documents of `spec`, each a non-empty list of sentences.

    The spec is resolved (files listed, TFDS preparation checked, the first 64 KiB of each file
    checked) before this returns, so a wrong path or file fails before any work.

    Args:
      spec: str (comma-separated) or list of str; see the module docstring.
      format: "sentences" or "lines", for file specs.
      strict: raise ValueError naming file:line on a line that is not valid UTF-8 instead of
        skipping it.
      stats: optional `CorpusStats` filled while reading.
      data_dir, split, feature: for "tfds:" specs (TFDS data directory, split, text feature).
      packages: for "builtin:docstrings", the packages whose docstrings are read.
      cache_dir: for "builtin:docstrings"; default $ALBERT_TF_CACHE or ~/.cache/albert_tf.
      check_file: optional further check of each file, called as check_file(path, head) with
        its first `SNIFF_BYTES` (e.g. `corpus_layout.check_sentences_layout`).
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    stats = stats if stats is not None else CorpusStats()
    readers = []
    for item in _split_spec(spec):
        if item.startswith("tfds:"):
            readers.append(
                _tfds_reader(item[len("tfds:") :], data_dir, split, feature, strict, stats)
            )
        elif item.startswith("builtin:"):
            if item != "builtin:docstrings":
                raise ValueError(f"unknown built-in corpus {item!r}; available: builtin:docstrings")
            readers.append(_docstrings_reader(tuple(packages), cache_dir, stats))
        else:
            for path in resolve_files(item):
                head = check_text_file(path)
                if check_file is not None:
                    check_file(path, head)
                readers.append(file_reader(path, format, strict, stats))
    return _chain(readers, stats)


def input_files(spec):
    """The files a corpus spec reads ("tfds:" and "builtin:" items read none of the user's)."""
    return [
        path
        for item in _split_spec(spec)
        if not item.startswith(("tfds:", "builtin:"))
        for path in resolve_files(item)
    ]


def _chain(readers, stats):
    for reader in readers:
        for document in reader():
            stats.documents += 1
            stats.sentences += len(document)
            yield document


def _split_spec(spec):
    items = [spec] if isinstance(spec, str) else list(spec)
    parts = [p.strip() for item in items for p in str(item).split(",")]
    parts = [p for p in parts if p]
    if not parts:
        raise ValueError(f"empty corpus spec {spec!r}")
    return parts


def resolve_files(pattern):
    """A path, glob or directory -> sorted list of files; raises when nothing readable matches."""
    if _GLOB_CHARS.search(pattern):
        files = sorted(p for p in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(p))
        if not files:
            raise FileNotFoundError(f"corpus glob {pattern!r} matches no files")
    elif not tf.io.gfile.exists(pattern):
        raise FileNotFoundError(f"corpus file not found: {pattern}")
    elif tf.io.gfile.isdir(pattern):
        files = sorted(os.path.join(pattern, name) for name in tf.io.gfile.listdir(pattern))
        files = [p for p in files if not tf.io.gfile.isdir(p)]
        if not files:
            raise FileNotFoundError(f"corpus directory {pattern!r} holds no files")
    else:
        files = [pattern]
    for path in files:
        if "://" not in path and not os.access(path, os.R_OK):
            raise PermissionError(f"corpus file is not readable: {path}")
    return files


def _not_text_error(path, bad, lines, scope):
    """The DataError of a file whose non-blank lines are mostly not valid UTF-8."""
    return DataError(
        f"{path}: {bad / lines:.0%} of the non-blank lines {scope} ({bad} of {lines}) are not "
        f"valid UTF-8: is it Latin-1 or another encoding? Convert it to UTF-8, e.g. "
        f"`iconv -f latin1 -t utf-8 {path} > {os.path.basename(path)}.utf8` (a file with fewer bad "
        f"lines has them skipped and counted)"
    )


def _mostly_undecodable(bad, lines):
    return bad > 0 and bad >= _MOSTLY_UNDECODABLE * lines


def check_text_file(path):
    """Raises DataError naming `path` when its first 64 KiB are not UTF-8 text: binary (a NUL
    byte), UTF-16 (its byte-order mark), or at least half of the non-blank lines undecodable.
    Returns those bytes (`SNIFF_BYTES`, or the whole file when shorter)."""
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(
            f"{path}: UTF-16 text (it starts with a UTF-16 byte-order mark); convert "
            f"it to UTF-8, e.g. `iconv -f utf-16 -t utf-8 {path} > "
            f"{os.path.basename(path)}.utf8`"
        )
    nul = head.find(b"\0")
    if nul >= 0:
        raise DataError(
            f"{path}: a binary file, not text (a NUL byte at offset {nul}); the corpus "
            "must be UTF-8 text"
        )
    lines = head.split(b"\n")
    if len(head) == SNIFF_BYTES:
        lines.pop()  # may end inside a line (or a character)
    lines = [line for line in lines if line.strip()]
    bad = sum(1 for line in lines if not _decodes(line))
    if _mostly_undecodable(bad, len(lines)):
        whole = len(head) < SNIFF_BYTES
        scope = "of the file" if whole else f"in its first {SNIFF_BYTES >> 10} KiB"
        raise _not_text_error(path, bad, len(lines), scope)
    return head


def _decodes(raw):
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _read_lines(path, strict, stats):
    """Yields (line number, decoded line without its line end) for each line of `path`; a line
    that is not valid UTF-8 raises (`strict`) or is counted in `stats` and yielded as None.
    Raises DataError at the end when at least half of the non-blank lines were bad."""
    stats.files += 1
    non_blank = bad = 0
    with tf.io.gfile.GFile(path, "rb") as f:
        lineno, rest = 0, b""
        while True:
            chunk = f.read(_READ_CHUNK)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop() if chunk else b""
            for raw in lines:
                lineno += 1
                stats.lines += 1
                non_blank += bool(raw.strip())
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    location = f"{path}:{lineno}"
                    if strict:
                        byte = raw[e.start : e.start + 1]
                        raise DataError(
                            f"{location}: not valid UTF-8 (byte {byte!r} at column {e.start + 1})"
                        ) from None
                    bad += 1
                    stats.skip(path, lineno)
                    yield lineno, None
                    continue
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield lineno, line.rstrip("\r")
            if not chunk:
                break
    if _mostly_undecodable(bad, non_blank):
        raise _not_text_error(path, bad, non_blank, "of the file")


def file_reader(path, format, strict, stats):
    """A function returning a fresh iterator over the documents of the file `path` in `format`
    ("sentences" or "lines"); a document of lines that are all invalid UTF-8 (a line, in the
    "lines" format) is dropped and counted in `stats`."""

    def sentences_format():
        document, first_bad = [], None
        for lineno, line in _read_lines(path, strict, stats):
            if line is None:
                first_bad = first_bad or lineno
                continue
            line = line.strip()
            if line:
                document.append(line)
                continue
            if document:
                yield document
            elif first_bad:
                stats.drop_document(path, first_bad)
            document, first_bad = [], None
        if document:
            yield document
        elif first_bad:
            stats.drop_document(path, first_bad)

    def lines_format():
        for lineno, line in _read_lines(path, strict, stats):
            if line is None:
                stats.drop_document(path, lineno)
                continue
            document = split_sentences(line)
            if document:
                yield document

    return sentences_format if format == "sentences" else lines_format


def _tfds_reader(name, data_dir, split, feature, strict, stats):
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core import read_only_builder

    # Read from the prepared files only: no dataset code, no download, no GCS lookup.
    try:
        builder = read_only_builder.builder_from_files(name, data_dir=data_dir)
    except Exception as e:  # DatasetNotFoundError and friends
        reason = str(e).split("\n")[0]
        raise FileNotFoundError(
            f"TFDS dataset {name!r} is not prepared in "
            f"{data_dir or 'the default TFDS data_dir'}; albert_tf reads prepared data only "
            f"(prepare it first with `tfds build` or builder.download_and_prepare(), or pass the "
            f"data_dir that holds it). TFDS said: {reason}"
        ) from None
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"TFDS dataset {name!r} in {builder.data_dir} is not completely prepared"
        )
    features = builder.info.features
    if feature not in features:
        raise ValueError(
            f"TFDS dataset {name!r} has no feature {feature!r}; features: {sorted(features.keys())}"
        )
    if split not in builder.info.splits:
        raise ValueError(
            f"TFDS dataset {name!r} has no split {split!r}; "
            f"splits: {sorted(builder.info.splits.keys())}"
        )

    def read():
        dataset = builder.as_dataset(split=split, shuffle_files=False)
        for i, example in enumerate(tfds.as_numpy(dataset)):
            stats.lines += 1
            raw = example[feature]
            try:
                text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            except UnicodeDecodeError:
                source = f"tfds:{name}[{split}]"
                if strict:
                    raise ValueError(
                        f"{source}:{i}: feature {feature!r} is not valid UTF-8"
                    ) from None
                stats.skip(source, i)
                stats.drop_document(source, i)
                continue
            document = [s for paragraph in text.split("\n") for s in split_sentences(paragraph)]
            if document:
                yield document

    stats.files += 1
    return read


def _docstrings_reader(packages, cache_dir, stats):
    cache_path = builtin_corpus.docstrings_cache_path(packages, cache_dir)
    if tf.io.gfile.exists(cache_path):
        logging.info("builtin:docstrings: reading the cache %s", cache_path)
        return file_reader(cache_path, "sentences", True, stats)
    files = builtin_corpus.package_source_files(packages)
    stats.files += len(files)
    return lambda: builtin_corpus.documents_writing_cache(files, cache_path)
