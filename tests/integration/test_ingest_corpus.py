"""Every corpus profile pushed to the real binary the way the Pyroscope SDKs
push it; the debug exporter must show, per sample type, the total and the
top functions' flat values of the corpus's reference `pprof -top` output."""
import unittest
import urllib.parse

from harness import DEBUG_PIPELINE, Collector, corpus_files, debug_profiles, http, multipart, \
    parse_top, read_corpus


class IngestCorpusTest(unittest.TestCase):
    def check_profile(self, name, profile):
        top = parse_top(name)
        by_type = {t.split(":")[0]: v for t, v in profile["types"].items()}
        for index, section in top.items():
            got = by_type.get(section["type"])
            self.assertIsNotNone(got, "%s: no sample type %s in %s" % (name, section["type"], profile))
            self.assertEqual(got["total"], section["total"], "%s %s total" % (name, section["type"]))
            for flat, fn in section["rows"][:10]:
                self.assertEqual(got["flat"].get(fn, 0), flat,
                                 "%s %s: flat of %s" % (name, section["type"], fn))

    def test_multipart_like_the_go_sdk(self):
        files = corpus_files()
        self.assertGreaterEqual(len(files), 17)
        c = Collector(DEBUG_PIPELINE)
        with c:
            for i, name in enumerate(files):
                ctype, body = multipart([("profile", "profile.pprof", "application/octet-stream",
                                          read_corpus(name))])
                q = urllib.parse.urlencode({
                    "name": "corpus-%d{file=%s,env=test}" % (i, name.replace("-", "_").replace(".", "_")),
                    "from": "1700000000000000000", "until": "1700000010000000000",
                    "spyName": "gospy", "sampleRate": "100"})
                status, _, text = http("POST", c.base + "/ingest?" + q, body, {"Content-Type": ctype})
                self.assertEqual(status, 200, "%s: %s" % (name, text))
            self.assertEqual(c.stop(), 0, c.log())
        profiles = debug_profiles(c.debug_output())
        self.assertEqual(len(profiles), len(files))
        for i, name in enumerate(files):
            p = profiles[i]
            self.assertIn('service_name="corpus-%d"' % i, p["summary"])
            self.assertIn('env="test"', p["summary"])
            self.assertIn('pyroscope_spy="gospy"', p["summary"])
            self.assertIn('__name__="', p["summary"])
            self.check_profile(name, p)

    def test_raw_body_like_the_nodejs_sdk(self):
        files = corpus_files()
        c = Collector(DEBUG_PIPELINE)
        with c:
            for name in files:
                # Node.js SDK 0.6: raw gzipped pprof, seconds in from/until, no format.
                status, _, text = http(
                    "POST", c.base + "/ingest?name=nodeapp&from=1700000000&until=1700000010&spyName=nodespy",
                    read_corpus(name), {"Content-Type": "application/octet-stream"})
                self.assertEqual(status, 200, "%s: %s" % (name, text))
            self.assertEqual(c.stop(), 0, c.log())
        profiles = debug_profiles(c.debug_output())
        self.assertEqual(len(profiles), len(files))
        for i, name in enumerate(files):
            self.check_profile(name, profiles[i])

    def test_multipart_like_the_nodejs_sdk(self):
        # pyroscope-nodejs >= 0.4: FormData with one part `profile` (filename `profile`),
        # seconds in from/until, tags in insertion order, sampleRate from the interval.
        c = Collector(DEBUG_PIPELINE)
        with c:
            for name in ("pyroscope-nodejs-0.4.13-wall", "pyroscope-nodejs-0.4.13-inuse_space"):
                ctype, body = multipart([("profile", "profile", "application/octet-stream",
                                          read_corpus(name))], boundary="----formdata-undici-0123")
                q = ("from=1700000000&name=nodeapp%7Botel.scope.name%3Dcom.grafana.pyroscope%2Fnodejs"
                     "%2Cprocess.runtime.name%3Dnodejs%7D&spyName=nodespy&until=1700000060&sampleRate=100")
                status, _, text = http("POST", c.base + "/ingest?" + q, body, {"Content-Type": ctype})
                self.assertEqual(status, 200, text)
            self.assertEqual(c.stop(), 0)
        profiles = debug_profiles(c.debug_output())
        self.assertIn('otel.scope.name="com.grafana.pyroscope/nodejs"', profiles[0]["summary"])
        self.assertIn('__name__="wall"', profiles[0]["summary"])
        self.assertIn('__name__="memory"', profiles[1]["summary"])
        self.check_profile("pyroscope-nodejs-0.4.13-wall", profiles[0])
        self.check_profile("pyroscope-nodejs-0.4.13-inuse_space", profiles[1])

    def test_format_pprof_parameter_takes_raw_bytes(self):
        c = Collector(DEBUG_PIPELINE)
        with c:
            status, _, text = http("POST", c.base + "/ingest?name=app&format=pprof",
                                   read_corpus("go-1s-cpu"), {"Content-Type": "text/plain"})
            self.assertEqual(status, 200, text)
            self.assertEqual(c.stop(), 0)
        self.check_profile("go-1s-cpu", debug_profiles(c.debug_output())[0])


if __name__ == "__main__":
    unittest.main()
