"""From what a user names to a local albert_tf model directory: the one place models are fetched.

`resolve(spec)` accepts a released model's preset name (`albert_base_v2`), a TF Hub handle of
the original README (`https://tfhub.dev/google/albert_base/3`), `hf://<repo_id>[@revision]`,
an `https://` or `gs://` address of an archive or directory, or a local path (returned as it
is). What it fetches is converted once to an albert_tf model directory in the cache
(`albert_tf.sources.cache`) and reused: a cached release or address opens no connection; an
`hf://` name on a branch asks the Hub for the branch's commit (one request), pinned to a commit
it asks nothing. The result says where the model came from, where it is cached and how it was
converted, in one log line and in `record()` (for run records).

>>> resolved = resolve("pretrained/")  # a local path: nothing to fetch  # doctest: +SKIP
>>> resolved = resolve("albert_base_v2")  # doctest: +SKIP
>>> resolved.directory  # doctest: +SKIP
'/root/.cache/albert_tf/releases/albert_base_v2/model'
"""

import dataclasses
import hashlib
import os
import re
import shutil
from typing import Optional

from absl import logging

from albert_tf.errors import UserError
from albert_tf.sources import archives, cache, download, hf
from albert_tf.sources.names import (
    HuggingFace,
    LocalPath,
    Release,
    SourceError,
    parse,
)

# The files of a released archive, in its folder albert_<size>/.
RELEASE_FILES = (
    "albert_config.json",
    "model.ckpt-best.index",
    "model.ckpt-best.data-00000-of-00001",
    "30k-clean.model",
)
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
# How each format found in a directory becomes an albert_tf directory (for the log and record).
CONVERSIONS = {
    "huggingface": "Hugging Face (config.json + model.safetensors)",
    "keras_hub": "keras-hub preset (config.json + model.weights.h5)",
    "tfhub": "TF Hub SavedModel (TF Model Garden export_tfhub)",
    "original": "original TF1 checkpoint",
}
# Formats of a local directory that are converted into the cache when named (an original TF1
# checkpoint is converted by the scripts themselves: albert_tf.finetune.original_flags).
LOCAL_CONVERSIONS = ("huggingface", "keras_hub", "tfhub")
SPM_NAMES = ("spm.model", "spiece.model", "30k-clean.model")
ALBERT_TF_WEIGHTS = ("pretrainer.weights.h5", "backbone.weights.h5", "model.keras")
MAX_DOWNLOAD_ENV = "ALBERT_TF_MAX_DOWNLOAD_BYTES"


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """Where a named model is: `directory` (an albert_tf model directory to load), `source`
    (the address it came from), `cache` (its cache entry, None for a path used in place) and
    `conversion` (how it became an albert_tf directory, None if it was one)."""

    spec: str
    directory: str
    source: str
    cache: Optional[str] = None
    conversion: Optional[str] = None
    note: Optional[str] = None

    def describe(self):
        """The one log line naming the source, the cache path and the conversion."""
        if self.cache is None:
            return f"Model {self.spec}: used in place"
        parts = [f"Model {self.spec}" + (f": {self.source}" if self.source != self.spec else "")]
        if self.note:
            parts.append(self.note)
        parts.append(f"converted from {self.conversion}" if self.conversion else "albert_tf")
        return "; ".join(parts) + f"; cached at {self.directory}"

    def record(self):
        """The run-record form: {"spec", "source", "cache", "conversion"}."""
        return {
            "spec": self.spec,
            "source": self.source,
            "cache": self.cache,
            "conversion": self.conversion,
        }


def resolve(spec, quiet=False):
    """The `ResolvedModel` of `spec` (see the module docstring): fetched, verified, converted
    and cached when it is not a local path. Raises SourceError (a UserError) naming the name,
    address or file and what to do."""
    source = parse(spec)
    if isinstance(source, LocalPath):
        if _is_archive_name(source.path) and os.path.isfile(source.path):
            resolved = _resolve_address(spec, os.path.abspath(source.path), quiet)
        elif _foreign_directory(source.path):
            resolved = _resolve_local(spec, source.path)
        else:
            return ResolvedModel(spec, source.path, source.path)
    elif isinstance(source, Release):
        resolved = _resolve_release(spec, source, quiet)
    elif isinstance(source, HuggingFace):
        resolved = _resolve_huggingface(spec, source, quiet)
    else:
        resolved = _resolve_address(spec, source.url, quiet)
    logging.info("%s", resolved.describe())
    return resolved


