"""A local GCS endpoint that TensorFlow's gs:// filesystem accepts, for tests.

TensorFlow's GCS filesystem (tsl/platform/cloud) always talks HTTPS to
www.googleapis.com (and storage.googleapis.com) with a bearer token; it has no
emulator-host variable. What it does honour:

* GOOGLE_AUTH_TOKEN_FOR_TESTING - a fixed bearer token, so no OAuth and no
  metadata-server request (google_auth_provider.cc);
* CURL_CA_BUNDLE - the CA file for every request (curl_http_request.cc);
* https_proxy - libcurl's own proxy variable (TensorFlow sets no CURLOPT_PROXY).

So `python -m tests.gcs_support PORT_FILE BUCKET` starts, in one process, the
gcp-storage-emulator (PyPI, in memory, with BUCKET) serving HTTPS with a certificate for
the Google hosts signed by a throw-away CA, and an HTTP CONNECT proxy on 127.0.0.1 that
sends every tunnel to it. `GcsEmulator` runs that process and gives the environment a
TensorFlow process needs. Nothing leaves 127.0.0.1.

Where the emulator and TensorFlow's client disagree, the emulator is patched here (each
patch says why): https upload Locations, empty uploads, chunked bodies sent with a
Content-Length, the bucket's storageLayout (asked before a directory rename) and
"Expect: 100-continue" (else each upload waits a second).
"""

import datetime
import functools
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")


def emulator_available():
    """Whether the gcp-storage-emulator and cryptography packages import."""
    try:
        import cryptography  # noqa: F401
        import gcp_storage_emulator  # noqa: F401
    except ImportError:
        return False
    return True


