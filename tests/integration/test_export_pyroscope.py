"""The pyroscope exporter with real processes on loopback: flamecol A (pprof
and OTLP/HTTP receivers) -> `pyroscope` exporter -> flamecol B (pprof
receiver -> store, which answers /push.v1.PusherService/Push and /ingest as
Pyroscope does), over both protocols.

The corpus goes into A as the Go SDK pushes it (multipart /ingest) under two
tenants, and as OTLP; then B is queried: every sample type's total and every
function's flat value must equal the corpus's `pprof -top` reference
(*.top.txt), each tenant holds exactly its own services, and the series
labels arrived. Also: tenant_id overrides the batch's tenant; bearer and
basic auth (a wrong credential is a 401: permanent, counted, not retried); a
pprof sample label and a span_id, hand-built here, survive A -> B; a label
/ingest's name cannot carry is refused with a message naming it.

Expected values come from the corpus's pprof -top files, the profile's own
sample types read by this test's protobuf reader, Pyroscope's documented
rules for `__name__` (hand-written table below), and hand-built inputs.
"""
import gzip
import json
import os
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from harness import BIN, Collector, convert, corpus_files, entries, free_port, http, multipart, \
    parse_top, pprof_header, \
    pb_ld, pb_packed, pb_varint, pb_vi, read_corpus

B_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
%s
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

A_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  pyroscope:
    endpoint: %s
    protocol: %s
    retry_on_failure: {initial_interval: 100ms, max_interval: 1s}
%s
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [pyroscope]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

# Pyroscope v1's `__name__` of a pprof pushed without sample_type_config
# (reference: a `wall` sample type gives wall; else the first type whose
# display name -- samples: cpu, contentions: mutex_count, goroutine:
# goroutines -- contains cpu / alloc_,inuse_ / mutex_ / goroutines).
NAMES = {
    "go-1s-allocs": "memory", "go-1s-block": "mutex", "go-1s-cpu": "process_cpu",
    "go-1s-goroutine": "goroutines", "go-1s-heap": "memory", "go-1s-mutex": "mutex",
    "go-3s-allocs": "memory", "go-3s-cpu": "process_cpu", "node-1s-heap": "memory",
    "node-1s-wall": "wall", "node-1s-wallcpu": "wall", "pyroscope-go-block_duration": "mutex",
    "pyroscope-go-cpu": "process_cpu", "pyroscope-go-goroutines": "goroutines",
    "pyroscope-go-inuse_space": "memory", "pyroscope-nodejs-0.4.13-inuse_space": "memory",
    "pyroscope-nodejs-0.4.13-wall": "wall",
}
OTLP_FILES = ("go-1s-cpu", "node-1s-heap", "go-1s-mutex")
TENANTS = ("t1", "t2")


def metrics(c):
    """{(name, labels text): value} of a collector's /metrics."""
    _, _, body = http("GET", c.metrics_base + "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            name, _, labels = key.partition("{")
            out[(name, labels.rstrip("}"))] = float(value)
    return out


def msum(m, name, **labels):
    want = ['%s="%s"' % kv for kv in labels.items()]
    return sum(v for (n, l), v in m.items() if n == name and all(w in l.split(",") for w in want))


def connect(c, method, body, tenant=None):
    headers = {"Content-Type": "application/json"}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    status, _, resp = http("POST", c.base + "/querier.v1.QuerierService/" + method,
                           json.dumps(body).encode(), headers)
    assert status == 200, resp
    return json.loads(resp)


def label_values(c, label, tenant=None, matcher="{}"):
    return sorted(connect(c, "LabelValues", {"name": label, "matchers": [matcher]}, tenant)
                  .get("names", []))


def profile_types(c, tenant, service):
    return label_values(c, "__profile_type__", tenant, '{service_name="%s"}' % service)


def stored(c, tenant, service):
    """{sample type: [(total, {function: flat})]} B answers for a service, one entry per
    profile type."""
    out = {}
    for t in profile_types(c, tenant, service):
        q = {"query": t + '{service_name="%s"}' % service, "from": "0", "until": "now",
             "maxNodes": "1048576"}
        status, _, body = http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q),
                               None, {"X-Scope-OrgID": tenant})
        assert status == 200, body
        fb = json.loads(body)["flamebearer"]
        flat = {}
        for level in fb["levels"]:
            for i in range(0, len(level), 4):
                fn = fb["names"][level[i + 3]]
                flat[fn] = flat.get(fn, 0) + level[i + 2]
        out.setdefault(t.split(":")[1], []).append((fb["numTicks"], flat))
    return out


