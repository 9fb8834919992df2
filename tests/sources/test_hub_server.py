"""The stand-in hosts answer the real clients as storage.googleapis.com and huggingface.co do:
urllib for the released archives, huggingface_hub.hf_hub_download (in-process with `endpoint=`,
and in a subprocess through HF_ENDPOINT) for the Hub, requests for the 0.3x-style metadata read;
and each injected fault does what it says."""

import base64
import hashlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from hub_server import NO_SUCH_KEY, SIGN_IN_PAGE, HubServer, crc32c, git_sha1

HF_FILES = ("config.json", "model.safetensors", "spiece.model")


def _bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _get(url, headers=None, method="GET"):
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers, response.read()


def _download(hub, filename, tmp_path, repo_id=None, **kwargs):
    from huggingface_hub import hf_hub_download

    return hf_hub_download(
        repo_id or hub.repo_id,
        filename,
        cache_dir=str(tmp_path / "hf_cache"),
        endpoint=hub.url,
        **kwargs,
    )


# -- storage.googleapis.com ---------------------------------------------------------------------
def test_archive_downloads_with_gcs_headers(hub):
    data = _bytes(hub.tiny_release.path)
    status, headers, body = _get(hub.release_url)
    assert status == 200 and body == data
    assert headers["Content-Type"] == "application/x-tar"
    assert headers["Content-Length"] == str(len(data))
    assert headers["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    assert headers["Accept-Ranges"] == "bytes" and headers["Last-Modified"].endswith("GMT")
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    crc = base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()
    assert headers.get_all("x-goog-hash") == [f"crc32c={crc}", f"md5={md5}"]
    assert headers["x-goog-stored-content-length"] == str(len(data))
    status, headers, body = _get(hub.release_url, method="HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == str(len(data))


def test_joined_hash_header_and_conditional_get(hub_server, tiny_release):
    url = hub_server.add_release("albert_large_v1", tiny_release.path, hash_header="joined")
    status, headers, _ = _get(url)
    assert headers.get_all("x-goog-hash") == [headers["x-goog-hash"]]
    assert headers["x-goog-hash"].startswith("crc32c=") and ",md5=" in headers["x-goog-hash"]
    with pytest.raises(urllib.error.HTTPError) as error:
        _get(url, {"If-None-Match": headers["ETag"]})
    assert error.value.code == 304


def test_range_request_resumes(hub):
    data = _bytes(hub.tiny_release.path)
    half = len(data) // 2
    status, headers, body = _get(hub.release_url, {"Range": f"bytes={half}-"})
    assert status == 206 and data[:half] + body == data
    assert headers["Content-Range"] == f"bytes {half}-{len(data) - 1}/{len(data)}"
    assert headers["Content-Length"] == str(len(data) - half)
    assert _get(hub.release_url, {"Range": "bytes=-10"})[2] == data[-10:]
    with pytest.raises(urllib.error.HTTPError) as error:
        _get(hub.release_url, {"Range": f"bytes={len(data)}-"})
    assert error.value.code == 416
    assert error.value.headers["Content-Range"] == f"bytes */{len(data)}"


def test_missing_object_is_gcs_no_such_key(hub):
    with pytest.raises(urllib.error.HTTPError) as error:
        _get(f"{hub.release_base}/albert_huge_v9.tar.gz")
    assert error.value.code == 404
    assert error.value.headers["Content-Type"].startswith("application/xml")
    assert error.value.read() == NO_SUCH_KEY


def test_generic_file(hub_server):
    url = hub_server.url + hub_server.add_file("/models/a.bin", b"abc" * 10, "application/zip")
    status, headers, body = _get(url)
    assert (status, headers["Content-Type"], body) == (200, "application/zip", b"abc" * 10)


# -- huggingface.co -----------------------------------------------------------------------------
def test_hf_hub_download_is_byte_identical_then_cached(hub, tmp_path):
    paths = {name: _download(hub, name, tmp_path) for name in HF_FILES}
    for name, path in paths.items():
        assert _bytes(path) == _bytes(os.path.join(hub.hf_dir, name)), name
        assert f"snapshots{os.sep}{hub.commit}{os.sep}" in path
    # LFS files: HEAD at the Hub (302 to the CDN), GET at the CDN; config.json: HEAD + GET.
    assert [(m, p.split("?")[0].rsplit("/", 1)[-1]) for m, p, _ in hub.server.requests[:2]] == [
        ("HEAD", "config.json"),
        ("GET", "config.json"),
    ]
    assert hub.server.count("/repos/") == 2  # model.safetensors and spiece.model from the CDN
    hub.server.reset_counts()
    for name in HF_FILES:
        assert _download(hub, name, tmp_path, revision=hub.commit) == paths[name]
    assert hub.server.count() == 0


def test_hf_metadata_as_huggingface_hub_reads_it(hub):
    import requests
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    data = _bytes(os.path.join(hub.hf_dir, "model.safetensors"))
    url = hf_hub_url(hub.repo_id, "model.safetensors", endpoint=hub.url)
    meta = get_hf_file_metadata(url)
    assert (meta.commit_hash, meta.etag, meta.size) == (
        hub.commit,
        hashlib.sha256(data).hexdigest(),
        len(data),
    )
    assert meta.location.startswith(hub.server.cdn_url)
    # huggingface_hub 0.3x: HEAD without following redirects (only relative ones).
    response = requests.head(url, allow_redirects=False, timeout=10)
    assert response.status_code == 302 and response.headers["Location"] == meta.location
    assert response.headers["X-Linked-Size"] == str(len(data))
    config = requests.head(url.replace("model.safetensors", "config.json"), timeout=10)
    config_bytes = _bytes(os.path.join(hub.hf_dir, "config.json"))
    assert config.status_code == 200 and config.headers["ETag"] == f'"{git_sha1(config_bytes)}"'
    assert config.headers["X-Repo-Commit"] == hub.commit


def test_hf_errors_map_to_huggingface_hub_exceptions(hub, tmp_path):
    from huggingface_hub.errors import (
        EntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    with pytest.raises(EntryNotFoundError):
        _download(hub, "pytorch_model.bin", tmp_path)
    with pytest.raises(EntryNotFoundError):  # the safetensors-less repo
        _download(hub, "model.safetensors", tmp_path, repo_id=hub.pickle_repo_id)
    with pytest.raises(RepositoryNotFoundError):
        _download(hub, "config.json", tmp_path, repo_id="albert/no-such-model")
    with pytest.raises(RevisionNotFoundError):
        _download(hub, "config.json", tmp_path, revision="v9.9")
    with pytest.raises(RevisionNotFoundError):
        _download(hub, "config.json", tmp_path, revision="0" * 40)


def test_renamed_repo_redirects(hub, tmp_path):
    path = _download(hub, "config.json", tmp_path, repo_id=hub.old_repo_id)
    assert _bytes(path) == _bytes(os.path.join(hub.hf_dir, "config.json"))
    assert [p.split("/")[1] for _, p, _ in hub.server.requests][:2] == ["albert-base-v2", "albert"]


def test_second_revision_and_its_commit(hub, tmp_path):
    other = tmp_path / "v2"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "albert", "changed": True}))
    commit = hub.server.add_hf_repo(hub.repo_id, str(other), revision="refs/pr/1")
    assert commit != hub.commit
    path = _download(hub, "config.json", tmp_path, revision="refs/pr/1")
    assert json.loads(_bytes(path))["changed"] is True and commit in path
    assert hub.server.count("/resolve/refs%2Fpr%2F1/") == 2


