"""OTLP from senders of an older layout is never silently emptied (issue 13).

Each earlier opentelemetry-proto layout of the v1development profiles
messages is written here byte by byte from its field numbers (the table in
formats/otlp_layout.c, from the .proto files of those releases). Posted over
OTLP/HTTP (protobuf, plain and gzip) and OTLP/gRPC, each is refused with 400
/ INVALID_ARGUMENT naming the layout, counted, and nothing of it is stored;
the process keeps serving. The v1.9 layout (async-profiler's) is translated
and stored as the same request in the v1.10 layout would be. A profile
stamped in 1970 is stored at the receive time and counted."""
import gzip
import time
import unittest
import urllib.parse

import grpc

from fake_peers import HttpPeer
from harness import Collector, http, pb_fields, pb_ld, pb_packed, pb_put_varint, pb_varint, pb_vi, \
    start_otlp_store

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
# cpu:nanoseconds with a cpu:nanoseconds period is named after its period type (README).
CPU = "cpu:cpu:nanoseconds:cpu:nanoseconds"

# ---- protobuf, by hand ------------------------------------------------------------------------

def f64(n, v):
    """A fixed64 field."""
    return pb_put_varint(n << 3 | 1) + v.to_bytes(8, "little")


def vt(n, type_, unit):
    """A ValueType {type_strindex, unit_strindex} as field n."""
    return pb_ld(n, pb_vi(1, type_) + pb_vi(2, unit))


def request(profile, service, dictionary=None, extra=b""):
    """ExportProfilesServiceRequest{resource_profiles: [{resource: {service.name}, scope_profiles:
    [{profiles: [profile]}]}], dictionary}."""
    svc = pb_ld(1, pb_ld(1, b"service.name") + pb_ld(2, pb_ld(1, service.encode())))  # Resource.attributes
    rp = pb_ld(1, svc) + pb_ld(2, pb_ld(2, profile))
    return pb_ld(1, rp) + (pb_ld(2, dictionary) if dictionary is not None else b"") + extra


# The v1.10 dictionary: strings "", cpu, nanoseconds, main, work, k, v; locations/functions
# 1 = main, 2 = work; stack 1 = [work, main] (leaf first); attribute 1 = k:"v".
STRINGS = ["", "cpu", "nanoseconds", "main", "work", "k", "v"]


def dictionary(links=False):
    d = pb_ld(1, b"") + pb_ld(2, b"")
    d += b"".join(pb_ld(2, pb_ld(3, pb_vi(1, i))) for i in (1, 2))        # location -> Line.function_index
    d += pb_ld(3, b"") + b"".join(pb_ld(3, pb_vi(1, 2 + i)) for i in (1, 2))  # function.name_strindex
    d += b"".join(pb_ld(5, s.encode()) for s in STRINGS)
    d += pb_ld(6, b"") + pb_ld(6, pb_vi(1, 5) + pb_ld(2, pb_ld(1, b"v")))        # KeyValueAndUnit k = "v"
    d += pb_ld(7, b"") + pb_ld(7, pb_packed(1, [2, 1]))                   # stack_table
    if links:
        d += pb_ld(4, b"") + pb_ld(4, pb_ld(1, bytes([0xAA] * 16)) + pb_ld(2, bytes([0xBB] * 8)))
    return d


def cpu_profile(samples, time_ns, tail=b""):
    """Profile fields 1-6, identical in v1.8, v1.9 and v1.10."""
    p = vt(1, 1, 2) + b"".join(pb_ld(2, s) for s in samples)
    p += f64(3, time_ns) + pb_vi(4, 10**9) + vt(5, 1, 2) + pb_vi(6, 10000000)
    return p + tail


def v110_sample(value, attrs=(), link=0):
    """Sample 1 stack_index, 2 attribute_indices, 3 link_index, 4 values."""
    s = pb_vi(1, 1)
    if attrs:
        s += pb_packed(2, attrs)
    if link:
        s += pb_vi(3, link)
    return s + pb_packed(4, [value])


