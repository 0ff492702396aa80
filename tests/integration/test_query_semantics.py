"""Query semantics through the real binary, with expected values computed by
hand from hand-built inputs (never from flamecol's own answers):

- the diff ("double") flamebearer of two small folded profiles, x offsets of
  each side worked out by hand, on /pyroscope/render-diff and Connect Diff;
- tenants (X-Scope-OrgID) on every Connect call, /api/v1/findings and
  /pyroscope/render-diff: each tenant answers only its own data;
- query.max_query_length: a range of exactly the limit is accepted, one unit
  more is refused, on /pyroscope/render and on Connect;
- fine_retention: a 10 s slice of the last compacted 100 s window (the one
  ending exactly at the compaction boundary) answers with that whole window.
- bundle_after: 10 s windows bundled by the retention pass answer as sent,
  slice by slice, and so does a late push into a bundled window.

Units: folded `.cpu` pushes at the default sampleRate of 100 Hz are stored as
value x 1e9/100 ns (README, /ingest parameters), so one count is TICK ns.
"""
import json
import time
import unittest
import urllib.parse

from harness import STORE_PIPELINE, Collector, http

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
TICK = 10**9 // 100


def pipeline(**store):
    """The store pipeline with extra store settings (e.g. max_query_length: 1h)."""
    text = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0")
    for k, v in store.items():
        if "      %s:" % k in text:  # a query.* key already in the file
            text = "\n".join(("      %s: %s" % (k, v)) if l.startswith("      %s:" % k) else l
                             for l in text.split("\n"))
        else:
            text = text.replace("    retention_interval:", "    %s: %s\n    retention_interval:" % (k, v))
    return text


def push(c, name, folded, when=1700000000, tenant=None, until=None):
    url = c.base + "/ingest?name=%s&from=%d" % (urllib.parse.quote(name), when)
    if until is not None:
        url += "&until=%d" % until
    status, _, text = http("POST", url, folded.encode(), {"X-Scope-OrgID": tenant} if tenant else {})
    assert status == 200, (status, text)


def get(c, path, params, tenant=None):
    status, _, body = http("GET", c.base + path + "?" + urllib.parse.urlencode(params), None,
                           {"X-Scope-OrgID": tenant} if tenant else {})
    return status, json.loads(body) if body else None


def connect(c, method, body, tenant=None):
    headers = {"Content-Type": "application/json"}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    status, _, resp = http("POST", c.base + "/querier.v1.QuerierService/" + method,
                           json.dumps(body).encode(), headers)
    return status, json.loads(resp) if resp else {}


def now_ms():
    return int(time.time() * 1000)


def double_tuples(names, levels):
    """Diff levels as lists of (lx delta, lt, ls, rx delta, rt, rs, name) per depth."""
    out = []
    for level in levels:
        v = [int(x) for x in level]
        assert len(v) % 7 == 0, v
        out.append([tuple(v[i:i + 6]) + (names[v[i + 6]],) for i in range(0, len(v), 7)])
    return out


# Two hand-built folded profiles and their diff flamebearer, worked out by hand.
#
#   left:  a;b 3   a;c 2   d 4          right: a;b 1   a;e 5   d;f 2
#
# Union tree, children in name order after the parent's self, x absolute:
#                  left (x, total, self)   right (x, total, self)
#   total          0, 9, 0                 0, 8, 0
#     a            0, 5, 0                 0, 6, 0
#       b          0, 3, 3                 0, 1, 1
#       c          3, 2, 2                 1, 0, 0
#       e          5, 0, 0                 1, 5, 5
#     d            5, 4, 4                 6, 2, 0
#       f          9, 0, 0                 6, 2, 2   (after d's self: left 5+4, right 6+0)
#
# Each side's x is delta-encoded on its own against the end (x + total) of the
# previous node of the level: at depth 2 f follows e, whose ends are left 5,
# right 6, so f's deltas are left 9-5 = 4 and right 6-6 = 0.
DIFF_LEFT = "a;b 3\na;c 2\nd 4\n"
DIFF_RIGHT = "a;b 1\na;e 5\nd;f 2\n"
DIFF_LEVELS = [
    [(0, 9, 0, 0, 8, 0, "total")],
    [(0, 5, 0, 0, 6, 0, "a"), (0, 4, 4, 0, 2, 0, "d")],
    [(0, 3, 3, 0, 1, 1, "b"), (0, 2, 2, 0, 0, 0, "c"), (0, 0, 0, 0, 5, 5, "e"),
     (4, 0, 0, 0, 2, 2, "f")],
]
DIFF_MAX_SELF = 5  # e: 0 + 5 (max of left self + right self)

