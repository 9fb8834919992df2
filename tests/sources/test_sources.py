"""Models by name (albert_tf.sources) against the local stand-ins of storage.googleapis.com and
huggingface.co (hub_server.py): what a name resolves to, that the outputs equal the source
model's, that a cached load opens no connection, and the cache's guarantees."""

import json
import logging
import os
import threading

import numpy as np
import pytest

from albert_tf import sources
from albert_tf.sources import cache
from albert_tf.sources.names import SourceError

TOLERANCE = 1e-5


def padded_inputs(vocab_size, seed=0):
    """A padded batch of 3 rows (lengths 12, 7 and 3) of random ids."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, size=(3, 12)).astype("int32")
    mask = np.zeros_like(ids)
    for row, length in enumerate((12, 7, 3)):
        mask[row, :length] = 1
    ids = ids * mask
    types = np.zeros_like(ids)
    types[0, 6:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def assert_same_outputs(loaded, reference, vocab_size):
    inputs = padded_inputs(vocab_size)
    ours = loaded.backbone(inputs)
    theirs = reference.backbone(inputs)
    valid = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(
        ours["sequence_output"].numpy()[valid],
        theirs["sequence_output"].numpy()[valid],
        atol=TOLERANCE,
    )
    np.testing.assert_allclose(
        ours["pooled_output"].numpy(), theirs["pooled_output"].numpy(), atol=TOLERANCE
    )
    positions = np.array([[1, 2], [3, 4], [1, 2]], "int32")
    heads = {**inputs, "masked_lm_positions": positions}
    for name in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(
            loaded(heads)[name].numpy(), reference(heads)[name].numpy(), atol=TOLERANCE
        )


def gets(server):
    return [path for method, path, _ in server.requests if method == "GET"]


# ----------------------------------------------------------------------------- releases
def test_release_by_name_at_base_size_then_cached_and_its_hub_handle(
    hub_server, hub_env, base_release, caplog
):
    """albert_base_v2 from Google's layout (real preset shapes, 30000 pieces): checked against
    the preset, converted, equal outputs; then cached (no request) and reached by the original
    README's TF Hub handle (no request, the mapping logged)."""
    import albert_tf

    hub_server.add_release("albert_base_v2", base_release.path)
    with caplog.at_level(logging.INFO, logger="absl"):
        resolved = sources.resolve("albert_base_v2")
    assert resolved.source == f"{hub_env['ALBERT_TF_RELEASE_URL']}/albert_base_v2.tar.gz"
    assert resolved.directory == os.path.join(
        hub_env["ALBERT_TF_HOME"], "releases", "albert_base_v2", "model"
    )
    assert resolved.conversion.startswith("original TF1 checkpoint")
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Model "))
    assert resolved.source in line and resolved.directory in line and "converted from" in line
    record = json.loads(open(os.path.join(resolved.cache, cache.RECORD_FILE)).read())
    archive = cache.file_sha256(str(base_release.path))
    assert (record["download"]["sha256"], record["download"]["size"]) == archive
    assert sorted(record["files"]) == [
        "config.json",
        "pretrainer.weights.h5",
        "spm.model",
        "text.json",
    ]
    assert sorted(os.listdir(resolved.cache)) == ["model", "source.json"]  # nothing else kept
    assert_same_outputs(albert_tf.load("albert_base_v2"), base_release.pretrainer, 30000)

    hub_server.reset_counts()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        handle = sources.resolve("https://tfhub.dev/google/albert_base/3")
    assert handle.directory == resolved.directory
    assert "redirects to Kaggle" in caplog.text and "albert_base_v2" in caplog.text
    assert hub_server.count() == 0  # a cached release opens no connection


def test_release_shapes_are_checked_against_the_preset(hub_server, hub_env, tiny_release):
    """A tiny model served as albert_base_v2 is refused naming the fields, and not cached."""
    hub_server.add_release("albert_base_v2", tiny_release.path)
    with pytest.raises(
        SourceError,
        match=r"albert_config.json is not albert_base_v2's: .*"
        r"hidden_size=128 \(released 768\)",
    ):
        sources.resolve("albert_base_v2")
    assert not os.path.exists(cache.Entry("releases", "albert_base_v2").path)


