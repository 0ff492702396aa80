"""Scripted peers for the exporters' tests: they answer what the test says and
record what they received (headers, body, arrival time).

    peer = HttpPeer()                      # http://127.0.0.1:<free port>
    peer.script(Answer(429, headers={"Retry-After": "2"}), Answer(200))
    peer.start() ... peer.wait_requests(2) ... peer.stop()

    gpeer = GrpcPeer()                     # a gRPC server taking any method
    gpeer.script(GrpcAnswer(grpc.StatusCode.UNAVAILABLE, "busy", details=rpc_status(14, "busy", 2.0)))

An answer is consumed per request in order; when the script is empty the
`default` answer is given (200 / OK with an empty body). A callable may be
scripted instead of an answer: it gets the Request and returns an answer.

TLS: make_certs(dir) writes a CA, a server certificate for 127.0.0.1 and
localhost signed by it, a wrong one (self-signed, same names), and a client
certificate signed by the CA (for mTLS), with the openssl command line.

Stable API (other tests import it): HttpPeer, GrpcPeer, Answer, GrpcAnswer,
Request, rpc_status, partial_success_response, make_certs, server_ssl_context.
"""
import gzip
import http.server
import os
import socket
import ssl
import subprocess
import threading
import time
from concurrent import futures

from harness import free_port, pb_ld, pb_put_varint, pb_vi


class Request:
    """What a peer received. headers: name -> value with lower-case names."""

    def __init__(self, method, path, headers, body, at):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body  # as sent (compressed when the client compressed)
        self.time = at    # time.monotonic() when the whole request had arrived

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def decoded(self):
        """The body with its Content-Encoding (gzip, zstd) undone."""
        enc = (self.header("content-encoding") or "").lower()
        if enc == "gzip":
            return gzip.decompress(self.body)
        if enc == "zstd":
            return subprocess.run(["zstd", "-d", "-c", "-q"], input=self.body, check=True,
                                  capture_output=True).stdout
        return self.body


class Answer:
    """An HTTP answer: status, headers, body, and a delay before answering (seconds)."""

    def __init__(self, status=200, body=b"", headers=None, delay=0.0, content_type=None):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        if content_type:
            self.headers["Content-Type"] = content_type
        self.delay = delay


class GrpcAnswer:
    """A gRPC answer: code None/OK answers `response` (raw bytes); otherwise the call
    is aborted with code and message, and `details` (bytes) sent as the trailing
    grpc-status-details-bin."""

    def __init__(self, code=None, message="", details=None, response=b"", delay=0.0):
        self.code = code
        self.message = message
        self.details = details
        self.response = response
        self.delay = delay


class _Script:
    def __init__(self, default):
        self.lock = threading.Condition()
        self.answers = []
        self.default = default
        self.requests = []

    def next(self, req):
        with self.lock:
            self.requests.append(req)
            self.lock.notify_all()
            a = self.answers.pop(0) if self.answers else self.default
        return a(req) if callable(a) else a

    def wait(self, n, timeout):
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("peer got %d requests, expected %d within %ss"
                                         % (len(self.requests), n, timeout))
                self.lock.wait(left)
            return list(self.requests)


class _Peer:
    def script(self, *answers):
        """Appends answers, consumed one per request."""
        with self._s.lock:
            self._s.answers.extend(answers)
        return self

    def set_default(self, answer):
        with self._s.lock:
            self._s.default = answer

    @property
    def requests(self):
        with self._s.lock:
            return list(self._s.requests)

    def wait_requests(self, n, timeout=30):
        """Blocks until n requests arrived in all; returns every request so far."""
        return self._s.wait(n, timeout)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


# ---- HTTP ---------------------------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the exporters' clients expect

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _answer(self):
        body = self._body()
        req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                      body, time.monotonic())
        a = self.server.peer._s.next(req)
        if a.delay:
            time.sleep(a.delay)
        try:
            self.send_response(a.status)
            for k, v in a.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(a.body)))
            self.end_headers()
            self.wfile.write(a.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout)

    do_POST = _answer
    do_PUT = _answer
    do_GET = _answer

    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up, a failed TLS handshake: not the test's business


class HttpPeer(_Peer):
    """An HTTP/1.1 peer on 127.0.0.1. ssl_context: a server SSLContext for https."""

    def __init__(self, port=None, ssl_context=None, default=None):
        self.port = port or free_port()
        self.ssl_context = ssl_context
        self._s = _Script(default or Answer(200))
        self._server = None
        self._thread = None

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.ssl_context else "http", self.port)

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.peer = self
        if self.ssl_context is not None:
            # The handshake happens in the handler thread (not in accept).
            self._server.socket = self.ssl_context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# ---- gRPC ---------------------------------------------------------------------------------

