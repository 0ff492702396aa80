"""TLS on every listener (issue 16, the `tls` half): the pprof receiver and
the store's query API on one HTTPS port, the otlp receiver's gRPC and HTTP servers
and the telemetry endpoint, with certificates made by `openssl` in the test.
Clients are Python's ssl (OpenSSL) and grpcio; expected totals are the hand
sums of the folded pushes and hand-written pprof profiles sent."""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import unittest
import urllib.parse

import grpc

from harness import (scratch_dir, BIN, Collector, free_port, pb_ld, pb_packed, pb_vi, validate_config)

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
REFUSED = "refused"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """Two CAs; server certificates for 127.0.0.1/localhost (serials 1001, 1002); client
    certificates: good (2001), expired (2002), from the other CA (3001)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "3",
                "-subj", "/CN=flamecol test " + ca, cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def leaf(name, ca, serial, days, ext=None):
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name,
                cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
                "-set_serial", str(serial), "-days", str(days), "-out", name + ".crt",
                *(["-extfile", "server.ext"] if ext else []), cwd=d)

    leaf("server", "ca", 1001, 3, ext=True)
    leaf("server2", "ca", 1002, 3, ext=True)
    leaf("other-server", "other-ca", 4001, 3, ext=True)
    leaf("client", "ca", 2001, 3)
    leaf("expired-client", "ca", 2002, -1)
    leaf("other-client", "other-ca", 3001, 3)
    return lambda name: os.path.join(d, name)


PKI_DIR = scratch_dir("flamecol-tls-")
PKI = make_pki(PKI_DIR)


def context(client=None, ca="ca", max_version=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(PKI(ca + ".crt"))
    if client:
        ctx.load_cert_chain(PKI(client + ".crt"), PKI(client + ".key"))
    if max_version:
        ctx.maximum_version = max_version
    return ctx


def https(port, method, path, body=None, headers=None, ctx=None):
    """(status, body) over TLS, or REFUSED when the handshake or the connection is refused."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx or context(), timeout=10)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return REFUSED, b""
    finally:
        conn.close()


def plaintext_status(port, method, path, body=None, headers=None):
    """The status a plaintext HTTP request to port gets, or REFUSED when it gets none."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body, headers or {})
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return REFUSED
    finally:
        conn.close()


def curl_status(port, path, data=None, client=None, ca="ca", scheme="https"):
    """The status Debian's curl gets (REFUSED when the handshake or connection fails),
    trusting ca and presenting client's certificate when given; data is POSTed."""
    cmd = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
           "--cacert", PKI(ca + ".crt")]
    if client:
        cmd += ["--cert", PKI(client + ".crt"), "--key", PKI(client + ".key")]
    if data is not None:
        cmd += ["--data-binary", "@-"]
    r = subprocess.run(cmd + ["%s://127.0.0.1:%d%s" % (scheme, port, path)], input=data,
                       capture_output=True)
    code = r.stdout.decode().strip()
    return REFUSED if r.returncode != 0 or code in ("", "000") else int(code)


def peer_serial(port, alpn=None):
    """The serial number of the certificate the server shows on a new connection."""
    ctx = context()
    if alpn:
        ctx.set_alpn_protocols([alpn])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            der = s.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                         capture_output=True, check=True).stdout.decode()
    return int(out.strip().split("=")[1], 16)


def ingest_path(app, text):
    """/ingest of text (folded lines) as app's alloc_objects, which render_total reads."""
    q = urllib.parse.urlencode({"name": app + ".alloc_objects", "format": "lines" if "\n" not in text
                                else "folded", "from": "1700000000", "until": "1700000010"})
    return "/ingest?" + q


def ingest_folded(port, app, text, ctx=None):
    return https(port, "POST", ingest_path(app, text), text.encode(), ctx=ctx)


def render_total(port, service, ctx=None):
    """numTicks of service's alloc_objects profiles, over every profile type the store lists
    for them (a folded push and a converted pprof may name the type differently)."""
    status, body = https(port, "GET", "/pyroscope/label-values?label=__profile_type__", ctx=ctx)
    assert status == 200, (status, body)
    total = 0
    for t in json.loads(body):
        if t.split(":")[1:3] != ["alloc_objects", "count"]:
            continue
        q = urllib.parse.urlencode({"query": '%s{service_name="%s"}' % (t, service), "from": "0",
                                    "until": "now"})
        status, body = https(port, "GET", "/pyroscope/render?" + q, ctx=ctx)
        assert status == 200, (status, body)
        total += json.loads(body)["flamebearer"]["numTicks"]
    return total


