"""The store keeps what a user needs to go down to the line (issue 13).

Small pprof profiles are written here by hand (profile.proto's field numbers, not
flamecol's encoder), with known functions, files, lines, an inlined chain, a function whose
system name differs from its name, and an unsymbolized address in a shared library's
mapping; they are pushed to /ingest and every answer is compared with values computed by
hand below:
- the flame graph stays by function name (folded and flamebearer), and by line with
  &granularity=lines;
- the merged profile (format=pprof) carries every location's lines (the inlined chain as one
  location, innermost first), functions with system name, file and start line, and the
  mapping and address of the unsymbolized frame; Go's pprof prints the same -top,
  -top -lines and -list for it as for the original file;
- /api/v1/function and `flamecol query --function` give self and total per line, callers and
  callees, each sample counted once per stack (a recursive profile checks that).
"""
import gzip
import json
import os
import shutil
import subprocess
import unittest
import urllib.parse

from harness import scratch_dir, BIN, Collector, STORE_PIPELINE, http, pb_fields, pb_ld, pb_packed, pb_varints, pb_vi, \
    run_pprof

FROM = 1700000000

# ---- a pprof profile by hand -------------------------------------------------------------------


class Profile:
    """Builds a profile.proto message: strings, mappings, functions, locations, samples."""

    def __init__(self, sample_type=("cpu", "nanoseconds"), period_type=("cpu", "nanoseconds")):
        self.strings = [""]
        self.mappings, self.functions, self.locations, self.samples = [], [], [], []
        self.sample_type = sample_type
        self.period_type = period_type

    def s(self, text):
        if text not in self.strings:
            self.strings.append(text)
        return self.strings.index(text)

    def mapping(self, start, limit, offset, file, build_id, has_functions):
        mid = len(self.mappings) + 1
        self.mappings.append(pb_vi(1, mid) + pb_vi(2, start) + pb_vi(3, limit) + pb_vi(4, offset)
                             + pb_vi(5, self.s(file)) + pb_vi(6, self.s(build_id))
                             + pb_vi(7, has_functions) + pb_vi(8, has_functions)
                             + pb_vi(9, has_functions) + pb_vi(10, has_functions))
        return mid

    def function(self, name, file, start_line, system_name=None):
        fid = len(self.functions) + 1
        self.functions.append(pb_vi(1, fid) + pb_vi(2, self.s(name))
                              + pb_vi(3, self.s(name if system_name is None else system_name))
                              + pb_vi(4, self.s(file)) + pb_vi(5, start_line))
        return fid

    def location(self, mapping, address, lines):
        """lines: [(function id, line)], innermost first (pprof's order)."""
        lid = len(self.locations) + 1
        body = pb_vi(1, lid) + pb_vi(2, mapping) + pb_vi(3, address)
        for fid, line in lines:
            body += pb_ld(4, pb_vi(1, fid) + pb_vi(2, line))
        self.locations.append(body)
        return lid

    def sample(self, locations, value):
        """locations leaf first; one value."""
        self.samples.append(pb_packed(1, locations) + pb_packed(2, [value]))

    def encode(self):
        vt = pb_vi(1, self.s(self.sample_type[0])) + pb_vi(2, self.s(self.sample_type[1]))
        pt = pb_vi(1, self.s(self.period_type[0])) + pb_vi(2, self.s(self.period_type[1]))
        out = pb_ld(1, vt)
        out += b"".join(pb_ld(2, x) for x in self.samples)
        out += b"".join(pb_ld(3, x) for x in self.mappings)
        out += b"".join(pb_ld(4, x) for x in self.locations)
        out += b"".join(pb_ld(5, x) for x in self.functions)
        out += b"".join(pb_ld(6, x.encode()) for x in self.strings)
        out += pb_vi(9, FROM * 10**9) + pb_ld(11, pt) + pb_vi(12, 10000000)
        return gzip.compress(out)


LD = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
UNSYMBOLIZED = 0x7F0000001234


def app_profile():
    """main -> work (lines 25, 27, 30) -> leaf / helper (inlined into work at line 30) /
    an unsymbolized frame of ld-linux."""
    p = Profile()
    binary = p.mapping(0x400000, 0x500000, 0, "/src/app/app", "app-build", 1)
    ld = p.mapping(0x7F0000000000, 0x7F0000100000, 0x1000, LD, "ld-build-id", 0)
    f_main = p.function("main", "/src/app/main.go", 10)
    f_work = p.function("work", "/src/app/work.go", 20, system_name="pkg.work")
    f_helper = p.function("helper", "/src/app/work.go", 40)
    f_leaf = p.function("leaf", "/src/app/leaf.go", 5)
    l_main = p.location(binary, 0x401000, [(f_main, 12)])
    l_work25 = p.location(binary, 0x402000, [(f_work, 25)])
    l_work27 = p.location(binary, 0x402010, [(f_work, 27)])
    l_inl = p.location(binary, 0x402020, [(f_helper, 42), (f_work, 30)])
    l_leaf = p.location(binary, 0x403000, [(f_leaf, 7)])
    l_ld = p.location(ld, UNSYMBOLIZED, [])
    p.sample([l_leaf, l_work25, l_main], 100)
    p.sample([l_leaf, l_work27, l_main], 200)
    p.sample([l_inl, l_main], 300)
    p.sample([l_ld, l_work25, l_main], 50)
    p.sample([l_work27, l_main], 10)
    return p.encode()


