"""The listeners against clients that misbehave, through the real binary:
slow headers and bodies are cut at their deadlines, one address cannot take
every connection, a second process cannot share a port, the gRPC tenant is
checked as the HTTP one is, and JSON answers stay valid UTF-8."""
import json
import socket
import time
import unittest
import urllib.parse

import grpc

from harness import Collector, free_port, http, pb_ld, pb_put_varint, pb_vi

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [store]
  http:
    header_timeout: 2s
    body_timeout: 2s
    max_connections_per_client: 50
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


def refused(c, reason, transport="http", endpoint=None):
    labels = 'transport="%s",endpoint="%s",reason="%s"' % (
        transport, endpoint or "127.0.0.1:%d" % c.ports["port"], reason)
    return c.metric("flamecol_server_refused_requests_total", labels) or 0


def closed_by_server(sock, deadline):
    """True once the server closed sock (EOF or reset), False if deadline passes first."""
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def wait_for(pred, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def folded_push(c, name, body, tenant=None):
    headers = {"Content-Type": "text/plain"}
    if tenant:
        headers["X-Scope-OrgID"] = tenant
    q = urllib.parse.urlencode({"name": name, "format": "folded", "from": "now-5s"})
    return http("POST", c.base + "/ingest?" + q, body, headers)


def otlp_request(service, frames, value):
    """An ExportProfilesServiceRequest built from the .proto field numbers: one
    profile, one sample of one stack (frames root first), samples:count."""
    varint, field, vfield = pb_put_varint, pb_ld, pb_vi

    strings = ["", "samples", "count", "service.name"] + list(frames)
    # dictionary: mapping_table(1) location_table(2) function_table(3) link_table(4)
    # string_table(5) attribute_table(6) stack_table(7)
    d = field(1, b"") + field(2, b"") + field(3, b"") + field(4, b"") + field(6, b"")
    for i, _ in enumerate(frames):
        d += field(3, vfield(1, 4 + i))               # Function.name_strindex
    for i, _ in enumerate(frames):
        line = field(3, vfield(1, i + 1))             # Location.lines{function_index}
        d += field(2, line)
    for s in strings:
        d += field(5, s.encode())
    # the stack lists locations leaf first
    locs = b"".join(varint(i + 1) for i in reversed(range(len(frames))))
    d += field(7, b"") + field(7, field(1, locs))
    sample = vfield(1, 1) + field(4, varint(value))   # stack_index, values
    profile = field(1, vfield(1, 1) + vfield(2, 2)) + field(2, sample)  # sample_type, samples
    profile += varint(3 << 3 | 1) + (time.time_ns() - 2 * 10**9).to_bytes(8, "little")
    attr = field(1, b"service.name") + field(2, field(1, service.encode()))
    resource_profiles = field(1, field(1, attr)) + field(2, field(2, profile))
    return field(1, resource_profiles) + field(2, d)


class ListenerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc_port = free_port()
        cls.c = Collector(PIPELINE.replace("{grpc}", str(cls.grpc_port)))
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def connect(self, source):
        s = socket.create_connection(("127.0.0.1", self.c.ports["port"]), timeout=5,
                                     source_address=(source, 0))
        return s

    def good_push(self):
        status, _, body = http("POST", self.c.base + "/ingest?name=good.cpu&format=folded",
                               b"main;work 3\n", {"Content-Type": "text/plain"}, timeout=10)
        self.assertEqual(status, 200, body)

    def test_slow_headers_are_cut_and_others_served(self):
        before = refused(self.c, "header_timeout")
        socks = [self.connect("127.0.0.2") for _ in range(40)]
        for s in socks:
            s.sendall(b"POST /ingest?name=slow.cpu HTTP/1.1\r\nHost: x\r\n")
        # One more header line each second keeps the connection busy but never done.
        deadline = time.monotonic() + 30
        cut = set()
        while len(cut) < len(socks) and time.monotonic() < deadline:
            for i, s in enumerate(socks):
                if i in cut:
                    continue
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    cut.add(i)
            self.good_push()  # normal clients are served meanwhile
            time.sleep(1)
        for i, s in enumerate(socks):
            if i not in cut and closed_by_server(s, time.monotonic() + 1):
                cut.add(i)
            s.close()
        self.assertEqual(len(cut), len(socks))
        self.assertTrue(wait_for(lambda: refused(self.c, "header_timeout") - before >= len(socks)))

    def test_slow_body_is_cut(self):
        before = refused(self.c, "body_timeout")
        s = self.connect("127.0.0.3")
        s.sendall(b"POST /ingest?name=slow.cpu&format=folded HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\nmain")
        deadline = time.monotonic() + 30
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                s.sendall(b";")
            except OSError:
                closed = True
            closed = closed or closed_by_server(s, time.monotonic() + 0.5)
        s.close()
        self.assertTrue(closed)
        self.assertTrue(wait_for(lambda: refused(self.c, "body_timeout") > before))
        self.good_push()

    def test_one_address_cannot_take_every_connection(self):
        before = refused(self.c, "max_connections_per_client")
        held = [self.connect("127.0.0.4") for _ in range(50)]
        time.sleep(0.3)
        extra = [self.connect("127.0.0.4") for _ in range(20)]
        for s in extra:
            self.assertTrue(closed_by_server(s, time.monotonic() + 5))
            s.close()
        self.assertEqual(refused(self.c, "max_connections_per_client") - before, 20)
        # The 50 it holds still work, and another address is not affected.
        held[0].sendall(b"GET /pyroscope/label-names HTTP/1.1\r\nHost: x\r\n\r\n")
        held[0].settimeout(5)
        self.assertTrue(held[0].recv(100).startswith(b"HTTP/1.1 200"))
        for s in held:
            s.close()
        self.good_push()

    def test_second_process_cannot_share_the_ports(self):
        for port_key in ("port", "grpc"):
            port = self.c.ports["port"] if port_key == "port" else self.grpc_port
            text = PIPELINE.replace("{grpc}", str(self.grpc_port if port_key == "grpc"
                                                  else free_port()))
            other = Collector(text.replace("127.0.0.1:{port}", "127.0.0.1:%d" % port))
            rc = other.proc.wait(timeout=20)
            log = other.log()
            other.stderr.close()
            self.assertNotEqual(rc, 0, log)
            self.assertIn("127.0.0.1:%d" % port, log)
            self.assertIn("Address already in use", log)
        self.good_push()

    def test_grpc_tenant_is_checked_like_http(self):
        channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        export = channel.unary_unary(METHOD)
        body = otlp_request("tenant-svc", ["main", "work"], 7)
        for bad in ("x" * 200, "bob ", "a/b", ".."):
            with self.assertRaises(grpc.RpcError) as e:
                export(body, timeout=10, metadata=[("x-scope-orgid", bad)])
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, bad)
            self.assertIn("tenant id", e.exception.details())
            status, _, _ = http("POST", self.c.base + "/ingest?name=t.cpu&format=folded",
                                b"main 1\n", {"X-Scope-OrgID": bad, "Content-Type": "text/plain"})
            self.assertEqual(status, 400, bad)
        self.assertEqual(export(body, timeout=10, metadata=[("x-scope-orgid", "team-a")]), b"")
        channel.close()
        for tenant, want in (("team-a", True), ("anonymous", False)):
            status, _, text = http("GET", self.c.base + "/pyroscope/label-values?label=service_name",
                                   headers={"X-Scope-OrgID": tenant})
            self.assertEqual(status, 200, text)
            self.assertEqual("tenant-svc" in json.loads(text), want, tenant)

    def test_json_answers_are_valid_utf8(self):
        # Invalid bytes in a function name: each becomes U+FFFD, as Go's encoding/json does.
        body = b"main;bad\xff\xfename 5\nmain;a\xe2\x82Xb 2\nmain;caf\xc3\xa9 1\n"
        status, _, text = folded_push(self.c, "utf8.cpu", body)
        self.assertEqual(status, 200, text)
        q = urllib.parse.urlencode({"query": 'process_cpu:cpu:nanoseconds:cpu:nanoseconds'
                                    '{service_name="utf8"}', "from": "now-1h", "until": "now+1h"})
        status, _, raw = http("GET", self.c.base + "/pyroscope/render?" + q)
        self.assertEqual(status, 200, raw)
        names = json.loads(raw.decode("utf-8", errors="strict"))["flamebearer"]["names"]
        self.assertIn("bad\ufffd\ufffdname", names)
        self.assertIn("a\ufffd\ufffdXb", names)
        self.assertIn("caf\u00e9", names)


if __name__ == "__main__":
    unittest.main()
