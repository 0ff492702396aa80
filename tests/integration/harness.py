"""Runs the real flamecol binary on free loopback ports for integration tests.

No fixed sleeps: a started collector is waited for on /ready, a stopped one
with wait(). Everything a test needs is the real binary, real HTTP clients
and the shared corpus.
"""
import gzip
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

BIN = os.environ.get("FLAMECOL_BIN", "build/flamecol")
CORPUS = os.environ.get("FLAMECOL_CORPUS", os.path.join("..", "shared", "corpus"))


# pprof receiver -> store, query API on the same port (also used by tests/ui/browser.js);
# {sync} and {retention} to fill in, {port} {metrics} {dir} filled by Collector.
with open(os.path.join(os.path.dirname(__file__), "store_pipeline.yaml")) as _f:
    STORE_PIPELINE = _f.read()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def corpus_files():
    return sorted(f[:-6] for f in os.listdir(CORPUS) if f.endswith(".pb.gz"))


def convert(name, to="otlp", *labels):
    """A corpus profile converted by `flamecol convert` (OTLP protobuf or JSON)."""
    args = [BIN, "convert", "--to", to]
    for l in labels:
        args += ["--label", l]
    return subprocess.run(args + [os.path.join(CORPUS, name + ".pb.gz")], check=True,
                          capture_output=True).stdout


def read_corpus(name):
    with open(os.path.join(CORPUS, name + ".pb.gz"), "rb") as f:
        return f.read()


def parse_top(name):
    """The reference `pprof -top` file: {sample_index: (type, total, [(flat, function)])}."""
    sections = {}
    current = None
    with open(os.path.join(CORPUS, name + ".top.txt")) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("### sample_index="):
                current = int(line.split("=")[1])
                sections[current] = {"type": None, "total": None, "rows": []}
            elif current is None:
                continue
            elif line.startswith("Type: "):
                sections[current]["type"] = line[6:].strip()
            elif line.startswith("Showing nodes accounting for"):
                total = line.split(" of ")[1].split()[0]
                sections[current]["total"] = int(total.rstrip("Bnsm"))
            elif line.strip() and line.strip()[0].isdigit() and "%" in line:
                parts = line.split()
                flat = int(parts[0].rstrip("Bnsm"))
                fn = line.split("%", 4)[-1].strip()
                fn = fn.split("  ", 1)[-1].strip() if "  " in fn else fn
                fn = fn.replace(" (inline)", "")
                sections[current]["rows"].append((flat, fn))
    return sections