def _write_certificates(directory):
    """Writes ca.pem (trust anchor) and server.pem/server.key for the Google hosts."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=7)

    def name(common_name):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("albert_tf test CA"))
        .issuer_name(name("albert_tf test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(GOOGLE_HOSTS[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_HOSTS]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = {n: os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key")}
    with open(paths["ca.pem"], "wb") as f:
        f.write(ca_cert.public_bytes(pem))
    with open(paths["server.pem"], "wb") as f:
        f.write(cert.public_bytes(pem))
    with open(paths["server.key"], "wb") as f:
        f.write(
            key.private_bytes(
                pem,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return paths


def _pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve_proxy(listener, target_port):
    """HTTP CONNECT proxy: every tunnel goes to 127.0.0.1:target_port."""

    def handle(client):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        request_line = head.split(b"\r\n", 1)[0].split()
        host = request_line[1].rsplit(b":", 1)[0].decode() if len(request_line) > 1 else ""
        if request_line[0] != b"CONNECT" or host not in GOOGLE_HOSTS:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", target_port))
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)

    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(client,), daemon=True).start()


def _patch_emulator():
    """Gaps between gcp-storage-emulator and TensorFlow's GCS client, patched in this process.

    The emulator builds resumable-upload Locations as http://Host; ours is HTTPS.
    """
    from urllib.parse import urlparse

    from gcp_storage_emulator import server, settings

    original = server.Request.__init__

    @functools.wraps(original)
    def init(self, request_handler, method):
        original(self, request_handler, method)
        if self._base_url.startswith("http://"):
            self._base_url = "https://" + self._base_url[len("http://") :]
            self._full_url = self._base_url + self._path
            self._parsed_url = urlparse(self._full_url)

    server.Request.__init__ = init

    # An empty body is None to the emulator; an empty object (a directory
    # marker, an empty file) is a media or resumable upload of b"".
    data = server.Request.data.fget

    def data_or_empty(self):
        value = data(self)
        upload = "upload_id" in self._query or self._query.get("uploadType") == ["media"]
        return b"" if value is None and upload else value

    server.Request.data = property(data_or_empty)

    # TensorFlow's uploads send both Content-Length and Transfer-Encoding: chunked (curl
    # chunks a PUT from a file); HTTP/1.1 says the chunked encoding wins (RFC 9112 6.3),
    # the emulator reads Content-Length bytes of the chunked stream.
    read_raw_data = server._read_raw_data

    def read_chunked_first(request_handler):
        headers = request_handler.headers
        if (headers.get("Transfer-Encoding") or "").lower() == "chunked":
            length = headers.get("Content-Length")
            del headers["Content-Length"]
            try:
                return read_raw_data(request_handler)
            finally:
                if length is not None:
                    headers["Content-Length"] = length
        return read_raw_data(request_handler)

    server._read_raw_data = read_chunked_first

    # TensorFlow asks a bucket's storage layout before renaming a "directory" (hierarchical
    # namespace buckets rename folders natively); the emulator has no such route (404).
    def storage_layout(request, response, storage, *args, **kwargs):
        name = request.params.get("bucket_name")
        if name not in storage.buckets:
            response.status = 404
            return
        response.json(
            {
                "kind": "storage#storageLayout",
                "bucket": name,
                "location": "US",
                "locationType": "multi-region",
                "hierarchicalNamespace": {"enabled": False},
            }
        )

    route = r"^{}/b/(?P<bucket_name>[-.\w]+)/storageLayout$".format(settings.API_ENDPOINT)
    server.HANDLERS = ((route, {server.GET: storage_layout}), *server.HANDLERS)


def serve(port_file, bucket):
    """Runs the emulator and the proxy; writes {"proxy", "ca"} to port_file."""
    from http.server import ThreadingHTTPServer

    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import buckets
    from gcp_storage_emulator.storage import Storage

    _patch_emulator()
    paths = _write_certificates(os.path.dirname(os.path.abspath(port_file)))
    storage = Storage(use_memory_fs=True)
    buckets.create_bucket(bucket, storage)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self):
            # The handshake happens in the request thread, not in accept().
            client, address = self.socket.accept()
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small writes
            return context.wrap_socket(
                client, server_side=True, do_handshake_on_connect=False
            ), address

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(paths["server.pem"], paths["server.key"])

    class Handler(server.RequestHandler):
        def parse_request(self):
            # curl sends "Expect: 100-continue" with an upload and waits a second for the
            # answer, which http.server gives only to HTTP/1.1 (the emulator speaks 1.0).
            parsed = super().parse_request()
            if parsed and self.headers.get("Expect", "").lower() == "100-continue":
                self.send_response_only(100)
                self.end_headers()
            return parsed

    httpd = Server(("127.0.0.1", 0), functools.partial(Handler, storage))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(
        target=_serve_proxy, args=(listener, httpd.server_address[1]), daemon=True
    ).start()
    with open(port_file + ".tmp", "w") as f:
        json.dump({"proxy": listener.getsockname()[1], "ca": paths["ca.pem"]}, f)
    os.replace(port_file + ".tmp", port_file)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


class GcsEmulator:
    """Starts `serve` in a subprocess; `env()` is what a TensorFlow process needs."""

    def __init__(self, directory, bucket="albert-test"):
        self.directory = str(directory)
        self.bucket = bucket
        self.process = None
        self.proxy_port = None
        self.ca_file = None

    def start(self, timeout=30):
        port_file = os.path.join(self.directory, "gcs_emulator.json")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=root)
        if os.path.exists(port_file):
            os.remove(port_file)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.gcs_support", port_file, self.bucket],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.directory, "gcs_emulator.log"), "w"),
        )
        deadline = time.monotonic() + timeout
        while not os.path.exists(port_file):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the GCS emulator did not start; see gcs_emulator.log")
            time.sleep(0.05)
        with open(port_file) as f:
            info = json.load(f)
        self.proxy_port, self.ca_file = info["proxy"], info["ca"]
        return self

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def env(self):
        """Variables that send TensorFlow's gs:// requests to this emulator."""
        proxy = "http://127.0.0.1:{}".format(self.proxy_port)
        return {
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token",
            "NO_GCE_CHECK": "true",
            "CURL_CA_BUNDLE": self.ca_file,
            "https_proxy": proxy,
            "HTTPS_PROXY": proxy,
            "no_proxy": "",
            "NO_PROXY": "",
        }

    def __enter__(self):
        return self.start()

    def __exit__(self, *args):
        self.stop()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
