"""Hostile input through the real binary (issue 9): deep nesting, huge stacks,
huge labels, many attributes and empty bodies over OTLP/HTTP (protobuf and
JSON), OTLP/gRPC and the pprof receiver. Every hostile request is built here
by hand from the field numbers in proto/; each is answered (400 /
INVALID_ARGUMENT naming the limit, or accepted and truncated), counted in
/metrics, and the process keeps serving: a good request from another tenant
right after each one is accepted."""
import json
import time
import unittest
import urllib.parse

import grpc

from harness import http, pb_ld, pb_packed, pb_put_varint, pb_vi, start_otlp_store

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
# An OTLP cpu:nanoseconds profile with a cpu period is named after its period type (README).
CPU = "cpu:cpu:nanoseconds:cpu:nanoseconds"

# ---- protobuf, by hand ------------------------------------------------------------------------

varint, ld, vi, packed = pb_put_varint, pb_ld, pb_vi, pb_packed


def nested_any(levels):
    """AnyValue wrapping `levels` ArrayValues around AnyValue{int_value: 1}."""
    v = vi(3, 1)
    for _ in range(levels):
        v = ld(5, ld(1, v))  # AnyValue.array_value = ArrayValue{values: [v]}
    return v


# Frames of the one stack every request carries (function = location = index here).
NAMES = ["root", "main", "work", "a", "b", "leaf"]
ROOT, MAIN, WORK, A, B, LEAF = range(1, 7)


def deep_stack(n):
    """Leaf first: leaf, then a/b alternating, then work, main, root; n frames in all."""
    middle = [A if j % 2 else B for j in range(1, n - 3)]
    return [LEAF] + middle + [WORK, MAIN, ROOT]


def otlp_request(service, stack=(LEAF, WORK, MAIN, ROOT), resource_attrs=b""):
    """ExportProfilesServiceRequest: one profile of one sample (value 7) on `stack`."""
    strings = ["", "cpu", "nanoseconds"] + NAMES
    d = b"".join(ld(5, s.encode()) for s in strings)                          # string_table
    d += ld(3, b"") + b"".join(ld(3, vi(1, 3 + i)) for i in range(len(NAMES)))  # function_table
    d += ld(2, b"") + b"".join(ld(2, ld(3, vi(1, 1 + i))) for i in range(len(NAMES)))  # location_table
    d += ld(7, b"") + ld(7, packed(1, stack))                                  # stack_table
    vt = vi(1, 1) + vi(2, 2)
    sample = vi(1, 1) + packed(4, [7])
    now = time.time_ns()
    profile = ld(1, vt) + ld(2, sample) + varint(3 << 3 | 1) + now.to_bytes(8, "little")
    profile += ld(5, vt) + vi(6, 10000000)
    svc = ld(1, b"service.name") + ld(2, ld(1, service.encode()))
    resource = ld(1, svc) + resource_attrs
    rp = ld(1, resource) + ld(2, ld(2, profile))
    return ld(1, rp) + ld(2, d)


def nested_request(levels):
    """A resource attribute whose value is nested `levels` ArrayValues deep."""
    return otlp_request("deep", resource_attrs=ld(1, ld(1, b"deep") + ld(2, nested_any(levels))))


def nested_json(levels):
    """The same in OTLP JSON (built as text: json.dumps would recurse)."""
    value = '{"arrayValue":{"values":[' * levels + '{"intValue":"1"}' + "]}}" * levels
    return ('{"resourceProfiles":[{"resource":{"attributes":[{"key":"deep","value":%s}]}}]}'
            % value).encode()


