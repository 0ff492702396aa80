"""The downsample processor through the real binary (issue 15, stateless part).

One pprof receiver feeds two pipelines: `folded` (downsample max_nodes) and
`raw` (no processor), each to its own debug exporter. Every corpus profile is
pushed once: the folded profile's totals equal the corpus's `pprof -top`
references exactly (every sample type), its call tree (from the debug output,
by function names) has at most max_nodes nodes, and no node of it other than
an `other` one is heavier than the same node of the raw profile. `validate`
refuses `window` (not implemented yet) with a message that says so.
"""
import ctypes
import ctypes.util
import re
import unittest
import urllib.parse

from harness import Collector, corpus_files, http, parse_top, read_corpus, validate_processor

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

    def test_window_refused_by_validate(self):
        rc, out, _ = validate_processor("downsample", "    window: 60s")
        self.assertEqual(rc, 1, out)
        self.assertIn("window: not implemented yet", out)
        rc, out, _ = validate_processor("downsample", "    storage: /var/lib/flamecol/ds")
        self.assertEqual(rc, 1, out)
        self.assertIn("storage: not implemented yet", out)
        rc, out, _ = validate_processor("downsample",
                                        "    max_nodes: 1000\n    sampling: {fraction: 0.5}")
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