def _max_download_bytes():
    value = os.environ.get(MAX_DOWNLOAD_ENV)
    if value and not value.isdigit():
        raise SourceError(f"{MAX_DOWNLOAD_ENV}={value}: expected a number of bytes")
    return int(value) if value else archives.max_archive_bytes()


def _is_archive_name(path):
    return path.lower().split("?")[0].endswith(ARCHIVE_SUFFIXES)


def _cached(entry, spec, what):
    """The entry's record when it is whole; None when it must be (re)built. Offline, a missing
    or changed entry is an error naming the model (and the file) and the variable."""
    problem = entry.problem()
    if problem is None:
        return entry.record()
    if problem != "not in the cache":
        logging.warning("%s: %s; fetching it again", spec, problem)
    if cache.offline():
        raise SourceError(
            f"{spec}: {problem} ({entry.path}) and {cache.OFFLINE_ENV}=1 forbids downloading "
            f"{what}; unset {cache.OFFLINE_ENV} or fetch the model once online"
        )
    return None


def _in_staging(staging, name):
    path = os.path.join(staging, name)
    os.makedirs(path, exist_ok=True)
    return path


# ----------------------------------------------------------------------------- releases
def _resolve_release(spec, release, quiet):
    entry = cache.Entry("releases", release.name)
    note = None
    if release.handle:
        note = (
            f"TF Hub handle {release.handle} (tfhub.dev now redirects to Kaggle) read as the same "
            f"weights from Google's release archive {release.name}"
        )
    url = release.url
    record = _cached(entry, spec, url)
    if record is None:
        with entry.lock(spec):
            record = entry.record() if entry.problem() is None else None
            if record is None:
                record = entry.build(
                    lambda staging: _fill_release(staging, release, url, quiet),
                    {"spec": release.name, "source": url},
                )
    return ResolvedModel(
        spec,
        entry.model_dir,
        record["source"],
        entry.path,
        record.get("conversion"),
        note,
    )


def _fill_release(staging, release, url, quiet):
    archive = os.path.join(_in_staging(staging, "download"), os.path.basename(url))
    fetched = download.download(
        url, archive, quiet=quiet, max_bytes=_max_download_bytes(), expect="archive"
    )
    unpacked = _in_staging(staging, "unpacked")
    members = archives.unpack(archive, unpacked, url)
    os.remove(archive)
    folder = os.path.join(unpacked, release.folder)
    missing = [n for n in RELEASE_FILES if not os.path.isfile(os.path.join(folder, n))]
    if missing:
        raise SourceError(
            f"{url}: the archive has no {release.folder}/{missing[0]} (it holds "
            f"{', '.join(members[:8]) or 'nothing'}); is ALBERT_TF_RELEASE_URL a mirror of "
            "Google's albert_models?"
        )
    _check_release_config(os.path.join(folder, "albert_config.json"), release.name, url)
    _convert(
        "original",
        os.path.join(folder, "model.ckpt-best"),
        os.path.join(folder, "30k-clean.model"),
        os.path.join(staging, cache.MODEL_DIR),
        url,
    )
    shutil.rmtree(os.path.join(staging, "download"), ignore_errors=True)
    shutil.rmtree(unpacked, ignore_errors=True)
    return {"download": fetched, "conversion": "original TF1 checkpoint (model.ckpt-best)"}


