// The web UI behind authentication (issue 16) in the real browser: a
// collector of its own whose store query API (and UI) and pprof receiver
// need credentials. The UI's static files load without any; its API calls
// answer 401, so the login form shows; a wrong token is refused, the right
// one draws the graph; basic login; log out; a tenant's token never shows
// another tenant's data; a 403 shows the server's message. Called from
// browser.js; also runs alone (`node tests/ui/auth.js`).
'use strict';
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const WRITE_A = 'ui-write-a-0123456789';
const READ_A = 'ui-read-a-9876543210';
const WRITE_B = 'ui-write-b-abcdef';
const READ_B = 'ui-read-b-fedcba';
// The published bcrypt test vector: $2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW = "U*U".
const HTPASSWD = 'carol:$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW\n';
const CAROL_PASSWORD = 'U*U';
// The browser's own lines for the refusals the test provokes on purpose.
const EXPECTED = /^Failed to load resource: the server responded with a status of (401 \(Unauthorized\)|403 \(Forbidden\))$/;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startAuthCollector(bin) {
  const port = await freePort();
  const metrics = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flamecol-ui-auth-'));
  fs.writeFileSync(path.join(dir, 'users.htpasswd'), HTPASSWD);
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(config, `
extensions:
  auth:
    bearer_tokens:
      - {token: ${WRITE_A}, tenant: team-a, roles: [write]}
      - {token: ${READ_A}, tenant: team-a, roles: [read]}
      - {token: ${WRITE_B}, tenant: team-b, roles: [write]}
      - {token: ${READ_B}, tenant: team-b, roles: [read]}
    basic:
      htpasswd_file: ${dir}/users.htpasswd
      tenants: {carol: team-a}
      roles: {carol: [read]}
    max_failures_per_minute: 1000
receivers:
  pprof:
    endpoint: 127.0.0.1:${port}
    auth: {authenticator: auth}
exporters:
  store:
    path: ${dir}/data
    sync: batch
    query:
      endpoint: 127.0.0.1:${port}
      max_query_length: 0
      auth: {authenticator: auth}
service:
  extensions: [auth]
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [store]
  telemetry:
    metrics:
      endpoint: 127.0.0.1:${metrics}
`);
  let out = '';
  const child = spawn(bin, ['--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const stop = () => {
    child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) break;
    try {
      if ((await fetch(`http://127.0.0.1:${metrics}/ready`)).ok) return { base: `http://127.0.0.1:${port}`, log: () => out, stop };
    } catch (e) { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50)); // polling for readiness, not a fixed wait
  }
  stop();
  throw new Error('flamecol did not become ready: ' + out);
}

async function push(base, token, name, body, from, until) {
  const r = await fetch(`${base}/ingest?name=${encodeURIComponent(name)}&from=${from}&until=${until}`,
    { method: 'POST', body, headers: { Authorization: 'Bearer ' + token } });
  assert.equal(r.status, 200, await r.text());
}

const loginForm = (page) => page.waitForSelector('#login', { state: 'visible' });
const drawnTotal = async (page, want) => {
  await page.waitForFunction((w) => (document.getElementById('status').textContent || '').startsWith(w + ' total'), want);
};

