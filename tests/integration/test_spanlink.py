"""The spanlink processor (issue 15) with a real process.

One flamecol, two pipelines:
  pprof  -> spanlink(to: links)  -> otlp exporter (a scripted gRPC peer) + store
  otlp   -> spanlink(to: labels) -> pyroscope exporter (ingest, a scripted HTTP peer) + store

1. A pprof built here, whose samples carry span ids as the integrations send
   them (16 hex digits, decimal) plus one that is not an id, leaves as OTLP
   with one Link per span and no span_id/trace_id attributes left, the
   malformed label left as it came (the OTLP encoder alone would not turn a
   decimal span id into a Link).
2. An OTLP request built here with Links leaves as pprof with span_id /
   trace_id labels; a sample whose Link disagrees with its span_id attribute
   leaves with the Link's span (the Link wins; counted).
3. The store's SelectMergeSpanProfile answers exactly the linked samples,
   both ways in: its flame graph (every path's total and self) is the one of
   their own stacks (main -> leaf), worked out by hand.
4. KeepSpanNameTest: pprof -> spanlink(to: labels) -> store, with
   `keep_span_name: true` the store's label names have span_name (one series
   per span name, with its samples' total) and never span_id / trace_id;
   with `false` none of the three, one series.
Expected values are this file's inputs, worked out by hand.
"""
import gzip
import json
import time
import unittest
import urllib.parse

from fake_peers import GrpcPeer, HttpPeer
from harness import (Collector, flamegraph_paths, free_port, http, multipart, pb_fields, pb_ld,
                     pb_packed, pb_varints, pb_vi)
from test_export_otlp import resolve, to_json_shape

T0 = 1700000000
SPAN = "0123456789abcdef"
SPAN_DEC = "81985529216486895"  # = 0x0123456789abcdef
TRACE = "00112233445566778899aabbccddeeff"
SPAN42 = "000000000000002a"
OTHER = "00000000000000ff"

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%(otlp_port)d
processors:
  spanlink/links:
    to: links
  spanlink/labels:
    to: labels
exporters:
  otlp:
    endpoint: %(grpc)s
    tls:
      insecure: true
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms}
  pyroscope:
    endpoint: %(http)s
    protocol: ingest
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms}
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:%(query_port)d
      max_query_length: 0
