"""Connect (querier.v1.QuerierService) answers as Grafana Pyroscope gives
them, through the real binary with real HTTP Connect requests (JSON, and
application/proto where the wire matters). Expected codes and messages are
Pyroscope's, read from its source (not from flamecol's answers):

- an unparsable profile_typeID: invalid_argument with the message of
  pkg/model ParseProfileTypeSelector, `profile-type selection must be of the
  form <name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>(:delta),
  got(N): %q`, N the number of ':'-separated parts (5 or 6 are accepted; a
  6th `delta` part is not part of the stored type);
- SelectSeries with a step under 1 ms (0 too, the default of an absent
  field): invalid_argument `step must be >= 1ms` (queryfrontend SelectSeries);
- SelectSeries over a range without data: no series at all;
- Series with label_names: each distinct label set, cut to those names, once;
  none when no matching series has any of the names (querybackend
  getSeriesLabels);
- /pyroscope/render with an unparsable profile type: 400, `failed to parse
  'query'` (pkg/querier/http.go parseQuery).

Values pushed are folded `.cpu` profiles at 100 Hz: one count is TICK ns.
"""
import json
import time
import unittest
import urllib.parse

from harness import STORE_PIPELINE, Collector, http

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
TICK = 10**9 // 100
T0 = 1700000000  # seconds; every push is at T0 (10 s long)
FORM = ("profile-type selection must be of the form "
        "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>(:delta), got(%d): %s")


def connect(c, method, body, proto=False):
    headers = {"Content-Type": "application/proto" if proto else "application/json"}
    data = body if proto else json.dumps(body).encode()
    status, _, resp = http("POST", c.base + "/querier.v1.QuerierService/" + method, data, headers)
    if status != 200 or not proto:
        return status, json.loads(resp) if resp else {}
    return status, resp


def pb_string(n, s):
    """A length-delimited protobuf field (n < 16, len < 128)."""
    assert n < 16 and len(s) < 128
    return bytes([n << 3 | 2, len(s)]) + s


def pb_int(n, v):
    out = bytes([n << 3])
    while True:
        b, v = v & 0x7F, v >> 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


class ConnectAnswersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0"))
        cls.c.wait_ready()
        # svc-a: three series (worker=1, worker=2, and one without worker), all in region=eu;
        # svc-b: one series. Totals by hand: svc-a 2+3+4 = 9 counts, svc-b 7.
        for name, folded in (("svc-a.cpu{region=eu,worker=1}", "main;a 2"),
                             ("svc-a.cpu{region=eu,worker=2}", "main;b 3"),
                             ("svc-a.cpu{region=eu}", "main;c 4"),
                             ("svc-b.cpu{region=us}", "main;d 7")):
            url = cls.c.base + "/ingest?name=%s&from=%d&until=%d" % (urllib.parse.quote(name), T0, T0 + 10)
            status, _, text = http("POST", url, folded.encode())
            assert status == 200, (status, text)

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def rng(self):
        return {"start": str((T0 - 60) * 1000), "end": str((T0 + 60) * 1000)}

    def assert_invalid(self, status, body, message):
        self.assertEqual(status, 400, body)
        self.assertEqual(body.get("code"), "invalid_argument", body)
        self.assertEqual(body.get("message"), message)

    # ---- profile_typeID ------------------------------------------------------------------------

    def test_unparsable_profile_type_is_invalid_argument(self):
        sel = '{service_name="svc-a"}'
        for type_id, quoted, parts in (("garbage", '"garbage"', 1),
                                       ("", '""', 1),
                                       ("process_cpu:cpu:nanoseconds:cpu", '"process_cpu:cpu:nanoseconds:cpu"', 4),
                                       ("a:b:c:d:e:f:g", '"a:b:c:d:e:f:g"', 7),
                                       ('cpu "x"\\y', '"cpu \\"x\\"\\\\y"', 1)):
            want = FORM % (parts, quoted)
            base = dict(self.rng(), profileTypeID=type_id, labelSelector=sel)
            for method, body in (("SelectMergeStacktraces", base),
                                 ("SelectMergeProfile", base),
                                 ("SelectSeries", dict(base, step=15)),
                                 ("SelectMergeSpanProfile", dict(base, spanSelector=["00000000000000ab"])),
                                 ("Diff", {"left": base, "right": dict(base, profileTypeID=CPU)})):
                status, body = connect(self.c, method, body)
                self.assert_invalid(status, body, want)

    def test_profile_type_quoted_as_go_does_over_proto(self):
        # Go's %q: \t and \n by name, other controls and invalid UTF-8 as \xNN, UTF-8 kept.
        raw = b"cpu\t\x01\xff\n\xc3\xa9"
        status, body = connect(self.c, "SelectMergeStacktraces",
                               pb_string(1, raw) + pb_string(2, b"{}") + pb_int(4, T0 * 1000), proto=True)
        self.assert_invalid(status, body, FORM % (1, '"cpu\\t\\x01\\xff\\n\u00e9"'))

    def test_delta_sixth_part_reads_the_stored_type(self):
        for type_id in (CPU, CPU + ":delta"):
            status, body = connect(self.c, "SelectMergeStacktraces",
                                   dict(self.rng(), profileTypeID=type_id, labelSelector='{service_name="svc-a"}'))
            self.assertEqual(status, 200, body)
            self.assertEqual(int(body["flamegraph"]["total"]), 9 * TICK, type_id)

    def test_render_refuses_an_unparsable_profile_type(self):
        for query, param in (("garbage{}", "query"), ("a:b:c:d{service_name=\"svc-a\"}", "query")):
            status, _, body = http("GET", self.c.base + "/pyroscope/render?" + urllib.parse.urlencode(
                {"query": query, "from": T0 - 60, "until": T0 + 60}))
            self.assert_invalid(status, json.loads(body), "failed to parse '%s'" % param)
        status, _, body = http("GET", self.c.base + "/pyroscope/render-diff?" + urllib.parse.urlencode(
            {"leftQuery": CPU + "{}", "rightQuery": "nope{}", "leftFrom": T0 - 60, "leftUntil": T0 + 60,
             "rightFrom": T0 - 60, "rightUntil": T0 + 60}))
        self.assert_invalid(status, json.loads(body), "failed to parse 'rightQuery'")
        status, _, body = http("GET", self.c.base + "/pyroscope/render?" + urllib.parse.urlencode(
            {"query": CPU + ':delta{service_name="svc-a"}', "from": T0 - 60, "until": T0 + 60}))
        self.assertEqual(status, 200, body)

    # ---- SelectSeries step ----------------------------------------------------------------------

    def test_step_under_1ms_is_invalid_argument(self):
        base = dict(self.rng(), profileTypeID=CPU, labelSelector='{service_name="svc-a"}')
        for step in (0, 0.0009, -1, -1e300, "-Infinity"):
            status, body = connect(self.c, "SelectSeries", dict(base, step=step))
            self.assert_invalid(status, body, "step must be >= 1ms")
        status, body = connect(self.c, "SelectSeries", base)  # no step: 0
        self.assert_invalid(status, body, "step must be >= 1ms")
        # application/proto without field 6 (step) is step 0 too.
        proto = pb_string(1, CPU.encode()) + pb_string(2, b'{service_name="svc-a"}') \
            + pb_int(3, (T0 - 60) * 1000) + pb_int(4, (T0 + 60) * 1000)
        status, body = connect(self.c, "SelectSeries", proto, proto=True)
        self.assert_invalid(status, body, "step must be >= 1ms")
        # 1 ms passes that check (a 10 s range is 10,001 points, under the 11,000 cap).
        status, body = connect(self.c, "SelectSeries", dict(base, step=0.001, start=str(T0 * 1000),
                                                           end=str((T0 + 10) * 1000)))
        self.assertEqual(status, 200, body)
        self.assertEqual(sum(p["value"] for s in body["series"] for p in s["points"]), 9 * TICK)

    # ---- SelectSeries: no data, no series -------------------------------------------------------

    def test_empty_range_gives_no_series(self):
        empty = {"start": str((T0 + 3600) * 1000), "end": str((T0 + 7200) * 1000)}
        for extra in ({}, {"groupBy": ["worker"]}, {"groupBy": ["worker"], "limit": "2"}):
            req = dict(empty, profileTypeID=CPU, labelSelector='{service_name="svc-a"}', step=60, **extra)
            status, body = connect(self.c, "SelectSeries", req)
            self.assertEqual(status, 200, body)
            self.assertEqual(body.get("series", []), [], extra)
        # A selector that matches nothing at all.
        req = dict(self.rng(), profileTypeID=CPU, labelSelector='{service_name="nobody"}', step=60)
        status, body = connect(self.c, "SelectSeries", req)
        self.assertEqual(body.get("series", []), [])

    def test_only_series_with_points_in_range(self):
        # Both services match; only svc-b has data after a push at T0 + 3600.
        url = self.c.base + "/ingest?name=%s&from=%d&until=%d" % (
            urllib.parse.quote("svc-b.cpu{region=us}"), T0 + 3600, T0 + 3610)
        status, _, text = http("POST", url, b"main;late 5")
        self.assertEqual(status, 200, text)
        req = {"profileTypeID": CPU, "labelSelector": '{region=~"eu|us"}', "step": 3600,
               "start": str((T0 + 3000) * 1000), "end": str((T0 + 4000) * 1000),
               "groupBy": ["service_name"]}
        status, body = connect(self.c, "SelectSeries", req)
        self.assertEqual(status, 200, body)
        got = [([l["value"] for l in s["labels"]], sum(p["value"] for p in s["points"])) for s in body["series"]]
        self.assertEqual(got, [(["svc-b"], 5 * TICK)])
        status, body = connect(self.c, "SelectSeries", dict(req, limit="2"))
        self.assertEqual(len(body["series"]), 1)

    # ---- Series with label_names ----------------------------------------------------------------

    def series(self, names, matcher='{service_name="svc-a"}'):
        status, body = connect(self.c, "Series", dict(self.rng(), matchers=[matcher], labelNames=names))
        self.assertEqual(status, 200, body)
        return [sorted((p["name"], p["value"]) for p in l.get("labels", [])) for l in body.get("labelsSet", [])]

    def test_series_label_names_distinct(self):
        # svc-a has three series, all region=eu: one distinct set.
        self.assertEqual(self.series(["region"]), [[("region", "eu")]])
        self.assertEqual(self.series(["service_name", "region"]),
                         [[("region", "eu"), ("service_name", "svc-a")]])
        # worker: 1, 2, and the series without it once as the empty set.
        got = self.series(["worker"])
        self.assertEqual(sorted(got), [[], [("worker", "1")], [("worker", "2")]])
        # A name no matching series has: no sets at all.
        self.assertEqual(self.series(["nonexistent"]), [])
        # Two services: one set per service_name.
        self.assertEqual(sorted(self.series(["service_name"], '{region=~"eu|us"}')),
                         [[("service_name", "svc-a")], [("service_name", "svc-b")]])
        # Without label_names: every series whole, three for svc-a.
        status, body = connect(self.c, "Series", dict(self.rng(), matchers=['{service_name="svc-a"}']))
        self.assertEqual(len(body["labelsSet"]), 3)
        self.assertEqual(len({json.dumps(l, sort_keys=True) for l in body["labelsSet"]}), 3)


if __name__ == "__main__":
    unittest.main()
