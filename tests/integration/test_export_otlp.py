"""The `otlp` (gRPC) and `otlphttp` exporters with real processes.

1. flamecol A (pprof receiver -> exporter) forwards to flamecol B (otlp
   receiver -> store): every corpus file pushed into A is read back from B's
   /pyroscope/render and compared with the corpus's `pprof -top` references,
   over gRPC and over HTTP in protobuf and JSON with gzip / none (zstd goes
   through a scripted peer that relays the decompressed body to B: B's
   receiver takes gzip only).
2. OTLP in, OTLP out: a protobuf request the receiver left untouched is
   forwarded byte for byte (a field flamecol does not know survives; the
   client's gzip stream goes out as it came); one whose stacks were cut or
   whose profiles were partly rejected is encoded again from what was kept.
   A hand-made pprof (mappings, build id, inline frames, sample labels,
   span/trace ids) is forwarded to a scripted peer, and what the peer
   received is decoded here (field numbers of the OTLP .proto, or its JSON
   names) and compared with the profile as this file built it: every
   location, line, mapping, attribute and link arrives.
3. Scripted peers (fake_peers.py) answer 400, partial success, 429/503 with
   Retry-After, UNAVAILABLE / RESOURCE_EXHAUSTED with and without RetryInfo,
   slow answers, a closed port; the retries, waits, counters, logs, tenant
   and headers are checked. Expected values come from the OTLP spec's
   tables and this file's inputs.
4. TLS with certificates made here by openssl: CA-signed, wrong, name
   override, mTLS; HTTP and gRPC.
"""
import base64
import gzip
import json
import os
import shutil
import subprocess
import time
import unittest
import urllib.parse

import grpc

from fake_peers import (Answer, GrpcAnswer, GrpcPeer, HttpPeer, make_certs, partial_success_response,
                        read, rpc_status, server_ssl_context)
from harness import (scratch_dir, BIN, Collector, convert, corpus_files, free_port, http, multipart, parse_top, pb_fields,
                     pb_ld,
                     pb_packed, pb_put_varint, pb_varint, pb_varints, pb_vi, read_corpus)

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
T0 = 1700000000

A_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
%s
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [%s]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

B_CONFIG = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

# Short retries: the tests wait for them.
FAST = """    timeout: %s
    retry_on_failure:
      initial_interval: 100ms
      randomization_factor: 0
      max_interval: 200ms
      max_elapsed_time: %s
"""


def exporter(kind, endpoint, extra="", timeout="2s", max_elapsed="20s"):
    """The YAML of one exporter named kind."""
    return ("  %s:\n    endpoint: %s\n" % (kind, endpoint) + FAST % (timeout, max_elapsed) + extra)


def start_a(kind, endpoint, extra="", **kw):
    a = Collector(A_CONFIG % (exporter(kind, endpoint, extra, **kw), kind))
    a.wait_ready()
    return a


def stop_checked(test, a):
    """Stops A (if running) and checks it exited cleanly (ASan/UBSan/LSan fail the exit)."""
    rc = a.stop() if a.proc.poll() is None else a.proc.returncode
    test.assertEqual(rc, 0, a.log())