def recursive_profile():
    """main -> rec:5 -> rec:6 -> rec:6 (self 40), and main -> rec:5 (self 7)."""
    p = Profile()
    f_main = p.function("main", "/src/rec/main.go", 1)
    f_rec = p.function("rec", "/src/rec/rec.go", 4)
    l_main = p.location(0, 0x1000, [(f_main, 3)])
    l_rec5 = p.location(0, 0x2000, [(f_rec, 5)])
    l_rec6 = p.location(0, 0x2010, [(f_rec, 6)])
    p.sample([l_rec6, l_rec6, l_rec5, l_main], 40)
    p.sample([l_rec5, l_main], 7)
    return p.encode()


TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

# ---- reading the store's pprof (profile.proto field numbers) ------------------------------------


def decode_profile(data):
    """[(stack, value)] with each stack leaf first, each location as
    (mapping (file, build id, start, limit, offset) or None, address, ((name, system name,
    file, start line, line), ...)) -- the address only where there are no lines (the store
    keeps it for unsymbolized frames only)."""
    prof = pb_fields(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    st = [s.decode() for s in prof.get(6, [])]
    mappings, functions, locations = {}, {}, {}
    for raw in prof.get(3, []):
        m = pb_fields(raw)
        g = lambda k: m.get(k, [0])[0]  # noqa: E731
        mappings[g(1)] = (st[g(5)], st[g(6)], g(2), g(3), g(4))
    for raw in prof.get(5, []):
        f = pb_fields(raw)
        g = lambda k: f.get(k, [0])[0]  # noqa: E731
        functions[g(1)] = (st[g(2)], st[g(3)], st[g(4)], g(5))
    for raw in prof.get(4, []):
        loc = pb_fields(raw)
        lines = []
        for ln in loc.get(4, []):
            lf = pb_fields(ln)
            lines.append(functions[lf.get(1, [0])[0]] + (lf.get(2, [0])[0],))
        mid = loc.get(2, [0])[0]
        locations[loc[1][0]] = (mappings.get(mid) if mid else None,
                                0 if lines else loc.get(3, [0])[0], tuple(lines))
    out = []
    for raw in prof.get(2, []):
        s = pb_fields(raw)
        ids = pb_varints(s.get(1, []))
        values = pb_varints(s.get(2, []))
        out.append((tuple(locations[i] for i in ids), values[0]))
    return sorted(out, key=repr)


MAIN = (None, 0, (("main", "main", "/src/app/main.go", 10, 12),))
WORK = {n: (None, 0, (("work", "pkg.work", "/src/app/work.go", 20, n),)) for n in (25, 27)}
INLINED = (None, 0, (("helper", "helper", "/src/app/work.go", 40, 42),
                     ("work", "pkg.work", "/src/app/work.go", 20, 30)))
LEAF = (None, 0, (("leaf", "leaf", "/src/app/leaf.go", 5, 7),))
LDLOC = ((LD, "ld-build-id", 0x7F0000000000, 0x7F0000100000, 0x1000), UNSYMBOLIZED, ())


class StoreLinesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0"))
        cls.addClassCleanup(cls.c.__exit__, None, None, None)
        cls.work = scratch_dir("flamecol-lines-")
        cls.addClassCleanup(shutil.rmtree, cls.work, True)
        cls.c.wait_ready()
        cls.app = app_profile()
        cls.rec = recursive_profile()
        for name, body in (("lines-app", cls.app), ("lines-rec", cls.rec)):
            status, _, text = http("POST", cls.c.base + "/ingest?name=%s&from=%d" % (name, FROM), body,
                                   {"Content-Type": "application/octet-stream"})
            assert status == 200, text

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def get(self, path, **params):
        status, _, body = http("GET", self.c.base + path + "?" + urllib.parse.urlencode(params))
        return status, body

    def render(self, service, **extra):
        status, body = self.get("/pyroscope/render", query=TYPE + '{service_name="%s"}' % service,
                                **{"from": str(FROM - 60), "until": str(FROM + 60)}, **extra)
        self.assertEqual(status, 200, body)
        return body

    def folded(self, service, **extra):
        text = self.render(service, format="folded", **extra).decode()
        return dict((l.rsplit(" ", 1)[0], int(l.rsplit(" ", 1)[1])) for l in text.splitlines())

    def write(self, name, data):
        path = os.path.join(self.work, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_flame_graph_is_by_function_name(self):
        # work's three lines are one node; helper (inlined) is a frame of its own.
        self.assertEqual(self.folded("lines-app"), {
            "main;work": 10,
            "main;work;leaf": 300,
            "main;work;helper": 300,
            "main;work;0x7f0000001234": 50,
        })
        fb = json.loads(self.render("lines-app"))["flamebearer"]
        self.assertEqual(sorted(fb["names"]), sorted(["total", "main", "work", "leaf", "helper",
                                                      "0x7f0000001234"]))
        self.assertEqual(fb["numTicks"], 660)

    def test_flame_graph_by_line(self):
        m, w, lf = "main /src/app/main.go:12", "work /src/app/work.go:", "leaf /src/app/leaf.go:7"
        self.assertEqual(self.folded("lines-app", granularity="lines"), {
            "%s;%s25;%s" % (m, w, lf): 100,
            "%s;%s27;%s" % (m, w, lf): 200,
            "%s;%s30;helper /src/app/work.go:42" % (m, w): 300,
            "%s;%s25;0x7f0000001234" % (m, w): 50,
            "%s;%s27" % (m, w): 10,
        })
        status, body = self.get("/pyroscope/render", query=TYPE + "{}", granularity="addresses")
        self.assertEqual(status, 400, body)

    def test_merged_profile_keeps_lines_inlining_and_mappings(self):
        got = decode_profile(self.render("lines-app", format="pprof"))
        want = sorted([
            ((LEAF, WORK[25], MAIN), 100),
            ((LEAF, WORK[27], MAIN), 200),
            ((INLINED, MAIN), 300),
            ((LDLOC, WORK[25], MAIN), 50),
            ((WORK[27], MAIN), 10),
        ], key=repr)
        self.assertEqual(got, want)

    def test_pushed_twice_merges_into_the_same_locations(self):
        # A second push of the same profile an hour later: one query over both doubles every
        # sample, with no location split by the merge.
        status, _, text = http("POST", self.c.base + "/ingest?name=lines-twice&from=%d" % FROM, self.app,
                               {"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, text)
        status, _, text = http("POST", self.c.base + "/ingest?name=lines-twice&from=%d" % (FROM + 3600),
                               self.app, {"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, text)
        status, body = self.get("/pyroscope/render", query=TYPE + '{service_name="lines-twice"}',
                                format="pprof", **{"from": str(FROM - 60), "until": str(FROM + 7200)})
        self.assertEqual(status, 200, body)
        self.assertEqual(decode_profile(body), sorted([
            ((LEAF, WORK[25], MAIN), 200), ((LEAF, WORK[27], MAIN), 400), ((INLINED, MAIN), 600),
            ((LDLOC, WORK[25], MAIN), 100), ((WORK[27], MAIN), 20)], key=repr))

    def test_go_pprof_prints_the_same_as_for_the_original(self):
        original = self.write("app.pb.gz", self.app)
        stored = self.write("app-store.pb.gz", self.render("lines-app", format="pprof"))
        src = os.path.join(self.work, "src")
        for name, last in (("app/main.go", 20), ("app/work.go", 50), ("app/leaf.go", 10)):
            os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
            with open(os.path.join(src, name), "w") as f:
                f.write("".join("line %d of %s\n" % (n, name) for n in range(1, last)))

        def rows(*args, path):
            out = run_pprof("-top", "-unit=ns", "-nodecount=1000", "-symbolize=none", *args, path)
            lines = out.splitlines()
            start = next(i for i, l in enumerate(lines) if l.split() == ["flat", "flat%", "sum%", "cum", "cum%"])
            return sorted(lines[start + 1:])

        top = rows(path=stored)
        self.assertEqual(top, rows(path=original))
        # What pprof prints, by hand: the unsymbolized frame named after its mapping's file,
        # helper marked inline.
        self.assertTrue(any(l.endswith(" [ld-linux-x86-64.so.2]") and l.split()[0] == "50ns" for l in top), top)
        self.assertTrue(any(l.endswith(" helper (inline)") and l.split()[0] == "300ns" for l in top), top)
        lines = rows("-lines", path=stored)
        self.assertEqual(lines, rows("-lines", path=original))
        self.assertTrue(any(l.endswith(" work /src/app/work.go:27") and l.split()[0] == "10ns" for l in lines),
                        lines)
        listing = [run_pprof("-list", "^work$", "-unit=ns", "-symbolize=none", "-source_path=" + src,
                             "-trim_path=/src", p).splitlines()[1:] for p in (stored, original)]
        self.assertEqual(listing[0], listing[1])
        # By hand: work.go:25 cum 150 (100 to leaf, 50 to ld); :27 flat 10, cum 210; :30 cum 300
        # (the inlined helper); the routine's flat 10 and cum 660.
        valued = {}
        for l in listing[0]:
            cells = l.split()
            if len(cells) >= 3 and cells[2].endswith(":line") and cells[:2] != [".", "."]:
                valued[int(cells[2].split(":")[0])] = tuple(cells[:2])
        self.assertEqual(valued, {25: (".", "150ns"), 27: ("10ns", "210ns"), 30: (".", "300ns")}, listing[0])
        self.assertIn("ROUTINE ======================== work in app/work.go", listing[0])

    def function(self, service, name):
        status, body = self.get("/api/v1/function", query=TYPE + '{service_name="%s"}' % service,
                                name=name, **{"from": str(FROM - 60), "until": str(FROM + 60)})
        return status, json.loads(body)

    def test_function_details(self):
        status, f = self.function("lines-app", "work")
        self.assertEqual(status, 200, f)
        self.assertEqual((f["function"], f["unit"], f["selection_total"], f["self"], f["total"]),
                         ("work", "nanoseconds", 660, 10, 660))
        self.assertEqual(f["lines"], [
            {"file": "/src/app/work.go", "line": 25, "self": 0, "total": 150},
            {"file": "/src/app/work.go", "line": 27, "self": 10, "total": 210},
            {"file": "/src/app/work.go", "line": 30, "self": 0, "total": 300},
        ])
        self.assertEqual(f["callers"], [{"name": "main", "total": 660}])
        self.assertEqual(f["callees"], [{"name": "helper", "total": 300}, {"name": "leaf", "total": 300},
                                        {"name": "0x7f0000001234", "total": 50}])
        status, f = self.function("lines-app", "helper")
        self.assertEqual((f["self"], f["total"], f["lines"], f["callers"], f["callees"]),
                         (300, 300, [{"file": "/src/app/work.go", "line": 42, "self": 300, "total": 300}],
                          [{"name": "work", "total": 300}], []))
        status, f = self.function("lines-app", "nosuch")
        self.assertEqual(status, 404, f)
        status, _ = self.get("/api/v1/function", query=TYPE + "{}")
        self.assertEqual(status, 400)

    def test_function_details_count_each_sample_once(self):
        # rec recurses: its total is 47 (40 + 7), not the 40 + 40 + 47 of its frames; line 6
        # appears twice in one stack and counts 40 once; the rec -> rec edge counts 40 once.
        status, f = self.function("lines-rec", "rec")
        self.assertEqual(status, 200, f)
        self.assertEqual((f["self"], f["total"]), (47, 47))
        self.assertEqual(f["lines"], [{"file": "/src/rec/rec.go", "line": 5, "self": 7, "total": 47},
                                      {"file": "/src/rec/rec.go", "line": 6, "self": 40, "total": 40}])
        self.assertEqual(f["callers"], [{"name": "main", "total": 47}, {"name": "rec", "total": 40}])
        self.assertEqual(f["callees"], [{"name": "rec", "total": 40}])

    def test_query_cli_function(self):
        r = subprocess.run([BIN, "query", "--url", self.c.base, "--from", str(FROM - 60), "--until",
                            str(FROM + 60), "--function", "work", TYPE + '{service_name="lines-app"}'],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.splitlines()
        self.assertIn("self 10 nanoseconds (1.52%), total 660 nanoseconds (100.00%) of 660", out)
        rows = [l.split() for l in out]
        self.assertIn(["0", "150", "/src/app/work.go:25"], rows)
        self.assertIn(["10", "210", "/src/app/work.go:27"], rows)
        self.assertIn(["0", "300", "/src/app/work.go:30"], rows)
        self.assertIn(["660", "100.00%", "main"], rows)
        self.assertIn(["50", "7.58%", "0x7f0000001234"], rows)
        # --lines: the top table by line; self per (function, line), by hand.
        r = subprocess.run([BIN, "query", "--url", self.c.base, "--from", str(FROM - 60), "--until",
                            str(FROM + 60), "--top", "10", "--lines", TYPE + '{service_name="lines-app"}'],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = sorted((l.split()[0], " ".join(l.split()[4:])) for l in r.stdout.splitlines()[2:])
        self.assertEqual(rows, sorted([("300", "leaf /src/app/leaf.go:7"), ("300", "helper /src/app/work.go:42"),
                                       ("50", "0x7f0000001234"), ("10", "work /src/app/work.go:27"),
                                       ("0", "work /src/app/work.go:25"), ("0", "work /src/app/work.go:30"),
                                       ("0", "main /src/app/main.go:12")]))
        r = subprocess.run([BIN, "query", "--url", self.c.base, "--function", "nosuch", TYPE + "{}"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no function nosuch in the selection", r.stderr)


if __name__ == "__main__":
    unittest.main()