# ----------------------------------------------------------------------------- addresses
def test_address_archive_loads_equal_and_serves_every_entry_point(hub, hub_env):
    """An https:// archive address: equal outputs through albert_tf.load, a classifier and the
    preprocessor by name (the SentencePiece model travels), one download for all of them."""
    import albert_tf
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    url = hub.release_url
    assert_same_outputs(albert_tf.load(url), hub.tiny_release.pretrainer, 1000)
    classifier = AlbertClassifier.from_pretrained(url, num_classes=3, max_seq_length=16)
    assert classifier.preprocessor is not None
    preprocessor = albert_tf.AlbertPreprocessor.from_pretrained(url, max_seq_length=16)
    expected = SentencePieceTokenizer(str(hub.tiny_release.spm_model)).encode_ids("Open the file.")
    ids = preprocessor(["Open the file."])["input_word_ids"].numpy()[0]
    assert list(ids[1 : 1 + len(expected)]) == list(expected)
    assert classifier.predict(["Open the file."], verbose=0)["probabilities"].shape == (1, 3)
    assert gets(hub.server) == ["/albert_models/albert_base_v2.tar.gz"]


def test_offline_mode_never_connects(hub, hub_env, monkeypatch):
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    with pytest.raises(SourceError) as raised:
        sources.resolve(hub.release_url)
    message = str(raised.value)
    assert message.startswith(f"{hub.release_url}: not in the cache")
    assert "ALBERT_TF_OFFLINE=1 forbids downloading" in message and "\n" not in message
    assert hub.server.count() == 0
    monkeypatch.delenv("ALBERT_TF_OFFLINE")
    sources.resolve(hub.release_url)
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    hub.server.reset_counts()
    assert sources.resolve(hub.release_url).cache is not None
    assert hub.server.count() == 0


def test_a_changed_cache_file_is_fetched_again_or_named_offline(hub, hub_env, monkeypatch):
    resolved = sources.resolve(hub.release_url)
    weights = os.path.join(resolved.directory, "pretrainer.weights.h5")
    data = bytearray(open(weights, "rb").read())
    data[-100] ^= 0xFF  # the same size, another sha256
    open(weights, "wb").write(bytes(data))
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    with pytest.raises(SourceError, match=r"pretrainer.weights.h5 changed: its sha256 differs"):
        sources.resolve(hub.release_url)
    monkeypatch.delenv("ALBERT_TF_OFFLINE")
    hub.server.reset_counts()
    again = sources.resolve(hub.release_url)
    assert gets(hub.server) == ["/albert_models/albert_base_v2.tar.gz"]
    assert cache.Entry("addresses", os.path.basename(again.cache)).problem() is None


def test_two_callers_at_once_download_once(hub, hub_env):
    """Two workers asking for the same model together: one download, both get it (the entry's
    lock is an flock on a file, which threads of one process contend for as processes do)."""
    hub.server.fault("/albert_models/albert_base_v2.tar.gz", "slow", delay=0.05)
    results, errors = [], []

    def fetch():
        try:
            results.append(sources.resolve(hub.release_url, quiet=True).directory)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors and len(results) == 2 and results[0] == results[1]
    assert gets(hub.server) == ["/albert_models/albert_base_v2.tar.gz"]


# ----------------------------------------------------------------------------- hf://
def test_huggingface_by_name_shares_the_cache_and_pins(hub, hub_env, monkeypatch):
    import albert_tf
    from albert_tf.models import model_dir

    spec = f"hf://{hub.repo_id}"
    resolved = sources.resolve(spec)
    assert resolved.source.endswith(f"{hub.repo_id} at commit {hub.commit}")
    assert model_dir.text_settings(resolved.directory) == {"tex_quotes": True}
    assert_same_outputs(albert_tf.load(spec), hub.tiny_release.pretrainer, 1000)
    snapshot = os.path.join(
        hub_env["HF_HUB_CACHE"], f"models--{hub.repo_id.replace('/', '--')}", "snapshots"
    )
    assert sorted(os.listdir(os.path.join(snapshot, hub.commit))) == [
        "config.json",
        "model.safetensors",
        "spiece.model",
    ]  # in the Hugging Face cache transformers reads
    hub.server.reset_counts()
    sources.resolve(spec)  # a branch: one question for its commit, nothing downloaded
    assert [m for m, _, _ in hub.server.requests] == ["HEAD"]
    hub.server.reset_counts()
    assert sources.resolve(f"{spec}@{hub.commit}").directory == resolved.directory
    assert hub.server.count() == 0  # pinned to a commit: none
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert sources.resolve(spec).directory == resolved.directory
    assert hub.server.count() == 0


