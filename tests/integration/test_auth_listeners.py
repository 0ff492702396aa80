"""Authentication on every listener (issue 16, the auth half): one `auth`
extension named by the pprof receiver, the otlp receiver (HTTP and gRPC),
the store's query API and UI, and the telemetry endpoint.

The routes checked are the ones the running server logs at start (debug
level: `route GET /pyroscope/render on 127.0.0.1:N owner=store auth=read`),
so a route added later is checked without changing this test. Clients are
urllib/http.client and grpcio; the htpasswd file is made with Python's
crypt (bcrypt, cost 5); expected totals are hand sums of folded pushes.
"""
from http.client import HTTPConnection
import json
import os
import re
import time
import unittest
import urllib.parse
import warnings

import grpc

from harness import scratch_dir, BIN, Collector, free_port, http, validate_config

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
TOKEN_A = "tok-a-0123456789abcdef"  # team-a, read and write (from ${env:TOKEN_A})
TOKEN_B = "tok-b-fedcba9876543210"  # team-b, read and write
TOKEN_A_READ = "tok-a-read-only"
TOKEN_A_WRITE = "tok-a-write-only"
TOKEN_ANY = "tok-unbound"  # no tenant: X-Scope-OrgID decides, as without auth
ALICE_PASSWORD = "alice-s3cret"  # basic user alice: team-a, read only
BOB_PASSWORD = "bob-pw"  # basic user bob: team-b, read and write


def htpasswd(users):
    path = os.path.join(scratch_dir("flamecol-auth-"), "users.htpasswd")
    with open(path, "w") as f:
        for user, password in users.items():
            f.write("%s:%s\n" % (user, crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH,
                                                                          rounds=2**5))))
    return path


HTPASSWD = htpasswd({"alice": ALICE_PASSWORD, "bob": BOB_PASSWORD})

CONFIG = """
extensions:
  auth:
    bearer_tokens:
      - {token: "${env:TOKEN_A}", tenant: team-a, roles: [write, read]}
      - {token: %(b)s, tenant: team-b, roles: [write, read]}
      - {token: %(ar)s, tenant: team-a, roles: [read]}
      - {token: %(aw)s, tenant: team-a, roles: [write]}
      - {token: %(any)s}
    basic:
      htpasswd_file: %(htpasswd)s
      tenants: {alice: team-a, bob: team-b}
      roles: {alice: [read]}
    max_failures_per_minute: %(max_failures)d
  auth/spare:
    bearer_tokens: [{token: spare-token}]
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
    auth: {authenticator: auth}
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%(grpc)d
        auth: {authenticator: auth}
%(grpc_tls)s
      http:
        endpoint: 127.0.0.1:%(otlp)d
        auth: {authenticator: auth}
exporters:
  store:
    path: {dir}/data
    query:
      endpoint: 127.0.0.1:{port}
      max_query_length: 0
      auth: {authenticator: auth}
service:
  extensions: [auth]
  telemetry:
    logs: {level: debug}
    metrics:
      endpoint: 127.0.0.1:{metrics}
      auth: {authenticator: auth}
  pipelines:
    profiles:
      receivers: [pprof, otlp]
      exporters: [store]
"""

ROUTE_LINE = re.compile(r'msg="route (\S+) (\S+) on (\S+) owner=(\S+) auth=(\S+)"')


def bearer(token):
    return {"Authorization": "Bearer " + token}


def basic(user, password):
    import base64
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


