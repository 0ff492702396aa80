"""The receivers and the store against references that are not flamecol
(issue 10): every input here is built by hand from the protobuf field numbers
of proto/google/v1/profile.proto and proto/opentelemetry/..., and every
expected value is computed by hand in this file, never read back from
flamecol.

- basic and bearer auth: only the configured credentials pass; every refusal
  is a 401 counted in /metrics;
- max_sample_labels: a sample with exactly the limit is accepted, one more is
  refused naming the limit, on /ingest, push.v1, OTLP/HTTP and OTLP/gRPC;
- prev_profile: profile - prev_profile per (stack, labels), with the prev's
  samples in another order, with other ids, other string tables, labels in
  another order, and stacks listed twice (the sum of one minus the sum of the
  other, as pprof -diff_base computes it);
- the store keeps every sample label of a sample (40, 100, and 150 with no
  cap) as series labels;
- an OTLP request with several stacks, values and attributes is stored as
  the hand-computed folded stacks and totals, over HTTP and gRPC.
"""
import base64
from http.client import HTTPConnection
import json
import unittest
import urllib.parse

import grpc

from harness import Collector, free_port, http, multipart, pb_ld, pb_packed, pb_put_varint, pb_vi

METHOD = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
ALLOC = "memory:alloc_space:bytes:space:bytes"
INUSE = "memory:inuse_space:bytes:space:bytes"
# Pyroscope's names: a pprof of samples:count is process_cpu; an OTLP profile takes
# __name__ from its period type (README, "The otlp receiver").
PPROF_COUNT = "process_cpu:samples:count:samples:count"
OTLP_COUNT = "samples:samples:count:samples:count"
# An OTLP cpu:nanoseconds profile (period cpu:nanoseconds) is named after its period type.
OTLP_CPU = "cpu:cpu:nanoseconds:cpu:nanoseconds"
T0 = 1700000000  # seconds; every hand-made profile carries its own time

PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
  pprof/open:
    endpoint: 127.0.0.1:{open}
    max_sample_labels: 0
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
      receivers: [pprof, pprof/open, otlp]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""

AUTH_PIPELINE = """
receivers:
  pprof:
    endpoint: 127.0.0.1:{port}
    auth:
%s
exporters:
  nop:
service:
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [nop]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:{metrics}
"""


# ---- protobuf, by hand ------------------------------------------------------------------------

varint, ld, vi, packed = pb_put_varint, pb_ld, pb_vi, pb_packed


def pprof(sample_types, samples, time_s=T0, id_base=1, reverse_strings=False, period_type=None):
    """A perftools.profiles.Profile (proto/google/v1/profile.proto).

    sample_types: [(type, unit)]; samples: [(frames root first, [values], [(key, value)])].
    One function and one location per distinct frame name; ids start at id_base
    (so two profiles can give the same frames other ids) and the string table can
    be laid out backwards (so the same names get other indices)."""
    names = []
    for frames, _, labels in samples:
        for f in frames:
            if f not in names:
                names.append(f)
    period_type = period_type or sample_types[0]
    words = [w for t in sample_types + [period_type] for w in t]
    words += names + [w for _, _, labels in samples for kv in labels for w in kv]
    table = []
    for w in words:
        if w not in table:
            table.append(w)
    if reverse_strings:
        table.reverse()
    table = [""] + table
    s = {w: i for i, w in enumerate(table)}
    fid = {n: id_base + 10 * i for i, n in enumerate(names)}   # function ids
    lid = {n: id_base + 7 + 10 * i for i, n in enumerate(names)}  # location ids
    p = b""
    for t, u in sample_types:
        p += ld(1, vi(1, s[t]) + vi(2, s[u]))                         # sample_type
    for frames, values, labels in samples:
        sm = packed(1, [lid[f] for f in reversed(frames)])            # location_id, leaf first
        sm += packed(2, values)                                        # value
        for k, v in labels:
            sm += ld(3, vi(1, s[k]) + vi(2, s[v]))                     # label{key, str}
        p += ld(2, sm)
    for n in reversed(names):
        p += ld(4, vi(1, lid[n]) + ld(4, vi(1, fid[n]) + vi(2, 1)))   # location{id, line{function_id, line}}
    for n in names:
        p += ld(5, vi(1, fid[n]) + vi(2, s[n]))                       # function{id, name}
    p += b"".join(ld(6, w.encode()) for w in table)                   # string_table
    p += vi(9, time_s * 10**9) + vi(10, 10 * 10**9)                   # time_nanos, duration_nanos
    p += ld(11, vi(1, s[period_type[0]]) + vi(2, s[period_type[1]]))  # period_type
    return p + vi(12, 1)                                               # period


