"""Forwarding the default tenant to a tenant-bound credential (issue 16): real processes,
a sidecar without auth -> a backend whose every listener wants a bearer token, the
sidecar's token being bound to team-a.

The corpus's go-1s-cpu profile is pushed into the sidecar WITHOUT X-Scope-OrgID (Go SDK
multipart /ingest, and OTLP over gRPC without x-scope-orgid metadata): the sidecar files
it under the default tenant, `anonymous`. The sidecar forwards it with each exporter in
turn (otlp over gRPC, otlphttp, pyroscope push.v1 and /ingest). A batch of the default
tenant travels without X-Scope-OrgID, so the backend puts it in the tenant of the
sidecar's token, team-a (had the sidecar sent "X-Scope-OrgID: anonymous", the backend
would answer 403 and the data would be dropped). The backend is then queried with a
read token of team-a: every sample type's total and every function's flat value equal
the corpus's `pprof -top` reference (*.top.txt, read by test_forward_chain.expected);
team-b's read token and the default tenant see none of it.

Last, an exporter's own tenant (pyroscope `tenant_id`, an x-scope-orgid header) still
wins: tenant_id team-b with the team-a token is refused (403, counted as send_failed).
"""
import json
import unittest
import urllib.parse

import grpc

from harness import (Collector, entries, flamegraph_flat, free_port, http, multipart,
                     read_corpus)
from test_forward_chain import METHOD, expected, metric_sum, metrics, otlp_body, wait_drained

NAME = "go-1s-cpu"
WRITE_A = "fwd-write-team-a-5f1c"  # the sidecar's credential: team-a, write
READ_A = "fwd-read-team-a-77d0"
READ_B = "fwd-read-team-b-0b3e"
READ_ANY = "fwd-read-unbound-9a41"  # no tenant: X-Scope-OrgID (or none: anonymous)

