"""Unpacking downloaded archives safely: .tar.gz, .tar and .zip, recognised by their bytes.

Members that would leave the destination (absolute paths, `..`), links, devices and archives
whose unpacked size exceeds a limit (`ALBERT_TF_MAX_ARCHIVE_BYTES`, default 16 GB: the largest
released model, xxlarge, unpacks to about 1 GB) are refused; a damaged or truncated archive is a
`SourceError` naming its address, never a raw tarfile, gzip or zlib error.

>>> import io, os, tarfile, tempfile
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "a.tar.gz")
>>> with tarfile.open(path, "w:gz") as tar:
...     info = tarfile.TarInfo("albert_base/albert_config.json"); info.size = 2
...     tar.addfile(info, io.BytesIO(b"{}"))
>>> unpack(path, os.path.join(folder, "out"), "https://example.com/a.tar.gz")
['albert_base/albert_config.json']
"""

import os
import tarfile
import zipfile
import zlib

from albert_tf.sources.names import SourceError

MAX_ARCHIVE_ENV = "ALBERT_TF_MAX_ARCHIVE_BYTES"
DEFAULT_MAX_ARCHIVE_BYTES = 16 * 10**9


def max_archive_bytes():
    value = os.environ.get(MAX_ARCHIVE_ENV)
    if not value:
        return DEFAULT_MAX_ARCHIVE_BYTES
    if not value.isdigit():
        raise SourceError(f"{MAX_ARCHIVE_ENV}={value}: expected a number of bytes")
    return int(value)


def kind_of(path):
    """ "tar.gz", "tar", "zip" or None, from the file's first bytes."""
    with open(path, "rb") as f:
        head = f.read(512)
    if head[:2] == b"\x1f\x8b":
        return "tar.gz"
    if head[:4] == b"PK\x03\x04":
        return "zip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def _safe_name(name, origin):
    normalized = os.path.normpath(name)
    if os.path.isabs(name) or normalized == ".." or normalized.startswith(".." + os.sep):
        raise SourceError(f"{origin}: archive member {name!r} would be written outside its folder")
    return normalized


def _describe(path):
    with open(path, "rb") as f:
        head = f.read(16)
    return f"{os.path.getsize(path)} bytes beginning {head!r}"


def unpack(path, destination, origin):
    """Unpacks the archive at `path` into `destination` (created); returns the member names.
    `origin` (its address) names it in errors."""
    kind = kind_of(path)
    if kind is None:
        raise SourceError(
            f"{origin} is not a .tar.gz, .tar or .zip archive ({_describe(path)}); "
            "is it the right address?"
        )
    limit = max_archive_bytes()
    os.makedirs(destination, exist_ok=True)
    try:
        if kind == "zip":
            return _unpack_zip(path, destination, origin, limit)
        return _unpack_tar(path, destination, origin, limit, kind)
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise SourceError(
            f"{origin}: the {kind} archive is damaged or truncated ({type(e).__name__}: {e}); "
            "nothing was cached, run again"
        ) from None


def _unpack_tar(path, destination, origin, limit, kind):
    names, total = [], 0
    with tarfile.open(path, "r:gz" if kind == "tar.gz" else "r:") as tar:
        members = []
        for member in tar:  # reads the whole archive: a truncated one fails here
            name = _safe_name(member.name, origin)
            if member.issym() or member.islnk():
                raise SourceError(f"{origin}: archive member {member.name!r} is a link: refused")
            if not (member.isfile() or member.isdir()):
                raise SourceError(
                    f"{origin}: archive member {member.name!r} is not a file or folder: refused"
                )
            total += member.size
            if total > limit:
                raise SourceError(
                    f"{origin} unpacks to more than {limit} bytes ({MAX_ARCHIVE_ENV}): refused"
                )
            members.append(member)
            if member.isfile():
                names.append(name)
        for member in members:
            target = os.path.join(destination, _safe_name(member.name, origin))
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            with open(target, "wb") as out:
                for block in iter(lambda: source.read(1 << 20), b""):
                    out.write(block)
    return sorted(names)


def _unpack_zip(path, destination, origin, limit):
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        total = 0
        for info in infos:
            _safe_name(info.filename, origin)
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise SourceError(f"{origin}: archive member {info.filename!r} is a link: refused")
            total += info.file_size
            if total > limit:
                raise SourceError(
                    f"{origin} unpacks to more than {limit} bytes ({MAX_ARCHIVE_ENV}): refused"
                )
        names = []
        for info in infos:
            target = os.path.join(destination, _safe_name(info.filename, origin))
            if info.is_dir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.open(info) as source, open(target, "wb") as out:
                for block in iter(lambda: source.read(1 << 20), b""):
                    out.write(block)
            names.append(os.path.normpath(info.filename))
    return sorted(names)