def expected(name, scaled=False):
    """{sample type: [(total, {function: flat})]} from the corpus's pprof -top file; with
    scaled, samples:count with a cpu:nanoseconds period is cpu time, values x period (how
    push sends an OTLP profile flamecol named process_cpu itself: README, OTLP receiver)."""
    types, period_type, period = pprof_header(name)
    out = {}
    for index, section in parse_top(name).items():
        key, scale = section["type"], 1
        if scaled and types[index] == ("samples", "count") and \
                period_type == ("cpu", "nanoseconds") and period > 0:
            key, scale = "cpu", period
        flat = {}
        for f, fn in section["rows"]:
            flat[fn] = flat.get(fn, 0) + f * scale
        assert sum(flat.values()) == section["total"] * scale, name  # every row is there
        out.setdefault(key, []).append((section["total"] * scale, flat))
    return out


def sample_count(name):
    """How many Sample messages (Profile field 2) the corpus file holds, read here."""
    data, i, n = gzip.decompress(read_corpus(name)), 0, 0
    while i < len(data):
        key, i = pb_varint(data, i)
        if key & 7 == 0:
            _, i = pb_varint(data, i)
        elif key & 7 == 2:
            length, i = pb_varint(data, i)
            i += length
            n += key >> 3 == 2
        else:
            raise ValueError("wire type %d" % (key & 7))
    return n