def hand_pprof(stacks):
    """A pprof Profile written from the .proto by hand: one sample type (objects/count), one
    sample per (frames, value), leaf first."""
    strings = ["", "alloc_objects", "count"]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)

    funcs, out = {}, b""
    for frames, value in stacks:
        locs = []
        for name in frames:
            if name not in funcs:
                funcs[name] = len(funcs) + 1
            locs.append(funcs[name])
        out += pb_ld(2, pb_packed(1, locs) + pb_packed(2, [value]))
    for name, fid in funcs.items():
        out += pb_ld(4, pb_vi(1, fid) + pb_ld(4, pb_vi(1, fid)))  # location id=fid, line{function_id}
        out += pb_ld(5, pb_vi(1, fid) + pb_vi(2, s(name)))  # function id, name
    head = pb_ld(1, pb_vi(1, 1) + pb_vi(2, 2))  # sample_type alloc_objects/count
    tail = b"".join(pb_ld(6, x.encode()) for x in strings)
    tail += pb_vi(9, 1700000000 * 10**9)
    return head + out + tail


def otlp_request(stacks, service):
    path = os.path.join(scratch_dir("flamecol-tls-pb-"), "p.pb")
    with open(path, "wb") as f:
        f.write(hand_pprof(stacks))
    return subprocess.run([BIN, "convert", "--to", "otlp", "--label", "service_name=" + service,
                           path], check=True, capture_output=True).stdout


def grpc_channel(port, client=None, ca="ca"):
    def read(name):
        with open(PKI(name), "rb") as f:
            return f.read()

    key = read(client + ".key") if client else None
    chain = read(client + ".crt") if client else None
    creds = grpc.ssl_channel_credentials(read(ca + ".crt"), key, chain)
    return grpc.secure_channel("127.0.0.1:%d" % port, creds)


def grpc_export(port, body, client=None, ca="ca"):
    """The response, or the status code of the failure."""
    with grpc_channel(port, client, ca) as ch:
        try:
            return ch.unary_unary(METHOD)(body, timeout=10)
        except grpc.RpcError as e:
            return e.code()


def otlp_http_export(port, body, ctx=None):
    """POST an OTLP request to the OTLP HTTP listener over TLS: (status, body) or REFUSED."""
    return https(port, "POST", "/v1development/profiles", body,
                 {"Content-Type": "application/x-protobuf"}, ctx=ctx)


def tls_block(cert="server", client_ca=None, min_version=None, reload=None, indent=6):
    """A `tls:` block indented by `indent`; cert: a name of the PKI or a path without .crt."""
    base = cert if "/" in cert else PKI(cert)
    lines = ["tls:", "  cert_file: %s.crt" % base, "  key_file: %s.key" % base]
    if client_ca:
        lines.append("  client_ca_file: %s" % PKI(client_ca + ".crt"))
    if min_version:
        lines.append('  min_version: "%s"' % min_version)
    if reload:
        lines.append("  reload_interval: %s" % reload)
    return "\n".join(" " * indent + l for l in lines)


PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
{pprof_tls}
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
{grpc_tls}
      http:
        endpoint: 127.0.0.1:{otlp}
{otlp_http_tls}
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
{query_tls}
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
{telemetry_tls}
"""


def start(http_tls=None, grpc_tls=None, telemetry_tls=None, ready_ctx=None, otlp_http_tls=None):
    """A collector on PIPELINE; *_tls: keyword arguments of tls_block (None = plaintext).
    The pprof receiver and the store's query API share the HTTP port and its tls block;
    the OTLP HTTP listener's port is c.otlp."""
    grpc_port, otlp_port = free_port(), free_port()
    text = (PIPELINE.replace("{pprof_tls}", tls_block(**http_tls, indent=4) if http_tls is not None else "")
            .replace("{query_tls}", tls_block(**http_tls, indent=6) if http_tls is not None else "")
            .replace("{grpc_tls}", tls_block(**grpc_tls, indent=8) if grpc_tls is not None else "")
            .replace("{telemetry_tls}",
                     tls_block(**telemetry_tls, indent=6) if telemetry_tls is not None else "")
            .replace("{otlp_http_tls}",
                     tls_block(**otlp_http_tls, indent=8) if otlp_http_tls is not None else "")
            .replace("{grpc}", str(grpc_port)).replace("{otlp}", str(otlp_port)))
    c = Collector(text)
    c.otlp = otlp_port
    try:
        if ready_ctx is None:
            c.wait_ready()
        else:
            deadline = time.monotonic() + 20
            while https(c.ports["metrics"], "GET", "/ready", ctx=ready_ctx)[0] != 200:
                assert c.proc.poll() is None, c.log()
                assert time.monotonic() < deadline, c.log()
                time.sleep(0.05)
    except BaseException:
        c.__exit__(None, None, None)  # never leave a collector behind
        raise
    return c, grpc_port