def pprof_with_label(value_len):
    """A pprof Profile with one sample whose label k has a value_len-byte value."""
    strings = [b"", b"cpu", b"nanoseconds", b"k", b"v" * value_len, b"main"]
    p = ld(1, vi(1, 1) + vi(2, 2))                                 # sample_type
    p += ld(2, packed(1, [1]) + packed(2, [1]) + ld(3, vi(1, 3) + vi(2, 4)))  # sample + label
    p += ld(4, vi(1, 1) + ld(4, vi(1, 1)))                         # location 1 -> function 1
    p += ld(5, vi(1, 1) + vi(2, 5))                                # function 1 "main"
    return p + b"".join(ld(6, s) for s in strings)


class HostileInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c, cls.grpc_port, cls.otlp = start_otlp_store()
        cls.channel = grpc.insecure_channel(
            "127.0.0.1:%d" % cls.grpc_port,
            options=[("grpc.max_send_message_length", 64 << 20)])
        cls.export = cls.channel.unary_unary(METHOD)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.c.stop() == 0, cls.c.log()

    def refused(self, receiver):
        return self.c.metric("flamecol_receiver_refused_requests_total",
                             'receiver="%s"' % receiver) or 0

    def post_otlp(self, body, json_=False, tenant=None):
        headers = {"Content-Type": "application/json" if json_ else "application/x-protobuf"}
        if tenant:
            headers["X-Scope-OrgID"] = tenant
        return http("POST", self.otlp, body, headers)

    def assert_still_serves(self, tag):
        """A good request from another tenant right after, on both transports."""
        status, _, body = self.post_otlp(otlp_request("after-" + tag), tenant="other-" + tag)
        self.assertEqual(status, 200, body)
        resp, call = self.export.with_call(otlp_request("after-" + tag), timeout=10,
                                           metadata=(("x-scope-orgid", "other-" + tag),))
        self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertEqual(http("GET", self.c.metrics_base + "/ready")[0], 200)

    def folded(self, service, tenant=None):
        q = urllib.parse.urlencode({"query": '%s{service_name="%s"}' % (CPU, service),
                                    "from": "0", "until": "now", "format": "folded",
                                    "maxNodes": "1048576"})
        headers = {"X-Scope-OrgID": tenant} if tenant else {}
        status, _, body = http("GET", self.c.base + "/pyroscope/render?" + q, None, headers)
        self.assertEqual(status, 200, body)
        return [l for l in body.decode().splitlines() if l.strip()]

    def test_nested_attribute_value_http_and_grpc(self):
        for levels in (3000, 2000):
            before = self.refused("otlp")
            status, _, body = self.post_otlp(nested_request(levels))
            self.assertEqual(status, 400, body)
            self.assertIn(b"message nested deeper than max_message_depth (100)", body)
            status, _, body = self.post_otlp(nested_json(levels), json_=True)
            self.assertEqual(status, 400, body)
            msg = json.loads(body)["message"]
            self.assertIn("max_message_depth (100)", msg)
            with self.assertRaises(grpc.RpcError) as e:
                self.export(nested_request(levels), timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("message nested deeper than max_message_depth (100)",
                          e.exception.details())
            self.assertEqual(self.refused("otlp"), before + 3)
            self.assert_still_serves("nested-%d" % levels)

    def test_shallow_nesting_is_accepted(self):
        # 40 levels: the deepest message is at 2 x 40 + 5 = 85, under the default 100.
        status, _, body = self.post_otlp(nested_request(40))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.export(nested_request(40), timeout=10), b"")

    def test_300k_frame_stack_is_cut_to_its_root(self):
        counter = ("flamecol_receiver_truncated_stacks_total", 'receiver="otlp"')
        before = self.c.metric(*counter)
        stack = deep_stack(300000)
        status, _, body = self.post_otlp(otlp_request("deep-http", stack))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.export(otlp_request("deep-grpc", stack), timeout=30), b"")
        self.assertEqual(self.c.metric(*counter), before + 2)
        # 1024 root-most frames: root, main, work, then 1021 of the a/b run ending on
        # leaf-first index 298976 (even: b); the leaf side (leaf itself) is gone.
        want = ";".join(["root", "main", "work"] +
                        ["b" if j % 2 == 0 else "a" for j in range(299996, 298975, -1)])
        for service in ("deep-http", "deep-grpc"):
            lines = self.folded(service)
            self.assertEqual(lines, [want + " 7"], service)
            self.assertEqual(len(lines[0].split(" ")[0].split(";")), 1024)
        self.assert_still_serves("stack")

    def test_8mib_sample_label_value_is_refused(self):
        before = self.refused("pprof")
        status, _, body = http("POST", self.c.base + "/ingest?name=hostile.cpu&spyName=gospy&format=pprof",
                               pprof_with_label(8 << 20))
        self.assertEqual(status, 400, body)
        self.assertIn("sample 0: label \\\"k\\\" value is 8388608 bytes, more than "
                      "max_label_value_length (2048)", body.decode())
        self.assertEqual(self.refused("pprof"), before + 1)
        # At exactly the limit it is accepted.
        status, _, body = http("POST", self.c.base + "/ingest?name=hostile.cpu&spyName=gospy&format=pprof",
                               pprof_with_label(2048))
        self.assertEqual(status, 200, body)
        self.assert_still_serves("label")

    def test_long_resource_attribute_is_judged_whole(self):
        """A 3,000-byte resource attribute was cut to 2,047 bytes and accepted; now the
        series-label cap refuses it, and 2,048 bytes (the limit) are stored whole."""
        def req(n):
            return otlp_request("longattr", resource_attrs=ld(1, ld(1, b"team") +
                                                              ld(2, ld(1, b"x" * n))))
        status, _, body = self.post_otlp(req(3000))
        self.assertEqual(status, 400, body)
        self.assertIn(b"max_label_value_length (2048)", body)
        with self.assertRaises(grpc.RpcError) as e:
            self.export(req(3000), timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        status, _, body = self.post_otlp(req(2048))
        self.assertEqual(status, 200, body)
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=team")
        self.assertEqual(json.loads(body), ["x" * 2048])
        self.assert_still_serves("longattr")

    def test_20000_resource_attributes_are_refused(self):
        attrs = b"".join(ld(1, ld(1, b"attr.%d" % i) + ld(2, vi(3, i))) for i in range(20000))
        before = self.refused("otlp")
        status, _, body = self.post_otlp(otlp_request("many", resource_attrs=attrs))
        self.assertEqual(status, 400, body)
        self.assertIn(b"20001 attributes (resource 20001, scope 0, profile 0), more than "
                      b"max_attributes (128)", body)
        with self.assertRaises(grpc.RpcError) as e:
            self.export(otlp_request("many", resource_attrs=attrs), timeout=30)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("max_attributes (128)", e.exception.details())
        self.assertEqual(self.refused("otlp"), before + 2)
        self.assert_still_serves("attrs")

    def test_empty_and_deep_push_bodies(self):
        url = self.c.base + "/push.v1.PusherService/Push"
        before = self.refused("pprof")
        status, _, body = http("POST", url, b"", {"Content-Type": "application/proto"})
        self.assertEqual(status, 400, body)
        self.assertEqual(json.loads(body), {"code": "invalid_argument",
                                            "message": "no profiles received"})
        status, _, body = http("POST", url, b"", {"Content-Type": "application/json"})
        self.assertEqual(status, 400, body)
        self.assertEqual(json.loads(body), {"code": "invalid_argument", "message": "empty body"})
        # Nesting is bounded in push.v1 JSON too, by the same max_message_depth.
        deep = b'{"series":' + b"[" * 3000 + b"]" * 3000 + b"}"
        status, _, body = http("POST", url, deep, {"Content-Type": "application/json"})
        self.assertEqual(status, 400, body)
        self.assertIn("nested deeper than max_message_depth (100) allows", json.loads(body)["message"])
        self.assertEqual(self.refused("pprof"), before + 3)
        self.assert_still_serves("empty")


if __name__ == "__main__":
    unittest.main()
