"""create_pretraining_data refuses outputs that are inputs and corpora that are not UTF-8 text."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from albert_tf.data import instances, masking, pretraining
from albert_tf.errors import UserError

SEQ, PRED = 32, 5
SCRIPT = "create_pretraining_data.py"


def _config():
    masks = masking.MaskingConfig(max_predictions_per_seq=PRED)
    return pretraining.CreationConfig(
        instance=instances.InstanceConfig(max_seq_length=SEQ, masking=masks),
        dupe_factor=1,
        document_window=20,
        shuffle_buffer_size=50,
    )


def _create(spec, output, spm_model_file, **kwargs):
    return pretraining.create_pretraining_data(
        spec, output, spm_model_file, config=_config(), **kwargs
    )


@pytest.fixture(scope="module")
def prose(corpus_file):
    """40 documents of the shared corpus, as text."""
    return "\n\n".join(open(corpus_file, encoding="utf-8").read().split("\n\n")[:40]) + "\n"


@pytest.mark.parametrize("shards", [1, 2])
def test_an_output_that_is_an_input_is_refused_before_writing(
    tmp_path, prose, spm_model_file, shards
):
    data = tmp_path / "data"
    data.mkdir()
    corpus = data / "corpus.txt"
    corpus.write_text(prose, encoding="utf-8")
    os.symlink(corpus, tmp_path / "link.txt")
    before = corpus.read_bytes()
    cases = []
    if shards == 1:
        # The output named directly, through a symlink, and as the second of a comma list.
        cases += [
            (str(corpus), str(corpus), f"--output_file={corpus} is also an input file"),
            (
                str(data / "*"),
                str(tmp_path / "link.txt"),
                f"--output_file={tmp_path / 'link.txt'} is also an input file",
            ),
            (str(corpus), f"{tmp_path / 'a.tfrecord'},{corpus}", f"--output_file={corpus} is"),
        ]
        # The summary written beside the output.
        summary = data / "out.tfrecord.summary.json"
        summary.write_text(prose, encoding="utf-8")
        cases.append(
            (
                str(data),
                str(data / "out.tfrecord"),
                f"--output_file="
                f"{data / 'out.tfrecord'} writes {summary}, which is also an input file",
            )
        )
    else:
        shard = data / "train-00001-of-00002.tfrecord"
        shard.write_text(prose, encoding="utf-8")
        cases.append(
            (
                str(data / "*"),
                str(data / "train"),
                f"--output_file={data / 'train'} writes {shard}, which is also an input file",
            )
        )
    listing = sorted(os.listdir(data))
    for spec, output, message in cases:
        with pytest.raises(UserError) as error:
            _create(spec, output, spm_model_file, num_output_shards=shards)
        assert message in str(error.value) and f"(--input_file={spec})" in str(error.value)
    assert corpus.read_bytes() == before and sorted(os.listdir(data)) == listing
    assert sorted(os.listdir(tmp_path)) == ["data", "link.txt"]


def _undecodable(data):
    """(bad, non-blank) lines of `data`."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    bad = 0
    for line in lines:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
    return bad, len(lines)


def _bad_corpora(directory, prose):
    """name -> (path, expected message) for files that are not UTF-8 text."""
    accented = prose.replace(".", "\u00e9.").encode("latin-1", errors="replace")  # mostly bad lines
    latin1 = directory / "latin1.txt"
    latin1.write_bytes(accented)
    binary = directory / "ls"
    shutil.copy("/bin/ls", binary)
    utf16 = directory / "utf16.txt"
    utf16.write_bytes(prose.encode("utf-16"))
    # Good for the first 64 KiB, then mostly Latin-1: found once the whole file has been read.
    late = directory / "late.txt"
    # 22 documents (more than a window: work reaches the worker processes) fill the first 64 KiB.
    long_line = ("word " * 320).strip().encode() + b".\n"
    late.write_bytes((long_line * 2 + b"\n") * 22 + accented)
    assert len(accented) < 64 << 10 < 44 * len(long_line)

    def fraction(path):
        bad, lines = _undecodable(path.read_bytes())
        assert bad < lines
        return (
            f"{bad / lines:.0%} of the non-blank lines of the file ({bad} of {lines}) are not "
            "valid UTF-8"
        )

    return {
        "latin1": (latin1, f"{latin1}: {fraction(latin1)}"),
        "binary": (binary, f"{binary}: a binary file, not text (a NUL byte at offset"),
        "utf16": (utf16, f"{utf16}: UTF-16 text"),
        "late": (late, f"{late}: {fraction(late)}"),
    }


