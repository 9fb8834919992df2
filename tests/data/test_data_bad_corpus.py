"""create_pretraining_data refuses outputs that are inputs and corpora that are not UTF-8 text."""

import os
import shutil

import pytest

from albert_tf.data import instances, masking, pretraining
from albert_tf.errors import UserError

SEQ, PRED = 32, 5


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