def otlp(service, profiles, time_s=T0):
    """An ExportProfilesServiceRequest (opentelemetry.proto.collector.profiles.v1development).

    profiles: [((type, unit), [(frames root first, value, [(attr key, attr value)])],
    optional (period type, period unit, period))]; the period type defaults to the
    sample type, the period to 1. All in one ResourceProfiles with service.name = service. Tables are shared
    through the request's dictionary, laid out in an order of their own:
    functions in reverse, locations rotated by one."""
    strings = [""]
    attrs = []
    stacks = []
    names = []

    def si(w):
        if w not in strings:
            strings.append(w)
        return strings.index(w)

    profiles = [pr if len(pr) == 3 else pr + ((pr[0][0], pr[0][1], 1),) for pr in profiles]
    for (t, u), samples, (pt, pu, _) in profiles:
        si(t), si(u), si(pt), si(pu)
        for frames, _, sattrs in samples:
            for f in frames:
                if f not in names:
                    names.append(f)
            for kv in sattrs:
                if kv not in attrs:
                    attrs.append(kv)
            if tuple(frames) not in stacks:
                stacks.append(tuple(frames))
    for n in names:
        si(n)
    functions = list(reversed(names))                 # function_table[1:]
    locations = names[1:] + names[:1]                 # location_table[1:]: location -> its function
    fidx = {n: 1 + functions.index(n) for n in names}
    lidx = {n: 1 + locations.index(n) for n in names}
    d = ld(1, b"")                                                          # mapping_table[0]
    d += ld(2, b"") + b"".join(ld(2, ld(3, vi(1, fidx[n]))) for n in locations)   # location_table
    d += ld(3, b"") + b"".join(ld(3, vi(1, si(n))) for n in functions)   # function_table
    d += ld(4, b"")                                                         # link_table[0]
    d += ld(6, b"")                                                         # attribute_table[0]
    for k, v in attrs:  # KeyValueAndUnit{key_strindex, value: AnyValue{string_value}}
        d += ld(6, vi(1, si(k)) + ld(2, ld(1, v.encode())))
    d += ld(7, b"") + b"".join(ld(7, packed(1, [lidx[f] for f in reversed(st)])) for st in stacks)
    d += b"".join(ld(5, w.encode()) for w in strings)                      # string_table, last: si() grew it
    scope = b""
    for (t, u), samples, (pt, pu, period) in profiles:
        vt = vi(1, si(t)) + vi(2, si(u))
        pr = ld(1, vt)
        for frames, value, sattrs in samples:
            sm = vi(1, 1 + stacks.index(tuple(frames)))
            if sattrs:
                sm += packed(2, [1 + attrs.index(kv) for kv in sattrs])
            pr += ld(2, sm + packed(4, [value]))
        pr += varint(3 << 3 | 1) + (time_s * 10**9).to_bytes(8, "little")  # time_unix_nano
        pr += vi(4, 10 * 10**9) + ld(5, vi(1, si(pt)) + vi(2, si(pu))) + vi(6, period)  # duration, period
        scope += ld(2, pr)
    svc = ld(1, b"service.name") + ld(2, ld(1, service.encode()))
    rp = ld(1, ld(1, svc)) + ld(2, scope)
    return ld(1, rp) + ld(2, d)


def labels_pprof(n, prefix="k"):
    """One sample of samples:count (value 3) on main;work with n distinct labels."""
    labels = [("%s%d" % (prefix, i), "v%d" % i) for i in range(n)]
    return pprof([("samples", "count")], [(["main", "work"], [3], labels)])


# ---- tests --------------------------------------------------------------------------------

