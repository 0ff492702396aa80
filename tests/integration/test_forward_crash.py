"""kill -9 of a gateway with a persistent queue (real flamecol processes on
loopback): client -> gateway (OTLP/HTTP receiver -> `otlp` exporter with
`sending_queue.storage`) -> backend (OTLP/gRPC receiver -> a store with
`sync: always` + a debug file listing every profile it received).

Two clients stream small OTLP requests into the gateway, each with its own
`push_id` resource attribute. The gateway is killed with SIGKILL at a random
moment, 20 times, and restarted each time on the same ports and the same
queue directory. Checked, from exporters/helper/persist.h's contract:

- every push the gateway acknowledged (HTTP 200) reaches the backend;
- a push is delivered twice only if it was in flight (dispatched, not done)
  at a crash: the duplicates attributed to one crash are at most
  num_consumers, and at most the redelivered counter of the gateway that
  started after that crash (every duplicate was redelivered, not every
  redelivered record was a duplicate: it may not have reached the backend
  before the crash).

A duplicate is attributed to the crash after which its second delivery
happened (the backend's debug file is marked at every crash). The figures
are printed.
"""
import collections
import os
import random
import re
import shutil
import signal
import threading
import time
import unittest

from harness import scratch_dir, Collector, convert, free_port, http

CRASHES = int(os.environ.get("FLAMECOL_CRASHES", "20"))
CONSUMERS = 4
SERVICE = "crash"
ID_WIDTH = 8
PLACEHOLDER = "X" * ID_WIDTH

BACKEND = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{bgrpc}
exporters:
  store:
    path: {dir}/data
    sync: always
    query:
      endpoint: 127.0.0.1:{bquery}
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

GATEWAY = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{ghttp}
exporters:
  otlp:
    endpoint: 127.0.0.1:{bgrpc}
    tls: {insecure: true}
    timeout: 5s
    retry_on_failure: {initial_interval: 50ms, max_interval: 500ms, max_elapsed_time: 0s}
    sending_queue: {num_consumers: %d, queue_size: 100000, storage: {qdir}}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlp]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{gmetrics}
