"""Downloads of one file over https://, http:// or gs://, whole and verified or not at all.

`download(url, target)` streams `url` into a hidden temporary file beside `target`, logs progress
(bytes, percent, rate) every few seconds, checks what arrived and only then renames it to
`target`. A transfer that ends early (fewer bytes than Content-Length), an HTML page served
where a file was expected, or a body whose MD5 differs from the `x-goog-hash` header
(Google Cloud Storage) is a `SourceError` naming the address and what arrived; the temporary
file is removed.

Connections follow Python's standard HTTP client: `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`
choose a proxy, `SSL_CERT_FILE` (or `REQUESTS_CA_BUNDLE`, as for requests) a CA bundle.
gs:// is read through `tf.io.gfile` (its credentials). With `ALBERT_TF_OFFLINE=1` nothing is
opened: `download` raises before connecting.

>>> import functools, http.server, threading, tempfile, os
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "a.bin"), "wb") as f:
...     _ = f.write(b"x" * 1000)
>>> class Quiet(http.server.SimpleHTTPRequestHandler):
...     def log_message(self, *args):
...         pass
>>> handler = functools.partial(Quiet, directory=folder)
>>> server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
>>> _ = threading.Thread(target=server.serve_forever, daemon=True).start()
>>> url = f"http://127.0.0.1:{server.server_port}/a.bin"
>>> info = download(url, os.path.join(folder, "copy.bin"), quiet=True)
>>> info["size"], len(info["sha256"])
(1000, 64)
>>> server.shutdown()
"""

import base64
import contextlib
import hashlib
import http.client
import os
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request

from absl import logging

from albert_tf import files
from albert_tf.sources.cache import OFFLINE_ENV, offline
from albert_tf.sources.names import SourceError

CHUNK = 1 << 20
PROGRESS_SECONDS = 5.0
TIMEOUT_SECONDS = 60.0
CA_BUNDLE_ENVS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
USER_AGENT = "albert_tf"


def _mb(count):
    return f"{count / 1e6:.1f} MB"


class _Progress:
    """Logs bytes, percent and rate every PROGRESS_SECONDS (and at the end)."""

    def __init__(self, url, total, quiet):
        self.url, self.total, self.quiet = url, total, quiet
        self.start = self.last = time.monotonic()
        self.done = 0

    def update(self, count):
        self.done += count
        now = time.monotonic()
        if not self.quiet and now - self.last >= PROGRESS_SECONDS:
            self.last = now
            self.log(now)

    def log(self, now=None):
        elapsed = max((now or time.monotonic()) - self.start, 1e-6)
        of = f" of {_mb(self.total)} ({100 * self.done / self.total:.0f}%)" if self.total else ""
        logging.info(
            "Downloading %s: %s%s, %s/s", self.url, _mb(self.done), of, _mb(self.done / elapsed)
        )


def ssl_context():
    """The default TLS context, with the CA bundle of SSL_CERT_FILE or REQUESTS_CA_BUNDLE."""
    for name in CA_BUNDLE_ENVS:
        bundle = os.environ.get(name)
        if bundle:
            if not os.path.exists(bundle):
                raise SourceError(f"{name}={bundle}: no such CA bundle file")
            return ssl.create_default_context(cafile=bundle)
    return ssl.create_default_context()


def _proxy_for(url):
    """The proxy urllib uses for `url` (from the environment), or None."""
    parsed = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parsed.hostname or ""):
        return None
    return urllib.request.getproxies().get(parsed.scheme)


def _connection_error(url, error):
    """A SourceError for a failed connection: refused, TLS, proxy, timeout or name lookup."""
    reason = getattr(error, "reason", error)
    proxy = _proxy_for(url)
    via = f" through the proxy {proxy}" if proxy else ""
    if isinstance(reason, ssl.SSLError):  # SSLCertVerificationError included
        return SourceError(
            f"TLS error reaching {url}{via}: {reason}; if a proxy or firewall re-signs "
            f"traffic, set SSL_CERT_FILE (or REQUESTS_CA_BUNDLE) to its CA bundle"
        )
    text = str(reason)
    if proxy and ("Tunnel connection failed" in text or isinstance(reason, ConnectionError)):
        return SourceError(f"proxy error reaching {url} through {proxy}: {text}; check HTTPS_PROXY")
    if isinstance(reason, ConnectionRefusedError):
        return SourceError(f"connection refused reaching {url}{via}; is the address right?")
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return SourceError(f"timed out reaching {url}{via} after {TIMEOUT_SECONDS:.0f} s")
    if isinstance(reason, socket.gaierror):
        return SourceError(f"cannot resolve the host of {url}{via}: {text}")
    return SourceError(f"cannot reach {url}{via}: {text}")


def _http_error(url, error):
    body = b""
    with contextlib.suppress(Exception):
        body = error.read(300)
    detail = " ".join(body.decode("utf-8", "replace").split())[:160]
    hint = {
        404: "no such file at this address",
        401: "the address needs credentials",
        403: "access denied",
    }.get(error.code, "the server refused")
    return SourceError(
        f"HTTP {error.code} {error.reason} from {url}: {hint}" + (f" ({detail})" if detail else "")
    )


