"""create_pretraining_data end to end: determinism across workers, schema, bad input, atomicity."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf.data import instances, masking, pretraining, schema

SEQ, PRED = 64, 10


def _config(seed=12345, **kwargs):
    return pretraining.CreationConfig(
        instance=instances.InstanceConfig(
            max_seq_length=SEQ, masking=masking.MaskingConfig(max_predictions_per_seq=PRED)
        ),
        dupe_factor=2,
        random_seed=seed,
        document_window=40,
        shuffle_buffer_size=200,
        **kwargs,
    )


def _files(directory):
    return sorted(os.listdir(directory))


def _records(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


@pytest.fixture(scope="module")
def small_corpus(corpus_file, tmp_path_factory):
    """The first 120 documents of the shared corpus."""
    docs = open(corpus_file, encoding="utf-8").read().split("\n\n")[:120]
    path = tmp_path_factory.mktemp("small") / "small.txt"
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def one_worker_run(small_corpus, spm_model_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("w1")
    summary = pretraining.create_pretraining_data(
        small_corpus, str(out / "train"), spm_model_file, config=_config(), num_output_shards=2
    )
    return out, summary


def test_same_bytes_with_one_or_two_workers_and_seed_matters(
    one_worker_run, small_corpus, spm_model_file, tmp_path
):
    out1, summary = one_worker_run
    pretraining.create_pretraining_data(
        small_corpus,
        str(tmp_path / "train"),
        spm_model_file,
        config=_config(),
        num_workers=2,
        num_output_shards=2,
    )
    names = ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert _files(out1) == _files(tmp_path) == names + ["train.summary.json"]
    for name in names:
        assert (out1 / name).read_bytes() == (tmp_path / name).read_bytes()
    other = tmp_path / "seed"
    pretraining.create_pretraining_data(
        small_corpus,
        str(other / "train"),
        spm_model_file,
        config=_config(seed=1),
        num_output_shards=2,
    )
    assert (other / names[0]).read_bytes() != (out1 / names[0]).read_bytes()
    # Summary: counts match the files; masked fraction and SOP balance are sane.
    on_disk = json.loads((out1 / "train.summary.json").read_text())
    assert (
        on_disk["instances"]
        == summary["instances"]
        == sum(len(_records(str(out1 / n))) for n in names)
    )
    assert on_disk["documents"] == 120 and on_disk["skipped_documents"] == {}
    assert on_disk["masked_fraction"] == pytest.approx(0.15, abs=0.02)
    assert on_disk["label_1_fraction"] == pytest.approx(0.5, abs=0.1)


def test_records_follow_the_original_schema(one_worker_run, spm_model_file):
    out, _ = one_worker_run
    record = _records(str(out / "train-00000-of-00002.tfrecord"))[0]
    # The original tool's reader (run_pretraining.py's name_to_features, plus token_boundary).
    parsed = tf.io.parse_single_example(record, schema.feature_spec(SEQ, PRED, token_boundary=True))
    assert sorted(parsed) == sorted(
        [
            "input_ids",
            "input_mask",
            "segment_ids",
            "token_boundary",
            "masked_lm_positions",
            "masked_lm_ids",
            "masked_lm_weights",
            "next_sentence_labels",
        ]
    )
    example = tf.train.Example.FromString(record)
    assert example.features.feature["masked_lm_weights"].float_list.value[0] == 1.0
    ids = parsed["input_ids"].numpy()
    length = int(parsed["input_mask"].numpy().sum())
    assert ids[0] == 2 and ids[length - 1] == 3 and (ids[length:] == 0).all()
    n = int(parsed["masked_lm_weights"].numpy().sum())
    assert n >= 1 and (parsed["masked_lm_positions"].numpy()[n:] == 0).all()
    # The same content built the way the original tool builds it gives the same Example.
    feats = {
        k: (
            tf.train.Feature(float_list=tf.train.FloatList(value=v.numpy().tolist()))
            if v.dtype == tf.float32
            else tf.train.Feature(int64_list=tf.train.Int64List(value=v.numpy().tolist()))
        )
        for k, v in parsed.items()
    }
    assert tf.train.Example(features=tf.train.Features(feature=feats)) == example


def test_bad_input_is_counted_or_rejected(tmp_path, spm_model_file, corpus_file):
    good = open(corpus_file, encoding="utf-8").read().split("\n\n")[:30]
    bad = tmp_path / "bad.txt"
    before = "\n\n".join(good).encode() + b"\n\nvalid sentence here.\n"
    bad.write_bytes(
        before
        + b"\xff\xfe broken bytes\nok line.\n\na single sentence document.\n\n"
        + "\u0301\u0301\n\n".encode()
        + b"word " * 500
        + b"\nlast one.\n"
    )
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    summary = pretraining.create_pretraining_data(
        f"{bad},{empty}", str(tmp_path / "out.tfrecord"), spm_model_file, config=_config()
    )
    assert summary["skipped_lines"] == 1
    assert summary["skipped_line_locations"] == [f"{bad}:{before.count(10) + 1}"]
    assert summary["skipped_documents"] == {"empty_after_tokenization": 1, "single_sentence_sop": 1}
    assert summary["truncated_sentences"] >= 1  # the 500-word line, cut to max_seq_length - 3
    assert json.loads((tmp_path / "out.tfrecord.summary.json").read_text())["skipped_lines"] == 1
    with pytest.raises(ValueError, match=f"{bad}:.*UTF-8"):
        pretraining.create_pretraining_data(
            str(bad),
            str(tmp_path / "strict.tfrecord"),
            spm_model_file,
            config=_config(),
            strict=True,
        )
    assert not (tmp_path / "strict.tfrecord").exists()
    # Too small: only one-sentence documents -> clear error, no output.
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("just one sentence.\n\nanother lonely one.\n", encoding="utf-8")
    with pytest.raises(
        pretraining.CorpusTooSmallError, match="2 documents gave no training instance"
    ):
        pretraining.create_pretraining_data(
            str(tiny), str(tmp_path / "tiny.tfrecord"), spm_model_file, config=_config()
        )
    with pytest.raises(FileNotFoundError, match="no_such_file.txt"):
        pretraining.create_pretraining_data(
            str(tmp_path / "no_such_file.txt"),
            str(tmp_path / "x.tfrecord"),
            spm_model_file,
            config=_config(),
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.txt",
        "empty.txt",
        "out.tfrecord",
        "out.tfrecord.summary.json",
        "tiny.txt",
    ]


def test_documents_empty_after_tokenization_are_never_drawn_as_random_documents(
    tmp_path, spm_model_file
):
    corpus = tmp_path / "c.txt"
    corpus.write_text(
        "\n\n".join(
            ["first sentence here.\nsecond sentence here."]
            + ["\u0301"] * 8
            + ["one more document.\nwith two sentences."]
        )
        + "\n",
        encoding="utf-8",
    )
    config = pretraining.CreationConfig(
        instance=instances.InstanceConfig(max_seq_length=SEQ, random_next_sentence=True),
        dupe_factor=20,
    )
    summary = pretraining.create_pretraining_data(
        str(corpus), str(tmp_path / "o"), spm_model_file, config=config
    )
    assert summary["skipped_documents"] == {"empty_after_tokenization": 8}
    assert summary["random_document_negatives"] > 0 and summary["instances"] >= 40


def test_failure_mid_run_leaves_no_output(tmp_path, spm_model_file, corpus_file):
    documents = [
        d.splitlines() for d in open(corpus_file, encoding="utf-8").read().split("\n\n")[:100]
    ]

    def failing_source():
        for i, document in enumerate(documents):
            if i == 90:
                raise OSError("disk vanished")
            yield document

    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    with pytest.raises(OSError, match="disk vanished"):
        pretraining.create_from_documents(
            failing_source,
            paths,
            pretraining.load_tokenizer,
            (open(spm_model_file, "rb").read(), True),
            _config(),
        )
    assert list(tmp_path.iterdir()) == []


def test_no_masking_writes_unmasked_records(tmp_path, small_corpus, spm_model_file):
    config = pretraining.CreationConfig(
        instance=instances.InstanceConfig(max_seq_length=SEQ, masking=None),
        dupe_factor=1,
        document_window=40,
    )
    summary = pretraining.create_pretraining_data(
        small_corpus, str(tmp_path / "raw"), spm_model_file, config=config
    )
    assert summary["masked_tokens"] == 0 and not summary["masked"]
    example = tf.train.Example.FromString(_records(str(tmp_path / "raw"))[0])
    assert "masked_lm_positions" not in example.features.feature
    assert 4 not in example.features.feature["input_ids"].int64_list.value  # no [MASK]


def test_script_rejects_bad_flags_before_work(tmp_path, spm_model_file):
    script = os.path.join(
        os.path.dirname(__file__), "..", "..", "scripts", "create_pretraining_data.py"
    )
    base = [
        sys.executable,
        script,
        f"--output_file={tmp_path}/o",
        f"--spm_model_file={spm_model_file}",
    ]
    corpus = tmp_path / "x.txt"
    corpus.write_text("One sentence.\nAnother sentence.\n")
    given = f"--input_file={corpus}"
    cases = [
        ([given, "--do_permutation"], "--do_permutation: the permuted-span objective"),
        ([given, "--tfds_name=wiki"], "--input_file: give exactly one of"),
        ([given, "--masked_lm_prob=0"], "masked_lm_prob must be in (0, 1]"),
        (["--input_file=missing.txt"], "--input_file: no file matches 'missing.txt'"),
    ]
    for extra, message in cases:
        result = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert list(tmp_path.iterdir()) == [corpus]  # nothing written
