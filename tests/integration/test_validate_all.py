"""`flamecol validate` reports every error of every configured component,
used by a pipeline or not, as the OpenTelemetry Collector validates every
configured component; and running such a config starts nothing.

Positions (file:line:col) are counted by hand in the configs below.
"""
import re
import subprocess
import unittest

from harness import BIN, free_port, validate_config

# No service at all, one exporter with an unknown key (the case).
NO_SERVICE = """exporters:
  debug:
    bogus: 1
"""

# A valid pipeline (pprof -> nop) and, beside it, an unused component in each
# section, each with an error the schema finds or one only its create finds.
UNUSED = """receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  otlp/spare:
    protocols:
      grpc:
        frobnicate: true
processors:
  memory_limiter/spare:
    check_interval: 1s
  batch/spare:
    send_batch_size: many
exporters:
  nop:
  debug/spare:
    verbosity: loud
  store/spare:
    path: ""
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [nop]
"""

# The same errors, each expected at its line:col with words of its message.
UNUSED_ERRORS = [
    (7, 9, "receivers.otlp/spare.protocols.grpc: unknown key 'frobnicate'"),
    (10, 5, "processors.memory_limiter/spare: 'limit_mib' or 'limit_percentage' must be greater than zero"),
    (12, 22, "processors.batch/spare.send_batch_size"),
    (16, 16, 'exporters.debug/spare.verbosity: "loud" is not one of basic|detailed'),
    (18, 5, "exporters.store/spare: path must not be empty"),
]


def errors(out, path):
    """The error lines (not warnings) of validate's output, all of which must carry a position."""
    lines = [l for l in out.strip().splitlines() if l and " warning: " not in l and l != "config is valid"]
    for l in lines:
        assert re.match(r"^%s:\d+:\d+: " % re.escape(path), l), l
    return lines


class ValidateAllTest(unittest.TestCase):
    def test_unused_exporter_without_service(self):
        rc, out, path = validate_config(NO_SERVICE, "bad.yaml")
        self.assertEqual(rc, 1, out)
        lines = errors(out, path)
        self.assertEqual(len(lines), 2, out)
        self.assertIn("%s:1:1: missing 'service:'" % path, out)
        self.assertIn("%s:3:5: exporters.debug: unknown key 'bogus'" % path, out)
        self.assertIn("%s:2:3: warning: exporters.debug is defined but not used in any pipeline" % path, out)

    def test_every_error_of_every_unused_component(self):
        rc, out, path = validate_config(UNUSED.replace("{port}", str(free_port())), "bad.yaml")
        self.assertEqual(rc, 1, out)
        lines = errors(out, path)
        self.assertEqual(len(lines), len(UNUSED_ERRORS), out)
        for (line, col, words), got in zip(UNUSED_ERRORS, lines):
            self.assertTrue(got.startswith("%s:%d:%d: " % (path, line, col)), (got, line, col))
            self.assertIn(words, got)

    def test_used_and_unused_errors_together(self):
        text = UNUSED.replace("{port}", str(free_port())).replace(
            "  nop:\n", "  nop:\n    extra: 1\n")
        rc, out, path = validate_config(text, "bad.yaml")
        self.assertEqual(rc, 1, out)
        lines = errors(out, path)
        self.assertEqual(len(lines), len(UNUSED_ERRORS) + 1, out)
        self.assertIn("%s:15:5: exporters.nop: unknown key 'extra'" % path, out)

    def test_valid_unused_component_is_a_warning_only(self):
        text = UNUSED.replace("{port}", str(free_port()))
        for bad, good in (("      grpc:\n        frobnicate: true\n", "      grpc:\n"),
                          ("    check_interval: 1s\n", "    check_interval: 1s\n    limit_mib: 100\n"),
                          ("send_batch_size: many", "send_batch_size: 10"),
                          ("verbosity: loud", "verbosity: basic"),
                          ('path: ""', "path: /nonexistent/never-opened")):
            text = text.replace(bad, good)
        rc, out, path = validate_config(text, "good.yaml")
        self.assertEqual(rc, 0, out)
        self.assertEqual(errors(out, path), [])
        self.assertEqual(out.count("is defined but not used in any pipeline"), 5, out)

    def test_run_refuses_to_start(self):
        port = free_port()
        _, _, path = validate_config(UNUSED.replace("{port}", str(port)), "bad.yaml")
        try:
            p = subprocess.run([BIN, "--config", path], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("flamecol started with an unused component's config errors")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("invalid config, nothing started", p.stderr)
        lines = errors(p.stderr.replace("flamecol: invalid config, nothing started", ""), path)
        self.assertEqual(len(lines), len(UNUSED_ERRORS), p.stderr)
        self.assertIn("%s:18:5: exporters.store/spare: path must not be empty" % path, p.stderr)


if __name__ == "__main__":
    unittest.main()