def http(method, url, body=None, headers=None, timeout=30):
    """Returns (status, headers, body bytes); HTTP errors are answers, not exceptions."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def multipart(fields, boundary="flamecol-test-boundary"):
    """fields: [(name, filename or None, content_type or None, bytes)] -> (content_type, body)."""
    out = b""
    for name, filename, ctype, data in fields:
        out += b"--" + boundary.encode() + b"\r\n"
        disp = 'form-data; name="%s"' % name
        if filename:
            disp += '; filename="%s"' % filename
        out += b"Content-Disposition: " + disp.encode() + b"\r\n"
        if ctype:
            out += b"Content-Type: " + ctype.encode() + b"\r\n"
        out += b"\r\n" + data + b"\r\n"
    out += b"--" + boundary.encode() + b"--\r\n"
    return "multipart/form-data; boundary=" + boundary, out


class Collector:
    """A flamecol process started from a YAML text with {placeholders} for ports."""

    def __init__(self, yaml_text, extra_args=(), env=None):
        self.dir = tempfile.mkdtemp(prefix="flamecol-it-")
        self.ports = {"port": free_port(), "metrics": free_port()}
        self.debug_path = os.path.join(self.dir, "debug.txt")
        text = yaml_text.replace("{dir}", self.dir).replace("{debug}", self.debug_path)
        for k, v in self.ports.items():
            text = text.replace("{%s}" % k, str(v))
        self.config = os.path.join(self.dir, "config.yaml")
        with open(self.config, "w") as f:
            f.write(text)
        self.stderr_path = os.path.join(self.dir, "stderr.txt")
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([BIN, "--config", self.config, *extra_args],
                                     stdout=subprocess.DEVNULL, stderr=self.stderr,
                                     env=dict(os.environ, **(env or {})))
        self.base = "http://127.0.0.1:%d" % self.ports["port"]
        self.metrics_base = "http://127.0.0.1:%d" % self.ports["metrics"]

    def wait_ready(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("flamecol exited with %d:\n%s" % (self.proc.returncode, self.log()))
            try:
                status, _, _ = http("GET", self.metrics_base + "/ready", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError("flamecol not ready after %ss:\n%s" % (timeout, self.log()))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Never leave a stuck process behind (it would load every later test).
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.stderr.close()
        return rc

    def log(self):
        if not self.stderr.closed:
            self.stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def debug_output(self):
        with open(self.debug_path) as f:
            return f.read()

    def metric(self, name, labels=""):
        _, _, body = http("GET", self.metrics_base + "/metrics")
        want = name + ("{" + labels + "}" if labels else "")
        for line in body.decode().splitlines():
            if line.startswith(want + " "):
                return float(line.split()[-1])
        return None

    def __enter__(self):
        self.wait_ready()
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.stderr.closed:
            self.stderr.close()


DEBUG_PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
exporters:
  debug:
    verbosity: detailed
    path: {debug}
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [debug]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


def debug_profiles(text):
    """Parses the debug exporter's detailed output into a list of profiles:
    {"summary": "profile 0 {labels} samples=..", "types": {"type:unit": {"total", "flat"}}}.
    Flat values are summed per leaf frame, as pprof -top computes them."""
    profiles = []
    batch = []
    current = None
    for line in text.splitlines():
        if line.startswith("batch "):
            batch = []
        elif line.startswith("profile "):
            p = {"summary": line, "types": {}}
            batch.append(p)
            profiles.append(p)
        elif line.startswith("# profile "):
            index = int(line.split()[2])
            t = line.split(" type=")[1].split()[0]
            current = batch[index]["types"].setdefault(t, {"total": 0, "flat": {}})
        elif line and current is not None:
            stack, value = line.rsplit(" ", 1)
            v = int(value)
            current["total"] += v
            leaf = stack.split(";")[-1]
            current["flat"][leaf] = current["flat"].get(leaf, 0) + v
    return profiles


def gunzip(data):
    return gzip.decompress(data)


def pb_varint(data, i):
    """The protobuf varint at data[i:], and the index after it."""
    v, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pb_varints(values):
    """A repeated integer field as read field by field: packed (bytes) or not (ints)."""
    out = []
    for v in values:
        if isinstance(v, bytes):
            i = 0
            while i < len(v):
                x, i = pb_varint(v, i)
                out.append(x)
        else:
            out.append(v)
    return out


# One processor between a pprof receiver and nop: for `flamecol validate` of its keys.
PROCESSOR_ONLY = """receivers:
  pprof:
    endpoint: 127.0.0.1:0
processors:
  %s:
%s
exporters:
  nop:
service:
  pipelines:
    profiles:
      receivers: [pprof]
      processors: [%s]
      exporters: [nop]
"""


def validate_processor(name, body):
    """validate_config of PROCESSOR_ONLY with processor `name` configured by body (indented 4)."""
    return validate_config(PROCESSOR_ONLY % (name, body, name), "bad.yaml")


def validate_config(text, name="config.yaml"):
    """`flamecol validate` on text written to a new temporary file: (exit code, stdout + stderr,
    the file's path, which error messages name)."""
    path = os.path.join(tempfile.mkdtemp(prefix="flamecol-validate-"), name)
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([BIN, "validate", "--config", path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr, path


# ---- protobuf, written by hand from the .proto field numbers (an encoder that is not flamecol's) --

def pb_put_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_ld(n, payload):
    """A length-delimited field."""
    return pb_put_varint(n << 3 | 2) + pb_put_varint(len(payload)) + payload


def pb_vi(n, v):
    """A varint field."""
    return pb_put_varint(n << 3) + pb_put_varint(v)


def pb_packed(n, values):
    return pb_ld(n, b"".join(pb_put_varint(v) for v in values))