def _goog_md5(headers):
    """The base64 MD5 of an `x-goog-hash` header, or None."""
    values = headers.get_all("x-goog-hash") or []  # GCS sends crc32c= and md5= as two lines
    for part in ",".join(values).split(","):
        name, _, value = part.strip().partition("=")
        if name == "md5":
            return value
    return None


def _looks_like_html(content_type, first_bytes):
    head = first_bytes.lstrip()[:15].lower()
    return "text/html" in (content_type or "") or head.startswith((b"<!doctype html", b"<html"))


def open_url(url, method="GET"):
    """The response of `url` (urllib, with the environment's proxy and CA bundle); SourceError
    for an HTTP error status or a failed connection."""
    if offline():
        raise SourceError(f"{OFFLINE_ENV}=1: not opening {url}")
    request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT})
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl_context()))
    try:
        return opener.open(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as e:
        raise _http_error(url, e) from None
    except (urllib.error.URLError, OSError) as e:
        raise _connection_error(url, e) from None


def download(url, target, quiet=False, max_bytes=None, expect="file"):
    """Downloads `url` to the local file `target` (see the module docstring); returns
    {"url", "sha256", "size", "content_type"}. `max_bytes` refuses larger files; `expect`
    names what should arrive, in messages ("archive", "file")."""
    if url.startswith("gs://"):
        return _copy_gfile(url, target, quiet, max_bytes)
    staging = files.temporary_path(target)
    digest, md5 = hashlib.sha256(), hashlib.md5()
    with open_url(url) as response:
        total = response.headers.get("Content-Length")
        total = int(total) if total and total.isdigit() else None
        content_type = response.headers.get("Content-Type", "")
        if max_bytes and total and total > max_bytes:
            raise SourceError(
                f"{url} is {_mb(total)}, over the limit of {_mb(max_bytes)} "
                "(ALBERT_TF_MAX_DOWNLOAD_BYTES)"
            )
        expected_md5 = _goog_md5(response.headers)
        progress = _Progress(url, total, quiet)
        first = b""
        try:
            with open(staging, "wb") as out:
                while True:
                    try:
                        block = response.read(CHUNK)
                    except http.client.IncompleteRead as e:
                        progress.update(len(e.partial))
                        block = None
                    except (OSError, socket.timeout) as e:
                        raise SourceError(
                            f"download of {url} broke off after {_mb(progress.done)}"
                            f"{' of ' + _mb(total) if total else ''}: {e}; run again"
                        ) from None
                    if not block:
                        break
                    if not first:
                        first = block[:512]
                    out.write(block)
                    digest.update(block)
                    md5.update(block)
                    progress.update(len(block))
                    if max_bytes and progress.done > max_bytes:
                        raise SourceError(f"{url} sends more than {_mb(max_bytes)}: refused")
            if total is not None and progress.done != total:
                raise SourceError(
                    f"truncated download from {url}: {progress.done} of {total} bytes arrived; "
                    "nothing was cached, run again"
                )
            if expect != "html" and _looks_like_html(content_type, first):
                title = first.decode("utf-8", "replace")
                snippet = " ".join(title.split())[:80]
                raise SourceError(
                    f"{url} answered with an HTML page (Content-Type {content_type or 'none'}, "
                    f"{progress.done} bytes: {snippet!r}) instead of the {expect}; the address "
                    "is wrong or needs a sign-in"
                )
            if expected_md5 and base64.b64encode(md5.digest()).decode() != expected_md5:
                raise SourceError(
                    f"checksum mismatch downloading {url}: the MD5 of the {progress.done} bytes "
                    "that arrived differs from the server's x-goog-hash; nothing was cached, "
                    "run again"
                )
            if not quiet:
                progress.log()
            os.replace(staging, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(staging)
    return {
        "url": url,
        "sha256": digest.hexdigest(),
        "size": progress.done,
        "content_type": content_type,
    }


def _copy_gfile(url, target, quiet, max_bytes):
    """gs:// (or another tf.io.gfile file system) to a local file, with the same guarantees."""
    import tensorflow as tf

    if offline():
        raise SourceError(f"{OFFLINE_ENV}=1: not opening {url}")
    try:
        total = tf.io.gfile.stat(url).length
    except tf.errors.NotFoundError:
        raise SourceError(f"{url}: no such object") from None
    except tf.errors.OpError as e:
        raise SourceError(f"cannot read {url}: {e.message}") from None
    if max_bytes and total > max_bytes:
        raise SourceError(f"{url} is {_mb(total)}, over the limit of {_mb(max_bytes)}")
    staging = files.temporary_path(target)
    digest = hashlib.sha256()
    progress = _Progress(url, total, quiet)
    try:
        with tf.io.gfile.GFile(url, "rb") as source, open(staging, "wb") as out:
            for block in iter(lambda: source.read(CHUNK), b""):
                out.write(block)
                digest.update(block)
                progress.update(len(block))
        if progress.done != total:
            raise SourceError(f"truncated read of {url}: {progress.done} of {total} bytes")
        if not quiet:
            progress.log()
        os.replace(staging, target)
    except tf.errors.OpError as e:
        raise SourceError(f"cannot read {url}: {e.message}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(staging)
    return {"url": url, "sha256": digest.hexdigest(), "size": total, "content_type": None}