async function auth(ctx) {
  const { browser, bin, artifacts } = ctx;
  const collector = await startAuthCollector(bin);
  const base = collector.base;
  const errors = [];
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  try {
    // Without credentials the data is refused, the static files are not.
    assert.equal((await fetch(`${base}/pyroscope/label-names`)).status, 401);
    assert.equal((await fetch(`${base}/`)).status, 200);
    assert.equal((await fetch(`${base}/ui/view_login.js`)).status, 200);

    // Tenant team-a, service authsvc: main;a 30, main;b 10 = 40 samples of
    // 10 ms: total 400 ms; self a 300 ms, b 100 ms; main 0 self, 400 ms total.
    // Tenant team-b, service secretsvc: main;x 70 = 700 ms.
    const now = Math.floor(Date.now() / 1000);
    const T0 = now - 3600;
    await push(base, WRITE_A, 'authsvc.cpu', 'main;a 30\nmain;b 10\n', T0, T0 + 10);
    await push(base, WRITE_B, 'secretsvc.cpu', 'main;x 70\n', T0, T0 + 10);
    const q = (svc) => `${base}/?service=${svc}&type=${encodeURIComponent(CPU)}&range=custom&from=${T0 - 60}&until=${now + 60}`;

    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error' && !EXPECTED.test(m.text())) errors.push(m.text()); });
    await page.goto(q('authsvc'));
    await loginForm(page);
    // both schemes of WWW-Authenticate are offered, and a tenant
    for (const id of ['#login-token', '#login-user', '#login-password', '#login-tenant']) {
      assert.ok(await page.isVisible(id), id);
    }
    await page.screenshot({ path: path.join(artifacts, 'login.png') });

    // A wrong token: refused, the form again with the reason.
    await page.fill('#login-token', 'not-a-token');
    await page.click('#login-submit');
    await page.waitForSelector('#login-error');
    assert.match(await page.textContent('#login-error'), /Wrong credentials/);

    // The right one: the graph, 400 ms.
    await page.fill('#login-token', READ_A);
    await page.click('#login-submit');
    await drawnTotal(page, '400 ms');
    assert.equal(await page.isVisible('#login'), false);
    const rows = await page.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].slice(0, 3).map((td) => td.textContent)));
    assert.deepEqual(rows, [['a', '300 ms', '300 ms'], ['b', '100 ms', '100 ms'], ['main', '0 ns', '400 ms']]);
    // kept in sessionStorage only, never in the URL
    assert.ok(!page.url().includes(READ_A), page.url());
    assert.equal(await page.evaluate(() => localStorage.length), 0);
    assert.match(await page.evaluate(() => JSON.stringify(sessionStorage)), new RegExp(READ_A));

    // team-a's token never shows team-b's data: its only service is authsvc,
    // asking for secretsvc falls back to it, and team-b's render is empty.
    await page.goto(q('secretsvc'));
    await drawnTotal(page, '400 ms');
    assert.deepEqual(await page.$$eval('#service option', (os) => os.map((o) => o.value)), ['authsvc']);
    const other = await page.evaluate(async (u) => (await (await fetch(u)).json()), `pyroscope/render?query=${encodeURIComponent(CPU + '{service_name="secretsvc"}')}&from=1&until=${now + 60}&format=json`);
    assert.ok(!(other.flamebearer && other.flamebearer.numTicks > 0), JSON.stringify(other).slice(0, 200));

    // Log out: the form again; then basic login as carol (team-a, read).
    await page.click('#logout');
    await loginForm(page);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await page.fill('#login-user', 'carol');
    await page.fill('#login-password', CAROL_PASSWORD);
    await page.click('#login-submit');
    await drawnTotal(page, '400 ms');
    assert.equal(await page.textContent('#logout'), 'Log out carol');

    // team-b's read token sees team-b's service, 700 ms.
    await page.click('#logout');
    await loginForm(page);
    await page.fill('#login-token', READ_B);
    await page.click('#login-submit');
    await drawnTotal(page, '700 ms');
    assert.deepEqual(await page.$$eval('#service option', (os) => os.map((o) => o.value)), ['secretsvc']);

    // A tenant the credential is not bound to: 403, the server's message.
    await page.click('#logout');
    await loginForm(page);
    await page.fill('#login-token', READ_A);
    await page.fill('#login-tenant', 'team-b');
    await page.click('#login-submit');
    await page.waitForSelector('#forbidden');
    assert.match(await page.textContent('#forbidden'), /^Refused: .*team/);
    await page.screenshot({ path: path.join(artifacts, 'login-forbidden.png') });
    await page.close();
    assert.deepEqual(errors, [], 'no script errors but the expected 401s and 403s');
  } catch (e) {
    console.error(collector.log().slice(-3000));
    throw e;
  } finally {
    await context.close();
    collector.stop();
  }
}

module.exports = { auth };

if (require.main === module) {
  (async () => {
    const { chromium } = require('playwright-core');
    const browser = await chromium.launch({ executablePath: process.env.FC_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
    const artifacts = process.env.FC_UI_ARTIFACTS || 'build/ui-artifacts';
    fs.mkdirSync(artifacts, { recursive: true });
    try {
      await auth({ browser, bin: process.env.FLAMECOL_BIN || 'build/flamecol', artifacts });
      console.log('ok: auth.js passed');
    } finally {
      await browser.close();
    }
  })().catch((e) => { console.error(e); process.exit(1); });
}
