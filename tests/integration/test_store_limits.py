"""The store's limits through the real binary: SelectSeries steps that used
to crash it; a store at max_size that heals itself by its own retention; a
full disk (an LD_PRELOAD shim makes data.mdb's writes fail with ENOSPC)
refused as retryable and healed once space is back; one process per data
directory. No timing assertions: every wait polls with a generous deadline."""
import json
import os
import struct
import time
import unittest
import urllib.parse

from harness import scratch_dir, BIN, STORE_PIPELINE, Collector, http

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
# One push: 200 folded stacks of 1..5 samples each (200 * 3 samples), at
# sampleRate=100 one sample is 10 ms: 600 * 1e7 ns.
PUSH_TOTAL = 600 * 10000000
DEADLINE = 120  # seconds any healing may take here; retention runs every second

LIMITED = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  store:
    path: {dir}/data
    max_size: 1MiB
    retention: 0
    fine_retention: 0
    # Bundling frees pages too, and would heal the full store without a deletion.
    bundle_after: 0
    retention_interval: 1s
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


def folded():
    """The stacks of every push: one service's code, the same 200 stacks each time."""
    return "".join("app;handler_%d;work_%d;leaf_%d %d\n" % (j % 20, j, j, 1 + j % 5)
                   for j in range(200)).encode()


def push(c, t, service="limits"):
    """One folded profile at unix second t: (status, headers, body)."""
    url = c.base + "/ingest?name=%s.cpu&sampleRate=100&from=%d&until=%d" % (service, t, t + 1)
    return http("POST", url, folded(), {"Content-Type": "text/plain"})


def range_total(c, service, start, end):
    """The stored cpu total of service over [start, end)."""
    q = {"query": '%s{service_name="%s"}' % (CPU, service), "from": str(start),
         "until": str(end), "format": "json"}
    status, _, body = http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q))
    assert status == 200, body
    return json.loads(body)["flamebearer"]["numTicks"]


def total_at(c, t, service="limits"):
    """The stored cpu total of [t, t + 10) (one 10 s window)."""
    return range_total(c, service, t, t + 10)


def select_series(c, step, json_=True, start=None, end=None):
    end = int(time.time() * 1000) if end is None else end
    start = end - 3600 * 1000 if start is None else start
    if json_:
        body = json.dumps({"profileTypeID": CPU, "labelSelector": "{}", "start": str(start),
                           "end": str(end), "step": step}).encode()
        ctype = "application/json"
    else:
        def varint(v):
            v &= (1 << 64) - 1
            out = b""
            while True:
                b, v = v & 0x7F, v >> 7
                out += bytes([b | (0x80 if v else 0)])
                if not v:
                    return out
        body = (bytes([1 << 3 | 2, len(CPU)]) + CPU.encode() + bytes([2 << 3 | 2, 2]) + b"{}"
                + bytes([3 << 3]) + varint(start) + bytes([4 << 3]) + varint(end)
                + bytes([6 << 3 | 1]) + struct.pack("<d", step))
        ctype = "application/proto"
    return http("POST", c.base + "/querier.v1.QuerierService/SelectSeries", body,
                {"Content-Type": ctype})


class SelectSeriesStepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0"))
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def assert_invalid(self, status, body, field):
        self.assertEqual(status, 400, body)
        doc = json.loads(body)
        self.assertEqual(doc["code"], "invalid_argument")
        self.assertIn(field, doc["message"])

    def assert_serves(self):
        status, _, body = select_series(self.c, 15)
        self.assertEqual(status, 200, body)
        status, _, _ = http("GET", self.c.metrics_base + "/ready")
        self.assertEqual(status, 200)

    def test_tiny_step_is_refused_json_and_proto(self):
        for json_ in (True, False):
            # Under 1 ms: Pyroscope's own check answers first.
            status, _, body = select_series(self.c, 1e-300, json_=json_)
            self.assert_invalid(status, body, "step")
            self.assertEqual(json.loads(body)["message"], "step must be >= 1ms")
            self.assert_serves()
            # 0.1 s over an hour: 36,001 points, over the cap.
            status, _, body = select_series(self.c, 0.1, json_=json_)
            self.assert_invalid(status, body, "step")
            self.assertIn("11,000 points", json.loads(body)["message"])
            self.assert_serves()

    def test_bad_steps_are_refused(self):
        for step in (-1, -1e300, "NaN", "Infinity", "-Infinity"):
            status, _, body = select_series(self.c, step)
            self.assert_invalid(status, body, "step")
        for step in (-1.0, float("nan"), float("inf")):
            status, _, body = select_series(self.c, step, json_=False)
            self.assert_invalid(status, body, "step")
        self.assert_serves()

    def test_huge_step_is_one_point(self):
        status, _, body = select_series(self.c, 1e300)
        self.assertEqual(status, 200, body)
        self.assert_serves()

    def test_times_that_overflow_are_refused(self):
        for start, end in ((-(1 << 63), 0), (0, (1 << 63) - 1), (-(1 << 62), 1 << 62)):
            for json_ in (True, False):
                status, _, body = select_series(self.c, 15, json_=json_, start=start, end=end)
                self.assert_invalid(status, body, "start" if start else "end")
        self.assert_serves()


CAPS = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  store:
    path: {dir}/data
    open_windows_max_size: 3MiB
    id_cache_max_size: 1MiB
    bundle_cache_max_size: 5MiB
    rebuild_max_size: 7MiB
    query:
      endpoint: 127.0.0.1:{port}
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


class CacheGaugesTest(unittest.TestCase):
    def test_caps_are_in_metrics_before_any_write(self):
        # The caps as configured (hand-computed bytes) from the start, not
        # 0 until a first write group sets them.
        with Collector(CAPS) as c:
            label = 'exporter="store"'
            self.assertEqual(c.metric("flamecol_store_open_windows_max_bytes", label),
                             3 * 1024 * 1024)
            self.assertEqual(c.metric("flamecol_store_id_cache_max_bytes", label),
                             1024 * 1024)
            self.assertEqual(c.metric("flamecol_store_bundle_cache_max_bytes", label),
                             5 * 1024 * 1024)
            self.assertEqual(c.metric("flamecol_store_rebuild_max_bytes", label),
                             7 * 1024 * 1024)
            self.assertEqual(c.metric("flamecol_store_rebuilds_deferred", label), 0)
            self.assertEqual(c.metric("flamecol_store_bundle_cache_bytes", label), 0)
            self.assertEqual(c.metric("flamecol_store_open_windows_bytes", label), 0)


    def test_log_file_size_is_in_metrics(self):
        # The gauge against the file itself: it grows 4 MiB of zeros at a
        # time ahead of its records and is kept between flushes.
        with Collector(CAPS) as c:
            label = 'exporter="store"'
            now = int(time.time())
            for i in range(5):
                status, _, body = push(c, now - 60 + i)
                self.assertEqual(status, 200, body)
            size = os.path.getsize(os.path.join(c.dir, "data", "wal"))
            self.assertGreaterEqual(size, 4 * 1024 * 1024)
            self.assertEqual(c.metric("flamecol_store_log_file_bytes", label), size)
            self.assertGreater(c.metric("flamecol_store_log_bytes", label), 0)
            self.assertLess(c.metric("flamecol_store_log_bytes", label), size)


# The caps above, with one window a flush (rebuild_max_time instead of rebuild_max_size).
SLICED = CAPS.replace("rebuild_max_size: 7MiB", "rebuild_max_time: 1ns")


