"""The limits processor through the real binary: crafted /ingest requests (folded
text and corpus pprof) and OTLP/JSON, one tenant per X-Scope-OrgID, debug
exporter to a file. Each limit is hit: the answer (status, and a message naming
the limit, the tenant and the value), the counter, and another tenant whose
override lets the same request through untouched. Expected totals come from
the corpus's pprof -top references and this test's own pprof decoder."""
import gzip
import json
import re
import time
import unittest
import urllib.parse

from harness import (Collector, convert, debug_profiles, http, parse_top, pb_varints, read_corpus,
                     validate_config)
from test_store_api import pb_read

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
    max_stack_depth: 0          # the processor cuts, not the receiver
    retry_after: 2s
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  limits:
    default:
      max_label_names_per_series: 6
      max_label_name_length: 20
      max_label_value_length: 30
      max_profile_stacktrace_depth: 5
      max_profile_stacktrace_samples: 10
      max_profile_symbol_value_length: 16
      ingestion_rate_mb: 0
    overrides:
      roomy:
        max_label_names_per_series: 10
        max_label_name_length: 40
        max_label_value_length: 100
        max_profile_stacktrace_depth: 0
        max_profile_stacktrace_samples: 0
        max_profile_symbol_value_length: 0
      small:
        max_profile_size_bytes: 2000
      fold:                     # only the samples limit of the default applies
        max_profile_stacktrace_depth: 0
        max_profile_symbol_value_length: 0
      slow:
        ingestion_rate_mb: 0.02
        ingestion_burst_size_mb: 0.1
      tiny:
        ingestion_rate_mb: 1
        ingestion_burst_size_mb: 0.001
