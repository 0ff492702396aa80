"""Merged profiles are real pprof: sets of corpus files of one kind are pushed to the
store as one series; the store's merged profile of every profile type of the series
(/pyroscope/render?format=pprof and Connect SelectMergeProfile) is fed to Go's pprof,
and what pprof prints must be what it prints for the original files given together
(`pprof -top a.pb.gz b.pb.gz` merges them itself: that is the oracle).

Compared (see harness.pprof_top for the exact flags: every node, exact values):
- `pprof -top`: the Type line, the "Showing nodes accounting for" line (the total) and
  every row's function name, flat and cum. Not compared, as they legitimately differ:
  "File:" (the main mapping's file name: a merge over services and builds has no single
  one), "Time:" (the store answers for the query's range, not the first profile's
  start) and "Duration: ..., Total samples = ..." (the sum of the profiles' durations,
  which the store does not keep; the total it shows is the one compared above), and the
  percent columns (derived from flat, cum and the total, which are compared; sum% also
  depends on the order pprof gives rows of equal flat, so rows are compared by name).
- the inline marks of -top, `pprof -top -lines` and `pprof -list FUNC` (with a source
  tree written by this test, one "line N" per line of every file the profiles name):
  these need the file, line and inlining of every frame, which the store keeps."""
import difflib
import gzip
import json
import os
import re
import shutil
import time
import unittest
import urllib.parse

from harness import (scratch_dir, CORPUS, Collector, STORE_PIPELINE, http, pb_fields, pb_ld, pb_varint, pb_vi, pprof_top,
                     read_corpus, run_pprof)

# Sets pprof can merge (same sample types and period type); each is one series in the store.
# (Node's wall profiles differ in their sample types: node-1s-wall has no cpu, the SDK's
# says samples/count where node-1s-wallcpu says sample/count; pprof merges none of them.)
SETS = {
    "go-cpu": ["go-1s-cpu", "go-3s-cpu", "pyroscope-go-cpu"],
    "go-memory": ["go-1s-allocs", "go-3s-allocs", "go-1s-heap", "pyroscope-go-inuse_space"],
    "go-contentions": ["go-1s-block", "go-1s-mutex", "pyroscope-go-block_duration"],
    "node-heap": ["node-1s-heap", "pyroscope-nodejs-0.4.13-inuse_space"],
    "node-wall": ["node-1s-wallcpu"],
}

SOURCES = ("render", "connect")


def source_files(name):
    """{file name: highest line} of a corpus profile, read by this test from profile.proto
    (Profile.location = 4, function = 5, string_table = 6; Location.line = 4; Line.function_id = 1,
    Line.line = 2; Function.id = 1, filename = 4)."""
    prof = pb_fields(gzip.decompress(read_corpus(name)))
    strings = [s.decode() for s in prof.get(6, [])]
    files = {}
    for raw in prof.get(5, []):
        f = pb_fields(raw)
        files[f.get(1, [0])[0]] = strings[f.get(4, [0])[0]]
    out = {}
    for raw in prof.get(4, []):
        for line in pb_fields(raw).get(4, []):
            ln = pb_fields(line)
            fname = files.get(ln.get(1, [0])[0], "")
            if fname:
                out[fname] = max(out.get(fname, 0), ln.get(2, [0])[0])
    return out


def top_lines(top, marks=False, header=True):
    """What to compare of a pprof_top, as lines: the header lines kept (see the module
    docstring) and the rows "name [inline mark] flat=... cum=..." in name order."""
    rows = sorted("%s%s flat=%d cum=%d" % (n, " " + m if m and marks else "", f, c)
                  for n, m, f, c in top["rows"])
    return (top_header(top) if header else []) + rows


def top_header(top):
    """Header lines to compare (see the module docstring for the ones left out)."""
    return [l for l in top["header"] if not l.startswith(("File: ", "Time: ", "Duration: "))
            and l != "Main binary filename not available."]


class PprofOracleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0"))
        cls.addClassCleanup(cls.c.__exit__, None, None, None)  # killed if setUpClass fails
        cls.work = scratch_dir("flamecol-oracle-")
        cls.addClassCleanup(shutil.rmtree, cls.work, True)
        cls.c.wait_ready()
        for set_name, files in SETS.items():
            for name in files:
                status, _, text = http("POST", cls.c.base + "/ingest?name=oracle-%s&from=1700000000"
                                       % set_name, read_corpus(name),
                                       {"Content-Type": "application/octet-stream"})
                assert status == 200, "%s: %s" % (name, text)
        # One tree of sources for -list: every file any corpus profile names, "line N" on line N.
        cls.src = os.path.join(cls.work, "src")
        for files in SETS.values():
            for name in files:
                for fname, last in source_files(name).items():
                    path = os.path.join(cls.src, fname.lstrip("/"))
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "w") as f:
                        f.write("".join("line %d of %s\n" % (n, fname) for n in range(1, last + 30)))
        cls.merged = {}

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def types(self, set_name):
        status, _, body = http("POST", self.c.base + "/querier.v1.QuerierService/Series",
                               json.dumps({"matchers": ['{service_name="oracle-%s"}' % set_name],
                                           "labelNames": ["__profile_type__"]}).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        return sorted({l["value"] for s in json.loads(body).get("labelsSet", [])
                       for l in s.get("labels", []) if l["name"] == "__profile_type__"})

    def merged_profile(self, set_name, type_id, source):
        """The store's merged profile of the series as a file for pprof."""
        key = (set_name, type_id, source)
        if key in self.merged:
            return self.merged[key]
        selector = '{service_name="oracle-%s"}' % set_name
        if source == "render":
            q = {"query": type_id + selector, "from": "0", "until": "now", "format": "pprof"}
            status, _, body = http("GET", self.c.base + "/pyroscope/render?" + urllib.parse.urlencode(q))
        else:
            req = (pb_ld(1, type_id.encode()) + pb_ld(2, selector.encode()) + pb_vi(3, 0)
                   + pb_vi(4, int(time.time() * 1000) + 60000))
            status, _, body = http("POST", self.c.base + "/querier.v1.QuerierService/SelectMergeProfile",
                                   req, {"Content-Type": "application/proto"})
        self.assertEqual(status, 200, body)
        path = os.path.join(self.work, "%s-%s-%s.pb" % (set_name, type_id.replace(":", "_"), source))
        with open(path, "wb") as f:
            f.write(body)
        self.merged[key] = path
        return path

    def originals(self, set_name):
        return [os.path.join(CORPUS, n + ".pb.gz") for n in SETS[set_name]]

    def cases(self):
        """(set, profile type, sample type) of every profile type the store holds for the sets."""
        out = []
        for set_name in SETS:
            types = self.types(set_name)
            self.assertTrue(types, set_name)
            out += [(set_name, t, t.split(":")[1]) for t in types]
        return out

    def compare(self, what, options, output):
        """Runs output(set, paths, pprof options) on the originals and on each merged profile of
        every case; returns the differences (empty when every output matches) as unified
        diffs of their lines, each naming the case."""
        diffs = []
        for set_name, type_id, st in self.cases():
            want = output(set_name, self.originals(set_name), ["-sample_index=" + st] + options)
            self.assertTrue(want, (set_name, type_id))
            for source in SOURCES:
                got = output(set_name, [self.merged_profile(set_name, type_id, source)],
                             ["-sample_index=" + st] + options)
                if got != want:
                    d = list(difflib.unified_diff(want, got, "pprof on the originals",
                                                  "pprof on the store's", n=0, lineterm=""))
                    diffs.append("%s, %s %s from %s (%d lines differ):\n%s" % (
                        what, set_name, type_id, source, len(d) - 2, "\n".join(d[:12])))
        return diffs

    def test_every_set_and_type_is_covered(self):
        cases = self.cases()
        self.assertEqual({s for s, _, _ in cases}, set(SETS))
        # go-cpu 2, go-memory 4, go-contentions 2, node-heap 2, node-wall 3.
        self.assertEqual(len(cases), 13, cases)

    def test_top(self):
        def top(set_name, paths, options):
            return top_lines(pprof_top(paths, *options))
        diffs = self.compare("pprof -top", [], top)
        self.assertEqual(diffs, [], "\n".join(diffs))
        # And the oracle is not trivially empty: the merge of several files is their sum.
        t = pprof_top(self.originals("go-cpu"), "-sample_index=cpu")
        self.assertEqual(t["total"], 1080000000 + 5350000000 + 1650000000)  # the corpus's .top.txt totals

    def test_top_inline_marks(self):
        def top(set_name, paths, options):
            return top_lines(pprof_top(paths, *options), marks=True, header=False)
        diffs = self.compare("pprof -top (inline marks)", [], top)
        self.assertEqual(diffs, [], "\n".join(diffs))

    def test_top_lines(self):
        def top(set_name, paths, options):
            return top_lines(pprof_top(paths, *options), marks=True)
        diffs = self.compare("pprof -top -lines", ["-lines"], top)
        self.assertEqual(diffs, [], "\n".join(diffs))

    def list_regexes(self):
        """{set: RE2 of the three functions with the largest flat in the set's originals}."""
        regex = {}
        for set_name in SETS:
            rows = sorted(pprof_top(self.originals(set_name))["rows"], key=lambda r: (-r[2], r[0]))
            regex[set_name] = "^(%s)$" % "|".join(re_escape(n) for n, _, _, _ in rows[:3])
        return regex

    def test_list_oracle_shows_source_lines(self):
        # What test_list compares with is a real listing: each file found in the source tree
        # of setUpClass, flat and cum per source line.
        for set_name, regex in self.list_regexes().items():
            want = self.listing(regex, self.originals(set_name), [])
            self.assertTrue([l for l in want if l.startswith("ROUTINE")], want)
            self.assertEqual([l for l in want if "could not find file" in l], [], want)
            valued = [l for l in want if re.match(r"^\s*[1-9]\d*\S*\s+\S+\s+\d+:line \d+ of ", l)]
            self.assertTrue(valued, want)

    def test_list(self):
        # The listing of each set's top functions (list_regexes) against the source tree of
        # setUpClass: per source line, flat and cum.
        regex = self.list_regexes()

        def listing(set_name, paths, options):
            return self.listing(regex[set_name], paths, options)
        diffs = self.compare("pprof -list", [], listing)
        self.assertEqual(diffs, [], "\n".join(diffs))

    def listing(self, regex, paths, options):
        return run_pprof("-list", regex, "-unit=ns", "-source_path=" + self.src, "-trim_path=/", *options,
                         *paths).splitlines()


def re_escape(name):
    """A function name as a Go regexp literal (pprof's -list takes an RE2 expression)."""
    return "".join("\\" + ch if ch in "\\.+*?()|[]{}^$" else ch for ch in name)


if __name__ == "__main__":
    unittest.main()