def test_files_that_are_not_utf8_text_stop_with_their_name(tmp_path, prose, spm_model_file):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name, (path, message) in _bad_corpora(inputs, prose).items():
        workers = (1, 2) if name == "late" else (1,)
        for num_workers in workers:
            for strict in (False, True):
                if strict and name == "late":
                    continue  # --strict stops at the first bad line instead
                with pytest.raises(UserError) as error:
                    _create(
                        str(path),
                        str(tmp_path / "out" / "o.tfrecord"),
                        spm_model_file,
                        num_workers=num_workers,
                        strict=strict,
                        # late.txt's long lines would be refused first (corpus_layout).
                        check_input_format=name != "late",
                    )
                assert str(error.value).startswith(message), (name, str(error.value))
                if name in ("latin1", "late"):
                    assert "iconv -f latin1 -t utf-8" in str(error.value)
        assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_a_few_bad_lines_are_still_skipped_and_counted(tmp_path, prose, spm_model_file):
    path = tmp_path / "few.txt"
    lines = prose.split("\n")
    lines[3] = "caf\xe9 au lait."  # decoded below as latin-1 bytes
    path.write_bytes("\n".join(lines).encode("utf-8").replace(b"caf\xc3\xa9", b"caf\xe9"))
    summary = _create(str(path), str(tmp_path / "o.tfrecord"), spm_model_file)
    assert summary["skipped_lines"] == 1 and summary["instances"] > 0
    with pytest.raises(UserError, match=f"{path}:4: not valid UTF-8"):
        _create(str(path), str(tmp_path / "strict.tfrecord"), spm_model_file, strict=True)


@pytest.fixture(scope="module")
def dump(corpus_file, tmp_path_factory):
    """The shared corpus with one document per line and no blank line, as dumps come."""
    documents = open(corpus_file, encoding="utf-8").read().strip().split("\n\n")
    path = tmp_path_factory.mktemp("dump") / "dump.txt"
    path.write_text("".join(" ".join(d.split("\n")) + "\n" for d in documents), encoding="utf-8")
    return path


def test_the_layout_rules_on_samples(corpus_file, dump, tokenizer):
    from albert_tf.data import corpus_layout

    def sample(head, seq):
        return corpus_layout.sample_layout(head, lambda s: len(tokenizer.encode_ids(s)), seq)

    def refused(head, seq=64):
        return corpus_layout.refusal(sample(head, seq), seq)

    with open(corpus_file, "rb") as f:
        sentences = f.read(64 << 10)
    with open(dump, "rb") as f:
        documents = f.read(64 << 10)
    # One sentence per line: accepted down to a 32-position window (31% of its lines longer),
    # refused at 16 (most sentences would be cut).
    assert refused(sentences, 32) is None and refused(sentences, 512) is None
    assert "are longer than the 13 pieces a sentence may have at --max_seq_length=16" in (
        refused(sentences, 16)
    )
    # One document per line: refused at any window.
    for seq in (64, 512):
        layout = sample(documents, seq)
        assert layout.one_document and not layout.whole_file
        assert refused(documents, seq).startswith(
            f"its first 64 KiB are one document (no blank line) and "
            f"{layout.long_lines + layout.multi_sentence_lines} of its first {layout.lines} lines"
        )
    # A book of short sentences without a blank line is one legitimate document.
    book = b"".join(line + b"\n" for line in sentences.split(b"\n")[:-1] if line.strip())
    assert sample(book, 64).one_document and refused(book) is None
    # Two lines of several sentences, then a blank line: the rule needs one document.
    two = b"First one. Second one.\nThird one. Fourth one.\n"
    assert refused(two).startswith("the whole file is one document (no blank line) and 2 of its 2")
    assert refused(two + b"\nA sentence.\n") is None
    # Exactly half of the lines too long is not "most".
    long_line = b"word " * 80 + b"\n"
    assert refused(long_line + b"A short one.\n") is None
    assert refused(long_line * 2 + b"A short one.\n").startswith("2 of its 3 lines (67%) are")


