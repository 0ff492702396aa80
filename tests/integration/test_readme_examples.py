"""The README's examples run as written (issue 13).

Which shell blocks run: every ```sh block of the README's "## Try it" section, and
any ```sh block whose line before (blank lines aside) is `<!-- test: run -->`. They
are joined in README order into one script, run by `bash -e -o pipefail` from a
fresh directory laid out like the repo root, so the README's relative paths work:

  build/flamecol   a wrapper that execs FLAMECOL_BIN (and records the pid of each
                   collector it starts); what a default would point at the README's
                   own ports gets the test's: a run without --config gets the default
                   config (`print-config --default`) on the test's ports, and
                   `flamecol query` without --url gets the test's 4040
  examples/*.yaml  the repo's, with every 127.0.0.1:PORT mapped to a free port
  tests/corpus     the repo's tests/corpus

In the commands every 127.0.0.1:PORT (localhost, 0.0.0.0) is mapped the same way;
nothing else is rewritten. Data directories (./flamecol-data) land in the fresh
directory. What is checked:

- every command exits 0 (bash -e: the first that fails stops the script; the test
  names it, with its exit status and output);
- a `#> text` line after a command is a line its output must contain (compared with
  runs of blanks collapsed);
- what the README says the commands do, against independent references: the debug
  exporter logs each multipart /ingest push with the totals of the corpus file's
  `pprof -top` reference, and each folded push with its values x 1e9 / sampleRate;
  `flamecol query --findings` on the store answers the total and the top functions'
  self and total of the reference of the corpus file converted to folded text;
- nothing the script started outlives it (the README stops what it starts);
- every ```yaml block passes `flamecol validate` without warnings; a fragment (one
  processor's settings) is completed with a receiver, an exporter and a pipeline
  using what it defines, and components it names but does not define get a
  minimal definition.

Every process the test starts is in one process group that is killed at the end,
whatever happened. OTLP CPU totals are left to the receiver tests.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import scratch_dir, BIN, free_port  # noqa: E402

README = "README.md"
REPO_CORPUS = os.path.abspath(os.path.join("tests", "corpus"))
SCRIPT_TIMEOUT = 240  # a guard against a hung step, not a timing assertion
PORT_RE = re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0):(\d{2,5})\b")
SHELL_LANGS = ("sh", "bash", "shell", "console")


# ---- reading the README -------------------------------------------------------------------

def fenced_blocks(text):
    """[(language, body, ## section, nearest heading, marked run)] of every fenced block."""
    blocks = []
    section = ""  # the ## heading: the rule's
    heading = ""  # the nearest heading: for messages
    lines = text.split("\n")
    i = 0
    previous = ""  # the last non-blank line outside a block
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("```"):
            lang = line[3:].strip()
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append((lang, "\n".join(body) + "\n", section, heading,
                           previous.strip() == "<!-- test: run -->"))
            previous = "```"
        elif line.strip():
            previous = line
        i += 1
    return blocks


def run_blocks(text):
    return [body for lang, body, section, _, marked in fenced_blocks(text)
            if lang in SHELL_LANGS and (section == "Try it" or marked)]


def steps_of(script):
    """The script as commands: [{"cmd": text, "expect": [lines]}]. A command goes on past
    a line ending in \\, |, && or ||; `#>` lines after it are its expected output; other
    comments and blank lines are dropped."""
    steps = []
    current = None
    for line in script.split("\n"):
        stripped = line.strip()
        if current is not None:
            current["cmd"] += "\n" + line
            if not re.search(r"(\\|\||&&)\s*$", line):
                steps.append(current)
                current = None
            continue
        if stripped.startswith("#>"):
            if not steps:
                raise AssertionError("a #> line before any command: %r" % line)
            steps[-1]["expect"].append(stripped[2:].strip())
        elif not stripped or stripped.startswith("#"):
            continue
        else:
            step = {"cmd": line, "expect": []}
            if re.search(r"(\\|\||&&)\s*$", line):
                current = step
            else:
                steps.append(step)
    if current is not None:
        raise AssertionError("the last command goes on past the end: %r" % current["cmd"])
    return steps


# ---- independent references ---------------------------------------------------------------

def read(path):
    with open(path) as f:
        return f.read()


TOP_ROW = re.compile(r"^\s*(\d+)[a-zA-Z]*\s+[\d.]+%\s+[\d.]+%\s+(\d+)[a-zA-Z]*\s+[\d.]+%\s+(.*?)\s*$")


def top_reference(name):
    """The corpus' `pprof -top` file, one entry per sample_index in order:
    [{"type": t, "total": n, "rows": {function: (flat, cum)}}]."""
    out = []
    current = None
    with open(os.path.join(REPO_CORPUS, name + ".top.txt")) as f:
        for line in f:
            if line.startswith("### sample_index="):
                current = {"type": None, "total": None, "rows": {}}
                out.append(current)
            elif current is None:
                continue
            elif line.startswith("Type: "):
                current["type"] = line[6:].strip()
            elif line.startswith("Showing nodes accounting for"):
                current["total"] = int(re.sub(r"[^\d]", "", line.split(" of ")[1].split()[0]))
            else:
                m = TOP_ROW.match(line)
                if m:
                    fn = m.group(3).replace(" (inline)", "")
                    if fn in current["rows"]:
                        raise AssertionError("%s: %s twice in a top table" % (name, fn))
                    current["rows"][fn] = (int(m.group(1)), int(m.group(2)))
    return out


def folded_cpu_total(literal, rate):
    """ns of a folded .cpu push given as a bash $'...' literal: sum of values x 1e9 / rate."""
    total = 0
    for line in literal.encode().decode("unicode_escape").splitlines():
        if line.strip():
            total += int(line.rsplit(" ", 1)[1])
    return total * 1000000000 // rate


def query_param(cmd, name, default=None):
    m = re.search(r"[?&]%s=([^&'\"\s]+)" % name, cmd)
    return m.group(1) if m else default


# ---- the sandbox --------------------------------------------------------------------------

WRAPPER = """#!/bin/bash
# flamecol as the README's commands call it, on test_readme_examples.py's ports.
bin=%(bin)s
if [ "${1:-}" = query ]; then
    case " $* " in
        *" --url "* | *" --url="*) ;;
        *) shift; set -- query --url %(url)s "$@" ;;
    esac
    exec "$bin" "$@"
fi
if [ $# -eq 0 ]; then
    set -- --config %(default)s
fi
case "${1:-}" in
    --config*) echo $$ >>%(pids)s ;;
esac
exec "$bin" "$@"
"""


def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


class Sandbox:
    """A fresh directory laid out like the repo root, with the README's ports mapped."""

    def __init__(self, scripts_text):
        self.dir = scratch_dir("flamecol-readme-")
        self.bin = os.path.abspath(BIN)
        default = subprocess.run([self.bin, "print-config", "--default"], check=True,
                                 capture_output=True, text=True).stdout
        examples = {name: read(os.path.join("examples", name))
                    for name in sorted(os.listdir("examples")) if name.endswith(".yaml")}
        self.ports = {}
        for text in [scripts_text, default] + list(examples.values()):
            for _, port in PORT_RE.findall(text):
                if port not in self.ports:
                    p = free_port()
                    while str(p) in self.ports.values():
                        p = free_port()
                    self.ports[port] = str(p)
        if "4040" not in self.ports:
            raise AssertionError("flamecol query's default port 4040 is not mapped")
        os.makedirs(os.path.join(self.dir, "build"))
        os.makedirs(os.path.join(self.dir, "examples"))
        os.makedirs(os.path.join(self.dir, "tests"))
        os.symlink(REPO_CORPUS, os.path.join(self.dir, "tests", "corpus"))
        for name, text in examples.items():
            with open(os.path.join(self.dir, "examples", name), "w") as f:
                f.write(self.map_ports(text))
        self.default_config = os.path.join(self.dir, "default-config.yaml")
        with open(self.default_config, "w") as f:
            f.write(self.map_ports(default))
        self.pids_path = os.path.join(self.dir, "collector-pids")
        open(self.pids_path, "w").close()
        wrapper = os.path.join(self.dir, "build", "flamecol")
        with open(wrapper, "w") as f:
            f.write(WRAPPER % {"bin": shq(self.bin), "default": shq(self.default_config),
                               "pids": shq(self.pids_path),
                               "url": "http://127.0.0.1:%s" % self.ports["4040"]})
        os.chmod(wrapper, 0o755)

    def map_ports(self, text):
        return PORT_RE.sub(lambda m: "%s:%s" % (m.group(1), self.ports[m.group(2)]), text)

    def collector_pids(self):
        with open(self.pids_path) as f:
            return [int(x) for x in f.read().split()]

    def alive_collectors(self):
        """Recorded collectors that still run (not zombies) as this binary."""
        alive = []
        for pid in self.collector_pids():
            try:
                if os.path.realpath("/proc/%d/exe" % pid) == os.path.realpath(self.bin):
                    alive.append(pid)
            except OSError:
                pass
        return alive

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def run_script(sandbox, steps, env_names):
    """Runs the steps under bash -e -o pipefail in the sandbox. Returns (exit status, index of
    the last step started, whether the script reached its end, [stdout of each step], stderr,
    collectors alive when bash ended)."""
    lines = []
    for i, step in enumerate(steps):
        lines.append("printf '\\n@@step %d\\n'" % i)
        lines.append(sandbox.map_ports(step["cmd"]))
    lines.append("printf '\\n@@end\\n'")
    script = os.path.join(sandbox.dir, "readme.sh")
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in env_names and not k.lower().endswith("_proxy")}
    out_path = os.path.join(sandbox.dir, "stdout.txt")
    err_path = os.path.join(sandbox.dir, "stderr.txt")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", script], cwd=sandbox.dir,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                start_new_session=True)
        try:
            try:
                rc = proc.wait(timeout=SCRIPT_TIMEOUT)
            except subprocess.TimeoutExpired:
                rc = None
            alive = sandbox.alive_collectors()
        finally:
            # Whatever happened: no process of the script outlives the test.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            for pid in sandbox.alive_collectors():
                os.kill(pid, signal.SIGKILL)
    with open(out_path) as f:
        stdout = f.read()
    with open(err_path) as f:
        stderr = f.read()
    outputs = [""] * len(steps)
    last = -1
    ended = False
    for chunk in re.split(r"\n@@", "\n" + stdout)[1:]:
        head, _, body = chunk.partition("\n")
        if head.startswith("step "):
            last = int(head.split()[1])
            outputs[last] = body
        elif head == "end":
            ended = True
    return rc, last, ended, outputs, stderr, alive


def squash(line):
    return " ".join(line.split())


# ---- the tests ----------------------------------------------------------------------------

class ReadmeShellExamples(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        blocks = run_blocks(read(README))
        if not blocks:
            raise AssertionError("no ```sh block in the README's Try it section")
        cls.script_text = "\n".join(blocks)
        cls.steps = steps_of(cls.script_text)
        env_names = set(re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)",
                                   "".join(read(os.path.join("examples", n))
                                           for n in os.listdir("examples")
                                           if n.endswith(".yaml"))))
        cls.sandbox = Sandbox(cls.script_text)
        (cls.rc, cls.last, cls.ended, cls.outputs, cls.stderr,
         cls.alive) = run_script(cls.sandbox, cls.steps, env_names)

    @classmethod
    def tearDownClass(cls):
        cls.sandbox.remove()

    def context(self):
        # The debug exporter's folded stacks left out: the errors are what matter here.
        err = [l for l in self.stderr.splitlines() if not re.match(r"^\S+ \d+$", l)]
        return ("\n--- stdout of the last step:\n%s\n"
                "--- stderr (tail, without folded stacks):\n%s" % (
                    self.outputs[self.last] if self.last >= 0 else "", "\n".join(err[-30:])))

    def step_index(self, pattern, after=-1):
        """The first step after `after` whose command matches pattern; the check that needs it
        fails when the README no longer has it."""
        for i, step in enumerate(self.steps):
            if i > after and re.search(pattern, step["cmd"], re.S):
                return i
        self.fail("no README step matches %r" % pattern)

    def test_every_step_exits_0(self):
        if self.rc is None:
            self.fail("the script did not end within %d s; last step started: %s%s" % (
                SCRIPT_TIMEOUT, self.steps[self.last]["cmd"] if self.last >= 0 else "-",
                self.context()))
        if self.rc != 0:
            self.fail("README step %d exited with %d:\n%s%s" % (
                self.last + 1, self.rc, self.steps[self.last]["cmd"], self.context()))
        self.assertEqual(self.last, len(self.steps) - 1, "the script stopped before its end")
        self.assertTrue(self.ended, "the script stopped before its end")

    def test_stated_output(self):
        """Each `#>` line is a line of its command's output."""
        checked = 0
        for i, step in enumerate(self.steps):
            if not step["expect"]:
                continue
            self.assertLessEqual(i, self.last, "step %d never ran:\n%s" % (i + 1, step["cmd"]))
            got = {squash(l) for l in self.outputs[i].splitlines()}
            for want in step["expect"]:
                self.assertIn(squash(self.sandbox.map_ports(want)), got,
                              "README step %d:\n%s\nprinted:\n%s" % (i + 1, step["cmd"],
                                                                    self.outputs[i]))
                checked += 1
        self.assertGreater(checked, 0, "no #> line in the README's run blocks")

    def debug_batches(self):
        return [l for l in self.stderr.splitlines()
                if "component=debug" in l and 'msg="batch ' in l]

    def test_debug_exporter_logs_the_pushes(self):
        """examples/debug.yaml prints what each push of its part carried: a multipart corpus
        file with the totals of its pprof -top reference, a folded .cpu push with its
        values x 1e9 / sampleRate (default 100)."""
        start = self.step_index(r"--config\s+examples/debug\.yaml\b.*&\s*(#.*)?$")
        stop = self.step_index(r"^kill\b", start)
        self.assertLessEqual(stop, self.last + 1, "the debug part did not run")
        batches = self.debug_batches()
        checked = 0
        for i in range(start + 1, stop):
            cmd = self.steps[i]["cmd"]
            m = re.search(r"-F\s+profile=@tests/corpus/([\w.-]+)\.pb\.gz", cmd)
            if m and "/ingest" in cmd:
                want = [r"\b%s:\w+=%d\b" % (re.escape(t["type"]), t["total"])
                        for t in top_reference(m.group(1))]
                self.assertTrue(any(all(re.search(w, b) for w in want) for b in batches),
                                "no debug batch with %s (from %s.top.txt) in:\n%s" % (
                                    want, m.group(1), "\n".join(batches)))
                checked += 1
            m = re.search(r"--data-binary\s+\$'([^']*)'", cmd)
            name = query_param(cmd, "name") or ""
            if m and name.endswith(".cpu"):
                total = folded_cpu_total(m.group(1), int(query_param(cmd, "sampleRate", "100")))
                want = r"samples=%d cpu:nanoseconds=%d\b" % (
                    len([l for l in m.group(1).split("\\n") if l.strip()]), total)
                self.assertTrue(any(re.search(want, b) for b in batches),
                                "no debug batch with %r in:\n%s" % (want, "\n".join(batches)))
                checked += 1
        self.assertGreaterEqual(checked, 2, "the debug part pushes no multipart or folded profile")

    def test_findings_match_the_reference(self):
        """The store part: what the corpus file converted to folded text carried, as pprof -top
        computes it (samples x 1e9 / sampleRate), is what `flamecol query --findings` answers."""
        push = self.step_index(r"convert\s+--to\s+folded\s+tests/corpus/[\w.-]+\.pb\.gz\s*\|")
        cmd = self.steps[push]["cmd"]
        name = re.search(r"tests/corpus/([\w.-]+)\.pb\.gz", cmd).group(1)
        self.assertTrue((query_param(cmd, "name") or "").endswith(".cpu"), cmd)
        scale = 1000000000 // int(query_param(cmd, "sampleRate", "100"))
        ref = top_reference(name)[0]  # folded text carries the first sample type
        q = self.step_index(r"flamecol\s+query\b.*--findings", push)
        self.assertLessEqual(q, self.last, "the query never ran")
        out = self.outputs[q]
        m = re.search(r"\btotal (\d+) nanoseconds", out)
        self.assertIsNotNone(m, out)
        self.assertEqual(int(m.group(1)), ref["total"] * scale, out)
        rows = re.findall(r"^\s*(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S.*?)\s*$", out, re.M)
        self.assertGreater(len(rows), 0, out)
        shown = set()
        for self_v, total_v, fn in rows:
            self.assertIn(fn, ref["rows"], out)
            flat, cum = ref["rows"][fn]
            self.assertEqual((int(self_v), int(total_v)), (flat * scale, cum * scale), fn)
            shown.add(fn)
        # The rows are the heaviest by self: none left out weighs more than one shown.
        least = min(int(r[0]) for r in rows)
        for fn, (flat, _) in ref["rows"].items():
            if fn not in shown:
                self.assertLessEqual(flat * scale, least, fn)

    def test_nothing_outlives_the_script(self):
        self.assertTrue(self.sandbox.collector_pids(), "the README started no collector")
        self.assertEqual(self.alive, [], "collectors still running after the README's commands")