def wait_for(fn, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def push(a, data, name="svc", tenant=None):
    ctype, body = multipart([("profile", "profile.pprof", None, data)])
    headers = {"Content-Type": ctype}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    status, _, text = http("POST", a.base + "/ingest?name=%s&from=%d" % (name, T0), body, headers)
    assert status == 200, text


def metric(a, name, kind, **labels):
    lab = 'exporter="%s"' % kind + "".join(',%s="%s"' % kv for kv in labels.items())
    return a.metric(name, lab) or 0


def sent_requests(a, kind):
    return metric(a, "flamecol_exporter_sent_requests_total", kind)


def failed(a, kind, error_type, what="profile_samples"):
    return metric(a, "flamecol_exporter_send_failed_%s_total" % what, kind, error_type=error_type)


# ---- a pprof built here (proto/google/v1/profile.proto field numbers) --------------------------

SPAN = "0123456789abcdef"
TRACE = "00112233445566778899aabbccddeeff"
MAPPINGS = {  # id: (start, limit, offset, file, build id)
    1: (0x400000, 0x500000, 0, "/usr/bin/app", "abc123build"),
    2: (0x7f0000, 0x7f8000, 0x1000, "/lib/libc.so", ""),
}
FUNCTIONS = {  # id: (name, system name, file, start line)
    1: ("main", "main.main", "/src/main.go", 10),
    2: ("work", "main.work", "/src/main.go", 20),
    3: ("inlined", "pkg.inlined", "/src/pkg.go", 5),
    4: ("memcpy", "memcpy", "", 0),
}
LOCATIONS = {  # id: (mapping, address, [(function, line)] innermost first)
    1: (1, 0x401000, [(1, 12)]),
    2: (1, 0x402000, [(3, 7), (2, 25)]),
    3: (2, 0x7f1234, [(4, 0)]),
}
SAMPLES = [  # (locations leaf first, [samples/count, cpu/nanoseconds], labels)
    ([3, 2, 1], [5, 50000000], [("worker", "w1"), ("span_id", SPAN), ("trace_id", TRACE)]),
    ([2, 1], [3, 30000000], [("worker", "w2")]),
    ([1], [1, 10000000], []),
]
TYPES = [("samples", "count"), ("cpu", "nanoseconds")]


def fixture_pprof():
    strings = [""]

    def s(w):
        if w not in strings:
            strings.append(w)
        return strings.index(w)

    p = b""
    for t, u in TYPES:
        p += pb_ld(1, pb_vi(1, s(t)) + pb_vi(2, s(u)))
    for locs, values, labels in SAMPLES:
        sm = pb_packed(1, locs) + pb_packed(2, values)
        for k, v in labels:
            sm += pb_ld(3, pb_vi(1, s(k)) + pb_vi(2, s(v)))
        p += pb_ld(2, sm)
    for mid, (start, limit, off, f, bid) in MAPPINGS.items():
        m = pb_vi(1, mid) + pb_vi(2, start) + pb_vi(3, limit) + pb_vi(5, s(f))
        if off:
            m += pb_vi(4, off)
        if bid:
            m += pb_vi(6, s(bid))
        p += pb_ld(3, m)
    for lid, (mid, addr, lines) in LOCATIONS.items():
        l = pb_vi(1, lid) + pb_vi(2, mid) + pb_vi(3, addr)
        for fid, line in lines:
            l += pb_ld(4, pb_vi(1, fid) + (pb_vi(2, line) if line else b""))
        p += pb_ld(4, l)
    for fid, (name, sysname, f, start) in FUNCTIONS.items():
        fn = pb_vi(1, fid) + pb_vi(2, s(name)) + pb_vi(3, s(sysname))
        if f:
            fn += pb_vi(4, s(f))
        if start:
            fn += pb_vi(5, start)
        p += pb_ld(5, fn)
    s("cpu"), s("nanoseconds")
    tail = pb_vi(9, T0 * 10**9) + pb_vi(10, 10**9)
    tail += pb_ld(11, pb_vi(1, s("cpu")) + pb_vi(2, s("nanoseconds"))) + pb_vi(12, 10000000)
    return p + b"".join(pb_ld(6, w.encode()) for w in strings) + tail


def fixture_expected():
    """{(type, unit): {(frames, labels, link): value}} as this file built the pprof."""
    out = {}
    for ti, tu in enumerate(TYPES):
        got = out.setdefault(tu, {})
        for locs, values, labels in SAMPLES:
            frames = []
            for lid in locs:
                mid, addr, lines = LOCATIONS[lid]
                start, limit, off, f, bid = MAPPINGS[mid]
                frames.append((f, bid, start, limit, off, addr,
                               tuple(FUNCTIONS[fid] + (line,) for fid, line in lines)))
            plain = frozenset(kv for kv in labels if kv[0] not in ("span_id", "trace_id"))
            link = (TRACE, SPAN) if ("span_id", SPAN) in labels else None
            got[(tuple(frames), plain, link)] = values[ti]
    return out


# ---- OTLP as the peer received it, decoded here ---------------------------------------------

# message -> {field: (JSON name, type, repeated)}; types: a message name, int, str, hex, packed
SCHEMA = {
    "Request": {1: ("resourceProfiles", "ResourceProfiles", True), 2: ("dictionary", "Dictionary", False)},
    "ResourceProfiles": {1: ("resource", "Resource", False), 2: ("scopeProfiles", "ScopeProfiles", True)},
    "Resource": {1: ("attributes", "KeyValue", True)},
    "KeyValue": {1: ("key", "str", False), 2: ("value", "AnyValue", False), 3: ("keyStrindex", "int", False)},
    "AnyValue": {1: ("stringValue", "str", False), 2: ("boolValue", "int", False),
                 3: ("intValue", "int", False), 8: ("stringValueStrindex", "int", False)},
    "ScopeProfiles": {2: ("profiles", "Profile", True)},
    "Profile": {1: ("sampleType", "ValueType", False), 2: ("samples", "Sample", True),
                5: ("periodType", "ValueType", False), 6: ("period", "int", False)},
    "ValueType": {1: ("typeStrindex", "int", False), 2: ("unitStrindex", "int", False)},
    "Sample": {1: ("stackIndex", "int", False), 2: ("attributeIndices", "packed", True),
               3: ("linkIndex", "int", False), 4: ("values", "packed", True)},
    "Dictionary": {1: ("mappingTable", "Mapping", True), 2: ("locationTable", "Location", True),
                   3: ("functionTable", "Function", True), 4: ("linkTable", "Link", True),
                   5: ("stringTable", "str", True), 6: ("attributeTable", "KeyValueAndUnit", True),
                   7: ("stackTable", "Stack", True)},
    "Mapping": {1: ("memoryStart", "int", False), 2: ("memoryLimit", "int", False),
                3: ("fileOffset", "int", False), 4: ("filenameStrindex", "int", False),
                5: ("attributeIndices", "packed", True)},
    "Location": {1: ("mappingIndex", "int", False), 2: ("address", "int", False),
                 3: ("lines", "Line", True), 4: ("attributeIndices", "packed", True)},
    "Line": {1: ("functionIndex", "int", False), 2: ("line", "int", False)},
    "Function": {1: ("nameStrindex", "int", False), 2: ("systemNameStrindex", "int", False),
                 3: ("filenameStrindex", "int", False), 4: ("startLine", "int", False)},
    "Link": {1: ("traceId", "hex", False), 2: ("spanId", "hex", False)},
    "KeyValueAndUnit": {1: ("keyStrindex", "int", False), 2: ("value", "AnyValue", False),
                        3: ("unitStrindex", "int", False)},
    "Stack": {1: ("locationIndices", "packed", True)},
}


def to_json_shape(msg, data):
    """Protobuf bytes -> the dict OTLP JSON would give (lowerCamelCase names)."""
    out = {}
    for n, values in pb_fields(data).items():
        if n not in SCHEMA[msg]:
            continue
        name, typ, repeated = SCHEMA[msg][n]
        conv = []
        for v in values:
            if typ == "packed":
                conv.extend(pb_varints([v]))
                continue
            if typ in SCHEMA:
                conv.append(to_json_shape(typ, v))
            elif typ == "str":
                conv.append(v.decode())
            elif typ == "hex":
                conv.append(v.hex())
            else:
                conv.append(v)
        out[name] = conv if repeated else conv[-1]
    return out


def resolve(req):
    """An OTLP request (JSON shape) -> {(type, unit): {(frames, labels, link): value}}."""
    d = req["dictionary"]
    strings = d["stringTable"]
    st = lambda i: strings[int(i or 0)]
    attrs = d.get("attributeTable", [])

    def any_value(v):
        if "stringValue" in v:
            return v["stringValue"]
        if "stringValueStrindex" in v:
            return st(v["stringValueStrindex"])
        return None

    def attr(i):
        a = attrs[int(i)]
        return st(a.get("keyStrindex")), any_value(a.get("value", {}))

    def frame(li):
        loc = d["locationTable"][int(li)]
        m = d["mappingTable"][int(loc.get("mappingIndex", 0))]
        mattrs = dict(attr(i) for i in m.get("attributeIndices", []))
        lines = []
        for ln in loc.get("lines", []):
            f = d["functionTable"][int(ln.get("functionIndex", 0))]
            lines.append((st(f.get("nameStrindex")), st(f.get("systemNameStrindex")),
                          st(f.get("filenameStrindex")), int(f.get("startLine", 0)), int(ln.get("line", 0))))
        return (st(m.get("filenameStrindex")), mattrs.get("process.executable.build_id.gnu", ""),
                int(m.get("memoryStart", 0)), int(m.get("memoryLimit", 0)), int(m.get("fileOffset", 0)),
                int(loc.get("address", 0)), tuple(lines))

    out = {}
    for rp in req["resourceProfiles"]:
        for sp in rp.get("scopeProfiles", []):
            for p in sp.get("profiles", []):
                vt = p["sampleType"]
                got = out.setdefault((st(vt.get("typeStrindex")), st(vt.get("unitStrindex"))), {})
                for s in p.get("samples", []):
                    stack = d["stackTable"][int(s.get("stackIndex", 0))]
                    frames = tuple(frame(li) for li in stack.get("locationIndices", []))
                    labels = frozenset(attr(i) for i in s.get("attributeIndices", []))
                    link = None
                    if int(s.get("linkIndex", 0)):
                        k = d["linkTable"][int(s["linkIndex"])]
                        link = (k["traceId"].lower(), k["spanId"].lower())
                    key = (frames, labels, link)
                    got[key] = got.get(key, 0) + sum(int(v) for v in s.get("values", []))
    return out


# ---- B: the store, read back through the query API ------------------------------------------

def flamebearer_flat(doc):
    fb = doc["flamebearer"]
    flat = {}
    for level in fb["levels"]:
        for i in range(0, len(level), 4):
            name = fb["names"][level[i + 3]]
            flat[name] = flat.get(name, 0) + level[i + 2]
    return fb["numTicks"], flat


def top_flat(name, index):
    flat = {}
    for f, fn in parse_top(name)[index]["rows"]:
        flat[fn] = flat.get(fn, 0) + f
    return flat


class ForwardToFlamecolTest(unittest.TestCase):
    """A -> exporter -> B (a real flamecol with the store), checked against pprof -top."""

    @classmethod
    def setUpClass(cls):
        cls.b_grpc, cls.b_http = free_port(), free_port()
        cls.b = Collector(B_CONFIG.replace("{grpc}", str(cls.b_grpc)).replace("{http}", str(cls.b_http)))
        cls.b.wait_ready()
        cls.files = corpus_files()

    @classmethod
    def tearDownClass(cls):
        assert cls.b.stop() == 0, cls.b.log()

    def render(self, query):
        q = {"query": query, "from": "0", "until": "now", "maxNodes": "1048576"}
        status, _, body = http("GET", self.b.base + "/pyroscope/render?" + urllib.parse.urlencode(q))
        self.assertEqual(status, 200, body)
        return flamebearer_flat(json.loads(body))

    def forward_files(self, files, kind, endpoint, extra, prefix):
        a = start_a(kind, endpoint, extra)
        try:
            for i, name in enumerate(files):
                push(a, read_corpus(name), "%s-%d" % (prefix, i))
            wait_for(lambda: sent_requests(a, kind) == len(files), 60,
                     "%s: %d requests sent" % (kind, len(files)))
        finally:
            self.assertEqual(a.stop(), 0, a.log())

    def forward_corpus(self, kind, endpoint, extra, prefix):
        self.forward_files(self.files, kind, endpoint, extra, prefix)
        self.check_b(prefix)

    def check_b(self, prefix):
        status, _, body = http("GET", self.b.base + "/pyroscope/label-values?label=__profile_type__")
        types = json.loads(body)
        checked = 0
        for i, name in enumerate(self.files):
            for index, section in parse_top(name).items():
                want = top_flat(name, index)
                matches = []
                for t in types:
                    if t.split(":")[1] != section["type"]:
                        continue
                    total, flat = self.render('%s{service_name="%s-%d"}' % (t, prefix, i))
                    if total:
                        matches.append((t, total, flat))
                # Every sample type arrives once, with pprof -top's total and every flat row.
                self.assertEqual(len(matches), 1, "%s %s: %s" % (name, section["type"], [m[0] for m in matches]))
                t, total, flat = matches[0]
                self.assertEqual(total, section["total"], "%s %s" % (name, t))
                self.assertEqual({fn: flat.get(fn, 0) for fn in want}, want, "%s %s" % (name, t))
                checked += 1
        self.assertGreaterEqual(checked, 25)

    def test_cpu_pprof_is_not_counted_twice(self):
        """A Go CPU pprof (samples/count and cpu/nanoseconds, period cpu/nanoseconds)
        becomes two OTLP profiles that carry __name__=process_cpu: B's store keeps
        each under its own sample type, so the cpu total is pprof -top's, once."""
        self.forward_files(["go-1s-cpu"], "otlp", "127.0.0.1:%d" % self.b_grpc,
                           "    tls:\n      insecure: true\n", "twice")
        cpu = [i for i, s in parse_top("go-1s-cpu").items() if s["type"] == "cpu"][0]
        total, flat = self.render('process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="twice-0"}')
        self.assertEqual(total, parse_top("go-1s-cpu")[cpu]["total"])

    def test_otlp_grpc(self):
        self.forward_corpus("otlp", "127.0.0.1:%d" % self.b_grpc, "    tls:\n      insecure: true\n", "grpc")

    def test_otlp_grpc_uncompressed_http_scheme(self):
        self.forward_corpus("otlp", "http://127.0.0.1:%d" % self.b_grpc, "    compression: none\n", "grpcnone")

    def test_otlphttp_proto_gzip(self):
        self.forward_corpus("otlphttp", "http://127.0.0.1:%d" % self.b_http, "", "httpgz")

    def test_otlphttp_json_none(self):
        self.forward_corpus("otlphttp", "http://127.0.0.1:%d" % self.b_http,
                            "    encoding: json\n    compression: none\n", "httpjson")

    def test_otlphttp_json_gzip_proto_none(self):
        self.forward_corpus("otlp_http", "http://127.0.0.1:%d/" % self.b_http,
                            "    encoding: json\n", "httpjsongz")
        self.forward_corpus("otlphttp", "http://127.0.0.1:%d" % self.b_http,
                            "    compression: none\n", "httpnone")

    def test_otlphttp_zstd_through_a_relay(self):
        # B takes gzip only: a scripted peer undoes zstd and hands the body to B.
        b_url = "http://127.0.0.1:%d/v1development/profiles" % self.b_http

        def relay(req):
            assert req.header("content-encoding") == "zstd", req.headers
            headers = {"Content-Type": req.header("content-type")}
            if req.header("x-scope-orgid") is not None:  # none for the default tenant
                headers["X-Scope-OrgID"] = req.header("x-scope-orgid")
            status, _, body = http("POST", b_url, req.decoded(), headers)
            return Answer(status, body, content_type="application/x-protobuf")

        with HttpPeer(default=relay) as peer:
            self.forward_corpus("otlphttp", peer.url, "    compression: zstd\n", "httpzstd")
            self.assertEqual(len(peer.requests), len(self.files))


# ---- lossless forwarding, decoded here -------------------------------------------------------

class LosslessTest(unittest.TestCase):
    def forward(self, kind, peer, extra=""):
        a = start_a(kind, peer.endpoint if kind == "otlp" else peer.url, extra)
        try:
            push(a, gzip.compress(fixture_pprof()), "lossless", tenant="team-x")
            req = peer.wait_requests(1)[0]
            wait_for(lambda: sent_requests(a, kind) == 1, what="sent")
        finally:
            self.assertEqual(a.stop(), 0, a.log())
        return req

    def test_grpc(self):
        with GrpcPeer() as peer:
            req = self.forward("otlp", peer, "    tls:\n      insecure: true\n")
        self.assertEqual(req.path, METHOD)
        self.assertEqual(req.header("x-scope-orgid"), "team-x")
        self.assertEqual(resolve(to_json_shape("Request", req.body)), fixture_expected())

    def test_http_proto(self):
        with HttpPeer() as peer:
            req = self.forward("otlphttp", peer)
        self.assertEqual(req.path, "/v1development/profiles")
        self.assertEqual(req.header("content-type"), "application/x-protobuf")
        self.assertEqual(req.header("content-encoding"), "gzip")
        self.assertEqual(req.header("x-scope-orgid"), "team-x")
        self.assertEqual(resolve(to_json_shape("Request", req.decoded())), fixture_expected())

    def test_http_json(self):
        with HttpPeer() as peer:
            req = self.forward("otlphttp", peer, "    encoding: json\n    compression: none\n")
        self.assertEqual(req.header("content-type"), "application/json")
        self.assertIsNone(req.header("content-encoding"))
        self.assertEqual(resolve(json.loads(req.body)), fixture_expected())


# ---- OTLP in, OTLP out: the request's own bytes --------------------------------------------

PASS_CONFIG = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{port}
%s
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

UNKNOWN_FIELD = pb_vi(15, 7)  # a top-level field the OTLP .proto does not define (yet)


def bad_resource_profiles():
    """A ResourceProfiles whose one profile has a sample with stack_index 9999 (rejected alone)."""
    profile = pb_ld(1, pb_vi(1, 1) + pb_vi(2, 2)) + pb_ld(2, pb_vi(1, 9999) + pb_packed(4, [1]))
    return pb_ld(1, pb_ld(2, pb_ld(2, profile)))


def stacks_of(body):
    return [st.get("locationIndices", []) for st in
            to_json_shape("Request", body).get("dictionary", {}).get("stackTable", [])]


class PassThroughTest(unittest.TestCase):
    def forward(self, peer, bodies, kind="otlphttp", receiver_extra="", extra=""):
        """Posts each (body, gzipped) to a fresh A that forwards to peer; returns the answers
        and the requests the peer received."""
        yaml = PASS_CONFIG.replace("{grpc}", str(free_port())) % (
            receiver_extra, exporter(kind, peer.endpoint if kind == "otlp" else peer.url, extra),
            kind)
        a = Collector(yaml)
        answers = []
        try:
            a.wait_ready()
            for body, gzipped in bodies:
                headers = {"Content-Type": PROTO, "X-Scope-OrgID": "team-p"}
                if gzipped:
                    headers["Content-Encoding"] = "gzip"
                status, _, text = http("POST", a.base + "/v1development/profiles", body, headers)
                self.assertEqual(status, 200, text)
                answers.append(text)
            reqs = peer.wait_requests(len(bodies))
        finally:
            stop_checked(self, a)
        return answers, reqs

    def test_untouched_request_goes_out_byte_for_byte(self):
        raw = convert("go-1s-mutex", "otlp") + UNKNOWN_FIELD
        client_gz = gzip.compress(raw, compresslevel=9, mtime=0)  # not what flamecol's level 1 makes
        with HttpPeer() as peer:
            _, reqs = self.forward(peer, [(client_gz, True), (raw, False)])
        self.assertEqual(reqs[0].header("content-encoding"), "gzip")
        self.assertEqual(reqs[0].body, client_gz)  # the client's own gzip stream
        self.assertEqual(reqs[1].header("content-encoding"), "gzip")
        self.assertNotEqual(reqs[1].body, client_gz)
        self.assertEqual(reqs[1].decoded(), raw)  # compressed here, the same bytes inside
        self.assertEqual(reqs[0].header("x-scope-orgid"), "team-p")

    def test_untouched_request_over_grpc(self):
        raw = convert("go-1s-mutex", "otlp") + UNKNOWN_FIELD
        with GrpcPeer() as peer:
            _, reqs = self.forward(peer, [(gzip.compress(raw, mtime=0), True)], "otlp",
                                   extra="    tls:\n      insecure: true\n")
        self.assertEqual(reqs[0].body, raw)

    def test_trailing_bytes_after_gzip_are_not_forwarded(self):
        raw = convert("go-1s-mutex", "otlp")
        with HttpPeer() as peer:
            _, reqs = self.forward(peer, [(gzip.compress(raw, mtime=0) + b"\0\0junk", True)])
        self.assertEqual(reqs[0].decoded(), raw)
        self.assertFalse(reqs[0].body.endswith(b"junk"))

    def test_cut_stacks_are_encoded_again(self):
        raw = convert("go-1s-mutex", "otlp") + UNKNOWN_FIELD
        self.assertTrue(any(len(st) > 1 for st in stacks_of(raw)))
        with HttpPeer() as peer:
            _, reqs = self.forward(peer, [(gzip.compress(raw, mtime=0), True)],
                                   receiver_extra="    max_stack_depth: 1\n")
        got = reqs[0].decoded()
        self.assertFalse(got.endswith(UNKNOWN_FIELD))
        self.assertTrue(stacks_of(got))
        self.assertTrue(all(len(st) <= 1 for st in stacks_of(got)), stacks_of(got))

    def test_partly_rejected_request_is_encoded_again(self):
        raw = convert("go-1s-mutex", "otlp") + bad_resource_profiles()
        with HttpPeer() as peer:
            answers, reqs = self.forward(peer, [(gzip.compress(raw, mtime=0), True)])
        self.assertIn(b"9999", answers[0])  # partial success names the bad profile
        sent = to_json_shape("Request", reqs[0].decoded())
        self.assertEqual(len(sent["resourceProfiles"]), 1)
        for rp in sent["resourceProfiles"]:
            for sp in rp.get("scopeProfiles", []):
                for prof in sp.get("profiles", []):
                    for smp in prof.get("samples", []):
                        self.assertNotEqual(smp.get("stackIndex"), 9999)


# ---- scripted peers --------------------------------------------------------------------------

N_SAMPLES = len(SAMPLES)  # the fixture's samples (each with both sample types)
PROTO = "application/x-protobuf"


class HttpAnswersTest(unittest.TestCase):
    def run_a(self, peer, extra="", **kw):
        a = start_a("otlphttp", peer.url, extra, **kw)
        self.addCleanup(stop_checked, self, a)
        return a

    def test_400_is_permanent(self):
        with HttpPeer() as peer:
            peer.script(Answer(400, rpc_status(3, "profile 0 has no sample type"), content_type=PROTO))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            wait_for(lambda: failed(a, "otlphttp", "http_400") == N_SAMPLES, what="send_failed http_400")
            time.sleep(0.5)  # a retry would come after 100 ms
            self.assertEqual(len(peer.requests), 1)
            self.assertEqual(failed(a, "otlphttp", "http_400", "requests"), 1)
            self.assertEqual(sent_requests(a, "otlphttp"), 0)
            self.assertEqual(a.stop(), 0)
            self.assertIn("profile 0 has no sample type", a.log())

    def test_partial_success_is_not_retried(self):
        with HttpPeer() as peer:
            # The fixture's two sample types are two OTLP profiles: one of them rejected.
            peer.script(Answer(200, partial_success_response(1, "one profile was refused"), content_type=PROTO))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            wait_for(lambda: sent_requests(a, "otlphttp") == 1, what="sent")
            rejected = failed(a, "otlphttp", "partial_success")
            sent = metric(a, "flamecol_exporter_sent_profile_samples_total", "otlphttp")
            self.assertGreater(rejected, 0)
            self.assertLess(rejected, N_SAMPLES)
            self.assertEqual(rejected + sent, N_SAMPLES)
            self.assertEqual(failed(a, "otlphttp", "partial_success", "requests"), 1)
            time.sleep(0.5)
            self.assertEqual(len(peer.requests), 1)
            self.assertEqual(a.stop(), 0)
            self.assertIn("one profile was refused", a.log())

    def check_retry_after(self, status, retry_after):
        with HttpPeer() as peer:
            peer.script(Answer(status, b"busy", headers={"Retry-After": retry_after}))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            reqs = peer.wait_requests(2)
            wait_for(lambda: sent_requests(a, "otlphttp") == 1, what="sent")
            # The peer asked for 2 s; the backoff alone would wait 100 ms.
            self.assertGreaterEqual(reqs[1].time - reqs[0].time, 2.0)
            self.assertEqual(reqs[0].body, reqs[1].body)  # the same bytes again
            self.assertEqual(metric(a, "flamecol_exporter_retries_total", "otlphttp"), 1)

    def test_429_retry_after_seconds(self):
        self.check_retry_after(429, "2")

    def test_503_retry_after_http_date(self):
        # An HTTP-date 3 s ahead names a moment between 2 and 3 s away (whole seconds).
        when = time.time() + 3
        self.check_retry_after(503, time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(when)))

    def test_502_504_retried_without_waiting_for_retry_after(self):
        with HttpPeer() as peer:
            peer.script(Answer(502, headers={"Retry-After": "30"}), Answer(504))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            reqs = peer.wait_requests(3)
            wait_for(lambda: sent_requests(a, "otlphttp") == 1, what="sent")
            self.assertLess(reqs[1].time - reqs[0].time, 10)  # Retry-After counts on 429/503 only

    def test_slow_answer_is_a_timeout_and_retried(self):
        with HttpPeer(default=Answer(200, delay=1.5)) as peer:
            a = self.run_a(peer, timeout="300ms", max_elapsed="1s")
            push(a, fixture_pprof())
            wait_for(lambda: failed(a, "otlphttp", "timeout") == N_SAMPLES, what="send_failed timeout")
            self.assertGreaterEqual(len(peer.requests), 2)
            self.assertEqual(sent_requests(a, "otlphttp"), 0)

    def test_closed_port_then_peer_comes_up(self):
        port = free_port()
        a = start_a("otlphttp", "http://127.0.0.1:%d" % port,
                    "    headers:\n      x-extra: forty-two\n      Authorization: Bearer t0k\n",
                    max_elapsed="60s")
        self.addCleanup(stop_checked, self, a)
        push(a, fixture_pprof(), tenant="team-a")
        wait_for(lambda: metric(a, "flamecol_exporter_retries_total", "otlphttp") >= 2, what="retries")
        self.assertEqual(sent_requests(a, "otlphttp"), 0)
        with HttpPeer(port=port) as peer:
            req = peer.wait_requests(1)[0]
            wait_for(lambda: sent_requests(a, "otlphttp") == 1, what="sent")
            self.assertEqual(req.header("x-scope-orgid"), "team-a")
            self.assertEqual(req.header("x-extra"), "forty-two")
            self.assertEqual(req.header("authorization"), "Bearer t0k")
            self.assertEqual(req.header("content-encoding"), "gzip")
            gzip.decompress(req.body)  # the body is what the header says
        self.assertEqual(failed(a, "otlphttp", "transport"), 0)  # retried, never dropped

    def test_headers_may_set_the_tenant(self):
        with HttpPeer() as peer:
            a = self.run_a(peer, "    headers:\n      X-Scope-OrgID: fixed\n")
            push(a, fixture_pprof(), tenant="team-b")
            req = peer.wait_requests(1)[0]
            self.assertEqual(req.header("x-scope-orgid"), "fixed")

    def test_profiles_endpoint(self):
        with HttpPeer() as peer:
            a = self.run_a(peer, "    profiles_endpoint: %s/custom/profiles?x=1\n" % peer.url)
            push(a, fixture_pprof())
            self.assertEqual(peer.wait_requests(1)[0].path, "/custom/profiles?x=1")

    def test_json_error_body(self):
        with HttpPeer() as peer:
            peer.script(Answer(413, json.dumps({"code": 8, "message": "request too large for me"}).encode(),
                               content_type="application/json"))
            a = self.run_a(peer, "    encoding: json\n")
            push(a, fixture_pprof())
            wait_for(lambda: failed(a, "otlphttp", "http_413") == N_SAMPLES, what="send_failed http_413")
            self.assertEqual(a.stop(), 0)
            self.assertIn("request too large for me", a.log())


