"""The store through the real binary: pprof pushes, then /pyroscope/render
compared with the corpus's `pprof -top`; format=pprof; bad queries; tenants;
and durability: every acknowledged push survives SIGKILL, exactly once."""
import gzip
import json
import os
import random
import signal
import subprocess
import time
import unittest
import urllib.parse

from harness import scratch_dir, BIN, CORPUS, STORE_PIPELINE, Collector, pb_varint, pb_varints, corpus_files, http, multipart, parse_top, read_corpus

# Expected values come from references independent of flamecol: the corpus's
# `pprof -top` files (parse_top), hand-built inputs, and pprof_label_totals
# below, a small pprof reader written here from profile.proto.
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
GO_CPU_TOTAL = 1080000000  # go-1s-cpu.top.txt, sample_index=1: "1080000000ns total"
GO_3S_CPU_TOTAL = 5350000000  # go-3s-cpu.top.txt
PYRO_GO_CPU_TOTAL = 1650000000  # pyroscope-go-cpu.top.txt


def pprof_time_s(name):
    """The profile's own time_nanos (Profile field 9), read by this test: /ingest's
    `from` is ignored when the pprof has its own time."""
    return pb_read(gzip.decompress(read_corpus(name)))[9][0] // 10**9


def top_flat(name, index):
    """pprof -top's flat per function (rows of one function name summed)."""
    flat = {}
    for f, fn in parse_top(name)[index]["rows"]:
        flat[fn] = flat.get(fn, 0) + f
    return flat


def pprof_label_totals(name, index, label):
    """Sum of sample values[index] per value of a pprof string label (None:
    samples without it), read from the corpus file by this test's own decoder
    (profile.proto: Profile.sample = 2, string_table = 6; Sample.value = 2,
    Sample.label = 3; Label.key = 1, Label.str = 2)."""
    prof = pb_read(gzip.decompress(read_corpus(name)))
    strings = [x.decode() for x in prof.get(6, [])]

    totals = {}
    for raw in prof.get(2, []):
        sample = pb_read(raw)
        value = pb_varints(sample.get(2, []))[index]
        key = None
        for l in sample.get(3, []):
            lab = pb_read(l)
            if strings[lab.get(1, [0])[0]] == label and lab.get(2, [0])[0]:
                key = strings[lab[2][0]]
        totals[key] = totals.get(key, 0) + value
    return totals



def flamebearer_flat(doc):
    """Self per function name from a flamebearer: what pprof -top calls flat."""
    fb = doc["flamebearer"]
    flat = {}
    for level in fb["levels"]:
        for i in range(0, len(level), 4):
            name = fb["names"][level[i + 3]]
            flat[name] = flat.get(name, 0) + level[i + 2]
    return fb["numTicks"], flat


def folded_flat(text):
    """Self per leaf function of folded text (what pprof -top calls flat)."""
    flat = {}
    for line in text.splitlines():
        stack, v = line.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        flat[leaf] = flat.get(leaf, 0) + int(v)
    return flat


def render(c, query, tenant=None, **params):
    q = {"query": query, "from": "0", "until": "now", "maxNodes": "1048576"}
    q.update(params)
    headers = {"X-Scope-OrgID": tenant} if tenant else {}
    return http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q), None, headers)


class StoreApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0"))
        cls.c.wait_ready()
        cls.files = corpus_files()
        for i, name in enumerate(cls.files):
            ctype, body = multipart([("profile", "profile.pprof", None, read_corpus(name))])
            status, _, text = http("POST", cls.c.base + "/ingest?name=svc-%d&from=1700000000" % i,
                                   body, {"Content-Type": ctype})
            assert status == 200, text

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def types(self):
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=__profile_type__")
        self.assertEqual(status, 200)
        return json.loads(body)

    def test_render_matches_pprof_top(self):
        # pprof pushes are stored as they are (README: values are never
        # rewritten; only OTLP samples:count x period is scaled): every sample
        # type of every corpus file answers exactly pprof -top's total and
        # flat column, every row.
        types = self.types()
        checked = sections = 0
        for i, name in enumerate(self.files):
            for index, section in parse_top(name).items():
                sections += 1
                found = []
                for t in types:
                    if t.split(":")[1] != section["type"]:
                        continue
                    status, headers, body = render(self.c, '%s{service_name="svc-%d"}' % (t, i))
                    self.assertEqual(status, 200, body)
                    total, flat = flamebearer_flat(json.loads(body))
                    if total == 0:
                        continue
                    found.append(t)
                    self.assertEqual(total, section["total"], "%s %s" % (name, t))
                    want = top_flat(name, index)
                    self.assertEqual({fn: flat.get(fn, 0) for fn in want}, want, "%s %s" % (name, t))
                    self.assertEqual(sum(want.values()), section["total"], name)  # every row kept
                    self.assertIn("X-Flamecol-Nodes-Merged", headers)
                    checked += 1
                self.assertEqual(len(found), 1, "%s: stored types for %s: %s" % (name, section["type"], found))
        self.assertEqual(checked, sections)
        self.assertGreaterEqual(checked, 30)

    def test_pprof_and_folded_formats(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        i = self.files.index("go-1s-cpu")
        status, _, body = render(self.c, '%s{service_name="svc-%d"}' % (t, i), format="pprof")
        self.assertEqual(status, 200)
        path = os.path.join(self.c.dir, "merged.pb.gz")
        with open(path, "wb") as f:
            f.write(body)
        folded = subprocess.run([BIN, "convert", "--to", "folded", path], check=True,
                                capture_output=True, text=True).stdout
        want = {fn: v for fn, v in top_flat("go-1s-cpu", 1).items() if v}
        self.assertEqual(folded_flat(folded), want)
        self.assertEqual(sum(want.values()), GO_CPU_TOTAL)
        status, _, body = render(self.c, '%s{service_name="svc-%d"}' % (t, i), format="folded")
        self.assertEqual(folded_flat(body.decode()), want)

    def test_selectors_and_sample_labels(self):
        t = CPU
        i = self.files.index("go-1s-cpu")
        total = lambda sel: flamebearer_flat(json.loads(render(self.c, '%s{%s}' % (t, sel))[2]))[0]
        ref = pprof_label_totals("go-1s-cpu", 1, "worker")  # this test's own pprof reading
        self.assertEqual(sum(ref.values()), GO_CPU_TOTAL)
        workers = sorted(w for w in ref if w is not None)
        self.assertGreaterEqual(len(workers), 2)
        self.assertIn(None, ref)
        svc = 'service_name="svc-%d"' % i
        self.assertEqual(total(svc), GO_CPU_TOTAL)
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=worker")
        self.assertEqual(sorted(json.loads(body)), workers)
        # A pprof label selects exactly its samples (README: a sample's labels join its series).
        for w in workers:
            self.assertEqual(total('%s,worker="%s"' % (svc, w)), ref[w], w)
            self.assertEqual(total('%s,worker!="%s"' % (svc, w)), GO_CPU_TOTAL - ref[w], w)
        # A label a series lacks matches as "".
        self.assertEqual(total('%s,worker=""' % svc), ref[None])
        self.assertEqual(total('%s,worker!=""' % svc), GO_CPU_TOTAL - ref[None])
        self.assertEqual(total('%s,worker=~".+"' % svc), GO_CPU_TOTAL - ref[None])
        self.assertEqual(total('%s,worker=~".*"' % svc), GO_CPU_TOTAL)
        # Fully anchored regexes: "svc-%d" matches only itself, a prefix matches nothing.
        self.assertEqual(total('service_name=~"svc-%d"' % i), GO_CPU_TOTAL)
        self.assertEqual(total('service_name=~"vc-%d"' % i), 0)
        self.assertEqual(total('service_name=~"svc-"'), 0)
        self.assertEqual(total('service_name=~"svc-.*"'), GO_CPU_TOTAL + GO_3S_CPU_TOTAL + PYRO_GO_CPU_TOTAL)
        two = workers[:2]
        self.assertEqual(total('%s,worker=~"%s|%s"' % (svc, two[0], two[1])), ref[two[0]] + ref[two[1]])
        self.assertEqual(total('%s,worker!~"%s|%s"' % (svc, two[0], two[1])),
                         GO_CPU_TOTAL - ref[two[0]] - ref[two[1]])

    def test_render_timeline_group_by(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        i = self.files.index("go-1s-cpu")
        q = '%s{service_name="svc-%d"}' % (t, i)
        when = pprof_time_s("go-1s-cpu")
        rng = {"from": str(when - 1000), "until": str(when + 1000)}
        plain = json.loads(render(self.c, q, **rng)[2])
        self.assertIsNone(plain["groups"])
        doc = json.loads(render(self.c, q, groupBy="worker", **rng)[2])
        timeline, groups = doc["timeline"], doc["groups"]
        self.assertEqual(timeline, plain["timeline"])
        self.assertEqual(sum(timeline["samples"]), GO_CPU_TOTAL)
        self.assertEqual(doc["flamebearer"]["numTicks"], GO_CPU_TOTAL)
        # Each group's timeline sums to its samples, read from the pprof by this test.
        ref = pprof_label_totals("go-1s-cpu", 1, "worker")
        self.assertEqual({k: sum(g["samples"]) for k, g in groups.items()},
                         {("*" if k is None else k): v for k, v in ref.items()})
        # The one nonzero point is the profile's 10 s window, or, once that is
        # older than fine_retention (24h by default: the corpus's own times
        # may be), the step where its 100 s window starts (README).
        step = timeline["durationDelta"]
        fine, coarse = [(w - timeline["startTime"]) // step for w in (when // 10 * 10, when // 100 * 100)]
        age = time.time() - when
        want = [fine] if age < 86400 - 300 else [coarse] if age > 86400 + 300 else [fine, coarse]
        self.assertIn([k for k, v in enumerate(timeline["samples"]) if v], [[w] for w in want])
        self.assertGreaterEqual(len(groups), 3)  # two or more workers, and "*" for samples without
        self.assertIn("*", groups)
        for g in groups.values():
            self.assertEqual((g["startTime"], g["durationDelta"], len(g["samples"])),
                             (timeline["startTime"], timeline["durationDelta"], len(timeline["samples"])))
        # The groups split the timeline: point by point they add up to it.
        sums = [sum(g["samples"][k] for g in groups.values()) for k in range(len(timeline["samples"]))]
        self.assertEqual(sums, timeline["samples"])
        w = next(k for k in groups if k != "*")
        one = json.loads(render(self.c, '%s{service_name="svc-%d",worker="%s"}' % (t, i, w), **rng)[2])
        self.assertEqual(groups[w]["samples"], one["timeline"]["samples"])

    def test_findings_and_query_cli(self):
        i = self.files.index("go-1s-cpu")
        sel = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="svc-%d"}' % i
        q = urllib.parse.urlencode({"query": sel, "from": "0", "top": "5"})
        status, _, body = http("GET", self.c.base + "/api/v1/findings?" + q)
        self.assertEqual(status, 200, body)
        doc = json.loads(body)
        self.assertEqual(doc["total"], GO_CPU_TOTAL)
        self.assertEqual(len(doc["top"]), 5)
        self.assertEqual(doc["hottest_path"][0]["name"], "main.worker")
        # self and total are pprof -top's flat and cum (cum: counted once per stack).
        cum = {}
        with open(os.path.join(CORPUS, "go-1s-cpu.top.txt")) as f:
            section = None
            for line in f:
                if line.startswith("### sample_index="):
                    section = int(line.split("=")[1])
                elif section == 1 and line.strip() and line.strip()[0].isdigit() and "%" in line:
                    parts = line.split()
                    fn = line.split("%", 4)[-1].strip().replace(" (inline)", "")
                    cum[fn] = (int(parts[0].rstrip("ns")), int(parts[3].rstrip("ns")))
        for r in doc["top"]:
            self.assertEqual((r["self"], r["total"]), cum[r["name"]], r["name"])
        # the top 5 by self: no function left out has more self than the 5th
        self.assertEqual(sorted((v[0] for v in cum.values()), reverse=True)[:5],
                         sorted((r["self"] for r in doc["top"]), reverse=True))
        # The CLI prints pprof -top's flat and cum columns for the top functions.
        out = subprocess.run([BIN, "query", "--url", self.c.base, sel, "--from", "0", "--top", "5"],
                             check=True, capture_output=True, text=True).stdout
        rows = [l.split() for l in out.splitlines()[2:]]
        reference = {}
        with open(os.path.join(CORPUS, "go-1s-cpu.top.txt")) as f:
            section = None
            for line in f:
                if line.startswith("### sample_index="):
                    section = int(line.split("=")[1])
                elif section == 1 and line.strip() and line.strip()[0].isdigit() and "%" in line:
                    parts = line.split()
                    name = line.split("%", 4)[-1].strip().replace(" (inline)", "")
                    reference[name] = (int(parts[0].rstrip("ns")), int(parts[3].rstrip("ns")))
        self.assertEqual(len(rows), 5)
        for self_v, _, total_v, _, name in rows:
            self.assertEqual((int(self_v), int(total_v)), reference[name], name)
        out = subprocess.run([BIN, "query", "--url", self.c.base, sel, "--from", "0", "--findings"],
                             check=True, capture_output=True, text=True).stdout
        self.assertIn("hottest path:", out)
        path = os.path.join(self.c.dir, "cli.pb.gz")
        subprocess.run([BIN, "query", "--url", self.c.base, sel, "--from", "0", "--pprof", path],
                       check=True, capture_output=True)
        folded = subprocess.run([BIN, "convert", "--to", "folded", path], check=True,
                                capture_output=True, text=True).stdout
        self.assertEqual(sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()), 1080000000)
        bad = subprocess.run([BIN, "query", "--url", self.c.base, "nope{", "--from", "0"],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("selector: col", bad.stderr)

    def test_render_diff(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        left, right = self.files.index("go-1s-cpu"), self.files.index("go-3s-cpu")
        q = urllib.parse.urlencode({"leftQuery": '%s{service_name="svc-%d"}' % (t, left),
                                    "rightQuery": '%s{service_name="svc-%d"}' % (t, right),
                                    "leftFrom": "0", "rightFrom": "0", "maxNodes": "1048576"})
        status, _, body = http("GET", self.c.base + "/pyroscope/render-diff?" + q)
        self.assertEqual(status, 200, body)
        doc = json.loads(body)
        self.assertEqual(doc["metadata"]["format"], "double")
        self.assertEqual((doc["leftTicks"], doc["rightTicks"]), (1080000000, 5350000000))
        fb = doc["flamebearer"]
        lflat, rflat = {}, {}
        for level in fb["levels"]:
            for i in range(0, len(level), 7):
                name = fb["names"][level[i + 6]]
                lflat[name] = lflat.get(name, 0) + level[i + 2]
                rflat[name] = rflat.get(name, 0) + level[i + 5]
        for f, fn in parse_top("go-1s-cpu")[1]["rows"][:10]:
            self.assertEqual(lflat.get(fn, 0), f, fn)
        for f, fn in parse_top("go-3s-cpu")[1]["rows"][:10]:
            self.assertEqual(rflat.get(fn, 0), f, fn)
        q = urllib.parse.urlencode({"leftQuery": t + "{}", "rightQuery": "memory:alloc_space:bytes:space:bytes{}"})
        status, _, body = http("GET", self.c.base + "/pyroscope/render-diff?" + q)
        self.assertEqual(status, 400)
        self.assertIn("profile types must match", json.loads(body)["message"])

    def test_bad_queries(self):
        for query, params, text in (
                ("", {}, '"query" is required'),
                ('{service_name="x"}', {}, "profile-type selection"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{a=", {}, "selector: col"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", {"from": "now", "until": "now-1h"}, "from is after until"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", {"maxNodes": "-4"}, "maxNodes"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", {"format": "dot"}, "format")):
            status, _, body = render(self.c, query, **params)
            self.assertEqual(status, 400, (query, params))
            self.assertIn(text, json.loads(body)["message"])

    def test_tenants_never_mix(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        status, _, text = http("POST", self.c.base + "/ingest?name=private.cpu&from=1700000000",
                               b"secret;work 7", {"X-Scope-OrgID": "team-b"})
        self.assertEqual(status, 200, text)
        mine = flamebearer_flat(json.loads(render(self.c, t + '{service_name="private"}', "team-b")[2]))
        self.assertEqual(mine[0], 7 * 10000000)
        other = flamebearer_flat(json.loads(render(self.c, t + '{service_name="private"}')[2]))
        self.assertEqual(other[0], 0)
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=service_name",
                               None, {"X-Scope-OrgID": "team-b"})
        self.assertEqual(json.loads(body), ["private"])


def connect(c, method, body, json_=True, tenant=None):
    headers = {"Content-Type": "application/json" if json_ else "application/proto"}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    data = json.dumps(body).encode() if json_ else body
    status, h, resp = http("POST", c.base + "/querier.v1.QuerierService/" + method, data, headers)
    return status, h, (json.loads(resp) if json_ or status != 200 else resp)


def pb_field(n, payload):
    """A length-delimited protobuf field (n < 16)."""
    out, length = bytes([n << 3 | 2]), len(payload)
    while True:
        b = length & 0x7F
        length >>= 7
        out += bytes([b | (0x80 if length else 0)])
        if not length:
            return out + payload


def pb_varint_field(n, v):
    out = bytes([n << 3])
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def pb_read(data):
    """{field: [values]} of one protobuf message (varints and bytes)."""
    fields, i = {}, 0
    while i < len(data):
        key, i = pb_varint(data, i)
        num, wire = key >> 3, key & 7
        v, i = pb_varint(data, i)
        if wire == 2:
            fields.setdefault(num, []).append(data[i:i + v]); i += v
        else:
            fields.setdefault(num, []).append(v)
    return fields


class ConnectApiTest(unittest.TestCase):
    """querier.v1.QuerierService over Connect, as Grafana's data source calls it."""

    @classmethod
    def setUpClass(cls):
        StoreApiTest.setUpClass.__func__(cls)
        cls.cpu = cls.files.index("go-1s-cpu")

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def test_profile_types_and_labels(self):
        status, _, body = connect(self.c, "ProfileTypes", {})
        self.assertEqual(status, 200)
        by_id = {t["ID"]: t for t in body["profileTypes"]}
        t = by_id["process_cpu:cpu:nanoseconds:cpu:nanoseconds"]
        self.assertEqual((t["name"], t["sampleType"], t["sampleUnit"], t["periodType"], t["periodUnit"]),
                         ("process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds"))
        sel = '{service_name="svc-%d"}' % self.cpu
        status, _, body = connect(self.c, "LabelNames", {"matchers": [sel]})
        self.assertIn("worker", body["names"])
        self.assertIn("service_name", body["names"])
        status, _, body = connect(self.c, "LabelValues", {"name": "service_name", "matchers": [sel]})
        self.assertEqual(body["names"], ["svc-%d" % self.cpu])
        status, _, body = connect(self.c, "Series", {"matchers": [sel], "labelNames": ["worker"]})
        workers = {l["labels"][0]["value"] for l in body["labelsSet"] if l.get("labels")}
        self.assertGreaterEqual(len(workers), 2)
        status, _, body = connect(self.c, "LabelValues", {})
        self.assertEqual(status, 400)
        self.assertEqual(body["code"], "invalid_argument")

    def test_label_calls_keep_to_their_time_range(self):
        for name, when in (("range-early", 1600000000), ("range-late", 1600003600)):
            status, _, text = http("POST", self.c.base + "/ingest?name=%s.cpu&from=%d&until=%d"
                                   % (name, when, when + 10), b"main;work 5")
            self.assertEqual(status, 200, text)
        late = {"start": str(1600003500 * 1000), "end": str(1600003700 * 1000)}
        sel = '{service_name=~"range-.*"}'
        status, _, body = connect(self.c, "LabelValues", {"name": "service_name", **late})
        self.assertEqual(status, 200, body)
        self.assertIn("range-late", body["names"])
        self.assertNotIn("range-early", body["names"])
        status, _, body = connect(self.c, "LabelValues", {"name": "service_name", "matchers": [sel]})
        self.assertEqual(body["names"], ["range-early", "range-late"])  # no range: all time
        status, _, body = connect(self.c, "Series", {"matchers": [sel], **late})
        names = [[p["value"] for p in l["labels"] if p["name"] == "service_name"] for l in body["labelsSet"]]
        self.assertEqual(names, [["range-late"]])
        nothing = {"start": str(1500000000 * 1000), "end": str(1500000600 * 1000)}
        status, _, body = connect(self.c, "LabelNames", {"matchers": [sel], **nothing})
        self.assertEqual(body.get("names", []), [])
        status, _, body = connect(self.c, "ProfileTypes", nothing)
        self.assertEqual(body.get("profileTypes", []), [])
        status, _, body = connect(self.c, "LabelNames", {"start": "2000", "end": "1000"})
        self.assertEqual(status, 400)

    def test_select_merge_stacktraces_json_and_proto(self):
        req = {"profileTypeID": "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
               "labelSelector": '{service_name="svc-%d"}' % self.cpu,
               "start": "0", "end": str(int(time.time() * 1000)), "maxNodes": "1048576"}
        status, headers, body = connect(self.c, "SelectMergeStacktraces", req)
        self.assertEqual(status, 200, body)
        fg = body["flamegraph"]
        self.assertEqual(int(fg["total"]), 1080000000)
        # The same flame graph as /pyroscope/render: compare the flat values.
        flat = {}
        for level in fg["levels"]:
            v = [int(x) for x in level.get("values", [])]
            for i in range(0, len(v), 4):
                flat[fg["names"][v[i + 3]]] = flat.get(fg["names"][v[i + 3]], 0) + v[i + 2]
        for f, fn in parse_top("go-1s-cpu")[1]["rows"][:10]:
            self.assertEqual(flat.get(fn, 0), f, fn)
        self.assertIn("X-Flamecol-Nodes-Merged", headers)
        proto = (pb_field(1, req["profileTypeID"].encode()) + pb_field(2, req["labelSelector"].encode())
                 + pb_varint_field(3, 0) + pb_varint_field(4, int(req["end"])))
        status, headers, body = connect(self.c, "SelectMergeStacktraces", proto, json_=False)
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "application/proto")
        flamegraph = pb_read(pb_read(body)[1][0])
        self.assertEqual(flamegraph[3][0], 1080000000)
        self.assertEqual(pb_read(flamegraph[2][0])[1][0][:1], b"\x00")  # level 0 starts at x=0

    def test_select_series_and_merge_profile(self):
        end = int(time.time() * 1000)
        req = {"profileTypeID": "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
               "labelSelector": '{service_name="svc-%d"}' % self.cpu,
               "start": "0", "end": str(end), "step": 86400 * 365, "groupBy": ["worker"]}
        status, _, body = connect(self.c, "SelectSeries", req)
        self.assertEqual(status, 200, body)
        series = body["series"]
        ref = pprof_label_totals("go-1s-cpu", 1, "worker")
        got = {}
        for s in series:
            w = [l["value"] for l in s.get("labels", []) if l["name"] == "worker"]
            got[w[0] if w else None] = sum(p["value"] for p in s.get("points", []))
        self.assertEqual(got, ref)
        self.assertEqual(sum(got.values()), GO_CPU_TOTAL)
        status, _, body = connect(self.c, "SelectSeries", dict(req, limit="1"))
        self.assertEqual(len(body["series"]), 1)
        self.assertEqual(body["series"][0]["points"][0]["value"], max(ref.values()))
        del req["groupBy"], req["step"]
        status, _, body = connect(self.c, "SelectMergeProfile", req)
        self.assertEqual(status, 200)
        self.assertEqual(sum(int(s["value"][0]) for s in body["sample"]), 1080000000)
        proto = (pb_field(1, req["profileTypeID"].encode()) + pb_field(2, req["labelSelector"].encode())
                 + pb_varint_field(4, end))
        status, _, body = connect(self.c, "SelectMergeProfile", proto, json_=False)
        path = os.path.join(self.c.dir, "merge.pb")
        with open(path, "wb") as f:
            f.write(body)
        folded = subprocess.run([BIN, "convert", "--to", "folded", path], check=True,
                                capture_output=True, text=True).stdout
        self.assertEqual(sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()), 1080000000)

    def test_diff(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        end = str(int(time.time() * 1000))
        side = lambda name: {"profileTypeID": t, "start": "0", "end": end,
                             "labelSelector": '{service_name="svc-%d"}' % self.files.index(name)}
        status, _, body = connect(self.c, "Diff", {"left": side("go-1s-cpu"), "right": side("go-3s-cpu")})
        self.assertEqual(status, 200, body)
        fg = body["flamegraph"]
        self.assertEqual((int(fg["leftTicks"]), int(fg["rightTicks"])), (1080000000, 5350000000))
        self.assertEqual(int(fg["total"]), 1080000000 + 5350000000)

    def test_span_profiles(self):
        def f(n, payload):
            return pb_field(n, payload)

        def v(n, x):
            return pb_varint_field(n, x)

        # pprof: sample_type samples:count; functions main, a, b; three samples:
        # span ...ab (value 3, trace 4bf9...), span ...cd (value 5), no span (value 7).
        strings = [b"", b"samples", b"count", b"main", b"a", b"b", b"span_id", b"00000000000000ab",
                   b"00000000000000cd", b"trace_id", b"4bf92f3577b34da6a3ce929d0e0e4736"]
        msg = f(1, v(1, 1) + v(2, 2))
        for fid, name in ((1, 3), (2, 4), (3, 5)):
            msg += f(5, v(1, fid) + v(2, name))
            msg += f(4, v(1, fid) + f(4, v(1, fid)))
        msg += f(2, f(1, bytes([2, 1])) + f(2, bytes([3])) + f(3, v(1, 6) + v(2, 7)) + f(3, v(1, 9) + v(2, 10)))
        msg += f(2, f(1, bytes([3, 1])) + f(2, bytes([5])) + f(3, v(1, 6) + v(2, 8)))
        msg += f(2, f(1, bytes([1])) + f(2, bytes([7])))
        for s_ in strings:
            msg += f(6, s_)
        status, _, text = http("POST", self.c.base + "/ingest?name=spansvc&from=1700000000", msg,
                               {"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, text)
        status, _, body = connect(self.c, "LabelValues", {"name": "__profile_type__",
                                                          "matchers": ['{service_name="spansvc"}']})
        t = body["names"][0]
        end = str(int(time.time() * 1000))
        base = {"profileTypeID": t, "labelSelector": '{service_name="spansvc"}', "start": "0", "end": end}
        totals = {}
        for name, extra in (("ab", {"spanSelector": ["00000000000000ab"]}),
                            ("cd", {"spanSelector": ["00000000000000cd"]}),
                            ("both", {"spanSelector": ["00000000000000ab", "00000000000000cd"]}),
                            ("none", {"spanSelector": ["00000000000000ef"]})):
            status, _, body = connect(self.c, "SelectMergeSpanProfile", dict(base, **extra))
            self.assertEqual(status, 200, body)
            totals[name] = int(body.get("flamegraph", {}).get("total", 0))
        self.assertEqual(totals, {"ab": 3, "cd": 5, "both": 8, "none": 0})
        # The whole profile, and the trace route through SelectMergeStacktraces.
        status, _, body = connect(self.c, "SelectMergeStacktraces", base)
        self.assertEqual(int(body["flamegraph"]["total"]), 15)
        status, _, body = connect(self.c, "SelectMergeStacktraces",
                                  dict(base, traceIdSelector=["4bf92f3577b34da6a3ce929d0e0e4736"]))
        self.assertEqual(int(body["flamegraph"]["total"]), 3)
        status, _, body = connect(self.c, "SelectMergeSpanProfile", dict(base, spanSelector=["xyz"]))
        self.assertEqual(status, 400)
        self.assertIn("16 hex digits", body["message"])

    def test_unimplemented_and_bad_requests(self):
        status, _, body = connect(self.c, "SelectHeatmap", {})
        self.assertEqual((status, body["code"]), (501, "unimplemented"))
        status, _, body = connect(self.c, "SelectMergeStacktraces", {"labelSelector": "{}"})
        self.assertEqual(status, 400)
        self.assertIn("profile-type selection must be of the form", body["message"])  # Pyroscope's
        status, _, body = connect(self.c, "SelectMergeStacktraces", b"\x0a\xff\xff", json_=False)
        self.assertEqual(status, 400)
        status, _, _ = http("POST", self.c.base + "/querier.v1.QuerierService/ProfileTypes", b"{}",
                            {"Content-Type": "text/plain"})
        self.assertEqual(status, 415)


class RetentionTest(unittest.TestCase):
    def test_old_windows_go_recent_stay(self):
        c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "1h"))
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        with c:
            now = int(time.time())
            for name, when in (("old", now - 3 * 3600), ("new", now - 60)):
                status, _, text = http("POST", c.base + "/ingest?name=%s.cpu&from=%d&until=%d"
                                       % (name, when, when + 10), b"main;work 5")
                self.assertEqual(status, 200, text)
            deadline = time.monotonic() + 20
            old = None
            when = now - 3 * 3600
            while time.monotonic() < deadline:
                # Its 10 s window: coarse windows that have not ended yet still
                # hold it (retention deletes a window once all of it is old).
                old = flamebearer_flat(json.loads(render(c, t + '{service_name="old"}', **{
                    "from": str(when), "until": str(when + 10)})[2]))[0]
                if old == 0:
                    break
                time.sleep(0.1)  # polling for the retention pass, not a fixed wait
            self.assertEqual(old, 0)
            new = flamebearer_flat(json.loads(render(c, t + '{service_name="new"}')[2]))[0]
            self.assertEqual(new, 5 * 10000000)
            self.assertGreater(c.metric("flamecol_store_retention_deleted_total", 'exporter="store"'), 0)
            self.assertGreater(c.metric("flamecol_store_used_bytes", 'exporter="store"'), 0)
            self.assertEqual(c.stop(), 0, c.log())

    def test_pods_left_without_data_are_forgotten(self):
        """Pods a (the service's first) and c of svc push now, pod b only 3 h
        ago: once retention (1h) has deleted b's windows, b is gone from the
        label values and counted as forgotten, a and c stay; b pushing again
        is made again and counted under its labels."""
        c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "1h"))
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        with c:
            now = int(time.time())
            for pod, when in (("a", now - 60), ("c", now - 50), ("b", now - 3 * 3600)):
                status, _, text = http("POST", c.base + "/ingest?name=svc.cpu%%7Bpod%%3D%s%%7D&from=%d&until=%d"
                                       % (pod, when, when + 10), b"main;work 5")
                self.assertEqual(status, 200, text)
            values = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                status, _, body = http("GET", c.base + "/pyroscope/label-values?label=pod")
                self.assertEqual(status, 200, body)
                values = sorted(json.loads(body))
                forgotten = c.metric("flamecol_store_pods_forgotten_total", 'exporter="store"')
                if values == ["a", "c"] and forgotten == 1:
                    break
                time.sleep(0.1)  # polling for the retention pass, not a fixed wait
            self.assertEqual(values, ["a", "c"])
            self.assertEqual(forgotten, 1)
            self.assertGreater(c.metric("flamecol_store_series_forgotten_total", 'exporter="store"'), 0)
            status, _, text = http("POST", c.base + "/ingest?name=svc.cpu%%7Bpod%%3Db%%7D&from=%d&until=%d"
                                   % (now - 30, now - 20), b"main;work 7")
            self.assertEqual(status, 200, text)
            b = flamebearer_flat(json.loads(render(c, t + '{service_name="svc",pod="b"}')[2]))[0]
            self.assertEqual(b, 7 * 10000000)
            every = flamebearer_flat(json.loads(render(c, t + '{service_name="svc"}')[2]))[0]
            self.assertEqual(every, (5 + 5 + 7) * 10000000)
            status, _, body = http("GET", c.base + "/pyroscope/label-values?label=pod")
            self.assertEqual(sorted(json.loads(body)), ["a", "b", "c"])
            self.assertEqual(c.stop(), 0, c.log())


class FineRetentionTest(unittest.TestCase):
    def test_old_past_is_read_at_100s(self):
        text = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0")
        text = text.replace("    retention_interval:", "    fine_retention: 1h\n    retention_interval:")
        c = Collector(text)
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        with c:
            now = int(time.time())
            old = (now - 3 * 3600) // 100 * 100 + 50  # mid 100 s window, 10 s windows compacted
            new = (now - 600) // 100 * 100 + 50  # still at 10 s
            for name, when in (("old", old), ("new", new)):
                status, _, body = http("POST", c.base + "/ingest?name=%s.cpu&from=%d&until=%d"
                                       % (name, when, when + 10), b"main;work 5")
                self.assertEqual(status, 200, body)

            def total(name, frm, until):
                doc = json.loads(render(c, t + '{service_name="%s"}' % name,
                                        **{"from": str(frm), "until": str(until)})[2])
                return flamebearer_flat(doc)[0]

            # A range 30 s before the old profile: once compacted, it rounds out
            # to the 100 s window that holds it.
            deadline = time.monotonic() + 20
            got = 0
            while time.monotonic() < deadline:
                got = total("old", old - 30, old - 20)
                if got:
                    break
                time.sleep(0.1)  # polling for the retention pass, not a fixed wait
            self.assertEqual(got, 5 * 10000000)
            self.assertEqual(total("old", old, old + 10), 5 * 10000000)
            # The recent past keeps its 10 s resolution.
            self.assertEqual(total("new", new - 30, new - 20), 0)
            self.assertEqual(total("new", new, new + 10), 5 * 10000000)
            # No 10 s window of the old profile is left: either the pass that
            # compacted came before it (a write into the compacted past goes
            # to its 100 s window alone) or it deleted it (counted; the unit
            # test test_compaction_rounds_old_ranges_out_to_100s counts them).
            self.assertEqual(total("old", old - 30, old - 20), 5 * 10000000)
            # The timeline says where 100 s resolution starts (Pyroscope v0's watermarks).
            doc = json.loads(render(c, t + '{service_name="old"}', **{"from": str(old - 600),
                                                                    "until": str(now)})[2])
            mark = doc["timeline"]["watermarks"]["1"]
            # The pass that set it ran between `now` and this query, and rounds
            # its cutoff down to a whole 100 s window.
            later = int(time.time()) + 1
            self.assertTrue(now - 3600 - 100 <= mark <= later - 3600, (now, mark, later))
            self.assertEqual(mark % 100, 0, mark)
            self.assertEqual(c.stop(), 0, c.log())


class CrashTest(unittest.TestCase):
    def test_acknowledged_pushes_survive_sigkill(self):
        base = scratch_dir("flamecol-crash-")
        acked = []
        sent = 0
        # Folded .cpu pushes at the default 100 Hz: each "1" is stored as 10 ms of CPU.
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        tick = 10000000
        for round_ in range(3):
            text = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0").replace("{dir}", base)
            c = Collector(text)
            c.wait_ready()
            deadline = time.monotonic() + random.uniform(0.3, 0.8)
            while time.monotonic() < deadline:
                name = "crash-%d" % sent
                sent += 1
                try:
                    status, _, _ = http("POST", c.base + "/ingest?name=%s.cpu&from=1700000000" % name,
                                        b"main;work 1", timeout=5)
                except OSError:
                    break
                if status == 200:
                    acked.append(name)
            os.kill(c.proc.pid, signal.SIGKILL)
            c.proc.wait()
            c.stderr.close()
        c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0").replace("{dir}", base))
        with c:
            status, _, body = http("GET", c.base + "/pyroscope/label-values?label=service_name")
            stored = set(json.loads(body))
            self.assertGreater(len(acked), 20)
            for name in acked:
                self.assertIn(name, stored)
            # Exactly once: every acknowledged push counted one sample, never two.
            total = flamebearer_flat(json.loads(render(c, t + '{service_name=~"crash-.*"}')[2]))[0]
            self.assertGreaterEqual(total, len(acked) * tick)
            self.assertLessEqual(total, sent * tick)
            for name in random.sample(acked, 10):
                one = flamebearer_flat(json.loads(render(c, t + '{service_name="%s"}' % name)[2]))[0]
                self.assertEqual(one, tick, name)
            self.assertEqual(c.stop(), 0, c.log())


if __name__ == "__main__":
    unittest.main()
