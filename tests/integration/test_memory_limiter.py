"""The memory_limiter processor through the real binary.

A flood of large pprof requests (a corpus profile whose samples are repeated
REPEAT times: about 2 MiB uncompressed, 63,600 samples each, every request its
own series so the store keeps growing) from THREADS connections against a
limit a little above the RSS the process has once warm (measured first, with
the limiter out of the way). While it lasts: RSS (VmHWM) stays under
limit_mib, every refusal is a 429 with Retry-After (the memory_limiter's, or
the listener's max_in_flight), /ready keeps answering 200, and the limiter
did refuse. After it: memory goes back under the soft limit and pushes are
accepted again, and every accepted push is in the store (its total =
accepted x REPEAT x the pprof -top total of the profile).

Also the configuration: the Collector's validation messages and the
warning when memory_limiter is not first in a pipeline."""
import gzip
import os
import threading
import time
import unittest
import urllib.parse

from harness import Collector, http, parse_top, pb_varint, read_corpus, validate_config

PROFILE = "go-3s-cpu"
REPEAT = 120
THREADS = 12
SECONDS = 20
HEADROOM_MIB = 50  # limit_mib = warm RSS + this
SPIKE_MIB = 25     # soft limit = limit_mib - this: room for the requests being decoded

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
    retry_after: 1s
processors:
  memory_limiter:
    check_interval: 100ms
    limit_mib: {limit}
    spike_limit_mib: {spike}
exporters:
  store:
    path: {dir}/data
    retention: 0          # the corpus profile keeps its own (old) time
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  http:
    max_in_flight: 2
  pipelines:
    profiles:
      receivers: [pprof]
      processors: [memory_limiter]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

PROC = 'processor="memory_limiter",pipeline="profiles"'


def big_pprof(name, repeat):
    """The corpus profile, uncompressed, with its samples (Profile field 2) repeated."""
    data = gzip.decompress(read_corpus(name))
    other, samples, i = [], [], 0
    while i < len(data):
        start = i
        key, i = pb_varint(data, i)
        v, i = pb_varint(data, i)
        if key & 7 == 2:
            i += v
        (samples if key >> 3 == 2 else other).append(data[start:i])
    return b"".join(other) + b"".join(samples) * repeat, len(samples) * repeat


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def sanitized(proc):
    """ASan's shadow memory and quarantine inflate RSS: the bound is for release builds."""
    with open("/proc/%d/maps" % proc.pid) as f:
        return "libasan" in f.read()


def push(c, body, n):
    return http("POST", c.base + "/ingest?" + urllib.parse.urlencode(
        {"name": "flood.cpu{req=%d}" % n}), body,
        {"Content-Type": "application/octet-stream"}, timeout=60)


def total(c):
    q = urllib.parse.urlencode({"query": 'process_cpu:cpu:nanoseconds:cpu:nanoseconds'
                                '{service_name="flood"}',
                                "from": "0", "until": "now+1h", "format": "folded"})
    status, _, text = http("GET", c.base + "/pyroscope/render?" + q, timeout=60)
    assert status == 200, text
    return sum(int(l.rsplit(" ", 1)[1]) for l in text.decode().splitlines() if l)


