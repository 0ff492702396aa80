"""Durability as a power loss would test it, through the real binary.

A SIGKILL keeps the page cache, so a crash test alone cannot tell a store
that fsyncs from one that never does. Here an LD_PRELOAD tracer
(tests/faults/sync_trace_shim.c) records, in order, every write to the
store's data.mdb and write-ahead log, every sync of them, and every HTTP response the process
sends, with each push's unique function name (FCDURnnnnnnn) found in the
bytes written and in the request read. Several clients push concurrently
and the process is killed with SIGKILL while pushes are in flight. Then:

- every response 200 must come after (1) a write of data.mdb that carried
  its push, (2) a sync of data.mdb that began after that write had returned,
  and (3) a durable write of LMDB's meta page after that sync (a write on
  the O_DSYNC descriptor LMDB keeps for it, or one followed by another sync):
  what LMDB needs for a commit to survive the power going out; and (4) a
  write of the store's log (its trees) after its request was read, followed
  by a sync of the log;
- with `sync: always` no commit carries two requests;
- with `sync: none` the same check must fail (the check is not vacuous);
- restarted, the store holds every acknowledged push exactly once (values
  computed here from what was pushed), and no push more than once.

And `service.shutdown_timeout`: with a slow disk (the tracer delays each
fdatasync) and a queue of pushes, SIGTERM with a 1 s timeout commits what it
can, refuses the rest (retryable 503, never 200 for data not committed), logs
how many it refused, and exits 0; restarted, every 200 is there, exactly once.

Every assertion is on the order of events or on stored values, never on time;
waits poll with generous deadlines.
"""
import json
import os
import re
import signal
import threading
import time
import unittest
import urllib.parse

from harness import scratch_dir, BIN, STORE_PIPELINE, Collector, http

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
TICK = 10000000  # a folded "1" at the default 100 Hz is 10 ms of CPU
T0 = 1700000000  # every push's time: one 10 s window
CLIENTS = 8
DEADLINE = 120  # seconds any wait here may take before the test gives up

SHUTDOWN = STORE_PIPELINE + """
  shutdown_timeout: {timeout}
"""


def shim_path():
    return os.path.join(os.path.dirname(os.path.abspath(BIN)), "tests", "faults",
                        "libfc_sync_trace_shim.so")


def marker(i):
    return "FCDUR%07d" % i


def samples(i):
    """Push i's one stack carries 1..7 samples, so a push stored twice is visible."""
    return 1 + i % 7


def push_body(i):
    return ("dur_main;dur_work;%s %d\n" % (marker(i), samples(i))).encode()


def push(c, i):
    """Push i: (status or None when the connection failed)."""
    url = c.base + "/ingest?name=dur.cpu&from=%d&until=%d" % (T0, T0 + 1)
    try:
        status, _, _ = http("POST", url, push_body(i), {"Content-Type": "text/plain"}, timeout=60)
        return status
    except OSError:
        return None


class Pushers:
    """CLIENTS threads pushing unique profiles back to back until stopped or refused."""

    def __init__(self, c):
        self.c = c
        self.lock = threading.Lock()
        self.next = 1
        self.results = {}  # push id -> status (None: no answer)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop.is_set():
            with self.lock:
                i = self.next
                self.next += 1
            status = push(self.c, i)
            with self.lock:
                self.results[i] = status
            if status is None:
                return

    def acked(self):
        with self.lock:
            return sorted(i for i, s in self.results.items() if s == 200)

    def sent(self):
        with self.lock:
            return self.next - 1

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(DEADLINE)
            assert not t.is_alive(), "a client did not finish"


def read_trace(path):
    """The tracer's events, in sequence order: dicts with b, e, kind and fields."""
    events = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue  # a line cut by the kill
            ev = {"b": int(parts[0]), "e": int(parts[1]), "kind": parts[2]}
            try:
                if ev["kind"] == "W":
                    ev.update(file=parts[3], fd=int(parts[4]), dsync=parts[5] == "1",
                              bytes=int(parts[6]),
                              ids=[] if parts[7] == "-" else parts[7].split(","),
                              zeros=parts[8] == "1")
                    assert "overflow" not in ev["ids"], line
                    ev["ids"] = [int(x) for x in ev["ids"]]
                elif ev["kind"] == "S":
                    ev.update(file=parts[3], call=parts[5])
                elif ev["kind"] == "M":
                    ev.update(file="data")  # LMDB msyncs only data.mdb's map
                elif ev["kind"] == "P":
                    ev.update(file="held")  # a write waiting on FC_SYNC_HOLD
                elif ev["kind"] == "R":
                    ev.update(fd=int(parts[3]), id=int(parts[4]))
                elif ev["kind"] == "H":
                    ev.update(fd=int(parts[3]), status=int(parts[4]),
                              id=None if parts[5] == "-" else int(parts[5]))
                else:
                    continue
            except (IndexError, ValueError):
                continue  # a line cut by the kill
            events.append(ev)
    events.sort(key=lambda ev: ev["b"])
    return events