# A second pair where the right side has the gaps: right x offsets that differ
# from the left ones at every depth.
#   left:  p;q 2   p;r 1   s;t 4        right: p 3   p;q 1   s 2   s;u 6
#                  left (x, total, self)   right (x, total, self)
#   total          0, 7, 0                 0, 12, 0
#     p            0, 3, 0                 0, 4, 3
#       q          0, 2, 2                 3, 1, 1
#       r          2, 1, 1                 4, 0, 0
#     s            3, 4, 0                 4, 8, 2
#       t          3, 4, 4                 6, 0, 0
#       u          7, 0, 0                 6, 6, 6
# depth 2 deltas: q (0, 3); r (2-2=0, 4-4=0); t (3-3=0, 6-4=2); u (7-7=0, 6-6=0)
DIFF2_LEFT = "p;q 2\np;r 1\ns;t 4\n"
DIFF2_RIGHT = "p 3\np;q 1\ns 2\ns;u 6\n"
DIFF2_LEVELS = [
    [(0, 7, 0, 0, 12, 0, "total")],
    [(0, 3, 0, 0, 4, 3, "p"), (0, 4, 0, 0, 8, 2, "s")],
    [(0, 2, 2, 3, 1, 1, "q"), (0, 1, 1, 0, 0, 0, "r"), (0, 4, 4, 2, 0, 0, "t"),
     (0, 0, 0, 0, 6, 6, "u")],
]
DIFF2_MAX_SELF = 6  # u: 0 + 6


def scaled(levels, k):
    return [[tuple(x * k for x in t[:6]) + (t[6],) for t in level] for level in levels]


class QuerySemanticsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(pipeline(max_query_length="1h"))
        cls.c.wait_ready()
        push(cls.c, "diff-left.cpu", DIFF_LEFT)
        push(cls.c, "diff-right.cpu", DIFF_RIGHT)
        push(cls.c, "diff2-left.cpu", DIFF2_LEFT)
        push(cls.c, "diff2-right.cpu", DIFF2_RIGHT)
        # Tenants: the same service name with different stacks, plus one of their own each.
        push(cls.c, "tenant-shared.cpu", "main;alpha 3\n", tenant="team-a")
        push(cls.c, "only-a.cpu", "main;solo 2\n", tenant="team-a")
        push(cls.c, "tenant-shared.cpu", "main;beta 4\nmain;gamma 1\n", tenant="team-b")
        push(cls.c, "only-b.alloc_objects", "main;alloc 9\n", tenant="team-b")
        # max_query_length: a profile at the start of a 1 h range.
        push(cls.c, "limit.cpu", "main;limit 1\n", when=1700000000)

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    # ---- diff --------------------------------------------------------------------------------

    def render_diff(self, left, right, tenant=None, **extra):
        params = {"leftQuery": '%s{service_name="%s"}' % (CPU, left),
                  "rightQuery": '%s{service_name="%s"}' % (CPU, right),
                  "leftFrom": "1699999000", "leftUntil": "1700001000",
                  "rightFrom": "1699999000", "rightUntil": "1700001000", "maxNodes": "1024"}
        params.update(extra)
        return get(self.c, "/pyroscope/render-diff", params, tenant)

    def connect_diff(self, left, right, tenant=None):
        side = lambda svc: {"profileTypeID": CPU, "labelSelector": '{service_name="%s"}' % svc,
                            "start": str(1699999000 * 1000), "end": str(1700001000 * 1000),
                            "maxNodes": "1024"}
        return connect(self.c, "Diff", {"left": side(left), "right": side(right)}, tenant)

    def check_render_diff(self, left, right, levels, lticks, rticks, max_self):
        status, doc = self.render_diff(left, right)
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["metadata"]["format"], "double")
        fb = doc["flamebearer"]
        self.assertEqual(double_tuples(fb["names"], fb["levels"]), scaled(levels, TICK))
        self.assertEqual((doc["leftTicks"], doc["rightTicks"]), (lticks * TICK, rticks * TICK))
        self.assertEqual(fb["numTicks"], (lticks + rticks) * TICK)
        self.assertEqual(fb["maxSelf"], max_self * TICK)

    def check_connect_diff(self, left, right, levels, lticks, rticks, max_self):
        status, body = self.connect_diff(left, right)
        self.assertEqual(status, 200, body)
        fg = body["flamegraph"]
        got = double_tuples(fg["names"], [l.get("values", []) for l in fg["levels"]])
        self.assertEqual(got, scaled(levels, TICK))
        self.assertEqual((int(fg["leftTicks"]), int(fg["rightTicks"])), (lticks * TICK, rticks * TICK))
        self.assertEqual(int(fg["total"]), (lticks + rticks) * TICK)
        self.assertEqual(int(fg["maxSelf"]), max_self * TICK)

    def test_render_diff_by_hand(self):
        self.check_render_diff("diff-left", "diff-right", DIFF_LEVELS, 9, 8, DIFF_MAX_SELF)
        self.check_render_diff("diff2-left", "diff2-right", DIFF2_LEVELS, 7, 12, DIFF2_MAX_SELF)

    def test_connect_diff_by_hand(self):
        self.check_connect_diff("diff-left", "diff-right", DIFF_LEVELS, 9, 8, DIFF_MAX_SELF)
        self.check_connect_diff("diff2-left", "diff2-right", DIFF2_LEVELS, 7, 12, DIFF2_MAX_SELF)

    def test_diff_sides_swapped(self):
        # Swapping the sides swaps the columns (and nothing else): left <-> right.
        swap = lambda levels: [[(t[3], t[4], t[5], t[0], t[1], t[2], t[6]) for t in level] for level in levels]
        self.check_render_diff("diff-right", "diff-left", swap(DIFF_LEVELS), 8, 9, DIFF_MAX_SELF)
        self.check_connect_diff("diff2-right", "diff2-left", swap(DIFF2_LEVELS), 12, 7, DIFF2_MAX_SELF)

    # ---- tenants -----------------------------------------------------------------------------

    def test_connect_calls_keep_to_their_tenant(self):
        rng = {"start": str(1699999000 * 1000), "end": str(1700001000 * 1000)}
        sel = '{service_name="tenant-shared"}'
        # ProfileTypes: team-a pushed only .cpu, team-b .cpu and .alloc_objects, team-c nothing.
        for tenant, want in (("team-a", 1), ("team-b", 2), ("team-c", 0)):
            for extra in ({}, rng):
                status, body = connect(self.c, "ProfileTypes", extra, tenant)
                self.assertEqual(status, 200, body)
                ids = sorted(t["ID"] for t in body.get("profileTypes", []))
                self.assertEqual(len(ids), want, (tenant, ids))
                if want:
                    self.assertIn(CPU, ids)
                if want == 2:
                    self.assertTrue(any(i.startswith("memory:alloc_objects:") for i in ids), ids)
        # LabelValues / LabelNames / Series.
        for tenant, want in (("team-a", ["only-a", "tenant-shared"]), ("team-b", ["only-b", "tenant-shared"]),
                             ("team-c", [])):
            for extra in ({}, rng):
                status, body = connect(self.c, "LabelValues", dict(name="service_name", **extra), tenant)
                self.assertEqual(status, 200, body)
                self.assertEqual(body.get("names", []), want, (tenant, extra))
            status, body = connect(self.c, "LabelNames", {}, tenant)
            self.assertEqual(status, 200, body)
            self.assertEqual("service_name" in body.get("names", []), bool(want), tenant)
            status, body = connect(self.c, "Series", {"matchers": ["{}"], "labelNames": ["service_name"]},
                                   tenant)
            self.assertEqual(status, 200, body)
            got = sorted({p["value"] for l in body.get("labelsSet", []) for p in l.get("labels", [])})
            self.assertEqual(got, want, tenant)
        # The same service's stacks: team-a main;alpha 3, team-b main;beta 4 + main;gamma 1.
        for tenant, total, leaves in (("team-a", 3, {"alpha"}), ("team-b", 5, {"beta", "gamma"}),
                                      ("team-c", 0, set())):
            req = dict(profileTypeID=CPU, labelSelector=sel, **rng)
            status, body = connect(self.c, "SelectMergeStacktraces", req, tenant)
            self.assertEqual(status, 200, body)
            fg = body.get("flamegraph", {})
            self.assertEqual(int(fg.get("total", 0)), total * TICK, tenant)
            self.assertEqual(set(fg.get("names", [])) - {"total", "main"}, leaves, tenant)
            status, body = connect(self.c, "SelectSeries", dict(req, step=3600), tenant)
            self.assertEqual(status, 200, body)
            self.assertEqual(sum(p["value"] for s in body.get("series", []) for p in s.get("points", [])),
                             total * TICK, tenant)
            status, body = connect(self.c, "SelectMergeProfile", req, tenant)
            self.assertEqual(status, 200, body)
            self.assertEqual(sum(int(s["value"][0]) for s in body.get("sample", [])), total * TICK, tenant)
            status, body = self.connect_diff("tenant-shared", "tenant-shared", tenant)
            self.assertEqual(status, 200, body)
            fg = body.get("flamegraph", {})
            self.assertEqual((int(fg.get("leftTicks", 0)), int(fg.get("rightTicks", 0))),
                             (total * TICK, total * TICK), tenant)
        # Without the header: the anonymous tenant, which has none of it.
        status, body = connect(self.c, "LabelValues", {"name": "service_name"})
        self.assertNotIn("tenant-shared", body.get("names", []))
        self.assertNotIn("only-a", body.get("names", []))

    def test_findings_and_render_diff_keep_to_their_tenant(self):
        q = {"query": '%s{service_name="tenant-shared"}' % CPU, "from": "1699999000", "until": "1700001000"}
        for tenant, total, top in (("team-a", 3, {"alpha": 3}), ("team-b", 5, {"beta": 4, "gamma": 1}),
                                   ("team-c", 0, {})):
            status, doc = get(self.c, "/api/v1/findings", q, tenant)
            self.assertEqual(status, 200, doc)
            self.assertEqual(doc["total"], total * TICK, tenant)
            self.assertEqual({r["name"]: r["self"] for r in doc["top"] if r["self"]},
                             {k: v * TICK for k, v in top.items()}, tenant)
            status, doc = self.render_diff("tenant-shared", "tenant-shared", tenant)
            self.assertEqual(status, 200, doc)
            self.assertEqual((doc["leftTicks"], doc["rightTicks"]), (total * TICK, total * TICK), tenant)
            status, _, body = http("GET", self.c.base + "/pyroscope/render?" + urllib.parse.urlencode(q),
                                   None, {"X-Scope-OrgID": tenant})
            self.assertEqual(json.loads(body)["flamebearer"]["numTicks"], total * TICK, tenant)
        status, doc = get(self.c, "/api/v1/findings", q)  # anonymous
        self.assertEqual(doc["total"], 0)

    # ---- max_query_length --------------------------------------------------------------------

    def test_max_query_length_exact(self):
        sel = '%s{service_name="limit"}' % CPU
        frm = 1700000000
        hour = 3600
        # Seconds, and nanoseconds (the finest unit /pyroscope/render takes).
        for f, u_ok, u_bad in ((frm, frm + hour, frm + hour + 1),
                               (frm * 10**9, (frm + hour) * 10**9, (frm + hour) * 10**9 + 1)):
            status, doc = get(self.c, "/pyroscope/render", {"query": sel, "from": f, "until": u_ok})
            self.assertEqual(status, 200, doc)
            self.assertEqual(doc["flamebearer"]["numTicks"], 1 * TICK)
            status, doc = get(self.c, "/pyroscope/render", {"query": sel, "from": f, "until": u_bad})
            self.assertEqual(status, 400, doc)
            self.assertIn("max_query_length", doc["message"])
        # render-diff parses each side the same way.
        status, doc = get(self.c, "/pyroscope/render-diff", {
            "leftQuery": sel, "rightQuery": sel, "leftFrom": frm, "leftUntil": frm + hour,
            "rightFrom": frm, "rightUntil": frm + hour + 1})
        self.assertEqual(status, 400, doc)
        # Connect: milliseconds.
        base = {"profileTypeID": CPU, "labelSelector": '{service_name="limit"}'}
        for method in ("SelectMergeStacktraces", "SelectSeries", "SelectMergeProfile"):
            step = {"step": 60} if method == "SelectSeries" else {}  # Pyroscope: step >= 1 ms
            ok = dict(base, start=str(frm * 1000), end=str((frm + hour) * 1000), **step)
            bad = dict(base, start=str(frm * 1000), end=str((frm + hour) * 1000 + 1), **step)
            status, body = connect(self.c, method, ok)
            self.assertEqual(status, 200, (method, body))
            status, body = connect(self.c, method, bad)
            self.assertEqual(status, 400, (method, body))
            self.assertIn("max_query_length", body["message"])
        status, body = connect(self.c, "SelectMergeStacktraces",
                               dict(base, start=str(frm * 1000), end=str((frm + hour) * 1000)))
        self.assertEqual(int(body["flamegraph"]["total"]), 1 * TICK)


