"""A local stand-in for storage.googleapis.com and huggingface.co, for albert_tf.sources tests.

`HubServer` (HTTP/1.1, threads, 127.0.0.1, free ports) answers as the real hosts do, so urllib
and huggingface_hub run against it unchanged:

* GCS's XML API, as for `/albert_models/<name>.tar.gz`: Content-Type application/x-tar (what
  gsutil stores for a .tar.gz: `mimetypes` says x-tar + *encoding* gzip and gsutil keeps the type,
  so the gzip bytes arrive undecoded), Content-Length, ETag "<md5 hex>", Last-Modified,
  Cache-Control/Expires, x-goog-generation/-metageneration/-stored-content-*/-storage-class, and
  x-goog-hash as two header lines, `crc32c=<b64>` then `md5=<b64>`, as `curl -I` shows them
  (urllib's `headers.get` sees the first only, `get_all` both; requests and httpx join them with
  ", "; `hash_header="joined"` sends one line). Range `bytes=N-|N-M|-S`: 206 + Content-Range,
  past the end 416. If-None-Match: 304. A missing object: 404 application/xml NoSuchKey.
* The Hub's `/<repo_id>/resolve/<revision>/<path>` (revision: branch, tag or 40-hex commit,
  URL-quoted), as huggingface_hub 0.3x and 2.x read it (file_download.get_hf_file_metadata,
  http_get; utils/_http.hf_raise_for_status). Every answer has X-Repo-Commit (without it:
  FileMetadataError). A git file: 200, ETag "<git blob sha1>", Content-Length. An LFS file
  (*.safetensors, *.bin, *.model, ... or > 10 MB): 302 to the CDN with X-Linked-Etag
  "<sha256>" and X-Linked-Size, which the client reads off the 302 itself: it follows a HEAD
  redirect only to the same origin (2.x) or a relative one (0.3x), so the CDN listens on another
  port (`cdn_url`), as cdn-lfs.hf.co is another host. X-Error-Code decides the exception: 401
  RepoNotFound (what anonymous callers get for a missing repo) -> RepositoryNotFoundError; 404
  RevisionNotFound -> RevisionNotFoundError; 404 EntryNotFound (with X-Repo-Commit: the client
  caches `.no_exist`) -> errors.RemoteEntryNotFoundError, an errors.EntryNotFoundError. A moved
  repo (`add_hf_redirect`): 307 to a relative Location. No Xet headers (plain HTTP download).

Pointing huggingface_hub here: it reads HF_ENDPOINT once, at import, into constants.ENDPOINT and
constants.HUGGINGFACE_CO_URL_TEMPLATE (and utils/_http's token-safe origins), so setting it later
in the same process does nothing; pass `endpoint=server.url` to hf_hub_download (it swaps the
default endpoint in the URL), or set HF_ENDPOINT in a subprocess's environment. With a commit as
revision and the file cached it opens no connection. A 5xx/429 on HEAD gets one retry round
(sleeps 1, 2, 4, 8, 8 s); a body cut short is resumed after 1 s with `Range: bytes=<written>-`,
where `written` counts whole DOWNLOAD_CHUNK_SIZE (10 MB) chunks only.

Faults, `fault(path, kind, times=None)`: "404"/"500" (the host's own error) and "html" (200
text/html sign-in page) on HEAD and GET; "truncate" (full Content-Length, half the body, then the
connection closes) and "slow" (the body in 10 chunks, `delay` s apart) on bodies; for an LFS
file's resolve path they apply at the CDN, where its bytes come from.
"""

import base64
import email.utils
import hashlib
import http.server
import os
import re
import threading
import time
from urllib.parse import parse_qs, quote, unquote, urlsplit

NO_SUCH_KEY = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchKey</Code>"
    b"<Message>The specified key does not exist.</Message></Error>"
)
GCS_INTERNAL_ERROR = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InternalError</Code>"
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)
HUB_INTERNAL_ERROR = (
    b'{"error":"Internal Error - We\'re working hard to fix this as soon as possible!"}'
)
SIGN_IN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in</title></head><body><h1>Sign in</h1>"
    b"<p>Sign in to continue to this network.</p><form method='post' action='/login'>"
    b"<input name='user'><input type='password' name='password'><button>Sign in</button>"
    b"</form></body></html>"
)
LFS_SUFFIXES = (".safetensors", ".bin", ".model", ".h5", ".msgpack", ".ot", ".onnx", ".pt")
LFS_MIN_BYTES = 10 * 1024 * 1024  # the Hub refuses plain git files over 10 MB
STATUS_FAULTS, BODY_FAULTS = ("404", "500", "html"), ("truncate", "slow")
TEXT = "text/plain; charset=utf-8"
XML = "application/xml; charset=UTF-8"


