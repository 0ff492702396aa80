"""The real binary: start on free ports, /ready, /healthz, /metrics, start and
stop order, SIGTERM and SIGINT exit 0, a port in use fails the start."""
import signal
import socket
import time
import unittest

from harness import DEBUG_PIPELINE, Collector, http


class RunTest(unittest.TestCase):
    def test_ready_metrics_and_clean_sigterm(self):
        c = Collector(DEBUG_PIPELINE)
        with c:
            self.assertEqual(http("GET", c.metrics_base + "/healthz")[0], 200)
            status, headers, body = http("GET", c.metrics_base + "/metrics")
            self.assertEqual(status, 200)
            self.assertIn("text/plain", headers["Content-Type"])
            text = body.decode()
            for name in ("flamecol_receiver_accepted_profile_samples_total{receiver=\"pprof\"}",
                         "flamecol_receiver_refused_profile_samples_total{receiver=\"pprof\"}",
                         "flamecol_exporter_sent_profile_samples_total{exporter=\"debug\"}",
                         "flamecol_exporter_send_failed_profile_samples_total{exporter=\"debug\"}",
                         "flamecol_exporter_queue_size{exporter=\"debug\"}",
                         "flamecol_process_memory_rss_bytes",
                         "flamecol_process_cpu_seconds_total"):
                self.assertIn(name + " ", text)
            self.assertGreater(c.metric("flamecol_process_memory_rss_bytes"), 0)
            rc = c.stop(signal.SIGTERM)
        self.assertEqual(rc, 0, c.log())
        log = c.log()
        # Start: exporters, then receivers; stop: receivers, then exporters.
        order = [l for l in log.splitlines() if "started" in l or "stopped" in l]
        names = [("exporter" if "exporter " in l else "receiver") + (" up" if "started" in l else " down")
                 for l in order]
        self.assertEqual(names, ["exporter up", "receiver up", "receiver down", "exporter down"], log)
        self.assertIn("shutdown complete", log)
        for line in log.splitlines():
            self.assertRegex(line, r"^ts=\S+ level=(debug|info|warn|error)( component=\S+)? msg=\".*\"$")

    def test_sigint_also_exits_zero(self):
        c = Collector(DEBUG_PIPELINE)
        with c:
            rc = c.stop(signal.SIGINT)
        self.assertEqual(rc, 0, c.log())

    def test_port_in_use_fails_start_with_a_message(self):
        blocker = socket.socket()
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        try:
            c = Collector(DEBUG_PIPELINE.replace("127.0.0.1:{port}", "127.0.0.1:%d" % port))
            rc = c.proc.wait(timeout=20)
            c.stderr.close()
            self.assertEqual(rc, 1)
            self.assertIn("cannot listen on 127.0.0.1:%d" % port, c.log())
        finally:
            blocker.close()

    def test_stuck_client_is_cut_off_and_others_are_served(self):
        c = Collector(DEBUG_PIPELINE + "  http:\n    read_timeout: 1s\n")
        with c:
            stuck = socket.create_connection(("127.0.0.1", c.ports["port"]))
            stuck.sendall(b"POST /ingest?name=x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab")
            # Meanwhile the collector serves others.
            self.assertEqual(http("POST", c.base + "/ingest?name=ok.cpu", b"a;b 1")[0], 200)
            stuck.settimeout(15)
            start = time.monotonic()
            try:
                data = stuck.recv(4096)
            except ConnectionResetError:
                data = b""
            self.assertEqual(data, b"", "the server should close an idle, unfinished request")
            self.assertLess(time.monotonic() - start, 15)
            stuck.close()
            self.assertEqual(c.stop(), 0, c.log())

    def test_shared_endpoint_serves_both_components(self):
        # The telemetry endpoint and the pprof receiver on one port: one listener.
        c = Collector(DEBUG_PIPELINE.replace("127.0.0.1:{metrics}", "127.0.0.1:{port}"))
        c.metrics_base = c.base
        with c:
            self.assertEqual(http("GET", c.base + "/ready")[0], 200)
            self.assertEqual(http("POST", c.base + "/ingest?name=x", b"a;b 1")[0], 200)
            self.assertEqual(http("GET", c.base + "/nothing-here")[0], 404)
            self.assertEqual(c.stop(), 0, c.log())


if __name__ == "__main__":
    unittest.main()