def v19_sample(value, attrs=(), link=0):
    """Sample 1 stack_index, 2 values, 3 attribute_indices, 4 link_index."""
    s = pb_vi(1, 1) + pb_packed(2, [value])
    if attrs:
        s += pb_packed(3, attrs)
    if link:
        s += pb_vi(4, link)
    return s


def current(service, time_ns, sample=v110_sample):
    samples = [sample(7, attrs=[1], link=1), sample(3)]
    return request(cpu_profile(samples, time_ns), service, dictionary(links=True))


def v19(service, time_ns):
    return current(service, time_ns, sample=v19_sample)


def v18(service, time_ns):
    """Profile 7 comment_strindices, 8 profile_id, 9 dropped_attributes_count; v1.9 samples."""
    tail = pb_packed(7, [3]) + pb_ld(8, bytes(range(1, 17))) + pb_vi(9, 2)
    samples = [v19_sample(7, attrs=[1]), v19_sample(3)]
    return request(cpu_profile(samples, time_ns, tail), service, dictionary())


def v17(service, time_ns):
    """As async-profiler 4.0 writes it: Profile 1 sample_type (repeated), 2 sample,
    3 location_indices, 4 time_nanos, 6 period_type, 7 period; Sample 1 locations_start_index,
    2 locations_length, 3 value; dictionary 6 attribute_table of KeyValue{1 key, 2 value}."""
    samples = [pb_vi(2, 2) + pb_packed(3, [7]), pb_vi(1, 2) + pb_vi(2, 2) + pb_packed(3, [3])]
    p = vt(1, 1, 2) + b"".join(pb_ld(2, s) for s in samples) + pb_packed(3, [2, 1, 2, 1])
    p += pb_vi(4, time_ns) + vt(6, 1, 2) + pb_vi(7, 10000000)
    d = pb_ld(1, b"") + pb_ld(2, b"") + b"".join(pb_ld(2, pb_ld(3, pb_vi(1, i))) for i in (1, 2))
    d += pb_ld(3, b"") + b"".join(pb_ld(3, pb_vi(1, 2 + i)) for i in (1, 2))
    d += b"".join(pb_ld(5, s.encode()) for s in STRINGS)
    d += pb_ld(6, pb_ld(1, b"thread.name") + pb_ld(2, pb_ld(1, b"main")))
    return request(p, service, d)


def v15(service, time_ns):
    """Profile with its own tables: 3 mapping_table, 4 location_table, 5 location_indices,
    6 function_table, 10 string_table, 11 time_nanos, 13 period_type, 14 period."""
    p = vt(1, 1, 2) + pb_ld(2, pb_vi(2, 2) + pb_packed(3, [7]))
    p += pb_ld(3, pb_vi(1, 0x400000) + pb_vi(2, 0x500000))
    p += pb_ld(4, pb_vi(2, 0x401000) + pb_ld(3, pb_vi(1, 0))) + pb_ld(4, pb_vi(2, 0x402000) + pb_ld(3, pb_vi(1, 1)))
    p += pb_packed(5, [1, 0]) + pb_ld(6, pb_vi(1, 3)) + pb_ld(6, pb_vi(1, 4))
    p += b"".join(pb_ld(10, s.encode()) for s in STRINGS)
    p += pb_vi(11, time_ns) + vt(13, 1, 2) + pb_vi(14, 10000000)
    return request(p, service)


def v13(service, time_ns):
    """ScopeProfiles.profiles holds a ProfileContainer: 1 profile_id, 2 start_time_unix_nano,
    3 end_time_unix_nano, 8 profile (pprofextended)."""
    inner = vt(1, 1, 2) + b"".join(pb_ld(6, s.encode()) for s in STRINGS)
    c = pb_ld(1, bytes(range(16))) + f64(2, time_ns) + f64(3, time_ns + 10**9) + pb_ld(8, inner)
    return request(c, service)