def test_hf_endpoint_environment_in_a_subprocess(hub, hub_env):
    """A process that imports huggingface_hub with HF_ENDPOINT (and HF_HUB_CACHE) set."""
    code = (
        "import sys; from huggingface_hub import hf_hub_download; "
        "print(hf_hub_download(sys.argv[1], 'config.json'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, hub.repo_id], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip()
    assert path.startswith(hub_env["HF_HUB_CACHE"])
    assert _bytes(path) == _bytes(os.path.join(hub.hf_dir, "config.json"))
    assert hub.server.count("config.json") == 2


def test_hf_html_answer_is_no_hub_answer(hub, tmp_path):
    """A captive portal's page (200 text/html, no X-Repo-Commit): huggingface_hub raises
    LocalEntryNotFoundError from a FileMetadataError (nothing cached to fall back on)."""
    from huggingface_hub.errors import FileMetadataError, LocalEntryNotFoundError

    hub.server.fault(f"/{hub.repo_id}/resolve/main/config.json", "html")
    with pytest.raises(LocalEntryNotFoundError) as error:
        _download(hub, "config.json", tmp_path)
    assert isinstance(error.value.__cause__, FileMetadataError)


def test_hf_client_resumes_a_cut_download_and_retries_a_500(hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    # http_get writes what arrived in chunks of DOWNLOAD_CHUNK_SIZE (10 MB): a cut before the
    # first chunk is complete restarts from zero, a later one resumes with a Range request.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)
    hub.server.fault(f"/{hub.repo_id}/resolve/main/model.safetensors", "truncate", times=1)
    hub.server.fault(f"/{hub.repo_id}/resolve/main/config.json", "500", times=1)
    data = _bytes(os.path.join(hub.hf_dir, "model.safetensors"))
    assert _bytes(_download(hub, "model.safetensors", tmp_path)) == data
    ranges = [h.get("Range") for m, p, h in hub.server.requests if p.startswith("/repos/")]
    cut = len(data) // 2 // (64 * 1024) * (64 * 1024)  # what the client had written
    assert ranges == [None, f"bytes={cut}-"]
    assert _bytes(_download(hub, "config.json", tmp_path)) == _bytes(
        os.path.join(hub.hf_dir, "config.json")
    )
    assert hub.server.count("config.json") == 3  # HEAD 500, HEAD again, GET


# -- faults -------------------------------------------------------------------------------------
def test_truncate_is_an_incomplete_read(hub):
    hub.server.fault(f"/albert_models/{hub.release}.tar.gz", "truncate")
    with pytest.raises(http.client.IncompleteRead) as error:
        _get(hub.release_url)
    assert len(error.value.partial) == os.path.getsize(hub.tiny_release.path) // 2


def test_html_is_a_sign_in_page(hub):
    hub.server.fault(f"/albert_models/{hub.release}.tar.gz", "html")
    status, headers, body = _get(hub.release_url)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body == SIGN_IN_PAGE
    hub.server.clear_faults()
    assert _get(hub.release_url)[2] == _bytes(hub.tiny_release.path)


@pytest.mark.parametrize("kind", ["404", "500"])
def test_status_faults(hub, kind):
    hub.server.fault(f"/albert_models/{hub.release}.tar.gz", kind, times=1)
    with pytest.raises(urllib.error.HTTPError) as error:
        _get(hub.release_url)
    assert error.value.code == int(kind)
    assert error.value.read().startswith(b"<?xml")
    assert _get(hub.release_url)[0] == 200  # times=1: the next request is served


def test_hf_status_fault_uses_the_hubs_error(hub, tmp_path):
    from huggingface_hub.errors import EntryNotFoundError

    hub.server.fault(f"/{hub.repo_id}/resolve/main/config.json", "404")
    with pytest.raises(EntryNotFoundError):
        _download(hub, "config.json", tmp_path)


def test_slow_bodies_of_two_clients_overlap():
    with HubServer(slow_delay=0.05) as server:
        server.add_file("/a.bin", os.urandom(100_000))
        server.fault("/a.bin", "slow")
        spans = []

        def fetch():
            start = time.monotonic()
            assert len(_get(server.url + "/a.bin")[2]) == 100_000
            spans.append((start, time.monotonic()))

        threads = [threading.Thread(target=fetch) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    (start_a, end_a), (start_b, end_b) = spans
    assert end_a - start_a >= 0.45 and end_b - start_b >= 0.45  # 10 chunks x 0.05 s
    assert max(start_a, start_b) < min(end_a, end_b)  # served at the same time


def test_request_log_is_thread_safe_and_stop_closes():
    server = HubServer()
    server.add_file("/x", b"x")

    def fetch():
        for _ in range(10):
            _get(server.url + "/x")

    threads = [threading.Thread(target=fetch) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.count("/x") == 80 and server.count("/y") == 0
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(urllib.error.URLError):
        _get(server.url + "/x")
