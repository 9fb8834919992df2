r"""Token-classification data (NER, chunking, POS tags): CoNLL column files and JSON lines.

A CoNLL-2003 style file has one word per line in whitespace-separated columns (the word first,
the tag in `tag_column`), a blank line between sentences and optional ``-DOCSTART-`` lines. A
JSON-lines file has one ``{"tokens": [...], "tags": [...]}`` object per line. Entity tags in
IOB1, IOB2 or IOBES are converted to IOB2 (every entity starts with ``B-``); the scheme is
detected once per file. Tags without B-/I-/E-/S- prefixes (POS tags) are a plain tag set and
are kept as they are. Errors (`DataError`) name the file and line.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
>>> _ = open(path, "w").write("-DOCSTART- -X- O O\n\nEU NNP I-ORG\nrejects VBZ O\n"
...                           "German JJ I-MISC\n\nPeter NNP I-PER\nBlackburn NNP I-PER\n")
>>> data = read_conll(path)
>>> len(data), data.scheme, data.line_numbers
(2, 'iob1', [3, 7])
>>> data.words[1], data.tags[1]
(['Peter', 'Blackburn'], ['B-PER', 'I-PER'])
>>> labels = tag_vocabulary(data.tags)
>>> labels
['O', 'B-MISC', 'B-ORG', 'B-PER', 'I-MISC', 'I-ORG', 'I-PER']
>>> tags_to_ids(data.tags, labels, data)
[[2, 0, 1], [3, 6]]
"""

import dataclasses
import json
import os
import re
from typing import List, Optional

from albert_tf.data.task_spec import DataError
from albert_tf.data.text_files import read_text

SCHEMES = ("iob1", "iob2", "iobes", "plain")
DOCSTART = "-DOCSTART-"

_FIELD_SEPARATOR = re.compile(r"[ \t]+")
_BLANK = " \t\r\f\v"
_PREFIXED = re.compile(r"[BIES]-")  # a tag that belongs to an entity scheme (or tries to)


@dataclasses.dataclass
class TaggedSentences:
    """Sentences of words, one tag per word, and where each sentence starts in its file.

    Attributes:
        words: the words of each sentence.
        tags: the tags of each word, in IOB2 (or a plain tag set); None for unlabelled data.
        source: the file read.
        line_numbers: the 1-based line on which each sentence starts.
        scheme: the file's tag scheme before conversion ("iob1", "iob2", "iobes" or "plain");
            None for unlabelled data.
        word_per_line: True for CoNLL files (word j of sentence i is on line
            ``line_numbers[i] + j``), False for JSON lines (one sentence per line).
    """

    words: List[List[str]]
    tags: Optional[List[List[str]]]
    source: str
    line_numbers: List[int]
    scheme: Optional[str] = None
    word_per_line: bool = True

    def __len__(self):
        return len(self.words)

    def location(self, sentence, word=0):
        """``"file:line"`` of word `word` of sentence `sentence`, for error messages."""
        line = self.line_numbers[sentence] + (word if self.word_per_line else 0)
        return f"{self.source}:{line}"


def read_tagged(
    path, tag_column=-1, scheme="auto", labelled=True, tokens_key="tokens", tags_key="tags"
):
    """`read_jsonl_tagged` for .jsonl and .json files, `read_conll` for any other file."""
    path = os.fspath(path)
    if path.lower().endswith((".jsonl", ".json")):
        return read_jsonl_tagged(path, tokens_key, tags_key, scheme=scheme, labelled=labelled)
    return read_conll(path, tag_column, scheme=scheme, labelled=labelled)


def has_tags(path, tag_column=-1, tags_key="tags"):
    r"""Whether a file has tags: a JSON-lines file's first record has `tags_key`; a CoNLL file's
    first word line has the column `tag_column` (any column after the word for -1).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "test.txt")
    >>> _ = open(path, "w").write("-DOCSTART- -X- O O\n\nEU NNP I-ORG\n")
    >>> has_tags(path), has_tags(path, tag_column=3)
    (True, False)
    """
    path = os.fspath(path)
    for line in read_text(path).split("\n"):
        text = line.strip(_BLANK)
        if path.lower().endswith((".jsonl", ".json")):
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                return False
            return isinstance(record, dict) and tags_key in record
        fields = _FIELD_SEPARATOR.split(text) if text else []
        if fields and fields[0] != DOCSTART:
            return len(fields) > (tag_column if tag_column > 0 else 1)
    return False


