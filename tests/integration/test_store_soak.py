"""kill -9 soak of the store: many crashes at random moments, one data directory.

Each trial starts flamecol on the same store, checks what every earlier trial
left (below), then lets 4 clients push unique folded profiles and kills the
process with SIGKILL after a random delay (0-400 ms, and 1.5-3 s for every fourth trial; the seed is printed).
The pushes' timestamps are spread over 3 hours, so a crash finds 10 s windows
just written and coarser windows marked dirty but not yet rebuilt (the store
rebuilds those every 2 s, see docs/internals/store.md).

After every restart, through /pyroscope/render?format=folded:
- over the whole 3 hours (coarse windows) and over its first 10 minutes
  (10 s windows), every acknowledged push is there with exactly its value,
  and nothing is there that was not pushed, or pushed and stored twice;
- a push that was sent but not answered (in flight at the kill) may be
  there or not, but once at most.
The last trial ends with SIGTERM and one more check.

FC_SOAK_TRIALS sets the number of trials (default 100; 25 under
AddressSanitizer, whose build is several times slower, to stay inside the
test's 300 s limit).
"""
import os
import random
import re
import signal
import threading
import time
import unittest
import urllib.parse

from harness import scratch_dir, BIN, Collector, http

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
TICK = 10000000  # a folded "1" at the default 100 Hz is 10 ms of CPU
T0 = 1700000000
SPAN = 3 * 3600  # pushes' timestamps: T0 .. T0 + SPAN
NEAR = 600  # the narrow query: T0 .. T0 + NEAR, answered from 10 s windows
CLIENTS = 4
ASAN = "asan" in BIN
TRIALS = int(os.environ.get("FC_SOAK_TRIALS", "25" if ASAN else "100"))

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  store:
    path: %s
    sync: batch
    retention: 0
    fine_retention: 0
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


def when(i):
    """Push i's timestamp: spread over SPAN, several pushes per 10 s window."""
    return T0 + (i * 7919) % SPAN


def samples(i):
    """1..7 samples, so a push stored twice shows."""
    return 1 + i % 7


def push(c, i):
    t = when(i)
    url = c.base + "/ingest?name=soak.cpu&from=%d&until=%d" % (t, t + 1)
    body = ("soak_main;soak_work;FCSOAK%07d %d\n" % (i, samples(i))).encode()
    try:
        status, _, _ = http("POST", url, body, {"Content-Type": "text/plain"}, timeout=30)
        return status
    except OSError:
        return None


def stored(c, frm, until):
    q = {"query": CPU + '{service_name="soak"}', "from": str(frm), "until": str(until),
         "format": "folded", "maxNodes": "1048576"}
    status, _, body = http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q),
                           timeout=60)
    assert status == 200, body
    out = {}
    for line in body.decode().splitlines():
        stack, _, value = line.rpartition(" ")
        m = re.fullmatch(r"soak_main;soak_work;FCSOAK(\d{7})", stack)
        assert m is not None, "a stack nobody pushed: %r" % line
        i = int(m.group(1))
        assert i not in out, "push %d listed twice" % i
        out[i] = int(value)
    return out


class StoreKillSoakTest(unittest.TestCase):
    def check(self, c, acked, sent, trial):
        for frm, until in ((T0, T0 + SPAN + 10), (T0, T0 + NEAR)):
            got = stored(c, frm, until)
            inside = {i for i in acked if frm <= when(i) < until}
            lost = sorted(inside - set(got))
            self.assertEqual(lost, [], "trial %d, %d..%d: acknowledged pushes lost: %s"
                             % (trial, frm, until, lost[:10]))
            for i, v in got.items():
                self.assertIn(i, sent, "trial %d: push %d was never sent" % (trial, i))
                self.assertEqual(v, samples(i) * TICK, "trial %d, %d..%d: push %d stored %s"
                                 % (trial, frm, until, i, v / (samples(i) * TICK)))

    def test_kill_at_random_moments(self):
        seed = int(os.environ.get("FC_SOAK_SEED", str(time.time_ns() % 1000000)))
        print("soak: %d trials, seed %d" % (TRIALS, seed), flush=True)
        rnd = random.Random(seed)
        top = scratch_dir("flamecol-soak-")
        config = CONFIG % os.path.join(top, "data")
        acked, sent = set(), set()
        next_id = [1]
        lock = threading.Lock()
        refused = []
        for trial in range(TRIALS + 1):
            c = Collector(config)
            try:
                c.wait_ready(timeout=60)
                self.check(c, acked, sent, trial)
                if trial == TRIALS:
                    self.assertEqual(c.stop(), 0, c.log())
                    break
                stop = threading.Event()

                def client():
                    while not stop.is_set():
                        with lock:
                            i = next_id[0]
                            next_id[0] += 1
                            sent.add(i)
                        status = push(c, i)
                        if status == 200:
                            with lock:
                                acked.add(i)
                        elif status is None:
                            return
                        else:
                            with lock:
                                refused.append((i, status))
                            return

                threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
                for t in threads:
                    t.start()
                # Most kills come early; every fourth one after the store's 2 s rebuild of
                # dirty windows has had a chance to run, or while it runs.
                time.sleep(rnd.uniform(1.5, 3.0) if trial % 4 == 3 else rnd.uniform(0.0, 0.4))
                os.kill(c.proc.pid, signal.SIGKILL)
                c.proc.wait()
                stop.set()
                for t in threads:
                    t.join(60)
                    self.assertFalse(t.is_alive(), "a client did not finish")
                self.assertEqual(refused, [], "pushes refused before the kill")
            finally:
                c.__exit__(None, None, None)
        print("soak: %d pushes sent, %d acknowledged over %d kills" % (len(sent), len(acked), TRIALS),
              flush=True)
        self.assertGreater(len(acked), TRIALS, "too few pushes to mean anything")


if __name__ == "__main__":
    unittest.main()
