"""Overload is refused, not queued: 1,500 connections push to the store for
FLAMECOL_FLOOD_SECONDS (default 30, at most 60) while /ready is polled.
Every request gets an answer (200, or 429 with Retry-After), the listener's
refusal counter equals the 429s the clients saw, /ready keeps answering,
peak RSS stays under the README's bound, and every accepted push is in the
store (its total = accepted x the pprof -top total of the profile). The
same over gRPC: calls past max_in_flight get RESOURCE_EXHAUSTED with
RetryInfo, and a gzip bomb is refused after inflating at most
max_decompressed_size. Latency figures are printed, never asserted."""
import asyncio
import os
import threading
import time
import unittest
import urllib.parse

import grpc

from harness import Collector, free_port, http, parse_top, read_corpus

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
PROFILE = "go-1s-cpu"
CONNECTIONS = 1500
SOURCES = ["127.0.0.%d" % i for i in range(2, 8)]  # max_connections_per_client is per address
SECONDS = min(60, int(os.environ.get("FLAMECOL_FLOOD_SECONDS", "30")))
RSS_BOUND = 256 << 20  # the README's bound for the default limits with small profiles

PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
        max_in_flight: 2
    max_decompressed_size: 4MiB
exporters:
  store:
    path: {dir}/data
    retention: 0          # the corpus profile keeps its own (old) time
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
service:
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


async def client(port, source, body, deadline, stats):
    """One keep-alive connection pushing until deadline; records every answer."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                       local_addr=(source, 0))
    except OSError as e:
        stats["connect_errors"].append(repr(e))
        return
    head = ("POST /ingest?name=flood.cpu&spyName=gospy HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
            % len(body)).encode()
    try:
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            writer.write(head + body)
            status_line = await asyncio.wait_for(reader.readline(), 15)
            headers = {}
            while True:
                line = await asyncio.wait_for(reader.readline(), 15)
                if line in (b"\r\n", b""):
                    break
                k, v = line.decode().split(":", 1)
                headers[k.strip().lower()] = v.strip()
            await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", 0))), 15)
            stats["latency"].append(time.monotonic() - t0)
            status = int(status_line.split()[1])
            stats["status"][status] = stats["status"].get(status, 0) + 1
            if status == 429 and "retry-after" not in headers:
                stats["no_retry_after"] += 1
            if headers.get("connection", "").lower() == "close":
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                               local_addr=(source, 0))
    except (asyncio.TimeoutError, OSError, ValueError, IndexError,
            asyncio.IncompleteReadError) as e:
        stats["errors"].append(repr(e))
    finally:
        writer.close()


async def flood(port, body, seconds, stats):
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(client(port, SOURCES[i % len(SOURCES)], body, deadline, stats)
                           for i in range(CONNECTIONS)))


def sanitized(proc):
    """ASan's shadow memory and quarantine inflate RSS: the bound is for release builds."""
    with open("/proc/%d/maps" % proc.pid) as f:
        return "libasan" in f.read()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")


class OverloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc_port = free_port()
        cls.c = Collector(PIPELINE.replace("{grpc}", str(cls.grpc_port)))
        cls.c.wait_ready()

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def total(self, service, tenant=None):
        q = urllib.parse.urlencode({"query": 'process_cpu:cpu:nanoseconds:cpu:nanoseconds'
                                    '{service_name="%s"}' % service,
                                    "from": "0", "until": "now+1h", "format": "folded"})
        status, _, text = http("GET", self.c.base + "/pyroscope/render?" + q, timeout=60)
        self.assertEqual(status, 200, text)
        return sum(int(l.rsplit(" ", 1)[1]) for l in text.decode().splitlines() if l)

    def test_http_flood_is_refused_not_queued(self):
        body = read_corpus(PROFILE)
        per_push = next(s["total"] for s in parse_top(PROFILE).values() if s["type"] == "cpu")
        stats = {"status": {}, "latency": [], "errors": [], "connect_errors": [],
                 "no_retry_after": 0}
        ready = []
        stop = threading.Event()

        def poll_ready():
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    status, _, _ = http("GET", self.c.metrics_base + "/ready", timeout=10)
                except OSError as e:
                    status = repr(e)
                ready.append((status, time.monotonic() - t0))
                stop.wait(1)

        poller = threading.Thread(target=poll_ready)
        poller.start()
        asyncio.run(flood(self.c.ports["port"], body, SECONDS, stats))
        stop.set()
        poller.join()

        answered = sum(stats["status"].values())
        print("\nflood: %d connections, %d s: %d answers %s, p50 %.3f s, p99 %.3f s, "
              "max %.3f s; /ready p99 %.3f s; peak RSS %.1f MB" % (
                  CONNECTIONS, SECONDS, answered, stats["status"],
                  percentile(stats["latency"], 0.5), percentile(stats["latency"], 0.99),
                  max(stats["latency"]), percentile([t for _, t in ready], 0.99),
                  (self.c.metric("flamecol_process_memory_peak_rss_bytes") or 0) / 1e6))
        self.assertEqual(stats["connect_errors"], [])
        self.assertEqual(stats["errors"], [], "requests without an answer")
        self.assertEqual(set(stats["status"]) - {200, 429}, set())
        self.assertGreater(stats["status"].get(429, 0), 0, "the flood never reached the limit")
        self.assertGreater(stats["status"].get(200, 0), 0)
        self.assertEqual(stats["no_retry_after"], 0)
        self.assertEqual(self.c.metric(
            "flamecol_server_refused_requests_total",
            'transport="http",endpoint="127.0.0.1:%d",reason="overload"' % self.c.ports["port"]),
            stats["status"][429])
        self.assertTrue(ready and all(s == 200 for s, _ in ready), ready)
        if not sanitized(self.c.proc):
            self.assertLess(self.c.metric("flamecol_process_memory_peak_rss_bytes"), RSS_BOUND)
        self.assertEqual(self.total("flood"), stats["status"][200] * per_push)

    def test_grpc_calls_past_max_in_flight_are_refused_at_once(self):
        from test_listeners import otlp_request
        channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        export = channel.unary_unary(METHOD)
        body = otlp_request("grpc-flood", ["main", "work"], 5)
        outcomes = []
        lock = threading.Lock()

        def caller():
            for _ in range(20):
                try:
                    export(body, timeout=30)
                    result = "ok"
                except grpc.RpcError as e:
                    md = dict(e.trailing_metadata() or ())
                    result = (e.code(), "grpc-status-details-bin" in md)
                with lock:
                    outcomes.append(result)

        threads = [threading.Thread(target=caller) for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        channel.close()
        ok = outcomes.count("ok")
        refused = [o for o in outcomes if o != "ok"]
        self.assertEqual(len(outcomes), 32 * 20)
        self.assertGreater(len(refused), 0)
        self.assertEqual(set(refused), {(grpc.StatusCode.RESOURCE_EXHAUSTED, True)})
        self.assertEqual(self.c.metric(
            "flamecol_server_refused_requests_total",
            'transport="grpc",endpoint="127.0.0.1:%d",reason="overload"' % self.grpc_port),
            len(refused))
        q = urllib.parse.urlencode({"label": "service_name"})
        status, _, _ = http("GET", self.c.base + "/pyroscope/label-values?" + q)
        self.assertEqual(status, 200)
        print("\ngrpc: %d calls accepted, %d refused" % (ok, len(refused)))

    def test_grpc_gzip_bomb_is_refused_while_inflating(self):
        # 1 GiB of zeros as one message, gzip-compressed by the client (about 1 MB on the wire).
        channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port,
                                        options=[("grpc.max_send_message_length", -1)])
        export = channel.unary_unary(METHOD)
        bomb = bytes(1 << 30)
        with self.assertRaises(grpc.RpcError) as e:
            export(bomb, timeout=120, compression=grpc.Compression.Gzip)
        del bomb
        channel.close()
        self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("max_decompressed_size", e.exception.details())
        self.assertEqual(self.c.metric(
            "flamecol_server_refused_requests_total",
            'transport="grpc",endpoint="127.0.0.1:%d",reason="too_large"' % self.grpc_port), 1)
        if not sanitized(self.c.proc):
            self.assertLess(self.c.metric("flamecol_process_memory_peak_rss_bytes"), RSS_BOUND)
        status, _, _ = http("GET", self.c.metrics_base + "/ready")
        self.assertEqual(status, 200)


if __name__ == "__main__":
    unittest.main()
