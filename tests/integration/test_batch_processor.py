"""The batch processor through the real binary: many small pprof requests from
many threads and two tenants (X-Scope-OrgID) in, batch, then the store and a
debug exporter. Expected totals are the corpus's pprof -top totals times the
requests sent; exporter calls are counted from flamecol's own metrics."""
import concurrent.futures
import json
import time
import unittest
import urllib.parse

from harness import Collector, convert, free_port, http, parse_top, read_corpus, validate_processor

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  batch:
    send_batch_size: %(size)d
    send_batch_max_size: %(max)d
    timeout: %(timeout)s
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{query}
      max_query_length: 0
  debug:
    verbosity: basic
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [pprof]
      processors: [batch]
      exporters: [store, debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PROC = 'processor="batch",pipeline="profiles"'
TENANTS = ("acme", "globex")
TIMEOUT = 0.2
SLACK = 3.0  # a loaded CI machine; the point is that every request returns, soon


def cpu_total(name):
    for section in parse_top(name).values():
        if section["type"] == "cpu":
            return section["total"]
    raise KeyError(name)


def start(size, max_size=0, timeout="200ms"):
    query = free_port()
    c = Collector((CONFIG % {"size": size, "max": max_size, "timeout": timeout})
                  .replace("{query}", str(query)))
    c.q = "http://127.0.0.1:%d" % query
    c.wait_ready()
    return c


def ingest(c, tenant, service, body):
    q = {"name": service, "from": "1700000000", "until": "1700000010"}
    t0 = time.monotonic()
    status, _, text = http("POST", c.base + "/ingest?" + urllib.parse.urlencode(q), body,
                           {"Content-Type": "application/octet-stream", "X-Scope-OrgID": tenant})
    return status, text, time.monotonic() - t0


def total(c, tenant, selector):
    q = {"query": CPU + "{" + selector + "}", "from": "0", "until": "now"}
    status, _, body = http("GET", c.q + "/pyroscope/render?" + urllib.parse.urlencode(q),
                           headers={"X-Scope-OrgID": tenant})
    assert status == 200, body
    return json.loads(body)["flamebearer"]["numTicks"]


def services(c, tenant):
    status, _, body = http("GET", c.q + "/pyroscope/label-values?label=service_name",
                           headers={"X-Scope-OrgID": tenant})
    assert status == 200, body
    return sorted(json.loads(body))


def metric(c, name, labels):
    v = c.metric(name, labels)
    return 0 if v is None else v


class BatchManyRequestsTest(unittest.TestCase):
    """1,000 small requests, 32 client threads, two tenants: far fewer exporter calls."""

    @classmethod
    def setUpClass(cls):
        cls.c = start(size=1000000)

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def test_thousand_requests(self):
        n = 1000
        files = ("go-1s-cpu", "go-3s-cpu")
        bodies = {f: read_corpus(f) for f in files}
        jobs = [(TENANTS[i % 2], "%s-svc-%d" % (TENANTS[i % 2], i % 3), files[(i // 2) % 2])
                for i in range(n)]
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(lambda j: ingest(self.c, j[0], j[1], bodies[j[2]]), jobs))
        for status, text, _ in answers:
            self.assertEqual(status, 200, text)
        slowest = max(a[2] for a in answers)
        self.assertLess(slowest, TIMEOUT + SLACK, "a request waited %.2fs" % slowest)

        # Far fewer exporter calls than requests, each call many requests' worth.
        for exporter in ("store", "debug"):
            calls = metric(self.c, "flamecol_exporter_sent_requests_total",
                           'exporter="%s"' % exporter)
            self.assertGreater(calls, 0)
            self.assertLessEqual(calls, n / 5, exporter)
        sent = metric(self.c, "flamecol_processor_batch_batch_send_size_count", PROC)
        self.assertEqual(sent, metric(self.c, "flamecol_exporter_sent_requests_total",
                                      'exporter="store"'))
        self.assertGreater(metric(self.c, "flamecol_processor_batch_timeout_trigger_send_total",
                                  PROC), 0)
        # Every sample once: the batches sent hold exactly what the receiver accepted.
        accepted = metric(self.c, "flamecol_receiver_accepted_profile_samples_total",
                          'receiver="pprof"')
        self.assertGreater(accepted, 0)
        self.assertEqual(metric(self.c, "flamecol_processor_batch_batch_send_size_sum", PROC),
                         accepted)
        self.assertEqual(metric(self.c, "flamecol_exporter_sent_profile_samples_total",
                                'exporter="store"'), accepted)
        self.assertEqual(metric(self.c, "flamecol_processor_dropped_profile_samples_total", PROC),
                         0)
        self.assertEqual(metric(self.c, "flamecol_receiver_refused_requests_total",
                                'receiver="pprof"'), 0)

        # The store, per tenant: every total exact, and no tenant sees the other's services.
        for tenant in TENANTS:
            mine = [j for j in jobs if j[0] == tenant]
            want = sum(cpu_total(f) for _, _, f in mine)
            self.assertEqual(total(self.c, tenant, 'service_name=~".+"'), want, tenant)
            for s in range(3):
                name = "%s-svc-%d" % (tenant, s)
                want = sum(cpu_total(f) for _, svc, f in mine if svc == name)
                self.assertEqual(total(self.c, tenant, 'service_name="%s"' % name), want, name)
            self.assertEqual(services(self.c, tenant),
                             ["%s-svc-%d" % (tenant, s) for s in range(3)])

    def test_answered_only_once_queryable(self):
        # (its own tenant: the other test's totals stay its own)
        # Each answer comes after the merged batch is in the store: a query right after it
        # sees the data (the sender waits for its batch's timeout, then the store's commit).
        body = read_corpus("go-1s-cpu")
        one = cpu_total("go-1s-cpu")
        for i in range(4):
            name = "sequential-%d" % i
            status, text, took = ingest(self.c, "initech", name, body)
            self.assertEqual(status, 200, text)
            self.assertEqual(total(self.c, "initech", 'service_name="%s"' % name), one)
            self.assertEqual(total(self.c, "acme", 'service_name="%s"' % name), 0)
            self.assertLess(took, TIMEOUT + SLACK)


    def test_concurrent_answers_only_once_queryable(self):
        # Many requests share one batch; only one of them sends it. Every one is answered
        # only after the store has it: its own series is there when its answer arrives.
        body = read_corpus("go-1s-cpu")
        one = cpu_total("go-1s-cpu")

        def send_then_query(i):
            name = "together-%d" % i  # each name once
            status, text, _ = ingest(self.c, "hooli", name, body)
            return status, text, total(self.c, "hooli", 'service_name="%s"' % name)

        for r in range(3):
            with concurrent.futures.ThreadPoolExecutor(24) as pool:
                for status, text, seen in pool.map(send_then_query, range(r * 24, r * 24 + 24)):
                    self.assertEqual(status, 200, text)
                    self.assertEqual(seen, one)


class BatchSizeTriggerTest(unittest.TestCase):
    """send_batch_size reached: sent at once, without waiting for a long timeout."""

    def test_size_and_cap(self):
        body = read_corpus("go-1s-cpu")
        c = start(size=1, max_size=0, timeout="30s")
        try:
            t0 = time.monotonic()
            status, text, _ = ingest(c, "acme", "sized", body)
            self.assertEqual(status, 200, text)
            self.assertLess(time.monotonic() - t0, 10)  # not the 30s timeout
            self.assertEqual(metric(c, "flamecol_processor_batch_batch_size_trigger_send_total",
                                    PROC), 1)
            self.assertEqual(total(c, "acme", 'service_name="sized"'), cpu_total("go-1s-cpu"))
        finally:
            self.assertEqual(c.stop(), 0, c.log())


class BatchConfigTest(unittest.TestCase):
    def validate(self, processor):
        rc, out, _ = validate_processor("batch", processor)
        return rc, out

    def test_errors(self):
        for config, words in [
            ("    send_batch_size: 100\n    send_batch_max_size: 10",
             "send_batch_max_size (10) must be 0 (no cap) or greater or equal to send_batch_size"),
            ("    timeout: 0s", "timeout: must be positive"),
            ("    metadata_cardinality_limit: 0", "metadata_cardinality_limit"),
        ]:
            rc, out = self.validate(config)
            self.assertEqual(rc, 1, out)
            self.assertIn(words, out)
        rc, out = self.validate("    metadata_keys: [env]")
        self.assertEqual(rc, 0, out)
        rc, out = self.validate("")
        self.assertEqual(rc, 0, out)



KEYS_CONFIG = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
processors:
  batch:
    timeout: 100ms
    metadata_keys: [service_name]
    metadata_cardinality_limit: 2
exporters:
  debug:
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


class MetadataKeysTest(unittest.TestCase):
    def request(self, services):
        """One OTLP/JSON request whose resources differ only by service.name."""
        base = json.loads(convert("go-1s-mutex", "otlp-json", "service_name=x"))
        rp = base["resourceProfiles"][0]
        base["resourceProfiles"] = []
        for svc in services:
            copy = json.loads(json.dumps(rp))
            copy["resource"]["attributes"] = [{"key": "service.name", "value": {"stringValue": svc}}]
            base["resourceProfiles"].append(copy)
        return json.dumps(base).encode()

    def test_a_request_with_more_keys_than_the_limit_is_refused_for_good(self):
        c = Collector(KEYS_CONFIG)
        try:
            c.wait_ready()
            url = c.base + "/v1development/profiles"
            status, _, text = http("POST", url, self.request(["a", "b"]),
                                   {"Content-Type": "application/json"})
            self.assertEqual(status, 200, text)
            # Three keys can never fit under a limit of two: permanent (413), not 429 for ever.
            status, _, text = http("POST", url, self.request(["a", "b", "c"]),
                                   {"Content-Type": "application/json"})
            self.assertEqual(status, 413, text)
            self.assertIn(b"metadata_cardinality_limit", text)
        finally:
            self.assertEqual(c.stop(), 0, c.log())

if __name__ == "__main__":
    unittest.main()
