"""The sidecar -> gateway -> backend chain over mTLS with bearer tokens (issue 16): the
example files examples/mtls/{sidecar,gateway,backend}.yaml run as they are, with the
certificates made by examples/mtls/make-certs.sh (openssl) in a temp directory and
${env:...} pointing at them, at tokens chosen here and at free ports.

Every listener asks for a client certificate of the CA and a bearer token; every
exporter shows client.crt and sends the next hop's token. Corpus files are pushed into
the sidecar over TLS with the sidecar's token (Go SDK multipart /ingest over HTTPS,
OTLP over gRPC+TLS), the backend is queried over mTLS with the read token: every sample
type's total and every function's flat value equal the corpus's `pprof -top` reference
(*.top.txt, read by test_forward_chain.expected, with the README's OTLP cpu rule), in
the tenant the sidecar's token is bound to (team-a) and nowhere else.

Negative: a sidecar whose client certificate comes from another CA (make-certs.sh run a
second time), and one that sends a wrong gateway token: the gateway refuses it, the
sidecar counts the requests in send_failed, the gateway and the backend accept nothing.
"""
import gzip
import http.client
import json
import os
import secrets
import shutil
import ssl
import subprocess
import time
import unittest
import urllib.parse

import grpc

from harness import scratch_dir, BIN, entries, free_port, multipart, pb_fields, read_corpus
from test_forward_chain import METHOD, Proc, expected, metric_sum, metrics, otlp_body, \
    wait_drained

MTLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mtls")
TENANT = "team-a"  # examples/mtls/sidecar.yaml binds SIDECAR_TOKEN to it
FILES = ["go-1s-cpu", "node-1s-heap", "pyroscope-nodejs-0.4.13-wall"]
REFUSED = "refused"


def profile_seconds(name):
    """The corpus profile's own time (Profile.time_nanos = 9), in seconds: the pushes are
    dated by it, so every push falls in one query range (under max_query_length)."""
    raw = read_corpus(name)
    return pb_fields(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)[9][0] // 10**9


def make_certs(d):
    subprocess.run(["sh", os.path.join(MTLS, "make-certs.sh"), d], check=True,
                   capture_output=True)
    return d


def tls_context(d, client=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(d, "ca.crt"))
    if client:
        ctx.load_cert_chain(os.path.join(d, "client.crt"), os.path.join(d, "client.key"))
    return ctx


def https(port, method, path, ctx, body=None, headers=None):
    """(status, body), or REFUSED when the handshake or the connection fails."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return REFUSED, b""
    finally:
        conn.close()


def grpc_export(port, d, body, token):
    def read(name):
        with open(os.path.join(d, name), "rb") as f:
            return f.read()

    creds = grpc.ssl_channel_credentials(read("ca.crt"), read("client.key"), read("client.crt"))
    with grpc.secure_channel("127.0.0.1:%d" % port, creds) as ch:
        try:
            return ch.unary_unary(METHOD)(body, timeout=20,
                                          metadata=[("authorization", "Bearer " + token)])
        except grpc.RpcError as e:
            return e.code()


def wait_for(fn, what, proc, timeout=60):
    """Polls fn() until true (a guard against a hang, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.2)
    raise AssertionError("%s not seen after %ss:\n%s" % (what, timeout, proc.log()))


class MtlsChainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = scratch_dir("flamecol-mtls-")
        cls.pki = make_certs(os.path.join(cls.tmp, "certs"))
        other = make_certs(os.path.join(cls.tmp, "other-certs"))
        # A sidecar trusting the right CA (and serving with the right certificate) whose
        # client certificate is signed by another CA.
        cls.wrong_ca = os.path.join(cls.tmp, "wrong-ca")
        os.makedirs(cls.wrong_ca)
        for name in ("ca.crt", "server.crt", "server.key"):
            shutil.copy(os.path.join(cls.pki, name), cls.wrong_ca)
        for name in ("client.crt", "client.key"):
            shutil.copy(os.path.join(other, name), cls.wrong_ca)
        cls.tokens = {k: secrets.token_hex(16) for k in
                      ("SIDECAR_TOKEN", "GATEWAY_TOKEN", "BACKEND_TOKEN", "BACKEND_READ_TOKEN")}
        for f in ("sidecar.yaml", "gateway.yaml", "backend.yaml"):
            r = subprocess.run([BIN, "validate", "--config", os.path.join(MTLS, f)],
                               capture_output=True, text=True,
                               env=dict(os.environ, FLAMECOL_TLS_DIR=cls.pki, **cls.tokens))
            assert r.returncode == 0 and "warn" not in r.stderr.lower(), (f, r.stdout + r.stderr)
        cls.p = {k: free_port() for k in ("b_grpc", "b_query", "b_metrics", "g_grpc",
                                          "g_metrics")}
        ep = cls.ep
        cls.backend = Proc(["--config", os.path.join(MTLS, "backend.yaml")],
                           dict(cls.tokens, FLAMECOL_TLS_DIR=cls.pki,
                                BACKEND_OTLP_GRPC_ENDPOINT=ep("b_grpc"),
                                BACKEND_QUERY_ENDPOINT=ep("b_query"),
                                BACKEND_TELEMETRY_ENDPOINT=ep("b_metrics"),
                                BACKEND_DATA_DIR=os.path.join(cls.tmp, "data")),
                           cls.p["b_metrics"])
        cls.addClassCleanup(cls.backend.__exit__)  # killed if anything below fails
        cls.backend.__enter__()
        cls.gateway = Proc(["--config", os.path.join(MTLS, "gateway.yaml")],
                           dict(cls.tokens, FLAMECOL_TLS_DIR=cls.pki,
                                GATEWAY_OTLP_GRPC_ENDPOINT=ep("g_grpc"),
                                GATEWAY_TELEMETRY_ENDPOINT=ep("g_metrics"),
                                GATEWAY_QUEUE_DIR=os.path.join(cls.tmp, "queue"),
                                BACKEND_OTLP_ENDPOINT=ep("b_grpc")),
                           cls.p["g_metrics"])
        cls.addClassCleanup(cls.gateway.__exit__)  # killed if anything below fails
        cls.gateway.__enter__()

    @classmethod
    def tearDownClass(cls):
        for c in (cls.gateway, cls.backend):
            rc = c.stop()
            assert rc == 0, c.log()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def ep(cls, k):
        return "127.0.0.1:%d" % cls.p[k]

    def sidecar(self, tls_dir, **env):
        """A sidecar from examples/mtls/sidecar.yaml: (proc, pprof port, gRPC port)."""
        ports = {k: free_port() for k in ("pprof", "grpc", "http", "metrics")}
        env = dict(self.tokens, FLAMECOL_TLS_DIR=tls_dir,
                   SIDECAR_PPROF_ENDPOINT="127.0.0.1:%d" % ports["pprof"],
                   SIDECAR_OTLP_GRPC_ENDPOINT="127.0.0.1:%d" % ports["grpc"],
                   SIDECAR_OTLP_HTTP_ENDPOINT="127.0.0.1:%d" % ports["http"],
                   SIDECAR_TELEMETRY_ENDPOINT="127.0.0.1:%d" % ports["metrics"],
                   GATEWAY_ENDPOINT=self.ep("g_grpc"), **env)
        return Proc(["--config", os.path.join(MTLS, "sidecar.yaml")], env, ports["metrics"]), \
            ports["pprof"], ports["grpc"]

    def ingest(self, port, service, name, token, ctx=None):
        ctype, body = multipart([("profile", "profile.pprof", "application/octet-stream",
                                  read_corpus(name))])
        t = profile_seconds(name)
        q = urllib.parse.urlencode({"name": "%s{env=test}" % service, "from": str(t),
                                    "until": str(t + 10), "spyName": "gospy",
                                    "sampleRate": "100"})
        headers = {"Content-Type": ctype}
        if token:
            headers["Authorization"] = "Bearer " + token
        return https(port, "POST", "/ingest?" + q, ctx or tls_context(self.pki), body, headers)

    # ---- the backend's query API, over mTLS with the read token ----------------------------

    def query(self, method, path, body=None, tenant=TENANT, token=None, ctx=None):
        headers = {"Authorization": "Bearer " + (token or self.tokens["BACKEND_READ_TOKEN"]),
                   "X-Scope-OrgID": tenant}
        if body is not None:
            headers["Content-Type"] = "application/json"
        return https(self.p["b_query"], method, path, ctx or tls_context(self.pki),
                     body, headers)

    def services(self, tenant=TENANT):
        status, body = self.query("GET", "/pyroscope/label-values?label=service_name",
                                  tenant=tenant)
        self.assertEqual(status, 200, body)
        return sorted(json.loads(body))

    def stored(self, service):
        """{(sample type, unit): [(total, {function: flat})]} as test_forward_chain.stored."""
        sel = '{service_name="%s"}' % service
        status, body = self.query("POST", "/querier.v1.QuerierService/LabelValues",
                                  json.dumps({"name": "__profile_type__",
                                              "matchers": [sel]}).encode())
        self.assertEqual(status, 200, body)
        out = {}
        for t in json.loads(body).get("names", []):
            times = [profile_seconds(n) for n in FILES]
            q = {"query": t + sel, "from": str(min(times) - 3600),
                 "until": str(max(times) + 3600), "maxNodes": "1048576"}
            status, body = self.query("GET", "/pyroscope/render?" + urllib.parse.urlencode(q))
            self.assertEqual(status, 200, body)
            fb = json.loads(body)["flamebearer"]
            if fb["numTicks"] == 0:
                continue
            flat = {}
            for level in fb["levels"]:
                for i in range(0, len(level), 4):
                    fn = fb["names"][level[i + 3]]
                    flat[fn] = flat.get(fn, 0) + level[i + 2]
            out.setdefault(tuple(t.split(":")[1:3]), []).append((fb["numTicks"], flat))
        return out

    def accepted(self):
        """(gateway, backend) accepted OTLP requests."""
        return (metric_sum(metrics(self.gateway), "flamecol_receiver_accepted_requests_total",
                           receiver="otlp"),
                metric_sum(metrics(self.backend), "flamecol_receiver_accepted_requests_total",
                           receiver="otlp"))

    # ---- the tests ---------------------------------------------------------------------------

    def test_chain_end_to_end(self):
        sidecar, pprof_port, grpc_port = self.sidecar(self.pki)
        with sidecar:
            token = self.tokens["SIDECAR_TOKEN"]
            # The sidecar's listeners are mTLS + token: no token 401, no client cert refused.
            self.assertEqual(self.ingest(pprof_port, "nope", FILES[0], None)[0], 401)
            self.assertEqual(self.ingest(pprof_port, "nope", FILES[0], token,
                                         tls_context(self.pki, client=False))[0], REFUSED)
            sent = {}  # service -> (corpus file, OTLP-named: the README's cpu rule applies)
            for i, name in enumerate(FILES):
                svc = "mtls-go-%d" % i
                status, text = self.ingest(pprof_port, svc, name, token)
                self.assertEqual(status, 200, "%s: %s" % (name, text))
                sent[svc] = (name, False)
                svc = "mtls-otlp-%d" % i
                self.assertEqual(grpc_export(grpc_port, self.pki, otlp_body(name, svc), token),
                                 b"")
                sent[svc] = (name, True)
            s = wait_drained(sidecar, "otlp")
            g = wait_drained(self.gateway, "otlp")
            # The gateway's batch processor may still hold the last requests (up to its
            # 200 ms timeout) while its queue is empty: wait until the backend has accepted
            # every sample the gateway accepted.
            samples = lambda c: metric_sum(
                metrics(c), "flamecol_receiver_accepted_profile_samples_total", receiver="otlp")
            wait_for(lambda: samples(self.backend) == samples(self.gateway) > 0,
                     "every sample at the backend", self.gateway)
            g = wait_drained(self.gateway, "otlp")
            for m in (s, g):
                self.assertEqual(metric_sum(m, "flamecol_exporter_send_failed_requests_total",
                                            exporter="otlp"), 0)
            self.assertEqual(metric_sum(s, "flamecol_exporter_sent_requests_total",
                                        exporter="otlp"),
                             metric_sum(g, "flamecol_receiver_accepted_requests_total",
                                        receiver="otlp"))
            self.assertEqual(sidecar.stop(), 0, sidecar.log())

        # The backend's query API: mTLS and the read token.
        path = "/pyroscope/label-values?label=service_name"
        self.assertEqual(self.query("GET", path, ctx=tls_context(self.pki, client=False))[0],
                         REFUSED)
        self.assertEqual(self.query("GET", path, token="wrong")[0], 401)
        self.assertEqual(self.query("GET", path, token=self.tokens["BACKEND_TOKEN"])[0], 403)
        # The tenant the sidecar's token is bound to travelled both hops.
        self.assertEqual(self.services(), sorted(sent))
        self.assertEqual(self.services("anonymous"), [])
        for svc, (name, otlp_named) in sent.items():
            want = expected(name, otlp_named)
            got = self.stored(svc)
            self.assertEqual(sorted(got), sorted(want), "%s %s: sample types" % (svc, name))
            for key in want:
                self.assertEqual(entries(got[key]), entries(want[key]),
                                 "%s %s %s" % (svc, name, key))

    def refused_by_gateway(self, tls_dir, error_type, **env):
        before = self.accepted()
        sidecar, pprof_port, _ = self.sidecar(tls_dir, SIDECAR_RETRY_ENABLED="false", **env)
        with sidecar:
            svc = "mtls-refused-" + secrets.token_hex(4)
            # The sidecar itself takes the push (its listeners trust the right CA).
            status, text = self.ingest(pprof_port, svc, FILES[0], self.tokens["SIDECAR_TOKEN"])
            self.assertEqual(status, 200, text)
            wait_for(lambda: metric_sum(metrics(sidecar),
                                        "flamecol_exporter_send_failed_requests_total",
                                        exporter="otlp") == 1, "send_failed", sidecar)
            self.assertEqual(metric_sum(metrics(sidecar),
                                        "flamecol_exporter_send_failed_requests_total",
                                        exporter="otlp", error_type=error_type), 1)
            m = metrics(sidecar)
            self.assertEqual(metric_sum(m, "flamecol_exporter_sent_requests_total",
                                        exporter="otlp"), 0)
            self.assertEqual(self.accepted(), before)
            self.assertNotIn(svc, self.services())
            self.assertEqual(sidecar.stop(), 0, sidecar.log())
            return sidecar.log()

    def test_gateway_refuses_client_cert_of_another_ca(self):
        # The handshake fails: the gateway closes the connection (retryable UNAVAILABLE; the
        # sidecar is run with retries off, so its request is dropped at once).
        self.refused_by_gateway(self.wrong_ca, "grpc_UNAVAILABLE")

    def test_gateway_refuses_wrong_token(self):
        refusals = lambda: metric_sum(metrics(self.gateway), "flamecol_auth_refusals_total",
                                      reason="bad_credentials")
        before = refusals()
        log = self.refused_by_gateway(self.pki, "grpc_UNAUTHENTICATED",
                                      GATEWAY_TOKEN="not-the-gateway-token")
        self.assertGreater(refusals(), before)
        self.assertNotIn("not-the-gateway-token", log)


if __name__ == "__main__":
    unittest.main()