@pytest.mark.parametrize(
    "spec,fragment",
    [
        ("hf://test-org/albert-pickle-only", "has only a pickled pytorch_model.bin"),
        ("hf://nobody/nothing", "no such repository"),
        ("hf://albert/albert-base-v2@v9", "no revision 'v9'"),
    ],
)
def test_huggingface_bad_names(hub, hub_env, spec, fragment):
    with pytest.raises(SourceError, match=fragment) as raised:
        sources.resolve(spec)
    assert "\n" not in str(raised.value) and spec.split("@")[0] in str(raised.value)
    assert not os.path.exists(os.path.join(hub_env["ALBERT_TF_HOME"], "huggingface", "nobody"))


def test_huggingface_offline_without_cache(hub, hub_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match=r"not in the Hugging Face cache .* HF_HUB_OFFLINE=1"):
        sources.resolve(f"hf://{hub.repo_id}")
    assert hub.server.count() == 0


# ----------------------------------------------------------------------------- bad input
def _served_bytes(hub, name, data):
    path = f"/files/{name}"
    hub.server.add_file(path, data)
    return f"{hub.url}{path}"


def _tar(tmp_path, members):
    import io
    import tarfile

    path = tmp_path / "bad.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = 2
                tar.addfile(info, io.BytesIO(b"{}"))
    return path.read_bytes()


BAD_DOWNLOADS = {
    "404": ("/albert_models/albert_base_v2.tar.gz", "404", r"HTTP 404 Not Found from .*: no such"),
    "truncated": (
        "/albert_models/albert_base_v2.tar.gz",
        "truncate",
        r"truncated download from .*: \d+ of \d+ bytes arrived; nothing was cached",
    ),
    "html": (
        "/albert_models/albert_base_v2.tar.gz",
        "html",
        r"answered with an HTML page \(Content-Type text/html.*\) instead of the archive",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_DOWNLOADS))
def test_bad_downloads_are_one_line_and_leave_nothing(hub, hub_env, case):
    path, fault, pattern = BAD_DOWNLOADS[case]
    hub.server.fault(path, fault)
    with pytest.raises(SourceError, match=pattern) as raised:
        sources.resolve(hub.release_url, quiet=True)
    assert hub.release_url in str(raised.value) and "\n" not in str(raised.value)
    addresses = os.path.join(hub_env["ALBERT_TF_HOME"], "addresses")
    assert os.listdir(addresses) == []  # no entry, no staging left behind


def test_checksum_mismatch_against_the_stores_md5(hub, hub_env, tmp_path):
    """GCS sends the MD5 of the object (x-goog-hash): bytes altered on the way are refused."""
    import base64
    import hashlib

    data = open(hub.tiny_release.path, "rb").read()
    path = "/albert_models/altered.tar.gz"
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    altered = data[:-1] + bytes([data[-1] ^ 1])
    hub.server.add_file(path, altered, headers={"x-goog-hash": f"md5={md5}"})
    with pytest.raises(SourceError, match=r"checksum mismatch downloading .*altered.tar.gz"):
        sources.resolve(f"{hub.url}{path}", quiet=True)


@pytest.mark.parametrize(
    "members,fragment",
    [
        ([("../evil.json", "file")], "would be written outside its folder"),
        ([("/abs/evil.json", "file")], "would be written outside its folder"),
        ([("albert_base/link", "link")], "is a link: refused"),
    ],
)
def test_unsafe_archives_are_refused(hub, hub_env, tmp_path, members, fragment):
    url = _served_bytes(hub, "bad.tar.gz", _tar(tmp_path, members))
    with pytest.raises(SourceError, match=fragment):
        sources.resolve(url, quiet=True)
    assert not os.path.exists(tmp_path.parent / "evil.json")