class GrpcPeer(_Peer):
    """A gRPC server on 127.0.0.1 answering every unary method from the script; request
    bodies are recorded as raw (decompressed) bytes, metadata with lower-case keys.
    credentials: grpc.ssl_server_credentials(...) for TLS."""

    def __init__(self, port=None, credentials=None, default=None):
        self.port = port or free_port()
        self.credentials = credentials
        self._s = _Script(default or GrpcAnswer())
        self._server = None

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def _handle(self, method):
        import grpc

        def unary(body, context):
            md = {}
            for k, v in context.invocation_metadata():
                md[k.lower()] = v
            req = Request("POST", method, md, body, time.monotonic())
            a = self._s.next(req)
            if a.delay:
                time.sleep(a.delay)
            if a.code is None or a.code == grpc.StatusCode.OK:
                return a.response
            if a.details is not None:
                context.set_trailing_metadata((("grpc-status-details-bin", a.details),))
            context.abort(a.code, a.message)

        return grpc.unary_unary_rpc_method_handler(unary)

    def start(self):
        import grpc

        peer = self

        class Generic(grpc.GenericRpcHandler):
            def service(self, details):
                return peer._handle(details.method)

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                   handlers=(Generic(),),
                                   options=(("grpc.so_reuseport", 0),))
        addr = "127.0.0.1:%d" % self.port
        if self.credentials is not None:
            bound = self._server.add_secure_port(addr, self.credentials)
        else:
            bound = self._server.add_insecure_port(addr)
        if bound != self.port:
            raise AssertionError("grpc peer cannot listen on %s" % addr)
        self._server.start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None


# ---- protobuf answers, written by hand from the .proto field numbers ----------------------

def rpc_status(code, message="", retry_delay=None, type_url="type.googleapis.com/google.rpc.RetryInfo"):
    """google.rpc.Status {code=1, message=2, details=3 Any{type_url=1, value=2}}; with a
    RetryInfo {retry_delay=1 Duration{seconds=1, nanos=2}} detail when retry_delay
    (seconds, float) is given."""
    out = b""
    if code:
        out += pb_vi(1, code)
    if message:
        out += pb_ld(2, message.encode())
    if retry_delay is not None:
        seconds = int(retry_delay)
        nanos = int(round((retry_delay - seconds) * 1e9))
        duration = (pb_vi(1, seconds) if seconds else b"") + (pb_vi(2, nanos) if nanos else b"")
        retry_info = pb_ld(1, duration)
        out += pb_ld(3, pb_ld(1, type_url.encode()) + pb_ld(2, retry_info))
    return out


def partial_success_response(rejected, message=""):
    """ExportProfilesServiceResponse {partial_success=1 {rejected_profiles=1, error_message=2}}."""
    inner = (pb_vi(1, rejected) if rejected else b"") + (pb_ld(2, message.encode()) if message else b"")
    return pb_ld(1, inner)


# ---- TLS ----------------------------------------------------------------------------------

def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(directory):
    """Writes ca.pem/ca.key, server.pem/server.key (127.0.0.1, localhost, signed by the
    CA), wrong.pem/wrong.key (self-signed, same names), other.pem/other.key (signed by
    the CA for the name other.example only), client.pem/client.key (signed by the CA);
    returns {name: path}."""
    d = directory
    ext = os.path.join(d, "san.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    other_ext = os.path.join(d, "other.cnf")
    with open(other_ext, "w") as f:
        f.write("subjectAltName=DNS:other.example\n"
                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    client_ext = os.path.join(d, "client.cnf")
    with open(client_ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=flamecol test CA", cwd=d)
    for name, cn, extfile in (("server", "127.0.0.1", ext), ("other", "other.example", other_ext),
                              ("client", "flamecol client", client_ext)):
        _openssl("req", *key, "-keyout", name + ".key", "-out", name + ".csr",
                 "-subj", "/CN=" + cn, cwd=d)
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", extfile, cwd=d)
    _openssl("req", "-x509", *key, "-keyout", "wrong.key", "-out", "wrong.pem", "-days", "2",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
             cwd=d)
    names = ["ca", "server", "other", "client", "wrong"]
    out = {}
    for n in names:
        out[n + ".pem"] = os.path.join(d, n + ".pem")
        out[n + ".key"] = os.path.join(d, n + ".key")
    return out


def server_ssl_context(cert, key, client_ca=None):
    """A server SSLContext; with client_ca, a client certificate signed by it is required."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    return ctx


def read(path):
    with open(path, "rb") as f:
        return f.read()


def port_closed(port):
    """True when nothing listens on 127.0.0.1:port."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0
