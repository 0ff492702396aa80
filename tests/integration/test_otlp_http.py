"""OTLP/HTTP against the real binary: every corpus profile (converted to OTLP
by `flamecol convert`) in protobuf and JSON, gzip, and the documented errors."""
import gzip
import json
import unittest

from harness import Collector, convert, corpus_files, debug_profiles, http, parse_top

OTLP_PIPELINE = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
        max_request_body_size: 512KiB
    max_decompressed_size: 2MiB
exporters:
  debug:
    verbosity: detailed
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


def zstd_frame(data, rle=None):
    """A zstd frame built here from RFC 8878: raw blocks of data (or, with rle=(byte, n),
    RLE blocks repeating one byte n times), single segment, 4-byte content size."""
    size = len(data) if rle is None else rle[1]
    out = bytearray(b"\x28\xb5\x2f\xfd")  # magic 0xFD2FB528
    out += bytes([0xA0]) + size.to_bytes(4, "little")  # FCS 4 bytes, single segment
    blocks = []
    if rle is None:
        blocks = [(0, data[i:i + (128 << 10)], len(data[i:i + (128 << 10)]))
                  for i in range(0, len(data), 128 << 10)] or [(0, b"", 0)]
    else:
        left = size
        while left > 0:
            n = min(left, 128 << 10)
            blocks.append((1, bytes([rle[0]]), n))
            left -= n
    for i, (kind, content, n) in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        out += (last | kind << 1 | n << 3).to_bytes(3, "little") + content
    return bytes(out)


def pb_status(body):
    """google.rpc.Status {code=1 varint, message=2 string} from protobuf bytes."""
    i, code, msg = 0, 0, ""
    while i < len(body):
        tag = body[i]; i += 1
        if tag == 0x08:
            shift = 0
            while True:
                b = body[i]; i += 1
                code |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
        elif tag == 0x12:
            n = body[i]; i += 1
            msg = body[i:i + n].decode(); i += n
        else:
            break
    return code, msg


class OtlpHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(OTLP_PIPELINE)
        cls.c.wait_ready()
        cls.url = cls.c.base + "/v1development/profiles"

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def check(self, name, profiles):
        top = parse_top(name)
        by_type = {}
        for p in profiles:
            for t, v in p["types"].items():
                by_type[t.split(":")[0]] = v
        for section in top.values():
            got = by_type[section["type"]]
            self.assertEqual(got["total"], section["total"], name)
            for flat, fn in section["rows"][:10]:
                self.assertEqual(got["flat"].get(fn, 0), flat, "%s: %s" % (name, fn))

    def test_corpus_protobuf_json_and_gzip(self):
        for i, name in enumerate(corpus_files()):
            for encoding in ("proto", "json", "proto+gzip", "json+zstd"):
                before = len(debug_profiles(self.c.debug_output()))
                body = convert(name, "otlp-json" if encoding.startswith("json") else "otlp",
                               "service_name=svc-%d" % i)
                headers = {"Content-Type": "application/json" if encoding.startswith("json")
                           else "application/x-protobuf"}
                if encoding.endswith("gzip"):
                    body = gzip.compress(body)
                    headers["Content-Encoding"] = "gzip"
                elif encoding.endswith("zstd"):
                    body = zstd_frame(body)
                    headers["Content-Encoding"] = "zstd"
                status, rh, resp = http("POST", self.url, body, headers)
                self.assertEqual(status, 200, resp)
                self.assertEqual(rh["Content-Type"], headers["Content-Type"])
                # Full success: an empty ExportProfilesServiceResponse.
                self.assertEqual(resp, b"{}" if encoding.startswith("json") else b"")
                profiles = debug_profiles(self.c.debug_output())[before:]
                self.assertTrue(profiles, name)
                for p in profiles:
                    self.assertIn('service_name="svc-%d"' % i, p["summary"])
                self.check(name, profiles)

    def test_errors(self):
        status, h, body = http("POST", self.url, b"\x0a\xff\xff\xff\x0f", {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 400)
        code, msg = pb_status(body)
        self.assertEqual(code, 3)  # INVALID_ARGUMENT
        self.assertIn("not a valid ExportProfilesServiceRequest", msg)
        status, h, body = http("POST", self.url, b"{\"resourceProfiles\":[", {"Content-Type": "application/json"})
        self.assertEqual(status, 400)
        self.assertEqual(h["Content-Type"], "application/json")
        self.assertEqual(json.loads(body)["code"], 3)
        status, _, body = http("POST", self.url, b"x", {"Content-Type": "text/plain"})
        self.assertEqual(status, 415)
        self.assertEqual(http("GET", self.url)[0], 405)
        status, _, _ = http("POST", self.url, b"x" * (600 << 10), {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 413)
        bomb = gzip.compress(b"\0" * (3 << 20))
        status, _, body = http("POST", self.url, bomb, {"Content-Type": "application/x-protobuf",
                                                        "Content-Encoding": "gzip"})
        self.assertEqual(status, 413)
        self.assertIn("exceeds the limit", pb_status(body)[1])
        status, _, _ = http("POST", self.url, b"x", {"Content-Type": "application/x-protobuf",
                                                     "Content-Encoding": "br"})
        self.assertEqual(status, 415)
        # zstd: a bomb of RLE blocks (3 MiB of zeros in a few bytes), and a cut frame.
        bomb = zstd_frame(None, rle=(0, 3 << 20))
        self.assertLess(len(bomb), 200)
        status, _, body = http("POST", self.url, bomb, {"Content-Type": "application/x-protobuf",
                                                        "Content-Encoding": "zstd"})
        self.assertEqual(status, 413)
        self.assertIn("exceeds the limit", pb_status(body)[1])
        cut = zstd_frame(convert("go-1s-mutex", "otlp"))[:-10]
        status, _, body = http("POST", self.url, cut, {"Content-Type": "application/x-protobuf",
                                                       "Content-Encoding": "zstd"})
        self.assertEqual(status, 400)
        self.assertIn("zstd: truncated", pb_status(body)[1])
        # Still serving.
        status, _, _ = http("POST", self.url, convert("go-1s-mutex", "otlp"),
                            {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 200)

    def test_partial_success(self):
        good = json.loads(convert("go-1s-mutex", "otlp-json"))
        profiles = good["resourceProfiles"][0]["scopeProfiles"][0]["profiles"]
        bad = json.loads(json.dumps(profiles[0]))
        bad["samples"][0]["stackIndex"] = 9999
        profiles.append(bad)
        status, _, body = http("POST", self.url, json.dumps(good).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        partial = json.loads(body)["partialSuccess"]
        self.assertEqual(partial["rejectedProfiles"], "1")
        self.assertIn("stack_index: index 9999", partial["errorMessage"])
        self.assertEqual(self.c.metric("flamecol_receiver_refused_profiles_total", 'receiver="otlp"'), 1)

    def test_empty_request_is_success(self):
        status, _, body = http("POST", self.url, b"", {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        status, _, body = http("POST", self.url, b"{}", {"Content-Type": "application/json"})
        self.assertEqual((status, body), (200, b"{}"))


if __name__ == "__main__":
    unittest.main()