class GrpcAnswersTest(unittest.TestCase):
    def run_a(self, peer, extra="", **kw):
        a = start_a("otlp", peer.endpoint, "    tls:\n      insecure: true\n" + extra, **kw)
        self.addCleanup(stop_checked, self, a)
        return a

    def check_waits(self, code, delay):
        with GrpcPeer() as peer:
            peer.script(GrpcAnswer(code, "come back later", details=rpc_status(code.value[0], "later", delay)))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            reqs = peer.wait_requests(2)
            wait_for(lambda: sent_requests(a, "otlp") == 1, what="sent")
            self.assertGreaterEqual(reqs[1].time - reqs[0].time, delay)
            self.assertEqual(reqs[0].body, reqs[1].body)

    def test_unavailable_with_retry_info(self):
        self.check_waits(grpc.StatusCode.UNAVAILABLE, 2.0)

    def test_resource_exhausted_with_retry_info(self):
        self.check_waits(grpc.StatusCode.RESOURCE_EXHAUSTED, 2.0)

    def test_resource_exhausted_without_retry_info_is_permanent(self):
        with GrpcPeer() as peer:
            peer.script(GrpcAnswer(grpc.StatusCode.RESOURCE_EXHAUSTED, "message larger than max"))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            wait_for(lambda: failed(a, "otlp", "grpc_RESOURCE_EXHAUSTED") == N_SAMPLES, what="failed")
            time.sleep(0.5)
            self.assertEqual(len(peer.requests), 1)
            self.assertEqual(a.stop(), 0)
            self.assertIn("message larger than max", a.log())

    def test_invalid_argument_is_permanent(self):
        with GrpcPeer() as peer:
            peer.script(GrpcAnswer(grpc.StatusCode.INVALID_ARGUMENT, "bad dictionary index"))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            wait_for(lambda: failed(a, "otlp", "grpc_INVALID_ARGUMENT") == N_SAMPLES, what="failed")
            time.sleep(0.5)
            self.assertEqual(len(peer.requests), 1)
            self.assertEqual(a.stop(), 0)
            self.assertIn("bad dictionary index", a.log())

    def test_partial_success(self):
        with GrpcPeer() as peer:
            peer.script(GrpcAnswer(response=partial_success_response(1, "a profile was refused")))
            a = self.run_a(peer)
            push(a, fixture_pprof())
            wait_for(lambda: sent_requests(a, "otlp") == 1, what="sent")
            rejected = failed(a, "otlp", "partial_success")
            self.assertGreater(rejected, 0)
            self.assertEqual(rejected + metric(a, "flamecol_exporter_sent_profile_samples_total", "otlp"),
                             N_SAMPLES)
            time.sleep(0.5)
            self.assertEqual(len(peer.requests), 1)

    def test_tenant_headers_and_timeout(self):
        with GrpcPeer() as peer:
            peer.script(GrpcAnswer(delay=1.5))  # past the 300 ms deadline: retried
            a = self.run_a(peer, "    headers:\n      X-Extra: forty-two\n", timeout="300ms")
            push(a, fixture_pprof(), tenant="team-g")
            reqs = peer.wait_requests(2)
            wait_for(lambda: sent_requests(a, "otlp") == 1, what="sent")
            self.assertGreaterEqual(metric(a, "flamecol_exporter_retries_total", "otlp"), 1)
            for r in reqs:
                self.assertEqual(r.header("x-scope-orgid"), "team-g")
                self.assertEqual(r.header("x-extra"), "forty-two")

    def test_timeout_counted_as_timeout(self):
        with GrpcPeer(default=GrpcAnswer(delay=1.5)) as peer:
            a = self.run_a(peer, timeout="300ms", max_elapsed="1s")
            push(a, fixture_pprof())
            wait_for(lambda: failed(a, "otlp", "timeout") == N_SAMPLES, what="send_failed timeout")
            self.assertGreaterEqual(len(peer.requests), 2)

    def test_closed_port_then_peer_comes_up(self):
        port = free_port()
        a = start_a("otlp", "127.0.0.1:%d" % port, "    tls:\n      insecure: true\n", max_elapsed="60s")
        self.addCleanup(stop_checked, self, a)
        push(a, fixture_pprof(), tenant="team-c")
        wait_for(lambda: metric(a, "flamecol_exporter_retries_total", "otlp") >= 2, what="retries")
        with GrpcPeer(port=port) as peer:
            req = peer.wait_requests(1)[0]
            wait_for(lambda: sent_requests(a, "otlp") == 1, what="sent")
            self.assertEqual(req.header("x-scope-orgid"), "team-c")


