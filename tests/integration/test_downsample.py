"""The downsample processor through the real binary (issue 15).

One pprof receiver feeds two pipelines: `folded` (downsample max_nodes) and
`raw` (no processor), each to its own debug exporter. Every corpus profile is
pushed once: the folded profile's totals equal the corpus's `pprof -top`
references exactly (every sample type), its call tree (from the debug output,
by function names) has at most max_nodes nodes, and no node of it other than
an `other` one is heavier than the same node of the raw profile. `validate`
refuses `storage` without `window`.

`window` (WindowTest): an hour of corpus profiles at 10 s intervals (5 series,
9 profile types; their time fields rewritten by this test) into a store
through `window: 60s`, and the same into a second collector's store without
the processor: after SIGTERM (which emits the open windows) the 1 h flame
graph of every profile type is the same in both, every call path's total and
self, its total is the corpus's `pprof -top` total x the pushes, 360 profiles
a series went in and 59 windows a series came out before SIGTERM (one window
a minute instead of six profiles), and the database file is
smaller by more than 10 % (the pages in use are about equal: not asserted).
With `storage`, a kill -9 after every push was acknowledged loses nothing: the
restarted collector replays them; kill -9 at random points through rounds of
pushes loses nothing either, and stores twice at most what was not done.

Forwarded requests (ForwardedRowsTest): every corpus profile folded, and merged
into windows, leaves through `otlphttp` to a fake peer with no unused and no
dangling dictionary row (strings, attributes, mappings, links, functions,
locations, stacks), read from the wire.

Refusals downstream (WindowRefusedDownstreamTest): flamecol A (window 2s ->
`otlphttp` without queue or retries of its own) forwards to flamecol B
(limits -> store). B down at first: A answers 200, retries, and B gets each
window once with the hand-computed sums. B refusing a series (400): that
window's samples are counted dropped, later windows (and good windows sent in
one batch with it) go through. With `storage`: windows still refused at
SIGTERM stay on disk and the next start delivers them once, also when the
request carried several series of which one had already been delivered.
"""
import ctypes
import ctypes.util
import gzip
import json
import os
import random
import re
import shutil
import signal
import threading
import time
import unittest
import urllib.parse

from fake_peers import HttpPeer
from harness import (scratch_dir, Collector, corpus_files, flamegraph_flat, flamegraph_paths, free_port, http,
                     otlp_unused_rows, parse_top, pb_fields, pb_ld, pb_varint, pb_vi, read_corpus,
                     validate_processor)

MAX_NODES = 40

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  downsample:
    max_nodes: %d
  downsample/half:
    sampling: {fraction: 0.5}
exporters:
  debug/folded:
    verbosity: detailed
    path: {dir}/folded.txt
  debug/raw:
    verbosity: detailed
    path: {dir}/raw.txt
  debug/sampled:
    verbosity: basic
    path: {dir}/sampled.txt
service:
  pipelines:
    profiles/folded:
      receivers: [pprof]
      processors: [downsample]
      exporters: [debug/folded]
    profiles/raw:
      receivers: [pprof]
      exporters: [debug/raw]
    profiles/sampled:
      receivers: [pprof]
      processors: [downsample/half]
      exporters: [debug/sampled]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
""" % MAX_NODES


def xxh3(data):
    """XXH3-64 (seed 0) from libxxhash itself: the reference, not flamecol's code."""
    lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(data, len(data))


def series_kept(labels, fraction):
    """The README's rule: XXH3_64(name NUL value NUL ..., sorted by name) / 2^64 < fraction."""
    data = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in sorted(labels.items()))
    return (xxh3(data) >> 11) * 2.0 ** -53 < fraction


def summaries(text):
    """The series labels of every profile a debug exporter wrote, as dicts."""
    out = []
    for line in text.splitlines():
        m = re.match(r'profile \d+ \{(.*?)\} samples=', line)
        if m:
            out.append(dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))))
    return out


