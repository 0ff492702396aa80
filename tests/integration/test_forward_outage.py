"""A backend outage seen through a forwarding sidecar (real flamecol
processes on loopback): sidecar (pprof receiver -> `otlp` exporter) ->
backend (OTLP receiver -> store + a debug file that lists every profile
it received).

- The backend goes away for 30 s while a client pushes 10 small profiles a
  second into the sidecar, each with its own `push_id`; the backend comes
  back on the same port. Every push the sidecar acknowledged must arrive
  exactly once, with the in-memory queue (within its capacity) and with the
  persistent queue (`sending_queue.storage`). The backend is stopped with
  SIGTERM, which lets the calls it has started finish and be answered, so
  nothing it received is left unacknowledged: exactly once is owed.
- Queue full: with a queue of 5 requests and the backend away, the sidecar
  refuses the rest with 429 + Retry-After, counted in the exporter's
  enqueue_failed and the receiver's refused counters; once the backend is
  back, what was acknowledged arrives once and what was refused never.

Retry intervals are small (initial 200ms, max 1s). How long the sidecar
takes to drain once the backend is back is printed, not asserted (the otlp
exporter caps gRPC's reconnect backoff at 1 s and polls reconnects every
100 ms, so it is about 2 s on a quiet machine); wait_drained allows 60 s.
"""
import collections
import os
import re
import shutil
import signal
import threading
import time
import unittest
import urllib.parse

from harness import scratch_dir, Collector, free_port, http

OUTAGE_S = float(os.environ.get("FLAMECOL_OUTAGE_SECONDS", "30"))
RATE = 10  # pushes per second