# ---- TLS -------------------------------------------------------------------------------------

NO_RETRY = "    retry_on_failure:\n      enabled: false\n"


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = scratch_dir("flamecol-tls-")
        cls.c = make_certs(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tls_yaml(self, **kv):
        return "    tls:\n" + "".join("      %s: %s\n" % item for item in kv.items())

    def attempt(self, kind, peer, endpoint, tls):
        """One push through an exporter without retries: True when the peer got it."""
        a = Collector(A_CONFIG % ("  %s:\n    endpoint: %s\n    timeout: 5s\n" % (kind, endpoint)
                                  + NO_RETRY + tls, kind))
        try:
            a.wait_ready()
            push(a, fixture_pprof())
            error_type = "transport" if kind == "otlphttp" else "grpc_UNAVAILABLE"
            wait_for(lambda: sent_requests(a, kind) + failed(a, kind, error_type, "requests") == 1,
                     what="an outcome")
            ok = sent_requests(a, kind) == 1
            self.assertEqual(len(peer.requests), 1 if ok else 0)
            return ok
        finally:
            self.assertEqual(a.stop(), 0, a.log())

    def http_peer(self, name, client_ca=None):
        return HttpPeer(ssl_context=server_ssl_context(self.c[name + ".pem"], self.c[name + ".key"], client_ca))

    def grpc_peer(self, name, client_ca=None):
        creds = grpc.ssl_server_credentials([(read(self.c[name + ".key"]), read(self.c[name + ".pem"]))],
                                            root_certificates=read(client_ca) if client_ca else None,
                                            require_client_auth=client_ca is not None)
        return GrpcPeer(credentials=creds)

    def test_http(self):
        ca = self.c["ca.pem"]
        with self.http_peer("server") as p:
            self.assertTrue(self.attempt("otlphttp", p, p.url, self.tls_yaml(ca_file=ca)))
        with self.http_peer("server") as p:  # the system's CAs do not know ours
            self.assertFalse(self.attempt("otlphttp", p, p.url, ""))
        with self.http_peer("wrong") as p:
            self.assertFalse(self.attempt("otlphttp", p, p.url, self.tls_yaml(ca_file=ca)))
        with self.http_peer("wrong") as p:
            self.assertTrue(self.attempt("otlphttp", p, p.url, self.tls_yaml(insecure_skip_verify="true")))
        with self.http_peer("other") as p:  # signed by the CA for other.example only
            self.assertFalse(self.attempt("otlphttp", p, p.url, self.tls_yaml(ca_file=ca)))
        with self.http_peer("other") as p:
            self.assertTrue(self.attempt("otlphttp", p, p.url,
                                         self.tls_yaml(ca_file=ca, server_name_override="other.example")))
        with self.http_peer("server", client_ca=ca) as p:  # mTLS
            self.assertFalse(self.attempt("otlphttp", p, p.url, self.tls_yaml(ca_file=ca)))
        with self.http_peer("server", client_ca=ca) as p:
            self.assertTrue(self.attempt("otlphttp", p, p.url, self.tls_yaml(
                ca_file=ca, cert_file=self.c["client.pem"], key_file=self.c["client.key"])))

    def test_grpc(self):
        ca = self.c["ca.pem"]
        with self.grpc_peer("server") as p:
            self.assertTrue(self.attempt("otlp", p, p.endpoint, self.tls_yaml(ca_file=ca)))
        with self.grpc_peer("server") as p:  # https:// asks for TLS
            self.assertTrue(self.attempt("otlp", p, "https://" + p.endpoint, self.tls_yaml(ca_file=ca)))
        with self.grpc_peer("wrong") as p:
            self.assertFalse(self.attempt("otlp", p, p.endpoint, self.tls_yaml(ca_file=ca)))
        with self.grpc_peer("wrong") as p:
            self.assertTrue(self.attempt("otlp", p, p.endpoint, self.tls_yaml(insecure_skip_verify="true")))
        with self.grpc_peer("other") as p:
            self.assertFalse(self.attempt("otlp", p, p.endpoint, self.tls_yaml(ca_file=ca)))
        with self.grpc_peer("other") as p:
            self.assertTrue(self.attempt("otlp", p, p.endpoint,
                                         self.tls_yaml(ca_file=ca, server_name_override="other.example")))
        with self.grpc_peer("server", client_ca=ca) as p:
            self.assertFalse(self.attempt("otlp", p, p.endpoint, self.tls_yaml(ca_file=ca)))
        with self.grpc_peer("server", client_ca=ca) as p:
            self.assertTrue(self.attempt("otlp", p, p.endpoint, self.tls_yaml(
                ca_file=ca, cert_file=self.c["client.pem"], key_file=self.c["client.key"])))


class ConfigTest(unittest.TestCase):
    def validate(self, exporters_yaml, names):
        d = scratch_dir("flamecol-cfg-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "config.yaml")
        with open(path, "w") as f:
            f.write((A_CONFIG % (exporters_yaml, names)).replace("{port}", "1").replace("{metrics}", "2"))
        r = subprocess.run([BIN, "validate", "--config", path], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def test_errors_name_the_key(self):
        cases = [
            ("  otlp:\n    tls: {insecure: true}\n", "otlp", "missing required key 'endpoint'"),
            ("  otlphttp:\n    endpoint: 127.0.0.1:4318\n", "otlphttp", "is not an http:// or https:// URL"),
            ("  otlphttp: {}\n", "otlphttp", "endpoint: required"),
            ("  otlp:\n    endpoint: 127.0.0.1:1\n    tls: {cert_file: /etc/hostname}\n", "otlp",
             "cert_file and key_file go together"),
            ("  otlp_grpc:\n    endpoint: 127.0.0.1:1\n    tls: {ca_file: /nonexistent/ca.pem}\n",
             "otlp_grpc", "tls.ca_file: cannot read /nonexistent/ca.pem"),
            ('  otlp:\n    endpoint: 127.0.0.1:1\n    headers: {"bad key": v}\n', "otlp", "headers.bad key"),
            ("  otlp:\n    endpoint: 127.0.0.1:1\n    compression: zstd\n", "otlp", "compression"),
            ("  otlphttp:\n    endpoint: http://h:1\n    compression: br\n", "otlphttp", "compression"),
            ("  otlphttp:\n    endpoint: http://h:1\n    retry_on_failure: {multiplier: 0.5}\n", "otlphttp",
             "multiplier"),
            # The Collector's exporter batching: said to be missing, not taken as an unknown key.
            ("  otlp:\n    endpoint: 127.0.0.1:1\n    sending_queue: {batch: {flush_timeout: 200ms}}\n",
             "otlp", "sending_queue.batch: not implemented in flamecol"),
        ]
        for yaml_text, names, want in cases:
            rc, out = self.validate(yaml_text, names)
            self.assertNotEqual(rc, 0, yaml_text)
            self.assertIn(want, out, yaml_text)

    def test_valid_with_the_collector_names(self):
        rc, out = self.validate("  otlp_grpc:\n    endpoint: https://h:1\n"
                                "  otlp_http/json:\n    endpoint: http://h:2\n    encoding: json\n"
                                "    profiles_endpoint: http://h:3/custom/path\n",
                                "otlp_grpc, otlp_http/json")
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