class ReadmeYamlBlocks(unittest.TestCase):
    MINIMAL = {
        "receivers": {
            "pprof": "    endpoint: 127.0.0.1:%(p1)d\n",
            "otlp": "    protocols:\n      http:\n        endpoint: 127.0.0.1:%(p2)d\n",
        },
        "processors": {
            "relabel": "    relabel_configs: []\n",
            "limits": "    default: {}\n",
            "batch": "    timeout: 200ms\n",
            "memory_limiter": "    limit_mib: 512\n",
        },
        "exporters": {
            "nop": "",
            "debug": "",
            "store": "    path: %(dir)s\n    query:\n      endpoint: 127.0.0.1:%(p3)d\n",
        },
    }

    @staticmethod
    def components(block):
        """{section: [ids defined]} and {section: [ids a pipeline names]} of a YAML block."""
        defined = {"receivers": [], "processors": [], "exporters": []}
        named = {"receivers": [], "processors": [], "exporters": []}
        section = None
        for line in block.splitlines():
            if re.match(r"^\S", line):
                section = line.split(":")[0].strip()
            m = re.match(r"^  ([\w/]+):", line)
            if m and section in defined:
                defined[section].append(m.group(1))
            m = re.match(r"^\s+(receivers|processors|exporters):\s*\[(.*)\]", line)
            if m and section == "service":
                named[m.group(1)] += [x.strip() for x in m.group(2).split(",") if x.strip()]
        return defined, named

    def completion(self, block):
        """A config that, merged before block, makes it whole (or "" when it is whole)."""
        defined, named = self.components(block)
        has_service = re.search(r"^service:", block, re.M) is not None
        whole = has_service and defined["receivers"] and defined["exporters"]
        if whole:
            return ""
        values = {"p1": free_port(), "p2": free_port(), "p3": free_port(),
                  "dir": os.path.join(self.tmp, "store")}
        need = {}
        for section in named:
            need[section] = [x for x in named[section] if x not in defined[section]]
        if not has_service:
            need["receivers"] = [] if defined["receivers"] else ["pprof"]
            need["exporters"] = [] if defined["exporters"] else ["nop"]
        out = ""
        for section in ("receivers", "processors", "exporters"):
            if need.get(section):
                out += section + ":\n"
                for cid in need[section]:
                    kind = cid.split("/")[0]
                    self.assertIn(kind, self.MINIMAL[section],
                                  "no minimal %s definition for %s" % (section, cid))
                    out += "  %s:\n%s" % (cid, self.MINIMAL[section][kind] % values)
        if not has_service:
            out += ("service:\n  pipelines:\n    profiles:\n"
                    "      receivers: [%s]\n      processors: [%s]\n      exporters: [%s]\n" % (
                        ", ".join(defined["receivers"] or need["receivers"]),
                        ", ".join(defined["processors"]),
                        ", ".join(defined["exporters"] or need["exporters"])))
        return out

    def setUp(self):
        self.tmp = scratch_dir("flamecol-readme-yaml-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_every_yaml_block_validates(self):
        with open(README) as f:
            blocks = [(body, heading) for lang, body, _, heading, _ in fenced_blocks(f.read())
                      if lang in ("yaml", "yml")]
        self.assertGreater(len(blocks), 0)
        for body, section in blocks:
            base = self.completion(body)
            configs = []
            for name, text in (("completion.yaml", base), ("readme.yaml", body)):
                if text:
                    configs += ["--config", os.path.join(self.tmp, name)]
                    with open(configs[-1], "w") as f:
                        f.write(text)
            r = subprocess.run([BIN, "validate"] + configs, capture_output=True, text=True)
            rc, out = r.returncode, r.stdout + r.stderr
            self.assertEqual(rc, 0, "README yaml block in %r:\n%s\n(completed with:\n%s)\n%s" % (
                section, body, base, out))
            self.assertNotIn("warning", out, "README yaml block in %r:\n%s\n%s" % (
                section, body, out))


if __name__ == "__main__":
    unittest.main()
