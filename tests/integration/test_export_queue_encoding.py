"""Requests wait in a persistent queue while the peer is down; A (pprof receiver ->
otlp/otlphttp exporter with `sending_queue.storage`) restarts with another `encoding` /
`compression` and must still send them as they were encoded, labelled so; the peer B (a
real flamecol with the store) then answers pprof -top's totals. (Its own file: the
exporter mutations naming test_export_otlp need not wait for these restarts.)"""
import json
import shutil
import unittest
import urllib.parse

from harness import scratch_dir, Collector, free_port, http, parse_top, read_corpus
from test_export_otlp import (B_CONFIG, flamebearer_flat, metric, push, sent_requests, start_a,
                              stop_checked, wait_for)


class QueuedRecordsKeepTheirEncodingTest(unittest.TestCase):
    """Requests wait in a persistent queue while the peer is down; A restarts with another
    `encoding` / `compression` and must still send them as they were encoded (labelled so),
    not refused by the peer and dropped."""

    def reconfigure(self, kind, first, second):
        b_grpc, b_http = free_port(), free_port()
        endpoint = ("127.0.0.1:%d" % b_grpc) if kind == "otlp" else ("http://127.0.0.1:%d" % b_http)
        qdir = scratch_dir("flamecol-it-queue-")
        queue = "    sending_queue:\n      storage: %s\n" % qdir
        try:
            # `with`: a failed check still kills A (no process outlives the test).
            with start_a(kind, endpoint, first + queue, max_elapsed="0s") as a:
                push(a, read_corpus("go-1s-cpu"), "requeued")
                wait_for(lambda: metric(a, "flamecol_exporter_retries_total", kind) >= 1, 30,
                         "a retry")
                stop_checked(self, a)
            b = Collector(B_CONFIG.replace("{grpc}", str(b_grpc)).replace("{http}", str(b_http)))
            with b:
                b.wait_ready()
                with start_a(kind, endpoint, second + queue, max_elapsed="0s") as a:
                    wait_for(lambda: sent_requests(a, kind) >= 1, 30, "the queued request sent")
                    self.assertEqual(metric(a, "flamecol_exporter_send_failed_requests_total",
                                            kind), 0, a.log())
                    stop_checked(self, a)
                top = parse_top("go-1s-cpu")
                for section in top.values():
                    t = "process_cpu:%s:%s:cpu:nanoseconds" % (
                        section["type"], "count" if section["type"] == "samples" else "nanoseconds")
                    q = {"query": t + '{service_name="requeued"}', "from": "0", "until": "now"}
                    status, _, body = http("GET", b.base + "/pyroscope/render?" + urllib.parse.urlencode(q))
                    self.assertEqual(status, 200, body)
                    self.assertEqual(flamebearer_flat(json.loads(body))[0], section["total"], t)
                self.assertEqual(b.stop(), 0, b.log())
        finally:
            shutil.rmtree(qdir, ignore_errors=True)

    def test_otlphttp_proto_gzip_then_json(self):
        self.reconfigure("otlphttp", "", "    encoding: json\n    compression: none\n")

    def test_otlphttp_json_gzip_then_proto_none(self):
        self.reconfigure("otlphttp", "    encoding: json\n", "    compression: none\n")

    def test_otlphttp_proto_zstd_then_json_gzip(self):
        self.reconfigure("otlphttp", "    compression: zstd\n", "    encoding: json\n")

    def test_otlp_gzip_then_none(self):
        self.reconfigure("otlp", "    tls: {insecure: true}\n",
                         "    tls: {insecure: true}\n    compression: none\n")

    def test_otlp_none_then_gzip(self):
        self.reconfigure("otlp", "    tls: {insecure: true}\n    compression: none\n",
                         "    tls: {insecure: true}\n")


if __name__ == "__main__":
    unittest.main()
