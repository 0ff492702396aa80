"""/ingest and push.v1 request shapes, error answers, limits, auth and tenants,
against the real binary."""
import base64
import gzip
import json
import threading
import unittest
import urllib.parse

from harness import DEBUG_PIPELINE, Collector, debug_profiles, http, multipart, read_corpus


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def push_request(series):
    """series: [(labels dict, [raw pprof bytes])] -> PushRequest protobuf bytes."""
    out = b""
    for labels, samples in series:
        s = b""
        for k, v in labels.items():
            s += field(1, field(1, k.encode()) + field(2, v.encode()))
        for raw in samples:
            s += field(2, field(1, raw) + field(2, b"0b1e4f49-5d3e-4b0c-9d2a-4d7e1a2b3c4d"))
        out += field(1, s)
    return out


class IngestApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(DEBUG_PIPELINE.replace("    endpoint: 127.0.0.1:{port}\n",
                                                 "    endpoint: 127.0.0.1:{port}\n"
                                                 "    max_request_body_size: 256KiB\n"
                                                 "    max_decompressed_size: 1MiB\n"))
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def ingest(self, query, body, headers=None):
        return http("POST", self.c.base + "/ingest?" + query, body, headers or {})

    def assert_error(self, answer, status, text):
        code, headers, body = answer
        self.assertEqual(code, status, body)
        self.assertEqual(headers.get("Content-Type"), "application/json")
        msg = json.loads(body)
        self.assertIn(text, msg["message"])
        return msg

    def test_every_refusal_is_counted_once(self):
        labels = 'receiver="pprof"'
        before = self.c.metric("flamecol_receiver_refused_requests_total", labels)
        accepted = self.c.metric("flamecol_receiver_accepted_requests_total", labels)
        self.assertEqual(self.ingest("name=bad%20name", b"a 1")[0], 400)
        self.assertEqual(self.ingest("name=app", b"junk", {"Content-Type": "application/octet-stream"})[0], 422)
        self.assertEqual(self.ingest("name=app.cpu{%s}" % ",".join("l%d=v" % i for i in range(40)), b"a 1")[0], 400)
        self.assertEqual(self.ingest("name=counted.cpu", b"a 1")[0], 200)
        self.assertEqual(self.c.metric("flamecol_receiver_refused_requests_total", labels), before + 3)
        self.assertEqual(self.c.metric("flamecol_receiver_accepted_requests_total", labels), accepted + 1)

    def test_bad_requests_get_precise_errors(self):
        raw = read_corpus("go-1s-cpu")
        octet = {"Content-Type": "application/octet-stream"}
        msg = self.assert_error(self.ingest("name=bad%20name", b"a 1"), 400, "invalid character")
        self.assertEqual(msg["code"], "invalid_argument")
        self.assert_error(self.ingest("from=1", b"a 1"), 400, "name parameter is required")
        self.assert_error(self.ingest("name=app{a-b=1}", b"a 1"), 400, "invalid label name")
        self.assert_error(self.ingest("name=app&format=exotic", b"a 1"), 400, "unknown format")
        self.assert_error(self.ingest("name=app&format=jfr", b"a 1"), 400, "not supported")
        self.assert_error(self.ingest("name=app&from=yesterday", b"a 1"), 400, "from")
        self.assert_error(self.ingest("name=app.cpu", b"a;b 1\na;c lots\n"), 400, "line 2")
        self.assert_error(self.ingest("name=my.app", b"a 1"), 400, "unknown profile type: app")
        self.assert_error(self.ingest("name=app", b"", octet), 400, "empty request body")
        # Undecodable profiles are 422, as in Pyroscope.
        self.assert_error(self.ingest("name=app", raw[:len(raw) // 2], octet), 422, "gzip")
        self.assert_error(self.ingest("name=app", gzip.decompress(raw)[:500], octet), 422, "pprof")
        self.assert_error(self.ingest("name=app", b"\x08" + b"\xff" * 11, octet), 422, "pprof")
        bad_index = bytes([0x0a, 0x04, 0x08, 0x01, 0x10, 0x05, 0x32, 0x00, 0x32, 0x01, ord("x")])
        self.assert_error(self.ingest("name=app", bad_index, octet), 422, "string index 5")
        ctype, body = multipart([("other", None, None, b"x")])
        self.assert_error(self.ingest("name=app", body, {"Content-Type": ctype}), 400, "no 'profile' part")

    def test_limits_are_enforced(self):
        big = b"a;b 1\n" * 60000  # 360 KB > 256 KiB
        code, _, body = self.ingest("name=app.cpu", big)
        self.assertEqual(code, 413, body)
        # A small gzip bomb: 2 MiB of zeros compress to a few KB; the cap is 1 MiB.
        bomb = gzip.compress(b"\0" * (2 << 20))
        self.assert_error(self.ingest("name=app", bomb, {"Content-Type": "application/octet-stream"}),
                          413, "exceeds the limit")
        labels = ",".join("l%d=v" % i for i in range(40))
        self.assert_error(self.ingest("name=app.cpu{%s}" % labels, b"a 1"), 400, "max_labels")
        # The process still serves.
        self.assertEqual(self.ingest("name=app.cpu", b"a;b 1")[0], 200)

    def test_bad_requests_never_disturb_good_ones(self):
        good = read_corpus("go-1s-heap")
        bad = good[: len(good) // 3]
        results = []

        def send(body, expect):
            code = http("POST", self.c.base + "/ingest?name=conc", body,
                        {"Content-Type": "application/octet-stream"})[0]
            results.append((code, expect))

        threads = [threading.Thread(target=send, args=((good, 200) if i % 2 else (bad, 422)))
                   for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(results), 24)
        for code, expect in results:
            self.assertEqual(code, expect)

    def test_sample_type_config_and_prev_profile(self):
        heap = read_corpus("go-1s-heap")
        config = json.dumps({"alloc_space": {"units": "bytes", "aggregation": "sum",
                                             "display-name": "alloc_space", "sampled": False,
                                             "cumulative": True}}).encode()
        ctype, body = multipart([("profile", "profile.pprof", None, heap),
                                 ("prev_profile", "profile.pprof", None, heap),
                                 ("sample_type_config", "sample_type_config.json", None, config)])
        before = len(debug_profiles(self.c.debug_output()))
        code, _, text = self.ingest("name=delta&from=1700000000&until=1700000010",
                                    body, {"Content-Type": ctype})
        self.assertEqual(code, 200, text)
        p = debug_profiles(self.c.debug_output())[before]
        self.assertIn('__name__="memory"', p["summary"])
        # profile - prev_profile on itself: the cumulative type is zero, the others are kept.
        self.assertIn("alloc_space:bytes=0", p["summary"])
        self.assertIn("inuse_space:bytes=1511485", p["summary"])

    def test_folded_with_sample_rate_becomes_cpu_time(self):
        before = len(debug_profiles(self.c.debug_output()))
        code, _, _ = self.ingest("name=foldapp.cpu{region=eu-north}&sampleRate=100&from=now-10s",
                                 b"main;work 3\nmain;idle 1\n")
        self.assertEqual(code, 200)
        p = debug_profiles(self.c.debug_output())[before]
        self.assertIn('service_name="foldapp"', p["summary"])
        self.assertIn('region="eu-north"', p["summary"])
        self.assertIn('__name__="process_cpu"', p["summary"])
        self.assertEqual(p["types"]["cpu:nanoseconds"]["total"], 4 * 10000000)
        code, _, _ = self.ingest("name=linesapp.alloc_objects&format=lines", b"a;b\na;b\na;c\n")
        self.assertEqual(code, 200)
        p = debug_profiles(self.c.debug_output())[before + 1]
        self.assertEqual(p["types"]["alloc_objects:count"]["flat"], {"b": 2, "c": 1})

    def test_push_v1_proto_and_json(self):
        cpu = read_corpus("go-1s-cpu")
        before = len(debug_profiles(self.c.debug_output()))
        body = push_request([({"__name__": "process_cpu", "service_name": "pushed", "pod": "p-1"},
                              [cpu])])
        code, headers, resp = http("POST", self.c.base + "/push.v1.PusherService/Push", body,
                                   {"Content-Type": "application/proto",
                                    "Connect-Protocol-Version": "1"})
        self.assertEqual(code, 200, resp)
        self.assertEqual(headers["Content-Type"], "application/proto")
        self.assertEqual(resp, b"")
        js = json.dumps({"series": [{"labels": [{"name": "__name__", "value": "memory"},
                                                {"name": "service_name", "value": "pushed-json"}],
                                     "samples": [{"rawProfile": base64.b64encode(read_corpus("go-1s-heap")).decode(),
                                                  "ID": "x"}]}]}).encode()
        code, headers, resp = http("POST", self.c.base + "/push.v1.PusherService/Push",
                                   gzip.compress(js), {"Content-Type": "application/json",
                                                       "Content-Encoding": "gzip"})
        self.assertEqual(code, 200, resp)
        self.assertEqual(json.loads(resp), {})
        profiles = debug_profiles(self.c.debug_output())[before:]
        self.assertIn('pod="p-1"', profiles[0]["summary"])
        self.assertEqual(profiles[0]["types"]["cpu:nanoseconds"]["total"], 1080000000)
        self.assertIn('service_name="pushed-json"', profiles[1]["summary"])
        # Errors are Connect JSON.
        code, headers, resp = http("POST", self.c.base + "/push.v1.PusherService/Push",
                                   push_request([]), {"Content-Type": "application/proto"})
        self.assertEqual(code, 400)
        self.assertEqual(json.loads(resp)["code"], "invalid_argument")
        self.assertIn("no profiles received", json.loads(resp)["message"])
        code, _, resp = http("POST", self.c.base + "/push.v1.PusherService/Push",
                             push_request([({"service_name": "x"}, [b"\x0a\x05garbage"])]),
                             {"Content-Type": "application/proto"})
        self.assertEqual(code, 400)
        self.assertIn("series 0", json.loads(resp)["message"])
        self.assertEqual(http("GET", self.c.base + "/push.v1.PusherService/Push")[0], 405)

    def test_profile_id_label_is_read_as_span_id(self):
        # A pprof with one sample labelled profile_id=abcd (built by hand).
        strings = [b"", b"samples", b"count", b"main", b"profile_id", b"00000000000000ab"]
        msg = field(1, varint(1 << 3) + varint(1) + varint(2 << 3) + varint(2))
        msg += field(2, field(1, varint(1)) + field(2, varint(1)) +
                     field(3, varint(1 << 3) + varint(4) + varint(2 << 3) + varint(5)))
        msg += field(4, varint(1 << 3) + varint(1) + field(4, varint(1 << 3) + varint(1)))
        msg += field(5, varint(1 << 3) + varint(1) + varint(2 << 3) + varint(3))
        for s in strings:
            msg += field(6, s)
        before = len(debug_profiles(self.c.debug_output()))
        code, _, text = self.ingest("name=spans", msg, {"Content-Type": "application/octet-stream"})
        self.assertEqual(code, 200, text)
        p = debug_profiles(self.c.debug_output())[before]
        self.assertIn("sample_labels=[span_id]", p["summary"])
        self.assertEqual(p["types"]["samples:count"]["flat"], {"main": 1})


class AuthTenantTest(unittest.TestCase):
    def test_bearer_token_and_tenant(self):
        c = Collector(DEBUG_PIPELINE.replace("    endpoint: 127.0.0.1:{port}\n",
                                             "    endpoint: 127.0.0.1:{port}\n"
                                             "    auth:\n      bearer_token: s3cret\n"))
        with c:
            code, headers, _ = http("POST", c.base + "/ingest?name=app.cpu", b"a 1")
            self.assertEqual(code, 401)
            # The legacy key is checked by the authenticator extensions build (one mechanism).
            self.assertEqual(headers.get("WWW-Authenticate"), 'Bearer realm="flamecol"')
            code, _, _ = http("POST", c.base + "/ingest?name=app.cpu", b"a 1",
                              {"Authorization": "Bearer wrong"})
            self.assertEqual(code, 401)
            code, _, _ = http("POST", c.base + "/ingest?name=app.cpu", b"a 1",
                              {"Authorization": "Bearer s3cret", "X-Scope-OrgID": "team-a"})
            self.assertEqual(code, 200)
            code, _, body = http("POST", c.base + "/ingest?name=app.cpu", b"a 1",
                                 {"Authorization": "Bearer s3cret", "X-Scope-OrgID": "bad tenant/"})
            self.assertEqual(code, 400, body)
            self.assertEqual(c.stop(), 0)
        self.assertIn("batch tenant=team-a", c.debug_output())

    def test_basic_auth(self):
        c = Collector(DEBUG_PIPELINE.replace("    endpoint: 127.0.0.1:{port}\n",
                                             "    endpoint: 127.0.0.1:{port}\n"
                                             "    auth:\n      basic:\n        username: u\n        password: p\n"))
        with c:
            self.assertEqual(http("POST", c.base + "/ingest?name=a.cpu", b"a 1")[0], 401)
            # Only the configured user and password pass (more in test_receiver_refs.py).
            for pair in (b"u:wrong", b"other:p", b"u:", b"u:pp"):
                bad = "Basic " + base64.b64encode(pair).decode()
                self.assertEqual(http("POST", c.base + "/ingest?name=a.cpu", b"a 1",
                                      {"Authorization": bad})[0], 401, pair)
            good = "Basic " + base64.b64encode(b"u:p").decode()
            self.assertEqual(http("POST", c.base + "/ingest?name=a.cpu", b"a 1",
                                  {"Authorization": good})[0], 200)
            self.assertEqual(c.stop(), 0)
        self.assertIn("batch tenant=anonymous", c.debug_output())


if __name__ == "__main__":
    unittest.main()