def durability_violations(events):
    """For each response 200 carrying a push id: what LMDB needs before the power
    may go out had happened before its first byte was sent. Returns messages."""
    written = {}  # push id -> the data.mdb write that first carried it
    for ev in events:
        if ev["kind"] == "W" and ev["file"] == "data":
            for i in ev["ids"]:
                written.setdefault(i, ev)
    syncs = [ev for ev in events if ev["kind"] in ("S", "M") and ev["file"] == "data"]
    data_writes = [ev for ev in events if ev["kind"] == "W" and ev["file"] == "data"]
    # Not the zeros the log grows its file by (store_open.c): a record's own write.
    wal_writes = [ev for ev in events if ev["kind"] == "W" and ev["file"] == "wal" and
                  not ev["zeros"]]
    wal_syncs = [ev for ev in events if ev["kind"] == "S" and ev["file"] == "wal"]
    reads = {}
    for ev in events:
        if ev["kind"] == "R":
            reads.setdefault(ev["id"], []).append(ev)
    problems = []
    for h in events:
        if h["kind"] != "H" or h["status"] != 200 or h["id"] is None:
            continue
        # Its trees are in the write-ahead log (their ids, not its name, so no marker there):
        # a log write after its request was read, and a sync of the log after that write.
        read = max((r["e"] for r in reads.get(h["id"], []) if r["e"] < h["b"]), default=None)
        logged = next((w for w in wal_writes if read is not None and w["b"] > read and
                       w["e"] < h["b"] and any(s["b"] > w["e"] and s["e"] < h["b"]
                                               for s in wal_syncs)), None)
        if logged is None:
            problems.append("push %d acknowledged with no sync of the log after a log write "
                            "that followed its request" % h["id"])
        w = written.get(h["id"])
        if w is None or w["e"] >= h["b"]:
            problems.append("push %d acknowledged before its data was written" % h["id"])
            continue
        sync = next((s for s in syncs if s["b"] > w["e"] and s["e"] < h["b"]), None)
        if sync is None:
            problems.append("push %d acknowledged with no sync of data.mdb after its write"
                            % h["id"])
            continue
        meta = False
        for m in data_writes:
            if m["b"] > sync["e"] and m["e"] < h["b"]:
                if m["dsync"] or any(s["b"] > m["e"] and s["e"] < h["b"] for s in syncs):
                    meta = True
                    break
        if not meta:
            problems.append("push %d acknowledged before a durable meta page write after its "
                            "sync" % h["id"])
    return problems


def commits(events):
    """The push ids first written between one sync of data.mdb and the next."""
    groups, current = [], []
    for ev in events:
        if ev.get("file") != "data":
            continue
        if ev["kind"] == "W":
            current += ev["ids"]
        elif ev["kind"] in ("S", "M"):
            if current:
                groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def stored(c):
    """{push id: stored CPU ns} read back through /pyroscope/render?format=folded."""
    q = {"query": CPU + '{service_name="dur"}', "from": str(T0 - 10), "until": str(T0 + 20),
         "format": "folded", "maxNodes": "1048576"}
    status, _, body = http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q))
    assert status == 200, body
    out = {}
    for line in body.decode().splitlines():
        stack, _, value = line.rpartition(" ")
        m = re.fullmatch(r"dur_main;dur_work;FCDUR(\d{7})", stack)
        assert m is not None, "a stack nobody pushed: %r" % line
        i = int(m.group(1))
        assert i not in out, "push %d listed twice" % i
        out[i] = int(value)
    return out