class RebuildSlicesTest(unittest.TestCase):
    def test_windows_past_rebuild_max_time_are_built_between_write_groups(self):
        # Six services' profiles 3 h ago, then one now: their 100 s, 1000 s
        # and 10^4 s windows close together. rebuild_max_time: 1ns lets a
        # flush build one (so its peak stays one window's bytes), and the
        # writer builds the rest in slices before any timed flush would:
        # the slices counted, none left waiting, each service's total as
        # pushed (PUSH_TOTAL by hand) over the hour and over the 3 h.
        with Collector(SLICED) as c:
            label = 'exporter="store"'
            t0 = (int(time.time()) - 3 * 3600) // 10000 * 10000 + 5
            for i in range(6):
                status, _, body = push(c, t0, service="sliced%d" % i)
                self.assertEqual(status, 200, body)
            status, _, body = push(c, int(time.time()) - 5, service="closer")
            self.assertEqual(status, 200, body)
            # Timed flushes alone (one window each, every 2 s) take about 36 s
            # (measured: slices that build nothing pass a 60 s deadline); the
            # slices take about 2 s.
            deadline = time.monotonic() + 15
            while (c.metric("flamecol_store_rebuild_slices_total", label) or 0) == 0 or \
                    c.metric("flamecol_store_rebuilds_deferred", label) != 0:
                self.assertLess(time.monotonic(), deadline, c.log())
                for i in range(6):
                    self.assertEqual(range_total(c, "sliced%d" % i, t0 - 5, t0 + 3595),
                                     PUSH_TOTAL)
                time.sleep(0.05)
            self.assertLess(c.metric("flamecol_store_rebuild_peak_bytes", label), 8 * 4096)
            for i in range(6):
                self.assertEqual(range_total(c, "sliced%d" % i, t0 - 5, t0 + 9995), PUSH_TOTAL)
                self.assertEqual(range_total(c, "sliced%d" % i, t0 - 5, t0 + 3595), PUSH_TOTAL)
            self.assertEqual(c.stop(), 0, c.log())


class FullStoreTest(unittest.TestCase):
    def test_full_store_heals_by_its_own_retention(self):
        with Collector(LIMITED) as c:
            base = int(time.time()) - 12 * 3600
            acked = []
            i = 0
            first_refusal = None
            # Fill: one push a minute of profile time, until the store refuses.
            while first_refusal is None:
                self.assertLess(i, 5000, "never refused")
                status, headers, body = push(c, base + i * 60)
                if status == 200:
                    acked.append(base + i * 60)
                else:
                    self.assertEqual(status, 503, body)
                    self.assertIn("Retry-After", headers)
                    first_refusal = i
                i += 1
            self.assertGreater(len(acked), 10)
            # Keep pushing: within a few retention intervals pushes are accepted again.
            accepted_after = 0
            deadline = time.monotonic() + DEADLINE
            while accepted_after < 5:
                self.assertLess(time.monotonic(), deadline, "never accepted again:\n" + c.log())
                status, headers, body = push(c, base + i * 60)
                if status == 200:
                    acked.append(base + i * 60)
                    accepted_after += 1
                else:
                    self.assertEqual(status, 503, body)
                    self.assertIn("Retry-After", headers)
                    time.sleep(0.2)
                i += 1
            self.assertGreater(c.metric("flamecol_store_retention_deleted_total",
                                        'exporter="store"'), 0)
            self.assertGreater(c.metric("flamecol_store_refused_writes_total",
                                        'exporter="store",reason="full"'), 0)
            # Oldest first: what is kept of the acknowledged pushes is a whole, newest, suffix.
            # Read newest first: a retention pass running meanwhile deletes oldest first, so
            # it can only lengthen the deleted prefix, not cut a hole behind the reads.
            present = [total_at(c, t) for t in reversed(acked)][::-1]
            self.assertEqual(present[-1], PUSH_TOTAL)
            kept = len(present) - next(k for k, v in enumerate(present) if v != 0)
            self.assertEqual(present[-kept:], [PUSH_TOTAL] * kept)
            self.assertEqual(present[:-kept], [0] * (len(present) - kept))
            self.assertGreater(kept, 5)
            self.assertLess(kept, len(present))
            # The log does not repeat a failure line per refused push.
            self.assertLess(c.log().count("full"), 10, c.log())
            print("pushes acked %d, refused from push %d, kept %d" % (len(acked), first_refusal, kept))
            self.assertEqual(c.stop(), 0, c.log())


    def test_full_of_future_dated_data_heals_too(self):
        """Profiles dated a month ahead (a skewed clock, or a hostile client) fill the store;
        retention cannot wait for their windows to end, and deletes them oldest first."""
        with Collector(LIMITED) as c:
            base = int(time.time()) + 30 * 86400
            i, refused, accepted_after = 0, False, 0
            deadline = time.monotonic() + DEADLINE
            while accepted_after < 5:
                self.assertLess(time.monotonic(), deadline, "never healed:\n" + c.log())
                status, headers, body = push(c, base + i * 60)
                i += 1
                if status == 200:
                    accepted_after += refused
                    continue
                self.assertEqual(status, 503, body)
                self.assertIn("Retry-After", headers)
                refused = True
                time.sleep(0.2)
            self.assertEqual(total_at(c, base + (i - 1) * 60), PUSH_TOTAL)
            self.assertEqual(total_at(c, base), 0)
            self.assertEqual(c.stop(), 0, c.log())


