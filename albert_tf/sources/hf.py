"""`hf://<repo_id>[@revision]`: an ALBERT repository of the Hugging Face Hub, through
huggingface_hub and the user's Hugging Face cache.

Files are downloaded by `huggingface_hub.hf_hub_download` into the cache transformers uses
(`HF_HUB_CACHE`, else `HF_HOME/hub`, else huggingface_hub's default), so a model transformers
already downloaded is not downloaded again; `HF_ENDPOINT` (a mirror) and `HF_TOKEN` work as
there, read when a model is fetched. `HF_HUB_OFFLINE=1` or `ALBERT_TF_OFFLINE=1` open no
connection. Read: `config.json`, `model.safetensors`, `spiece.model` (optional), or a
keras-hub preset's files (`hf://keras/albert_base_en_uncased`). A repository with only a
pickled `pytorch_model.bin` is refused: albert_tf never unpickles.

>>> revision_commit("/root/.cache/huggingface/hub/models--albert--albert-base-v2/snapshots/"
...                 "0123456789abcdef0123456789abcdef01234567/config.json")
'0123456789abcdef0123456789abcdef01234567'
"""

import json
import os
import re

from albert_tf.sources.cache import OFFLINE_ENV, offline
from albert_tf.sources.names import SourceError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
SPM_FILE = "spiece.model"
PICKLE_FILE = "pytorch_model.bin"
# A keras-hub preset's files (the Hub's keras/ organisation publishes its presets so).
KERAS_HUB_FILES = ("model.weights.h5", "assets/tokenizer/vocabulary.spm")
KERAS_HUB_OPTIONAL = ("metadata.json", "tokenizer.json", "task.json", "task.weights.h5")
_INSTALL = "pip install huggingface_hub"


def _hub():
    try:
        import huggingface_hub
    except ImportError:
        raise SourceError(f"hf:// models need huggingface_hub: {_INSTALL}") from None
    return huggingface_hub


def hub_offline():
    """Whether hf:// opens no connection (HF_HUB_OFFLINE=1 or ALBERT_TF_OFFLINE=1)."""
    return offline() or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in (
        "1",
        "true",
        "yes",
        "on",
    )


def endpoint():
    """The Hub's address: HF_ENDPOINT (read now), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def cache_dir():
    """The Hugging Face cache directory, read from the environment now (HF_HUB_CACHE, else
    HF_HOME/hub), else huggingface_hub's own default (shared with transformers)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    return _hub().constants.HF_HUB_CACHE


def revision_commit(path):
    """The commit of a file huggingface_hub returned (…/snapshots/<commit>/<file>)."""
    parts = os.path.normpath(path).split(os.sep)
    commit = parts[parts.index("snapshots") + 1] if "snapshots" in parts else ""
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise SourceError(f"{path}: not a file of the Hugging Face cache (no snapshots/<commit>)")
    return commit


# huggingface_hub's errors by class name, the most specific first (LocalEntryNotFoundError is
# an EntryNotFoundError; 2.x raises subclasses such as RemoteEntryNotFoundError).
_KNOWN_ERRORS = (
    "LocalEntryNotFoundError",
    "OfflineModeIsEnabled",
    "RepositoryNotFoundError",
    "RevisionNotFoundError",
    "EntryNotFoundError",
)


def _name(source):
    return f"hf://{source.repo_id}@{source.revision}"


