// The rest of issue 17 part 2 in the real browser: the tooltip's object
// count of a bytes profile and the source view of Function details
// (ui.source_roots). Called from browser.js after the views, with its
// collector and helpers; also runs alone (`node tests/ui/more.js`) on a
// collector of its own. Expected numbers: Go's `pprof -top` reference files
// of the corpus, or worked out by hand in the comments.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startCollector } = require('./collector.js');
const { findings } = require('./findings.js');

const SPACE = 'memory:alloc_space:bytes:space:bytes';
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';

// Rows of one sample index of a corpus `pprof -top` file whose values are
// plain counts: Map name -> {flat, cum}.
function topCounts(corpus, name, index) {
  const text = fs.readFileSync(path.join(corpus, name + '.top.txt'), 'utf8');
  const section = text.split(/^### sample_index=/m).find((s) => s.startsWith(index + '\n'));
  const rows = new Map();
  for (const line of section.split('\n')) {
    const m = /^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+?)(?: \(inline\))?$/.exec(line);
    if (m) rows.set(m[3], { flat: +m[1], cum: +m[2] });
  }
  return rows;
}

// A bytes profile (alloc_space) of a file that also has alloc_objects: the
// tooltip adds "Objects: cum (self flat)" as pprof -top of sample_index=0.
async function objectCounts(ctx) {
  const { newPage, base, corpus, push, range, artifacts } = ctx;
  await push(base, 'allocsvc', fs.readFileSync(path.join(corpus, 'go-1s-allocs.pb.gz')), 0, 0, 'application/octet-stream');
  const ref = topCounts(corpus, 'go-1s-allocs', 0);
  const page = await newPage();
  await page.goto(`${base}/?service=allocsvc&type=${encodeURIComponent(SPACE)}&${range}`);
  await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && window.flamecol.counts());
  const drawn = await page.evaluate(() => window.flamecol.drawn());
  // a function drawn as one block with its own objects, the widest such
  const one = [...ref].filter(([n, r]) => r.flat > 0 && drawn.filter((b) => b.name === n).length === 1)
    .sort((a, b) => b[1].cum - a[1].cum)[0];
  assert.ok(one, 'a function drawn once');
  const b = drawn.find((x) => x.name === one[0]);
  const box = await page.locator('#flame').boundingBox();
  await page.mouse.move(box.x + b.x + b.w / 2, box.y + b.y + b.h / 2);
  const lines = await page.$$eval('#tooltip div', (ds) => ds.map((d) => d.textContent));
  assert.equal(lines[lines.length - 1], `Objects: ${one[1].cum} (self ${one[1].flat})`, `objects of ${one[0]}`);
  // the root: every object of the file
  const root = drawn.find((x) => x.level === 0);
  await page.mouse.move(box.x + root.x + 5, box.y + root.y + root.h / 2);
  const total = [...ref.values()].reduce((s, r) => s + r.flat, 0);
  const rootLines = await page.$$eval('#tooltip div', (ds) => ds.map((d) => d.textContent));
  assert.equal(rootLines[rootLines.length - 1], `Objects: ${total} (self 0)`, 'objects of the root');
  await page.screenshot({ path: path.join(artifacts, 'tooltip-objects.png') });
  await page.close();
}

// A pprof written field by field (profile.proto numbers): functions
// [name, file], locations [function index, line], samples [[location
// indexes leaf first], value]; one sample type cpu/nanoseconds.
function pprof(functions, locations, samples) {
  const vi = (x) => { const o = []; while (x >= 128) { o.push((x & 127) | 128); x = Math.floor(x / 128); } o.push(x); return o; };
  const ld = (n, p) => [...vi((n << 3) | 2), ...vi(p.length), ...p];
  const vf = (n, x) => [...vi(n << 3), ...vi(x)];
  const strs = [''];
  const s = (t) => (strs.includes(t) ? strs.indexOf(t) : strs.push(t) - 1);
  let msg = ld(1, [...vf(1, s('cpu')), ...vf(2, s('nanoseconds'))]);
  for (const [locs, v] of samples) msg = msg.concat(ld(2, [...ld(1, locs.flatMap((l) => vi(l + 1))), ...ld(2, vi(v))]));
  locations.forEach(([f, line], i) => { msg = msg.concat(ld(4, [...vf(1, i + 1), ...ld(4, [...vf(1, f + 1), ...vf(2, line)])])); });
  functions.forEach(([name, file], i) => {
    msg = msg.concat(ld(5, [...vf(1, i + 1), ...vf(2, s(name)), ...vf(3, s(name)), ...vf(4, s(file))]));
  });
  msg = msg.concat(ld(11, [...vf(1, s('cpu')), ...vf(2, s('nanoseconds'))]), vf(12, 10000000));
  for (const t of strs) msg = msg.concat(ld(6, [...Buffer.from(t)]));
  return Buffer.from(msg);
}