def trees(text):
    """{type: {"total": n, "nodes": {root-first name path: value}}} of the last profile of a
    debug exporter's detailed output (one profile per batch here)."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("batch "):
            out, current = {}, None
        elif line.startswith("# profile "):
            t = line.split(" type=")[1].split()[0]
            current = out.setdefault(t, {"total": 0, "nodes": {}})
        elif line and current is not None and not line.startswith("profile "):
            stack, value = line.rsplit(" ", 1)
            v = int(value)
            current["total"] += v
            frames = stack.split(";")
            for d in range(1, len(frames) + 1):
                key = ";".join(frames[:d])
                current["nodes"][key] = current["nodes"].get(key, 0) + v
    return out


class DownsampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(CONFIG)
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def read(self, name):
        with open("%s/%s.txt" % (self.c.dir, name)) as f:
            return f.read()

    def test_corpus_totals_exact_and_tree_bounded(self):
        checked = 0
        for name in corpus_files():
            q = urllib.parse.urlencode({"name": "app.cpu{corpus=%s}" % name, "from": "1700000000"})
            code, _, body = http("POST", self.c.base + "/ingest?" + q, read_corpus(name),
                                 {"Content-Type": "application/octet-stream"})
            self.assertEqual(code, 200, body)
            folded, raw = trees(self.read("folded")), trees(self.read("raw"))
            top = {s["type"]: s["total"] for s in parse_top(name).values()}
            self.assertEqual(sorted(folded), sorted(raw), name)
            for t, tree in folded.items():
                kind = t.split(":")[0]
                self.assertIn(kind, top, (name, t))
                self.assertEqual(tree["total"], top[kind], (name, t))  # exact
                self.assertEqual(tree["total"], raw[t]["total"], (name, t))
                checked += 1
                self.assertLessEqual(len(tree["nodes"]), MAX_NODES, (name, t))
                for path, v in tree["nodes"].items():
                    if path.split(";")[-1] != "other":
                        self.assertIn(path, raw[t]["nodes"], (name, t))
                        self.assertLessEqual(abs(v), abs(raw[t]["nodes"][path]), (name, t, path))
        self.assertGreater(checked, 30)

    def test_sampling_keeps_whole_series_by_hash(self):
        raw_before = len(summaries(self.read("raw")))
        sampled_before = len(summaries(self.read("sampled")))
        for i in range(60):
            name = "svc%d.cpu{pod=p%d}" % (i % 20, i)
            q = urllib.parse.urlencode({"name": name, "from": "1700000000"})
            for _ in range(2):  # the same series twice: kept both times or neither
                code, _, body = http("POST", self.c.base + "/ingest?" + q, b"main;work 3\nmain 1\n")
                self.assertEqual(code, 200, body)
        raw = summaries(self.read("raw"))[raw_before:]
        sampled = summaries(self.read("sampled"))[sampled_before:]
        self.assertEqual(len(raw), 120)
        want = [l for l in raw if series_kept(l, 0.5)]
        self.assertEqual(sampled, want)
        self.assertTrue(20 <= len(want) <= 100, len(want))
        dropped = self.c.metric("flamecol_processor_downsample_sampled_out_profiles_total",
                                'processor="downsample/half",pipeline="profiles/sampled"')
        self.assertGreaterEqual(dropped, 120 - len(want))

    def test_storage_needs_window_by_validate(self):
        rc, out, _ = validate_processor("downsample", "    storage: /var/lib/flamecol/ds")
        self.assertEqual(rc, 1, out)
        self.assertIn("storage: is the durable buffer of `window`", out)
        rc, out, _ = validate_processor("downsample", "    window: 60s\n    max_buffer_bytes: 0")
        self.assertEqual(rc, 1, out)
        rc, out, _ = validate_processor("downsample", "    window: 60s\n    storage: /tmp/ds")
        self.assertEqual(rc, 0, out)
        rc, out, _ = validate_processor("downsample",
                                        "    max_nodes: 1000\n    sampling: {fraction: 0.5}")
        self.assertEqual(rc, 0, out)


# ---- window ---------------------------------------------------------------------------------

# {store} {storage} {processors} are filled by the tests (absolute paths: a restarted
# collector finds the same store and storage).
WINDOW_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  downsample:
    window: 60s
{storage}
exporters:
  store:
    path: {store}
    retention: 0
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof]
      processors: {processors}
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
HOUR = 3600 * 10**9
# A fixed hour (the store keeps it: retention 0), the same windows on every run.
T0 = 1700000000 // 3600 * 3600 * 10**9


def with_time(name, t_ns):
    """The corpus profile with its time_nanos (Profile field 9) replaced, read and written by
    this test from profile.proto's field numbers."""
    data = gzip.decompress(read_corpus(name))
    out, i = bytearray(), 0
    while i < len(data):
        start = i
        key, i = pb_varint(data, i)
        wire = key & 7
        if wire == 0:
            _, i = pb_varint(data, i)
        elif wire == 2:
            n, i = pb_varint(data, i)
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        if key >> 3 != 9:
            out += data[start:i]
    return gzip.compress(bytes(out + pb_vi(9, t_ns)))