def pprof(service, time_ns):
    """A pprof Profile (profile.proto) posted to the OTLP endpoint."""
    p = vt(1, 1, 2) + pb_ld(2, pb_packed(1, [1]) + pb_packed(2, [7]))
    p += pb_ld(4, pb_vi(1, 1) + pb_ld(4, pb_vi(1, 1))) + pb_ld(5, pb_vi(1, 1) + pb_vi(2, 3))
    p += b"".join(pb_ld(6, s.encode()) for s in STRINGS)
    return p + pb_vi(9, time_ns) + pb_vi(12, 10000000)


# (builder, what the refusal must name), from the field table, not from the code.
OLDER = [
    (v18, "OTLP profiles layout of opentelemetry-proto v1.8 (Profile.profile_id, field 8)"),
    (v17, "OTLP profiles layout of opentelemetry-proto v1.6-v1.7 (Profile.location_indices, field 3)"),
    (v15, "OTLP profiles layout of opentelemetry-proto v1.4-v1.5 (Profile.string_table, field 10)"),
    (v13, "OTLP profiles layout of opentelemetry-proto v1.3 "
          "(ProfileContainer.start_time_unix_nano, field 2)"),
    (pprof, "this is a pprof Profile (Profile.time_nanos, field 9)"),
]
ADVICE = "send the v1.10 layout (v1development as of opentelemetry-proto 1.10)"


class OlderLayoutsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c, cls.grpc_port, cls.otlp = start_otlp_store()
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.grpc_port)
        cls.export = cls.channel.unary_unary(METHOD)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.c.stop() == 0, cls.c.log()

    def metric(self, name):
        return self.c.metric(name, 'receiver="otlp"') or 0

    def post(self, body, gz=False):
        headers = {"Content-Type": "application/x-protobuf"}
        if gz:
            headers["Content-Encoding"] = "gzip"
            body = gzip.compress(body)
        return http("POST", self.otlp, body, headers)

    def folded(self, service, frm="0", until="now"):
        q = urllib.parse.urlencode({"query": '%s{service_name="%s"}' % (CPU, service),
                                    "from": frm, "until": until, "format": "folded"})
        status, _, body = http("GET", self.c.base + "/pyroscope/render?" + q)
        self.assertEqual(status, 200, body)
        return sorted(l for l in body.decode().splitlines() if l.strip())

    def assert_still_serves(self, tag):
        now = time.time_ns()
        status, _, body = self.post(current("after-" + tag, now))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.export(current("after-grpc-" + tag, now), timeout=10), b"")
        for service in ("after-" + tag, "after-grpc-" + tag):
            self.assertEqual(self.folded(service), ["main;work 10"])

    def test_older_layouts_are_refused_naming_the_layout(self):
        for build, named in OLDER:
            tag = build.__name__
            with self.subTest(layout=tag):
                refused = self.metric("flamecol_receiver_refused_requests_total")
                body = build("old-" + tag, time.time_ns())
                for gz in (False, True):
                    status, headers, answer = self.post(body, gz)
                    self.assertEqual(status, 400, answer)
                    self.assertEqual(headers.get("Content-Type"), "application/x-protobuf")
                    st = pb_fields(answer)
                    self.assertEqual(st[1], [3])  # google.rpc.Status.code INVALID_ARGUMENT
                    message = st[2][0].decode()
                    self.assertIn(named, message)
                    if build is not pprof:
                        self.assertIn(ADVICE, message)
                with self.assertRaises(grpc.RpcError) as e:
                    self.export(body, timeout=10)
                self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(named, e.exception.details())
                self.assertEqual(self.metric("flamecol_receiver_refused_requests_total"),
                                 refused + 3)
                self.assertEqual(self.folded("old-" + tag), [])
                self.assert_still_serves(tag)

    def test_v19_is_translated_and_stored_as_v110(self):
        now = time.time_ns()
        for transport in ("http", "gzip", "grpc"):
            with self.subTest(transport=transport):
                service = "v19-" + transport
                if transport == "grpc":
                    answer = self.export(v19(service, now), timeout=10)
                else:
                    status, _, answer = self.post(v19(service, now), transport == "gzip")
                    self.assertEqual(status, 200, answer)
                # partial_success with nothing rejected: a warning, as the spec allows.
                partial = pb_fields(pb_fields(answer)[1][0])
                self.assertNotIn(1, partial)  # rejected_profiles 0
                self.assertIn("translated from the OTLP profiles layout of opentelemetry-proto "
                              "v1.9 (Sample.values, field 2)", partial[2][0].decode())
                # 7 + 3 on work <- main, as the v1.10 request gives (the sample attribute
                # k="v" and the link of the first sample came through: the values did too).
                self.assertEqual(self.folded(service), ["main;work 10"])
        status, _, _ = self.post(current("v110", now))
        self.assertEqual(status, 200)
        self.assertEqual(self.folded("v110"), self.folded("v19-http"))

    def test_1970_is_stored_at_receive_time_and_counted(self):
        before = self.metric("flamecol_receiver_profiles_time_replaced_total")
        # time_unix_nano 0, and seconds sent as nanoseconds (1970-01-01T00:00:01.7Z).
        stamps = {"t0-http": 0, "tsec-http": 1767225600, "t0-grpc": 0}
        for service, t in stamps.items():
            if service.endswith("grpc"):
                self.assertEqual(self.export(current(service, t), timeout=10), b"")
            else:
                status, _, answer = self.post(current(service, t))
                self.assertEqual(status, 200, answer)
        status, _, _ = self.post(current("t-now", time.time_ns()))
        self.assertEqual(status, 200)
        self.assertEqual(self.metric("flamecol_receiver_profiles_time_replaced_total"),
                         before + len(stamps))
        for service in stamps:
            self.assertEqual(self.folded(service, "now-10m", "now"), ["main;work 10"])
            self.assertEqual(self.folded(service, "19700101", "19700102"), [])
        self.assertEqual(self.folded("t-now", "now-10m", "now"), ["main;work 10"])


