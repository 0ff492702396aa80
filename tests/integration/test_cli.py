"""The command line: version, help, components, validate, print-config, merging."""
import os
import re
import subprocess
import tempfile
import unittest

from harness import BIN


def run(*args, env=None):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


def write(text):
    fd, path = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


GOOD = """receivers:
  pprof:
    endpoint: 127.0.0.1:4040
exporters:
  debug:
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [debug]
"""


class CliTest(unittest.TestCase):
    def test_version_and_help(self):
        rc, out, _ = run("version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^flamecol \d+\.\d+\.\d+\n$")
        for args in (["--help"], ["validate", "--help"], ["components", "--help"],
                     ["print-config", "--help"], ["version", "--help"]):
            rc, out, _ = run(*args)
            self.assertEqual(rc, 0, args)
            self.assertIn("usage: flamecol", out)
        rc, _, err = run("frobnicate")
        self.assertEqual(rc, 2)
        self.assertIn("unknown command 'frobnicate'", err)

    def test_components_lists_kind_and_stability(self):
        rc, out, _ = run("components")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"receiver\s+pprof\s+(development|alpha|beta|stable)")
        self.assertRegex(out, r"exporter\s+debug\s+(development|alpha|beta|stable)")

    def test_validate_ok_and_errors_with_positions(self):
        good = write(GOOD)
        rc, _, err = run("validate", "--config", good)
        self.assertEqual(rc, 0, err)
        bad = write(GOOD.replace("exporters:\n  debug:\n",
                                 "exporters:\n  debug:\n    verbosity: loud\n  debug/spare:\n")
                    .replace("receivers: [pprof]", "receivers: [pprof, otlp]"))
        rc, _, err = run("validate", "--config", bad)
        self.assertEqual(rc, 1)
        lines = err.strip().splitlines()
        self.assertIn('%s:6:16: exporters.debug.verbosity: "loud" is not one of basic|detailed' % bad, lines)
        self.assertIn("%s:11:26: service.pipelines.profiles: receiver 'otlp' is not defined in receivers:" % bad,
                      lines)
        self.assertIn("%s:7:3: warning: exporters.debug/spare is defined but not used in any pipeline" % bad,
                      lines)
        for line in lines:
            self.assertRegex(line, r"^%s:\d+:\d+: " % re.escape(bad))
        rc, _, err = run("validate", "--config", "/nonexistent.yaml")
        self.assertEqual(rc, 1)
        self.assertIn("/nonexistent.yaml: cannot open", err)

    def test_merge_and_print_config(self):
        base = write(GOOD)
        overlay = write("receivers:\n  pprof:\n    max_labels: 12\nexporters:\n  debug:\n"
                        "    verbosity: detailed\nservice:\n  pipelines:\n    profiles:\n"
                        "      receivers: [pprof]\n      exporters: [debug]\n")
        rc, out, err = run("print-config", "--config", base, "--config", overlay)
        self.assertEqual(rc, 0, err)
        self.assertIn("endpoint: 127.0.0.1:4040", out)  # kept from the first file
        self.assertIn("max_labels: 12", out)  # added by the second
        self.assertIn("verbosity: detailed", out)
        merged = write(out)
        self.assertEqual(run("validate", "--config", merged)[0], 0)

    def test_env_in_config(self):
        path = write(GOOD.replace("127.0.0.1:4040", "${env:FC_CLI_ENDPOINT:-127.0.0.1:1}"))
        rc, out, _ = run("print-config", "--config", path, env={"FC_CLI_ENDPOINT": "127.0.0.1:9"})
        self.assertEqual(rc, 0)
        self.assertIn("endpoint: 127.0.0.1:9", out)

    def test_print_config_redacts_secrets(self):
        # Every secret comes from ${env:...}: print-config expands it, and must not print it.
        secrets = {"FC_TOK_A": "tok-a-9f8e7d", "FC_TOK_B": "tok-b-6c5b4a",
                   "FC_PPROF_PW": "pprof-pw-3a2b", "FC_PYRO_PW": "pyro-pw-1c0d",
                   "FC_PYRO_TOKEN": "pyro-tok-5e6f", "FC_HTTP_AUTH": "Bearer hdr-7a8b",
                   "FC_GRPC_AUTH": "Bearer grpc-9c0d", "FC_LEGACY_TOKEN": "legacy-tok-1e2f"}
        text = """extensions:
  auth:
    bearer_tokens:
      - {token: "${env:FC_TOK_A}", tenant: team-a, roles: [write, read]}
      - token: ${env:FC_TOK_B}
        tenant: team-b
receivers:
  pprof:
    endpoint: 127.0.0.1:4040
    auth:
      basic: {username: alice, password: "${env:FC_PPROF_PW}"}
  pprof/legacy:
    endpoint: 127.0.0.1:4041
    auth: {bearer_token: "${env:FC_LEGACY_TOKEN}"}
exporters:
  pyroscope:
    endpoint: http://127.0.0.1:1/
    basic_auth: {username: bob, password: "${env:FC_PYRO_PW}"}
  pyroscope/token:
    endpoint: http://127.0.0.1:1/
    bearer_token: ${env:FC_PYRO_TOKEN}
  otlphttp:
    endpoint: http://127.0.0.1:1
    headers: {Authorization: "${env:FC_HTTP_AUTH}", X-Team: kept-header}
  otlp:
    endpoint: 127.0.0.1:1
    tls: {insecure: true}
    headers: {authorization: "${env:FC_GRPC_AUTH}"}
service:
  extensions: [auth]
  pipelines:
    profiles:
      receivers: [pprof, pprof/legacy]
      exporters: [pyroscope, pyroscope/token, otlphttp, otlp]
"""
        rc, out, err = run("print-config", "--config", write(text), env=secrets)
        self.assertEqual(rc, 0, err)
        for value in secrets.values():
            self.assertNotIn(value, out)
            self.assertNotIn(value.split()[-1], out + err)
        # One "[REDACTED]" per secret, in the place of the value.
        self.assertEqual(out.count('"[REDACTED]"'), len(secrets), out)
        for line in ('token: "[REDACTED]"', 'password: "[REDACTED]"',
                     'bearer_token: "[REDACTED]"', 'Authorization: "[REDACTED]"',
                     'authorization: "[REDACTED]"'):
            self.assertIn(line, out)
        # What is not a secret is printed as it is.
        for kept in ("tenant: team-a", "tenant: team-b", "username: alice", "username: bob",
                     "X-Team: kept-header", "endpoint: 127.0.0.1:4041"):
            self.assertIn(kept, out)
        # An empty secret stays empty (nothing to hide), and the output is still a config.
        rc, out, _ = run("print-config", "--config",
                         write(GOOD.replace("endpoint: 127.0.0.1:4040",
                                            "endpoint: 127.0.0.1:4040\n    auth: "
                                            "{bearer_token: \"\"}")))
        self.assertEqual(rc, 0)
        self.assertNotIn("REDACTED", out)
        self.assertEqual(run("validate", "--config", write(out))[0], 0)

    def test_default_config_is_valid(self):
        rc, out, _ = run("print-config", "--default")
        self.assertEqual(rc, 0)
        path = write(out)
        rc, _, err = run("validate", "--config", path)
        self.assertEqual(rc, 0, err)


