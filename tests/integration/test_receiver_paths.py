"""Every corpus profile through every receiver path into the store: /ingest raw body,
/ingest multipart, push.v1, OTLP gRPC, OTLP/HTTP protobuf and OTLP/HTTP JSON. For each
file and path, every profile type the store lists for the file's series must be one of
the file's sample types, named as Pyroscope names it on that path, with exactly the total
and every function's flat value of Go's `pprof -top -sample_index=<type>` on the file;
every sample type must land in exactly one profile type (nothing counted twice).

The reference is Go's pprof (harness.go_pprof, built by scripts/setup), run on the
original file: its -raw header gives the sample types, period type and period; its -top
gives total and flat. Nothing expected is computed by flamecol.

Naming (what is expected of each path):
- /ingest (raw and multipart): Pyroscope v1's rule for a pprof body (docs: "How pprof
  sample types map to profile types", v1): `wall` when a sample type is `wall`, else the
  first sample type whose display name (Pyroscope's DefaultSampleTypeMapping) contains
  cpu -> process_cpu, alloc_/inuse_/space/objects -> memory, mutex_ -> mutex, block_ ->
  block, goroutines -> goroutines; values as they are.
- push.v1: the client names the series (`__name__` label); this test sends the name a
  Pyroscope SDK would (the /ingest rule above) and expects it; values as they are.
- OTLP (gRPC, HTTP protobuf, HTTP JSON), as Pyroscope's OTLP ingest names a profile with
  no `__name__` attribute (`flamecol convert --to otlp` writes none): samples/count with a
  cpu/nanoseconds period (period != 0) becomes process_cpu:cpu:nanoseconds:cpu:nanoseconds
  with every value x period; any other sample type is named after its period type
  (`cpu:nanoseconds` with a cpu period -> cpu:cpu:nanoseconds:cpu:nanoseconds, Node's cpu
  with a wall period -> wall:cpu:nanoseconds:wall:nanoseconds)."""
import json
import os
import unittest
import urllib.parse

import grpc

from harness import (CORPUS, Collector, convert, corpus_files, flamegraph_flat, free_port, http, pb_ld,
                     multipart, parse_top, pprof_raw_header, pprof_top, pprof_top_flat, read_corpus)

OTLP_METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

# One port for /ingest, push.v1, OTLP/HTTP and the store's query API; gRPC on its own.
PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
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
      receivers: [pprof, otlp]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

PATHS = ("ingest_raw", "ingest_multipart", "push_v1", "otlp_grpc", "otlp_http_proto", "otlp_http_json")

# Pyroscope's DefaultSampleTypeMapping display names (the others keep their own name).
DISPLAY_NAME = {"samples": "cpu", "goroutine": "goroutines", "contentions": "mutex_count",
                "delay": "mutex_duration"}


def pyroscope_ingest_name(sample_types):
    """__name__ Pyroscope v1 gives a pprof pushed to /ingest (see the module docstring)."""
    names = [t for t, _ in sample_types]
    if "wall" in names:
        return "wall"
    for t in names:
        d = DISPLAY_NAME.get(t, t)
        if "cpu" in d:
            return "process_cpu"
        if "alloc_" in d or "inuse_" in d or d in ("space", "objects"):
            return "memory"
        if "mutex_" in d:
            return "mutex"
        if "block_" in d:
            return "block"
        if "goroutines" in d:
            return "goroutines"
    return names[-1]


def expected_types(path, header):
    """[(profile type ID, source sample type, factor)]: where each source sample type must land."""
    pt, period = header["period_type"], header["period"]
    assert pt, "no period type in the corpus file"
    out = []
    for st in header["sample_types"]:
        if path.startswith("otlp"):
            if st == ("samples", "count") and pt == ("cpu", "nanoseconds") and period:
                out.append(("process_cpu:cpu:nanoseconds:cpu:nanoseconds", st, period))
            else:
                out.append(("%s:%s:%s:%s:%s" % (pt[0], st[0], st[1], pt[0], pt[1]), st, 1))
        else:
            name = pyroscope_ingest_name(header["sample_types"])
            out.append(("%s:%s:%s:%s:%s" % (name, st[0], st[1], pt[0], pt[1]), st, 1))
    return out


