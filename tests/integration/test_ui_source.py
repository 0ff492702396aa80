"""The source files of Function details (issue 17): `query.ui.source_roots` and
GET /api/v1/source.

A temp directory holds the "checkout": src/app/work.go and src/app/main.go, a symlink
inside the root to work.go, a symlink pointing out of the root, a directory, a file over
the 1 MiB cap, and secret.txt and src-evil/x.go beside (outside) src/. The store exporter maps the profile's
prefix /build/src/ to that src/. A hand-built pprof (test_store_lines' Profile) names
/build/src/app/work.go and main.go with lines; /api/v1/function gives those files, and
/api/v1/source gives each one's bytes as written here. `..` out of the root, a symlink out
of it, a directory, an unmapped path, a missing or oversized file are refused with a
message; a collector without source_roots serves nothing.
"""
import json
import os
import shutil
import unittest
import urllib.parse

from harness import scratch_dir, Collector, STORE_PIPELINE, http
from test_store_lines import FROM, Profile

WORK_GO = "".join("// work.go line %d\n" % i for i in range(1, 13))
MAIN_GO = "package main\n\nfunc main() { work() }\n"
SECRET = "not to be served\n"


def source_profile():
    """main (main.go:3) -> work at work.go:4 (self 30), work.go:6 (self 50)."""
    p = Profile()
    f_main = p.function("main", "/build/src/app/main.go", 3)
    f_work = p.function("work", "/build/src/app/work.go", 2)
    l_main = p.location(0, 0x1000, [(f_main, 3)])
    l_w4 = p.location(0, 0x2000, [(f_work, 4)])
    l_w6 = p.location(0, 0x2010, [(f_work, 6)])
    p.sample([l_w4, l_main], 30)
    p.sample([l_w6, l_main], 50)
    return p.encode()


def config(roots):
    block = "      ui:\n        source_roots:\n" + "".join(
        "          %s: %s\n" % (json.dumps(k), json.dumps(v)) for k, v in roots.items())
    text = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0")
    return text.replace("      max_query_length: 0\n", "      max_query_length: 0\n" + block)


class SourceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tree = scratch_dir("flamecol-src-")
        cls.addClassCleanup(shutil.rmtree, cls.tree, True)
        src = os.path.join(cls.tree, "src")
        os.makedirs(os.path.join(src, "app", "sub"))
        os.makedirs(os.path.join(cls.tree, "src-evil"))  # shares the root's name as a prefix
        for name, text in (("src/app/work.go", WORK_GO), ("src/app/main.go", MAIN_GO), ("secret.txt", SECRET),
                           ("src-evil/x.go", SECRET)):
            with open(os.path.join(cls.tree, name), "w") as f:
                f.write(text)
        with open(os.path.join(src, "big.go"), "w") as f:
            f.write("x" * (1024 * 1024 + 1))
        with open(os.path.join(src, "cap.go"), "w") as f:
            f.write("y" * (1024 * 1024))
        os.symlink(os.path.join(cls.tree, "secret.txt"), os.path.join(src, "app", "out.go"))
        os.symlink("work.go", os.path.join(src, "app", "alias.go"))
        cls.c = Collector(config({"/build/src/": src + "/", "/gone": os.path.join(cls.tree, "nowhere")}))
        cls.addClassCleanup(cls.c.__exit__, None, None, None)
        cls.c.wait_ready()
        status, _, text = http("POST", cls.c.base + "/ingest?name=srcsvc&from=%d" % FROM, source_profile(),
                               {"Content-Type": "application/octet-stream"})
        assert status == 200, text

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def source(self, file, c=None):
        query = "" if file is None else "?" + urllib.parse.urlencode({"file": file})
        status, headers, body = http("GET", (c or self.c).base + "/api/v1/source" + query)
        return status, body.decode("utf-8", "replace")

    def test_files_of_the_profile(self):
        # The function answer names the files as the profile does; each is served as written.
        status, _, body = http("GET", self.c.base + "/api/v1/function?" + urllib.parse.urlencode(
            {"query": "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"srcsvc\"}", "name": "work",
             "from": FROM - 10, "until": FROM + 3600}))
        self.assertEqual(status, 200, body)
        lines = json.loads(body)["lines"]
        self.assertEqual([(l["file"], l["line"], l["self"], l["total"]) for l in lines],
                         [("/build/src/app/work.go", 4, 30, 30), ("/build/src/app/work.go", 6, 50, 50)])
        self.assertEqual(self.source("/build/src/app/work.go"), (200, WORK_GO))
        self.assertEqual(self.source("/build/src/app/main.go"), (200, MAIN_GO))
        # a symlink that stays inside the root is the file it points at
        self.assertEqual(self.source("/build/src/app/alias.go"), (200, WORK_GO))
        # exactly the cap is served
        status, text = self.source("/build/src/cap.go")
        self.assertEqual((status, len(text)), (200, 1024 * 1024))

    def test_out_of_the_root_refused(self):
        for path in ("/build/src/../secret.txt", "/build/src/app/../../secret.txt", "/build/src/app/out.go",
                     "/build/src/app/sub/../../../secret.txt", "/build/src/../src-evil/x.go"):
            status, text = self.source(path)
            self.assertEqual(status, 403, path)
            self.assertIn("outside its source root", text)
            self.assertNotIn(SECRET.strip(), text)

    def test_refusals(self):
        cases = (
            (None, 400, "file is required"),
            ("/build/src/app", 404, "not a readable file"),  # no directory listing
            ("/build/src/app/sub", 404, "not a readable file"),
            ("/build/src/nosuch.go", 404, "no such file"),
            ("/elsewhere/app/work.go", 404, "no source root maps"),
            ("/build/srcx/app/work.go", 404, "no source root maps"),
            ("/gone/x.go", 404, "source root"),
            ("/build/src/big.go", 413, "larger than 1048576 bytes (query.ui.max_source_size)"),
        )
        for path, want, message in cases:
            status, text = self.source(path)
            self.assertEqual(status, want, (path, text))
            self.assertIn(message, text, path)
            self.assertNotIn("work.go line", text, path)
            self.assertNotIn(self.tree, text, "the local directory is not told")

    def test_max_source_size(self):
        # max_source_size 218: work.go (9 lines of 18 bytes, 3 of 19: 219) is refused, main.go (40) served
        small = config({"/build/src/": os.path.join(self.tree, "src") + "/"}).replace(
            "        source_roots:\n", "        max_source_size: 218\n        source_roots:\n")
        c = Collector(small)
        try:
            c.wait_ready()
            self.assertEqual(len(WORK_GO), 219)
            status, text = self.source("/build/src/app/work.go", c)
            self.assertEqual(status, 413, text)
            self.assertIn("larger than 218 bytes", text)
            self.assertEqual(self.source("/build/src/app/main.go", c), (200, MAIN_GO))
        finally:
            self.assertEqual(c.stop(), 0, c.log())

    def test_no_roots_no_source(self):
        c = Collector(STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0"))
        try:
            c.wait_ready()
            status, text = self.source("/build/src/app/work.go", c)
            self.assertEqual(status, 404)
            self.assertIn("source_roots", text)
        finally:
            self.assertEqual(c.stop(), 0, c.log())
            c.__exit__(None, None, None)


if __name__ == "__main__":
    unittest.main()