class ExamplesTest(unittest.TestCase):
    def test_every_example_validates(self):
        examples = sorted(f for f in os.listdir("examples") if f.endswith(".yaml"))
        self.assertGreaterEqual(len(examples), 2)
        for name in examples:
            rc, _, err = run("validate", "--config", os.path.join("examples", name))
            self.assertEqual(rc, 0, "%s: %s" % (name, err))
            self.assertNotIn("warning", err, name)


class ReadmeTest(unittest.TestCase):
    """The README's config reference is generated from the schemas; it must not drift."""

    def test_reference_matches_schemas(self):
        rc, out, _ = run("components", "--markdown")
        self.assertEqual(rc, 0)
        with open("README.md") as f:
            readme = f.read()
        begin = "<!-- BEGIN CONFIG REFERENCE (flamecol components --markdown) -->\n"
        end = "<!-- END CONFIG REFERENCE -->"
        self.assertIn(begin, readme)
        section = readme.split(begin)[1].split(end)[0]
        self.assertEqual(section.strip(), out.strip(),
                         "README config reference is stale: run scripts/gen-readme")

    def test_readme_starts_with_the_two_commands(self):
        with open("README.md") as f:
            blocks = re.findall(r"```sh\n(.*?)```", f.read(), re.S)
        self.assertIn("./scripts/setup && ./build/flamecol", blocks[0])
        self.assertIn("./scripts/test", blocks[1])


if __name__ == "__main__":
    unittest.main()
