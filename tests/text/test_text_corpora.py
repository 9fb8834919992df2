"""iter_documents: file formats, path resolution, bad bytes, TFDS, and builtin:docstrings."""

import json
import os
import time

import pytest
import tensorflow as tf

from albert_tf.data import builtin_corpus, corpora
from albert_tf.data.corpora import CorpusStats, iter_documents


def write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def test_sentences_format_blank_lines_crlf_bom_and_small_chunks(tmp_path, monkeypatch):
    path = write(
        tmp_path / "a.txt",
        "\ufeffFirst doc, line one.\r\nLine two.\r\n\r\n  \t \n\n"
        "Second doc.\n\n\nThird doc, no final newline.",
    )
    expected = [
        ["First doc, line one.", "Line two."],
        ["Second doc."],
        ["Third doc, no final newline."],
    ]
    stats = CorpusStats()
    assert list(iter_documents(path, stats=stats)) == expected
    assert (stats.files, stats.lines, stats.documents, stats.sentences, stats.skipped_lines) == (
        1,
        9,
        3,
        4,
        0,
    )
    monkeypatch.setattr(corpora, "_READ_CHUNK", 5)  # lines straddle read chunks
    assert list(iter_documents(path)) == expected


def test_lines_format_splits_sentences(tmp_path):
    path = write(tmp_path / "docs.txt", "Dr. Smith came. He sat down!\n\nOne more document here\n")
    assert list(iter_documents(path, format="lines")) == [
        ["Dr. Smith came.", "He sat down!"],
        ["One more document here"],
    ]
    with pytest.raises(
        ValueError, match=r"format must be one of \('sentences', 'lines'\), got 'csv'"
    ):
        iter_documents(path, format="csv")


def test_globs_directories_and_comma_lists_in_sorted_order(tmp_path):
    (tmp_path / "d").mkdir()
    b = write(tmp_path / "d" / "b.txt", "B.\n")
    write(tmp_path / "d" / "a.txt", "A.\n")
    c = write(tmp_path / "c.txt", "C.\n")
    assert list(iter_documents(str(tmp_path / "d" / "*.txt"))) == [["A."], ["B."]]
    assert list(iter_documents(str(tmp_path / "d"))) == [["A."], ["B."]]
    assert list(iter_documents(f"{c}, {b}")) == [["C."], ["B."]]
    assert list(iter_documents([c, str(tmp_path / "d")])) == [["C."], ["A."], ["B."]]


def test_missing_paths_fail_before_any_work(tmp_path):
    good = write(tmp_path / "ok.txt", "Fine.\n")
    with pytest.raises(FileNotFoundError, match="corpus file not found: .*nope.txt"):
        iter_documents(f"{good},{tmp_path / 'nope.txt'}")  # raised by the call, not by iteration
    with pytest.raises(FileNotFoundError, match=r"corpus glob '.*\*.md' matches no files"):
        iter_documents(str(tmp_path / "*.md"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="corpus directory .* holds no files"):
        iter_documents(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="empty corpus spec"):
        iter_documents(" , ")
    with pytest.raises(ValueError, match="unknown built-in corpus 'builtin:wiki'"):
        iter_documents("builtin:wiki")


def test_invalid_utf8_lines_are_counted_or_raise(tmp_path):
    path = write(tmp_path / "bad.txt", b"Good one.\nAlso good.\nbad \xff byte\n\nNext doc.\n")
    stats = CorpusStats()
    assert list(iter_documents(path, stats=stats)) == [["Good one.", "Also good."], ["Next doc."]]
    assert stats.skipped_lines == 1 and stats.skipped_locations == [f"{path}:3"]
    with pytest.raises(
        ValueError, match=f"{path}:3: not valid UTF-8 \\(byte b'\\\\xff' at column 5\\)"
    ):
        list(iter_documents(path, strict=True))


def _write_prepared_tfds(data_dir, name, texts):
    """A prepared TFDS dataset written by hand (the files `download_and_prepare` leaves)."""
    root = data_dir / name / "1.0.0"
    root.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(root / f"{name}-train.tfrecord-00000-of-00001")) as writer:
        for text in texts:
            feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text]))}
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    info = {
        "fileFormat": "tfrecord",
        "name": name,
        "version": "1.0.0",
        "moduleName": "tests",
        "splits": [
            {
                "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
                "name": "train",
                "numBytes": "100",
                "shardLengths": [str(len(texts))],
            }
        ],
    }
    (root / "dataset_info.json").write_text(json.dumps(info))
    text_feature = {
        "pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
        "text": {},
    }
    features = {
        "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
        "featuresDict": {"features": {"text": text_feature}},
    }
    (root / "features.json").write_text(json.dumps(features))


