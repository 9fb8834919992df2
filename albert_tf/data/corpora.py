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
skipped and counted in a `CorpusStats` (or raise with file:line when `strict=True`). A file that is
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

import tensorflow as tf
from absl import logging

from albert_tf.data import builtin_corpus
from albert_tf.data.builtin_corpus import BUILTIN_PACKAGES
from albert_tf.data.task_spec import DataError
from albert_tf.text.sentences import split_sentences

FORMATS = ("sentences", "lines")
_READ_CHUNK = 8 << 20
_LOGGED_BAD_LINES = 10
_SNIFF_BYTES = 64 << 10
_MOSTLY_UNDECODABLE = 0.5  # a file with this fraction of bad non-blank lines is not UTF-8 text
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclasses.dataclass
class CorpusStats:
    """Counters filled while a corpus is read (pass one to `iter_documents(stats=...)`)."""

    files: int = 0
    lines: int = 0
    documents: int = 0
    sentences: int = 0
    skipped_lines: int = 0
    skipped_locations: list = dataclasses.field(default_factory=list)  # first few "file:line"

    def skip(self, location):
        self.skipped_lines += 1
        if len(self.skipped_locations) < _LOGGED_BAD_LINES:
            self.skipped_locations.append(location)
            logging.warning("Skipping a line that is not valid UTF-8 at %s", location)


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
):
    """Returns an iterator over the documents of `spec`, each a non-empty list of sentences.

    The spec is resolved (files listed, TFDS preparation checked) before this returns, so a wrong
    path fails before any work.

    Args:
      spec: str (comma-separated) or list of str; see the module docstring.
      format: "sentences" or "lines", for file specs.
      strict: raise ValueError naming file:line on a line that is not valid UTF-8 instead of
        skipping it.
      stats: optional `CorpusStats` filled while reading.
      data_dir, split, feature: for "tfds:" specs (TFDS data directory, split, text feature).
      packages: for "builtin:docstrings", the packages whose docstrings are read.
      cache_dir: for "builtin:docstrings"; default $ALBERT_TF_CACHE or ~/.cache/albert_tf.
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
                check_text_file(path)
                readers.append(_file_reader(path, format, strict, stats))
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
    byte), UTF-16 (its byte-order mark), or at least half of the non-blank lines undecodable."""
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
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
    if len(head) == _SNIFF_BYTES:
        lines.pop()  # may end inside a line (or a character)
    lines = [line for line in lines if line.strip()]
    bad = sum(1 for line in lines if not _decodes(line))
    if _mostly_undecodable(bad, len(lines)):
        whole = len(head) < _SNIFF_BYTES
        scope = "of the file" if whole else f"in its first {_SNIFF_BYTES >> 10} KiB"
        raise _not_text_error(path, bad, len(lines), scope)


def _decodes(raw):
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _read_lines(path, strict, stats):
    """Yields the decoded lines of `path` (without line ends), skipping or raising on bad UTF-8;
    raises DataError at the end when at least half of the non-blank lines were bad."""
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
                    stats.skip(location)
                    continue
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield line.rstrip("\r")
            if not chunk:
                break
    if _mostly_undecodable(bad, non_blank):
        raise _not_text_error(path, bad, non_blank, "of the file")


def _file_reader(path, format, strict, stats):
    def sentences_format():
        document = []
        for line in _read_lines(path, strict, stats):
            line = line.strip()
            if line:
                document.append(line)
            elif document:
                yield document
                document = []
        if document:
            yield document

    def lines_format():
        for line in _read_lines(path, strict, stats):
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
                location = f"tfds:{name}[{split}]:{i}"
                if strict:
                    raise ValueError(
                        f"{location}: feature {feature!r} is not valid UTF-8"
                    ) from None
                stats.skip(location)
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
        return _file_reader(cache_path, "sentences", True, stats)
    files = builtin_corpus.package_source_files(packages)
    stats.files += len(files)
    return lambda: builtin_corpus.documents_writing_cache(files, cache_path)