exporters:
  debug:
    verbosity: detailed
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      processors: [limits]
      exporters: [debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

PROC = 'processor="limits",pipeline="profiles"'




def pprof_first_values(name):
    """values[0] of every sample of a corpus pprof (Profile.sample = 2, Sample.value = 2)."""
    prof = pb_read(gzip.decompress(read_corpus(name)))
    return [pb_varints(pb_read(s).get(2, []))[0] for s in prof.get(2, [])]


def top(name, type_):
    for section in parse_top(name).values():
        if section["type"] == type_:
            flat = {}
            for f, fn in section["rows"]:
                flat[fn] = flat.get(fn, 0) + f
            return section["total"], flat
    raise KeyError(type_)


def stacks_of(text, index_in_batch=0):
    """[(stack, value)] of the last profile the debug exporter wrote (detailed output)."""
    out, current, last = [], None, None
    for line in text.splitlines():
        if line.startswith("batch "):
            current = None
            out = []
        elif line.startswith("# profile "):
            current = line.split(" type=")[1].split()[0]
            last = out
        elif line and current is not None and not line.startswith("profile "):
            stack, value = line.rsplit(" ", 1)
            out.append((current, stack, int(value)))
    return last or out


class LimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from harness import free_port
        otlp = free_port()
        cls.c = Collector(CONFIG.replace("{otlp}", str(otlp)))
        cls.otlp = "http://127.0.0.1:%d" % otlp
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    # ---- helpers

    def ingest(self, tenant, name, body, octet=False, **params):
        q = {"name": name, "from": "1700000000"}
        q.update(params)
        headers = {"X-Scope-OrgID": tenant}
        if octet:
            headers["Content-Type"] = "application/octet-stream"
        return http("POST", self.c.base + "/ingest?" + urllib.parse.urlencode(q), body, headers)

    def metric(self, name, reason, tenant):
        v = self.c.metric(name, PROC + ',reason="%s",tenant="%s"' % (reason, tenant))
        return 0 if v is None else v

    def discarded(self, reason, tenant):
        return (self.metric("flamecol_processor_discarded_samples_total", reason, tenant),
                self.metric("flamecol_processor_discarded_bytes_total", reason, tenant))

    def count(self):
        return len(debug_profiles(self.c.debug_output()))

    def refused(self, answer, status, *texts):
        code, headers, body = answer
        self.assertEqual(code, status, body)
        msg = json.loads(body)["message"]
        for t in texts:
            self.assertIn(t, msg)
        return headers, msg

    def accepted(self, answer):
        code, _, body = answer
        self.assertEqual(code, 200, body)

    def check_refusal(self, reason, tenant, send, status, texts, samples):
        """send() is refused with status and texts; counters grow; nothing exported."""
        before = self.discarded(reason, tenant)
        n = self.count()
        headers, msg = self.refused(send(), status, *texts)
        after = self.discarded(reason, tenant)
        self.assertEqual(after[0], before[0] + samples)
        self.assertGreater(after[1], before[1])
        self.assertEqual(self.count(), n)
        return headers, msg

    # ---- label limits

    def test_max_label_names_per_series(self):
        name = "app.cpu{a=1,b=2,c=3,d=4,e=5}"  # + __name__, service_name = 7
        self.check_refusal("max_label_names_per_series", "acme",
                           lambda: self.ingest("acme", name, b"main;work 3\nmain 1\n"), 400,
                           ["max_label_names_per_series (6)", 'tenant "acme"', "has 7 series labels"],
                           2)
        # 6 labels pass; the roomy tenant takes 7.
        self.accepted(self.ingest("acme", "app.cpu{a=1,b=2,c=3,d=4}", b"main 1\n"))
        n = self.count()
        self.accepted(self.ingest("roomy", name, b"main;work 3\nmain 1\n"))
        self.assertEqual(self.count(), n + 1)

    def test_label_name_too_long(self):
        name = "app.cpu{abcdefghijklmnopqrstuvwxyz=1}"
        self.check_refusal("label_name_too_long", "acme",
                           lambda: self.ingest("acme", name, b"main 1\n"), 400,
                           ["max_label_name_length (20)", 'tenant "acme"', "of 26 bytes"], 1)
        self.accepted(self.ingest("roomy", name, b"main 1\n"))

    def test_label_value_too_long(self):
        name = "app.cpu{k=%s}" % ("v" * 40)
        self.check_refusal("label_value_too_long", "acme",
                           lambda: self.ingest("acme", name, b"main 1\n"), 400,
                           ["max_label_value_length (30)", 'tenant "acme"', "value of 40 bytes",
                            'label "k"'], 1)
        self.accepted(self.ingest("roomy", name, b"main 1\n"))

    def test_label_limit_over_otlp_json(self):
        body = convert("go-1s-heap", "otlp-json", "a=1", "b=2", "c=3", "d=4", "e=5", "f=6")
        code, _, answer = http("POST", self.otlp + "/v1development/profiles", body,
                               {"Content-Type": "application/json", "X-Scope-OrgID": "acme"})
        self.assertEqual(code, 400, answer)
        self.assertIn(b"max_label_names_per_series", answer)
        self.assertIn(b'tenant \\"acme\\"', answer)
        code, _, answer = http("POST", self.otlp + "/v1development/profiles", body,
                               {"Content-Type": "application/json", "X-Scope-OrgID": "roomy"})
        self.assertEqual(code, 200, answer)

    # ---- profile size

    def test_profile_size(self):
        raw = read_corpus("go-1s-cpu")
        _, msg = self.check_refusal(
            "profile_size", "small", lambda: self.ingest("small", "app", raw, octet=True), 413,
            ["max_profile_size_bytes (2000)", 'tenant "small"'], sum(1 for _ in pprof_first_values("go-1s-cpu")))
        size = int(re.search(r"is (\d+) bytes", msg).group(1))
        # The estimate is the uncompressed pprof's order of magnitude.
        unzipped = len(gzip.decompress(raw))
        self.assertGreater(size, unzipped // 4)
        self.assertLess(size, unzipped * 4)
        self.accepted(self.ingest("roomy", "app", raw, octet=True))

    # ---- samples: the heaviest kept, the rest summed into `other`

    def test_stacktrace_samples_keeps_totals(self):
        name = "go-1s-heap"  # first sample type alloc_objects: varied weights
        values = sorted(pprof_first_values(name), reverse=True)
        self.assertGreater(len(values), 10)
        folded_before = self.metric("flamecol_processor_limits_truncated_samples_total",
                                    "max_samples", "fold")
        n = self.count()
        self.accepted(self.ingest("fold", "app", read_corpus(name), octet=True))
        ps = debug_profiles(self.c.debug_output())[n:]
        self.assertEqual(len(ps), 1)
        self.assertIn(" samples=10", ps[0]["summary"])
        for t in ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space"):
            got = ps[0]["types"]["%s:%s" % (t, "count" if t.endswith("objects") else "bytes")]
            total, flat = top(name, t)
            self.assertEqual(got["total"], total, t)  # exact, `other` included
            for fn, v in flat.items():  # the kept samples are whole samples
                self.assertLessEqual(got["flat"].get(fn, 0), v, fn)
        counts = ps[0]["types"]["alloc_objects:count"]
        kept = sum(v for fn, v in counts["flat"].items() if fn != "other")
        self.assertEqual(kept, sum(values[:9]))  # the 9 heaviest by the first sample type
        self.assertEqual(counts["flat"]["other"], sum(values[9:]))
        self.assertEqual(self.metric("flamecol_processor_limits_truncated_samples_total",
                                     "max_samples", "fold"), folded_before + len(values) - 9)
        # The heaviest function keeps at least its heaviest sample.
        total, flat = top(name, "alloc_objects")
        best = max(flat, key=flat.get)
        self.assertGreaterEqual(counts["flat"].get(best, 0), values[0])
        # The roomy tenant gets every sample: flat values equal the reference.
        n = self.count()
        self.accepted(self.ingest("roomy", "app", read_corpus(name), octet=True))
        got = debug_profiles(self.c.debug_output())[n]["types"]["alloc_space:bytes"]
        total, flat = top(name, "alloc_space")
        self.assertEqual(got["total"], total)
        self.assertNotIn("other", got["flat"])
        for fn, v in flat.items():
            self.assertEqual(got["flat"].get(fn, 0), v, fn)

    # ---- depth and symbols

    def test_stacktrace_depth_keeps_root(self):
        before = self.metric("flamecol_processor_limits_truncated_samples_total",
                             "stacktrace_depth", "deep")
        body = b"f0;f1;f2;f3;f4;f5;f6;f7 5\nf0;f1;f2 2\nf0;f1;f2;f3;f4 1\n"
        self.accepted(self.ingest("deep", "app.cpu", body))
        got = sorted((s, v) for _, s, v in stacks_of(self.c.debug_output()))
        unit = got[1][1]  # folded cpu samples are scaled to nanoseconds
        self.assertEqual(got, [("f0;f1;f2", 2 * unit // 1), ("f0;f1;f2;f3;f4", unit),
                               ("f0;f1;f2;f3;other", 5 * unit)])
        self.assertEqual(self.metric("flamecol_processor_limits_truncated_samples_total",
                                     "stacktrace_depth", "deep"), before + 1)
        self.accepted(self.ingest("roomy", "app.cpu", body))
        got = sorted((s, v) for _, s, v in stacks_of(self.c.debug_output()))
        self.assertIn(("f0;f1;f2;f3;f4;f5;f6;f7", 5 * unit), got)

    def test_symbol_value_length(self):
        before = self.metric("flamecol_processor_limits_truncated_symbols_total",
                             "symbol_value_length", "sym")
        body = b"main;0123456789abcdefghijklmnopqrstuvwxyz 4\n"
        self.accepted(self.ingest("sym", "app.cpu", body))
        got = [s for _, s, v in stacks_of(self.c.debug_output())]
        self.assertEqual(got, ["main;klmnopqrstuvwxyz"])  # the last 16 bytes, as Pyroscope
        self.assertGreater(self.metric("flamecol_processor_limits_truncated_symbols_total",
                                       "symbol_value_length", "sym"), before)

    # ---- ingestion rate

    def test_rate_limit_refuses_and_recovers(self):
        raw = read_corpus("go-1s-heap")
        before = self.discarded("rate_limited", "slow")
        status, refusal = 200, None
        for _ in range(200):
            status, headers, body = self.ingest("slow", "app", raw, octet=True)
            if status != 200:
                refusal = (headers, json.loads(body)["message"])
                break
        self.assertEqual(status, 429, refusal)
        headers, msg = refusal
        self.assertEqual(headers.get("Retry-After"), "2")
        self.assertIn('tenant "slow"', msg)
        self.assertIn("ingestion_rate_mb 0.02", msg)
        self.assertGreater(self.discarded("rate_limited", "slow")[0], before[0])
        # Another tenant is not limited meanwhile.
        self.accepted(self.ingest("acme", "app", raw, octet=True))
        wait = float(re.search(r"retry in ([0-9.]+)s", msg).group(1))
        time.sleep(wait + 0.3)
        self.accepted(self.ingest("slow", "app", raw, octet=True))

    def test_request_larger_than_burst(self):
        before = self.discarded("rate_limited", "tiny")
        self.refused(self.ingest("tiny", "app", read_corpus("go-1s-heap"), octet=True), 413,
                     "ingestion_burst_size_mb", 'tenant "tiny"')
        self.assertGreater(self.discarded("rate_limited", "tiny")[0], before[0])

    def test_config_errors(self):
        bad = CONFIG.replace("      small:\n", "      small:\n        max_profil_size: 3\n")
        rc, out, _ = validate_config(bad)
        self.assertNotEqual(rc, 0)
        self.assertIn("unknown key 'max_profil_size'", out)



class TenantLabelsBoundedTest(unittest.TestCase):
    """Beyond max_tenant_labels, tenants are counted as tenant="other"."""

    def test_bounded(self):
        config = CONFIG.replace("      ingestion_rate_mb: 0\n",
                                "      ingestion_rate_mb: 0\n    max_tenant_labels: 2\n")
        from harness import free_port
        with Collector(config.replace("{otlp}", str(free_port()))) as c:
            name = "app.cpu{a=1,b=2,c=3,d=4,e=5}"
            for t in ("t1", "t2", "t3", "t4"):
                status, _, body = http("POST", c.base + "/ingest?" + urllib.parse.urlencode(
                    {"name": name}), b"main 1\n", {"X-Scope-OrgID": t})
                self.assertEqual(status, 400, body)
                self.assertIn(('tenant "%s"' % t).encode(), body.replace(b'\\"', b'"'))
            labels = PROC + ',reason="max_label_names_per_series",tenant="%s"'
            metric = "flamecol_processor_discarded_samples_total"
            self.assertEqual(c.metric(metric, labels % "t1"), 1)
            self.assertEqual(c.metric(metric, labels % "t2"), 1)
            self.assertIsNone(c.metric(metric, labels % "t3"))
            self.assertEqual(c.metric(metric, labels % "other"), 2)
            c.proc.terminate()
            self.assertEqual(c.proc.wait(30), 0, c.log())


if __name__ == "__main__":
    unittest.main()