class DurabilityTest(unittest.TestCase):
    def config(self, sync, top, timeout="10s"):
        return (SHUTDOWN.replace("{timeout}", timeout).replace("{sync}", sync)
                .replace("{retention}", "0\n    fine_retention: 0")
                .replace("{dir}/data", os.path.join(top, "data")))

    def start(self, sync, top, delay_ms, timeout="10s"):
        shim = shim_path()
        self.assertTrue(os.path.exists(shim), "build the tracer: %s" % shim)
        trace = os.path.join(top, "trace-%d.txt" % time.monotonic_ns())
        env = {"LD_PRELOAD": shim, "FC_SYNC_TRACE": trace, "FC_SYNC_DELAY_MS": str(delay_ms),
               "FC_SYNC_HOLD": os.path.join(top, "hold"),
               # ASan wants to come first; the shim is not instrumented.
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
        c = Collector(self.config(sync, top, timeout), env=env)
        c.wait_ready()
        return c, trace

    def assert_stored(self, top, sync, pushers, acked):
        """Restarted (no tracer): every acknowledged push exactly once, the rest at most once."""
        c = Collector(self.config(sync, top))
        with c:
            got = stored(c)
            for i in acked:
                self.assertIn(i, got, "acknowledged push %d lost" % i)
            for i, v in got.items():
                self.assertIn(i, pushers.results, "push %d was never sent" % i)
                self.assertEqual(v, samples(i) * TICK, "push %d stored %d times its value"
                                 % (i, v // (samples(i) * TICK)) if v else i)
            self.assertEqual(c.stop(), 0, c.log())
        return got

    def kill_while_pushing(self, sync):
        """Pushes from CLIENTS clients; once 60 were acknowledged, the next commit is held
        (the tracer makes its first write to data.mdb wait); once the server has read a
        push that no write has carried, so that it cannot be answered, SIGKILL. Returns
        (events, pushers, acked, directory)."""
        top = scratch_dir("flamecol-durability-")
        c, trace = self.start(sync, top, delay_ms=5)
        pushers = Pushers(c)
        deadline = time.monotonic() + DEADLINE
        while len(pushers.acked()) < 60 and time.monotonic() < deadline:
            self.assertIsNone(c.proc.poll(), c.log())
            time.sleep(0.01)
        open(os.path.join(top, "hold"), "w").close()
        while time.monotonic() < deadline:
            self.assertIsNone(c.proc.poll(), c.log())
            events = read_trace(trace)
            written = {i for ev in events if ev["kind"] == "W" for i in ev["ids"]}
            if (any(ev["kind"] == "P" for ev in events) and
                    any(ev["kind"] == "R" and ev["id"] not in written for ev in events)):
                break
            time.sleep(0.01)
        else:
            self.fail("the held commit never left a push read and unwritten")
        os.kill(c.proc.pid, signal.SIGKILL)
        c.proc.wait()
        c.stderr.close()
        pushers.join()
        acked = pushers.acked()
        self.assertGreaterEqual(len(acked), 60, c.log())
        events = read_trace(trace)
        # Every 200 a client saw is one the tracer saw leave, tied to its push.
        traced = {ev["id"] for ev in events if ev["kind"] == "H" and ev["status"] == 200}
        self.assertFalse(set(acked) - traced, "200s the tracer did not tie to a push")
        # Pushes were in flight at the kill: read by the server, never answered.
        answered = {ev["id"] for ev in events if ev["kind"] == "H"}
        in_flight = {ev["id"] for ev in events if ev["kind"] == "R"} - answered
        self.assertTrue(in_flight, "no push was in flight at the kill")
        return events, pushers, acked, top

    def test_batch_acknowledges_only_synced_commits(self):
        events, pushers, acked, top = self.kill_while_pushing("batch")
        self.assertEqual(durability_violations(events), [])
        self.assert_stored(top, "batch", pushers, acked)

    def test_always_syncs_each_request_on_its_own(self):
        events, pushers, acked, top = self.kill_while_pushing("always")
        self.assertEqual(durability_violations(events), [])
        grouped = [g for g in commits(events) if len(g) > 1]
        self.assertEqual(grouped, [], "sync: always committed requests together")
        self.assert_stored(top, "always", pushers, acked)

    def test_none_fails_the_check(self):
        """The check is not vacuous: without fsync (survives a kill, not a power loss)
        the very same run is caught, though every acknowledged push is still there."""
        events, pushers, acked, top = self.kill_while_pushing("none")
        problems = durability_violations(events)
        self.assertTrue(problems)
        self.assertTrue(all("no sync of data.mdb" in p or "no sync of the log" in p
                            for p in problems), problems[:5])
        self.assertTrue(any("no sync of the log" in p for p in problems), problems[:5])
        self.assert_stored(top, "none", pushers, acked)

    def test_sigterm_honours_shutdown_timeout(self):
        """A slow disk (each fdatasync 300 ms) and sync: always, so the queue drains at a
        few requests a second; SIGTERM with shutdown_timeout 1s must not wait for it."""
        top = scratch_dir("flamecol-shutdown-")
        c, trace = self.start("always", top, delay_ms=300, timeout="1s")
        pushers = Pushers(c)
        # Wait until the queue is long: every client's push read by the server.
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            events = read_trace(trace)
            answered = {ev["id"] for ev in events if ev["kind"] == "H"}
            waiting = {ev["id"] for ev in events if ev["kind"] == "R"} - answered
            if len(waiting) >= CLIENTS and len(pushers.acked()) >= 1:
                break
            time.sleep(0.05)
        pushers.stop.set()  # no new pushes after the ones in flight
        c.proc.send_signal(signal.SIGTERM)
        # Draining the whole queue would take CLIENTS * 300 ms and more: far less than
        # this bound, which is only there so that a hang fails instead of blocking.
        rc = c.stop(timeout=DEADLINE)
        self.assertEqual(rc, 0, c.log())
        pushers.join()
        log = c.log()
        m = re.search(r"refused (\d+) requests at the shutdown deadline", log)
        self.assertIsNotNone(m, log)
        refused = int(m.group(1))
        self.assertGreater(refused, 0, log)
        statuses = list(pushers.results.values())
        # The store refuses once a commit would end past the deadline, while the HTTP
        # server still waits for requests in flight: the refusals reach their clients.
        self.assertIn(503, statuses)
        self.assertLessEqual(statuses.count(503), refused)
        self.assertTrue(all(s in (200, 503, None) for s in statuses), statuses)
        events = read_trace(trace)
        self.assertEqual(durability_violations(events), [])
        got = self.assert_stored(top, "always", pushers, pushers.acked())
        for i, s in pushers.results.items():
            if s == 503:
                self.assertNotIn(i, got, "push %d refused with 503 but stored" % i)


if __name__ == "__main__":
    unittest.main()
