"""The archives and repositories the stand-in hosts serve are what Google and Hugging Face
publish, as albert_tf's own readers see them: the released layout (one top folder, no
`checkpoint` file, a `.meta`), a SentencePiece model of exactly vocab_size pieces with ALBERT's
special ids, and weights that read back identical."""

import json
import os
import tarfile
import time

import numpy as np
from hub_server import crc32c, crc32c_python
from release_fixtures import make_release_archive, release_folder, sized_spm_model

SPECIAL = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]


def _members(folder):
    return {
        f"{folder}/{n}"
        for n in (
            "albert_config.json",
            "model.ckpt-best.index",
            "model.ckpt-best.data-00000-of-00001",
            "model.ckpt-best.meta",
            "30k-clean.model",
            "30k-clean.vocab",
        )
    }


def _assert_same_weights(pretrainer, other):
    for ours, theirs in zip(pretrainer.weights, other.weights, strict=True):
        if "seed_generator" not in ours.path:
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)


def test_release_archive_is_laid_out_as_googles(tiny_release, tmp_path):
    import sentencepiece as spm

    from albert_tf.convert.original import from_original

    with tarfile.open(tiny_release.path) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path, filter="data")
    assert names[0] == "albert_base" and set(names[1:]) == _members("albert_base")
    folder = tmp_path / "albert_base"
    processor = spm.SentencePieceProcessor(model_file=str(folder / "30k-clean.model"))
    assert processor.get_piece_size() == tiny_release.config.vocab_size
    assert [processor.id_to_piece(i) for i in range(5)] == SPECIAL
    vocab = (folder / "30k-clean.vocab").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == tiny_release.config.vocab_size and vocab[0] == "<pad>\t0"
    config = json.loads((folder / "albert_config.json").read_text())
    assert config["vocab_size"] == 1000 and config["hidden_act"] == "gelu"
    _assert_same_weights(tiny_release.pretrainer, from_original(str(folder)))


def test_hf_repo_reads_back(tiny_release, tiny_hf_repo, pickle_only_repo):
    from albert_tf.convert.huggingface import from_huggingface

    assert sorted(os.listdir(tiny_hf_repo)) == ["config.json", "model.safetensors", "spiece.model"]
    _assert_same_weights(tiny_release.pretrainer, from_huggingface(tiny_hf_repo))
    assert sorted(os.listdir(pickle_only_repo)) == ["config.json", "pytorch_model.bin"]


def test_folder_names():
    assert release_folder("albert_xxlarge_v1") == release_folder("albert_xxlarge_v2")
    assert release_folder("albert_large_v2") == "albert_large"


def test_vocabulary_is_extended_to_any_size():
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=sized_spm_model(30000))
    assert processor.get_piece_size() == 30000
    assert [processor.id_to_piece(i) for i in range(5)] == SPECIAL
    pieces = processor.encode("An ordinary sentence (of the corpus) - 5 \u20ac.", out_type=str)
    assert all(processor.piece_to_id(p) < 1000 for p in pieces)  # text never hits the fillers


def test_crc32c():
    assert crc32c_python(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(b"123456789") == 0xE3069283


def test_base_size_release(tmp_path):
    """The released shapes (12M parameters, 30000 pieces): built in seconds, ~44 MB like
    Google's archive (the base_release fixture is this build)."""
    from albert_tf.config import AlbertConfig

    start = time.monotonic()
    release = make_release_archive(
        tmp_path, "albert_base_v2", AlbertConfig.from_preset("albert_base_v2")
    )
    assert time.monotonic() - start < 60
    with tarfile.open(release.path) as tar:
        members = {m.name: m.size for m in tar.getmembers()}
    assert set(members) - {"albert_base"} == _members("albert_base")
    assert members["albert_base/model.ckpt-best.data-00000-of-00001"] == 47255240  # 11.8M floats
    assert 40e6 < os.path.getsize(release.path) < 50e6