service:
  pipelines:
    profiles/pprof:
      receivers: [pprof]
      processors: [spanlink/links]
      exporters: [otlp, store]
    profiles/otlp:
      receivers: [otlp]
      processors: [spanlink/labels]
      exporters: [pyroscope, store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

# pprof in: (leaf function, value, labels)
PPROF_SAMPLES = [
    ("hexspan", 5, [("worker", "w1"), ("span_id", SPAN), ("trace_id", TRACE)]),
    ("decspan", 3, [("span_id", "42")]),
    ("decspan2", 11, [("span_id", SPAN_DEC)]),
    ("nospan", 7, [("worker", "w2")]),
    ("badspan", 2, [("span_id", "xyz")]),
]

# OTLP in: (leaf function, value, attributes, link (trace, span) or None)
OTLP_SAMPLES = [
    ("linked", 13, [("worker", "w3")], (TRACE, SPAN)),
    ("linked42", 17, [], ("0" * 32, SPAN42)),
    ("conflict", 19, [("span_id", OTHER)], ("0" * 32, SPAN42)),
    ("plain", 23, [], None),
]


def pprof_body(samples=None):
    """samples:count, a stack of two frames per sample (its own leaf function, then main),
    labels as given."""
    strings = [""]

    def s(w):
        if w not in strings:
            strings.append(w)
        return strings.index(w)

    p = pb_ld(1, pb_vi(1, s("samples")) + pb_vi(2, s("count")))
    root = len(PPROF_SAMPLES) + 1  # location and function "main", every stack's root
    p += pb_ld(4, pb_vi(1, root) + pb_ld(4, pb_vi(1, root)))
    p += pb_ld(5, pb_vi(1, root) + pb_vi(2, s("main")))
    for i, (name, value, labels) in enumerate(samples or PPROF_SAMPLES, 1):
        sm = pb_packed(1, [i, root]) + pb_packed(2, [value])
        for k, v in labels:
            sm += pb_ld(3, pb_vi(1, s(k)) + pb_vi(2, s(v)))
        p += pb_ld(2, sm)
        p += pb_ld(4, pb_vi(1, i) + pb_ld(4, pb_vi(1, i)))      # location i -> function i
        p += pb_ld(5, pb_vi(1, i) + pb_vi(2, s(name)))          # function i
    p += pb_vi(9, T0 * 10**9) + pb_vi(10, 10**9)
    return p + b"".join(pb_ld(6, w.encode()) for w in strings)


def otlp_body(service):
    """An ExportProfilesServiceRequest (v1development): one profile of samples:count."""
    strings = [""]

    def s(w):
        if w not in strings:
            strings.append(w)
        return strings.index(w)

    attrs, links = [], []
    d_loc, d_fn, d_stack, d_attr, d_link = b"", b"", b"", b"", b""
    samples = b""
    root = len(OTLP_SAMPLES) + 1  # location and function "main", every stack's root
    for i, (name, value, sattrs, link) in enumerate(OTLP_SAMPLES, 1):
        d_fn += pb_ld(3, pb_vi(1, s(name)))
        d_loc += pb_ld(2, pb_ld(3, pb_vi(1, i)))
        d_stack += pb_ld(7, pb_packed(1, [i, root]))
        sm = pb_vi(1, i)
        idx = []
        for kv in sattrs:
            if kv not in attrs:
                attrs.append(kv)
                d_attr += pb_ld(6, pb_vi(1, s(kv[0])) + pb_ld(2, pb_ld(1, kv[1].encode())))
            idx.append(1 + attrs.index(kv))
        if idx:
            sm += pb_packed(2, idx)
        if link:
            if link not in links:
                links.append(link)
                d_link += pb_ld(4, pb_ld(1, bytes.fromhex(link[0])) + pb_ld(2, bytes.fromhex(link[1])))
            sm += pb_vi(3, 1 + links.index(link))
        samples += pb_ld(2, sm + pb_packed(4, [value]))
    d_fn += pb_ld(3, pb_vi(1, s("main")))
    d_loc += pb_ld(2, pb_ld(3, pb_vi(1, root)))
    d = pb_ld(1, b"") + pb_ld(2, b"") + d_loc + pb_ld(3, b"") + d_fn + pb_ld(4, b"") + d_link
    d += pb_ld(6, b"") + d_attr + pb_ld(7, b"") + d_stack
    vt = pb_vi(1, s("samples")) + pb_vi(2, s("count"))
    pr = pb_ld(1, vt) + samples
    pr += bytes([3 << 3 | 1]) + (T0 * 10**9).to_bytes(8, "little")  # time_unix_nano (fixed64)
    pr += pb_vi(4, 10**9) + pb_ld(5, vt) + pb_vi(6, 1)
    d += b"".join(pb_ld(5, w.encode()) for w in strings)
    svc = pb_ld(1, b"service.name") + pb_ld(2, pb_ld(1, service.encode()))
    rp = pb_ld(1, pb_ld(1, svc)) + pb_ld(2, pb_ld(2, pr))
    return pb_ld(1, rp) + pb_ld(2, d)


def pprof_samples(data):
    """A pprof -> [(leaf function, value, {label: value})]."""
    f = pb_fields(data)
    strings = [w.decode() for w in f.get(6, [])]
    fn = {}
    for m in f.get(5, []):
        x = pb_fields(m)
        fn[x[1][0]] = strings[x.get(2, [0])[0]]
    loc = {}
    for m in f.get(4, []):
        x = pb_fields(m)
        loc[x[1][0]] = fn[pb_fields(x[4][0])[1][0]]
    out = []
    for m in f.get(2, []):
        x = pb_fields(m)
        labels = {}
        for lm in x.get(3, []):
            y = pb_fields(lm)
            labels[strings[y[1][0]]] = strings[y[2][0]] if 2 in y else y.get(3, [None])[0]
        out.append((loc[pb_varints(x[1])[0]], sum(pb_varints(x[2])), labels))
    return sorted(out)


def tree(leaves):
    """The flame graph paths of samples main -> leaf with the given values, by hand (no
    sample: the root alone, 0)."""
    total = sum(leaves.values())
    out = {"total": [total, 0]}
    if leaves:
        out["total;main"] = [total, 0]
    for leaf, v in leaves.items():
        out["total;main;" + leaf] = [v, v]
    return out


def wait_for(fn, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class SpanlinkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc = GrpcPeer().start()
        cls.http = HttpPeer().start()
        cls.query_port, otlp_port = free_port(), free_port()
        cls.otlp_url = "http://127.0.0.1:%d/v1development/profiles" % otlp_port
        cls.c = Collector(CONFIG % {"otlp_port": otlp_port, "grpc": cls.grpc.endpoint,
                                    "http": cls.http.url, "query_port": cls.query_port})
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        rc = cls.c.stop()
        cls.grpc.stop()
        cls.http.stop()
        assert rc == 0, cls.c.log()

    def metric(self, name, proc):
        lab = 'processor="%s",pipeline="%s"' % proc
        return self.c.metric("flamecol_processor_spanlink_%s_total" % name, lab) or 0

    def span_flame(self, service, spans):
        """{root-first path: [total, self]} of SelectMergeSpanProfile's flame graph."""
        q = "http://127.0.0.1:%d/querier.v1.QuerierService/" % self.query_port
        _, _, body = http("POST", q + "LabelValues",
                          json.dumps({"name": "__profile_type__",
                                      "matchers": ['{service_name="%s"}' % service]}).encode(),
                          {"Content-Type": "application/json"})
        t = json.loads(body)["names"][0]
        req = {"profileTypeID": t, "labelSelector": '{service_name="%s"}' % service, "start": "0",
               "end": str(int(time.time() * 1000)), "spanSelector": spans}
        status, _, body = http("POST", q + "SelectMergeSpanProfile", json.dumps(req).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        fg = json.loads(body).get("flamegraph", {})
        levels = [level.get("values", []) for level in fg.get("levels", [])]
        paths = flamegraph_paths(fg.get("names", []), levels)
        self.assertEqual(sum(v[0] for p, v in paths.items() if ";" not in p),
                         int(fg.get("total", 0)))
        return paths

    def span_flames(self, service, selectors):
        """The span flame graphs of each selector, once the store has the first one."""
        return wait_for(lambda: self.span_flame(service, selectors[0])["total"][0] and
                        [self.span_flame(service, s) for s in selectors], "the store")

    def test_pprof_labels_become_links(self):
        ctype, body = multipart([("profile", "profile.pprof", None, gzip.compress(pprof_body()))])
        status, _, text = http("POST", self.c.base + "/ingest?name=pprofsvc&from=%d" % T0, body,
                               {"Content-Type": ctype})
        self.assertEqual(status, 200, text)
        req = self.grpc.wait_requests(1)[0]
        got = resolve(to_json_shape("Request", req.body))
        flat = {}
        for (t, u), samples in got.items():
            self.assertEqual((t, u), ("samples", "count"))
            for (frames, labels, link), v in samples.items():
                flat[frames[0][6][0][0]] = (v, dict(labels), link)
        self.assertEqual(flat, {
            "hexspan": (5, {"worker": "w1"}, (TRACE, SPAN)),
            "decspan": (3, {}, ("0" * 32, SPAN42)),
            "decspan2": (11, {}, ("0" * 32, SPAN)),
            "nospan": (7, {"worker": "w2"}, None),
            "badspan": (2, {"span_id": "xyz"}, None),
        })
        proc = ("spanlink/links", "profiles/pprof")
        self.assertEqual(self.metric("linked_samples", proc), 3)
        self.assertEqual(self.metric("malformed_labels", proc), 1)
        # The store: the span index has the linked samples, exactly, with their own stacks.
        got = self.span_flames("pprofsvc", [[SPAN], [SPAN42], [SPAN, SPAN42], [OTHER]])
        self.assertEqual(got, [tree({"hexspan": 5, "decspan2": 11}), tree({"decspan": 3}),
                               tree({"hexspan": 5, "decspan2": 11, "decspan": 3}), tree({})])

    def test_otlp_links_become_labels(self):
        status, _, text = http("POST", self.otlp_url, otlp_body("otlpsvc"),
                               {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 200, text)
        req = self.http.wait_requests(1)[0]
        self.assertTrue(req.path.startswith("/ingest?"), req.path)
        got = pprof_samples(gzip.decompress(req.body))
        self.assertEqual(got, sorted([
            ("linked", 13, {"worker": "w3", "span_id": SPAN, "trace_id": TRACE}),
            ("linked42", 17, {"span_id": SPAN42}),
            ("conflict", 19, {"span_id": SPAN42}),  # the Link won over span_id=...ff
            ("plain", 23, {}),
        ]))
        proc = ("spanlink/labels", "profiles/otlp")
        self.assertEqual(self.metric("labeled_samples", proc), 3)
        self.assertEqual(self.metric("conflicts", proc), 1)
        got = self.span_flames("otlpsvc", [[SPAN], [SPAN42], [OTHER]])
        self.assertEqual(got, [tree({"linked": 13}), tree({"linked42": 17, "conflict": 19}),
                               tree({})])


KEEP_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  spanlink:
    to: labels
    keep_span_name: %s
exporters:
  store:
    path: {dir}/data
    retention: 0
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof]
      processors: [spanlink]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

# Samples with span_name (as Pyroscope's integrations set it) besides their span ids.
NAMED_SAMPLES = [
    ("named_a", 5, [("span_id", SPAN), ("trace_id", TRACE), ("span_name", "GET /a")]),
    ("named_b", 3, [("span_id", "42"), ("span_name", "GET /b")]),
    ("unnamed", 7, [("worker", "w1")]),
]


class KeepSpanNameTest(unittest.TestCase):
    def connect(self, c, method, req):
        status, _, body = http("POST", c.base + "/querier.v1.QuerierService/" + method,
                               json.dumps(req).encode(), {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def stored(self, keep):
        """(label names, span_name values, {span_name: total}) of the store after one push."""
        with Collector(KEEP_CONFIG % ("true" if keep else "false")) as c:
            c.wait_ready()
            ctype, body = multipart([("profile", "profile.pprof", None,
                                      gzip.compress(pprof_body(NAMED_SAMPLES)))])
            status, _, text = http("POST", c.base + "/ingest?name=svc&from=%d" % T0, body,
                                   {"Content-Type": ctype})
            self.assertEqual(status, 200, text)
            match = ['{service_name="svc"}']
            names = wait_for(lambda: self.connect(c, "LabelNames", {"matchers": match})
                             .get("names"), "the store")
            values = self.connect(c, "LabelValues", {"name": "span_name", "matchers": match})
            [ptype] = self.connect(c, "LabelValues", {"name": "__profile_type__",
                                                      "matchers": match})["names"]
            totals = {}
            for v in values.get("names", []) + [""]:
                q = urllib.parse.urlencode({
                    "query": '%s{service_name="svc",span_name="%s"}' % (ptype, v),
                    "from": str(T0 - 60), "until": str(T0 + 60)})
                status, _, text = http("GET", c.base + "/pyroscope/render?" + q)
                self.assertEqual(status, 200, text)
                totals[v] = json.loads(text)["flamebearer"]["numTicks"]
            self.assertEqual(c.stop(), 0, c.log())
        return sorted(names), sorted(values.get("names", [])), totals

    def test_keep_span_name_makes_it_a_series_label_ids_never(self):
        names, values, totals = self.stored(keep=True)
        self.assertIn("span_name", names)
        self.assertNotIn("span_id", names)
        self.assertNotIn("trace_id", names)
        self.assertEqual(values, ["GET /a", "GET /b"])
        self.assertEqual(totals, {"GET /a": 5, "GET /b": 3, "": 7})  # one series per name
        names, values, totals = self.stored(keep=False)
        for label in ("span_name", "span_id", "trace_id"):
            self.assertNotIn(label, names)
        self.assertEqual(values, [])
        self.assertEqual(totals, {"": 5 + 3 + 7})  # one series


if __name__ == "__main__":
    unittest.main()
