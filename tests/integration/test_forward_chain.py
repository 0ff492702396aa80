"""The forwarding exporters end to end: three real flamecol processes on
loopback, sidecar -> gateway -> backend (a store).

The corpus is pushed into the sidecar the way the Pyroscope SDKs push it
(Go: multipart /ingest; Node.js: a raw gzipped pprof body) and as OTLP over
gRPC, under two tenants (and the default one), then the backend is queried:
for every corpus file and sample type, the total and every function's flat
value must equal the corpus's `pprof -top` reference (*.top.txt), and each
tenant holds exactly the services pushed under it.

The sidecar -> gateway hop is `otlp` (gRPC); the gateway -> backend hop is
`otlp`, `otlphttp` (proto and JSON) or `pyroscope` (push.v1 and /ingest).
Last, the example files themselves (examples/sidecar.yaml, gateway.yaml,
backend.yaml) are started with their endpoints moved by ${env:...} (and,
for backend.yaml, which has no ${env:...}, by a second --config that the
Collector's deep merge lays over it) and the corpus goes through them.

Expected values: the pprof -top files, plus the profile's own sample types,
period type and period read from the corpus file by this test's decoder.
One rule of the README is applied to them: a profile that reaches the store
through OTLP with sample type samples:count and a cpu:nanoseconds period is
stored (as Pyroscope stores it) under process_cpu:cpu:nanoseconds with its
values times the period; through the pyroscope exporter the backend gets
pprof and stores every sample type as it is.
"""
import gzip
import json
import os
import subprocess
import time
import unittest
import urllib.parse

import grpc

from harness import scratch_dir, BIN, Collector, convert, corpus_files, entries, free_port, http, multipart, \
    pprof_header, \
    parse_top, pb_varint, read_corpus

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")

BACKEND = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{bgrpc}
      http:
        endpoint: 127.0.0.1:{bhttp}
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [otlp, pprof]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

GATEWAY = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{ggrpc}
exporters:
%s
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [%s]
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
      grpc:
        endpoint: 127.0.0.1:{sgrpc}
exporters:
  otlp:
    endpoint: 127.0.0.1:{ggrpc}
    tls: {insecure: true}
    retry_on_failure: {initial_interval: 100ms, max_interval: 1s}
    sending_queue: {num_consumers: 2, queue_size: 200}
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [otlp]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

RETRY = "    retry_on_failure: {initial_interval: 100ms, max_interval: 1s}\n"
LAST_HOPS = {
    "otlp": ("otlp", "  otlp:\n    endpoint: 127.0.0.1:{bgrpc}\n    tls: {insecure: true}\n" + RETRY),
    "otlphttp_proto": ("otlphttp", "  otlphttp:\n    endpoint: http://127.0.0.1:{bhttp}\n"
                                   "    encoding: proto\n" + RETRY),
    "otlphttp_json": ("otlphttp", "  otlphttp:\n    endpoint: http://127.0.0.1:{bhttp}\n"
                                  "    encoding: json\n" + RETRY),
    "pyroscope_push": ("pyroscope", "  pyroscope:\n    endpoint: http://127.0.0.1:{port}\n"
                                    "    protocol: push\n" + RETRY),
    "pyroscope_ingest": ("pyroscope", "  pyroscope:\n    endpoint: http://127.0.0.1:{port}\n"
                                      "    protocol: ingest\n" + RETRY),
}

TENANT_GO, TENANT_NODE, TENANT_OTLP = "team-a", "team-b", "anonymous"

# The README's rule (fc_pyro_stored_type, after Pyroscope's OTLP ingest): a store files an
# OTLP profile of samples:count with a cpu:nanoseconds period under
# process_cpu:cpu:nanoseconds, values x period, only when the OTLP decoder named it (no
# __name__ attribute): the OTLP tenant's profiles here, sent by `flamecol convert --to otlp`.
# Their cpu:nanoseconds sibling is then named after its period type
# (cpu:cpu:nanoseconds:...), so each sample type still lands once. The pprof pushes travel
# with their __name__ and are stored as themselves; so is anything the pyroscope exporter
# sends by /ingest (where the server names profiles from their sample types).

# ---- references: what the corpus file itself says ------------------------------------------

