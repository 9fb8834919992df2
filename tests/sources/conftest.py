"""Fixtures of the models-by-name tests: released archives and Hugging Face repositories built
by release_fixtures.py, and the local stand-in for storage.googleapis.com and huggingface.co
(hub_server.py).

The builds are session-scoped (once per xdist worker): `tiny_release` (albert_tiny, 1000
pieces, ~1 s) by default; `base_release` (the full albert_base_v2 shapes, 30000 pieces, ~44 MB,
a few seconds) only for the tests that ask for it. `hub_server` is a fresh server per test;
`hub` is one already serving the tiny models under their real names, and `hub_env` the
environment that points albert_tf and huggingface_hub at it.
"""

import types

import pytest
from hub_server import HubServer
from release_fixtures import make_hf_repo, make_pickle_only_repo, make_release_archive

TINY_VOCAB = 1000
RELEASE = "albert_base_v2"
HF_REPO = "albert/albert-base-v2"
HF_OLD_NAME = "albert-base-v2"  # the old namespace-less name, which the Hub redirects
PICKLE_REPO = "test-org/albert-pickle-only"


@pytest.fixture(scope="session")
def tiny_config():
    from albert_tf.config import AlbertConfig

    return AlbertConfig.from_preset("albert_tiny", vocab_size=TINY_VOCAB)


@pytest.fixture(scope="session")
def tiny_release(tmp_path_factory, tiny_config):
    """albert_base_v2.tar.gz laid out as Google's, holding a random albert_tiny (a
    ReleaseArchive: .path, .folder, .pretrainer, .config, .spm_model)."""
    return make_release_archive(tmp_path_factory.mktemp("release"), RELEASE, tiny_config)


@pytest.fixture(scope="session")
def base_release(tmp_path_factory):
    """albert_base_v2.tar.gz with the released shapes (12M parameters, 30000 pieces)."""
    from albert_tf.config import AlbertConfig

    config = AlbertConfig.from_preset("albert_base_v2")
    return make_release_archive(tmp_path_factory.mktemp("release_base"), RELEASE, config)


@pytest.fixture(scope="session")
def tiny_hf_repo(tmp_path_factory, tiny_release):
    """A Hugging Face ALBERT repo directory of the tiny release's weights and vocabulary."""
    directory = tmp_path_factory.mktemp("hf") / "albert-base-v2"
    return make_hf_repo(directory, tiny_release.pretrainer, tiny_release.spm_model)


@pytest.fixture(scope="session")
def pickle_only_repo(tmp_path_factory, tiny_config):
    return make_pickle_only_repo(tmp_path_factory.mktemp("hf") / "pickle-only", tiny_config)


@pytest.fixture
def hub_server():
    with HubServer() as server:
        yield server


@pytest.fixture
def hub(hub_server, tiny_release, tiny_hf_repo, pickle_only_repo):
    """hub_server serving the tiny release at /albert_models/albert_base_v2.tar.gz, the tiny HF
    repo as albert/albert-base-v2 (main, and the old name albert-base-v2 redirecting there) and
    the pickle-only repo as test-org/albert-pickle-only."""
    release_url = hub_server.add_release(RELEASE, tiny_release.path)
    commit = hub_server.add_hf_repo(HF_REPO, tiny_hf_repo)
    hub_server.add_hf_redirect(HF_OLD_NAME, HF_REPO)
    pickle_commit = hub_server.add_hf_repo(PICKLE_REPO, pickle_only_repo)
    return types.SimpleNamespace(
        server=hub_server,
        url=hub_server.url,
        release=RELEASE,
        release_url=release_url,
        release_base=f"{hub_server.url}/albert_models",
        repo_id=HF_REPO,
        old_repo_id=HF_OLD_NAME,
        commit=commit,
        pickle_repo_id=PICKLE_REPO,
        pickle_commit=pickle_commit,
        tiny_release=tiny_release,
        hf_dir=tiny_hf_repo,
    )


@pytest.fixture
def hub_env(hub, tmp_path, monkeypatch):
    """Environment pointing albert_tf (ALBERT_TF_RELEASE_URL, ALBERT_TF_HOME) and
    huggingface_hub (HF_ENDPOINT, HF_HUB_CACHE) at `hub` and fresh caches; returns the values
    set. In-process huggingface_hub calls still need `endpoint=` (see hub_server.py)."""
    values = {
        "ALBERT_TF_RELEASE_URL": hub.release_base,
        "ALBERT_TF_HOME": str(tmp_path / "albert_tf_home"),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_CACHE": str(tmp_path / "hf_cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    for name in ("HF_HUB_OFFLINE", "ALBERT_TF_OFFLINE", "HF_TOKEN", "HF_HOME"):
        monkeypatch.delenv(name, raising=False)
    return values