def test_a_document_per_line_file_is_refused_before_any_output(
    tmp_path, dump, corpus_file, spm_model_file
):
    out = tmp_path / "out"
    with pytest.raises(UserError) as error:
        _create(f"{corpus_file},{dump}", str(out / "o.tfrecord"), spm_model_file)
    message = str(error.value)
    assert message.startswith(f"{dump}: read as --input_format=sentences (one sentence per line")
    assert "pass --input_format=lines" in message and "--nocheck_input_format to read" in message
    assert not out.exists()
    # Read as it is, it becomes garbage: one document of cut lines, nearly all SOP labels 1.
    forced = _create(str(dump), str(out / "forced"), spm_model_file, check_input_format=False)
    assert forced["documents"] == 1 and forced["truncated_sentences"] > 0.9 * forced["sentences"]
    assert forced["label_1_fraction"] > 0.95
    summary = _create(str(dump), str(out / "lines"), spm_model_file, input_format="lines")
    assert summary["documents"] == forced["sentences"]
    assert summary["label_1_fraction"] < forced["label_1_fraction"] - 0.1
    # The script: one line on stderr, exit 1, nothing written.
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", SCRIPT)
    command = [
        sys.executable,
        script,
        f"--input_file={dump}",
        f"--output_file={tmp_path / 'script' / 'o.tfrecord'}",
        f"--spm_model_file={spm_model_file}",
        f"--max_seq_length={SEQ}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"{SCRIPT}: error: {message}"
    assert not (tmp_path / "script").exists()


def test_documents_lost_to_bad_bytes_are_counted_and_reported_at_the_end(
    tmp_path, prose, spm_model_file, caplog
):
    documents = [d.replace("\n", " ") for d in prose.strip().split("\n\n")]
    raw = [d.encode() for d in documents]
    for k in (4, 9, 10):
        raw[k] = raw[k].replace(b" ", b" caf\xe9 ", 1)  # Latin-1: the line is not UTF-8
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"\n".join(raw) + b"\n")
    sentences = tmp_path / "sentences.txt"
    # A document of one bad line (dropped), and a bad line inside a kept document.
    sentences.write_bytes(prose.encode() + b"\n\xff bad\n\n" + b"Kept one.\n\xfe bad\nKept two.\n")
    with caplog.at_level("WARNING"):
        summary = _create(
            f"{lines},{sentences}", str(tmp_path / "o"), spm_model_file, input_format="lines"
        )
    assert summary["dropped_documents"] == 3 + 2  # in "lines", every bad line is a document
    assert summary["skipped_by_source"][str(lines)] == {
        "lines": 3,
        "first_line": 5,
        "documents": 3,
        "first_document_line": 5,
    }
    last = caplog.records[-2:]
    assert [r.getMessage() for r in last] == [
        f"3 documents dropped for non-UTF-8 bytes in {lines} (first at line 5)",
        f"2 documents dropped for non-UTF-8 bytes in {sentences} (first at line "
        f"{prose.count(chr(10)) + 2})",
    ]
    summary = _create(str(sentences), str(tmp_path / "s"), spm_model_file)
    first = prose.count("\n") + 2
    assert summary["skipped_by_source"] == {
        str(sentences): {
            "lines": 2,
            "first_line": first,
            "documents": 1,
            "first_document_line": first,
        }
    }
    assert caplog.records[-1].getMessage() == (
        f"1 document dropped for non-UTF-8 bytes in {sentences} (first at line {first}); "
        f"2 lines skipped in all (first at line {first})"
    )
    on_disk = json.loads((tmp_path / "s.summary.json").read_text())
    assert (
        on_disk["dropped_documents"] == 1
        and on_disk["skipped_by_source"] == (summary["skipped_by_source"])
    )