def test_tfds_prepared_dataset(tmp_path):
    name = "albert_tf_text_test_corpus"
    _write_prepared_tfds(
        tmp_path,
        name,
        [b"First one. Second one!\nNew paragraph here.", b"Only one", b"", b"bad \xff"],
    )
    stats = CorpusStats()
    docs = list(iter_documents(f"tfds:{name}", data_dir=str(tmp_path), stats=stats))
    assert docs == [["First one.", "Second one!", "New paragraph here."], ["Only one"]]
    assert stats.skipped_lines == 1 and stats.skipped_locations == [f"tfds:{name}[train]:3"]
    with pytest.raises(ValueError, match=r"has no feature 'body'; features: \['text'\]"):
        iter_documents(f"tfds:{name}", data_dir=str(tmp_path), feature="body")
    with pytest.raises(ValueError, match=r"has no split 'test'; splits: \['train'\]"):
        iter_documents(f"tfds:{name}", data_dir=str(tmp_path), split="test")
    with pytest.raises(
        FileNotFoundError,
        match=f"TFDS dataset '{name}' is not prepared in .*elsewhere; "
        "albert_tf reads prepared data only",
    ):
        iter_documents(f"tfds:{name}", data_dir=str(tmp_path / "elsewhere"))


def test_builtin_docstrings_numpy(tmp_path):
    import numpy

    cache = tmp_path / "cache"
    start = time.time()
    first = list(iter_documents("builtin:docstrings", packages=("numpy",), cache_dir=str(cache)))
    first_seconds = time.time() - start
    files = os.listdir(cache)
    assert (
        len(files) == 1 and files[0].startswith("docstrings-numpy-") and files[0].endswith(".txt")
    )
    size = sum(len(s.encode("utf-8")) + 1 for d in first for s in d)
    assert 200_000 < size < 5_000_000, size
    sentences = [s for d in first for s in d]
    assert not [s for s in sentences if ">>>" in s or "```" in s or "\n" in s]
    assert (
        6 < sum(len(s.split()) for s in sentences) / len(sentences) < 40
    )  # prose-length sentences
    # A sentence of numpy's own documentation (its first docstring line) is in the corpus.
    assert numpy.linspace.__doc__.strip().split("\n")[0] in sentences

    start = time.time()
    cached = list(iter_documents("builtin:docstrings", packages=("numpy",), cache_dir=str(cache)))
    cached_seconds = time.time() - start
    assert cached == first
    assert cached_seconds < max(0.2 * first_seconds, 0.05), (cached_seconds, first_seconds)
    # Deterministic order: sorted source files, each file's docstrings in ast.walk order.
    source_files = builtin_corpus.package_source_files(("numpy",))
    assert source_files == sorted(source_files) and all(f.endswith(".py") for f in source_files)
    head = [d for f in source_files[:30] for d in builtin_corpus.file_docstrings(f)]
    assert first[: len(head)] == head and head


def test_builtin_docstrings_cache_is_atomic_and_keyed_by_versions(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    documents = iter_documents("builtin:docstrings", packages=("numpy",), cache_dir=str(cache))
    next(documents)
    documents.close()  # stopped early: neither a cache file nor a temp file is left behind
    assert os.listdir(cache) == []
    path = builtin_corpus.docstrings_cache_path(("numpy",), str(cache))
    monkeypatch.setattr(builtin_corpus.importlib.metadata, "version", lambda name: "0.0-test")
    assert builtin_corpus.docstrings_cache_path(("numpy",), str(cache)) != path
    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "env"))
    assert builtin_corpus.docstrings_cache_path(("numpy",)).startswith(str(tmp_path / "env"))


def test_docstring_filter_keeps_prose_and_drops_code():
    doc = """Compute the thing for every element.

    This function is useful. It returns a new array of values.

    Args:
      x: The input tensor, of any shape.
      name: Optional name.

    Example:

    >>> compute([1, 2])
    array([2, 4])

    ```python
    y = compute(x)
    ```

    Notes
    -----
    The result is exact for integers::

        compute(3) == 6

    See the user guide for more details.
    """
    assert builtin_corpus.docstring_sentences(doc) == [
        "Compute the thing for every element.",
        "This function is useful.",
        "It returns a new array of values.",
        "The input tensor, of any shape.",
        "The result is exact for integers:",
        "See the user guide for more details.",
    ]


def test_unreadable_file_fails_before_any_work(tmp_path, monkeypatch):
    path = write(tmp_path / "secret.txt", "Hidden.\n")
    # Simulated (the tests may run as root, who can read anything).
    monkeypatch.setattr(corpora.os, "access", lambda p, mode: p != path)
    with pytest.raises(PermissionError, match="corpus file is not readable: .*secret.txt"):
        iter_documents(str(tmp_path / "*.txt"))