def push(c, name, service, t_ns):
    q = urllib.parse.urlencode({"name": service})
    code, _, body = http("POST", c.base + "/ingest?" + q, with_time(name, t_ns),
                         {"Content-Type": "application/octet-stream"})
    assert code == 200, body


def render_hour(c, ptype, service):
    """The flamebearer of the store's flame graph of [T0, T0 + 1 h)."""
    q = urllib.parse.urlencode({"query": '%s{service_name="%s"}' % (ptype, service),
                                "from": str(T0 // 10**9), "until": str((T0 + HOUR) // 10**9 - 1),
                                "maxNodes": "1048576"})
    code, _, body = http("GET", c.base + "/pyroscope/render?" + q)
    assert code == 200, body
    return json.loads(body)["flamebearer"]


def flame(c, ptype, service):
    """(numTicks, {function: self}) of the store's flame graph of [T0, T0 + 1 h)."""
    fb = render_hour(c, ptype, service)
    return fb["numTicks"], flamegraph_flat(fb["names"], fb["levels"])[1]


def flame_paths(c, ptype, service):
    """{root-first path: [total, self]} of the store's flame graph of [T0, T0 + 1 h)."""
    fb = render_hour(c, ptype, service)
    return flamegraph_paths(fb["names"], fb["levels"])


def types(c):
    code, _, body = http("GET", c.base + "/pyroscope/label-values?label=__profile_type__")
    assert code == 200, body
    return sorted(json.loads(body))


def top_total(name, kind):
    for sec in parse_top(name).values():
        if sec["type"] == kind:
            return sec["total"]
    raise AssertionError((name, kind))


class WindowTest(unittest.TestCase):
    def setUp(self):
        self.tmp = scratch_dir("flamecol-ds-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def collector(self, store, processors="[downsample]", storage=None):
        text = (WINDOW_CONFIG.replace("{store}", os.path.join(self.tmp, store))
                .replace("{processors}", processors)
                .replace("{storage}", "    storage: %s" % os.path.join(self.tmp, storage)
                         if storage else ""))
        c = Collector(text)
        self.addCleanup(c.__exit__)  # killed if a failed check left it running
        c.wait_ready()
        return c

    def test_flame_graph_equal_and_fewer_profiles_stored(self):
        # An hour of 10 s profiles of 5 series (Go cpu and heap, Node wall, Pyroscope's Go
        # cpu and Node inuse_space: 9 profile types) pushed to both collectors alike.
        files = ["go-1s-cpu", "go-1s-heap", "node-1s-wall", "pyroscope-go-cpu",
                 "pyroscope-nodejs-0.4.13-inuse_space"]
        n = 360  # 60 windows of 6 profiles per series
        ds = self.collector("ds")
        raw = self.collector("raw", processors="[]")

        def push_all(c):
            for k in range(n):
                for f in files:
                    push(c, f, "svc-" + f, T0 + k * 10 * 10**9)

        pushers = [threading.Thread(target=push_all, args=(c,)) for c in (ds, raw)]
        for t in pushers:
            t.start()
        for t in pushers:
            t.join()
        labels = 'processor="downsample",pipeline="profiles"'
        in_profiles = ds.metric("flamecol_processor_downsample_window_profiles_in_total", labels)
        self.assertEqual(in_profiles, n * len(files))
        # A series' window is sent once a profile of its next window arrives: 59 of 60 windows
        # per series by now (the last one waits for its deadline, 75 s away, or shutdown).
        out = "flamecol_processor_downsample_window_profiles_out_total"
        wait_for("59 windows a series sent", lambda: ds.metric(out, labels) >= 59 * len(files))
        self.assertEqual(ds.metric(out, labels), 59 * len(files))
        # What the window saves in the store: one write a minute per series instead of six
        # (each push is one write group: the pushers wait for every answer).
        commits = [c.metric("flamecol_store_commits_total", 'exporter="store"') for c in (ds, raw)]
        print("store write groups (window, without): %s" % commits)
        self.assertEqual(commits[1], n * len(files))
        self.assertLessEqual(commits[0], 59 * len(files))
        # SIGTERM: the open windows (the last of each series at least) are emitted.
        self.assertEqual(ds.stop(), 0, ds.log())
        self.assertEqual(raw.stop(), 0, raw.log())
        log = ds.log()
        ds = self.collector("ds", processors="[]")
        raw = self.collector("raw", processors="[]")
        try:
            self.assertEqual(types(ds), types(raw))
            self.assertIn(CPU, types(ds))
            compared = 0
            for t in types(raw):
                for f in files:
                    # Every path's total and self, root to leaf: the whole call tree.
                    got, want = flame_paths(ds, t, "svc-" + f), flame_paths(raw, t, "svc-" + f)
                    self.assertEqual(got, want, (t, f, log))
                    compared += bool(want)
            self.assertGreaterEqual(compared, 9)
            # The totals against an independent reference: pprof -top x pushes.
            self.assertEqual(flame(ds, CPU, "svc-go-1s-cpu")[0], n * top_total("go-1s-cpu", "cpu"))
            self.assertEqual(flame(ds, "memory:alloc_space:bytes:space:bytes", "svc-go-1s-heap")[0],
                             n * top_total("go-1s-heap", "alloc_space"))
            # The stored trees are the same (summed), so the pages in use are about the same
            # either way: printed, not asserted.
            m = {k: [c.metric("flamecol_store_%s_bytes" % k, 'exporter="store"') for c in (ds, raw)]
                 for k in ("used", "disk")}
            print("store bytes (window, without): %s" % m)
        finally:
            self.assertEqual(ds.stop(), 0, ds.log())
            self.assertEqual(raw.stop(), 0, raw.log())

    def test_full_buffer_refuses_retryably(self):
        text = (WINDOW_CONFIG.replace("{store}", os.path.join(self.tmp, "store"))
                .replace("{processors}", "[downsample]")
                .replace("{storage}", "    max_buffer_bytes: 1"))
        c = Collector(text)
        self.addCleanup(c.__exit__)
        with c:
            push(c, "go-1s-cpu", "svc", T0)  # the buffer was empty: taken
            q = urllib.parse.urlencode({"name": "svc"})
            code, _, body = http("POST", c.base + "/ingest?" + q, with_time("go-1s-cpu", T0),
                                 {"Content-Type": "application/octet-stream"})
            self.assertEqual(code, 429, body)
            self.assertIn(b"max_buffer_bytes", body)
            labels = 'processor="downsample",pipeline="profiles"'
            self.assertEqual(c.metric("flamecol_processor_downsample_window_refused_profiles_total",
                                      labels), 1)
            self.assertGreater(c.metric("flamecol_processor_downsample_window_buffer_bytes",
                                        labels), 0)
            self.assertEqual(c.stop(), 0, c.log())
        with self.collector("store", processors="[]") as c:
            self.assertEqual(flame(c, CPU, "svc")[0], top_total("go-1s-cpu", "cpu"))
            self.assertEqual(c.stop(), 0, c.log())

    def test_storage_replays_after_kill(self):
        files = ["go-1s-cpu", "go-1s-heap"]
        n = 6  # one window per series: nothing is emitted before the kill
        c = self.collector("store", storage="buf")
        for k in range(n):
            for f in files:
                push(c, f, "svc-" + f, T0 + k * 10 * 10**9)
        self.assertEqual(c.metric("flamecol_processor_downsample_window_profiles_out_total",
                                  'processor="downsample",pipeline="profiles"'), 0)
        c.stop(signal.SIGKILL)
        c = self.collector("store", storage="buf")
        replayed = c.metric("flamecol_processor_downsample_window_replayed_records_total",
                            'processor="downsample",pipeline="profiles"')
        self.assertEqual(replayed, n * len(files))
        self.assertEqual(c.stop(), 0, c.log())  # emits the replayed windows
        c = self.collector("store", storage="buf")
        try:
            # Done records are not replayed a second time.
            self.assertEqual(c.metric("flamecol_processor_downsample_window_replayed_records_total",
                                      'processor="downsample",pipeline="profiles"'), 0)
            self.assertEqual(flame(c, CPU, "svc-go-1s-cpu")[0], n * top_total("go-1s-cpu", "cpu"))
            self.assertEqual(flame(c, "memory:alloc_space:bytes:space:bytes", "svc-go-1s-heap")[0],
                             n * top_total("go-1s-heap", "alloc_space"))
            self.assertEqual(flame(c, "memory:inuse_space:bytes:space:bytes", "svc-go-1s-heap")[0],
                             n * top_total("go-1s-heap", "inuse_space"))
        finally:
            self.assertEqual(c.stop(), 0, c.log())

    def test_storage_kill9_at_random_points(self):
        """Rounds of pushes (3 series, 1 s apart, `window: 2s`), each ended by kill -9 right
        after the last push or up to 3 s later (windows being sent, a replay under way); then a
        clean start and stop. No acknowledged sample is lost; a duplicate is only what was not
        done at a kill (at-least-once: the store committed a window, the kill came before its
        records were marked done), bounded by the records not done at each kill."""
        seed = int(os.environ.get("FLAMECOL_SEED", time.time_ns() % 10**6))
        rnd = random.Random(seed)
        text = (WINDOW_CONFIG.replace("window: 60s", "window: 2s")
                .replace("{store}", os.path.join(self.tmp, "store")).replace("{processors}",
                                                                            "[downsample]")
                .replace("{storage}", "    storage: %s" % os.path.join(self.tmp, "buf")))
        labels = 'processor="downsample",pipeline="profiles"'
        replayed = "flamecol_processor_downsample_window_replayed_records_total"
        sent, k, at_risk = {}, 0, 0
        t0 = T0 // 10**9
        for _ in range(4):
            c = Collector(text)
            self.addCleanup(c.__exit__)
            c.wait_ready()
            at_risk += c.metric(replayed, labels)  # not done: may reach the store twice
            for _ in range(rnd.randint(10, 40)):
                svc = "svc%d" % (k % 3)
                push_folded(c, svc, t0 + k // 3, b"main;work 1\nmain;idle 2\n")
                sent[svc] = sent.get(svc, 0) + 3
                k += 1
                at_risk += 1
            time.sleep(rnd.random() * 3 if rnd.random() < 0.5 else 0)
            c.stop(signal.SIGKILL)
        c = Collector(text)
        self.addCleanup(c.__exit__)
        c.wait_ready()
        at_risk += c.metric(replayed, labels)
        self.assertEqual(c.stop(), 0, c.log())  # sends what was replayed
        c = self.collector("store", storage="buf")
        try:
            self.assertEqual(c.metric(replayed, labels), 0)  # all done now
            stored = {svc: flame(c, CPU, svc)[0] // 10**7 for svc in sent}
        finally:
            self.assertEqual(c.stop(), 0, c.log())
        extra = sum(stored.values()) - sum(sent.values())
        print("kill -9 rounds (seed %d): sent %s, stored %s" % (seed, sent, stored))
        for svc in sent:
            self.assertGreaterEqual(stored[svc], sent[svc], (seed, svc))  # nothing lost
            self.assertEqual(stored[svc] % 3, 0, (seed, svc))  # whole pushes only
        self.assertLessEqual(extra, 3 * at_risk, seed)


# ---- window: refusals downstream ------------------------------------------------------------
#
# A (pprof receiver -> downsample window -> otlphttp) forwards to B (otlp receiver -> limits ->
# store + a debug file listing every profile it received). A's exporter has no queue and no
# retries of its own (`sending_queue.enabled: false`, `retry_on_failure.enabled: false`): its
# answer is the one attempt's outcome (connection refused: retryable; B's 400: permanent), so
# the refusal reaches the processor, which keeps and retries, or drops.

FWD_A = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  downsample:
    window: 2s
%(storage)s
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:%(bport)d
    timeout: 2s
    retry_on_failure: {enabled: false}
    sending_queue: {enabled: false}
service:
  shutdown_timeout: 2s
  pipelines:
    profiles:
      receivers: [pprof]
      processors: [downsample]
      exporters: [otlphttp]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

# Series label values longer than 12 bytes are refused by B with 400 (permanent).
FWD_B = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%(bport)d
processors:
  limits:
    default:
      max_label_value_length: 12
exporters:
  store:
    path: %(store)s
    retention: 0
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
  debug:
    verbosity: basic
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [limits]
      exporters: [store, debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

DS = 'processor="downsample",pipeline="profiles"'
T0_S = T0 // 10**9
TICK_NS = 10**7  # sampleRate=100: one folded count is 10 ms of CPU


def push_folded(c, service, t_s, body, labels=""):
    """A folded push (`service`.cpu{labels}, sampleRate 100) with time t_s; answered 200."""
    q = urllib.parse.urlencode({"name": service + ".cpu" + labels, "from": str(t_s),
                                "format": "folded", "sampleRate": "100"})
    code, _, answer = http("POST", c.base + "/ingest?" + q, body)
    assert code == 200, (code, answer)


def wait_for(what, check, timeout=60):
    """Polls check() until it is true; a bound, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("not reached within %ss: %s" % (timeout, what))


def received(b):
    """service_name -> how many profiles B's debug file lists."""
    counts = {}
    if os.path.exists(b.debug_path):
        with open(b.debug_path) as f:
            for labels in summaries(f.read()):
                counts[labels.get("service_name")] = counts.get(labels.get("service_name"), 0) + 1
    return counts


def push_v1(c, series):
    """One push.v1 request of corpus profiles: series [(service_name, time ns, corpus file,
    __name__)], by default go-1s-goroutine (one sample type)."""
    body = b""
    for svc, t, *rest in series:
        f, name = rest or ("go-1s-goroutine", "goroutine")
        s = b"".join(pb_ld(1, pb_ld(1, k) + pb_ld(2, v))
                     for k, v in ((b"__name__", name.encode()), (b"service_name", svc.encode())))
        body += pb_ld(1, s + pb_ld(2, pb_ld(1, with_time(f, t))))
    code, _, answer = http("POST", c.base + "/push.v1.PusherService/Push", body,
                           {"Content-Type": "application/proto"})
    assert code == 200, (code, answer)


class WindowRefusedDownstreamTest(unittest.TestCase):
    def setUp(self):
        self.tmp = scratch_dir("flamecol-dsfwd-")
        self.addCleanup(shutil.rmtree, self.tmp, True)  # last: after the processes are gone
        self.bport = free_port()  # B's OTLP/HTTP port, closed until B starts

    def start(self, text):
        c = Collector(text)
        self.addCleanup(c.__exit__)  # killed if a failed check left it running
        c.wait_ready()
        return c

    def a(self, storage=False):
        line = "    storage: %s" % os.path.join(self.tmp, "buf") if storage else ""
        return self.start(FWD_A % {"bport": self.bport, "storage": line})

    def b(self):
        return self.start(FWD_B % {"bport": self.bport, "store": os.path.join(self.tmp, "store")})

    def m(self, c, name):
        return c.metric("flamecol_processor_" + name, DS)

    def test_retryable_refusal_kept_and_delivered_once(self):
        a = self.a()  # B is down: its port is closed
        # Two series, 6 pushes each at 1 s intervals: 3 windows of 2 s per series.
        for k in range(6):
            push_folded(a, "svc-a", T0_S + k, b"main;work %d\nmain;idle 2\n" % (k + 1))
            push_folded(a, "svc-b", T0_S + k, b"main;gc %d\n" % (10 * (k + 1)))
        wait_for("every window refused at least once",
                 lambda: self.m(a, "downsample_window_send_retries_total") >= 6)
        self.assertEqual(self.m(a, "downsample_window_profiles_out_total"), 0)
        self.assertEqual(self.m(a, "downsample_window_buffer_windows"), 6)
        b = self.b()
        wait_for("the windows delivered once B is up",
                 lambda: self.m(a, "downsample_window_buffer_windows") == 0)
        self.assertEqual(self.m(a, "downsample_window_profiles_out_total"), 6)
        self.assertEqual(self.m(a, "downsample_window_buffer_bytes"), 0)  # all given back
        self.assertGreater(self.m(a, "downsample_window_send_retries_total"), 0)
        self.assertEqual(self.m(a, "dropped_profile_samples_total"), 0)
        self.assertEqual(self.m(a, "downsample_window_lost_samples_total"), 0)
        # Exactly once: one profile per window, and the hand-computed sums.
        self.assertEqual(received(b), {"svc-a": 3, "svc-b": 3})
        self.assertEqual(flame(b, CPU, "svc-a"),
                         ((21 + 12) * TICK_NS, {"work": 21 * TICK_NS, "idle": 12 * TICK_NS}))
        self.assertEqual(flame(b, CPU, "svc-b"), (210 * TICK_NS, {"gc": 210 * TICK_NS}))
        self.assertEqual(a.stop(), 0, a.log())
        self.assertEqual(b.stop(), 0, b.log())

    def test_permanent_refusal_dropped_and_counted(self):
        b = self.b()
        a = self.a()
        # One window (T0, T0 + 1 s) of a series B refuses: 2 + 3 samples.
        bad = "{pod=this-value-is-too-long}"
        push_folded(a, "svc-bad", T0_S, b"main;a 1\nmain;b 1\n", bad)
        push_folded(a, "svc-bad", T0_S + 1, b"main;a 1\nmain;c 4\nx 1\n", bad)
        wait_for("the refused window counted dropped",
                 lambda: self.m(a, "dropped_profile_samples_total") == 5)
        self.assertEqual(self.m(a, "downsample_window_send_retries_total"), 0)
        self.assertEqual(self.m(a, "downsample_window_profiles_out_total"), 0)
        self.assertEqual(self.m(a, "downsample_window_buffer_windows"), 0)
        self.assertIn("refused for good", a.log())
        # A keeps serving, and later windows go through.
        push_folded(a, "svc-good", T0_S, b"main;work 3\n")
        push_folded(a, "svc-good", T0_S + 1, b"main;work 4\nmain;idle 1\n")
        wait_for("the later window delivered",
                 lambda: self.m(a, "downsample_window_profiles_out_total") == 1)
        self.assertEqual(self.m(a, "dropped_profile_samples_total"), 5)
        self.assertEqual(received(b), {"svc-good": 1})
        self.assertEqual(flame(b, CPU, "svc-good"),
                         (8 * TICK_NS, {"work": 7 * TICK_NS, "idle": 1 * TICK_NS}))
        # A bad window in one batch with good ones (SIGTERM sends every open window together):
        # the batch is refused, each window is sent again alone, only the bad one is dropped.
        push_folded(a, "svc-bad", T0_S + 10, b"main;a 1\nmain;d 1\nmain;e 1\n", bad)
        push_folded(a, "svc-good", T0_S + 10, b"main;work 5\n")
        push_folded(a, "svc-other", T0_S + 10, b"main;poll 2\nmain;io 1\n")
        self.assertEqual(a.stop(), 0, a.log())
        self.assertIn("a batch of windows was refused for good, sending each alone", a.log())
        self.assertIn("a window of 3 samples was refused for good", a.log())
        self.assertEqual(received(b), {"svc-good": 2, "svc-other": 1})
        self.assertEqual(flame(b, CPU, "svc-good"),
                         (13 * TICK_NS, {"work": 12 * TICK_NS, "idle": 1 * TICK_NS}))
        self.assertEqual(flame(b, CPU, "svc-other"),
                         (3 * TICK_NS, {"poll": 2 * TICK_NS, "io": 1 * TICK_NS}))
        self.assertEqual(b.stop(), 0, b.log())

    def test_storage_keeps_refused_windows_across_sigterm(self):
        a = self.a(storage=True)  # B is down
        # Two series, 4 pushes each: 2 windows per series, 8 stored requests.
        for k in range(4):
            push_folded(a, "svc-a", T0_S + k, b"main;work %d\n" % (k + 1))
            push_folded(a, "svc-b", T0_S + k, b"main;gc 5\n" + (b"main;io %d\n" % k if k else b""))
        wait_for("a window refused", lambda: self.m(a, "downsample_window_send_retries_total") >= 1)
        # SIGTERM while B is still down: the windows are retried until half of shutdown_timeout,
        # then left on disk (not counted lost).
        self.assertEqual(a.stop(), 0, a.log())
        self.assertNotIn("is lost", a.log())
        b = self.b()
        a = self.a(storage=True)
        self.assertEqual(self.m(a, "downsample_window_replayed_records_total"), 8)
        wait_for("the replayed windows delivered",
                 lambda: self.m(a, "downsample_window_profiles_out_total") == 4
                 and self.m(a, "downsample_window_buffer_windows") == 0)
        self.assertEqual(a.stop(), 0, a.log())
        # Done: a third start replays nothing.
        a = self.a(storage=True)
        self.assertEqual(self.m(a, "downsample_window_replayed_records_total"), 0)
        self.assertEqual(a.stop(), 0, a.log())
        self.assertEqual(received(b), {"svc-a": 2, "svc-b": 2})
        self.assertEqual(flame(b, CPU, "svc-a"), (10 * TICK_NS, {"work": 10 * TICK_NS}))
        self.assertEqual(flame(b, CPU, "svc-b"),
                         ((20 + 6) * TICK_NS, {"gc": 20 * TICK_NS, "io": 6 * TICK_NS}))
        self.assertEqual(b.stop(), 0, b.log())


    def test_storage_request_of_several_series_delivered_once(self):
        # One push.v1 request of several series; one series' window is accepted, the others'
        # are still refused at SIGTERM: the next start must deliver only those.
        b = self.b()
        a = self.a(storage=True)
        # svc-z: a CPU profile of two sample types, split per type (a series and record each).
        push_v1(a, (("svc-x", T0), ("svc-y", T0), ("svc-z", T0, "go-1s-cpu", "process_cpu")))
        push_v1(a, (("svc-x", T0 + 2 * 10**9),))  # svc-x moves on: its first window is sent
        wait_for("svc-x's first window delivered",
                 lambda: self.m(a, "downsample_window_profiles_out_total") == 1)
        self.assertEqual(b.stop(), 0, b.log())
        self.assertEqual(a.stop(), 0, a.log())  # svc-y's window and svc-x's second: refused
        b = self.b()
        a = self.a(storage=True)
        wait_for("the rest delivered", lambda: self.m(a, "downsample_window_buffer_windows") == 0)
        self.assertEqual(a.stop(), 0, a.log())
        one = top_total("go-1s-goroutine", "goroutine")
        [t] = [t for t in types(b) if t.startswith("goroutine:")]
        self.assertEqual(flame(b, t, "svc-x")[0], 2 * one)
        self.assertEqual(flame(b, t, "svc-y")[0], one)
        self.assertEqual(flame(b, CPU, "svc-z")[0], top_total("go-1s-cpu", "cpu"))
        self.assertEqual(b.stop(), 0, b.log())


# ---- forwarded requests: only the dictionary rows they use ----------------------------------

FORWARD_CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
processors:
  downsample/fold:
    max_nodes: 50
    min_fraction: 0.01
  downsample/window:
    window: 2s
exporters:
  otlphttp/fold:
    endpoint: %(peer)s
    compression: none
  otlphttp/window:
    endpoint: %(peer)s
    compression: none
service:
  pipelines:
    profiles/fold:
      receivers: [pprof]
      processors: [downsample/fold]
      exporters: [otlphttp/fold]
    profiles/window:
      receivers: [pprof]
      processors: [downsample/window]
      exporters: [otlphttp/window]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


class ForwardedRowsTest(unittest.TestCase):
    def test_forwarded_otlp_has_no_unused_or_dangling_row(self):
        """Every corpus profile, folded (one request each) and merged into windows, forwarded
        by otlphttp to a fake peer: each request's dictionary, read from the wire, has no row
        that nothing reaches and no index past its table."""
        names = corpus_files()
        with HttpPeer() as peer:
            c = Collector(FORWARD_CONFIG % {"peer": peer.url})
            self.addCleanup(c.__exit__)
            c.wait_ready()
            for i, name in enumerate(names):
                q = urllib.parse.urlencode({"name": "app%d.x{corpus=%s}" % (i % 3, name),
                                            "from": "1700000000"})
                code, _, body = http("POST", c.base + "/ingest?" + q, read_corpus(name),
                                     {"Content-Type": "application/octet-stream"})
                self.assertEqual(code, 200, body)
            self.assertEqual(c.stop(), 0, c.log())  # sends the open windows
            reqs = [r for r in peer.requests if r.path.endswith("/v1development/profiles")]
        self.assertGreater(len(reqs), len(names))  # one per folded profile, + the windows
        strings = 0
        for r in reqs:
            self.assertEqual(otlp_unused_rows(r.body), [], r.path)
            strings += len(pb_fields(pb_fields(r.body)[2][0]).get(5, []))
        self.assertGreater(strings, 1000)


if __name__ == "__main__":
    unittest.main()