FORWARD = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
exporters:
  otlphttp:
    endpoint: %s
    retry_on_failure:
      initial_interval: 100ms
      max_interval: 200ms
      max_elapsed_time: 20s
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


def profiles_of(body):
    """The Profile messages of a request (resource_profiles > scope_profiles > profiles)."""
    return [p for rp in pb_fields(body).get(1, []) for sp in pb_fields(rp).get(2, [])
            for p in pb_fields(sp).get(2, [])]


class ForwardedTest(unittest.TestCase):
    """What the receiver changed is never forwarded in the bytes it came as: a translated v1.9
    request goes on in the v1.10 layout (a v1.10 peer would read its values as attributes),
    a 1970 profile with the receive time."""

    def test_translated_and_restamped_requests_are_encoded_again(self):
        with HttpPeer() as peer:
            a = Collector(FORWARD % peer.url)
            try:
                a.wait_ready()
                base = "http://127.0.0.1:%d/v1development/profiles" % a.ports["port"]
                headers = {"Content-Type": "application/x-protobuf"}
                start = time.time_ns()
                for body in (v19("fwd-v19", start), current("fwd-t0", 0)):
                    status, _, answer = http("POST", base, body, headers)
                    self.assertEqual(status, 200, answer)
                reqs = peer.wait_requests(2)
            finally:
                self.assertEqual(a.stop(), 0, a.log())
        bodies = [r.decoded() for r in reqs]
        self.assertNotIn(v19("fwd-v19", start), bodies)
        self.assertNotIn(current("fwd-t0", 0), bodies)
        for body in bodies:
            (profile,) = profiles_of(body)
            samples = pb_fields(profile)[2]
            # v1.10 samples: the values (7, then 3) at field 4, packed.
            self.assertEqual([pb_fields(s)[4] for s in samples],
                             [[pb_put_varint(7)], [pb_put_varint(3)]])
            self.assertGreaterEqual(pb_fields(profile)[3][0], start)  # time_unix_nano


if __name__ == "__main__":
    unittest.main()