def read_conll(path, tag_column=-1, scheme="auto", labelled=True):
    """Reads a CoNLL column file: the word in column 0, the tag in `tag_column` (may be negative).

    Blank lines separate sentences (several in a row and trailing ones are fine); ``-DOCSTART-``
    lines are skipped. `scheme` is "auto" (detected from all the file's tags) or one of
    `SCHEMES`; tags come back in IOB2. With `labelled=False` only the words are read.
    """
    path = os.fspath(path)
    _check_scheme(scheme)
    if not isinstance(tag_column, int) or tag_column == 0:
        raise ValueError(
            f"tag_column must be a non-zero int (column 0 is the word), got {tag_column!r}"
        )
    words, tags, lines = [], [], []
    sentence = ([], [], [])  # words, tags, line numbers of the sentence being read

    def end_sentence():
        nonlocal sentence
        if sentence[0]:
            for collected, part in zip((words, tags, lines), sentence):
                collected.append(part)
        sentence = ([], [], [])

    for number, line in enumerate(read_text(path).split("\n"), start=1):
        text = line.strip(_BLANK)
        fields = _FIELD_SEPARATOR.split(text) if text else []
        if not fields or fields[0] == DOCSTART:
            end_sentence()
            continue
        sentence[0].append(fields[0])
        sentence[2].append(number)
        if labelled:
            index = tag_column if tag_column > 0 else len(fields) + tag_column
            if not 0 < index < len(fields):
                raise DataError(
                    f"{path}:{number}: expected a tag in column {tag_column} but the "
                    f"line has {len(fields)} column(s): {text!r}"
                )
            sentence[1].append(fields[index])
    end_sentence()
    return _finish(
        path,
        words,
        tags if labelled else None,
        lines,
        scheme,
        word_per_line=True,
        empty_hint="has only blank and -DOCSTART- lines",
    )


def read_jsonl_tagged(path, tokens_key="tokens", tags_key="tags", scheme="auto", labelled=True):
    """Reads JSON lines, one object per sentence: ``{tokens_key: [words], tags_key: [tags]}``.

    Blank lines are skipped; `scheme` and `labelled` are as in `read_conll`.
    """
    path = os.fspath(path)
    _check_scheme(scheme)
    words, tags, lines = [], [], []
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip(_BLANK):
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: invalid JSON ({e.msg}, column {e.colno})") from None
        if not isinstance(record, dict):
            raise DataError(
                f"{where}: expected one JSON object per line, found {type(record).__name__}"
            )
        tokens = _string_list(record, tokens_key, where)
        if not tokens:
            raise DataError(f"{where}: {tokens_key!r} is an empty list")
        for position, token in enumerate(tokens):
            if not token.strip():
                raise DataError(
                    f"{where}: {tokens_key}[{position}] is empty or whitespace: {token!r}"
                )
        if labelled:
            sentence_tags = _string_list(
                record, tags_key, where, " (map tag ids to their names first)"
            )
            if len(sentence_tags) != len(tokens):
                raise DataError(
                    f"{where}: {len(tokens)} {tokens_key} but {len(sentence_tags)} {tags_key}"
                )
            tags.append(sentence_tags)
        words.append(tokens)
        lines.append([number] * len(tokens))
    return _finish(
        path,
        words,
        tags if labelled else None,
        lines,
        scheme,
        word_per_line=False,
        empty_hint="has only blank lines",
    )


def detect_scheme(tag_lists):
    """The tag scheme of a whole file's tags: "iobes", "iob1", "iob2" or "plain".

    Any S- or E- tag means IOBES; else an I-X that does not follow B-X or I-X means IOB1 (where
    I- starts entities); else IOB2. Tags without any B-/I-/E-/S- prefix are "plain" (only "O"
    tags count as IOB2).

    >>> detect_scheme([["B-PER", "I-PER"], ["O", "I-LOC"]])
    'iob1'
    >>> detect_scheme([["S-PER", "O"]]), detect_scheme([["NNP", "VBZ"]])
    ('iobes', 'plain')
    """
    prefixed = iobes = iob1 = False
    has_other = False
    for tags in tag_lists:
        previous = "O"
        for tag in tags:
            if _PREFIXED.match(tag):
                prefixed = True
                if tag[0] in "ES":
                    iobes = True
                elif tag[0] == "I" and not _continues(previous, tag[2:]):
                    iob1 = True
            elif tag != "O":
                has_other = True
            previous = tag
    if not prefixed:
        return "plain" if has_other else "iob2"
    return "iobes" if iobes else "iob1" if iob1 else "iob2"


def normalize_tags(tags, scheme):
    """One sentence's tags in `scheme` (one of `SCHEMES`) as IOB2; plain tags are unchanged.

    S-X becomes B-X, E-X becomes I-X, and an I-X that does not continue an entity of type X
    becomes B-X (an IOB1 start; conlleval reads it as a start in IOB2 too). Raises `DataError`
    for a tag that is not valid in `scheme`.

    >>> normalize_tags(["I-PER", "I-PER", "B-PER", "O", "I-LOC"], "iob1")
    ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC']
    >>> normalize_tags(["S-PER", "B-LOC", "E-LOC"], "iobes")
    ['B-PER', 'B-LOC', 'I-LOC']
    """
    _check_scheme(scheme, allow_auto=False)
    for position, tag in enumerate(tags):
        problem = _tag_problem(tag, scheme)
        if problem:
            raise DataError(f"word {position}: invalid tag {tag!r}: {problem}")
    if scheme == "plain":
        return list(tags)
    normalized = []
    previous = "O"
    for tag in tags:
        if tag != "O":
            prefix, kind = {"S": "B", "E": "I"}.get(tag[0], tag[0]), tag[2:]
            if prefix == "I" and not _continues(previous, kind):
                prefix = "B"
            tag = f"{prefix}-{kind}"
        normalized.append(tag)
        previous = tag
    return normalized