def request(c, path, body, headers, source):
    """(status, {lower-case header: value}, body) of a POST from the loopback address source."""
    conn = HTTPConnection("127.0.0.1", c.ports["port"], timeout=30, source_address=(source, 0))
    try:
        conn.request("POST", path, body, headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


class AuthTest(unittest.TestCase):
    """auth.basic and auth.bearer_token (the legacy keys) on /ingest and push.v1: only the
    exact configured credentials pass, every refusal is a 401 counted once in
    flamecol_auth_refusals_total, as for an `auth` extension: the legacy keys build the
    same authenticator, so failed attempts are limited per client address too (10 per
    minute): each round of bad attempts below comes from its own loopback address."""

    def refused(self, c):
        return sum(c.metric("flamecol_auth_refusals_total",
                            'listener="127.0.0.1:%d",reason="%s"' % (c.ports["port"], r)) or 0
                   for r in ("missing", "bad_credentials", "throttled"))

    def check(self, auth_yaml, good, bad):
        c = Collector(AUTH_PIPELINE % auth_yaml)
        with c:
            for i, url in enumerate(("/ingest?name=auth.cpu", "/pyroscope/ingest?name=auth.cpu")):
                source = "127.0.1.%d" % (i + 1)
                before = self.refused(c)
                for header in bad:
                    headers = {"Authorization": header} if header is not None else {}
                    status, h, body = request(c, url, b"main;work 1\n", headers, source)
                    self.assertEqual(status, 401, "%s %r" % (url, header))
                    self.assertEqual(json.loads(body)["code"], "unauthenticated")
                    self.assertIn("www-authenticate", h)
                self.assertEqual(self.refused(c), before + len(bad), url)
                status, _, body = request(c, url, b"main;work 1\n", {"Authorization": good}, source)
                self.assertEqual(status, 200, body)
                self.assertEqual(self.refused(c), before + len(bad), url)
            push = "/push.v1.PusherService/Push"
            ctype = {"Content-Type": "application/json"}
            body = json.dumps({"series": [{"labels": [{"name": "service_name", "value": "auth"}],
                                           "samples": [{"rawProfile": base64.b64encode(
                                               labels_pprof(1)).decode()}]}]}).encode()
            before = self.refused(c)
            for header in bad:
                headers = dict(ctype, **({"Authorization": header} if header is not None else {}))
                status, _, resp = request(c, push, body, headers, "127.0.1.9")
                self.assertEqual(status, 401, "push %r" % header)
                self.assertEqual(json.loads(resp)["code"], "unauthenticated")
            self.assertEqual(self.refused(c), before + len(bad))
            status, _, resp = request(c, push, body, dict(ctype, Authorization=good), "127.0.1.9")
            self.assertEqual(status, 200, resp)
            self.assertEqual(c.stop(), 0, c.log())

    def test_legacy_keys_are_throttled_and_counted_as_the_extension(self):
        c = Collector(AUTH_PIPELINE % "      bearer_token: t0ken-abc\n")
        listener = 'listener="127.0.0.1:%d",reason="%%s"' % c.ports["port"]
        with c:
            for _ in range(10):
                self.assertEqual(request(c, "/ingest?name=t.cpu", b"a 1\n",
                                         {"Authorization": "Bearer guess"}, "127.0.2.1")[0], 401)
            # The 11th attempt from that address is refused before its token is looked at.
            status, h, _ = request(c, "/ingest?name=t.cpu", b"a 1\n",
                                   {"Authorization": "Bearer t0ken-abc"}, "127.0.2.1")
            self.assertEqual(status, 429)
            self.assertEqual(h["retry-after"], "60")
            self.assertEqual(request(c, "/ingest?name=t.cpu", b"a 1\n",
                                     {"Authorization": "Bearer t0ken-abc"}, "127.0.2.2")[0], 200)
            self.assertEqual(c.metric("flamecol_auth_refusals_total",
                                      listener % "bad_credentials"), 10)
            self.assertEqual(c.metric("flamecol_auth_refusals_total", listener % "throttled"), 1)
            self.assertNotIn("t0ken-abc", c.log())
            self.assertEqual(c.stop(), 0, c.log())

    def test_basic_auth(self):
        def basic(pair):
            return "Basic " + base64.b64encode(pair).decode()
        self.check("      basic:\n        username: alice\n        password: s3cret-pw\n",
                   basic(b"alice:s3cret-pw"),
                   [None,                                   # no header
                    basic(b"alice:wrong"),                  # wrong password
                    basic(b"alice:"),                       # empty password
                    basic(b"alice:s3cret-pwX"),             # longer password
                    basic(b"alice:s3cret-p"),               # a prefix of it
                    basic(b"mallory:s3cret-pw"),            # wrong user
                    basic(b"alice"),                        # no colon
                    "Basic",                                # no credentials
                    "Bearer s3cret-pw",                     # another scheme
                    basic(b"alice:s3cret-pw")[:-2]])        # truncated encoding

    def test_bearer_token(self):
        self.check("      bearer_token: t0ken-abc\n", "Bearer t0ken-abc",
                   [None, "Bearer wrong", "Bearer t0ken-ab", "Bearer t0ken-abcd", "Bearer ",
                    "t0ken-abc", "Basic " + base64.b64encode(b"x:t0ken-abc").decode()])


class ReceiverRefsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc_port, otlp_port, open_port = free_port(), free_port(), free_port()
        cls.c = Collector(PIPELINE.replace("{grpc}", str(cls.grpc_port))
                          .replace("{otlp}", str(otlp_port)).replace("{open}", str(open_port)))
        cls.c.wait_ready()
        cls.otlp_url = "http://127.0.0.1:%d/v1development/profiles" % otlp_port
        cls.open_base = "http://127.0.0.1:%d" % open_port
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.grpc_port)
        cls.export = cls.channel.unary_unary(METHOD)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.c.stop() == 0, cls.c.log()

    # -- helpers --

    def refused(self, receiver):
        return self.c.metric("flamecol_receiver_refused_requests_total",
                             'receiver="%s"' % receiver) or 0

    def ingest(self, query, body, headers=None, base=None):
        return http("POST", (base or self.c.base) + "/ingest?" + query, body,
                    headers or {"Content-Type": "application/octet-stream"})

    def post_otlp(self, body):
        return http("POST", self.otlp_url, body, {"Content-Type": "application/x-protobuf"})

    def render(self, query, fmt="json"):
        q = urllib.parse.urlencode({"query": query, "from": str(T0 - 3600), "until": str(T0 + 3600),
                                    "format": fmt, "maxNodes": "1048576"})
        status, _, body = http("GET", self.c.base + "/pyroscope/render?" + q)
        self.assertEqual(status, 200, body)
        return body

    def folded(self, query):
        """{stack: value} of the stored answer."""
        out = {}
        for line in self.render(query, "folded").decode().splitlines():
            if line.strip():
                stack, v = line.rsplit(" ", 1)
                out[stack] = out.get(stack, 0) + int(v)
        return out

    def total(self, query):
        return json.loads(self.render(query))["flamebearer"]["numTicks"]

    def connect(self, method, req):
        status, _, body = http("POST", self.c.base + "/querier.v1.QuerierService/" + method,
                               json.dumps(req).encode(), {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def range_ms(self):
        return {"start": str((T0 - 3600) * 1000), "end": str((T0 + 3600) * 1000)}

    # -- max_sample_labels --

    def test_max_sample_labels_pprof(self):
        for path in ("/ingest", "/pyroscope/ingest"):
            before = self.refused("pprof")
            status, _, body = http("POST", self.c.base + path + "?name=cap-at.cpu", labels_pprof(100),
                                   {"Content-Type": "application/octet-stream"})
            self.assertEqual(status, 200, body)
            status, _, body = http("POST", self.c.base + path + "?name=cap-over.cpu", labels_pprof(101),
                                   {"Content-Type": "application/octet-stream"})
            self.assertEqual(status, 400, body)
            self.assertIn("profile 0 sample 0 has 101 labels, more than max_sample_labels (100)",
                          json.loads(body)["message"])
            self.assertEqual(self.refused("pprof"), before + 1)
        # In a multipart push as the SDKs send it, and in push.v1.
        ctype, body = multipart([("profile", "profile.pprof", None, labels_pprof(101))])
        status, _, text = self.ingest("name=cap-over.cpu", body, {"Content-Type": ctype})
        self.assertEqual(status, 400, text)
        self.assertIn("max_sample_labels (100)", json.loads(text)["message"])
        for n, want in ((100, 200), (101, 400)):
            push = json.dumps({"series": [{"labels": [{"name": "service_name", "value": "cap-push"}],
                                           "samples": [{"rawProfile": base64.b64encode(
                                               labels_pprof(n)).decode()}]}]}).encode()
            status, _, text = http("POST", self.c.base + "/push.v1.PusherService/Push", push,
                                   {"Content-Type": "application/json"})
            self.assertEqual(status, want, text)
            if want == 400:
                self.assertIn("101 labels, more than max_sample_labels (100)", json.loads(text)["message"])
        # The refused ones stored nothing.
        status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=service_name")
        self.assertNotIn("cap-over", json.loads(body))

    def test_max_sample_labels_otlp(self):
        def request(n, service):
            attrs = [("a%d" % i, "v%d" % i) for i in range(n)]
            return otlp(service, [(("samples", "count"), [(["main", "work"], 3, attrs)])])

        before = self.refused("otlp")
        status, _, body = self.post_otlp(request(100, "otlp-cap-at"))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.export(request(100, "otlp-cap-at-grpc"), timeout=10), b"")
        status, _, body = self.post_otlp(request(101, "otlp-cap-over"))
        self.assertEqual(status, 400, body)
        self.assertIn(b"sample 0 has 101 labels, more than max_sample_labels (100)", body)
        with self.assertRaises(grpc.RpcError) as e:
            self.export(request(101, "otlp-cap-over"), timeout=10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sample 0 has 101 labels, more than max_sample_labels (100)",
                      e.exception.details())
        self.assertEqual(self.refused("otlp"), before + 2)
        # What was accepted is stored with all its 100 attributes as series labels.
        for service in ("otlp-cap-at", "otlp-cap-at-grpc"):
            sel = '{service_name="%s"}' % service
            names = self.connect("LabelNames", dict(matchers=[sel], **self.range_ms()))["names"]
            self.assertTrue(set("a%d" % i for i in range(100)) <= set(names), service)
            self.assertEqual(self.folded(OTLP_COUNT + sel[:-1] + ',a99="v99"}'), {"main;work": 3})

    # -- the store keeps every sample label --

    def test_store_keeps_every_sample_label(self):
        for n in (40, 100):
            service = "labels-%d" % n
            status, _, body = self.ingest("name=%s&spyName=gospy" % service, labels_pprof(n))
            self.assertEqual(status, 200, body)
            sel = '{service_name="%s"}' % service
            want = {"k%d" % i: "v%d" % i for i in range(n)}
            names = self.connect("LabelNames", dict(matchers=[sel], **self.range_ms()))["names"]
            self.assertTrue(set(want) <= set(names), "%d: missing %s" % (n, sorted(set(want) - set(names))))
            series = self.connect("Series", dict(matchers=[sel], **self.range_ms()))["labelsSet"]
            self.assertEqual(len(series), 1, series)
            got = {p["name"]: p["value"] for p in series[0]["labels"]}
            for k, v in want.items():
                self.assertEqual(got.get(k), v, "%d labels: %s" % (n, k))
            # Each label selects the sample: the last ones too.
            for k in ("k0", "k31", "k32", "k%d" % (n - 1)):
                q = PPROF_COUNT + '{service_name="%s",%s="%s"}' % (service, k, want[k])
                self.assertEqual(self.folded(q), {"main;work": 3}, q)
            status, _, body = http("GET", self.c.base + "/pyroscope/label-values?label=k%d" % (n - 1))
            self.assertIn("v%d" % (n - 1), json.loads(body))

    def test_store_keeps_labels_without_a_cap(self):
        # max_sample_labels: 0 on pprof/open: 150 labels are accepted, and all are kept.
        status, _, body = self.ingest("name=labels-150", labels_pprof(150, "u"), base=self.open_base)
        self.assertEqual(status, 200, body)
        for k in ("u0", "u99", "u100", "u149"):
            q = PPROF_COUNT + '{service_name="labels-150",%s="v%s"}' % (k, k[1:])
            self.assertEqual(self.folded(q), {"main;work": 3}, q)
        status, _, body = http("GET", self.c.base + "/pyroscope/label-names")
        names = json.loads(body)
        self.assertTrue(set("u%d" % i for i in range(150)) <= set(names))
        # The Connect calls answer every label of the series too (they cut at 128 once).
        sel = '{service_name="labels-150"}'
        want = {"u%d" % i: "v%d" % i for i in range(150)}
        names = self.connect("LabelNames", dict(matchers=[sel], **self.range_ms()))["names"]
        self.assertTrue(set(want) <= set(names), sorted(set(want) - set(names)))
        series = self.connect("Series", dict(matchers=[sel], **self.range_ms()))["labelsSet"]
        got = {p["name"]: p["value"] for s in series for p in s["labels"]}
        self.assertEqual({k: got.get(k) for k in want}, want)

    # -- prev_profile --

    def test_prev_profile_is_subtracted_per_stack_and_labels(self):
        types = [("alloc_space", "bytes"), ("inuse_space", "bytes")]
        wa = [("worker", "a"), ("pool", "x")]
        wb = [("worker", "b"), ("pool", "x")]
        profile = pprof(types, [
            (["main", "alloc", "big"], [5000, 700], []),
            (["main", "alloc", "small"], [300, 20], []),
            (["main", "work"], [1000, 100], wa),
            (["main", "work"], [400, 50], wb),
            (["main", "fresh"], [77, 7], []),
            (["main", "dup"], [10, 1], []),
            (["main", "dup2"], [50, 5], []),
            (["main", "dup"], [20, 2], []),
        ], period_type=("space", "bytes"))
        # The same stacks in another order, other ids, another string table, labels reversed;
        # one stack only here (main;gone), one only in the profile (main;fresh).
        prev = pprof(types, [
            (["main", "work"], [150, 999], list(reversed(wb))),
            (["main", "alloc", "small"], [100, 5], []),
            (["main", "gone"], [60, 6], []),
            (["main", "work"], [900, 1], list(reversed(wa))),
            (["main", "alloc", "big"], [1000, 123], []),
            (["main", "dup2"], [4, 1], []),
            (["main", "dup"], [5, 9], []),
            (["main", "dup2"], [6, 1], []),
        ], id_base=500, reverse_strings=True, period_type=("space", "bytes"))
        # A (stack, labels) listed twice is one: main;dup and main;dup2 appear twice each.
        # By hand: alloc_space (cumulative) = profile - prev per (stack, labels), as pprof
        # -diff_base computes it (the sum of one minus the sum of the other);
        # inuse_space (not cumulative) = the profile's own values.
        want_alloc = {"main;alloc;big": 4000, "main;alloc;small": 200, "main;work": 100 + 250,
                      "main;fresh": 77, "main;dup": 10 + 20 - 5, "main;dup2": 50 - 4 - 6}
        want_inuse = {"main;alloc;big": 700, "main;alloc;small": 20, "main;work": 150,
                      "main;fresh": 7, "main;dup": 3, "main;dup2": 5}
        config = json.dumps({"alloc_space": {"units": "bytes", "aggregation": "sum",
                                             "display-name": "alloc_space", "sampled": False,
                                             "cumulative": True},
                             "inuse_space": {"units": "bytes", "aggregation": "average",
                                             "display-name": "inuse_space", "sampled": False}}).encode()
        for service, parts in (
                ("delta-config", [("profile", "profile.pprof", None, profile),
                                  ("prev_profile", "profile.pprof", None, prev),
                                  ("sample_type_config", "sample_type_config.json", None, config)]),
                # Without sample_type_config: Pyroscope's defaults (alloc_* cumulative).
                ("delta-default", [("prev_profile", "profile.pprof", None, prev),
                                   ("profile", "profile.pprof", None, profile)])):
            ctype, body = multipart(parts)
            status, _, text = self.ingest("name=%s&spyName=gospy" % service, body, {"Content-Type": ctype})
            self.assertEqual(status, 200, text)
            sel = '{service_name="%s"}' % service
            self.assertEqual(self.folded(ALLOC + sel), want_alloc, service)
            self.assertEqual(self.total(ALLOC + sel), 4627 + 25 + 40, service)
            self.assertEqual(self.folded(INUSE + sel), want_inuse, service)
            self.assertEqual(self.total(INUSE + sel), 877 + 3 + 5, service)
            a = '{service_name="%s",worker="a",pool="x"}' % service
            b = '{service_name="%s",worker="b"}' % service
            self.assertEqual(self.folded(ALLOC + a), {"main;work": 100}, service)
            self.assertEqual(self.folded(ALLOC + b), {"main;work": 250}, service)

    # -- an OTLP fixture made here, with exact totals --

    def test_otlp_fixture_exact_totals(self):
        t1, t2, eu = ("thread", "t1"), ("thread", "t2"), ("region", "eu")
        cpu = (("cpu", "nanoseconds"), [
            (["main", "a", "b"], 30, []),
            (["main", "a", "c"], 12, [t1]),
            (["main", "d"], 5, [t2, eu]),
            (["main", "a", "b"], 8, [t1]),
            (["main", "a"], 4, []),
            (["main", "d"], 1, [eu, t2]),  # the same attributes, in another order
        ])
        count = (("samples", "count"), [(["main", "a", "b"], 3, []), (["main", "d"], 2, [t2])])
        want_cpu = {"main;a;b": 38, "main;a;c": 12, "main;d": 6, "main;a": 4}
        want_count = {"main;a;b": 3, "main;d": 2}
        status, _, body = self.post_otlp(otlp("fixture-http", [cpu, count]))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.export(otlp("fixture-grpc", [cpu, count]), timeout=10), b"")
        for service in ("fixture-http", "fixture-grpc"):
            sel = 'service_name="%s"' % service
            self.assertEqual(self.folded(OTLP_CPU + "{%s}" % sel), want_cpu, service)
            self.assertEqual(self.total(OTLP_CPU + "{%s}" % sel), 60, service)
            self.assertEqual(self.folded(OTLP_COUNT + "{%s}" % sel), want_count)
            self.assertEqual(self.folded(OTLP_CPU + '{%s,thread="t1"}' % sel), {"main;a;b": 8, "main;a;c": 12})
            self.assertEqual(self.folded(OTLP_CPU + '{%s,thread="t2",region="eu"}' % sel), {"main;d": 6})
            self.assertEqual(self.folded(OTLP_CPU + '{%s,thread=""}' % sel), {"main;a;b": 30, "main;a": 4})
            fb = json.loads(self.render(OTLP_CPU + "{%s}" % sel))["flamebearer"]
            # The flame graph by hand: root total 60; main 60; a 54, d 6; b 38, c 12 (a self 4).
            flat = {}
            for level in fb["levels"]:
                for i in range(0, len(level), 4):
                    name = fb["names"][level[i + 3]]
                    flat[name] = flat.get(name, 0) + level[i + 2]
            self.assertEqual(flat, {"total": 0, "main": 0, "a": 4, "b": 38, "c": 12, "d": 6})
        # The eBPF profiler's shape: samples:count every 50 ms of cpu time, which Pyroscope
        # stores as cpu nanoseconds (count x period).
        ebpf = (("samples", "count"), [(["main", "a", "b"], 2, []), (["main", "d"], 1, [t2]),
                                       (["main", "a", "b"], 5, [t1])], ("cpu", "nanoseconds", 50000000))
        status, _, body = self.post_otlp(otlp("ebpf-http", [ebpf]))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.export(otlp("ebpf-grpc", [ebpf]), timeout=10), b"")
        for service in ("ebpf-http", "ebpf-grpc"):
            sel = '{service_name="%s"}' % service
            self.assertEqual(self.folded(CPU + sel), {"main;a;b": 350000000, "main;d": 50000000})
            self.assertEqual(self.total(CPU + sel), 400000000)


if __name__ == "__main__":
    unittest.main()