class DiskFullTest(unittest.TestCase):
    def shim(self):
        path = os.path.join(os.path.dirname(os.path.abspath(BIN)), "tests", "faults",
                            "libfc_enospc_shim.so")
        if not os.path.exists(path):
            self.skipTest("no %s (built by tests/faults)" % path)
        return path

    def test_enospc_is_retryable_and_heals(self):
        shim = self.shim()
        config = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0")
        top = scratch_dir("flamecol-enospc-")
        control = os.path.join(top, "enospc-on")  # the fault is on while it exists
        env = {"LD_PRELOAD": shim, "FC_ENOSPC_DIR": os.path.join(top, "data"),
               "FC_ENOSPC_CONTROL": control,
               # ASan wants to come first; the shim is not instrumented.
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
        c = Collector(config.replace("{dir}/data", os.path.join(top, "data")), env=env)
        with c:
            now = int(time.time()) - 3600
            acked = []
            for k in range(5):
                status, _, body = push(c, now + k * 60)
                self.assertEqual(status, 200, body)
                acked.append(now + k * 60)
            open(control, "w").close()
            for k in range(5, 10):
                status, headers, body = push(c, now + k * 60)
                self.assertEqual(status, 503, body)
                self.assertIn("Retry-After", headers)
            self.assertGreaterEqual(c.metric("flamecol_store_refused_writes_total",
                                             'exporter="store",reason="no_space"'), 5)
            os.unlink(control)
            deadline = time.monotonic() + DEADLINE
            k = 10
            while True:
                self.assertLess(time.monotonic(), deadline, "never accepted again:\n" + c.log())
                status, _, body = push(c, now + k * 60)
                k += 1
                if status == 200:
                    acked.append(now + (k - 1) * 60)
                    break
                self.assertEqual(status, 503, body)
                time.sleep(0.2)
            for t in acked:
                self.assertEqual(total_at(c, t), PUSH_TOTAL, t)
            for k in range(5, 10):
                self.assertEqual(total_at(c, now + k * 60), 0)  # refused, never half written
            self.assertEqual(c.stop(), 0, c.log())


class OneProcessPerDirectoryTest(unittest.TestCase):
    def test_second_collector_on_the_same_directory_exits(self):
        config = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0")
        with Collector(config) as first:
            data = os.path.join(first.dir, "data")
            second = Collector(config.replace("{dir}/data", data))
            rc = second.proc.wait(timeout=30)
            second.stderr.close()
            self.assertNotEqual(rc, 0)
            log = second.log()
            self.assertIn(data, log)
            self.assertIn("in use by another flamecol (pid %d)" % first.proc.pid, log)
            # The first still serves.
            self.assertEqual(push(first, int(time.time()))[0], 200)
            self.assertEqual(first.stop(), 0, first.log())
        # Its lock went with it: a new one starts on the same directory.
        with Collector(config.replace("{dir}/data", data)) as third:
            self.assertEqual(push(third, int(time.time()))[0], 200)
            self.assertEqual(third.stop(), 0, third.log())


if __name__ == "__main__":
    unittest.main()