BACKEND = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%(bgrpc)d
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:%(bquery)d
  debug:
    verbosity: basic
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [store, debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

SIDECAR = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  otlp:
    endpoint: 127.0.0.1:%(bgrpc)d
    tls: {insecure: true}
    timeout: 2s
    retry_on_failure: {initial_interval: 200ms, max_interval: 1s, max_elapsed_time: 300s}
    sending_queue: {num_consumers: %(consumers)d, queue_size: %(queue)d%(storage)s}
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [otlp]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

PUSH_ID = re.compile(r'push_id="(\d+)"')


def delivered(*backends):
    """push_id -> how many times the backends' debug files list it."""
    counts = collections.Counter()
    for b in backends:
        with open(b.debug_path) as f:
            for line in f:
                if line.startswith("profile "):
                    m = PUSH_ID.search(line)
                    assert m, line
                    counts[int(m.group(1))] += 1
    return counts


def metric_sum(c, name, **labels):
    _, _, body = http("GET", c.metrics_base + "/metrics")
    want = ['%s="%s"' % kv for kv in labels.items()]
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, value = line.rsplit(" ", 1)
            have = key.partition("{")[2].rstrip("}").split(",")
            if all(w in have for w in want):
                total += float(value)
    return total


def push(c, push_id):
    """One small profile (one sample of value 1) with its own push_id; returns (status, headers)."""
    q = urllib.parse.urlencode({"name": "outage.cpu{push_id=%d}" % push_id,
                                "from": str(1700000000 + push_id), "until": str(1700000001 + push_id)})
    status, headers, _ = http("POST", c.base + "/ingest?" + q,
                              b"main;work;leaf_%d 1\n" % push_id, timeout=10)
    return status, headers


def wait_drained(c, timeout=60):
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        busy = metric_sum(c, "flamecol_exporter_queue_size", exporter="otlp") + \
            metric_sum(c, "flamecol_exporter_in_flight_requests", exporter="otlp")
        quiet = quiet + 1 if busy == 0 else 0
        if quiet >= 3:
            return
        time.sleep(0.2)
    raise AssertionError("the sidecar's queue did not drain:\n" + c.log())


class Pusher(threading.Thread):
    """Pushes RATE profiles a second, ids from 1, until stopped; keeps every answer."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.status = {}
        self.stop_flag = threading.Event()

    def run(self):
        t0 = time.monotonic()
        i = 0
        while not self.stop_flag.is_set():
            i += 1
            delay = t0 + i / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                self.status[i] = push(self.c, i)[0]
            except OSError as e:  # recorded, asserted by the test
                self.status[i] = repr(e)

    def stop(self):
        self.stop_flag.set()
        self.join()


class ForwardOutageTest(unittest.TestCase):
    def outage(self, storage):
        bgrpc = free_port()
        conf = {"bgrpc": bgrpc, "bquery": free_port(), "consumers": 4, "queue": 1000,
                "storage": ""}
        if storage:
            qdir = scratch_dir("flamecol-queue-")
            self.addCleanup(shutil.rmtree, qdir, True)
            conf["storage"] = ", storage: %s" % qdir
        backend1 = Collector(BACKEND % conf)
        backend1.wait_ready()
        sidecar = Collector(SIDECAR % conf)
        with sidecar:
            pusher = Pusher(sidecar)
            pusher.start()
            try:
                time.sleep(2)
                self.assertEqual(backend1.stop(signal.SIGTERM), 0, backend1.log())
                down_from = len(pusher.status)
                time.sleep(OUTAGE_S)
                # Half-way through, the sidecar holds what it could not send.
                self.assertGreater(metric_sum(sidecar, "flamecol_exporter_queue_size", exporter="otlp")
                                   + metric_sum(sidecar, "flamecol_exporter_in_flight_requests",
                                                exporter="otlp"), 0)
                self.assertEqual(metric_sum(sidecar, "flamecol_exporter_queue_capacity",
                                            exporter="otlp"), 1000)
                backend2 = Collector(BACKEND % conf)
                backend2.wait_ready()
                back = time.monotonic()
                time.sleep(2)
            finally:
                pusher.stop()
            with backend2:
                wait_drained(sidecar)
                drain_s = time.monotonic() - back
                retries = metric_sum(sidecar, "flamecol_exporter_retries_total", exporter="otlp")
                failed = metric_sum(sidecar, "flamecol_exporter_send_failed_profile_samples_total",
                                    exporter="otlp")
                fsyncs = metric_sum(sidecar, "flamecol_exporter_persistent_queue_fsyncs_total",
                                    exporter="otlp")
                self.assertEqual(backend2.stop(signal.SIGTERM), 0, backend2.log())
            self.assertEqual(sidecar.stop(), 0, sidecar.log())

        acked = sorted(i for i, s in pusher.status.items() if s == 200)
        self.assertEqual(len(acked), len(pusher.status),
                         "within capacity every push is acknowledged: %s" %
                         {i: s for i, s in pusher.status.items() if s != 200})
        self.assertGreaterEqual(len(pusher.status) - down_from, OUTAGE_S * RATE * 0.8)
        counts = delivered(backend1, backend2)
        missing = [i for i in acked if counts[i] == 0]
        twice = {i: n for i, n in counts.items() if n > 1}
        self.assertEqual(missing, [], "acknowledged pushes lost")
        self.assertEqual(twice, {}, "pushes delivered more than once")
        self.assertEqual(set(counts), set(acked))
        self.assertGreater(retries, 0)
        self.assertEqual(failed, 0)
        if storage:
            self.assertGreater(fsyncs, 0)
        print("%s queue: %d pushes, %d during the %.0f s outage, %d retries, %d fsyncs, drained "
              "%.1f s after the backend came back; each delivered once" %
              ("persistent" if storage else "memory", len(acked), len(acked) - down_from, OUTAGE_S,
               retries, fsyncs, drain_s))

    def test_outage_memory_queue(self):
        self.outage(storage=False)

    def test_outage_persistent_queue(self):
        self.outage(storage=True)

    def test_queue_full_refuses_with_retry_after(self):
        bgrpc = free_port()  # nothing listens there yet: the backend is away
        conf = {"bgrpc": bgrpc, "bquery": free_port(), "consumers": 1, "queue": 5, "storage": ""}
        sidecar = Collector(SIDECAR % conf)
        with sidecar:
            answers = {}
            for i in range(1, 21):
                answers[i] = push(sidecar, i)
            acked = [i for i, (s, _) in answers.items() if s == 200]
            refused = [i for i, (s, _) in answers.items() if s == 429]
            self.assertEqual(len(acked) + len(refused), 20,
                             {i: s for i, (s, _) in answers.items()})
            # 5 queued, maybe one more held by the consumer that is retrying it.
            self.assertIn(len(acked), (5, 6))
            for i in refused:
                self.assertGreaterEqual(int(answers[i][1]["Retry-After"]), 1)
            self.assertEqual(metric_sum(sidecar, "flamecol_exporter_enqueue_failed_profile_samples_total",
                                        exporter="otlp"), len(refused))  # one sample each
            self.assertEqual(metric_sum(sidecar, "flamecol_receiver_refused_requests_total",
                                        receiver="pprof"), len(refused))
            self.assertEqual(metric_sum(sidecar, "flamecol_receiver_accepted_requests_total",
                                        receiver="pprof"), len(acked))
            self.assertEqual(metric_sum(sidecar, "flamecol_exporter_queue_capacity",
                                        exporter="otlp"), 5)
            backend = Collector(BACKEND % conf)
            with backend:
                wait_drained(sidecar)
                self.assertEqual(backend.stop(signal.SIGTERM), 0, backend.log())
            self.assertEqual(sidecar.stop(), 0, sidecar.log())
        counts = delivered(backend)
        self.assertEqual(dict(counts), {i: 1 for i in acked})
        for i in refused:
            self.assertNotIn(i, counts)


if __name__ == "__main__":
    unittest.main()
