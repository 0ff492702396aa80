"""The relabel processor through the real binary: pprof (/ingest, push.v1) and
OTLP/HTTP in, relabel, then the debug exporter (to a file) and the store.
Expected totals come from the corpus's pprof -top references; expected labels
are worked out by hand from the rules below."""
import base64
import concurrent.futures
import gzip
import json
import unittest
import urllib.parse

from harness import (Collector, convert, debug_profiles, free_port, http, parse_top, read_corpus,
                     validate_processor)
from test_store_api import pb_read, pprof_label_totals

RULES = """
    relabel_configs:
      - action: drop                      # a whole service goes
        source_labels: [service_name]
        regex: "debug-.*"
      - source_labels: [service_name]     # "wipe" loses every label: dropped as no_labels
        regex: wipe
        target_label: __name__
        replacement: ""
      - source_labels: [service_name]
        regex: wipe
        target_label: service_name
        replacement: ""
      - source_labels: [service_name]     # two services become one
        regex: "svc-(a|b)"
        target_label: service_name
        replacement: "svc"
      - action: labelmap                  # tag_team=t -> team=t
        regex: "tag_(.+)"
      - action: labeldrop
        regex: "tag_.+|secret"
      - source_labels: [service_name, env]
        regex: "(.+);(.+)"
        target_label: where
        replacement: "$${2}@$${1}"        # ${2}@${1} once the loader's $$ is read
      - source_labels: [env]              # hashmod into a scratch label, then drop by it
        modulus: 1
        action: hashmod
        target_label: __tmp_shard
      - source_labels: [__tmp_shard]
        regex: "1"
        action: drop
    sample_relabel_configs:
      - action: labeldrop                 # pprof label worker goes: samples merge
        regex: worker
      - action: drop                      # samples labelled work=sha go
        source_labels: [work]
        regex: sha
"""

