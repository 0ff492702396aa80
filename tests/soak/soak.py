#!/usr/bin/env python3
"""Soak: an hour (--minutes) of mixed good, bad and flood traffic against the
store, with `kill -9` every few minutes and a restart on the same data
directory. Not part of ./scripts/test. At the end it prints:

  acknowledged / lost / duplicated   every acknowledged push is one unique
                                     stack of value 1; the store must hold it
                                     exactly once
  refused                            429/503 answers (retryable, not losses)
  bad input answers                  status counts; anything but 4xx is a bug
  crashes                            exits that were not our kill -9
  peak RSS                           the highest VmHWM seen

and exits 1 when anything was lost or duplicated, a bad input got a 5xx or a
2xx, or the process crashed.

    /usr/bin/python3 tests/soak/soak.py [--minutes 60] [--bin build/flamecol]
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import free_port, http, pb_put_varint  # noqa: E402

CONFIG = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
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
    header_timeout: 3s
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


class Soak:
    def __init__(self, args):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="flamecol-soak-")
        self.ports = {"port": free_port(), "otlp": free_port(), "metrics": free_port()}
        text = CONFIG.replace("{dir}", self.dir)
        for k, v in self.ports.items():
            text = text.replace("{%s}" % k, str(v))
        self.config = os.path.join(self.dir, "config.yaml")
        with open(self.config, "w") as f:
            f.write(text)
        self.base = "http://127.0.0.1:%d" % self.ports["port"]
        self.lock = threading.Lock()
        self.acked = set()
        self.next_id = 0
        self.refused = 0
        self.unanswered = 0
        self.bad = {}
        self.crashes = []
        self.kills = 0
        self.peak_rss = 0
        self.proc = None
        self.expected_exit = False
        self.stop = threading.Event()
        self.started = time.time()

    # -- the process ---------------------------------------------------------------------------

    def start(self):
        log = open(os.path.join(self.dir, "stderr-%d.txt" % self.kills), "w")
        self.proc = subprocess.Popen([self.args.bin, "--config", self.config],
                                     stdout=subprocess.DEVNULL, stderr=log)
        self.expected_exit = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("flamecol exited at start with %d (see %s)" %
                                 (self.proc.returncode, log.name))
            try:
                if http("GET", "http://127.0.0.1:%d/ready" % self.ports["metrics"],
                        timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit("flamecol not ready after 60 s")

    def sample_rss(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        self.peak_rss = max(self.peak_rss, int(line.split()[1]) * 1024)
        except OSError:
            pass

    def kill_and_restart(self):
        self.sample_rss()
        self.expected_exit = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1
        self.start()

    def watch_crashes(self):
        while not self.stop.is_set():
            if self.proc.poll() is not None and not self.expected_exit:
                self.crashes.append((time.time() - self.started, self.proc.returncode))
                self.start()
            self.sample_rss()
            self.stop.wait(0.5)

    # -- traffic -------------------------------------------------------------------------------

    def good(self, worker):
        while not self.stop.is_set():
            with self.lock:
                pid = self.next_id
                self.next_id += 1
            body = ("soak;w%d;p%d 1\n" % (worker, pid)).encode()
            try:
                status, _, _ = http("POST", self.base + "/ingest?name=soak.cpu&format=folded",
                                    body, {"Content-Type": "text/plain"}, timeout=30)
            except OSError:
                status = None  # killed mid-request: not acknowledged
            with self.lock:
                if status == 200:
                    self.acked.add(pid)
                elif status in (429, 503):
                    self.refused += 1
                else:
                    self.unanswered += 1
            if status in (429, 503):
                time.sleep(0.2)

    def bad_inputs(self):
        deep = b""
        for _ in range(3000):  # an AnyValue nested 3,000 deep (array_value = 5, values = 1)
            deep = b"\x2a" + pb_put_varint(len(b"\x0a" + pb_put_varint(len(deep)) + deep)) + \
                b"\x0a" + pb_put_varint(len(deep)) + deep
        v = pb_put_varint
        attr = b"\x0a\x01k" + b"\x12" + v(len(deep)) + deep       # KeyValue{key, value}
        resource = b"\x0a" + v(len(attr)) + attr                 # Resource{attributes}
        rp = b"\x0a" + v(len(resource)) + resource              # ResourceProfiles{resource}
        deep_request = b"\x0a" + v(len(rp)) + rp                 # Export...Request
        cases = [
            ("/ingest?name=bad.cpu", b"\x1f\x8b garbage", "application/octet-stream", None),
            ("/ingest?name=bad{", b"main 1\n", "text/plain", None),
            ("/ingest?name=bad.cpu&format=folded", b"main x\n", "text/plain", None),
            ("/ingest?name=bad.cpu", b"main 1\n", "text/plain", "bad tenant"),
            ("/push.v1.PusherService/Push", b"\xff\xff\xff", "application/proto", None),
            ("/ingest?name=bad.cpu", os.urandom(4096), "application/octet-stream", None),
        ]
        otlp = "http://127.0.0.1:%d/v1development/profiles" % self.ports["otlp"]
        while not self.stop.is_set():
            if random.random() < 0.2:
                body = random.choice([deep_request, b"\x0a\x80\x80\x80\x80\x01"])
                url, ctype, tenant = otlp, "application/x-protobuf", None
            else:
                path, body, ctype, tenant = random.choice(cases)
                url = self.base + path
            headers = {"Content-Type": ctype}
            if tenant:
                headers["X-Scope-OrgID"] = tenant
            try:
                status = http("POST", url, body, headers, timeout=30)[0]
            except OSError:
                status = "no answer"
            with self.lock:
                self.bad[status] = self.bad.get(status, 0) + 1
            self.stop.wait(0.05)

    def flood(self):
        """Every minute, 400 connections for 10 s, then slow sockets for 10 s."""
        while not self.stop.wait(60):
            socks = []
            for _ in range(400):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", self.ports["port"]), 5))
                except OSError:
                    pass
            req = (b"POST /ingest?name=flood.cpu&format=folded HTTP/1.1\r\nHost: x\r\n"
                   b"Content-Type: text/plain\r\nContent-Length: 7\r\n\r\nmain 1\n")
            end = time.monotonic() + 10
            while time.monotonic() < end and not self.stop.is_set():
                for s in socks:
                    try:
                        s.sendall(req)
                        s.settimeout(5)
                        s.recv(65536)
                    except OSError:
                        pass
            for s in socks:
                s.close()

    def run(self):
        self.start()
        threads = [threading.Thread(target=self.good, args=(w,)) for w in range(8)]
        threads += [threading.Thread(target=self.bad_inputs), threading.Thread(target=self.flood),
                    threading.Thread(target=self.watch_crashes)]
        for t in threads:
            t.start()
        end = time.monotonic() + self.args.minutes * 60
        while time.monotonic() < end:
            time.sleep(min(end - time.monotonic(), random.uniform(120, 300)))
            if time.monotonic() < end:
                self.kill_and_restart()
                print("%.0f s: kill -9 #%d, %d acknowledged so far" %
                      (time.time() - self.started, self.kills, len(self.acked)), flush=True)
        self.stop.set()
        for t in threads:
            t.join()
        self.sample_rss()
        return self.report()

    def report(self):
        q = urllib.parse.urlencode({"query": 'process_cpu:cpu:nanoseconds:cpu:nanoseconds'
                                    '{service_name="soak"}', "from": str(int(self.started) - 60),
                                    "until": "now+1h", "format": "folded", "maxNodes": "0"})
        status, _, text = http("GET", self.base + "/pyroscope/render?" + q, timeout=300)
        if status != 200:
            raise SystemExit("query failed: %s %s" % (status, text[:200]))
        stored = {}
        for line in text.decode().splitlines():
            stack, value = line.rsplit(" ", 1)
            pid = int(stack.rsplit(";p", 1)[1])
            stored[pid] = stored.get(pid, 0) + int(value) // (10**9 // 100)
        lost = [p for p in self.acked if stored.get(p, 0) == 0]
        dups = [p for p in self.acked if stored.get(p, 0) > 1]
        bad_ok = {k: v for k, v in self.bad.items() if not (isinstance(k, int) and 400 <= k < 500
                                                             and k != 429)}
        print("minutes %.1f, kill -9 %d" % ((time.time() - self.started) / 60, self.kills))
        print("acknowledged %d, lost %d, duplicated %d (stored unacknowledged %d)" % (
            len(self.acked), len(lost), len(dups), len(set(stored) - self.acked)))
        print("refused (429/503) %d, good pushes without an answer (at a kill) %d" % (
            self.refused, self.unanswered))
        print("bad input answers %s" % dict(sorted(self.bad.items(), key=str)))
        print("crashes %d %s" % (len(self.crashes), self.crashes))
        print("peak RSS %.1f MB" % (self.peak_rss / 1e6))
        self.expected_exit = True
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        failed = lost or dups or self.crashes or set(bad_ok) - {429, "no answer"}
        return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--bin", default=os.environ.get("FLAMECOL_BIN", "build/flamecol"))
    sys.exit(Soak(ap.parse_args()).run())


if __name__ == "__main__":
    main()