def _check_release_config(path, name, url):
    """The archive's albert_config.json must give the shapes of the preset `name`."""
    from albert_tf.config import SIZE_FIELDS, AlbertConfig
    from albert_tf.convert.original import read_original_config

    try:
        config = read_original_config(path)
    except (ValueError, KeyError, TypeError) as e:
        raise SourceError(f"{url}: {' '.join(str(e).split())}") from None
    preset = AlbertConfig.from_preset(name)
    differ = [f for f in SIZE_FIELDS if getattr(config, f) != getattr(preset, f)]
    if differ:
        shown = ", ".join(
            f"{f}={getattr(config, f)} (released {getattr(preset, f)})" for f in differ
        )
        raise SourceError(f"{url}: albert_config.json is not {name}'s: {shown}")


# ----------------------------------------------------------------------------- conversion
def _convert(source_format, path, spm, model_dir, origin):
    """Converts the model at `path` (`source_format`) into the albert_tf directory
    `model_dir`, with its SentencePiece model `spm`; errors name `origin`."""
    import tensorflow as tf

    from albert_tf.convert.checkpoint import read_model, source_text_settings, write_model

    try:
        model = read_model(source_format, path)
        write_model(model, "albert_tf", model_dir, spm, **source_text_settings(source_format))
    except SourceError:
        raise
    except tf.errors.OpError as e:  # a damaged checkpoint inside a whole archive
        raise SourceError(f"{origin}: cannot read the checkpoint: {e.message}") from None
    except (UserError, ValueError, TypeError, OSError) as e:
        raise SourceError(f"{origin}: {' '.join(str(e).split())}") from None


def find_layout(directory):
    """(format, model path, SentencePiece model or None) of the model in a local `directory`
    or in its only folder: "albert_tf" (config.json + weights), "huggingface" (config.json +
    model.safetensors), "keras_hub" (a keras-hub preset: config.json of a keras_hub class +
    model.weights.h5), "tfhub" (a TF2 Hub ALBERT encoder SavedModel, as TF Model Garden exports
    it) or "original" (albert_config.json + a TF1 checkpoint); None if none."""
    from albert_tf.convert import keras_hub, tfhub

    candidates = [directory]
    folders = [
        n
        for n in sorted(os.listdir(directory))
        if os.path.isdir(os.path.join(directory, n)) and not n.startswith(".")
    ]
    if len(folders) == 1:
        candidates.append(os.path.join(directory, folders[0]))
    for folder in candidates:
        present = set(os.listdir(folder))
        spm = next((os.path.join(folder, n) for n in SPM_NAMES if n in present), None)
        if "config.json" in present and present & set(ALBERT_TF_WEIGHTS):
            return "albert_tf", folder, spm
        if "config.json" in present and hf.WEIGHTS_FILE in present:
            return "huggingface", folder, spm
        if "model.weights.h5" in present and keras_hub.is_keras_hub_preset(folder):
            return "keras_hub", folder, keras_hub.vocabulary_path(folder)
        if "config.json" in present and hf.PICKLE_FILE in present:
            return "pickle", folder, spm
        if tfhub.SAVED_MODEL_FILE in present and tfhub.is_tfhub_saved_model(folder):
            return "tfhub", folder, tfhub.spm_model_path(folder, required=False)
        indexes = sorted(n for n in present if n.endswith(".index"))
        if "albert_config.json" in present and indexes:
            if len(indexes) > 1:
                return "original", folder, spm  # resolve_checkpoint_prefix names them
            return "original", os.path.join(folder, indexes[0][: -len(".index")]), spm
    return None


def _fill_from_directory(staging, local, origin):
    """Converts (or copies) the model found in the local directory `local` into staging."""
    layout = find_layout(local)
    if layout is None:
        found = ", ".join(sorted(os.listdir(local))[:8]) or "nothing"
        raise SourceError(
            f"{origin} holds no ALBERT model (found {found}); expected an original TF1 "
            "checkpoint with albert_config.json, a Hugging Face directory (config.json + "
            "model.safetensors), a keras-hub preset, a TF Hub SavedModel or an albert_tf "
            "directory"
        )
    kind, path, spm = layout
    if kind == "pickle":
        raise SourceError(
            f"{origin} holds only a pickled {hf.PICKLE_FILE}; albert_tf never loads pickles (they "
            "can run code): save it as safetensors with transformers first"
        )
    target = os.path.join(staging, cache.MODEL_DIR)
    if kind == "albert_tf":
        shutil.copytree(path, target)
        return None
    _convert(kind, path, spm, target, origin)
    return CONVERSIONS[kind]


