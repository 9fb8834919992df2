"""CoNLL and JSON-lines token-classification files: schemes, layout details, file:line errors."""

import json

import pytest

from albert_tf.data import conll
from albert_tf.data.task_spec import DataError

# CoNLL-2003 layout: word, POS tag, chunk tag (IOB1), NER tag (IOB1).
CONLL_2003 = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER


"""


def _write(path, text):
    path.write_bytes(text.encode("utf-8"))
    return path


def _jsonl(path, *records):
    return _write(path, "".join(json.dumps(r) + "\n" for r in records))


def _error(reader, path, *args, **kwargs):
    with pytest.raises(DataError) as info:
        reader(path, *args, **kwargs)
    return str(info.value)


def test_conll_2003_layout(tmp_path):
    data = conll.read_conll(_write(tmp_path / "train.txt", CONLL_2003))
    assert len(data) == 2
    assert data.words == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert data.tags == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]]
    assert data.scheme == "iob1"
    assert data.line_numbers == [3, 8]  # line 1 -DOCSTART-, 2 blank, 7 blank
    assert data.source == str(tmp_path / "train.txt")
    assert data.location(1, 1) == f"{data.source}:9"


def test_other_columns_and_plain_tags(tmp_path):
    path = _write(tmp_path / "train.txt", CONLL_2003)
    pos = conll.read_conll(path, tag_column=1)
    assert pos.scheme == "plain"
    assert pos.tags == [["NNP", "VBZ", "JJ", "NN"], ["NNP", "NNP"]]
    # Chunk tags: every chunk starts with I- (IOB1); "German call" is one NP chunk.
    chunks = conll.read_conll(path, tag_column=2)
    assert chunks.tags == [["B-NP", "B-VP", "B-NP", "I-NP"], ["B-NP", "I-NP"]]
    assert conll.read_conll(path, tag_column=-1).tags == conll.read_conll(path, 3).tags


def test_crlf_bom_and_blank_lines(tmp_path):
    text = "\n\nEU B-ORG\nrejects O\n\n\n\nPeter B-PER\n  \nBlackburn B-PER\n\n\n"
    plain = conll.read_conll(_write(tmp_path / "lf.txt", text))
    crlf_path = tmp_path / "crlf.txt"
    crlf_path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    crlf = conll.read_conll(crlf_path)
    for data in (plain, crlf):
        assert data.words == [["EU", "rejects"], ["Peter"], ["Blackburn"]]
        assert data.tags == [["B-ORG", "O"], ["B-PER"], ["B-PER"]]
        assert data.line_numbers == [3, 8, 10]
        assert data.scheme == "iob2"


def test_docstart_inside_a_sentence_ends_it(tmp_path):
    data = conll.read_conll(_write(tmp_path / "t.txt", "EU B-ORG\n-DOCSTART- O\nPeter B-PER\n"))
    assert data.words == [["EU"], ["Peter"]]
    assert data.line_numbers == [1, 3]


def test_tab_separated_columns(tmp_path):
    data = conll.read_conll(_write(tmp_path / "t.tsv", "EU\tNNP\tB-ORG\nrejects \t VBZ\tO\n"))
    assert data.words == [["EU", "rejects"]] and data.tags == [["B-ORG", "O"]]


def test_scheme_conversion():
    assert conll.normalize_tags(["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"], "iob1") == [
        "B-PER",
        "I-PER",
        "B-PER",
        "O",
        "B-LOC",
        "B-ORG",
    ]
    assert conll.normalize_tags(
        ["S-PER", "B-LOC", "I-LOC", "E-LOC", "O", "S-ORG", "S-ORG"], "iobes"
    ) == ["B-PER", "B-LOC", "I-LOC", "I-LOC", "O", "B-ORG", "B-ORG"]
    assert conll.normalize_tags(["B-PER", "I-PER", "B-PER", "O"], "iob2") == [
        "B-PER",
        "I-PER",
        "B-PER",
        "O",
    ]
    # IOB2 with a broken start: conlleval reads it as a start, the result says so with B-.
    assert conll.normalize_tags(["O", "I-PER"], "iob2") == ["O", "B-PER"]
    assert conll.normalize_tags(["NN", "X-Y", "O"], "plain") == ["NN", "X-Y", "O"]
    with pytest.raises(DataError, match="word 1: invalid tag 'S-PER'"):
        conll.normalize_tags(["O", "S-PER"], "iob2")
    with pytest.raises(ValueError, match="unknown tag scheme 'auto'"):
        conll.normalize_tags(["O"], "auto")


def test_detect_scheme():
    assert conll.detect_scheme([["B-PER", "I-PER", "O"], ["B-LOC", "B-LOC"]]) == "iob2"
    assert conll.detect_scheme([["B-PER", "I-PER"], ["O", "I-LOC"]]) == "iob1"
    assert conll.detect_scheme([["B-PER", "I-LOC"]]) == "iob1"  # I- after another type
    assert conll.detect_scheme([["I-PER"]]) == "iob1"  # I- at the sentence start
    assert conll.detect_scheme([["B-PER", "I-PER"], ["O", "E-LOC"]]) == "iobes"
    assert conll.detect_scheme([["NN", "VB"], ["O"]]) == "plain"
    assert conll.detect_scheme([["O", "O"], []]) == "iob2"


def test_scheme_is_detected_on_the_whole_file(tmp_path):
    # Sentence 1 alone looks like IOB2; sentence 2 starts an entity with I-, so the file is IOB1.
    path = _write(
        tmp_path / "t.txt", "Peter I-PER\nBlackburn I-PER\nand O\nAnn B-PER\n\nin O\nParis I-LOC\n"
    )
    data = conll.read_conll(path)
    assert data.scheme == "iob1"
    assert data.tags == [["B-PER", "I-PER", "O", "B-PER"], ["O", "B-LOC"]]
    # An S- tag anywhere makes the file IOBES, where an unprefixed "PER" is invalid (line 5).
    path = _write(tmp_path / "e.txt", "Ann S-PER\n\nin O\nParis S-LOC\nsays PER\n")
    assert f"{path}:5: invalid tag 'PER'" in _error(conll.read_conll, path)
    # An explicit scheme is not second-guessed.
    path = _write(tmp_path / "x.txt", "Ann B-PER\nSmith I-PER\n\nBob S-PER\n")
    assert f"{path}:4: invalid tag 'S-PER'" in _error(conll.read_conll, path, scheme="iob2")


def test_jsonl_and_dispatch(tmp_path):
    records = [
        {"tokens": ["EU", "rejects"], "tags": ["I-ORG", "O"], "id": 1},
        {"tokens": ["Peter"], "tags": ["I-PER"]},
    ]
    for name in ("train.jsonl", "train.json"):
        path = _jsonl(tmp_path / name, *records)
        data = conll.read_tagged(path)
        assert data.words == [["EU", "rejects"], ["Peter"]]
        assert data.tags == [["B-ORG", "O"], ["B-PER"]] and data.scheme == "iob1"
        assert data.line_numbers == [1, 2] and data.location(0, 1) == f"{path}:1"
    path = _write(
        tmp_path / "other.jsonl", "\n" + json.dumps({"w": ["a"], "t": ["S-X"]}) + "\r\n\n"
    )
    data = conll.read_jsonl_tagged(path, tokens_key="w", tags_key="t")
    assert data.tags == [["B-X"]] and data.line_numbers == [2]
    assert conll.read_tagged(_write(tmp_path / "t.conll", "a B-X\n")).words == [["a"]]


def test_unlabelled_files(tmp_path):
    data = conll.read_tagged(
        _write(tmp_path / "test.txt", "-DOCSTART-\n\nEU\nrejects\n\nPeter\n"), labelled=False
    )
    assert data.words == [["EU", "rejects"], ["Peter"]]
    assert data.tags is None and data.scheme is None and data.line_numbers == [3, 6]
    data = conll.read_tagged(_jsonl(tmp_path / "test.jsonl", {"tokens": ["EU"]}), labelled=False)
    assert data.words == [["EU"]] and data.tags is None


def test_tag_vocabulary_and_ids(tmp_path):
    tags = [["B-PER", "I-PER", "O"], ["B-LOC", "O"]]
    assert conll.tag_vocabulary(tags) == ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
    assert conll.tag_vocabulary(tags, complete=False) == ["O", "B-LOC", "B-PER", "I-PER"]
    assert conll.tag_vocabulary([["VB", "NN", "DT"]]) == ["DT", "NN", "VB"]
    labels = conll.tag_vocabulary(tags)
    assert conll.tags_to_ids(tags, labels, "train.txt") == [[2, 4, 0], [1, 0]]


def test_unknown_tag_names_file_and_line(tmp_path):
    labels = ["O", "B-PER", "I-PER"]
    dev = conll.read_conll(_write(tmp_path / "dev.txt", "Ann B-PER\n\nEU O\nsays O\nFOO B-FOO\n"))
    with pytest.raises(DataError) as info:
        conll.tags_to_ids(dev.tags, labels, dev)
    assert str(info.value) == f"{dev.source}:5: unknown tag 'B-FOO' (known: O, B-PER, I-PER)"
    # IOB1 files: the message says the tag was converted (the file itself has I-FOO).
    dev = conll.read_conll(_write(tmp_path / "dev1.txt", "EU O\nFOO I-FOO\n"))
    with pytest.raises(DataError, match=r"dev1.txt:2: unknown tag 'B-FOO' \(converted"):
        conll.tags_to_ids(dev.tags, labels, dev)
    dev = conll.read_jsonl_tagged(
        _jsonl(
            tmp_path / "dev.jsonl",
            {"tokens": ["a"], "tags": ["O"]},
            {"tokens": ["b", "c"], "tags": ["O", "B-FOO"]},
        )
    )
    with pytest.raises(DataError, match=r"dev.jsonl:2: unknown tag 'B-FOO'"):
        conll.tags_to_ids(dev.tags, labels, dev)
    with pytest.raises(DataError, match=r"^dev.txt: sentence 2, word 2: unknown tag 'B-FOO'"):
        conll.tags_to_ids([["O"], ["O", "B-FOO"]], labels, "dev.txt")


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("EU B-ORG\nrejects\n", 2, "expected a tag in column -1 but the line has 1 column(s)"),
        ("EU B-ORG\n\nPeter B-PER\nBlackburn B-\n", 4, "invalid tag 'B-'"),
        ("EU B-ORG\nrejects X-PER\n", 2, "invalid tag 'X-PER'"),
        ("EU B-ORG\nrejects NN\n", 2, "invalid tag 'NN'"),
        ("", 1, "no sentences"),
        ("-DOCSTART- O\n\n\n", 1, "no sentences"),
    ],
)
def test_conll_errors(tmp_path, text, line, message):
    path = _write(tmp_path / "bad.txt", text)
    error = _error(conll.read_conll, path)
    assert error.startswith(f"{path}:{line}: ") and message in error


def test_conll_tag_column_errors(tmp_path):
    path = _write(tmp_path / "bad.txt", "EU NNP B-ORG\nrejects VBZ\n")
    assert _error(conll.read_conll, path, tag_column=2).startswith(
        f"{path}:2: expected a tag in column 2 but the line has 2 column(s)"
    )
    with pytest.raises(ValueError, match="column 0 is the word"):
        conll.read_conll(path, tag_column=0)
    with pytest.raises(ValueError, match="unknown tag scheme 'bio'"):
        conll.read_conll(path, scheme="bio")


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"tokens": ["a"], "tags": ["O"]', "invalid JSON"),
        ('["a", "O"]', "expected one JSON object per line, found list"),
        ('{"tokens": ["a"]}', "missing key 'tags'"),
        ('{"words": ["a"], "tags": ["O"]}', "missing key 'tokens'"),
        ('{"tokens": ["a", "b"], "tags": ["O"]}', "2 tokens but 1 tags"),
        ('{"tokens": [], "tags": []}', "'tokens' is an empty list"),
        ('{"tokens": ["a", " "], "tags": ["O", "O"]}', "tokens[1] is empty or whitespace"),
        ('{"tokens": "a b", "tags": ["O", "O"]}', "'tokens' must be a list of strings, found str"),
        ('{"tokens": ["a"], "tags": [3]}', "tags[0] must be a string, found int 3 (map tag ids"),
        ('{"tokens": ["a"], "tags": ["B-"]}', "invalid tag 'B-'"),
        ('{"tokens": ["a"], "tags": [""]}', "invalid tag ''"),
    ],
)
def test_jsonl_errors(tmp_path, line, message):
    path = _write(tmp_path / "bad.jsonl", '{"tokens": ["x"], "tags": ["O"]}\n\n' + line + "\n")
    error = _error(conll.read_jsonl_tagged, path)
    assert error.startswith(f"{path}:3: ") and message in error


def test_empty_jsonl(tmp_path):
    path = _write(tmp_path / "empty.jsonl", "\n\n")
    assert _error(conll.read_tagged, path).startswith(f"{path}:1: no sentences")


def test_invalid_utf8_and_missing_file(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"EU B-ORG\n\nK\xf6ln B-LOC\n")
    assert _error(conll.read_conll, path).startswith(f"{path}:3: not valid UTF-8")
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        conll.read_tagged(missing)