BACKEND = """
extensions:
  auth:
    bearer_tokens:
      - {token: %(w)s, tenant: team-a, roles: [write]}
      - {token: %(ra)s, tenant: team-a, roles: [read]}
      - {token: %(rb)s, tenant: team-b, roles: [read, write]}
      - {token: %(any)s, roles: [read]}
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
    auth: {authenticator: auth}
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:%(grpc)d, auth: {authenticator: auth}}
      http: {endpoint: 127.0.0.1:%(http)d, auth: {authenticator: auth}}
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
      auth: {authenticator: auth}
service:
  extensions: [auth]
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

SIDECAR = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:%(sgrpc)d}
exporters:
%(exporter)s
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [%(name)s]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

RETRY = "    retry_on_failure: {initial_interval: 100ms, max_interval: 1s}\n"
HOPS = {
    "otlp": ("otlp", "  otlp:\n    endpoint: 127.0.0.1:%(grpc)d\n    tls: {insecure: true}\n"
                     "    headers: {authorization: \"Bearer %(w)s\"}\n" + RETRY),
    "otlphttp": ("otlphttp", "  otlphttp:\n    endpoint: http://127.0.0.1:%(http)d\n"
                             "    headers: {Authorization: \"Bearer %(w)s\"}\n" + RETRY),
    "pyroscope_push": ("pyroscope", "  pyroscope:\n    endpoint: http://127.0.0.1:%(port)d\n"
                                    "    protocol: push\n    bearer_token: %(w)s\n" + RETRY),
    "pyroscope_ingest": ("pyroscope", "  pyroscope:\n    endpoint: http://127.0.0.1:%(port)d\n"
                                      "    protocol: ingest\n    bearer_token: %(w)s\n" + RETRY),
}


def bearer(token, tenant=None):
    h = {"Authorization": "Bearer " + token}
    if tenant:
        h["X-Scope-OrgID"] = tenant
    return h


class ForwardDefaultTenantTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc, cls.http = free_port(), free_port()
        cls.backend = Collector(BACKEND % {"w": WRITE_A, "ra": READ_A, "rb": READ_B,
                                           "any": READ_ANY, "grpc": cls.grpc,
                                           "http": cls.http})
        cls.addClassCleanup(cls.backend.__exit__)
        cls.backend.__enter__()

    @classmethod
    def tearDownClass(cls):
        assert cls.backend.stop() == 0, cls.backend.log()

    def sidecar(self, hop, extra=""):
        name, block = HOPS[hop]
        sgrpc = free_port()
        text = SIDECAR % {"sgrpc": sgrpc, "name": name,
                          "exporter": (block + extra) % {
                              "grpc": self.grpc, "http": self.http, "w": WRITE_A,
                              "port": self.backend.ports["port"]}}
        c = Collector(text)
        c.grpc = sgrpc
        return c, name

    def push(self, sidecar, svc):
        """go-1s-cpu twice, neither naming a tenant: svc-go by /ingest, svc-otlp by OTLP."""
        ctype, body = multipart([("profile", "profile.pprof", "application/octet-stream",
                                  read_corpus(NAME))])
        q = urllib.parse.urlencode({"name": "%s-go{env=test}" % svc, "from": "1700000000",
                                    "until": "1700000010", "spyName": "gospy",
                                    "sampleRate": "100"})
        status, _, text = http("POST", sidecar.base + "/ingest?" + q, body,
                               {"Content-Type": ctype})
        self.assertEqual(status, 200, text)
        with grpc.insecure_channel("127.0.0.1:%d" % sidecar.grpc) as ch:
            self.assertEqual(ch.unary_unary(METHOD)(otlp_body(NAME, svc + "-otlp"), timeout=20),
                             b"")

    def services(self, headers):
        status, _, body = http("GET", self.backend.base +
                               "/pyroscope/label-values?label=service_name", None, headers)
        self.assertEqual(status, 200, body)
        return set(json.loads(body))

    def stored(self, service):
        """{(sample type, unit): [(total, {function: flat})]} in team-a (READ_A)."""
        sel = '{service_name="%s"}' % service
        status, _, body = http("POST", self.backend.base +
                               "/querier.v1.QuerierService/LabelValues",
                               json.dumps({"name": "__profile_type__", "matchers": [sel]}).encode(),
                               dict(bearer(READ_A), **{"Content-Type": "application/json"}))
        self.assertEqual(status, 200, body)
        out = {}
        for t in json.loads(body).get("names", []):
            q = {"query": t + sel, "from": "0", "until": "now", "maxNodes": "1048576"}
            status, _, r = http("GET", self.backend.base + "/pyroscope/render?" +
                                urllib.parse.urlencode(q), None, bearer(READ_A))
            self.assertEqual(status, 200, r)
            fb = json.loads(r)["flamebearer"]
            if fb["numTicks"] == 0:
                continue
            flat = flamegraph_flat(fb["names"], fb["levels"])[1]
            out.setdefault(tuple(t.split(":")[1:3]), []).append((fb["numTicks"], flat))
        return out

    def forward(self, hop):
        svc = "fwd-" + hop.replace("_", "-")
        sidecar, exporter = self.sidecar(hop)
        with sidecar:
            self.push(sidecar, svc)
            m = wait_drained(sidecar, exporter)
            self.assertEqual(metric_sum(m, "flamecol_exporter_send_failed_requests_total",
                                        exporter=exporter), 0, sidecar.log())
            self.assertGreater(metric_sum(m, "flamecol_exporter_sent_requests_total",
                                          exporter=exporter), 0)
            self.assertEqual(sidecar.stop(), 0, sidecar.log())
        # In the tenant of the sidecar's token, and only there.
        a = self.services(bearer(READ_A))
        self.assertIn(svc + "-go", a)
        self.assertIn(svc + "-otlp", a)
        for other in (bearer(READ_B), bearer(READ_ANY), bearer(READ_ANY, "anonymous")):
            self.assertFalse({svc + "-go", svc + "-otlp"} & self.services(other), other)
        # The README's OTLP cpu rule: the OTLP-named push is scaled, except through
        # /ingest (the server names profiles from their sample types there).
        for service, scaled in ((svc + "-go", False), (svc + "-otlp", hop != "pyroscope_ingest")):
            want, got = expected(NAME, scaled), self.stored(service)
            self.assertEqual(sorted(got), sorted(want), "%s: sample types" % service)
            for key in want:
                self.assertEqual(entries(got[key]), entries(want[key]), "%s %s" % (service, key))

    def test_otlp(self):
        self.forward("otlp")

    def test_otlphttp(self):
        self.forward("otlphttp")

    def test_pyroscope_push(self):
        self.forward("pyroscope_push")

    def test_pyroscope_ingest(self):
        self.forward("pyroscope_ingest")

    def test_exporter_tenant_still_wins(self):
        # tenant_id names team-b while the token is team-a's: sent, and refused (403).
        sidecar, exporter = self.sidecar(
            "pyroscope_push", "    tenant_id: team-b\n")
        with sidecar:
            self.push(sidecar, "fwd-tenant-id")
            m = wait_drained(sidecar, exporter)
            self.assertGreater(metric_sum(m, "flamecol_exporter_send_failed_requests_total",
                                          exporter=exporter), 0, sidecar.log())
            self.assertEqual(metric_sum(m, "flamecol_exporter_sent_requests_total",
                                        exporter=exporter), 0)
            self.assertEqual(sidecar.stop(), 0, sidecar.log())
        for h in (bearer(READ_A), bearer(READ_B)):
            self.assertFalse({"fwd-tenant-id-go", "fwd-tenant-id-otlp"} & self.services(h))


if __name__ == "__main__":
    unittest.main()