def expected(name, scaled):
    """{(sample type, unit): [(total, {function: flat})]} the backend must answer for one
    corpus file, from its pprof -top reference: one entry per source sample type; with
    scaled, samples:count with a cpu:nanoseconds period is cpu:nanoseconds x period."""
    types, period_type, period = pprof_header(name)
    out = {}
    for index, section in parse_top(name).items():
        key, scale = types[index], 1
        assert key[0] == section["type"], (name, key, section["type"])
        if scaled and key == ("samples", "count") and period_type == ("cpu", "nanoseconds") \
                and period > 0:
            key, scale = ("cpu", "nanoseconds"), period
        flat = {}
        for f, fn in section["rows"]:
            flat[fn] = flat.get(fn, 0) + f * scale
        assert sum(flat.values()) == section["total"] * scale, (name, key)  # every row is there
        out.setdefault(key, []).append((section["total"] * scale, flat))
    return out


# ---- talking to the processes --------------------------------------------------------------

def metrics(c):
    """{(name, labels text): value} of a collector's /metrics."""
    _, _, body = http("GET", c.metrics_base + "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        name, _, labels = key.partition("{")
        out[(name, labels.rstrip("}"))] = float(value)
    return out


def metric_sum(m, name, **labels):
    """Sum of a metric over the series whose labels include these."""
    want = ['%s="%s"' % kv for kv in labels.items()]
    return sum(v for (n, l), v in m.items() if n == name and all(w in l.split(",") for w in want))


def wait_drained(c, exporter, timeout=60):
    """Until the exporter's queue is empty and nothing is in flight, twice in a row,
    with its sent counter unchanged between the two looks."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        m = metrics(c)
        idle = metric_sum(m, "flamecol_exporter_queue_size", exporter=exporter) == 0 and \
            metric_sum(m, "flamecol_exporter_in_flight_requests", exporter=exporter) == 0
        sent = metric_sum(m, "flamecol_exporter_sent_requests_total", exporter=exporter)
        if idle and last == sent:
            return m
        last = sent if idle else None
        time.sleep(0.2)
    raise AssertionError("%s: queue not drained after %ss:\n%s" % (exporter, timeout, c.log()))


def connect(c, method, body, tenant):
    status, _, resp = http("POST", c.base + "/querier.v1.QuerierService/" + method,
                           json.dumps(body).encode(),
                           {"Content-Type": "application/json", "X-Scope-OrgID": tenant})
    assert status == 200, resp
    return json.loads(resp)


def stored(c, tenant, service):
    """{(sample type, unit): [(total, {function: flat})]} the backend answers for a service,
    one entry per profile type it holds for it."""
    sel = '{service_name="%s"}' % service
    types = connect(c, "LabelValues", {"name": "__profile_type__", "matchers": [sel]},
                    tenant).get("names", [])
    out = {}
    for t in types:
        q = {"query": t + sel, "from": "0", "until": "now", "maxNodes": "1048576"}
        status, _, body = http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q),
                               None, {"X-Scope-OrgID": tenant})
        assert status == 200, body
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


_otlp_cache = {}


def otlp_body(name, service):
    if (name, service) not in _otlp_cache:
        _otlp_cache[(name, service)] = convert(name, "otlp", "service_name=" + service)
    return _otlp_cache[(name, service)]


class Proc(Collector):
    """A flamecol started from files on disk (the examples) rather than a YAML text."""

    def __init__(self, args, env, metrics_port, port=None):
        self.dir = scratch_dir("flamecol-it-")
        self.ports = {"metrics": metrics_port}
        self.debug_path = os.path.join(self.dir, "debug.txt")
        self.stderr_path = os.path.join(self.dir, "stderr.txt")
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [os.path.abspath(BIN), *args], stdout=subprocess.DEVNULL, stderr=self.stderr,
            env=dict(os.environ, **env), cwd=self.dir)
        self.base = "http://127.0.0.1:%d" % port if port else None
        self.metrics_base = "http://127.0.0.1:%d" % metrics_port


# ---- the tests -----------------------------------------------------------------------------

class ForwardChainTest(unittest.TestCase):
    def push_corpus(self, pprof_base, grpc_port, files, tag):
        """Pushes each file three ways: Go SDK multipart (tenant team-a), Node.js raw
        body (team-b), OTLP gRPC (default tenant). Returns {tenant: {service: file}}."""
        sent = {TENANT_GO: {}, TENANT_NODE: {}, TENANT_OTLP: {}}
        for i, name in enumerate(files):
            svc = "%s-go-%d" % (tag, i)
            ctype, body = multipart([("profile", "profile.pprof", "application/octet-stream",
                                      read_corpus(name))])
            q = urllib.parse.urlencode({"name": "%s{env=test}" % svc, "from": "1700000000",
                                        "until": "1700000010", "spyName": "gospy",
                                        "sampleRate": "100"})
            status, _, text = http("POST", pprof_base + "/ingest?" + q, body,
                                   {"Content-Type": ctype, "X-Scope-OrgID": TENANT_GO})
            self.assertEqual(status, 200, "%s: %s" % (name, text))
            sent[TENANT_GO][svc] = name

            svc = "%s-node-%d" % (tag, i)
            status, _, text = http(
                "POST", pprof_base + "/ingest?name=%s&from=1700000000&until=1700000010"
                "&spyName=nodespy" % svc, read_corpus(name),
                {"Content-Type": "application/octet-stream", "X-Scope-OrgID": TENANT_NODE})
            self.assertEqual(status, 200, "%s: %s" % (name, text))
            sent[TENANT_NODE][svc] = name
        with grpc.insecure_channel("127.0.0.1:%d" % grpc_port) as ch:
            export = ch.unary_unary(METHOD)
            for i, name in enumerate(files):
                svc = "%s-otlp-%d" % (tag, i)
                compression = grpc.Compression.Gzip if i % 2 else None
                self.assertEqual(export(otlp_body(name, svc), timeout=20,
                                        compression=compression), b"")
                sent[TENANT_OTLP][svc] = name
        return sent

    def check_backend(self, backend, sent, otlp_named_scaled):
        for tenant, services in sent.items():
            status, _, body = http("GET", backend.base + "/pyroscope/label-values?label=service_name",
                                   None, {"X-Scope-OrgID": tenant})
            self.assertEqual(status, 200, body)
            # Tenants travel: each holds exactly its own services.
            self.assertEqual(sorted(json.loads(body)), sorted(services), tenant)
            for svc, name in services.items():
                want = expected(name, otlp_named_scaled and tenant == TENANT_OTLP)
                got = stored(backend, tenant, svc)
                # Every source sample type once (never twice), with pprof -top's total and
                # every flat row.
                self.assertEqual(sorted(got), sorted(want), "%s %s: sample types" % (svc, name))
                for key in want:
                    self.assertEqual(entries(got[key]), entries(want[key]),
                                     "%s %s %s" % (svc, name, key))

    def chain(self, hop, files=None):
        exporter, block = LAST_HOPS[hop]
        files = files or corpus_files()
        self.assertGreaterEqual(len(files), 1)
        ports = {"bgrpc": free_port(), "bhttp": free_port(), "ggrpc": free_port(),
                 "sgrpc": free_port()}

        def fill(text):
            for k, v in ports.items():
                text = text.replace("{%s}" % k, str(v))
            return text

        backend = Collector(fill(BACKEND))
        with backend:
            gateway = Collector(fill(GATEWAY % (block.replace("{port}", str(backend.ports["port"])),
                                                exporter)))
            with gateway:
                sidecar = Collector(fill(SIDECAR))
                with sidecar:
                    sent = self.push_corpus(sidecar.base, ports["sgrpc"], files, hop)
                    s = wait_drained(sidecar, "otlp")
                    g = wait_drained(gateway, exporter)
                    b = metrics(backend)
                    pushes = 2 * len(files)
                    self.assertEqual(metric_sum(s, "flamecol_receiver_accepted_requests_total",
                                                receiver="pprof"), pushes)
                    # Every request the sidecar queued was answered OK by the gateway, once.
                    self.assertEqual(metric_sum(s, "flamecol_exporter_sent_requests_total",
                                                exporter="otlp"),
                                     metric_sum(g, "flamecol_receiver_accepted_requests_total",
                                                receiver="otlp"))
                    receiver = "pprof" if exporter == "pyroscope" else "otlp"
                    self.assertEqual(metric_sum(g, "flamecol_exporter_sent_requests_total",
                                                exporter=exporter),
                                     metric_sum(b, "flamecol_receiver_accepted_requests_total",
                                                receiver=receiver))
                    for m, e in ((s, "otlp"), (g, exporter)):
                        self.assertEqual(metric_sum(m, "flamecol_exporter_send_failed_profile_samples_total",
                                                    exporter=e), 0)
                    self.assertGreater(metric_sum(g, "flamecol_exporter_sent_profile_samples_total",
                                                  exporter=exporter), 0)
                    self.check_backend(backend, sent, hop != "pyroscope_ingest")
                    self.assertEqual(sidecar.stop(), 0, sidecar.log())
                self.assertEqual(gateway.stop(), 0, gateway.log())
            self.assertEqual(backend.stop(), 0, backend.log())

    def test_otlp_otlp(self):
        self.chain("otlp")

    def test_otlphttp_proto(self):
        self.chain("otlphttp_proto")

    def test_otlphttp_json(self):
        self.chain("otlphttp_json")

    def test_pyroscope_push(self):
        self.chain("pyroscope_push")

    def test_pyroscope_ingest(self):
        self.chain("pyroscope_ingest")

    def test_example_files(self):
        # The three example files as they are; only their endpoints (and the
        # backend's data path and query range, by a second --config) are moved.
        p = {k: free_port() for k in ("b_grpc", "b_http", "b_pprof", "b_metrics", "g_grpc",
                                      "g_http", "g_metrics", "s_pprof", "s_grpc", "s_http",
                                      "s_metrics")}
        ep = lambda k: "127.0.0.1:%d" % p[k]
        for f in ("sidecar.yaml", "gateway.yaml", "backend.yaml"):
            r = subprocess.run([BIN, "validate", "--config", os.path.join(EXAMPLES, f)],
                                             capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "%s: %s" % (f, r.stdout + r.stderr))
        overlay_dir = scratch_dir("flamecol-it-")
        overlay = os.path.join(overlay_dir, "backend-ports.yaml")
        with open(overlay, "w") as f:
            f.write("receivers:\n  otlp:\n    protocols:\n      grpc: {endpoint: %s}\n"
                    "      http: {endpoint: %s}\n  pprof: {endpoint: %s}\n"
                    "exporters:\n  store:\n    path: %s/data\n"
                    "    query: {endpoint: %s, max_query_length: 0}\n"
                    "service:\n  telemetry:\n    metrics: {endpoint: %s}\n"
                    % (ep("b_grpc"), ep("b_http"), ep("b_pprof"), overlay_dir, ep("b_pprof"),
                       ep("b_metrics")))
        backend = Proc(["--config", os.path.join(EXAMPLES, "backend.yaml"), "--config", overlay],
                       {}, p["b_metrics"], p["b_pprof"])
        with backend:
            gateway = Proc(["--config", os.path.join(EXAMPLES, "gateway.yaml")],
                           {"GATEWAY_OTLP_GRPC_ENDPOINT": ep("g_grpc"),
                            "GATEWAY_OTLP_HTTP_ENDPOINT": ep("g_http"),
                            "GATEWAY_TELEMETRY_ENDPOINT": ep("g_metrics"),
                            "GATEWAY_QUEUE_DIR": os.path.join(overlay_dir, "queue"),
                            "BACKEND_OTLP_ENDPOINT": ep("b_grpc")}, p["g_metrics"])
            with gateway:
                sidecar = Proc(["--config", os.path.join(EXAMPLES, "sidecar.yaml")],
                               {"SIDECAR_PPROF_ENDPOINT": ep("s_pprof"),
                                "SIDECAR_OTLP_GRPC_ENDPOINT": ep("s_grpc"),
                                "SIDECAR_OTLP_HTTP_ENDPOINT": ep("s_http"),
                                "SIDECAR_TELEMETRY_ENDPOINT": ep("s_metrics"),
                                "GATEWAY_ENDPOINT": ep("g_grpc")}, p["s_metrics"], p["s_pprof"])
                with sidecar:
                    files = ["go-1s-cpu", "node-1s-heap", "pyroscope-nodejs-0.4.13-wall"]
                    sent = self.push_corpus(sidecar.base, p["s_grpc"], files, "example")
                    wait_drained(sidecar, "otlp")
                    wait_drained(gateway, "otlp")
                    self.check_backend(backend, sent, True)
                    self.assertEqual(sidecar.stop(), 0, sidecar.log())
                self.assertEqual(gateway.stop(), 0, gateway.log())
            self.assertEqual(backend.stop(), 0, backend.log())


if __name__ == "__main__":
    unittest.main()