def _error(source, filename, error):
    """A SourceError for huggingface_hub's `error` fetching `filename` of `source`."""
    kinds = {cls.__name__ for cls in type(error).__mro__}
    kind = next((k for k in _KNOWN_ERRORS if k in kinds), type(error).__name__)
    where = f"{_name(source)} ({endpoint()}/{source.repo_id})"
    if kind == "RepositoryNotFoundError":
        return SourceError(
            f"{where}: no such repository (or a private one: set HF_TOKEN or run `hf auth login`)"
        )
    if kind == "RevisionNotFoundError":
        return SourceError(f"{where}: no revision {source.revision!r} (a branch, tag or commit)")
    if kind == "EntryNotFoundError":
        return SourceError(f"{where} has no {filename}")
    if kind in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
        if hub_offline():
            return SourceError(
                f"{_name(source)}: {filename} is not in the Hugging Face cache ({cache_dir()}) "
                f"and HF_HUB_OFFLINE=1 or {OFFLINE_ENV}=1 forbids downloading it; unset them "
                "or fetch the model once online"
            )
        return SourceError(
            f"{where}: cannot reach the Hub to fetch {filename} and it is not in the cache "
            f"({' '.join(str(error).split())[:200]}); check the network, HTTPS_PROXY and "
            "HF_ENDPOINT"
        )
    message = " ".join(str(error).split())[:300]
    if "SSL" in message or "certificate" in message.lower():
        return SourceError(
            f"{where}: TLS error fetching {filename} ({message}); set SSL_CERT_FILE or "
            "REQUESTS_CA_BUNDLE to your CA bundle"
        )
    if "proxy" in message.lower():
        return SourceError(
            f"{where}: proxy error fetching {filename} ({message}); check HTTPS_PROXY"
        )
    return SourceError(f"{where}: fetching {filename} failed: {kind}: {message}")


def _download(source, filename, revision=None):
    hub = _hub()
    try:
        return hub.hf_hub_download(
            source.repo_id,
            filename,
            revision=revision or source.revision,
            cache_dir=cache_dir(),
            local_files_only=hub_offline(),
            endpoint=endpoint(),
        )
    except Exception as e:  # huggingface_hub's errors vary by version and transport
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise _error(source, filename, e) from None


def _exists(source, filename, commit):
    hub = _hub()
    try:
        url = hub.hf_hub_url(source.repo_id, filename, revision=commit, endpoint=endpoint())
        hub.get_hf_file_metadata(url)
        return True
    except Exception:
        return False


def resolve_commit(source):
    """(commit, local config.json) of `source`'s revision: one request for a branch or tag
    (none offline, or when pinned to a commit whose config.json is cached)."""
    config = _download(source, CONFIG_FILE)
    return revision_commit(config), config


def repository_kind(source, config_path):
    """ "transformers" or "keras_hub" (a keras-hub preset, e.g. hf://keras/albert_base_en_uncased)
    for an ALBERT repository; refuses another model, naming what its config.json says."""
    try:
        with open(config_path, encoding="utf-8") as f:
            values = json.load(f)
    except ValueError as e:
        raise SourceError(f"{_name(source)}: {CONFIG_FILE} is not valid JSON ({e})") from None
    if str(values.get("module", "")).startswith("keras_hub"):
        if values.get("class_name") != "AlbertBackbone":
            raise SourceError(
                f"{_name(source)} is a keras-hub {values.get('class_name')} preset, not ALBERT"
            )
        return "keras_hub"
    model_type = values.get("model_type")
    if model_type != "albert":
        found = model_type or ", ".join(values.get("architectures", [])) or "no model_type"
        raise SourceError(f"{_name(source)} is not an ALBERT model ({CONFIG_FILE}: {found})")
    return "transformers"


def _optional(source, filename, commit):
    try:
        return _download(source, filename, commit)
    except SourceError as e:
        if "has no" not in str(e):
            raise
        return None


def fetch(source, commit):
    """Downloads (or finds cached) the model files of `source` at `commit`; returns the local
    snapshot directory (transformers' files, or a keras-hub preset's)."""
    config = _download(source, CONFIG_FILE, commit)
    if repository_kind(source, config) == "keras_hub":
        for name in KERAS_HUB_FILES:
            _download(source, name, commit)
        for name in KERAS_HUB_OPTIONAL:
            _optional(source, name, commit)
        return os.path.dirname(config)
    try:
        weights = _download(source, WEIGHTS_FILE, commit)
    except SourceError:
        if not hub_offline() and _exists(source, PICKLE_FILE, commit):
            raise SourceError(
                f"{_name(source)} has only a pickled {PICKLE_FILE}, no {WEIGHTS_FILE}; albert_tf "
                "never loads pickles (they can run code). Save it as safetensors with "
                "transformers (model.save_pretrained(dir)) and pass that directory"
            ) from None
        raise
    _optional(source, SPM_FILE, commit)
    return os.path.dirname(weights)