def wait_delivered(a, b, at_least, timeout=60):
    """Until A's queue is empty, nothing is in flight, and every request A sent
    was accepted by B, twice in a row with the same count."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ma, mb = metrics(a), metrics(b)
        sent = msum(ma, "flamecol_exporter_sent_requests_total", exporter="pyroscope")
        idle = msum(ma, "flamecol_exporter_queue_size", exporter="pyroscope") == 0 and \
            msum(ma, "flamecol_exporter_in_flight_requests", exporter="pyroscope") == 0
        got = msum(mb, "flamecol_receiver_accepted_requests_total", receiver="pprof")
        if idle and sent >= at_least and got == sent and last == sent:
            return ma, mb
        last = sent if idle and got == sent else None
        time.sleep(0.1)
    raise AssertionError("not delivered after %ss:\nA:\n%s\nB:\n%s" % (timeout, a.log(), b.log()))


def push_v1(base, labels, raw, tenant=None):
    """A PushRequest by hand (push.proto: series=1; labels=1 {name=1, value=2};
    samples=2 {raw_profile=1, ID=2})."""
    series = b"".join(pb_ld(1, pb_ld(1, k.encode()) + pb_ld(2, v.encode())) for k, v in labels)
    series += pb_ld(2, pb_ld(1, raw) + pb_ld(2, b"6a8f1c2e-0000-4000-8000-000000000001"))
    headers = {"Content-Type": "application/proto"}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    return http("POST", base + "/push.v1.PusherService/Push", pb_ld(1, series), headers)


SPAN_AB, SPAN_CD = "00000000000000ab", "00000000000000cd"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def labelled_pprof():
    """profile.proto by hand: sample_type samples:count; functions main, a, b;
    samples a<-main 3 (span ab, trace, worker=w1), b<-main 5 (span cd),
    main 7 (no labels)."""
    strings = [b"", b"samples", b"count", b"main", b"a", b"b", b"span_id", SPAN_AB.encode(),
               SPAN_CD.encode(), b"trace_id", TRACE.encode(), b"worker", b"w1"]
    msg = pb_ld(1, pb_vi(1, 1) + pb_vi(2, 2))
    for fid, name in ((1, 3), (2, 4), (3, 5)):
        msg += pb_ld(5, pb_vi(1, fid) + pb_vi(2, name))
        msg += pb_ld(4, pb_vi(1, fid) + pb_ld(4, pb_vi(1, fid)))
    label = lambda k, v: pb_ld(3, pb_vi(1, k) + pb_vi(2, v))
    msg += pb_ld(2, pb_packed(1, [2, 1]) + pb_packed(2, [3]) + label(6, 7) + label(9, 10) + label(11, 12))
    msg += pb_ld(2, pb_packed(1, [3, 1]) + pb_packed(2, [5]) + label(6, 8))
    msg += pb_ld(2, pb_packed(1, [1]) + pb_packed(2, [7]))
    return msg + b"".join(pb_ld(6, s) for s in strings)


class Pair:
    """B (store) and A (exporting to B) started together; stopped cleanly. With tls_port,
    B's pprof receiver listens there (its b_extra holding a tls block) and A sends to
    https://127.0.0.1:tls_port; B's query API stays on its own plaintext port."""

    def __init__(self, protocol, a_extra="", b_extra="", tls_port=None):
        text = B_CONFIG % b_extra
        if tls_port:
            text = text.replace("127.0.0.1:{port}", "127.0.0.1:%d" % tls_port, 1)
        self.b = Collector(text)
        self.otlp_port = free_port()
        target = "https://127.0.0.1:%d/" % tls_port if tls_port else \
            "http://127.0.0.1:%d/" % self.b.ports["port"]
        self.a = Collector(A_CONFIG % (self.otlp_port, target, protocol, a_extra))

    def __enter__(self):
        self.b.wait_ready()
        self.a.wait_ready()
        return self

    def __exit__(self, *exc):
        self.a.__exit__()
        self.b.__exit__()

    def stop(self, test):
        test.assertEqual(self.a.stop(), 0, self.a.log())
        test.assertEqual(self.b.stop(), 0, self.b.log())


def go_sdk_push(base, name, service, tenant, labels="env=test"):
    ctype, body = multipart([("profile", "profile.pprof", "application/octet-stream",
                              read_corpus(name))])
    q = urllib.parse.urlencode({"name": "%s{%s}" % (service, labels), "from": "1700000000",
                                "until": "1700000010", "spyName": "gospy", "sampleRate": "100"})
    headers = {"Content-Type": ctype}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    return http("POST", base + "/ingest?" + q, body, headers)