class CompactionBoundaryTest(unittest.TestCase):
    """fine_retention: the 100 s window that ends exactly at the compaction
    boundary is compacted like every window before it."""

    def test_last_compacted_window_rounds_out(self):
        c = Collector(pipeline(fine_retention="1h"))
        with c:
            def doc(svc, frm, until):
                status, d = get(c, "/pyroscope/render", {"query": '%s{service_name="%s"}' % (CPU, svc),
                                                        "from": str(frm), "until": str(until)})
                self.assertEqual(status, 200, d)
                return d

            # Wait for the first compaction pass: the watermark says where it stopped.
            deadline = time.monotonic() + 30
            mark = None
            while time.monotonic() < deadline and not mark:
                mark = (doc("none", 0, int(time.time()))["timeline"].get("watermarks") or {}).get("1")
                time.sleep(0.1)  # polling for the retention pass, not a fixed wait
            self.assertTrue(mark, "no compaction pass")
            checked = 0
            for attempt in range(5):
                # The boundary moves every 100 s: retry when it moved during the check.
                mark = doc("none", 0, int(time.time()))["timeline"]["watermarks"]["1"]
                self.assertEqual(mark % 100, 0)
                svc = "edge-%d" % attempt
                # One profile in the last compacted window [mark-100, mark), at mark-50:
                # by hand, any 10 s slice of that window answers with the whole window.
                push(c, svc + ".cpu", "main;edge 5\n", when=mark - 50, until=mark - 40)
                # and one in the window before it, which must not leak in.
                push(c, svc + ".cpu", "main;before 7\n", when=mark - 150, until=mark - 140)
                got = [doc(svc, a, b) for a, b in ((mark - 30, mark - 20), (mark - 100, mark - 90),
                                                    (mark - 10, mark), (mark - 50, mark - 40))]
                after = doc("none", 0, int(time.time()))["timeline"]["watermarks"]["1"]
                if after != mark:
                    continue
                for d in got:
                    self.assertEqual(d["flamebearer"]["numTicks"], 5 * TICK)
                    self.assertNotIn("before", d["flamebearer"]["names"])
                # The window before: its own slice answers with it alone.
                self.assertEqual(doc(svc, mark - 130, mark - 120)["flamebearer"]["numTicks"], 7 * TICK)
                # Both whole windows.
                self.assertEqual(doc(svc, mark - 200, mark)["flamebearer"]["numTicks"], 12 * TICK)
                checked += 1
                break
            self.assertEqual(checked, 1, "the boundary kept moving")
            self.assertEqual(c.stop(), 0, c.log())