def tag_vocabulary(tag_lists, complete=True):
    """The sorted distinct tags, "O" first if present.

    With `complete`, every entity type seen as B-X or I-X gets both B-X and I-X, so that a tag
    missing from the training file (a type whose entities are all one word) is still known.

    >>> tag_vocabulary([["B-PER", "O", "B-LOC", "I-LOC"]])
    ['O', 'B-LOC', 'B-PER', 'I-LOC', 'I-PER']
    """
    seen = {tag for tags in tag_lists for tag in tags}
    if complete:
        kinds = {tag[2:] for tag in seen if tag[:2] in ("B-", "I-") and len(tag) > 2}
        seen.update(f"{prefix}-{kind}" for kind in kinds for prefix in "BI")
    return (["O"] if "O" in seen else []) + sorted(seen - {"O"})


def tags_to_ids(tag_lists, labels, source):
    """Tag strings -> indices into `labels`, one list per sentence.

    `source` names where the tags come from in the `DataError` for an unknown tag: the
    `TaggedSentences` they were read as (the message gives the word's file and line), or a
    file name (the message gives the sentence and word number).
    """
    index = {label: i for i, label in enumerate(labels)}
    ids = []
    for sentence, tags in enumerate(tag_lists):
        row = []
        for word, tag in enumerate(tags):
            if tag not in index:
                raise DataError(
                    f"{_location(source, sentence, word)}: unknown tag {tag!r}"
                    f"{_converted_note(source)} (known: {', '.join(labels)})"
                )
            row.append(index[tag])
        ids.append(row)
    return ids


def _location(source, sentence, word):
    if isinstance(source, TaggedSentences):
        return source.location(sentence, word)
    return f"{source}: sentence {sentence + 1}, word {word + 1}"


def _converted_note(source):
    scheme = getattr(source, "scheme", None)
    if scheme in ("iob1", "iobes"):
        return f" (converted to IOB2 from the file's {scheme.upper()} tags)"
    return ""


def _continues(previous, kind):
    """Whether a tag of type `kind` after `previous` continues an entity (IOB1/IOB2 reading)."""
    return previous[:2] in ("B-", "I-") and previous[2:] == kind


def _tag_problem(tag, scheme):
    """Why `tag` is not valid in `scheme`, or None if it is."""
    if not tag or any(c.isspace() for c in tag):
        return "tags must be non-empty and contain no whitespace"
    if scheme == "plain" or tag == "O":
        return None
    prefixes = "BIES" if scheme == "iobes" else "BI"
    if len(tag) > 2 and tag[0] in prefixes and tag[1] == "-":
        return None
    allowed = "/".join(f"{p}-" for p in prefixes)
    return f"expected 'O' or {allowed}<TYPE> in the {scheme.upper()} scheme"


def _check_scheme(scheme, allow_auto=True):
    allowed = SCHEMES + (("auto",) if allow_auto else ())
    if scheme not in allowed:
        raise ValueError(f"unknown tag scheme {scheme!r}; use one of {list(allowed)}")


def _finish(path, words, tags, lines, scheme, word_per_line, empty_hint):
    """Validates and converts the tags (each error at its word's line); the `TaggedSentences`."""
    if not words:
        raise DataError(f"{path}:1: no sentences; the file is empty or {empty_hint}")
    starts = [sentence_lines[0] for sentence_lines in lines]
    if tags is None:
        return TaggedSentences(words, None, path, starts, None, word_per_line)
    file_scheme = detect_scheme(tags) if scheme == "auto" else scheme
    for sentence_tags, sentence_lines in zip(tags, lines):
        for tag, number in zip(sentence_tags, sentence_lines):
            problem = _tag_problem(tag, file_scheme)
            if problem:
                detected = " (detected from all the file's tags)" if scheme == "auto" else ""
                raise DataError(f"{path}:{number}: invalid tag {tag!r}: {problem}{detected}")
    normalized = [normalize_tags(sentence_tags, file_scheme) for sentence_tags in tags]
    return TaggedSentences(words, normalized, path, starts, file_scheme, word_per_line)


def _string_list(record, key, where, hint=""):
    """record[key], checked to be a list of strings; `hint` ends the message for a non-string."""
    if key not in record:
        raise DataError(f"{where}: missing key {key!r}; the record has {sorted(record)}")
    value = record[key]
    if not isinstance(value, list):
        raise DataError(f"{where}: {key!r} must be a list of strings, found {type(value).__name__}")
    for position, item in enumerate(value):
        if not isinstance(item, str):
            raise DataError(
                f"{where}: {key}[{position}] must be a string, found "
                f"{type(item).__name__} {item!r}{hint}"
            )
    return value