DEBUG_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  relabel:
%s
exporters:
  debug:
    verbosity: detailed
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      processors: [relabel]
      exporters: [debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
""" % RULES

STORE_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  relabel:
%s
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{query}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof]
      processors: [relabel]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
""" % RULES

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PROC = 'processor="relabel",pipeline="profiles"'


def top(name, type_="cpu"):
    """(total, {function: flat}) of one sample type from the pprof -top reference."""
    for section in parse_top(name).values():
        if section["type"] == type_:
            flat = {}
            for f, fn in section["rows"]:
                flat[fn] = flat.get(fn, 0) + f
            return section["total"], flat
    raise KeyError(type_)


def pprof_samples(name):
    """Sample rows of a corpus pprof (Profile.sample = 2), read by this test."""
    return len(pb_read(gzip.decompress(read_corpus(name))).get(2, []))


def pprof_rows_with(name, label, value):
    """(rows, cpu value) of the samples of a corpus pprof with a string label = value, read by
    this test (Sample.value = 2, Sample.label = 3; Label.key = 1, Label.str = 2)."""
    prof = pb_read(gzip.decompress(read_corpus(name)))
    strings = [x.decode() for x in prof.get(6, [])]
    rows = 0
    for raw in prof.get(2, []):
        for l in pb_read(raw).get(3, []):
            lab = pb_read(l)
            if strings[lab.get(1, [0])[0]] == label and strings[lab.get(2, [0])[0]] == value:
                rows += 1
    return rows, pprof_label_totals(name, 1, label)[value]


def start(config):
    extra = {"otlp": free_port(), "query": free_port()}
    for k, v in extra.items():
        config = config.replace("{%s}" % k, str(v))
    c = Collector(config)
    c.extra = extra
    c.wait_ready()
    return c


def ingest(c, name, file, **params):
    q = {"name": name, "from": "1700000000"}
    q.update(params)
    return http("POST", c.base + "/ingest?" + urllib.parse.urlencode(q), read_corpus(file),
                {"Content-Type": "application/octet-stream"})


def push(c, series):
    """push.v1 in JSON: series = [({label: value}, corpus file)], one request; __name__ is
    process_cpu, as the SDKs send it."""
    doc = {"series": [{"labels": [{"name": k, "value": v}
                                  for k, v in dict(labels, __name__="process_cpu").items()],
                       "samples": [{"rawProfile": base64.b64encode(read_corpus(f)).decode()}]}
                      for labels, f in series]}
    return http("POST", c.base + "/push.v1.PusherService/Push", json.dumps(doc).encode(),
                {"Content-Type": "application/json"})


def labels_of(summary):
    """{k: v} of a debug summary line `profile N {k="v", ...} samples=...`."""
    inner = summary.split("{", 1)[1].split("}", 1)[0]
    out = {}
    for part in inner.split(", "):
        k, v = part.split("=", 1)
        out[k] = json.loads(v)
    return out


def samples_of(summary):
    return int(summary.split(" samples=")[1].split()[0])


class RelabelDebugTest(unittest.TestCase):
    """pprof and OTLP in, relabel, debug exporter to a file."""

    @classmethod
    def setUpClass(cls):
        cls.c = start(DEBUG_CONFIG)

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def metric(self, name, labels=PROC):
        v = self.c.metric(name, labels)
        return 0 if v is None else v

    def new_profiles(self, before):
        return debug_profiles(self.c.debug_output())[before:]

    def count(self):
        return len(debug_profiles(self.c.debug_output()))

    def send(self, fn, *args):
        """Sends, checks 200, returns the profiles the debug exporter wrote for it."""
        before = self.count()
        status, _, body = fn(self.c, *args)
        self.assertEqual(status, 200, body)
        return self.new_profiles(before)

    def check_cpu(self, p, files):
        """p's cpu total and flat per function = the sum of the files' pprof -top."""
        got = p["types"]["cpu:nanoseconds"]
        want_total, want_flat = 0, {}
        for f in files:
            t, flat = top(f)
            want_total += t
            for fn, v in flat.items():
                want_flat[fn] = want_flat.get(fn, 0) + v
        self.assertEqual(got["total"], want_total)
        for fn, v in want_flat.items():
            self.assertEqual(got["flat"].get(fn, 0), v, fn)

    def test_replace_labelmap_labeldrop(self):
        ps = self.send(ingest, "svc-a{tag_team=prof,secret=s3,env=prod}", "go-1s-cpu")
        self.assertEqual(len(ps), 1)
        self.assertEqual(labels_of(ps[0]["summary"]),
                         {"__name__": "process_cpu", "service_name": "svc", "team": "prof",
                          "env": "prod", "where": "prod@svc"})
        self.check_cpu(ps[0], ["go-1s-cpu"])
        # sample_relabel_configs dropped the pprof label worker.
        self.assertNotIn("worker", ps[0]["summary"])

    def test_other_series_untouched(self):
        ps = self.send(ingest, "other{env=dev}", "go-1s-heap")
        self.assertEqual(len(ps), 1)
        self.assertEqual(labels_of(ps[0]["summary"]),
                         {"__name__": "memory", "service_name": "other", "env": "dev",
                          "where": "dev@other"})
        total, _ = top("go-1s-heap", "alloc_space")
        self.assertEqual(ps[0]["types"]["alloc_space:bytes"]["total"], total)

    def test_dropped_service_is_counted(self):
        accepted = self.c.metric("flamecol_receiver_accepted_profile_samples_total",
                                 'receiver="pprof"') or 0
        dropped = self.metric("flamecol_processor_dropped_profile_samples_total")
        by_rule = self.metric("flamecol_processor_relabel_dropped_profiles_total",
                              PROC + ',reason="rule"')
        ps = self.send(ingest, "debug-tool", "go-1s-cpu")
        self.assertEqual(ps, [])
        n = pprof_samples("go-1s-cpu")
        self.assertEqual(self.c.metric("flamecol_receiver_accepted_profile_samples_total",
                                       'receiver="pprof"') - accepted, n)
        self.assertEqual(self.metric("flamecol_processor_dropped_profile_samples_total") - dropped, n)
        self.assertEqual(self.metric("flamecol_processor_relabel_dropped_profiles_total",
                                     PROC + ',reason="rule"') - by_rule, 1)

    def test_profile_left_without_labels_is_dropped(self):
        dropped = self.metric("flamecol_processor_dropped_profile_samples_total")
        no_labels = self.metric("flamecol_processor_relabel_dropped_profiles_total",
                                PROC + ',reason="no_labels"')
        self.assertEqual(self.send(ingest, "wipe", "go-1s-heap"), [])
        self.assertEqual(self.metric("flamecol_processor_relabel_dropped_profiles_total",
                                     PROC + ',reason="no_labels"') - no_labels, 1)
        self.assertEqual(self.metric("flamecol_processor_dropped_profile_samples_total") - dropped,
                         pprof_samples("go-1s-heap"))

    def test_two_services_merged_into_one_series(self):
        merged = self.metric("flamecol_processor_relabel_merged_profiles_total")
        dropped = self.metric("flamecol_processor_dropped_profile_samples_total")
        ps = self.send(push, [({"service_name": "svc-a"}, "go-1s-cpu"),
                              ({"service_name": "svc-b"}, "go-3s-cpu")])
        self.assertEqual(len(ps), 1, [p["summary"] for p in ps])
        self.assertEqual(labels_of(ps[0]["summary"]),
                         {"__name__": "process_cpu", "service_name": "svc"})
        self.check_cpu(ps[0], ["go-1s-cpu", "go-3s-cpu"])
        self.assertEqual(self.metric("flamecol_processor_relabel_merged_profiles_total") - merged, 1)
        # Merging is not dropping.
        self.assertEqual(self.metric("flamecol_processor_dropped_profile_samples_total"), dropped)

    def test_sample_relabel_merges_samples_totals_unchanged(self):
        merged = self.metric("flamecol_processor_relabel_merged_samples_total")
        dropped = self.metric("flamecol_processor_dropped_profile_samples_total")
        ps = self.send(ingest, "plain", "go-1s-cpu")
        self.assertEqual(len(ps), 1)
        n = pprof_samples("go-1s-cpu")
        rows = samples_of(ps[0]["summary"])
        self.assertLess(rows, n)  # samples that differed only by worker are one now
        self.assertEqual(self.metric("flamecol_processor_relabel_merged_samples_total") - merged,
                         n - rows)
        self.check_cpu(ps[0], ["go-1s-cpu"])
        total, _ = top("go-1s-cpu", "samples")
        self.assertEqual(ps[0]["types"]["samples:count"]["total"], total)
        # Merged rows are not counted as dropped.
        self.assertEqual(self.metric("flamecol_processor_dropped_profile_samples_total"), dropped)

    def test_sample_rule_drops_samples_and_counts_them(self):
        dropped = self.metric("flamecol_processor_dropped_profile_samples_total")
        by_rule = self.metric("flamecol_processor_relabel_dropped_samples_total")
        ps = self.send(ingest, "sampled", "pyroscope-go-cpu")
        self.assertEqual(len(ps), 1)
        rows, value = pprof_rows_with("pyroscope-go-cpu", "work", "sha")
        self.assertGreater(rows, 0)
        total, _ = top("pyroscope-go-cpu")
        self.assertEqual(ps[0]["types"]["cpu:nanoseconds"]["total"], total - value)
        self.assertEqual(self.metric("flamecol_processor_relabel_dropped_samples_total") - by_rule,
                         rows)
        self.assertEqual(self.metric("flamecol_processor_dropped_profile_samples_total") - dropped,
                         rows)

    def test_otlp_series_and_sample_attributes(self):
        body = convert("go-1s-cpu", "otlp", "service_name=svc-b", "tag_team=ebpf")
        before = self.count()
        status, _, text = http("POST", "http://127.0.0.1:%d/v1development/profiles" % self.c.extra["otlp"],
                               body, {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 200, text)
        ps = self.new_profiles(before)
        cpu = [p for p in ps if "cpu:nanoseconds" in p["types"]]
        self.assertEqual(len(cpu), 1, [p["summary"] for p in ps])
        labels = labels_of(cpu[0]["summary"])
        self.assertEqual(labels["service_name"], "svc")
        self.assertEqual(labels["team"], "ebpf")
        self.assertNotIn("tag_team", labels)
        self.assertNotIn("worker", cpu[0]["summary"])
        self.check_cpu(cpu[0], ["go-1s-cpu"])


class RelabelStoreTest(unittest.TestCase):
    """pprof in, relabel, the store: what a query sees."""

    @classmethod
    def setUpClass(cls):
        cls.c = start(STORE_CONFIG)
        cls.q = "http://127.0.0.1:%d" % cls.c.extra["query"]

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def total(self, selector):
        q = {"query": CPU + "{" + selector + "}", "from": "0", "until": "now"}
        status, _, body = http("GET", self.q + "/pyroscope/render?" + urllib.parse.urlencode(q))
        self.assertEqual(status, 200, body)
        return json.loads(body)["flamebearer"]["numTicks"]

    def test_merged_dropped_and_relabeled(self):
        status, _, body = push(self.c, [({"service_name": "svc-a", "env": "prod"}, "go-1s-cpu"),
                                        ({"service_name": "svc-b", "env": "prod"}, "go-3s-cpu"),
                                        ({"service_name": "debug-x"}, "pyroscope-go-cpu")])
        self.assertEqual(status, 200, body)
        status, _, body = ingest(self.c, "debug-y", "go-1s-cpu")
        self.assertEqual(status, 200, body)
        both = top("go-1s-cpu")[0] + top("go-3s-cpu")[0]
        self.assertEqual(self.total('service_name="svc",env="prod"'), both)
        self.assertEqual(self.total('service_name="svc",where="prod@svc"'), both)
        self.assertEqual(self.total('service_name=~"svc-.*"'), 0)
        self.assertEqual(self.total('service_name=~"debug-.*"'), 0)
        status, _, body = http("GET", self.q + "/pyroscope/label-values?label=service_name")
        self.assertEqual(sorted(json.loads(body)), ["svc"])
        # The pprof label worker never reached the store; __tmp labels neither.
        for label in ("worker", "__tmp_shard"):
            status, _, body = http("GET", self.q + "/pyroscope/label-values?label=" + label)
            self.assertEqual(json.loads(body), [], label)
        self.assertEqual(self.c.metric("flamecol_processor_relabel_dropped_profiles_total",
                                       PROC + ',reason="rule"'), 2)


    def test_concurrent_pushes(self):
        # process() runs on many receiver threads at once (worker pool, shared cache).
        n = 24
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(
                lambda i: ingest(self.c, "svc-%s{tag_run=conc,tag_i=%d}" % ("ab"[i % 2], i % 3),
                                 "go-1s-cpu")[0], range(n)))
        self.assertEqual(answers, [200] * n)
        one = top("go-1s-cpu")[0]
        self.assertEqual(self.total('service_name="svc",run="conc"'), n * one)
        for i in range(3):
            self.assertEqual(self.total('service_name="svc",run="conc",i="%d"' % i), n // 3 * one)


class RelabelConfigErrorsTest(unittest.TestCase):
    """`flamecol validate` names the rule's own line and column."""

    def validate(self, processor):
        return validate_processor("relabel", processor)

    def test_errors_with_line_and_column(self):
        cases = [
            # (processor config, line:col of the culprit, words of the message)
            ("""    relabel_configs:
      - source_labels: [a]
        regex: "(a"
        target_label: b""", "8:16", "missing closing )"),
            ("""    relabel_configs:
      - action: replace
        target_label: b
      - action: explode""", "9:17", "explode"),
            ("""    relabel_configs:
      - action: hashmod
        source_labels: [a]
        target_label: b""", "7:9", "modulus"),
            ("""    sample_relabel_configs:
      - action: labeldrop
        regex: "a(?=b)"
""", "8:16", "sample_relabel_configs[0]"),
            ("""    label_name_validation: legacy
    relabel_configs:
      - source_labels: [a]
        target_label: "1bad\"""", "9:23", "1bad"),
            ("""    relabel_configs:
      source_labels: [a]""", "7:7", "expected a list"),
            ("""    cache_size: -1""", "", "cache_size"),
            ("""    relabel_config: []""", "6:5", "unknown key 'relabel_config'"),
        ]
        for config, where, words in cases:
            rc, out, path = self.validate(config)
            self.assertEqual(rc, 1, out)
            self.assertIn(words, out)
            if where:
                self.assertIn("%s:%s:" % (path, where), out)

    def test_valid_rules_and_defaults(self):
        rc, out, _ = self.validate("""    relabel_configs:
      - source_labels: [a]
        target_label: b
        replacement: "$${1}x"
    sample_relabel_configs: []""")
        self.assertEqual(rc, 0, out)
        rc, out, _ = self.validate("")
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