class BundleTest(unittest.TestCase):
    """bundle_after: the past 10 s windows, compressed together per 100 s span by the
    retention pass, answer exactly what was pushed, 10 s slice by slice."""

    def test_bundled_windows_answer_as_pushed(self):
        c = Collector(pipeline(bundle_after="1s"))
        with c:
            t0 = (int(time.time()) - 7200) // 100 * 100  # two hours ago, on a span's edge
            n = 30  # three spans of 10 s windows
            for i in range(n):
                push(c, "bundled.cpu", "main;w%d %d\nmain;all 1\n" % (i % 4, 10 + i),
                     when=t0 + 10 * i + 2, until=t0 + 10 * i + 3)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (c.metric(
                    "flamecol_store_bundled_windows_total", 'exporter="store"') or 0) < n:
                time.sleep(0.1)  # polling for the retention pass, not a fixed wait
            self.assertGreaterEqual(
                c.metric("flamecol_store_bundled_windows_total", 'exporter="store"'), n)

            def ticks(frm, until):
                status, d = get(c, "/pyroscope/render", {
                    "query": '%s{service_name="bundled"}' % CPU, "from": str(frm),
                    "until": str(until)})
                self.assertEqual(status, 200, d)
                return d["flamebearer"]["numTicks"]

            # By hand: window i holds 10 + i + 1 counts.
            for i in range(n):
                self.assertEqual(ticks(t0 + 10 * i, t0 + 10 * i + 10), (11 + i) * TICK, i)
            self.assertEqual(ticks(t0, t0 + 10 * n), sum(11 + i for i in range(n)) * TICK)
            self.assertEqual(ticks(t0 + 30, t0 + 170), sum(11 + i for i in range(3, 17)) * TICK)
            # A late push into a bundled window adds to it, and to nothing else.
            push(c, "bundled.cpu", "main;late 1000\n", when=t0 + 52, until=t0 + 53)
            self.assertEqual(ticks(t0 + 50, t0 + 60), (11 + 5 + 1000) * TICK)
            self.assertEqual(ticks(t0 + 40, t0 + 50), (11 + 4) * TICK)
            self.assertEqual(ticks(t0, t0 + 10 * n),
                             (sum(11 + i for i in range(n)) + 1000) * TICK)
            self.assertEqual(c.metric("flamecol_store_corrupt_windows_total", 'exporter="store"'),
                             0)
            self.assertEqual(c.stop(), 0, c.log())


if __name__ == "__main__":
    unittest.main()
