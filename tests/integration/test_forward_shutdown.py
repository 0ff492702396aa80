"""SIGTERM of a forwarding flamecol (real processes on loopback): sidecar
(pprof receiver -> `otlp` exporter) -> backend (OTLP -> store + debug file).

- Memory queue: requests queued while the backend is away are drained on
  SIGTERM once it is back, within `service.shutdown_timeout`, each
  delivered once, and the process exits 0.
- Memory queue, backend still away: SIGTERM ends by the deadline and the
  requests it could not send are dropped and said so (counted as
  error_type="shutdown"; the log line names how many).
- Persistent queue, backend away: SIGTERM exits promptly and leaves the
  requests on disk; the next start sends every one, once.
"""
import os
import shutil
import time
import unittest

from harness import scratch_dir, Collector, free_port
from test_forward_outage import BACKEND, delivered, push

SIDECAR = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  otlp:
    endpoint: 127.0.0.1:%(bgrpc)d
    tls: {insecure: true}
    timeout: 1s
    retry_on_failure: {initial_interval: 100ms, max_interval: 300ms, max_elapsed_time: 0s}
    sending_queue: {num_consumers: 2, queue_size: 100%(storage)s}
service:
  shutdown_timeout: %(grace)s
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [otlp]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

N = 20


class ForwardShutdownTest(unittest.TestCase):
    def conf(self, storage=None, grace="10s"):
        conf = {"bgrpc": free_port(), "bquery": free_port(), "storage": "", "grace": grace}
        if storage:
            conf["storage"] = ", storage: %s" % storage
        return conf

    def push_all(self, sidecar):
        for i in range(1, N + 1):
            status, _ = push(sidecar, i)
            self.assertEqual(status, 200, sidecar.log())

    def test_memory_queue_drains_on_sigterm(self):
        conf = self.conf()
        sidecar = Collector(SIDECAR % conf)
        with sidecar:
            sidecar.wait_ready()
            self.push_all(sidecar)  # the backend is away: all 20 wait in the queue
            self.assertEqual(sidecar.metric("flamecol_exporter_queue_size", 'exporter="otlp"'), N)
            backend = Collector(BACKEND % conf)
            with backend:
                backend.wait_ready()
                t0 = time.monotonic()
                self.assertEqual(sidecar.stop(timeout=30), 0, sidecar.log())
                self.assertLess(time.monotonic() - t0, 12)  # shutdown_timeout 10s, plus exit
                counts = delivered(backend)
                self.assertEqual(counts, {i: 1 for i in range(1, N + 1)}, sidecar.log())
                self.assertNotIn("dropped", sidecar.log())

    def test_memory_queue_deadline_drops_and_says_so(self):
        conf = self.conf(grace="1s")
        sidecar = Collector(SIDECAR % conf)
        with sidecar:
            sidecar.wait_ready()
            self.push_all(sidecar)
            t0 = time.monotonic()
            self.assertEqual(sidecar.stop(timeout=30), 0, sidecar.log())
            # 1 s of grace, plus at most one attempt's timeout (1 s) already under way.
            self.assertLess(time.monotonic() - t0, 5)
            log = sidecar.log()
            self.assertRegex(log, r"shutdown deadline: dropped \d+ queued requests", log)

    def test_persistent_queue_keeps_what_is_left_for_the_next_start(self):
        qdir = scratch_dir("flamecol-queue-")
        self.addCleanup(shutil.rmtree, qdir, True)
        conf = self.conf(storage=qdir, grace="1s")
        first = Collector(SIDECAR % conf)
        with first:
            first.wait_ready()
            self.push_all(first)
            self.assertEqual(first.stop(timeout=30), 0, first.log())
            self.assertIn("%d requests left on disk" % N, first.log())
        backend = Collector(BACKEND % conf)
        with backend:
            backend.wait_ready()
            second = Collector(SIDECAR % conf)
            with second:
                second.wait_ready()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and len(delivered(backend)) < N:
                    time.sleep(0.2)
                self.assertEqual(delivered(backend), {i: 1 for i in range(1, N + 1)},
                                 second.log())
                self.assertEqual(second.stop(timeout=30), 0)


if __name__ == "__main__":
    unittest.main()