def service(path, i):
    return "rp-%s-%d" % (path.replace("_", "-"), i)


def push_request(labels, raw):
    """push.v1 PushRequest{series: [RawProfileSeries{labels, samples: [RawSample{raw_profile, ID}]}]}."""
    s = b"".join(pb_ld(1, pb_ld(1, k.encode()) + pb_ld(2, v.encode())) for k, v in labels.items())
    s += pb_ld(2, pb_ld(1, raw) + pb_ld(2, b"6d0e9a4c-3f1b-4b8e-9a51-2c7d8e9f0a1b"))
    return pb_ld(1, s)


class ReceiverPathsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = corpus_files()
        cls.headers = {n: pprof_raw_header(os.path.join(CORPUS, n + ".pb.gz")) for n in cls.files}
        cls.refs = {}
        grpc_port = free_port()
        cls.c = Collector(PIPELINE.replace("{grpc}", str(grpc_port)))
        cls.addClassCleanup(cls.c.__exit__, None, None, None)  # killed if setUpClass fails
        cls.c.wait_ready()
        channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port)
        export = channel.unary_unary(OTLP_METHOD)
        try:
            for i, name in enumerate(cls.files):
                cls.push_all(export, i, name)
        finally:
            channel.close()

    @classmethod
    def push_all(cls, export, i, name):
        raw = read_corpus(name)
        spy = "nodespy" if "node" in name else "gospy"
        base = cls.c.base

        def post(what, url, body, headers):
            status, _, answer = http("POST", base + url, body, headers)
            assert status == 200, "%s %s: %d %s" % (what, name, status, answer)
            return answer

        # What the Pyroscope Node.js SDK 0.6 sends: a raw gzipped pprof, seconds.
        q = urllib.parse.urlencode({"name": service("ingest_raw", i), "from": "1700000000",
                                    "until": "1700000010", "spyName": spy})
        post("ingest raw", "/ingest?" + q, raw, {"Content-Type": "application/octet-stream"})
        # What the Go SDK sends: multipart, nanoseconds, sampleRate.
        ctype, body = multipart([("profile", "profile.pprof", "application/octet-stream", raw)])
        q = urllib.parse.urlencode({"name": service("ingest_multipart", i) + "{env=test}",
                                    "from": "1700000000000000000", "until": "1700000010000000000",
                                    "spyName": spy, "sampleRate": "100"})
        post("ingest multipart", "/ingest?" + q, body, {"Content-Type": ctype})
        # What Alloy's pyroscope.write sends: the series named by the client.
        labels = {"__name__": pyroscope_ingest_name(cls.headers[name]["sample_types"]),
                  "service_name": service("push_v1", i)}
        post("push.v1", "/push.v1.PusherService/Push", push_request(labels, raw),
             {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})
        resp = export(convert(name, "otlp", "service_name=" + service("otlp_grpc", i)), timeout=20)
        assert resp == b"", "otlp grpc %s: partial success %r" % (name, resp)
        for path, to, ctype in (("otlp_http_proto", "otlp", "application/x-protobuf"),
                                ("otlp_http_json", "otlp-json", "application/json")):
            answer = post(path, "/v1development/profiles",
                          convert(name, to, "service_name=" + service(path, i)), {"Content-Type": ctype})
            assert answer in (b"", b"{}"), "%s %s: partial success %r" % (path, name, answer)

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def reference(self, name, sample_type):
        """(total, {function: flat}) of `pprof -top -sample_index=<type>` on the corpus file."""
        key = (name, sample_type)
        if key not in self.refs:
            top = pprof_top(os.path.join(CORPUS, name + ".pb.gz"), "-sample_index=" + sample_type)
            self.assertEqual(top["type"], sample_type, name)
            flat = pprof_top_flat(top)
            self.assertEqual(sum(flat.values()), top["total"], "%s: every row kept" % name)
            self.refs[key] = (top["total"], flat)
        return self.refs[key]

    def stored_types(self, svc):
        """The profile type IDs the store lists for the service (Connect Series)."""
        status, _, body = http("POST", self.c.base + "/querier.v1.QuerierService/Series",
                               json.dumps({"matchers": ['{service_name="%s"}' % svc],
                                           "labelNames": ["__profile_type__"]}).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        return {l["value"] for s in json.loads(body).get("labelsSet", []) for l in s.get("labels", [])
                if l["name"] == "__profile_type__"}

    def stored(self, type_id, svc):
        """(total, {function: self}) of /pyroscope/render for one profile type of the service."""
        q = {"query": '%s{service_name="%s"}' % (type_id, svc), "from": "0", "until": "now",
             "maxNodes": "1048576"}
        status, _, body = http("GET", self.c.base + "/pyroscope/render?" + urllib.parse.urlencode(q))
        self.assertEqual(status, 200, body)
        fb = json.loads(body)["flamebearer"]
        total, flat = flamegraph_flat(fb["names"], fb["levels"])
        self.assertEqual(total, fb["numTicks"], "%s %s" % (type_id, svc))
        return total, flat

    def check_path(self, path):
        for i, name in enumerate(self.files):
            with self.subTest(path=path, file=name):
                svc = service(path, i)
                want = expected_types(path, self.headers[name])
                ids = [t for t, _, _ in want]
                self.assertEqual(len(set(ids)), len(ids), "the naming rule maps two sample types to one "
                                 "profile type: %s" % ids)
                got_ids = self.stored_types(svc)
                got_sum = want_sum = 0
                for t in got_ids:
                    got_sum += self.stored(t, svc)[0]
                for type_id, (st, unit), factor in want:
                    total, flat = self.reference(name, st)
                    total *= factor
                    flat = {fn: v * factor for fn, v in flat.items()}
                    want_sum += total
                    what = "%s via %s: %s/%s (pprof -top -sample_index=%s%s) as %s" % (
                        name, path, st, unit, st, " x period %d" % factor if factor != 1 else "", type_id)
                    self.assertIn(type_id, got_ids, "%s: not stored; stored: %s" % (what, sorted(got_ids)))
                    got_total, got_flat = self.stored(type_id, svc)
                    self.assertEqual(got_total, total, what + ": total")
                    self.assertEqual(got_flat, flat, what + ": flat per function")
                # Each source sample type exactly once: no other type, nothing counted twice.
                self.assertEqual(got_ids, set(ids), "%s via %s: stored types" % (name, path))
                self.assertEqual(got_sum, want_sum, "%s via %s: sum over the stored types" % (name, path))

    def test_ingest_raw_body(self):
        self.check_path("ingest_raw")

    def test_ingest_multipart(self):
        self.check_path("ingest_multipart")

    def test_push_v1(self):
        self.check_path("push_v1")

    def test_otlp_grpc(self):
        self.check_path("otlp_grpc")

    def test_otlp_http_protobuf(self):
        self.check_path("otlp_http_proto")

    def test_otlp_http_json(self):
        self.check_path("otlp_http_json")

    def test_every_file_every_type(self):
        # The corpus is what the checks above cover: each file, each of its sample types.
        self.assertGreaterEqual(len(self.files), 17)
        self.assertGreaterEqual(sum(len(h["sample_types"]) for h in self.headers.values()), 40)

    def test_reference_agrees_with_the_corpus_top_files(self):
        # Cross-check of the oracle: Go's pprof as built here prints what the corpus's
        # recorded `pprof -top` files say (sample_index=0: their totals and flat columns).
        for name in self.files:
            section = parse_top(name)[0]
            st = self.headers[name]["sample_types"][0][0]
            self.assertEqual(section["type"], st, name)
            total, flat = self.reference(name, st)
            self.assertEqual(total, section["total"], name)
            recorded = {}
            for f, fn in section["rows"]:
                recorded[fn] = recorded.get(fn, 0) + f
            self.assertEqual({fn: flat.get(fn, 0) for fn in recorded}, recorded, name)


if __name__ == "__main__":
    unittest.main()