class TlsTest(unittest.TestCase):
    """Server TLS without client certificates, min_version 1.2 (the default)."""

    @classmethod
    def setUpClass(cls):
        cls.c, cls.grpc = start(http_tls={}, grpc_tls={}, otlp_http_tls={})
        cls.port = cls.c.ports["port"]

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def test_ingest_and_render_over_tls(self):
        status, body = ingest_folded(self.port, "tlsapp", "main;work 3\nmain;idle 1\nmain 2\n")
        self.assertEqual(status, 200, body)
        self.assertEqual(render_total(self.port, "tlsapp"), 3 + 1 + 2)

    def test_otlp_grpc_over_tls(self):
        body = otlp_request([(["leaf", "main"], 5), (["other", "main"], 7)], "tlsgrpc")
        self.assertEqual(grpc_export(self.grpc, body), b"")
        total = render_total(self.port, "tlsgrpc")
        self.assertEqual(total, 12)
        # A client that trusts only the other CA refuses our server (the client's own check).
        self.assertEqual(grpc_export(self.grpc, body, ca="other-ca"), grpc.StatusCode.UNAVAILABLE)

    def test_otlp_http_over_tls(self):
        body = otlp_request([(["leaf", "main"], 6), (["other", "main"], 8)], "tlsotlphttp")
        status, text = otlp_http_export(self.c.otlp, body)
        self.assertEqual(status, 200, text)
        self.assertEqual(render_total(self.port, "tlsotlphttp"), 14)
        # A client that trusts only the other CA refuses our server; plaintext gets nothing.
        self.assertEqual(otlp_http_export(self.c.otlp, body, ctx=context(ca="other-ca"))[0],
                         REFUSED)
        self.assertEqual(plaintext_status(self.c.otlp, "POST", "/v1development/profiles", body,
                                          {"Content-Type": "application/x-protobuf"}), REFUSED)
        self.assertEqual(render_total(self.port, "tlsotlphttp"), 14)  # stored once

    def test_curl(self):
        self.assertEqual(curl_status(self.port, ingest_path("curltls", "main;curl 5\n"),
                                     b"main;curl 5\n"), 200)
        self.assertEqual(render_total(self.port, "curltls"), 5)
        # curl refuses a server its CA did not sign; plain http:// to the TLS port gets nothing.
        self.assertEqual(curl_status(self.port, "/ready", ca="other-ca"), REFUSED)
        self.assertEqual(curl_status(self.port, ingest_path("curlplain", "x 1\n"), b"x 1\n",
                                     scheme="http"), REFUSED)
        self.assertEqual(render_total(self.port, "curlplain"), 0)

    def test_client_checks_the_server(self):
        self.assertEqual(https(self.port, "GET", "/ready", ctx=context(ca="other-ca"))[0], REFUSED)
        # TLS 1.2 is accepted by default.
        status, _ = https(self.port, "POST", "/ingest?name=v12.cpu", b"a 1\n",
                          ctx=context(max_version=ssl.TLSVersion.TLSv1_2))
        self.assertEqual(status, 200)

    def test_plaintext_to_tls_port_fails_and_serving_goes_on(self):
        self.assertEqual(plaintext_status(self.port, "POST", "/ingest?name=plain.cpu", b"a 1\n"), REFUSED)
        with socket.create_connection(("127.0.0.1", self.grpc), timeout=10) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0" * 64)
            s.settimeout(10)
            try:
                s.recv(100)
            except OSError:
                pass
        self.assertEqual(ingest_folded(self.port, "after-plain", "x;y 4\n")[0], 200)
        self.assertEqual(render_total(self.port, "after-plain"), 4)
        self.assertEqual(grpc_export(self.grpc, otlp_request([(["a"], 1)], "after-plain-grpc")),
                         b"")
        self.assertIsNone(self.c.proc.poll())