# ----------------------------------------------------------------------------- hf://
def _resolve_huggingface(spec, source, quiet):
    del quiet  # huggingface_hub shows its own progress bars
    key = source.repo_id.replace("/", "--")
    if source.pinned:
        entry = cache.Entry("huggingface", f"{key}/{source.revision}")
        if entry.problem() is None:
            return _hf_result(spec, source, source.revision, entry)
    commit, _ = hf.resolve_commit(source)
    entry = cache.Entry("huggingface", f"{key}/{commit}")
    if entry.problem() is not None:
        with entry.lock(spec):
            if entry.problem() is not None:
                entry.build(
                    lambda staging: _fill_huggingface(staging, source, commit),
                    {"spec": spec, "source": f"hf://{source.repo_id}@{commit}"},
                )
    return _hf_result(spec, source, commit, entry)


def _fill_huggingface(staging, source, commit):
    snapshot = hf.fetch(source, commit)
    conversion = _fill_from_directory(staging, snapshot, f"hf://{source.repo_id}@{commit}")
    return {"conversion": conversion, "huggingface_cache": snapshot, "endpoint": hf.endpoint()}


def _hf_result(spec, source, commit, entry):
    record = entry.record()
    note = None if source.pinned else f"revision {source.revision} is commit {commit}"
    return ResolvedModel(
        spec,
        entry.model_dir,
        f"{hf.endpoint()}/{source.repo_id} at commit {commit}",
        entry.path,
        record.get("conversion"),
        note,
    )


# ----------------------------------------------------------------------------- local
def _foreign_directory(path):
    """Whether the local `path` is a directory holding a model in a format of
    `LOCAL_CONVERSIONS` (not an albert_tf directory, which is used in place)."""
    if not os.path.isdir(path):
        return False
    layout = find_layout(path)
    return layout is not None and layout[0] in LOCAL_CONVERSIONS


def _local_key(path):
    """An entry key for a local directory: its name and a hash of its absolute path and of
    each file's path, size and modification time (another content gets another entry)."""
    path = os.path.abspath(path)
    digest = hashlib.sha256(path.encode())
    for root, _, names in sorted(os.walk(path)):
        for name in sorted(names):
            stat = os.stat(os.path.join(root, name))
            digest.update(
                f"{os.path.relpath(root, path)}/{name}:{stat.st_size}:{stat.st_mtime_ns}".encode()
            )
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(path.rstrip("/")))[:60]
    return f"{name}-{digest.hexdigest()[:16]}"


def _resolve_local(spec, path):
    """A local Hugging Face directory, keras-hub preset or TF Hub SavedModel, converted once
    into the cache (`local/`); used from there while its files stay the same."""
    entry = cache.Entry("local", _local_key(path))
    if entry.problem() is not None:
        with entry.lock(spec):
            if entry.problem() is not None:
                entry.build(
                    lambda staging: {"conversion": _fill_from_directory(staging, path, spec)},
                    {"spec": spec, "source": os.path.abspath(path)},
                )
    record = entry.record()
    return ResolvedModel(
        spec, entry.model_dir, record["source"], entry.path, record.get("conversion")
    )


# ----------------------------------------------------------------------------- addresses
def _address_key(url):
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", url.rstrip("/").rsplit("/", 1)[-1])[:60]
    return f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:16]}"


def _resolve_address(spec, url, quiet):
    if url.startswith("gs://") and not _is_archive_name(url) and _is_albert_tf_gfile_dir(url):
        return ResolvedModel(spec, url, url)  # loads from gs:// as it is
    entry = cache.Entry("addresses", _address_key(url))
    record = _cached(entry, spec, url)
    if record is None:
        with entry.lock(spec):
            record = entry.record() if entry.problem() is None else None
            if record is None:
                record = entry.build(
                    lambda staging: _fill_address(staging, url, quiet),
                    {"spec": spec, "source": url},
                )
    return ResolvedModel(spec, entry.model_dir, url, entry.path, record.get("conversion"))