// Function details with the source (query.ui.source_roots): a collector of
// its own maps /build/src/ to a temp directory holding work.go (12 lines).
// Profile (ns): main (main.go:3) -> work:4, self 300 ms; main -> work:6,
// self 500 ms; main -> work:6 -> leaf (work.go:10), 200 ms. By hand, work's
// lines: 4 self 300 ms total 300 ms, 6 self 500 ms total 700 ms; shown from
// line 1 (4 - 3) to 9 (6 + 3). leaf's: 10 self and total 200 ms, shown 7 to 12
// (the file's last line).
async function sourceView(ctx) {
  const { newPage, bin, artifacts, push } = ctx;
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'flamecol-ui-src-'));
  const code = (n) => `\tstep${n}() // work.go line ${n}`;
  fs.mkdirSync(path.join(tree, 'app'));
  fs.writeFileSync(path.join(tree, 'app', 'work.go'), Array.from({ length: 12 }, (_, i) => code(i + 1) + '\n').join(''));
  const c = await startCollector(bin, { sourceRoots: { '/build/src/': tree + '/' } });
  try {
    const roots = await (await fetch(c.base + '/api/v1/source-roots')).json();
    assert.deepEqual(roots, { prefixes: ['/build/src/'] });
    const now = Math.floor(Date.now() / 1000);
    const body = pprof([['main', '/build/src/app/main.go'], ['work', '/build/src/app/work.go'], ['leaf', '/build/src/app/work.go']],
      [[0, 3], [1, 4], [1, 6], [2, 10]], [[[1, 0], 3e8], [[2, 0], 5e8], [[3, 2, 0], 2e8]]);
    await push(c.base, 'srcsvc', body, now - 100, now - 90, 'application/octet-stream');
    const url = `${c.base}/?service=srcsvc&type=${encodeURIComponent(CPU)}&range=custom&from=${now - 200}&until=${now + 60}&fn=work`;
    const page = await newPage();
    await page.goto(url);
    const rowsOf = (p) => p.$$eval('#fn-panel .fn-source tr', (trs) => trs.slice(1).map((tr) => [...tr.cells].map((td) => td.textContent)));
    const row = (n, self, total) => [String(n), self, total, code(n)];
    const want = [row(1, '', ''), row(2, '', ''), row(3, '', ''), row(4, '300 ms', '300 ms'), row(5, '', ''),
      row(6, '500 ms', '700 ms'), row(7, '', ''), row(8, '', ''), row(9, '', '')];
    const check = async (p, what) => {
      await p.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'work');
      assert.equal(await p.textContent('#fn-panel .fn-source h4'), 'Source: /build/src/app/work.go', what);
      assert.deepEqual(await rowsOf(p), want, what + ': the lines with their self and total');
      assert.deepEqual(await p.$$eval('#fn-panel .fn-source tr.hot td:first-child', (tds) => tds.map((td) => td.textContent)),
        ['4', '6'], what + ': the costed lines marked');
    };
    await check(page, 'source of work');
    for (const w of [1024, 1920]) {
      await page.setViewportSize({ width: w, height: 900 });
      await page.locator('#fn-panel .fn-source').scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(artifacts, `source-${w}.png`) });
    }
    await page.reload();
    await check(page, 'source of work, reloaded');
    // The callee leaf: its own line, to the file's end.
    await page.locator('#fn-panel .fn-block button', { hasText: /^leaf$/ }).click();
    await page.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'leaf');
    assert.deepEqual(await rowsOf(page), [row(7, '', ''), row(8, '', ''), row(9, '', ''), row(10, '200 ms', '200 ms'),
      row(11, '', ''), row(12, '', '')]);
    // main's file is mapped but not there: no source block, the store's
    // message instead (and the browser's own log line for that 404, the
    // only console error allowed here)
    const unexpected = [];
    page.removeAllListeners('console');
    page.on('console', (m) => { if (m.type() === 'error' && !/status of 404/.test(m.text())) unexpected.push(m.text()); });
    await page.locator('#fn-panel .fn-block button', { hasText: /^work$/ }).click();
    await page.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'work');
    await page.locator('#fn-panel .fn-block button', { hasText: /^main$/ }).click();
    await page.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'main');
    assert.equal(await page.locator('#fn-panel .fn-source').count(), 0, 'no source for a missing file');
    assert.match(await page.textContent('#fn-panel'), /Source of \/build\/src\/app\/main\.go: .*no such file/);
    assert.deepEqual(unexpected, []);
    await page.close();
  } finally {
    c.stop();
    fs.rmSync(tree, { recursive: true, force: true });
  }
}

async function more(ctx) {
  await objectCounts(ctx);
  await sourceView(ctx);
  await findings(ctx);
}

module.exports = { more, topCounts };

if (require.main === module) {
  const BIN = process.env.FLAMECOL_BIN || 'build/flamecol';
  // Alone: a collector of its own, the same checks.
  (async () => {
    const { chromium } = require('playwright-core');
    const collector = await startCollector(BIN);
    const browser = await chromium.launch({ executablePath: process.env.FC_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
    const errors = [];
    try {
      const newPage = async (opts) => {
        const p = await browser.newPage(Object.assign({ viewport: { width: 1400, height: 900 } }, opts));
        p.on('pageerror', (e) => errors.push(String(e)));
        p.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
        return p;
      };
      const push = async (b, name, body, from, until, type) => {
        let url = `${b}/ingest?name=${encodeURIComponent(name)}`;
        if (from) url += `&from=${from}&until=${until}`;
        const r = await fetch(url, { method: 'POST', body, headers: type ? { 'Content-Type': type } : {} });
        assert.equal(r.status, 200, await r.text());
      };
      const until = Math.floor(Date.now() / 1000) + 60;
      const artifacts = process.env.FC_UI_ARTIFACTS || 'build/ui-artifacts';
      fs.mkdirSync(artifacts, { recursive: true });
      await more({ newPage, base: collector.base, corpus: process.env.FLAMECOL_CORPUS || 'tests/corpus', push,
        range: `range=custom&from=1&until=${until}`, artifacts, collector, bin: BIN });
      assert.deepEqual(errors, [], 'no script errors');
      console.log('ok: more.js passed');
    } finally {
      await browser.close();
      collector.stop();
    }
  })().catch((e) => { console.error(e); process.exit(1); });
}
