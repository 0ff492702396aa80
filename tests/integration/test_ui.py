"""The web UI is embedded in the binary and served by the store's query endpoint."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import STORE_PIPELINE, Collector, http  # noqa: E402

PIPELINE = STORE_PIPELINE.replace("{sync}", "batch").replace("{retention}", "0")

UI = os.path.join(os.path.dirname(__file__), "..", "..", "ui")


class UiTest(unittest.TestCase):
    def test_index_and_every_asset_it_names_are_served_as_built(self):
        with Collector(PIPELINE) as c:
            status, headers, body = http("GET", c.base + "/")
            self.assertEqual(status, 200)
            self.assertTrue(headers["Content-Type"].startswith("text/html"))
            with open(os.path.join(UI, "index.html"), "rb") as f:
                self.assertEqual(body, f.read())
            assets = re.findall(rb'(?:src|href)="ui/([^"]+)"', body)
            # The page names every file of ui/ (each view is a file of its own), and only those.
            files = sorted(n.encode() for n in os.listdir(UI) if n != "index.html")
            self.assertEqual(sorted(assets), files)
            types = {".js": "text/javascript", ".css": "text/css"}
            for name in assets:
                name = name.decode()
                status, headers, data = http("GET", c.base + "/ui/" + name)
                self.assertEqual(status, 200, name)
                self.assertTrue(headers["Content-Type"].startswith(types[os.path.splitext(name)[1]]))
                with open(os.path.join(UI, name), "rb") as f:
                    self.assertEqual(data, f.read(), name)
            status, _, body = http("GET", c.base + "/ui/../store.c")
            self.assertEqual(status, 404)
            status, _, body = http("GET", c.base + "/ui/nope.js")
            self.assertEqual(status, 404)
            self.assertIn(b"nope.js", body)
            # The API the page calls answers beside it.
            status, _, _ = http("GET", c.base + "/pyroscope/label-values?label=service_name")
            self.assertEqual(status, 200)
            self.assertEqual(c.stop(), 0, c.log())


if __name__ == "__main__":
    unittest.main()
