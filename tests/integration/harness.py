"""Runs the real flamecol binary on free loopback ports for integration tests.

No fixed sleeps: a started collector is waited for on /ready, a stopped one
with wait(). Everything a test needs is the real binary, real HTTP clients
and the shared corpus.
"""
import atexit
import gzip
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

BIN = os.environ.get("FLAMECOL_BIN", "build/flamecol")

# scripts/mutations sets FLAMECOL_FAILFAST: a planted bug is caught at the first failing
# test case, so the rest of the file need not run. It sets FC_TEST_FILTER from a planted
# bug's "# only:" line: only the test cases whose names hold it (unittest's -k) run.
_FAILFAST = os.environ.get("FLAMECOL_FAILFAST")
_ONLY = os.environ.get("FC_TEST_FILTER")
if _FAILFAST or _ONLY:
    _main = unittest.main

    def _narrowed_main(*args, **kwargs):
        if _FAILFAST:
            kwargs.setdefault("failfast", True)
        if _ONLY:
            kwargs.setdefault("argv", sys.argv + ["-k", _ONLY])
        return _main(*args, **kwargs)

    unittest.main = _narrowed_main
CORPUS = os.environ.get("FLAMECOL_CORPUS", os.path.join("..", "shared", "corpus"))


# pprof receiver -> store, query API on the same port (also used by tests/ui/browser.js);
# {sync} and {retention} to fill in, {port} {metrics} {dir} filled by Collector.
with open(os.path.join(os.path.dirname(__file__), "store_pipeline.yaml")) as _f:
    STORE_PIPELINE = _f.read()


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


_PORT_DIR = os.path.join(tempfile.gettempdir(), "flamecol-test-ports")
_PORT_HOLD_S = 900  # a reservation older than this is stale (its test is long over)


def _reserve(port):
    """Across the test processes running at once (ctest -j): the first to create
    the port's file has it; a file older than _PORT_HOLD_S is taken over."""
    path = os.path.join(_PORT_DIR, str(port))
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime < _PORT_HOLD_S:
                return False
            os.utime(path)
            return True
        except OSError:
            return False


def free_port():
    """A loopback port nothing listens on, outside the kernel's ephemeral range
    (a port from that range, what bind(0) gives, can be taken by any outgoing
    connection before flamecol binds it), and reserved for this process so that
    a test running in parallel does not pick it too."""
    lo, hi = _ephemeral_range()
    first, last = (10000, lo - 1) if lo > 12000 else (hi + 1, 65535)
    os.makedirs(_PORT_DIR, exist_ok=True)
    for _ in range(1000):
        port = random.randint(first, last)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if _reserve(port):
            return port
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


def scratch_dir(prefix):
    """A new temporary directory, removed when this test process exits (not before: a test
    may read a stopped collector's log or reopen its store)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


class Collector:
    """A flamecol process started from a YAML text with {placeholders} for ports."""

    def __init__(self, yaml_text, extra_args=(), env=None):
        self.dir = scratch_dir("flamecol-it-")
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
        try:
            self.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)  # not left running (and its port held) by a failed start
            raise
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.stderr.closed:
            self.stderr.close()


# The pprof and otlp receivers (gRPC and HTTP on ports of their own) into the store.
OTLP_STORE_PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
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
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


def start_otlp_store():
    """A ready flamecol on OTLP_STORE_PIPELINE: (collector, gRPC port, OTLP/HTTP URL)."""
    grpc_port, otlp_port = free_port(), free_port()
    c = Collector(OTLP_STORE_PIPELINE.replace("{grpc}", str(grpc_port))
                  .replace("{otlp}", str(otlp_port)))
    c.wait_ready()
    return c, grpc_port, "http://127.0.0.1:%d/v1development/profiles" % otlp_port


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
    path = os.path.join(scratch_dir("flamecol-validate-"), name)
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


# ---- Go's pprof: the reference the store's answers are compared with ----------------------------
# scripts/setup (run by scripts/test) builds it from Debian's packages at build/tools/pprof;
# FLAMECOL_PPROF names another one (scripts/mutations points it at the checkout's).
import re  # noqa: E402 (only the pprof report parsers below use it)

PPROF = os.environ.get("FLAMECOL_PPROF") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "tools", "pprof")


def pb_fields(data):
    """{field: [values]} of one protobuf message: varints and fixed64/fixed32 as ints,
    length-delimited as bytes."""
    fields, i = {}, 0
    while i < len(data):
        key, i = pb_varint(data, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = pb_varint(data, i)
        elif wire == 2:
            n, i = pb_varint(data, i)
            v, i = data[i:i + n], i + n
        elif wire == 1:
            v, i = int.from_bytes(data[i:i + 8], "little"), i + 8
        elif wire == 5:
            v, i = int.from_bytes(data[i:i + 4], "little"), i + 4
        else:
            raise AssertionError("wire type %d" % wire)
        fields.setdefault(num, []).append(v)
    return fields


def pprof_header(name):
    """([(type, unit)] by sample index, (period type, unit), period) of a corpus file,
    read with profile.proto's field numbers: Profile.sample_type = 1,
    string_table = 6, period_type = 11, period = 12; ValueType.type = 1, unit = 2."""
    raw = read_corpus(name)
    prof = pb_fields(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    strings = [s.decode() for s in prof.get(6, [])]

    def vt(b):
        f = pb_fields(b)
        return strings[f.get(1, [0])[0]], strings[f.get(2, [0])[0]]

    types = [vt(b) for b in prof.get(1, [])]
    period_type = vt(prof[11][0]) if 11 in prof else ("", "")
    return types, period_type, prof.get(12, [0])[0]


def entries(listed):
    """A list of (total, flat) as a comparable value: flat rows of 0 left out, sorted."""
    return sorted((total, sorted((fn, v) for fn, v in flat.items() if v)) for total, flat in listed)


def go_pprof():
    """The path of Go's pprof. Missing is a failure, never a skip: CI must compare with it."""
    if not os.access(PPROF, os.X_OK):
        raise AssertionError("Go's pprof is not at %s: run scripts/setup --deps (it builds it from "
                             "Debian's golang-github-google-pprof-dev)" % PPROF)
    return PPROF