def crc32c_python(data):
    """CRC-32C (Castagnoli, reflected 0x82F63B78), bit by bit: for small inputs only."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def crc32c(data):
    try:
        import google_crc32c
    except ImportError:
        return crc32c_python(data)
    return google_crc32c.value(bytes(data))


def git_sha1(data):
    """The git blob id of `data` (the Hub's ETag of a file kept in git)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(filename, data):
    return filename.endswith(LFS_SUFFIXES) or len(data) > LFS_MIN_BYTES


def _ranged(request, data, headers):
    """(status, body, headers) of `data` under the request's Range header (one range)."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", (request.headers.get("Range") or "").strip())
    if not match or not (match[1] or match[2]):
        return 200, data, headers  # no Range, or one the hosts ignore
    size = len(data)
    start, end = (
        (int(match[1]), int(match[2] or size)) if match[1] else (size - int(match[2]), size)
    )
    start, end = max(start, 0), min(end, size - 1)
    if start >= size or start > end:
        return 416, b"", {**headers, "Content-Range": f"bytes */{size}"}
    return 206, data[start : end + 1], {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes

    def log_message(self, *args):
        pass

    def version_string(self):  # the Server header
        return "AmazonS3" if self.server.cdn else "UploadServer"

    def do_GET(self):
        self.server.hub._serve(self)

    def do_HEAD(self):
        self.server.hub._serve(self)


class _Listener(http.server.ThreadingHTTPServer):
    daemon_threads, block_on_close = True, False
    request_queue_size = 128  # socketserver's 5 drops concurrent connects (1 s SYN retry)


class HubServer:
    """storage.googleapis.com and huggingface.co (+ its CDN) on 127.0.0.1; a context manager."""

    def __init__(self, slow_delay=0.02):
        self.slow_delay = slow_delay
        self._lock = threading.Lock()
        self._log, self._faults, self._objects = [], {}, {}
        self._repos, self._moved, self._blobs = {}, {}, {}
        self._servers = []
        for cdn in (False, True):
            server = _Listener(("127.0.0.1", 0), _Handler)
            server.hub, server.cdn = self, cdn
            threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
            self._servers.append(server)
        self.url, self.cdn_url = (f"http://127.0.0.1:{s.server_address[1]}" for s in self._servers)

    def add_file(
        self, url_path, path_or_bytes, content_type="application/octet-stream", headers=None
    ):
        """Serves bytes (or a file's) at `url_path`: ETag (md5), Last-Modified, Range; the path."""
        data, modified = path_or_bytes, time.time()
        if not isinstance(data, (bytes, bytearray)):
            with open(path_or_bytes, "rb") as f:
                data, modified = f.read(), os.path.getmtime(path_or_bytes)
        base = {
            "Content-Type": content_type,
            "ETag": f'"{hashlib.md5(data).hexdigest()}"',
            "Last-Modified": email.utils.formatdate(modified, usegmt=True),
            "Accept-Ranges": "bytes",
        }
        with self._lock:
            self._objects[url_path] = (bytes(data), {**base, **(headers or {})})
        return url_path

    def add_release(self, name, archive_path, hash_header="split"):
        """Serves `archive_path` as GCS serves albert_models/<name>.tar.gz; returns its URL."""
        with open(archive_path, "rb") as f:
            data = f.read()
        crc = base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()
        hashes = [f"crc32c={crc}", f"md5={base64.b64encode(hashlib.md5(data).digest()).decode()}"]
        modified = os.path.getmtime(archive_path)
        goog = {
            "x-goog-hash": hashes if hash_header == "split" else ",".join(hashes),
            "Last-Modified": email.utils.formatdate(modified, usegmt=True),
            "x-goog-generation": str(int(modified * 1e6)),
            "x-goog-metageneration": "1",
            "x-goog-stored-content-encoding": "identity",
            "x-goog-stored-content-length": str(len(data)),
            "x-goog-storage-class": "STANDARD",
            "Cache-Control": "public, max-age=3600",
            "Expires": email.utils.formatdate(time.time() + 3600, usegmt=True),
        }
        path = self.add_file(f"/albert_models/{name}.tar.gz", data, "application/x-tar", goog)
        return self.url + path

    def add_hf_repo(self, repo_id, directory, revision="main", commit=None):
        """Serves the files under `directory` as `repo_id` at `revision` and at its commit (40 hex;
        by default a digest of the repo id and the files); returns the commit."""
        files = {}
        for root, dirs, names in os.walk(directory):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    files[os.path.relpath(f.name, directory).replace(os.sep, "/")] = f.read()
        if commit is None:
            digest = hashlib.sha1(repo_id.encode())
            for name in sorted(files):
                digest.update(f"{name}\0{git_sha1(files[name])}\n".encode())
            commit = digest.hexdigest()
        with self._lock:
            repo = self._repos.setdefault(repo_id, {"refs": {}, "commits": {}})
            repo["refs"][revision], repo["commits"][commit] = commit, files
            self._blobs.update(
                (hashlib.sha256(d).hexdigest(), d) for n, d in files.items() if is_lfs(n, d)
            )
        return commit

    def add_hf_redirect(self, old_repo_id, new_repo_id):
        """A renamed repo: `/<old>/resolve/...` answers 307 to `/<new>/resolve/...`."""
        with self._lock:
            self._moved[old_repo_id] = new_repo_id

    def fault(self, url_path, kind, times=None, delay=None):
        """Makes `url_path` fail as `kind` ("truncate", "html", "404", "500", "slow") for the next
        `times` requests it applies to (None: until `clear_faults`)."""
        if kind not in STATUS_FAULTS + BODY_FAULTS:
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            delay = self.slow_delay if delay is None else delay
            self._faults[url_path] = {"kind": kind, "times": times, "delay": delay}

    def clear_faults(self):
        with self._lock:
            self._faults.clear()

    def _take_fault(self, paths, kinds):
        with self._lock:
            for path in paths:
                fault = self._faults.get(path)
                if fault and fault["kind"] in kinds and fault["times"] != 0:
                    if fault["times"] is not None:
                        fault["times"] -= 1
                    return dict(fault)
        return None

    @property
    def requests(self):
        """[(method, path with query, {header: value})], oldest first (a copy)."""
        with self._lock:
            return list(self._log)

    def count(self, path_substring=None):
        """How many requests (whose path contains `path_substring`) arrived."""
        with self._lock:
            return sum(1 for _, path, _ in self._log if (path_substring or "") in path)

    def reset_counts(self):
        with self._lock:
            self._log.clear()

    def stop(self):
        servers, self._servers = self._servers, []
        for server in servers:
            server.shutdown()
            server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _serve(self, request):
        url = urlsplit(request.path)
        with self._lock:
            self._log.append((request.command, request.path, dict(request.headers)))
            entry = self._objects.get(url.path)
        hub = "/resolve/" in url.path and not request.server.cdn
        try:
            kind = (self._take_fault([url.path], STATUS_FAULTS) or {}).get("kind")
            if kind == "html":
                self._send(request, 200, SIGN_IN_PAGE, {"Content-Type": "text/html; charset=utf-8"})
            elif hub and kind == "404":
                self._hub_error(request, 404, "EntryNotFound", "Entry not found")
            elif hub and kind == "500":
                self._send(request, 500, HUB_INTERNAL_ERROR, {"Content-Type": "application/json"})
            elif kind:
                body = NO_SUCH_KEY if kind == "404" else GCS_INTERNAL_ERROR
                self._send(request, int(kind), body, {"Content-Type": XML})
            elif request.server.cdn:
                self._serve_blob(request, url)
            elif entry is not None:
                self._serve_object(request, url.path, *entry)
            elif hub:
                self._serve_hub(request, url)
            else:
                self._send(request, 404, NO_SUCH_KEY, {"Content-Type": XML})
        except (BrokenPipeError, ConnectionResetError):  # the client went away
            request.close_connection = True

    def _serve_object(self, request, path, data, headers):
        if request.headers.get("If-None-Match") == headers["ETag"]:
            return self._send(request, 304, b"", {"ETag": headers["ETag"]})
        self._send_data(request, data, headers, [path])

    def _hub_error(self, request, status, code, message, commit=None):
        headers = {"Content-Type": TEXT, "X-Error-Code": code, "X-Error-Message": message}
        self._send(request, status, message.encode(), {**headers, "X-Repo-Commit": commit})

    def _serve_hub(self, request, url):
        parts = url.path.split("/")
        at = parts.index("resolve", 1)
        repo_id, revision = "/".join(parts[1:at]), unquote("/".join(parts[at + 1 : at + 2]))
        filename = unquote("/".join(parts[at + 2 :]))
        with self._lock:
            moved, repo = self._moved.get(repo_id), self._repos.get(repo_id)
        if moved:
            location = f"/{moved}/{'/'.join(parts[at:])}" + (f"?{url.query}" if url.query else "")
            body = f"Temporary Redirect. Redirecting to {location}".encode()
            return self._send(request, 307, body, {"Location": location, "Content-Type": TEXT})
        if repo is None:
            return self._hub_error(request, 401, "RepoNotFound", "Invalid username or password.")
        commit = repo["refs"].get(revision) or (revision if revision in repo["commits"] else None)
        if commit is None:
            return self._hub_error(request, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        data = repo["commits"][commit].get(filename)
        if data is None:
            return self._hub_error(request, 404, "EntryNotFound", "Entry not found", commit)
        base = os.path.basename(filename)
        disposition = f"inline; filename*=UTF-8''{quote(base)}; filename=\"{base}\";"
        headers = {
            "X-Repo-Commit": commit,
            "Accept-Ranges": "bytes",
            "Vary": "Origin, Accept",
            "Content-Disposition": disposition,
            "X-Request-Id": f"Root=1-{hashlib.md5(url.path.encode()).hexdigest()[:24]}",
        }
        if not is_lfs(filename, data):
            headers["ETag"] = f'"{git_sha1(data)}"'
            headers["Content-Type"] = "application/json" if filename.endswith(".json") else TEXT
            return self._send_data(request, data, headers, [url.path])
        sha = hashlib.sha256(data).hexdigest()
        pointer = (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n"
        )
        location = (
            f"{self.cdn_url}/repos/{sha[:2]}/{sha[2:4]}/{sha}?response-content-disposition="
            f"{quote(disposition)}&Expires=4102444800&origin={quote(url.path)}"
        )
        headers.update(Location=location, ETag=f'"{git_sha1(pointer.encode())}"')
        headers.update({"Content-Type": TEXT, "X-Linked-Size": str(len(data))})
        headers["X-Linked-Etag"] = f'"{sha}"'
        self._send(request, 302, f"Found. Redirecting to {location}".encode(), headers)

    def _serve_blob(self, request, url):
        query = parse_qs(url.query)
        with self._lock:
            data = self._blobs.get(url.path.rsplit("/", 1)[-1])
        if data is None:
            return self._send(request, 403, b"<Error><Code>AccessDenied</Code></Error>")
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{hashlib.md5(data).hexdigest()}"',
            "X-Cache": "Miss from cloudfront",
            "Content-Disposition": query.get("response-content-disposition", [""])[0],
        }
        self._send_data(request, data, headers, [url.path, *query.get("origin", [])])

    def _send_data(self, request, data, headers, fault_paths):
        status, body, headers = _ranged(request, data, headers)
        fault = None if request.command == "HEAD" else self._take_fault(fault_paths, BODY_FAULTS)
        self._send(request, status, body, headers, fault)

    def _send(self, request, status, body, headers=None, fault=None):
        """The answer; a HEAD gets the headers (Content-Length of the body) only."""
        request.send_response(status)
        for name, values in (headers or {"Content-Type": XML}).items():
            for value in values if isinstance(values, list) else [values] if values else []:
                request.send_header(name, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command == "HEAD" or not body:
            return
        if fault and fault["kind"] == "truncate":
            request.wfile.write(body[: len(body) // 2])
            request.close_connection = True  # the client sees the body end early
        elif fault and fault["kind"] == "slow":
            step = -(-len(body) // 10)
            for start in range(0, len(body), step):
                request.wfile.write(body[start : start + step])
                time.sleep(fault["delay"])
        else:
            request.wfile.write(body)