class MemoryLimiterFloodTest(unittest.TestCase):
    def test_flood_stays_under_the_limit(self):
        body, rows = big_pprof(PROFILE, REPEAT)
        per_push = REPEAT * next(s["total"] for s in parse_top(PROFILE).values()
                                 if s["type"] == "cpu")
        # ASan (when built with it) keeps freed memory in its quarantine and its allocator's
        # caches: keep them small and returned to the system, so memory can go back down.
        env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
               ":quarantine_size_mb=8:allocator_release_to_os_interval_ms=50"}
        # The RSS of a warm process (one push stored), with the limiter out of the way.
        with Collector(CONFIG.replace("{limit}", "100000").replace("{spike}", "0"), env=env) as c:
            status, _, text = push(c, body, 0)
            self.assertEqual(status, 200, text)
            warm = status_kib(c.proc.pid, "VmRSS")
            c.proc.terminate()
            self.assertEqual(c.proc.wait(30), 0, c.log())
        limit_mib = warm // (1 << 20) + HEADROOM_MIB
        config = CONFIG.replace("{limit}", str(limit_mib)).replace("{spike}", str(SPIKE_MIB))
        with Collector(config, env=env) as c:
            stats = {"status": {}, "no_retry_after": 0, "errors": [], "limiter_429": 0}
            lock = threading.Lock()
            counter = iter(range(1, 1 << 30))
            ready = []
            stop = threading.Event()
            deadline = time.monotonic() + SECONDS

            def worker():
                while time.monotonic() < deadline:
                    with lock:
                        n = next(counter)
                    try:
                        status, headers, text = push(c, body, n)
                    except OSError as e:
                        with lock:
                            stats["errors"].append(repr(e))
                        continue
                    with lock:
                        stats["status"][status] = stats["status"].get(status, 0) + 1
                        if status == 429 and "Retry-After" not in headers:
                            stats["no_retry_after"] += 1
                        if status == 429 and b"high memory usage" in text:
                            stats["limiter_429"] += 1
                        if status not in (200, 429):
                            stats["errors"].append((status, text[:300]))

            def poll_ready():
                while not stop.is_set():
                    try:
                        status, _, _ = http("GET", c.metrics_base + "/ready", timeout=10)
                    except OSError as e:
                        status = repr(e)
                    ready.append(status)
                    stop.wait(0.5)

            poller = threading.Thread(target=poll_ready)
            poller.start()
            threads = [threading.Thread(target=worker) for _ in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop.set()
            poller.join()
            peak = status_kib(c.proc.pid, "VmHWM")
            refused = c.metric("flamecol_processor_memory_limiter_refused_profile_samples_total",
                               PROC)
            overload = c.metric("flamecol_server_refused_requests_total",
                                'transport="http",endpoint="127.0.0.1:%d",reason="overload"'
                                % c.ports["port"]) or 0
            print("\nmemory_limiter flood: warm RSS %.1f MiB, limit %d MiB, peak RSS %.1f MiB, "
                  "answers %s, refused by the limiter %d, by max_in_flight %d"
                  % (warm / 2**20, limit_mib, peak / 2**20, stats["status"],
                     (refused or 0) // rows, overload))

            self.assertEqual(stats["errors"], [])
            self.assertEqual(set(stats["status"]) - {200, 429}, set())
            self.assertGreater(stats["status"].get(200, 0), 0)
            self.assertEqual(stats["no_retry_after"], 0)
            self.assertTrue(ready and all(s == 200 for s in ready), ready)
            # The limiter refused, every refusal was a 429 the clients saw, counted in samples.
            self.assertGreater(stats["limiter_429"], 0, "the flood never reached the soft limit")
            self.assertEqual(refused, stats["limiter_429"] * rows)
            self.assertEqual(stats["limiter_429"] + overload, stats["status"][429])
            self.assertIsNotNone(c.metric("flamecol_processor_memory_limiter_memory_in_use_bytes",
                                          PROC))
            self.assertEqual(c.metric("flamecol_processor_memory_limiter_limit_bytes", PROC),
                             limit_mib << 20)
            if not sanitized(c.proc):
                self.assertLess(peak, limit_mib << 20, "RSS passed limit_mib")

            # The flood is over: memory goes back under the soft limit and pushes pass again.
            accepted = stats["status"][200]
            if os.environ.get("ML_DEBUG"):
                for _ in range(8):
                    print(open("/proc/%d/status" % c.proc.pid).read().split("VmHWM")[1][:200].replace("\n", " "), c.metric("flamecol_processor_memory_limiter_memory_in_use_bytes", PROC))
                    time.sleep(1)
            give_up = time.monotonic() + 15
            while True:
                status, _, text = push(c, body, next(counter))
                if status == 200:
                    accepted += 1
                    break
                self.assertEqual(status, 429, text)
                self.assertLess(time.monotonic(), give_up, "still refusing after the flood: %s"
                                % text)
                time.sleep(0.3)
            self.assertEqual(total(c), accepted * per_push)
            c.proc.terminate()
            self.assertEqual(c.proc.wait(30), 0, c.log())


class MemoryLimiterConfigTest(unittest.TestCase):
    BASE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:0
processors:
  limits: {}
  memory_limiter:
%s
exporters:
  nop: {}
service:
  pipelines:
    profiles:
      receivers: [pprof]
      processors: %s
      exporters: [nop]
"""

    def validate(self, keys, processors="[memory_limiter]"):
        rc, out, _ = validate_config(
            self.BASE % ("\n".join("    " + k for k in keys) or "    {}", processors))
        return rc, out

    def test_valid(self):
        rc, out = self.validate(["limit_mib: 512"])
        self.assertEqual(rc, 0, out)
        self.assertNotIn("should be the first", out)
        rc, out = self.validate(["limit_percentage: 75", "spike_limit_percentage: 15",
                                 "check_interval: 5s"])
        self.assertEqual(rc, 0, out)

    def test_the_collectors_messages(self):
        cases = [
            ([], "'limit_mib' or 'limit_percentage' must be greater than zero"),
            (["limit_mib: 100", "check_interval: 0s"],
             "'check_interval' must be greater than zero"),
            (["limit_mib: 100", "spike_limit_mib: 100"],
             "'spike_limit_mib' must be smaller than 'limit_mib'"),
            (["limit_percentage: 50", "spike_limit_percentage: 50"],
             "'spike_limit_percentage' must be smaller than 'limit_percentage'"),
            (["limit_percentage: 101"],
             "'limit_percentage' and 'spike_limit_percentage' must be greater than zero and "
             "less than or equal to hundred"),
            (["limit_mib: 100", "limit_percentage: 50"],
             "'limit_mib' and 'limit_percentage' must not be set together"),
            (["limit_mib: -1"], "must not be negative"),
            (["limit_mb: 100"], "unknown key 'limit_mb'"),
        ]
        for keys, message in cases:
            with self.subTest(keys=keys):
                rc, out = self.validate(keys)
                self.assertNotEqual(rc, 0, out)
                self.assertIn(message, out)
                self.assertIn("memory_limiter", out)

    def test_warns_when_not_first(self):
        rc, out = self.validate(["limit_mib: 512"], "[limits, memory_limiter]")
        self.assertEqual(rc, 0, out)
        self.assertIn("warning: service.pipelines.profiles.processors: memory_limiter should be "
                      "the first processor of the pipeline", out)
        rc, out = self.validate(["limit_mib: 512"], "[memory_limiter, limits]")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("should be the first", out)


if __name__ == "__main__":
    unittest.main()