def run_pprof(*args, cwd=None):
    """stdout of `pprof ARGS...`; a non-zero exit is a failure showing pprof's stderr."""
    r = subprocess.run([go_pprof(), *args], capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise AssertionError("pprof %s: exit %d\n%s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def pprof_raw_header(path):
    """What `pprof -raw` says of a profile: {"period_type": (type, unit) or None, "period": int,
    "sample_types": [(type, unit), ...]} in the profile's order."""
    out = {"period_type": None, "period": 0, "sample_types": []}
    lines = run_pprof("-raw", path).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("PeriodType: "):
            t, u = line[len("PeriodType: "):].split()
            out["period_type"] = (t, u)
        elif line.startswith("Period: "):
            out["period"] = int(line.split()[1])
        elif line == "Samples:":
            for st in lines[i + 1].split():
                t, u = st.replace("[dflt]", "").split("/")
                out["sample_types"].append((t, u))
            break
    return out


def pprof_value(text):
    """An exact value of a pprof report cell printed with -unit=ns ("200000000ns", "166563665B",
    "12720", "0"): its integer."""
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if not digits.lstrip("-").isdigit():
        raise AssertionError("pprof printed %r: not an exact value (is -unit=ns given?)" % text)
    return int(digits)


def pprof_top(paths, *options):
    """`pprof -top` of one or more profiles (pprof merges several itself), every node and exact
    values: {"header": [lines before the column titles], "type": the Type: line's value,
    "total": int, "rows": [(name, inline mark, flat, cum)]}; the name is pprof's (with -lines:
    "function file:line"), the inline mark "", "(inline)" or "(partial-inline)"."""
    if isinstance(paths, str):
        paths = [paths]
    text = run_pprof("-top", "-unit=ns", "-nodecount=1000000", "-nodefraction=0",
                     "-edgefraction=0", *options, *paths)
    out = {"header": [], "type": None, "total": None, "rows": []}
    lines = text.splitlines()
    i = 0
    while i < len(lines) and lines[i].split() != ["flat", "flat%", "sum%", "cum", "cum%"]:
        line = lines[i]
        out["header"].append(line)
        if line.startswith("Type: "):
            out["type"] = line[len("Type: "):].strip()
        elif line.startswith("Showing nodes accounting for "):
            out["total"] = pprof_value(line.split(" of ")[1].split()[0].rstrip(","))
        i += 1
    if i == len(lines):
        raise AssertionError("no column titles in pprof -top output:\n" + text)
    row = re.compile(r"^\s*(\S+)\s+\S+%\s+\S+%\s+(\S+)\s+\S+%  (.*)$")
    for line in lines[i + 1:]:
        m = row.match(line)
        if not m:
            raise AssertionError("unexpected pprof -top line %r" % line)
        name, mark = m.group(3), ""
        for suffix in (" (inline)", " (partial-inline)"):
            if name.endswith(suffix):
                name, mark = name[:-len(suffix)], suffix[1:]
        out["rows"].append((name, mark, pprof_value(m.group(1)), pprof_value(m.group(2))))
    return out


def pprof_top_flat(top):
    """{function: flat} of pprof_top rows, rows of one name summed, zero rows left out (what a
    flame graph's self values add up to per name)."""
    flat = {}
    for name, _, f, _ in top["rows"]:
        if f:
            flat[name] = flat.get(name, 0) + f
    return flat


def flamegraph_paths(names, levels):
    """{root-first "a;b;c" path: [total, self]} of a flame graph given as names and levels of
    [x delta, total, self, name index] quadruples (flamebearer): each node's parent is the node
    one level up whose span holds its x; nodes of the same path are added up."""
    out, above = {}, []
    for level in levels:
        here, x, j = [], 0, 0
        for i in range(0, len(level), 4):
            x += int(level[i])
            total = int(level[i + 1])
            while j < len(above) and above[j][1] <= x:
                j += 1  # parents ending at or before x (x only grows along a level)
            if above and not (j < len(above) and above[j][0] <= x < above[j][1]):
                raise AssertionError("node at x=%d has no parent" % x)
            path = (above[j][2] + ";" if above else "") + names[int(level[i + 3])]
            node = out.setdefault(path, [0, 0])
            node[0] += total
            node[1] += int(level[i + 2])
            here.append((x, x + total, path))
            x += total
        above = here
    return out


def flamegraph_flat(names, levels):
    """(total, {function: self}) of a flame graph given as names and levels of [x, total, self,
    name index] quadruples (flamebearer and Connect's FlameGraph alike); zero selfs left out."""
    flat, total = {}, 0
    for depth, level in enumerate(levels):
        for i in range(0, len(level), 4):
            if depth == 0:
                total += int(level[i + 1])
            if int(level[i + 2]):
                name = names[int(level[i + 3])]
                flat[name] = flat.get(name, 0) + int(level[i + 2])
    return total, flat


def _one(fields, n):
    return fields.get(n, [0])[0]


def otlp_unused_rows(body):
    """The problems of one OTLP ExportProfilesServiceRequest's dictionary, read from the wire
    (profiles.proto's field numbers): rows nothing reaches ("unused string 7") and indices
    past their table ("dangling link 3"). Index 0 of every table is the zero row."""
    req = pb_fields(body)
    d = pb_fields(_one(req, 2) or b"")
    names = {1: "mapping", 2: "location", 3: "function", 4: "link", 5: "string",
             6: "attribute", 7: "stack"}
    tabs = {k: d.get(k, []) for k in names}
    used = {k: {0} for k in names}
    problems = []

    def mark(k, i):
        if i >= max(1, len(tabs[k])):
            problems.append("dangling %s %d" % (names[k], i))
            return False
        new = i not in used[k]
        used[k].add(i)
        return new

    def key_values(kvs):  # common.v1.KeyValue: key_strindex 3, AnyValue string_value_strindex 8
        for kv in kvs:
            f = pb_fields(kv)
            mark(5, _one(f, 3))
            if 2 in f:
                mark(5, _one(pb_fields(f[2][0]), 8))

    for rp in req.get(1, []):
        rpf = pb_fields(rp)
        for res in rpf.get(1, []):
            key_values(pb_fields(res).get(1, []))
        for sp in rpf.get(2, []):
            spf = pb_fields(sp)
            for scope in spf.get(1, []):
                key_values(pb_fields(scope).get(3, []))
            for prof in spf.get(2, []):
                p = pb_fields(prof)
                for vt in p.get(1, []) + p.get(5, []):
                    v = pb_fields(vt)
                    mark(5, _one(v, 1))
                    mark(5, _one(v, 2))
                for a in pb_varints(p.get(11, [])):
                    mark(6, a)
                for s in p.get(2, []):
                    x = pb_fields(s)
                    mark(7, _one(x, 1))
                    mark(4, _one(x, 3))
                    for a in pb_varints(x.get(2, [])):
                        mark(6, a)
    for i in sorted(used[7]):
        if i < len(tabs[7]):
            for loc in pb_varints(pb_fields(tabs[7][i]).get(1, [])):
                mark(2, loc)
    for i in sorted(used[2]):
        if i < len(tabs[2]):
            x = pb_fields(tabs[2][i])
            mark(1, _one(x, 1))
            for a in pb_varints(x.get(4, [])):
                mark(6, a)
            for line in x.get(3, []):
                mark(3, _one(pb_fields(line), 1))
    for i in sorted(used[3]):
        if i < len(tabs[3]):
            x = pb_fields(tabs[3][i])
            for k in (1, 2, 3):
                mark(5, _one(x, k))
    for i in sorted(used[1]):
        if i < len(tabs[1]):
            x = pb_fields(tabs[1][i])
            mark(5, _one(x, 4))
            for a in pb_varints(x.get(5, [])):
                mark(6, a)
    for i in sorted(used[6]):
        if i < len(tabs[6]):
            x = pb_fields(tabs[6][i])
            mark(5, _one(x, 1))
            mark(5, _one(x, 3))
            if 2 in x:
                mark(5, _one(pb_fields(x[2][0]), 8))
    for k, name in names.items():
        for i in sorted(set(range(len(tabs[k]))) - used[k]):
            problems.append("unused %s %d%s" % (name, i, " %r" % tabs[k][i][:40] if k == 5 else ""))
    return problems
