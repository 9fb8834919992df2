"""What a user may name as a pretrained model, parsed without TensorFlow or a connection.

`parse(spec)` returns one of:

- `Release`: a released English ALBERT by preset name, `albert_{base,large,xlarge,xxlarge}_v{1,2}`
  (Google's archive `<ALBERT_TF_RELEASE_URL>/<name>.tar.gz`), or an original TF Hub handle
  `https://tfhub.dev/google/albert_<size>/<version>` mapped to the same weights (version 1 is the
  v1 model, 2 and 3 the v2 model: tfhub.dev now redirects to Kaggle, the archives stay);
- `HuggingFace`: `hf://<repo_id>[@revision]`;
- `Address`: an `https://`, `http://` or `gs://` address of an archive or a directory;
- `LocalPath`: an existing path (even one named like a release: a local directory
  `albert_base_v2/` wins, as in transformers), or anything else that looks like a path.

A bare word that is none of these is refused with the accepted names and the closest match.

>>> parse("albert_base_v2").url
'https://storage.googleapis.com/albert_models/albert_base_v2.tar.gz'
>>> parse("https://tfhub.dev/google/albert_large/3").name
'albert_large_v2'
>>> h = parse("hf://albert/albert-base-v2@main"); (h.repo_id, h.revision)
('albert/albert-base-v2', 'main')
>>> parse("albert_bse_v2")
Traceback (most recent call last):
...
albert_tf.sources.names.UnknownModelError: unknown model ... (did you mean albert_base_v2?); ...
"""

import dataclasses
import difflib
import os
import re

from albert_tf.errors import UserError

SIZES = ("base", "large", "xlarge", "xxlarge")
VERSIONS = ("v1", "v2")
#: The released English models, by preset name (the archives of google-research/albert).
RELEASES = tuple(f"albert_{size}_{version}" for version in VERSIONS for size in SIZES)
RELEASE_URL_ENV = "ALBERT_TF_RELEASE_URL"
DEFAULT_RELEASE_URL = "https://storage.googleapis.com/albert_models"
#: TF Hub module versions -> the release they hold (2 and 3 are both the v2 weights; 3 is the
#: re-export that loads in TensorFlow 1.15).
HUB_VERSIONS = {"1": "v1", "2": "v2", "3": "v2"}
_HUB_HANDLE = re.compile(
    r"^(?:https?://)?(?:www\.)?tfhub\.dev/google/albert_(base|large|xlarge|xxlarge)/(\d+)/?"
    r"(?:\?.*)?$"
)
_HF_PREFIX = "hf://"
_ADDRESS_SCHEMES = ("https://", "http://", "gs://")
_ACCEPTED = (
    ", ".join(RELEASES) + ", hf://<repo_id>[@revision], an https:// or gs:// address, a TF Hub "
    "handle https://tfhub.dev/google/albert_<size>/<1|2|3>, or a local directory"
)


class SourceError(UserError):
    """A model cannot be had from where it was named: the message names the name, address or
    file and what to do (a download, cache, archive or conversion problem)."""


class UnknownModelError(SourceError, ValueError):
    """A name that is no released model, address, handle or existing path."""


@dataclasses.dataclass(frozen=True)
class Release:
    """A released model: `name` (albert_base_v2), from `handle` when given as a TF Hub one."""

    name: str
    handle: str = None

    @property
    def url(self):
        base = os.environ.get(RELEASE_URL_ENV) or DEFAULT_RELEASE_URL
        return f"{base.rstrip('/')}/{self.name}.tar.gz"

    @property
    def folder(self):
        """The folder the archive unpacks to: albert_<size>/ for v1 and v2 alike."""
        return self.name.rsplit("_", 1)[0]


@dataclasses.dataclass(frozen=True)
class HuggingFace:
    """A Hugging Face Hub repository `repo_id` at `revision` (a branch, tag or commit)."""

    repo_id: str
    revision: str = "main"

    @property
    def pinned(self):
        """Whether `revision` is a full commit hash (its files can never change)."""
        return re.fullmatch(r"[0-9a-f]{40}", self.revision) is not None


@dataclasses.dataclass(frozen=True)
class Address:
    """An https://, http:// or gs:// address of an archive or a directory."""

    url: str


@dataclasses.dataclass(frozen=True)
class LocalPath:
    """A local path (or one tf.io.gfile reads that is not an address above)."""

    path: str


def hub_release(handle):
    """The release name a TF Hub ALBERT handle holds, or None if `handle` is no such handle."""
    match = _HUB_HANDLE.match(handle.strip())
    if not match:
        return None
    size, version = match.groups()
    if version not in HUB_VERSIONS:
        raise UnknownModelError(
            f"{handle}: TF Hub published albert_{size} as versions 1 (v1 weights), 2 and 3 "
            f"(v2 weights); version {version} is not known"
        )
    return f"albert_{size}_{HUB_VERSIONS[version]}"


def parse(spec):
    """The source `spec` names (see the module docstring); UnknownModelError for a bare word
    that names nothing."""
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownModelError(f"no model given; accepted: {_ACCEPTED}")
    spec = spec.strip()
    if "://" not in spec and os.path.exists(spec):
        return LocalPath(spec)  # a directory of that name here wins, as in transformers
    if spec in RELEASES:
        return Release(spec)
    release = hub_release(spec)
    if release:
        return Release(release, handle=spec)
    if spec.startswith(_HF_PREFIX):
        repo, _, revision = spec[len(_HF_PREFIX) :].partition("@")
        repo = repo.strip("/")
        if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", repo) or "@" in revision:
            raise UnknownModelError(
                f"{spec}: expected hf://<repo_id>[@revision], e.g. hf://albert/albert-base-v2"
            )
        return HuggingFace(repo, revision or "main")
    if spec.startswith(_ADDRESS_SCHEMES):
        return Address(spec)
    if "://" in spec or os.path.exists(spec) or os.sep in spec or spec.startswith("."):
        return LocalPath(spec)
    close = difflib.get_close_matches(spec.lower(), RELEASES, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownModelError(
        f"unknown model {spec!r}: no released model, address or existing path{hint}; "
        f"accepted: {_ACCEPTED}"
    )


def is_named(spec):
    """Whether `spec` names a model to fetch (a release, handle, hf:// or address), not a path."""
    try:
        return not isinstance(parse(spec), LocalPath)
    except UnknownModelError:
        return False