class ExportPyroscopeTest(unittest.TestCase):
    def corpus(self, protocol):
        files = corpus_files()
        self.assertEqual(sorted(files), sorted(NAMES))
        with Pair(protocol) as p:
            sent = {t: {} for t in TENANTS + ("anonymous",)}
            for i, name in enumerate(files):
                tenant = TENANTS[i % 2]
                svc = "svc-%d" % i
                status, _, text = go_sdk_push(p.a.base, name, svc, tenant,
                                              "env=test,file=%s" % name.replace("-", "_"))
                self.assertEqual(status, 200, "%s: %s" % (name, text))
                sent[tenant][svc] = name
            for name in OTLP_FILES:
                svc = "otlp-" + name
                status, _, text = http("POST", "http://127.0.0.1:%d/v1development/profiles" % p.otlp_port,
                                       convert(name, "otlp", "service_name=" + svc),
                                       {"Content-Type": "application/x-protobuf"})
                self.assertEqual(status, 200, text)
                sent["anonymous"][svc] = name
            ma, mb = wait_delivered(p.a, p.b, len(files) + len(OTLP_FILES))
            if protocol == "push":
                # One request per batch: one per push into A.
                self.assertEqual(msum(ma, "flamecol_exporter_sent_requests_total", exporter="pyroscope"),
                                 len(files) + len(OTLP_FILES))
            self.assertEqual(msum(ma, "flamecol_exporter_send_failed_profile_samples_total",
                                  exporter="pyroscope"), 0)
            self.assertEqual(msum(ma, "flamecol_exporter_retries_total", exporter="pyroscope"), 0)
            self.assertEqual(msum(ma, "flamecol_exporter_sent_profile_samples_total", exporter="pyroscope"),
                             msum(mb, "flamecol_receiver_accepted_profile_samples_total", receiver="pprof"))

            for tenant, services in sent.items():
                # Tenants travel: each holds exactly its own services.
                self.assertEqual(label_values(p.b, "service_name", tenant), sorted(services), tenant)
                for svc, name in services.items():
                    got = stored(p.b, tenant, svc)
                    want = expected(name, protocol == "push" and tenant == "anonymous")
                    # Each source sample type once, with pprof -top's total and flat rows.
                    self.assertEqual(sorted(got), sorted(want), "%s %s: sample types" % (svc, name))
                    for t in want:
                        self.assertEqual(entries(got[t]), entries(want[t]), "%s %s %s" % (svc, name, t))
                    if tenant != "anonymous":
                        # __name__ is the profile type's first part.
                        self.assertEqual({t.split(":")[0] for t in profile_types(p.b, tenant, svc)},
                                         {NAMES[name]}, svc)
            # Series labels arrived.
            for i, tenant in enumerate(TENANTS):
                names = connect(p.b, "LabelNames", {"matchers": ["{}"]}, tenant)["names"]
                for label in ("service_name", "env", "file", "pyroscope_spy"):
                    self.assertIn(label, names, tenant)
                self.assertEqual(label_values(p.b, "env", tenant), ["test"])
                self.assertEqual(label_values(p.b, "pyroscope_spy", tenant), ["gospy"])
                self.assertEqual(label_values(p.b, "file", tenant),
                                 sorted(n.replace("-", "_") for n in files[i::2]))
            p.stop(self)

    def test_corpus_push(self):
        self.corpus("push")

    def test_corpus_ingest(self):
        self.corpus("ingest")

    def test_tenant_id_overrides(self):
        with Pair("push", "    tenant_id: fixed\n") as p:
            for tenant, (svc, name) in zip(TENANTS, (("f1", "go-1s-cpu"), ("f2", "node-1s-heap"))):
                status, _, text = go_sdk_push(p.a.base, name, svc, tenant)
                self.assertEqual(status, 200, text)
            wait_delivered(p.a, p.b, 2)
            self.assertEqual(label_values(p.b, "service_name", "fixed"), ["f1", "f2"])
            for tenant in TENANTS + ("anonymous",):
                self.assertEqual(label_values(p.b, "service_name", tenant), [], tenant)
            self.assertEqual(entries(stored(p.b, "fixed", "f1")["cpu"]),
                             entries(expected("go-1s-cpu")["cpu"]))
            p.stop(self)

    def labels_and_spans(self, protocol):
        with Pair(protocol) as p:
            labels = [("__name__", "custom"), ("service_name", "spansvc"), ("team", "x"),
                      ("__secret__", "s")]
            status, _, text = push_v1(p.a.base, labels, gzip.compress(labelled_pprof()), "t1")
            self.assertEqual(status, 200, text)
            wait_delivered(p.a, p.b, 1)
            types = profile_types(p.b, "t1", "spansvc")
            # push keeps __name__; over /ingest the server derives it (samples -> process_cpu).
            name = "custom" if protocol == "push" else "process_cpu"
            self.assertEqual(types, [name + ":samples:count::"])
            names = connect(p.b, "LabelNames", {"matchers": ["{}"]}, "t1")["names"]
            self.assertIn("team", names)
            self.assertNotIn("__secret__", names)
            self.assertEqual(label_values(p.b, "worker", "t1"), ["w1"])
            end = str(int(time.time() * 1000) + 60000)
            base = {"profileTypeID": types[0], "labelSelector": '{service_name="spansvc"}',
                    "start": "0", "end": end}
            total = lambda body: int(body.get("flamegraph", {}).get("total", 0))
            self.assertEqual(total(connect(p.b, "SelectMergeStacktraces", base, "t1")), 15)
            sel = dict(base, labelSelector='{service_name="spansvc",worker="w1"}')
            self.assertEqual(total(connect(p.b, "SelectMergeStacktraces", sel, "t1")), 3)
            for spans, want in (([SPAN_AB], 3), ([SPAN_CD], 5), ([SPAN_AB, SPAN_CD], 8),
                                (["00000000000000ef"], 0)):
                body = connect(p.b, "SelectMergeSpanProfile", dict(base, spanSelector=spans), "t1")
                self.assertEqual(total(body), want, spans)
            body = connect(p.b, "SelectMergeStacktraces", dict(base, traceIdSelector=[TRACE]), "t1")
            self.assertEqual(total(body), 3)
            p.stop(self)

    def test_labels_and_spans_push(self):
        self.labels_and_spans("push")

    def test_labels_and_spans_ingest(self):
        self.labels_and_spans("ingest")

    def test_ingest_refuses_what_name_cannot_carry(self):
        with Pair("ingest") as p:
            raw = gzip.compress(labelled_pprof())
            status, _, text = push_v1(p.a.base, [("service_name", "svc"), ("hosts", "a,b")], raw)
            self.assertEqual(status, 400, text)
            msg = json.loads(text)["message"]
            self.assertIn("hosts", msg)
            self.assertIn("protocol push", msg)
            m = metrics(p.a)
            self.assertEqual(msum(m, "flamecol_exporter_send_failed_profile_samples_total",
                                  exporter="pyroscope", error_type="unrepresentable"), 3)
            self.assertEqual(msum(m, "flamecol_receiver_refused_requests_total", receiver="pprof"), 1)
            # What it can carry goes through.
            status, _, text = push_v1(p.a.base, [("service_name", "svc"), ("hosts", "a;b")], raw)
            self.assertEqual(status, 200, text)
            wait_delivered(p.a, p.b, 1)
            self.assertEqual(label_values(p.b, "hosts"), ["a;b"])
            p.stop(self)

    def auth(self, b_auth, a_auth, delivered):
        with Pair("push", a_auth, b_auth) as p:
            status, _, text = go_sdk_push(p.a.base, "go-1s-cpu", "authsvc", "t1")
            self.assertEqual(status, 200, text)  # A queued it
            if delivered:
                wait_delivered(p.a, p.b, 1)
                self.assertEqual(entries(stored(p.b, "t1", "authsvc")["cpu"]),
                                 entries(expected("go-1s-cpu")["cpu"]))
            else:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    m = metrics(p.a)
                    if msum(m, "flamecol_exporter_send_failed_profile_samples_total",
                            exporter="pyroscope", error_type="http_401") > 0:
                        break
                    time.sleep(0.05)
                # Permanent: counted once, never retried (the retry interval is 100 ms).
                time.sleep(1.0)
                m, mb = metrics(p.a), metrics(p.b)
                self.assertEqual(msum(m, "flamecol_exporter_send_failed_profile_samples_total",
                                      exporter="pyroscope", error_type="http_401"),
                                 sample_count("go-1s-cpu"), p.a.log())
                self.assertEqual(msum(m, "flamecol_exporter_sent_requests_total", exporter="pyroscope"), 0)
                self.assertEqual(msum(m, "flamecol_exporter_retries_total", exporter="pyroscope"), 0)
                self.assertEqual(msum(m, "flamecol_exporter_queue_size", exporter="pyroscope"), 0)
                # B's legacy auth keys are checked by its authenticator: refusals counted there.
                self.assertEqual(msum(mb, "flamecol_auth_refusals_total"), 1)
                self.assertEqual(msum(mb, "flamecol_receiver_accepted_requests_total", receiver="pprof"), 0)
            p.stop(self)

    def test_bearer_token(self):
        b = "    auth:\n      bearer_token: s3cret\n"
        self.auth(b, "    bearer_token: s3cret\n", True)
        self.auth(b, "    bearer_token: wrong\n", False)
        self.auth(b, "", False)

    def test_basic_auth(self):
        b = "    auth:\n      basic: {username: alice, password: pa55}\n"
        self.auth(b, "    basic_auth: {username: alice, password: pa55}\n", True)
        self.auth(b, "    basic_auth: {username: alice, password: nope}\n", False)

    def test_https_mtls(self):
        # B's pprof receiver over TLS, requiring a client certificate of the test CA (the
        # certificates are test_tls_listeners' PKI, made by openssl); A's exporter trusts
        # the CA (ca_file) and shows client.crt (cert_file, key_file).
        from test_tls_listeners import PKI, tls_block
        b_extra = tls_block(client_ca="ca", indent=4) + "\n"
        tls = lambda client: "    tls:\n      ca_file: %s\n%s" % (PKI("ca.crt"), (
            "      cert_file: %s\n      key_file: %s\n" % (PKI(client + ".crt"),
                                                        PKI(client + ".key"))) if client else "")
        for protocol in ("push", "ingest"):
            with Pair(protocol, tls("client"), b_extra, free_port()) as p:
                status, _, text = go_sdk_push(p.a.base, "go-1s-cpu", "mtlssvc", "t1")
                self.assertEqual(status, 200, text)
                wait_delivered(p.a, p.b, 1)
                self.assertEqual(entries(stored(p.b, "t1", "mtlssvc")["cpu"]),
                                 entries(expected("go-1s-cpu")["cpu"]), protocol)
                p.stop(self)
        # No client certificate, or one of another CA: B refuses the handshake, nothing
        # arrives (A retries: a transport error is not permanent).
        for client in (None, "other-client"):
            with Pair("push", tls(client), b_extra, free_port()) as p:
                status, _, text = go_sdk_push(p.a.base, "go-1s-cpu", "nocert", "t1")
                self.assertEqual(status, 200, text)
                deadline = time.monotonic() + 30
                while msum(metrics(p.a), "flamecol_exporter_retries_total",
                           exporter="pyroscope") == 0:
                    self.assertLess(time.monotonic(), deadline, p.a.log())
                    time.sleep(0.05)
                m, mb = metrics(p.a), metrics(p.b)
                self.assertEqual(msum(m, "flamecol_exporter_sent_requests_total",
                                      exporter="pyroscope"), 0, client)
                self.assertEqual(msum(mb, "flamecol_receiver_accepted_requests_total",
                                      receiver="pprof"), 0, client)
                self.assertEqual(label_values(p.b, "service_name", "t1"), [], client)
                p.stop(self)

    def test_config_errors(self):
        cases = (
            ("endpoint: 127.0.0.1:4040", 'endpoint "127.0.0.1:4040": expected http(s)://host:port'),
            ("{}", "missing required key 'endpoint'"),
            ("endpoint: http://h:1\n    bearer_token: t\n    basic_auth: {username: u}",
             "set bearer_token or basic_auth, not both"),
            ("endpoint: http://h:1\n    tenant_id: \"a b\"", 'tenant_id: tenant id "a b"'),
            ("endpoint: http://h:1\n    protocol: grpc", '"grpc" is not one of push|ingest'),
        )
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.yaml")
            for block, want in cases:
                with open(path, "w") as f:
                    f.write("receivers: {pprof: {}}\nexporters:\n  pyroscope:\n    %s\n"
                            "service: {pipelines: {profiles: {receivers: [pprof], exporters: [pyroscope]}}}\n"
                            % block)
                r = subprocess.run([BIN, "validate", "--config", path], capture_output=True, text=True)
                self.assertEqual(r.returncode, 1, block)
                self.assertIn(want, r.stderr, block)


if __name__ == "__main__":
    unittest.main()
