"""The store through the real binary: pprof pushes, then /pyroscope/render
compared with the corpus's `pprof -top`; format=pprof; bad queries; tenants;
and durability: every acknowledged push survives SIGKILL, exactly once."""
import gzip
import json
import os
import random
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from harness import BIN, Collector, corpus_files, http, multipart, parse_top, read_corpus

STORE_PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  store:
    path: {dir}/data
    sync: {sync}
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


def flamebearer_flat(doc):
    """Self per function name from a flamebearer: what pprof -top calls flat."""
    fb = doc["flamebearer"]
    flat = {}
    for level in fb["levels"]:
        for i in range(0, len(level), 4):
            name = fb["names"][level[i + 3]]
            flat[name] = flat.get(name, 0) + level[i + 2]
    return fb["numTicks"], flat


def render(c, query, tenant=None, **params):
    q = {"query": query, "from": "0", "until": "now", "maxNodes": "1048576"}
    q.update(params)
    headers = {"X-Scope-OrgID": tenant} if tenant else {}
    return http("GET", c.base + "/pyroscope/render?" + urllib.parse.urlencode(q), None, headers)


class StoreApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(STORE_PIPELINE.replace("{sync}", "batch"))
        cls.c.wait_ready()
        cls.files = corpus_files()
        for i, name in enumerate(cls.files):
            ctype, body = multipart([("profile", "profile.pprof", None, read_corpus(name))])
            status, _, text = http("POST", cls.c.base + "/ingest?name=svc-%d&from=1700000000" % i,
                                   body, {"Content-Type": ctype})
            assert status == 200, text

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def types(self):
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=__profile_type__")
        self.assertEqual(status, 200)
        return json.loads(body)

    def test_render_matches_pprof_top(self):
        types = self.types()
        checked = 0
        for i, name in enumerate(self.files):
            for section in parse_top(name).values():
                found = False
                for t in types:
                    if t.split(":")[1] != section["type"]:
                        continue
                    status, headers, body = render(self.c, '%s{service_name="svc-%d"}' % (t, i))
                    self.assertEqual(status, 200, body)
                    total, flat = flamebearer_flat(json.loads(body))
                    if total == 0:
                        continue
                    found = True
                    scale = total // section["total"] if section["total"] else 1
                    self.assertEqual(total, section["total"] * scale, "%s %s" % (name, t))
                    for f, fn in section["rows"][:10]:
                        self.assertEqual(flat.get(fn, 0), f * scale, "%s %s %s" % (name, t, fn))
                    self.assertIn("X-Flamecol-Nodes-Merged", headers)
                    checked += 1
                self.assertTrue(found, "%s: no stored type for %s" % (name, section["type"]))
        self.assertGreaterEqual(checked, 30)

    def test_pprof_and_folded_formats(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        i = self.files.index("go-1s-cpu")
        status, _, body = render(self.c, '%s{service_name="svc-%d"}' % (t, i), format="pprof")
        self.assertEqual(status, 200)
        path = os.path.join(self.c.dir, "merged.pb.gz")
        with open(path, "wb") as f:
            f.write(body)
        folded = subprocess.run([BIN, "convert", "--to", "folded", path], check=True,
                                capture_output=True, text=True).stdout
        self.assertEqual(sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()), 1080000000)
        status, _, body = render(self.c, '%s{service_name="svc-%d"}' % (t, i), format="folded")
        self.assertEqual(sum(int(l.rsplit(" ", 1)[1]) for l in body.decode().splitlines()), 1080000000)

    def test_selectors_and_sample_labels(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        i = self.files.index("go-1s-cpu")
        whole = flamebearer_flat(json.loads(render(self.c, '%s{service_name="svc-%d"}' % (t, i))[2]))[0]
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=worker")
        workers = json.loads(body)
        self.assertTrue(workers)
        parts = 0
        for w in workers:
            q = '%s{service_name="svc-%d",worker="%s"}' % (t, i, w)
            parts += flamebearer_flat(json.loads(render(self.c, q)[2]))[0]
        rest = flamebearer_flat(json.loads(render(self.c, '%s{service_name="svc-%d",worker=""}' % (t, i))[2]))[0]
        # A pprof label selects exactly its samples: the parts add up to the whole.
        self.assertEqual(parts + rest, whole)
        regex = flamebearer_flat(json.loads(render(self.c, '%s{service_name=~"svc-%d"}' % (t, i))[2]))[0]
        self.assertEqual(regex, whole)

    def test_bad_queries(self):
        for query, params, text in (
                ("", {}, '"query" is required'),
                ('{service_name="x"}', {}, "profile-type selection"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{a=", {}, "selector: col"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", {"from": "now", "until": "now-1h"}, "from is after until"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", {"maxNodes": "-4"}, "maxNodes"),
                ("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", {"format": "dot"}, "format")):
            status, _, body = render(self.c, query, **params)
            self.assertEqual(status, 400, (query, params))
            self.assertIn(text, json.loads(body)["message"])

    def test_tenants_never_mix(self):
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        status, _, text = http("POST", self.c.base + "/ingest?name=private.cpu&from=1700000000",
                               b"secret;work 7", {"X-Scope-OrgID": "team-b"})
        self.assertEqual(status, 200, text)
        mine = flamebearer_flat(json.loads(render(self.c, t + '{service_name="private"}', "team-b")[2]))
        self.assertEqual(mine[0], 7 * 10000000)
        other = flamebearer_flat(json.loads(render(self.c, t + '{service_name="private"}')[2]))
        self.assertEqual(other[0], 0)
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=service_name",
                               None, {"X-Scope-OrgID": "team-b"})
        self.assertEqual(json.loads(body), ["private"])


class CrashTest(unittest.TestCase):
    def test_acknowledged_pushes_survive_sigkill(self):
        base = tempfile.mkdtemp(prefix="flamecol-crash-")
        acked = []
        sent = 0
        # Folded .cpu pushes at the default 100 Hz: each "1" is stored as 10 ms of CPU.
        t = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        tick = 10000000
        for round_ in range(3):
            text = STORE_PIPELINE.replace("{sync}", "batch").replace("{dir}", base)
            c = Collector(text)
            c.wait_ready()
            deadline = time.monotonic() + random.uniform(0.3, 0.8)
            while time.monotonic() < deadline:
                name = "crash-%d" % sent
                sent += 1
                try:
                    status, _, _ = http("POST", c.base + "/ingest?name=%s.cpu&from=1700000000" % name,
                                        b"main;work 1", timeout=5)
                except OSError:
                    break
                if status == 200:
                    acked.append(name)
            os.kill(c.proc.pid, signal.SIGKILL)
            c.proc.wait()
            c.stderr.close()
        c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{dir}", base))
        with c:
            status, _, body = http("GET", c.base + "/pyroscope/label-values?label=service_name")
            stored = set(json.loads(body))
            self.assertGreater(len(acked), 20)
            for name in acked:
                self.assertIn(name, stored)
            # Exactly once: every acknowledged push counted one sample, never two.
            total = flamebearer_flat(json.loads(render(c, t + '{service_name=~"crash-.*"}')[2]))[0]
            self.assertGreaterEqual(total, len(acked) * tick)
            self.assertLessEqual(total, sent * tick)
            for name in random.sample(acked, 10):
                one = flamebearer_flat(json.loads(render(c, t + '{service_name="%s"}' % name)[2]))[0]
                self.assertEqual(one, tick, name)
            self.assertEqual(c.stop(), 0, c.log())


if __name__ == "__main__":
    unittest.main()