class MutualTlsTest(unittest.TestCase):
    """client_ca_file: client certificates required and verified; HTTP min_version 1.3;
    the telemetry endpoint over TLS too."""

    @classmethod
    def setUpClass(cls):
        cls.c, cls.grpc = start(http_tls={"client_ca": "ca", "min_version": "1.3"},
                                grpc_tls={"client_ca": "ca"}, telemetry_tls={},
                                ready_ctx=context(), otlp_http_tls={"client_ca": "ca"})
        cls.port = cls.c.ports["port"]

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def test_http_client_certificates(self):
        body = "main;mtls 9\n"
        self.assertEqual(ingest_folded(self.port, "nocert", body)[0], REFUSED)
        self.assertEqual(ingest_folded(self.port, "othercert", body,
                                       ctx=context("other-client"))[0], REFUSED)
        self.assertEqual(ingest_folded(self.port, "expired", body,
                                       ctx=context("expired-client"))[0], REFUSED)
        status, text = ingest_folded(self.port, "mtlsapp", body, ctx=context("client"))
        self.assertEqual(status, 200, text)
        self.assertEqual(render_total(self.port, "mtlsapp", ctx=context("client")), 9)
        # Only the one that presented the right certificate was stored.
        for app in ("nocert", "othercert", "expired"):
            self.assertEqual(render_total(self.port, "%s" % app, ctx=context("client")), 0)

    def test_curl_client_certificates(self):
        for app, client in (("curlnocert", None), ("curlexpired", "expired-client"),
                            ("curlother", "other-client")):
            self.assertEqual(curl_status(self.port, ingest_path(app, "a 1\n"), b"a 1\n",
                                         client=client), REFUSED, app)
        self.assertEqual(curl_status(self.port, ingest_path("curlmtls", "main;c 7\n"),
                                     b"main;c 7\n", client="client"), 200)
        self.assertEqual(render_total(self.port, "curlmtls", ctx=context("client")), 7)
        for app in ("curlnocert", "curlexpired", "curlother"):
            self.assertEqual(render_total(self.port, app, ctx=context("client")), 0)

    def test_min_version_13(self):
        status, _ = https(self.port, "GET", "/pyroscope/label-values?label=service_name",
                          ctx=context("client", max_version=ssl.TLSVersion.TLSv1_2))
        self.assertEqual(status, REFUSED)
        status, _ = https(self.port, "GET", "/pyroscope/label-values?label=service_name",
                          ctx=context("client", max_version=ssl.TLSVersion.TLSv1_3))
        self.assertEqual(status, 200)

    def test_grpc_client_certificates(self):
        body = otlp_request([(["f", "main"], 11)], "mtlsgrpc")
        self.assertEqual(grpc_export(self.grpc, body), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(grpc_export(self.grpc, body, client="other-client"),
                         grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(grpc_export(self.grpc, body, client="expired-client"),
                         grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(grpc_export(self.grpc, body, client="client"), b"")
        self.assertEqual(render_total(self.port, "mtlsgrpc", ctx=context("client")), 11)

    def test_otlp_http_client_certificates(self):
        body = otlp_request([(["g", "main"], 13)], "mtlsotlphttp")
        for client in (None, "other-client", "expired-client"):
            ctx = context(client) if client else context()
            self.assertEqual(otlp_http_export(self.c.otlp, body, ctx=ctx)[0], REFUSED, client)
        status, text = otlp_http_export(self.c.otlp, body, ctx=context("client"))
        self.assertEqual(status, 200, text)
        self.assertEqual(render_total(self.port, "mtlsotlphttp", ctx=context("client")), 13)

    def test_telemetry_over_tls(self):
        status, body = https(self.c.ports["metrics"], "GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn(b"flamecol_", body)
        self.assertEqual(plaintext_status(self.c.ports["metrics"], "GET", "/metrics"), REFUSED)


class ReloadTest(unittest.TestCase):
    def test_new_connections_get_the_new_certificate(self):
        d = scratch_dir("flamecol-tls-reload-")
        for f in ("crt", "key"):
            shutil.copy(PKI("server." + f), os.path.join(d, "live." + f))
        live = {"cert": os.path.join(d, "live"), "reload": "500ms"}
        c, grpc_port = start(http_tls=live, grpc_tls=live, otlp_http_tls=live)
        try:
            port = c.ports["port"]
            self.assertEqual(peer_serial(port), 1001)
            self.assertEqual(peer_serial(grpc_port, "h2"), 1001)
            self.assertEqual(peer_serial(c.otlp), 1001)
            self.assertEqual(grpc_export(grpc_port, otlp_request([(["a"], 1)], "r1")), b"")
            for f in ("crt", "key"):
                shutil.copy(PKI("server2." + f), os.path.join(d, "new." + f))
                os.replace(os.path.join(d, "new." + f), os.path.join(d, "live." + f))
            time.sleep(1.2)  # past reload_interval (no deadline is asserted)
            self.assertEqual(peer_serial(port), 1002)
            self.assertEqual(peer_serial(grpc_port, "h2"), 1002)
            self.assertEqual(peer_serial(c.otlp), 1002)
            self.assertEqual(otlp_http_export(c.otlp, otlp_request([(["a"], 5)], "reloaded-h"))[0],
                             200)
            self.assertEqual(render_total(port, "reloaded-h"), 5)
            self.assertEqual(ingest_folded(port, "reloaded", "a;b 2\n")[0], 200)
            self.assertEqual(grpc_export(grpc_port, otlp_request([(["a"], 3)], "reloaded-g")), b"")
            self.assertEqual(render_total(port, "reloaded-g"), 3)
        finally:
            self.assertEqual(c.stop(), 0, c.log())


class ConfigTest(unittest.TestCase):
    def test_validate_refuses_bad_blocks(self):
        base = ("receivers:\n  pprof:\n    endpoint: 127.0.0.1:0\n%s\nexporters:\n  nop:\n"
                "service:\n  pipelines:\n    profiles:\n      receivers: [pprof]\n"
                "      exporters: [nop]\n")
        rc, out, _ = validate_config(base % tls_block(min_version="1.1", indent=4))
        self.assertNotEqual(rc, 0)
        self.assertIn("min_version", out)
        rc, out, _ = validate_config(base % "    tls:\n      cert_file: %s" % PKI("server.crt"))
        self.assertNotEqual(rc, 0)
        self.assertIn("key_file", out)
        rc, out, _ = validate_config(base % tls_block(indent=4))
        self.assertEqual(rc, 0, out)
        grpc13 = ("receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: "
                  "127.0.0.1:0\n%s\nexporters:\n  nop:\nservice:\n  pipelines:\n    profiles:\n"
                  "      receivers: [otlp]\n      exporters: [nop]\n")
        rc, out, _ = validate_config(grpc13 % tls_block(min_version="1.3", indent=8))
        self.assertNotEqual(rc, 0)
        self.assertIn("min_version", out)

    def test_shared_endpoint_must_agree(self):
        c = Collector(PIPELINE.replace("{pprof_tls}", tls_block(indent=4))
                      .replace("{query_tls}", "").replace("{grpc_tls}", "")
                      .replace("{telemetry_tls}", "").replace("{otlp_http_tls}", "")
                      .replace("{grpc}", str(free_port())).replace("{otlp}", str(free_port())))
        rc = c.proc.wait(timeout=30)
        c.stderr.close()
        self.assertNotEqual(rc, 0)
        log = c.log()
        self.assertIn("pprof", log)
        self.assertIn("store", log)
        self.assertIn("tls", log)

    def test_non_loopback_without_tls_warns(self):
        text = PIPELINE.replace("127.0.0.1:{port}", "0.0.0.0:{port}")
        for k in ("{pprof_tls}", "{query_tls}", "{grpc_tls}", "{telemetry_tls}", "{otlp_http_tls}"):
            text = text.replace(k, "")
        c = Collector(text.replace("{grpc}", str(free_port())).replace("{otlp}", str(free_port())))
        c.wait_ready()
        self.assertEqual(c.stop(), 0)
        warnings = [l for l in c.log().splitlines() if "non-loopback" in l]
        self.assertEqual(len(warnings), 1, c.log())
        self.assertIn("0.0.0.0:%d" % c.ports["port"], warnings[0])
        self.assertIn("without tls and auth", warnings[0])


if __name__ == "__main__":
    unittest.main()