def test_oversized_not_an_archive_and_missing_files(hub, hub_env, tmp_path, monkeypatch):
    url = _served_bytes(hub, "noise.tar.gz", b"\x00\x01not an archive" * 100)
    with pytest.raises(SourceError, match=r"is not a .tar.gz, .tar or .zip archive \(1600 bytes"):
        sources.resolve(url, quiet=True)
    url = _served_bytes(hub, "empty.tar.gz", _tar(tmp_path, [("other/readme.json", "file")]))
    with pytest.raises(SourceError, match=r"holds no ALBERT model \(found other\)"):
        sources.resolve(url, quiet=True)
    monkeypatch.setenv("ALBERT_TF_MAX_ARCHIVE_BYTES", "1000")
    with pytest.raises(SourceError, match=r"over the limit|more than 1000 bytes"):
        sources.resolve(hub.release_url, quiet=True)


def test_a_release_archive_without_its_vocabulary_names_the_file(hub, hub_env, tmp_path):
    import tarfile

    path = tmp_path / "albert_base_v2.tar.gz"
    with tarfile.open(hub.tiny_release.path) as source, tarfile.open(path, "w:gz") as target:
        for member in source.getmembers():
            if not member.name.endswith("30k-clean.model"):
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
    hub.server.add_release("albert_base_v2", path)
    with pytest.raises(
        SourceError, match=r"albert_base_v2.tar.gz: the archive has no albert_base/30k-clean.model"
    ):
        sources.resolve("albert_base_v2", quiet=True)


def test_connection_tls_and_proxy_errors(hub, hub_env, monkeypatch):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens there once closed
    url = f"http://127.0.0.1:{closed}/albert_models/albert_base_v2.tar.gz"
    with pytest.raises(SourceError, match=r"connection refused reaching http://127.0.0.1"):
        sources.resolve(url)
    tls = hub.release_url.replace("http://", "https://")  # a plain HTTP server answers
    with pytest.raises(SourceError, match=r"TLS error reaching https://.*SSL_CERT_FILE"):
        sources.resolve(tls)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed}")
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.delenv("no_proxy")
    with pytest.raises(SourceError, match=r"proxy error reaching .* through http://127.0.0.1"):
        sources.resolve(hub.release_url)


def test_unknown_names_list_the_accepted_ones():
    with pytest.raises(sources.UnknownModelError) as raised:
        sources.resolve("albert_base_v3")
    message = str(raised.value)
    assert "did you mean albert_base_v2?" in message and "hf://<repo_id>" in message
    with pytest.raises(sources.UnknownModelError, match="versions 1 .*version 7 is not known"):
        sources.resolve("https://tfhub.dev/google/albert_xxlarge/7")


def test_an_existing_directory_named_like_a_release_is_that_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "albert_base_v2").mkdir()
    resolved = sources.resolve("albert_base_v2")
    assert (resolved.directory, resolved.cache) == ("albert_base_v2", None)


def test_a_keras_hub_preset_by_hf_name(hub_server, hub_env):
    """hf://keras/<preset> (keras-hub publishes its presets on the Hub so): the preset's files,
    its vocabulary in assets/tokenizer/ included, converted with keras-hub's text settings."""
    import albert_tf
    from albert_tf.models import model_dir

    fixture = os.path.join(os.path.dirname(__file__), "..", "convert", "fixtures")
    preset = os.path.join(fixture, "keras_hub_backbone")
    hub_server.add_hf_repo("keras/albert_tiny_en", preset)
    resolved = sources.resolve("hf://keras/albert_tiny_en")
    assert resolved.conversion.startswith("keras-hub preset")
    assert model_dir.text_settings(resolved.directory)["albert_rules"] is False
    with np.load(os.path.join(preset, "expected.npz")) as values:
        inputs = {
            "input_word_ids": values["token_ids"],
            "input_mask": values["padding_mask"].astype("int32"),
            "input_type_ids": values["segment_ids"],
        }
        pooled = albert_tf.load("hf://keras/albert_tiny_en").backbone(inputs)["pooled_output"]
        np.testing.assert_allclose(pooled.numpy(), values["pooled_output"], atol=TOLERANCE)
