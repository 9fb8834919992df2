"""create_pretraining_data on Apache Beam's DirectRunner: the local tool's records and summary."""

import glob
import os

import pytest

beam = pytest.importorskip(
    "apache_beam", reason="apache-beam is not installed (pip install albert_tf[beam])"
)

import tensorflow as tf  # noqa: E402

from albert_tf.data import beam_pipeline, instances, masking, pretraining  # noqa: E402
from albert_tf.errors import UserError  # noqa: E402

# Documents per file: windows of 6 documents span every file boundary; one file is empty.
SIZES = (7, 0, 20, 13, 5)
# Fields whose values differ by design (see albert_tf.data.beam_pipeline).
RUN_FIELDS = ("seconds", "instances_per_second", "outputs", "runner")


def _config():
    return pretraining.CreationConfig(
        instance=instances.InstanceConfig(
            max_seq_length=64, masking=masking.MaskingConfig(max_predictions_per_seq=10)
        ),
        dupe_factor=2,
        random_seed=7,
        document_window=6,
        shuffle_buffer_size=50,
    )


def _records(paths):
    return sorted(r.numpy() for r in tf.data.TFRecordDataset(sorted(paths)))


@pytest.fixture(scope="module")
def corpus(corpus_file, spm_model_file, tmp_path_factory):
    """Files of SIZES documents (one with a line that is not UTF-8), and the local tool's run."""
    docs = open(corpus_file, encoding="utf-8").read().split("\n\n")
    directory = tmp_path_factory.mktemp("beam_corpus")
    start = 0
    for n, size in enumerate(SIZES):
        text = "\n\n".join(docs[start : start + size]).encode() + b"\n"
        if n == 2:
            text = text.replace(b"\n", b"\n\xff\xfe bad line\n", 1)
        (directory / f"part-{n}.txt").write_bytes(text if size else b"")
        start += size
    out = tmp_path_factory.mktemp("local")
    summary = pretraining.create_pretraining_data(
        str(directory / "part-*.txt"),
        str(out / "train"),
        spm_model_file,
        config=_config(),
        num_output_shards=2,
    )
    return str(directory / "part-*.txt"), out, summary


@pytest.mark.parametrize(
    "beam_options",
    [
        "--direct_num_workers=1 --direct_running_mode=in_memory",
        "--direct_num_workers=2 --direct_running_mode=multi_processing",
    ],
)
def test_beam_writes_the_local_records_and_summary(corpus, spm_model_file, tmp_path, beam_options):
    spec, local_out, local = corpus
    summary = beam_pipeline.create_pretraining_data(
        spec,
        str(tmp_path / "train"),
        spm_model_file,
        runner="DirectRunner",
        beam_options=beam_options,
        config=_config(),
        num_output_shards=2,
    )
    names = ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert sorted(os.listdir(tmp_path)) == names + ["train.summary.json"]
    assert _records(glob.glob(str(tmp_path / "train-*"))) == _records(
        glob.glob(str(local_out / "train-*"))
    )
    assert local["instances"] > 50 and local["skipped_lines"] == 1
    assert local["skipped_by_source"] == {
        os.path.join(os.path.dirname(spec), "part-2.txt"): {
            "lines": 1,
            "first_line": 2,
            "documents": 0,
            "first_document_line": None,
        }
    }
    assert summary["runner"] == "DirectRunner"
    assert summary["outputs"] == {str(tmp_path / name): None for name in names}
    assert {k: v for k, v in summary.items() if k not in RUN_FIELDS} == {
        k: v for k, v in local.items() if k not in RUN_FIELDS
    }


def test_beam_refuses_what_it_cannot_run(tmp_path, spm_model_file, corpus_file, tmp_path_factory):
    dump = tmp_path_factory.mktemp("dump") / "dump.txt"
    dump.write_text("One document. Its second sentence.\nAnother one. With two sentences.\n")
    with pytest.raises(UserError, match=f"{dump}: read as --input_format=sentences .* pass "):
        beam_pipeline.create_pretraining_data(
            str(dump), str(tmp_path / "o"), spm_model_file, runner="DirectRunner"
        )
    with pytest.raises(
        UserError, match="--input_file=builtin:docstrings: a Beam runner reads corpus files only"
    ):
        beam_pipeline.create_pretraining_data(
            "builtin:docstrings", str(tmp_path / "o"), spm_model_file, runner="DirectRunner"
        )
    with pytest.raises(UserError, match="--runner=Local: must be one of DirectRunner, "):
        beam_pipeline.create_pretraining_data(
            corpus_file, str(tmp_path / "o"), spm_model_file, runner="Local"
        )
    with pytest.raises(UserError, match="a Beam runner writes one file or one prefix"):
        beam_pipeline.create_pretraining_data(
            corpus_file, f"{tmp_path}/a,{tmp_path}/b", spm_model_file, runner="DirectRunner"
        )
    assert os.listdir(tmp_path) == []


def test_an_empty_corpus_fails_in_a_worker_as_the_local_tool_does(tmp_path, spm_model_file):
    corpus = tmp_path / "one_sentence_documents.txt"
    corpus.write_text("One lonely sentence here.\n\nAnother lonely sentence there.\n")
    out = tmp_path / "out"
    with pytest.raises(pretraining.CorpusTooSmallError) as raised:
        beam_pipeline.create_pretraining_data(
            str(corpus),
            str(out / "train"),
            spm_model_file,
            runner="DirectRunner",
            beam_options="--direct_num_workers=2 --direct_running_mode=multi_processing",
            num_output_shards=2,
        )
    assert str(raised.value) == (
        "the corpus is too small: 2 documents gave no training instance (skipped documents: "
        "{'single_sentence_sop': 2}); SOP needs documents of at least 2 sentences separated by "
        "blank lines (use --random_next_sentence for one-sentence documents)"
    )
    assert os.listdir(out) == []