def _is_albert_tf_gfile_dir(url):
    import tensorflow as tf

    try:
        present = {n.rstrip("/") for n in tf.io.gfile.listdir(url)}
    except tf.errors.OpError:
        return False
    return "config.json" in present and bool(present & set(ALBERT_TF_WEIGHTS))


def _fill_address(staging, url, quiet):
    downloads = _in_staging(staging, "download")
    unpacked = _in_staging(staging, "unpacked")
    if os.path.isfile(url):  # a local archive
        fetched = {"url": url, "sha256": cache.file_sha256(url)[0], "size": os.path.getsize(url)}
        archives.unpack(url, unpacked, url)
    elif _is_archive_name(url):
        archive = os.path.join(downloads, "archive")
        fetched = download.download(
            url, archive, quiet=quiet, max_bytes=_max_download_bytes(), expect="archive"
        )
        archives.unpack(archive, unpacked, url)
    elif url.startswith("gs://"):
        fetched = _copy_gfile_directory(url, unpacked, quiet)
    else:
        fetched = _download_http_directory(url, unpacked, quiet)
    conversion = _fill_from_directory(staging, unpacked, url)
    shutil.rmtree(downloads, ignore_errors=True)
    shutil.rmtree(unpacked, ignore_errors=True)
    return {"download": fetched, "conversion": conversion}


def _copy_gfile_directory(url, local, quiet):
    """Copies the files of a gs:// directory (not its subdirectories) to `local`."""
    import tensorflow as tf

    base = url.rstrip("/")
    try:
        names = [
            f"{root[len(base) :].strip('/')}/{name}".lstrip("/")
            for root, _, files in tf.io.gfile.walk(base)
            for name in files
        ]
    except tf.errors.OpError as e:
        raise SourceError(f"cannot list {url}: {e.message}") from None
    if not names:
        raise SourceError(f"{url}: no such directory, or an empty one")
    fetched = []
    for name in names:  # keras-hub presets keep their vocabulary in assets/tokenizer/
        target = os.path.join(local, *name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fetched.append(download.download(f"{base}/{name}", target, quiet))
    return {"url": url, "files": fetched}


# What an https:// directory may hold, tried in this order: (file, required).
_HTTP_LAYOUTS = (
    (("config.json", True), ("model.safetensors", True), ("spiece.model", False)),
    (
        ("config.json", True),
        ("pretrainer.weights.h5", True),
        ("spm.model", False),
        ("text.json", False),
    ),
    (
        ("config.json", True),
        ("model.weights.h5", True),
        ("assets/tokenizer/vocabulary.spm", True),
        ("metadata.json", False),
        ("tokenizer.json", False),
        ("task.json", False),
        ("task.weights.h5", False),
        ("preprocessor.json", False),
    ),
    (
        ("albert_config.json", True),
        ("model.ckpt-best.index", True),
        ("model.ckpt-best.data-00000-of-00001", True),
        ("30k-clean.model", False),
    ),
)


def _download_http_directory(url, local, quiet):
    """Downloads the files of an https:// directory in one of `_HTTP_LAYOUTS` (HTTP cannot list
    a directory: each layout's files are asked for by name)."""
    base = url.rstrip("/")
    tried = []
    for layout in _HTTP_LAYOUTS:
        fetched = []
        for name, required in layout:
            target = os.path.join(local, *name.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                fetched.append(download.download(f"{base}/{name}", target, quiet))
            except SourceError as e:
                if "HTTP 404" not in str(e):
                    raise
                if required:
                    tried.append(name)
                    break
        else:
            return {"url": url, "files": fetched}
        shutil.rmtree(local)
        os.makedirs(local)
    raise SourceError(
        f"{url}: no ALBERT model at this address (HTTP 404 for {', '.join(sorted(set(tried)))}); "
        "give an archive (.tar.gz, .zip) or a directory holding config.json + "
        "model.safetensors, config.json + pretrainer.weights.h5, a keras-hub preset, or "
        "albert_config.json + model.ckpt-best"
    )