def start(max_failures=0, grpc_tls=""):
    grpc_port, otlp_port = free_port(), free_port()
    text = CONFIG % {"b": TOKEN_B, "ar": TOKEN_A_READ, "aw": TOKEN_A_WRITE, "any": TOKEN_ANY,
                     "htpasswd": HTPASSWD, "max_failures": max_failures, "grpc": grpc_port,
                     "otlp": otlp_port, "grpc_tls": grpc_tls}
    c = Collector(text, env={"TOKEN_A": TOKEN_A})
    c.grpc, c.otlp = grpc_port, otlp_port
    deadline = time.monotonic() + 20
    try:
        while True:
            assert c.proc.poll() is None, c.log()
            try:
                if http("GET", c.metrics_base + "/ready", headers=bearer(TOKEN_A_READ),
                        timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, c.log()
            time.sleep(0.05)
    except BaseException:
        c.__exit__(None, None, None)
        raise
    return c


def routes(c):
    """[(method, path, port, owner, auth)] as the running server logged them."""
    out = []
    for m in ROUTE_LINE.finditer(c.log()):
        method, path, endpoint, owner, auth = m.groups()
        out.append((method, path, int(endpoint.rsplit(":", 1)[1]), owner, auth))
    return out


def probe_path(path):
    """A concrete path of a route (a prefix route ends in '*')."""
    return path[:-1] + "probe" if path.endswith("*") else path


def request(port, method, path, headers=None, body=None, source=None):
    """(status, headers, body) on a new connection, optionally from source address."""
    conn = HTTPConnection("127.0.0.1", port, timeout=10,
                                      source_address=(source, 0) if source else None)
    try:
        if body is None and method == "POST":
            body = b""
        conn.request(method, path, body, headers or {})
        r = conn.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        conn.close()


def ingest(c, app, folded, headers):
    q = urllib.parse.urlencode({"name": app + ".alloc_objects", "format": "folded",
                                "from": "1700000000", "until": "1700000010"})
    return http("POST", c.base + "/ingest?" + q, folded.encode(), headers)[0]


def alloc_types(c, headers):
    status, _, body = http("GET", c.base + "/pyroscope/label-values?label=__profile_type__",
                           headers=headers)
    assert status == 200, (status, body)
    return [t for t in json.loads(body) if t.split(":")[1:3] == ["alloc_objects", "count"]]


def render_total(c, service, headers):
    total = 0
    for t in alloc_types(c, headers):
        q = urllib.parse.urlencode({"query": '%s{service_name="%s"}' % (t, service), "from": "0",
                                    "until": "now"})
        status, _, body = http("GET", c.base + "/pyroscope/render?" + q, headers=headers)
        assert status == 200, (status, body)
        total += json.loads(body)["flamebearer"]["numTicks"]
    return total


def connect_total(c, service, headers):
    total = 0
    for t in alloc_types(c, headers):
        body = json.dumps({"profileTypeID": t, "labelSelector": '{service_name="%s"}' % service,
                           "start": 0, "end": int(time.time() * 1000)}).encode()
        status, _, resp = http("POST", c.base + "/querier.v1.QuerierService/SelectMergeStacktraces",
                               body, dict(headers, **{"Content-Type": "application/json"}))
        assert status == 200, (status, resp)
        total += int(json.loads(resp).get("flamegraph", {}).get("total", 0))
    return total


def service_names(c, headers):
    status, _, body = http("GET", c.base + "/pyroscope/label-values?label=service_name",
                           headers=headers)
    assert status == 200, (status, body)
    return set(json.loads(body))


def connect_service_names(c, headers):
    body = json.dumps({"name": "service_name", "start": 0,
                       "end": int(time.time() * 1000)}).encode()
    status, _, resp = http("POST", c.base + "/querier.v1.QuerierService/LabelValues", body,
                           dict(headers, **{"Content-Type": "application/json"}))
    assert status == 200, (status, resp)
    return set(json.loads(resp).get("names", []))


def otlp_body(service, stacks):
    """An OTLP request: a pprof written by hand (stacks: "root;...;leaf value" lines, one
    alloc_objects/count sample each), converted by `flamecol convert`."""
    from test_tls_listeners import otlp_request
    parsed = []
    for line in stacks.strip().splitlines():
        frames, value = line.rsplit(" ", 1)
        parsed.append((list(reversed(frames.split(";"))), int(value)))
    return otlp_request(parsed, service)


def grpc_export(port, body, metadata=(), channel=None):
    """The response, or the status code of the failure."""
    ch = channel or grpc.insecure_channel("127.0.0.1:%d" % port)
    try:
        return ch.unary_unary(METHOD)(body, timeout=10, metadata=list(metadata))
    except grpc.RpcError as e:
        return e.code()
    finally:
        ch.close()


class AuthEveryRouteTest(unittest.TestCase):
    """One collector, every listener behind one authenticator, no failure limit."""

    @classmethod
    def setUpClass(cls):
        cls.c = start()
        cls.all_routes = routes(cls.c)
        # The UI's static files (no data) are public so that its login form loads.
        cls.routes = [r for r in cls.all_routes if r[4] != "public"]

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    def test_routes_are_enumerated_from_the_server(self):
        paths = {(m, p) for m, p, _, _, _ in self.all_routes}
        # The enumeration is the server's; these must be among them (it is not empty or partial).
        for want in (("POST", "/ingest"), ("POST", "/pyroscope/ingest"),
                     ("POST", "/push.v1.PusherService/Push"), ("POST", "/v1development/profiles"),
                     ("GET", "/pyroscope/render"), ("GET", "/pyroscope/label-names"),
                     ("GET", "/pyroscope/label-values"), ("GET", "/api/v1/findings"),
                     ("POST", "/querier.v1.QuerierService/*"), ("GET", "/"), ("GET", "/ui/*"),
                     ("GET", "/metrics"), ("GET", "/healthz"), ("GET", "/ready")):
            self.assertIn(want, paths)
        ports = {port for _, _, port, _, _ in self.routes}
        self.assertEqual(ports, {self.c.ports["port"], self.c.otlp, self.c.ports["metrics"]})
        for method, path, _, owner, auth in self.routes:
            want = "write" if owner in ("pprof", "otlp") else "read"
            self.assertEqual(auth, want, (method, path, owner))
        public = {(m, p, o) for m, p, _, o, a in self.all_routes if a == "public"}
        self.assertEqual(public, {("GET", "/", "store"), ("GET", "/ui/*", "store"),
                                  ("GET", "/favicon.ico", "store")})
        for path in ("/", "/ui/app.js", "/ui/view_login.js", "/favicon.ico"):
            self.assertEqual(request(self.c.ports["port"], "GET", path)[0], 200, path)

    def test_every_route_without_credentials_is_401(self):
        self.assertGreater(len(self.routes), 10)
        for method, path, port, _, _ in self.routes:
            status, headers, body = request(port, method, probe_path(path))
            self.assertEqual(status, 401, (method, path, body))
            challenges = [v for k, v in headers if k.lower() == "www-authenticate"]
            self.assertIn('Bearer realm="flamecol"', challenges, path)
            self.assertIn('Basic realm="flamecol"', challenges, path)
            self.assertEqual(json.loads(body)["code"], "unauthenticated")

    def test_every_route_with_wrong_credentials_is_401(self):
        for method, path, port, _, _ in self.routes:
            for h in (bearer("not-a-token"), bearer(TOKEN_A + "x"), bearer(TOKEN_A[:-1]),
                      basic("alice", "wrong"), basic("nobody", ALICE_PASSWORD),
                      {"Authorization": "Digest abc"}):
                status, _, body = request(port, method, probe_path(path), h)
                self.assertEqual(status, 401, (method, path, h, body))

    def test_roles_per_route(self):
        for method, path, port, _, auth in self.routes:
            lacking = TOKEN_A_READ if auth == "write" else TOKEN_A_WRITE
            status, _, body = request(port, method, probe_path(path), bearer(lacking))
            self.assertEqual(status, 403, (method, path, body))
            self.assertEqual(json.loads(body)["code"], "permission_denied")
            if auth == "write":
                status, _, _ = request(port, method, probe_path(path), basic("alice", ALICE_PASSWORD))
                self.assertEqual(status, 403, (method, path))

    def test_claiming_another_tenant_is_403_everywhere(self):
        for method, path, port, _, _ in self.routes:
            status, _, body = request(port, method, probe_path(path),
                                      dict(bearer(TOKEN_A), **{"X-Scope-OrgID": "team-b"}))
            self.assertEqual(status, 403, (method, path, body))

    def test_authorized_requests_reach_the_handlers(self):
        port, metrics = self.c.ports["port"], self.c.ports["metrics"]
        self.assertEqual(request(port, "GET", "/", bearer(TOKEN_A_READ))[0], 200)
        self.assertEqual(request(port, "GET", "/", basic("alice", ALICE_PASSWORD))[0], 200)
        self.assertEqual(request(metrics, "GET", "/healthz", bearer(TOKEN_A))[0], 200)
        status, _, body = request(metrics, "GET", "/metrics", basic("alice", ALICE_PASSWORD))
        self.assertEqual(status, 200)
        self.assertIn(b"flamecol_auth_refusals_total", body)
        # The matching claim is allowed.
        self.assertEqual(request(port, "GET", "/pyroscope/label-names",
                                 dict(bearer(TOKEN_A), **{"X-Scope-OrgID": "team-a"}))[0], 200)

    def test_tenant_isolation(self):
        # Folded pushes: A 3 + 4 = 7 under "iso-a"; B 5 under "iso-b"; alice reads A's.
        self.assertEqual(ingest(self.c, "iso-a", "main;x 3\nmain;y 4\n", bearer(TOKEN_A)), 200)
        self.assertEqual(ingest(self.c, "iso-a", "main;z 100\n", bearer(TOKEN_A_READ)), 403)
        self.assertEqual(ingest(self.c, "iso-b", "main;x 5\n", basic("bob", BOB_PASSWORD)), 200)
        a, b, alice = bearer(TOKEN_A), bearer(TOKEN_B), basic("alice", ALICE_PASSWORD)
        self.assertEqual(render_total(self.c, "iso-a", a), 7)
        self.assertEqual(render_total(self.c, "iso-a", alice), 7)
        self.assertEqual(render_total(self.c, "iso-a", b), 0)
        self.assertEqual(render_total(self.c, "iso-b", b), 5)
        self.assertEqual(render_total(self.c, "iso-b", a), 0)
        self.assertEqual(connect_total(self.c, "iso-a", a), 7)
        self.assertEqual(connect_total(self.c, "iso-a", b), 0)
        self.assertIn("iso-a", service_names(self.c, a))
        self.assertNotIn("iso-a", service_names(self.c, b))
        self.assertNotIn("iso-b", service_names(self.c, a))
        self.assertIn("iso-a", connect_service_names(self.c, alice))
        self.assertNotIn("iso-a", connect_service_names(self.c, b))
        # A credential bound to no tenant: the header decides, as without auth.
        anyt = dict(bearer(TOKEN_ANY), **{"X-Scope-OrgID": "team-b"})
        self.assertEqual(render_total(self.c, "iso-b", anyt), 5)
        self.assertEqual(render_total(self.c, "iso-a", bearer(TOKEN_ANY)), 0)  # anonymous

    def test_otlp_http_tenant_and_roles(self):
        body = otlp_body("otlph", "main;a 6\nmain;b 1\n")
        url = "http://127.0.0.1:%d/v1development/profiles" % self.c.otlp
        ct = {"Content-Type": "application/x-protobuf"}
        self.assertEqual(http("POST", url, body, ct)[0], 401)
        self.assertEqual(http("POST", url, body, dict(ct, **bearer(TOKEN_A_READ)))[0], 403)
        self.assertEqual(http("POST", url, body, dict(ct, **bearer(TOKEN_A_WRITE)))[0], 200)
        self.assertEqual(self.total_any_type("otlph", bearer(TOKEN_A)), 7)
        self.assertEqual(self.total_any_type("otlph", bearer(TOKEN_B)), 0)

    def total_any_type(self, service, headers):
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=__profile_type__",
                               headers=headers)
        total = 0
        for t in json.loads(body):
            q = urllib.parse.urlencode({"query": '%s{service_name="%s"}' % (t, service),
                                        "from": "0", "until": "now"})
            status, _, r = http("GET", self.c.base + "/pyroscope/render?" + q, headers=headers)
            self.assertEqual(status, 200, r)
            total += json.loads(r)["flamebearer"]["numTicks"]
        return total

    def test_grpc(self):
        body = otlp_body("grpcsvc", "main;a 2\nmain;b 9\n")
        self.assertEqual(grpc_export(self.c.grpc, body), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(grpc_export(self.c.grpc, body, [("authorization", "Bearer nope")]),
                         grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(grpc_export(self.c.grpc, body, [("authorization", "Bearer " + TOKEN_A_READ)]),
                         grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(grpc_export(self.c.grpc, body, [("authorization", "Bearer " + TOKEN_A),
                                                         ("x-scope-orgid", "team-b")]),
                         grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(grpc_export(self.c.grpc, body, [("authorization", "Bearer " + TOKEN_A)]), b"")
        self.assertEqual(self.total_any_type("grpcsvc", bearer(TOKEN_A)), 11)
        self.assertEqual(self.total_any_type("grpcsvc", bearer(TOKEN_B)), 0)
        # bob's basic credentials (team-b) over gRPC land in team-b.
        self.assertEqual(grpc_export(self.c.grpc, otlp_body("grpcbob", "m;x 4\n"),
                                     [("authorization", basic("bob", BOB_PASSWORD)["Authorization"])]),
                         b"")
        self.assertEqual(self.total_any_type("grpcbob", bearer(TOKEN_B)), 4)
        self.assertEqual(self.total_any_type("grpcbob", bearer(TOKEN_A)), 0)
        _, _, m = http("GET", self.c.metrics_base + "/metrics", headers=bearer(TOKEN_A))
        for reason in ("missing", "bad_credentials", "role", "tenant"):
            self.assertIn(('flamecol_auth_refusals_total{listener="127.0.0.1:%d",reason="%s"} 1'
                           % (self.c.grpc, reason)).encode(), m)

    def test_refusals_counted_and_secrets_never_shown(self):
        port = self.c.ports["port"]
        listener = 'listener="127.0.0.1:%d",reason="%%s"' % port

        def count(reason):
            _, _, body = http("GET", self.c.metrics_base + "/metrics", headers=bearer(TOKEN_A))
            want = "flamecol_auth_refusals_total{%s} " % (listener % reason)
            for line in body.decode().splitlines():
                if line.startswith(want):
                    return int(float(line.split()[-1])), body
            return None, body

        before = {r: count(r)[0] for r in ("missing", "bad_credentials", "role", "tenant")}
        for _ in range(3):
            request(port, "GET", "/pyroscope/label-names")
        for _ in range(2):
            request(port, "GET", "/pyroscope/label-names", bearer("wrong-" + TOKEN_A))
        request(port, "POST", "/ingest", bearer(TOKEN_A_READ))
        for _ in range(4):
            request(port, "GET", "/pyroscope/label-names",
                    dict(bearer(TOKEN_B), **{"X-Scope-OrgID": "team-a"}))
        after = {r: count(r)[0] for r in before}
        self.assertEqual({r: after[r] - before[r] for r in before},
                         {"missing": 3, "bad_credentials": 2, "role": 1, "tenant": 4})
        metrics = count("missing")[1].decode()
        log = self.c.log()
        for secret in (TOKEN_A, TOKEN_B, TOKEN_A_READ, ALICE_PASSWORD, BOB_PASSWORD):
            self.assertNotIn(secret, metrics)
            self.assertNotIn(secret, log)


# ---- tenant isolation on every read route --------------------------------------------------

T0 = 1700000000  # the pushes' time (s); every query asks T0 +- 1 h
CONNECT_METHOD_LINE = re.compile(r'msg="connect method POST /querier\.v1\.QuerierService/(\w+) '
                                 r'owner=(\S+)"')
UI_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ui")


def iso_names(t):
    """What only tenant t ("a" or "b") pushed: its functions, service, sample type, label."""
    return {"main": "iso%s_main" % t.upper(), "leaf": "iso%s_leaf" % t.upper(),
            "service": "iso-only-" + t, "type": "iso%s_objects" % t, "label": "iso%s_label" % t,
            "span": "00000000000000%s1" % t, "trace": ("%s2" % t) * 16}


def iso_pprof(n):
    """A pprof written by hand: sample type <type>/count; leaf<-main 3 (span and trace
    labels), main alone 4."""
    from harness import pb_ld, pb_packed, pb_vi
    strings = ["", n["type"], "count", n["main"], n["leaf"], "span_id", n["span"], "trace_id",
               n["trace"]]
    msg = pb_ld(1, pb_vi(1, 1) + pb_vi(2, 2))
    for fid, name in ((1, 3), (2, 4)):
        msg += pb_ld(5, pb_vi(1, fid) + pb_vi(2, name))
        msg += pb_ld(4, pb_vi(1, fid) + pb_ld(4, pb_vi(1, fid)))
    msg += pb_ld(2, pb_packed(1, [2, 1]) + pb_packed(2, [3]) + pb_ld(3, pb_vi(1, 5) + pb_vi(2, 6))
                 + pb_ld(3, pb_vi(1, 7) + pb_vi(2, 8)))
    msg += pb_ld(2, pb_packed(1, [1]) + pb_packed(2, [4]))
    return msg + b"".join(pb_ld(6, x.encode()) for x in strings)


def ui_data_calls():
    """(paths, Connect methods) the UI's scripts call."""
    paths, methods = set(), set()
    for name in sorted(os.listdir(UI_DIR)):
        if name.endswith(".js"):
            with open(os.path.join(UI_DIR, name)) as f:
                text = f.read()
            paths |= {"/" + m for m in re.findall(r"'((?:pyroscope|api/v\d+)/[\w./-]+)[?']", text)}
            methods |= set(re.findall(r"connect\('(\w+)'", text))
    return paths, methods


class TenantIsolationEveryRouteTest(unittest.TestCase):
    """team-a and team-b push the same service (iso-shared) with functions, sample types
    and labels of their own, and a service each: on every read route the server lists
    (and every Connect method it logs), one tenant's token sees its own names and never
    the other's. A read route without a case below fails the test."""

    @classmethod
    def setUpClass(cls):
        cls.c = start()
        cls.all_routes = routes(cls.c)
        cls.methods = [m for m, owner in CONNECT_METHOD_LINE.findall(cls.c.log())]
        cls.tokens = {"a": TOKEN_A, "b": TOKEN_B}
        for t, token in cls.tokens.items():
            n = iso_names(t)
            for svc in ("iso-shared", n["service"]):
                q = "name=%s&from=%d&until=%d" % (urllib.parse.quote(
                    "%s{%s=x}" % (svc, n["label"])), T0, T0 + 10)
                status, _, text = http("POST", cls.c.base + "/ingest?" + q, iso_pprof(n),
                                       dict(bearer(token),
                                            **{"Content-Type": "application/octet-stream"}))
                assert status == 200, text
        cls.types = {}
        for t in cls.tokens:
            status, _, body = http("GET", cls.c.base +
                                   "/pyroscope/label-values?label=__profile_type__",
                                   headers=bearer(cls.tokens[t]))
            assert status == 200, body
            types = json.loads(body)
            assert len(types) == 1 and iso_names(t)["type"] in types[0], types
            cls.types[t] = types[0]

    @classmethod
    def tearDownClass(cls):
        assert cls.c.stop() == 0, cls.c.log()

    # -- one request per route or method, in tenant t's name --------------------------------

    def get(self, t, path, **params):
        """GET on the port the server registered the route on."""
        port = {(m, p): port for m, p, port, _, _ in self.all_routes}[("GET", path)]
        q = urllib.parse.urlencode(params)
        status, _, body = http("GET", "http://127.0.0.1:%d%s%s" % (port, path,
                                                                   "?" + q if q else ""),
                               headers=bearer(self.tokens[t]))
        return status, body.decode("utf-8", "replace")

    def connect(self, t, method, body):
        status, _, resp = http("POST", self.c.base + "/querier.v1.QuerierService/" + method,
                               json.dumps(body).encode(),
                               dict(bearer(self.tokens[t]), **{"Content-Type": "application/json"}))
        return status, resp.decode("utf-8", "replace")

    def query(self, t, svc="iso-shared"):
        return '%s{service_name="%s"}' % (self.types[t], svc)

    def rng(self):
        return {"from": str(T0 - 3600), "until": str(T0 + 3600)}

    def connect_range(self, t, **extra):
        body = {"profileTypeID": self.types[t], "labelSelector": '{service_name="iso-shared"}',
                "start": str((T0 - 3600) * 1000), "end": str((T0 + 3600) * 1000)}
        body.update(extra)
        return body

    def route_cases(self):
        """{(method, path): (fn(t) -> [(status, text)], the kinds of own names it shows)};
        own kinds empty: the route serves no tenant data (it must show none of it)."""
        leaf = lambda t: iso_names(t)["leaf"]
        return {
            ("GET", "/pyroscope/render"): (lambda t: [
                self.get(t, "/pyroscope/render", query=self.query(t), **self.rng()),
                self.get(t, "/pyroscope/render", query=self.query(t), groupBy="service_name",
                         format="folded", **self.rng())], ("main", "leaf")),
            ("GET", "/pyroscope/render-diff"): (lambda t: [self.get(
                t, "/pyroscope/render-diff", leftQuery=self.query(t), rightQuery=self.query(t),
                leftFrom=str(T0 - 3600), leftUntil=str(T0 + 3600), rightFrom=str(T0 - 3600),
                rightUntil=str(T0 + 3600))], ("main", "leaf")),
            ("GET", "/pyroscope/label-names"): (lambda t: [
                self.get(t, "/pyroscope/label-names")], ("label",)),
            ("GET", "/pyroscope/label-values"): (lambda t: [
                self.get(t, "/pyroscope/label-values", label="service_name"),
                self.get(t, "/pyroscope/label-values", label="__profile_type__")],
                ("service", "type")),
            ("GET", "/api/v1/findings"): (lambda t: [
                self.get(t, "/api/v1/findings", query=self.query(t), **self.rng())],
                ("main", "leaf")),
            ("GET", "/api/v1/function"): (lambda t: [
                self.get(t, "/api/v1/function", query=self.query(t), name=leaf(t),
                         **self.rng())], ("main", "leaf")),
            # Source files are shared across tenants by design (query.ui.source_roots, the
            # README): no profile data there.
            ("GET", "/api/v1/source"): (lambda t: [
                self.get(t, "/api/v1/source", file="/src/main.go")], ()),
            ("GET", "/api/v1/source-roots"): (lambda t: [
                self.get(t, "/api/v1/source-roots")], ()),
            # The telemetry endpoint: the process's own health and counters.
            ("GET", "/metrics"): (lambda t: [self.get(t, "/metrics")], ()),
            ("GET", "/healthz"): (lambda t: [self.get(t, "/healthz")], ()),
            ("GET", "/ready"): (lambda t: [self.get(t, "/ready")], ()),
        }

    def connect_cases(self):
        """{Connect method: (fn(t) -> [(status, text)], own kinds)}."""
        span = lambda t: iso_names(t)["span"]
        return {
            "ProfileTypes": (lambda t: [self.connect(t, "ProfileTypes", {})], ("type",)),
            "LabelNames": (lambda t: [self.connect(t, "LabelNames", {})], ("label",)),
            "LabelValues": (lambda t: [
                self.connect(t, "LabelValues", {"name": "service_name"}),
                self.connect(t, "LabelValues", {"name": "__profile_type__",
                                                "matchers": ['{service_name="iso-shared"}']})],
                ("service", "type")),
            "Series": (lambda t: [self.connect(t, "Series", {"labelNames": ["service_name"]})],
                       ("service",)),
            "SelectMergeStacktraces": (lambda t: [
                self.connect(t, "SelectMergeStacktraces", self.connect_range(t)),
                self.connect(t, "SelectMergeStacktraces", self.connect_range(
                    t, traceIdSelector=[iso_names(t)["trace"]]))], ("main", "leaf")),
            "SelectMergeProfile": (lambda t: [
                self.connect(t, "SelectMergeProfile", self.connect_range(t))], ("main", "leaf")),
            "SelectSeries": (lambda t: [self.connect(t, "SelectSeries", self.connect_range(
                t, labelSelector="{}", groupBy=["service_name"], step=10))], ("service",)),
            "Diff": (lambda t: [self.connect(t, "Diff", {
                "left": self.connect_range(t), "right": self.connect_range(t)})],
                ("main", "leaf")),
            "SelectMergeSpanProfile": (lambda t: [self.connect(
                t, "SelectMergeSpanProfile", self.connect_range(t, spanSelector=[span(t)]))],
                ("main", "leaf")),
        }

    def check(self, what, fn, own_kinds):
        for t, other in (("a", "b"), ("b", "a")):
            mine, theirs = iso_names(t), iso_names(other)
            answers = fn(t)
            for status, text in answers:
                for kind in ("main", "leaf", "service", "type", "label"):
                    self.assertNotIn(theirs[kind], text, (what, t, status, text[:300]))
            for status, text in answers:
                # 404 only where there is nothing to serve (no source roots configured).
                self.assertIn(status, (200, 404) if not own_kinds else (200,),
                              (what, t, text[:300]))
            if own_kinds:
                for kind in own_kinds:
                    self.assertTrue(any(mine[kind] in text for _, text in answers),
                                    (what, t, kind, [a[1][:300] for a in answers]))

    # -- the tests ----------------------------------------------------------------------------

    def test_every_read_route_has_a_case(self):
        read = {(m, p) for m, p, _, _, a in self.all_routes if a == "read"}
        cases = set(self.route_cases()) | {("POST", "/querier.v1.QuerierService/*")}
        self.assertEqual(read - cases, set(), "read routes without an isolation case")
        self.assertGreaterEqual(len(self.methods), 9, self.c.log())
        self.assertEqual(set(self.methods) - set(self.connect_cases()), set(),
                         "Connect methods without an isolation case")
        # What the UI asks for is among them.
        paths, methods = ui_data_calls()
        self.assertIn("/pyroscope/render", paths)
        self.assertIn("SelectMergeStacktraces", methods)
        self.assertEqual(paths - {p for _, p in read}, set(), "UI calls of unknown routes")
        self.assertEqual(methods - set(self.methods), set(), "UI calls of unknown methods")

    def test_isolation_on_every_read_route(self):
        read = sorted({(m, p) for m, p, _, _, a in self.all_routes if a == "read"})
        cases = self.route_cases()
        for route in read:
            if route == ("POST", "/querier.v1.QuerierService/*"):
                continue  # one case per method below
            with self.subTest(route=route):
                self.check(route, *cases[route])

    def test_isolation_on_every_connect_method(self):
        cases = self.connect_cases()
        for method in self.methods:
            with self.subTest(method=method):
                self.check(method, *cases[method])

    def test_naming_the_other_tenants_data_finds_nothing(self):
        b = iso_names("b")
        status, _ = self.get("a", "/api/v1/function", query=self.query("a"), name=b["leaf"],
                             **self.rng())
        self.assertEqual(status, 404)
        # team-b's own profile type and service, asked with team-a's token: nothing.
        for status, text in (
                self.get("a", "/pyroscope/render", query=self.query("b", b["service"]),
                         **self.rng()),
                self.connect("a", "SelectMergeStacktraces", dict(
                    self.connect_range("b"), labelSelector='{service_name="%s"}' % b["service"])),
                self.connect("a", "SelectMergeSpanProfile", self.connect_range(
                    "a", spanSelector=[b["span"]])),
                self.connect("a", "SelectMergeStacktraces", self.connect_range(
                    "a", traceIdSelector=[b["trace"]]))):
            for kind in ("main", "leaf"):
                self.assertNotIn(b[kind], text, text[:300])


class ThrottleTest(unittest.TestCase):
    """max_failures_per_minute: 3 -> the 4th attempt from one address gets 429."""

    def test_failures_throttle_one_address(self):
        c = start(max_failures=3)
        try:
            port = c.ports["port"]
            for _ in range(3):
                self.assertEqual(request(port, "GET", "/pyroscope/label-names",
                                         bearer("guess"))[0], 401)
            status, headers, body = request(port, "GET", "/pyroscope/label-names", bearer(TOKEN_A))
            self.assertEqual(status, 429, body)
            self.assertEqual(dict((k.lower(), v) for k, v in headers)["retry-after"], "60")
            # gRPC from the same address is throttled too (one authenticator).
            self.assertEqual(grpc_export(c.grpc, b"", [("authorization", "Bearer " + TOKEN_A)]),
                             grpc.StatusCode.RESOURCE_EXHAUSTED)
            # Another client address is not.
            self.assertEqual(request(port, "GET", "/pyroscope/label-names", bearer(TOKEN_A),
                                     source="127.0.0.2")[0], 200)
            _, _, m = request(c.ports["metrics"], "GET", "/metrics", bearer(TOKEN_A),
                              source="127.0.0.2")
            self.assertIn(('flamecol_auth_refusals_total{listener="127.0.0.1:%d",'
                           'reason="throttled"} 1' % port).encode(), m)
        finally:
            assert c.stop() == 0, c.log()


class GrpcTlsAuthTest(unittest.TestCase):
    """The gRPC listener with TLS and an authenticator: credentials over an encrypted channel."""

    def test_grpc_over_tls(self):
        from test_tls_listeners import PKI, tls_block
        c = start(grpc_tls=tls_block(indent=8))
        try:
            with open(PKI("ca.crt"), "rb") as f:
                creds = grpc.ssl_channel_credentials(f.read())

            def channel():
                return grpc.secure_channel("127.0.0.1:%d" % c.grpc, creds)

            body = otlp_body("tlsauth", "main;a 8\n")
            self.assertEqual(grpc_export(c.grpc, body, channel=channel()),
                             grpc.StatusCode.UNAUTHENTICATED)
            self.assertEqual(grpc_export(c.grpc, body, [("authorization", "Bearer " + TOKEN_B)],
                                         channel=channel()), b"")
            status, _, r = http("GET", c.base + "/pyroscope/label-values?label=service_name",
                                headers=bearer(TOKEN_B))
            self.assertIn("tlsauth", json.loads(r))
            status, _, r = http("GET", c.base + "/pyroscope/label-values?label=service_name",
                                headers=bearer(TOKEN_A))
            self.assertNotIn("tlsauth", json.loads(r))
        finally:
            assert c.stop() == 0, c.log()


class MixedListenerTest(unittest.TestCase):
    """Auth is per route: on a port shared by the pprof receiver (with auth) and the store
    (without), only the receiver's routes need credentials, and a warning says so."""

    def test_per_route_and_warned(self):
        c = Collector("""
extensions:
  auth: {bearer_tokens: [{token: %s, tenant: team-a}]}
receivers:
  pprof: {endpoint: 127.0.0.1:{port}, auth: {authenticator: auth}}
exporters:
  store: {path: {dir}/data, query: {endpoint: 127.0.0.1:{port}}}
service:
  extensions: [auth]
  telemetry: {metrics: {endpoint: 127.0.0.1:{metrics}}}
  pipelines: {profiles: {receivers: [pprof], exporters: [store]}}
""" % TOKEN_A)
        with c:
            self.assertEqual(ingest(c, "mixed", "main 1\n", {}), 401)
            self.assertEqual(ingest(c, "mixed", "main 1\n", bearer(TOKEN_A)), 200)
            self.assertEqual(http("GET", c.base + "/pyroscope/label-names")[0], 200)
            self.assertEqual(http("GET", c.metrics_base + "/metrics")[0], 200)
            self.assertIn("the routes of pprof require credentials but those of store do not",
                          c.log())
            self.assertEqual(c.stop(), 0, c.log())


class ExposedListenerWarningTest(unittest.TestCase):
    """A listener beyond loopback with an authenticator but no tls is warned about the
    missing tls only; the telemetry listener, on loopback, is not warned about."""

    def test_warning_names_what_is_missing(self):
        c = Collector("""
extensions:
  auth: {bearer_tokens: [{token: %s, tenant: team-a}]}
receivers:
  pprof: {endpoint: 0.0.0.0:{port}, auth: {authenticator: auth}}
  otlp: {protocols: {grpc: {endpoint: 0.0.0.0:{grpc}, auth: {authenticator: auth}}}}
exporters:
  nop:
service:
  extensions: [auth]
  telemetry: {metrics: {endpoint: 127.0.0.1:{metrics}}}
  pipelines: {profiles: {receivers: [pprof, otlp], exporters: [nop]}}
""".replace("{grpc}", str(free_port())) % TOKEN_A)
        with c:
            self.assertEqual(c.stop(), 0, c.log())
        exposed = [l for l in c.log().splitlines() if "non-loopback" in l]
        self.assertEqual(len(exposed), 2, c.log())
        for line in exposed:
            self.assertIn("without tls: ", line)  # not "without tls and auth"


class ConfigTest(unittest.TestCase):
    BASE = """
extensions:
  auth:
    bearer_tokens: [{token: t1, tenant: a}]
%s
receivers:
  pprof:
    endpoint: 127.0.0.1:4040
    auth: {authenticator: %s%s}
exporters:
  debug:
service:
%s
  pipelines:
    profiles: {receivers: [pprof], exporters: [debug]}
"""

    def test_valid(self):
        rc, out, _ = validate_config(self.BASE % ("", "auth", "", "  extensions: [auth]"))
        self.assertEqual(rc, 0, out)

    def test_unknown_authenticator_is_an_error_at_its_line(self):
        text = self.BASE % ("", "nope", "", "  extensions: [auth]")
        line = text.splitlines().index("    auth: {authenticator: nope}") + 1
        rc, out, path = validate_config(text)
        self.assertNotEqual(rc, 0)
        col = "    auth: {authenticator: nope}".index("nope") + 1
        self.assertIn("%s:%d:%d:" % (path, line, col), out)
        self.assertIn("authenticator 'nope' is not an enabled extension", out)

    def test_not_started_extension_warns_and_cannot_be_named(self):
        spare = "  auth/spare:\n    bearer_tokens: [{token: t2}]"
        rc, out, path = validate_config(self.BASE % (spare, "auth/spare", "", "  extensions: [auth]"))
        self.assertNotEqual(rc, 0)
        self.assertIn("extensions.auth/spare is defined but not in service.extensions", out)
        self.assertIn("authenticator 'auth/spare' is not an enabled extension", out)
        rc, out, _ = validate_config(self.BASE % (spare, "auth", "", "  extensions: [auth]"))
        self.assertEqual(rc, 0, out)
        self.assertIn("auth/spare is defined but not in service.extensions", out)

    def test_legacy_keys_exclusive_with_authenticator(self):
        rc, out, _ = validate_config(self.BASE % ("", "auth", ", bearer_token: x",
                                                  "  extensions: [auth]"))
        self.assertNotEqual(rc, 0)
        self.assertIn("set authenticator or the legacy bearer_token/basic, not both", out)

    def test_bad_extension(self):
        rc, out, _ = validate_config(
            "extensions:\n  oidc: {}\n  auth: {bearer_tokens: [{token: t, roles: [admin]}]}\n"
            "receivers: {pprof: {}}\nexporters: {debug: {}}\nservice:\n  extensions: [auth, ghost]\n"
            "  pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}\n")
        self.assertNotEqual(rc, 0)
        self.assertIn("unknown extension 'oidc'", out)
        self.assertIn("roles: each is read or write", out)
        self.assertIn("'ghost' is not defined in extensions:", out)


if __name__ == "__main__":
    unittest.main()