""" % CONSUMERS

PUSH_ID = re.compile(r'push_id="(\d+)"')


def fill(text, ports):
    for k, v in ports.items():
        text = text.replace("{%s}" % k, str(v))
    return text


def profile_lines(backend):
    """The push_ids of the requests the backend received, in order: one per batch (a
    request of this test holds one profile per sample type, all with its push_id)."""
    out = []
    with open(backend.debug_path) as f:
        ids = None
        for line in f:
            if not line.endswith("\n"):
                break  # being written
            if line.startswith("batch "):
                if ids:
                    out.append(ids.pop())
                ids = set()
            elif line.startswith("profile "):
                m = PUSH_ID.search(line)
                assert m, line
                ids.add(int(m.group(1)))
                assert len(ids) == 1, line
        if ids:
            out.append(ids.pop())
    return out


def metric_sum(c, name, **labels):
    _, _, body = http("GET", c.metrics_base + "/metrics", timeout=5)
    want = ['%s="%s"' % kv for kv in labels.items()]
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, value = line.rsplit(" ", 1)
            if all(w in key.partition("{")[2].rstrip("}").split(",") for w in want):
                total += float(value)
    return total


class Clients:
    """Threads that push requests with increasing push_ids until paused; the ids the
    gateway answered 200 are acknowledged, anything else (a reset by the kill) is not."""

    def __init__(self, url, template, n=2):
        self.url = url
        self.template = template
        self.lock = threading.Lock()
        self.next_id = 1
        self.acked = set()
        self.unacked = set()
        self.running = threading.Event()
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.loop) for _ in range(n)]
        for t in self.threads:
            t.start()

    def loop(self):
        while not self.done.is_set():
            if not self.running.wait(0.05):
                continue
            with self.lock:
                i = self.next_id
                self.next_id += 1
            body = self.template.replace(PLACEHOLDER.encode(), b"%0*d" % (ID_WIDTH, i))
            try:
                status, _, _ = http("POST", self.url, body,
                                    {"Content-Type": "application/x-protobuf"}, timeout=10)
            except OSError:
                status = None
            with self.lock:
                (self.acked if status == 200 else self.unacked).add(i)
            if status != 200:
                time.sleep(0.02)  # the gateway is down: wait for the test to restart it

    def close(self):
        self.done.set()
        for t in self.threads:
            t.join()


class ForwardCrashTest(unittest.TestCase):
    def test_kill_9_gateway_with_persistent_queue(self):
        rng = random.Random(int(os.environ.get("FLAMECOL_SEED", str(int(time.time())))))
        ports = {"bgrpc": free_port(), "bquery": free_port(), "ghttp": free_port(),
                 "gmetrics": free_port(),
                 "qdir": scratch_dir("flamecol-queue-")}
        self.addCleanup(shutil.rmtree, ports["qdir"], True)
        template = convert("go-1s-mutex", "otlp", "service_name=" + SERVICE,
                           "push_id=" + PLACEHOLDER)
        self.assertIn(PLACEHOLDER.encode(), template)
        backend = Collector(fill(BACKEND, ports))
        backend.wait_ready()
        marks = []          # backend profile count at each crash
        redelivered = []    # the counter of the gateway started after crash k, k = 0.. (0: first start)
        started = time.monotonic()

        def start_gateway():
            g = Collector(fill(GATEWAY, ports))
            g.ports = {"metrics": ports["gmetrics"]}
            g.base = "http://127.0.0.1:%d" % ports["ghttp"]
            g.metrics_base = "http://127.0.0.1:%d" % ports["gmetrics"]
            g.wait_ready()
            return g

        gateway = None
        clients = Clients("http://127.0.0.1:%d/v1development/profiles" % ports["ghttp"], template)
        try:
            gateway = start_gateway()
            for crash in range(CRASHES):
                clients.running.set()
                # A random moment: sometimes during the replay of the last crash's queue.
                time.sleep(rng.choice((0.02, 0.1)) if crash % 5 == 4 else rng.uniform(0.3, 1.5))
                redelivered.append(metric_sum(gateway, "flamecol_exporter_persistent_queue_redelivered_requests_total",
                                              exporter="otlp"))
                gateway.proc.send_signal(signal.SIGKILL)
                gateway.proc.wait()
                gateway.stderr.close()
                time.sleep(0.3)  # the backend answers what it had already received
                marks.append(len(profile_lines(backend)))
                gateway = start_gateway()
            # After the last restart: stream a little, stop, let the queue drain.
            time.sleep(0.5)
            clients.running.clear()
            time.sleep(0.3)
            # Drained: every acknowledged profile at the backend, nothing queued or in flight.
            # On a loaded machine the backlog (fsync per commit at the backend) can take
            # long: only 60 s without any progress fails.
            last_progress, last_state = time.monotonic(), None
            while True:
                with clients.lock:
                    want = set(clients.acked)
                stored = set(profile_lines(backend))
                missing = len(want - stored)
                queued = metric_sum(gateway, "flamecol_exporter_queue_size", exporter="otlp")
                in_flight = metric_sum(gateway, "flamecol_exporter_in_flight_requests", exporter="otlp")
                if missing == 0 and queued == 0 and in_flight == 0:
                    break
                if (len(stored), queued) != last_state:
                    last_progress, last_state = time.monotonic(), (len(stored), queued)
                self.assertLess(time.monotonic() - last_progress, 60,
                                "not drained, no progress for 60 s: %d acknowledged profiles missing "
                                "at the backend, queue size %s, in flight %s\ngateway:\n%s"
                                % (missing, queued, in_flight, gateway.log()))
                time.sleep(0.2)
            redelivered.append(metric_sum(gateway, "flamecol_exporter_persistent_queue_redelivered_requests_total",
                                          exporter="otlp"))
            corrupt = metric_sum(gateway, "flamecol_exporter_persistent_queue_corrupt_records_total",
                                 exporter="otlp")
            self.assertEqual(gateway.stop(), 0, gateway.log())
        finally:
            clients.close()
            if gateway is not None and gateway.proc.poll() is None:
                gateway.proc.kill()
        self.assertEqual(backend.stop(signal.SIGTERM), 0, backend.log())

        lines = profile_lines(backend)
        counts = collections.Counter(lines)
        lost = sorted(clients.acked - set(counts))
        self.assertEqual(lost, [], "acknowledged pushes that never reached the backend")
        # Each duplicate delivery, attributed to the crash that preceded it.
        seen = set()
        dups = [0] * CRASHES
        for pos, i in enumerate(lines):
            if i in seen:
                crash = sum(1 for m in marks if m <= pos) - 1
                self.assertGreaterEqual(crash, 0, "push %d delivered twice before any crash" % i)
                dups[crash] += 1
            seen.add(i)
        for k in range(CRASHES):
            self.assertLessEqual(dups[k], CONSUMERS, "crash %d: duplicates %s" % (k, dups))
            self.assertLessEqual(dups[k], redelivered[k + 1],
                                 "crash %d: duplicates %s, redelivered %s" % (k, dups, redelivered))
        self.assertEqual(corrupt, 0)
        print("%d crashes in %.0f s: %d pushes acknowledged, %d not (cut by a kill), %d delivered "
              "(%d of them unacknowledged); duplicates per crash %s (total %d), redelivered per "
              "restart %s" % (CRASHES, time.monotonic() - started, len(clients.acked),
                              len(clients.unacked), len(counts), len(set(counts) - clients.acked),
                              dups, sum(dups), [int(r) for r in redelivered[1:]]))


if __name__ == "__main__":
    unittest.main()
