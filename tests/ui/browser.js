// The web UI in a real browser: Debian's chromium driven by playwright-core.
// Starts the real binary on free ports, pushes profiles, opens the UI and
// checks by clicks and reads. Screenshots go to FC_UI_ARTIFACTS (default
// build/ui-artifacts).
//   FLAMECOL_BIN=build/flamecol FLAMECOL_CORPUS=tests/corpus node tests/ui/browser.js
// It runs in parts, each on the same pushes: gaps (tests/ui/gaps.js), explore
// (below: the corpus profile, the hand-built one, diff, spans), views
// (tests/ui/views.js), more (tests/ui/more.js), auth (tests/ui/auth.js and an
// empty store). FC_UI_PARTS=views,more runs only those (ctest has one test a
// part, ui.browser.<part>, so that a planted bug runs only the part it names).
//
// Every expected value comes from outside the UI's code (ui/flame.js is not
// loaded here): a corpus profile is checked against Go's own `pprof -top` of
// it (<name>.top.txt: flat and cum per function, the total), and small
// folded profiles pushed here are checked against answers worked out by hand
// in the comments beside them.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { startCollector } = require('./collector.js');
const { views } = require('./views.js');
const { more } = require('./more.js');
const { auth } = require('./auth.js');
const { gaps } = require('./gaps.js');

const BIN = process.env.FLAMECOL_BIN || 'build/flamecol';
const CORPUS = process.env.FLAMECOL_CORPUS || 'tests/corpus';
const ARTIFACTS = process.env.FC_UI_ARTIFACTS || 'build/ui-artifacts';
const CHROMIUM = process.env.FC_CHROMIUM || '/usr/bin/chromium';
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const ROW = 18; // the UI's row height in CSS pixels
const MS = 1e7; // one folded CPU sample: 10 ms in nanoseconds (100 Hz)
const PARTS = ['gaps', 'explore', 'views', 'more', 'auth'];
const chosen = process.env.FC_UI_PARTS ? process.env.FC_UI_PARTS.split(',') : PARTS;
for (const part of chosen) assert.ok(PARTS.includes(part), `FC_UI_PARTS: no part ${part} (parts: ${PARTS.join(', ')})`);
const runs = (part) => chosen.includes(part);

// One sample type of a reference `pprof -top` file ("### sample_index=N"
// sections): {total, rows: Map name -> {flat, cum, flatPct, cumPct}}, names
// without pprof's " (inline)" mark; values as printed (ns with or without the
// unit, or counts).
function pprofTop(name, index) {
  const text = fs.readFileSync(path.join(CORPUS, name + '.top.txt'), 'utf8');
  const section = text.split(/^### sample_index=/m).find((s) => s.startsWith(index + '\n'));
  assert.ok(section, `${name}.top.txt has sample_index=${index}`);
  const total = +/of (\d+)\w* total/.exec(section)[1];
  const rows = new Map();
  for (const line of section.split('\n')) {
    const m = /^\s*(\d+)(?:ns)?\s+([\d.]+%)\s+[\d.]+%\s+(\d+)(?:ns)?\s+([\d.]+%)\s+(.+?)(?: \(inline\))?$/.exec(line);
    if (m) rows.set(m[5], { flat: +m[1], cum: +m[3], flatPct: m[2], cumPct: m[4] });
  }
  return { total, rows };
}

// Nanoseconds as the UI writes them: three significant figures of s, ms, µs,
// or ns. Written out here rather than taken from ui/flame.js.
function ns(v) {
  const three = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  if (v >= 1e9) return three(v / 1e9) + ' s';
  if (v >= 1e6) return three(v / 1e6) + ' ms';
  if (v >= 1e3) return three(v / 1e3) + ' µs';
  return v + ' ns';
}
assert.deepEqual([ns(2e9), ns(1.4e9), ns(2e8), ns(6.5e7), ns(1e7), ns(0)],
  ['2.00 s', '1.40 s', '200 ms', '65.0 ms', '10.0 ms', '0 ns']);

const near = (a, b, what, eps = 0.01) => assert.ok(Math.abs(a - b) <= eps, `${what}: ${a} is not ${b}`);

// Drawn blocks against [level, name, x, w] with x and w as fractions of width.
function sameRects(drawn, want, width, what) {
  const got = drawn.slice().sort((a, b) => a.level - b.level || a.x - b.x);
  assert.deepEqual(got.map((b) => [b.level, b.name]), want.map((r) => [r[0], r[1]]), what);
  got.forEach((b, i) => {
    near(b.x, want[i][2] * width, `${what}: x of ${b.name} at level ${b.level}`);
    near(b.w, want[i][3] * width, `${what}: width of ${b.name} at level ${b.level}`);
  });
}

// The table's rows as [name, first value, second value, ...] cells.
const tableRows = (page) => page.$$eval('#top tbody tr', (trs) => trs.map((tr) =>
  [...tr.cells].filter((td) => !td.querySelector('button')).map((td) => td.textContent)));

const openView = async (page, url) => {
  await page.goto(url);
  await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
};

// The colour painted at a point of a canvas, as [r, g, b].
const pixel = (page, sel, x, y) => page.$eval(sel, (c, [px, py]) => {
  const r = window.devicePixelRatio || 1;
  return [...c.getContext('2d').getImageData(Math.round(px * r), Math.round(py * r), 1, 1).data].slice(0, 3);
}, [x, y]);

// Nothing cut off in a pane at the page's width: it does not scroll sideways,
// nor does the page, and each of its items (number cells, headers, row
// buttons by default) ends inside it; only names give way (ellipsis).
const clipped = (p, pane = '#table-pane', items = '#top tr td.num, #top tr th, #top tr td button') => p.$eval(pane, (el, sel) => {
  const r = el.getBoundingClientRect();
  const right = r.left + el.clientLeft + el.clientWidth + 0.5;
  const bad = [];
  if (el.scrollWidth > el.clientWidth) bad.push('pane scrolls sideways: ' + el.scrollWidth + ' > ' + el.clientWidth);
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth) bad.push('page scrolls sideways: ' + doc.scrollWidth + ' > ' + doc.clientWidth);
  for (const x of [...el.querySelectorAll(sel)].slice(0, 400)) {
    if (x.getBoundingClientRect().right > right) bad.push(x.textContent + ' ends at ' + x.getBoundingClientRect().right + ' > ' + right);
  }
  return bad;
}, items);

// Screenshots of a page at 1024 and 1920 px (name-1024.png, name-1920.png); its size is restored.
async function shots(page, name) {
  const vp = page.viewportSize();
  for (const w of [1024, 1920]) {
    await page.setViewportSize({ width: w, height: vp.height });
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => done())));
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${w}.png`) });
  }
  await page.setViewportSize(vp);
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => done())));
}

async function push(base, name, body, from, until, type) {
  let url = `${base}/ingest?name=${encodeURIComponent(name)}`;
  if (from) url += `&from=${from}&until=${until}`;
  const r = await fetch(url, { method: 'POST', body, headers: type ? { 'Content-Type': type } : {} });
  assert.equal(r.status, 200, await r.text());
}

// The span profile of test_store_api's test_span_profiles, as a pprof
// message: main;a 3 (span ...ab, trace 4bf9...), main;b 5 (span ...cd),
// main 7 (no span).
function spanProfile() {
  const vi = (x) => { const o = []; while (x >= 128) { o.push((x & 127) | 128); x = Math.floor(x / 128); } o.push(x); return o; };
  const fld = (n, p) => [...vi((n << 3) | 2), ...vi(p.length), ...p];
  const vf = (n, x) => [...vi(n << 3), ...vi(x)];
  const strs = ['', 'samples', 'count', 'main', 'a', 'b', 'span_id', '00000000000000ab', '00000000000000cd', 'trace_id',
    '4bf92f3577b34da6a3ce929d0e0e4736'];
  let msg = fld(1, [...vf(1, 1), ...vf(2, 2)]);
  for (const [fid, name] of [[1, 3], [2, 4], [3, 5]]) {
    msg = msg.concat(fld(5, [...vf(1, fid), ...vf(2, name)]), fld(4, [...vf(1, fid), ...fld(4, vf(1, fid))]));
  }
  msg = msg.concat(fld(2, [...fld(1, [2, 1]), ...fld(2, [3]), ...fld(3, [...vf(1, 6), ...vf(2, 7)]), ...fld(3, [...vf(1, 9), ...vf(2, 10)])]));
  msg = msg.concat(fld(2, [...fld(1, [3, 1]), ...fld(2, [5]), ...fld(3, [...vf(1, 6), ...vf(2, 8)])]));
  msg = msg.concat(fld(2, [...fld(1, [1]), ...fld(2, [7])]));
  for (const x of strs) msg = msg.concat(fld(6, [...Buffer.from(x)]));
  return Buffer.from(msg);
}

async function main() {
  const { chromium } = require('playwright-core');
  const collector = await startCollector(BIN);
  const base = collector.base;
  let browser;
  try {
    const now = Math.floor(Date.now() / 1000);
    const until = now + 60;
    const range = `range=custom&from=1&until=${until}`;
    await push(base, 'shop', fs.readFileSync(path.join(CORPUS, 'go-1s-cpu.pb.gz')), 0, 0, 'application/octet-stream');
    const ref = pprofTop('go-1s-cpu', 1); // sample type cpu, nanoseconds
    const byFlat = [...ref.rows].sort((a, b) => b[1].flat - a[1].flat);
    const [top, topRef] = byFlat[0];
    assert.ok(topRef.flat > byFlat[1][1].flat, 'the reference has one top flat function');

    // The hand-built service, three pushes inside [T0, T0 + 1000]:
    //   T0+100 worker=a: main;f;f;g 30, main;f;h 10
    //   T0+400 worker=b: main;k 40, main;g 20
    //   T0+800 worker=a: main;k 100
    // Together (200 samples = 2.00 s, siblings in name order as Pyroscope):
    //   total 200 - main 200 - f 40 - f 30 - g 30
    //                             \- h 10
    //                        - g 20
    //                        - k 140
    // Per function: self k 140, g 30+20 = 50, h 10, f 0, main 0; total
    // k 140, g 50, h 10, f 40 (its recursion counted once, not 70), main 200.
    const T0 = Math.floor((now - 3 * 3600) / 1000) * 1000;
    await push(base, 'handsvc.cpu{worker=a}', 'main;f;f;g 30\nmain;f;h 10\n', T0 + 100, T0 + 110);
    await push(base, 'handsvc.cpu{worker=b}', 'main;k 40\nmain;g 20\n', T0 + 400, T0 + 410);
    await push(base, 'handsvc.cpu{worker=a}', 'main;k 100\n', T0 + 800, T0 + 810);
    const handUrl = `${base}/?service=handsvc&type=${encodeURIComponent(CPU)}&range=custom&from=${T0}&until=${T0 + 1000}`;

    // The diff: baseline main;a 10, main;b 10 (b's share 1/2); comparison
    // main;a 10, main;b 30 (b's share 3/4, a's 1/4).
    const t1 = now - 7200;
    const t2 = t1 + 6600;
    await push(base, 'diffsvc.cpu', 'main;a 10\nmain;b 10\n', t1, t1 + 10);
    await push(base, 'diffsvc.cpu', 'main;a 10\nmain;b 30\n', t2, t2 + 10);

    const pushSpans = () => push(base, 'spansvc', spanProfile(), now - 100, now - 90, 'application/octet-stream');

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const errors = [];
    const newPage = async (opts) => {
      const p = await browser.newPage(Object.assign({ viewport: { width: 1400, height: 900 } }, opts));
      p.on('pageerror', (e) => errors.push(String(e)));
      // a failed load (a missing favicon.ico, say) is a console error too
      p.on('console', (m) => { if (m.type() === 'error') errors.push(m.text() + ' ' + JSON.stringify(m.location())); });
      return p;
    };

    // The audit's gaps (tests/ui/gaps.js), first: they need only the pushes above.
    if (runs('gaps')) await gaps({ newPage, base, handUrl, T0, t1, t2, range, shots, clipped, artifacts: ARTIFACTS });

    if (runs('explore')) {
      /* ---------- A corpus profile against `pprof -top` ---------- */
      const page = await newPage();
      await openView(page, `${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}`);
      await shots(page, 'explore');
      assert.ok((await page.textContent('#status')).startsWith(ns(ref.total) + ' total'), await page.textContent('#status'));

      // The table: every function, self = pprof's flat, total = pprof's cum
      // (recursive ones such as sort.pdqsort counted once); the top self first.
      const rows = await tableRows(page);
      assert.deepEqual(rows[0], [top, ns(topRef.flat), ns(topRef.cum)]);
      assert.equal(rows.length, ref.rows.size, 'one row per function of pprof -top');
      for (const [name, self, total] of rows) {
        const r = ref.rows.get(name);
        assert.ok(r, `${name} is in pprof -top`);
        assert.deepEqual([self, total], [ns(r.flat), ns(r.cum)], `self and total of ${name}`);
      }

      // The graph: widths are shares of the total; per function, the selfs of
      // its blocks add up to pprof's flat and its outermost blocks to its cum.
      const width = await page.$eval('#flame', (c) => c.clientWidth);
      let drawn = await page.evaluate(() => window.flamecol.drawn());
      assert.ok(drawn.some((b) => b.name === top), 'top function drawn');
      for (const b of drawn) near(b.w, width * b.total / ref.total, `width of ${b.name}`, 0.05);
      const parentOf = (b) => drawn.find((p) => p.level === b.level - 1 && p.x <= b.x + 0.01 && b.x + b.w <= p.x + p.w + 0.01);
      const flat = new Map();
      const cum = new Map();
      for (const b of drawn) {
        if (b.level === 0) continue;
        flat.set(b.name, (flat.get(b.name) || 0) + b.self);
        let outer = true;
        for (let p = parentOf(b); p && p.level > 0; p = parentOf(p)) if (p.name === b.name) outer = false;
        if (outer) cum.set(b.name, (cum.get(b.name) || 0) + b.total);
      }
      assert.equal(flat.size, ref.rows.size, 'every function drawn');
      for (const [name, r] of ref.rows) {
        assert.deepEqual([flat.get(name), cum.get(name)], [r.flat, r.cum], `flat and cum of ${name} in the graph`);
      }

      // Search: the matches are counted and their share is pprof's cum%.
      assert.equal([...ref.rows.keys()].filter((n) => n.toLowerCase().includes(top.toLowerCase())).length, 1);
      await page.fill('#search', top);
      await page.waitForFunction(() => /matches/.test(document.getElementById('search-stats').textContent));
      const topBlocks = drawn.filter((b) => b.name.toLowerCase().includes(top.toLowerCase())).length;
      assert.equal(await page.textContent('#search-stats'), `${topBlocks} matches, ${topRef.cumPct} of total`);
      assert.match(await page.textContent('#pills'), /Search: /);
      assert.deepEqual(await tableRows(page), [[top, ns(topRef.flat), ns(topRef.cum)]]);
      await shots(page, 'search-corpus');
      // A recursive function: its nested blocks are counted as matches but
      // their time only once.
      const pdq = ref.rows.get('sort.pdqsort');
      const pdqBlocks = drawn.filter((b) => b.name === 'sort.pdqsort').length;
      await page.fill('#search', '/^sort\\.pdqsort$/');
      await page.waitForFunction((n) => document.getElementById('search-stats').textContent.startsWith(n + ' matches'), pdqBlocks);
      assert.equal(await page.textContent('#search-stats'), `${pdqBlocks} matches, ${pdq.cumPct} of total`);
      assert.deepEqual(await tableRows(page), [['sort.pdqsort', ns(pdq.flat), ns(pdq.cum)]]);
      await page.click('#pills .pill button');

      // Tooltip: name, total and self with units and shares, as pprof's cum,
      // cum%, flat and flat% for a function drawn as one block.
      const single = [...ref.rows].filter(([n, r]) => r.flat > 0 && drawn.filter((b) => b.name === n).length === 1)
        .sort((a, b) => b[1].cum - a[1].cum)[0];
      // The file also has a sample count (sample_index=0, the service's
      // process_cpu:samples type): the tooltip adds the block's samples, total
      // and self, as pprof's cum and flat of that index.
      const hot = drawn.find((b) => b.name === single[0]);
      const refCount = pprofTop('go-1s-cpu', 0).rows.get(single[0]);
      await page.waitForFunction(() => window.flamecol.counts());
      const pbox = await page.locator('#flame').boundingBox();
      await page.mouse.move(pbox.x + hot.x + hot.w / 2, pbox.y + hot.y + hot.h / 2);
      assert.equal(await page.textContent('#tooltip'), `${single[0]}Total: ${ns(single[1].cum)} (${single[1].cumPct})` +
        `Self: ${ns(single[1].flat)} (${single[1].flatPct})Samples: ${refCount.cum} (self ${refCount.flat})`);

      // Sandwich from the table: runtime.mallocgc becomes the root, with
      // pprof's cum as its total and flat as its self; its callers above it.
      const malloc = ref.rows.get('runtime.mallocgc');
      const row = page.locator('#top tbody tr', { hasText: 'runtime.mallocgc' }).first();
      await row.locator('button', { hasText: 'sandwich' }).click();
      drawn = await page.evaluate(() => window.flamecol.drawn());
      const mroot = drawn.filter((b) => b.level === 1);
      assert.deepEqual(mroot.map((b) => [b.name, b.total, b.self]), [['runtime.mallocgc', malloc.cum, malloc.flat]]);
      near(mroot[0].w, width, 'the sandwiched function spans the width');
      // No "total" rows between the halves: the function meets itself there.
      assert.equal(drawn.filter((b) => b.level === 0).length, 0, 'no total row under the function');
      let callers = await page.evaluate(() => window.flamecol.callers());
      assert.deepEqual(callers.filter((b) => b.level === 1).map((b) => b.name), ['runtime.mallocgc']);
      assert.equal(callers.filter((b) => b.level === 0).length, 0, 'no total row above the function');
      // The callers' bottom row (the function) sits right on the callees' top row (the function).
      const cbox = await page.locator('#callers').boundingBox();
      const fbox = await page.locator('#flame').boundingBox();
      near(cbox.y + cbox.height, fbox.y, 'the halves meet', 3);
      assert.equal(callers.find((b) => b.level === 1).y, await page.$eval('#callers', (c) => c.clientHeight) - ROW,
        'the function is the callers\' last row');
      assert.equal(mroot[0].y, 0, 'the function is the callees\' first row');
      near(callers.filter((b) => b.level === 2).reduce((s, b) => s + b.w, 0), width, 'its callers share its width');
      assert.ok(page.url().includes('sandwich=runtime.mallocgc'), page.url());
      await shots(page, 'sandwich-corpus');

      // Downloads: the selection as gzipped pprof and as folded text, whose
      // leaf values add up to pprof's flat per function and to its total.
      const pprofBody = Buffer.from(await (await fetch(await page.$eval('#dl-pprof', (a) => a.href))).arrayBuffer());
      assert.deepEqual([...pprofBody.subarray(0, 2)], [0x1f, 0x8b]);
      assert.ok(zlib.gunzipSync(pprofBody).length > 0);
      const folded = await (await fetch(await page.$eval('#dl-folded', (a) => a.href))).text();
      const leaves = new Map();
      let foldedTotal = 0;
      for (const line of folded.trim().split('\n')) {
        const m = /^(.*) (\d+)$/.exec(line);
        const leaf = m[1].split(';').pop();
        leaves.set(leaf, (leaves.get(leaf) || 0) + +m[2]);
        foldedTotal += +m[2];
      }
      assert.equal(foldedTotal, ref.total);
      for (const [name, r] of ref.rows) if (r.flat) assert.equal(leaves.get(name), r.flat, `folded self of ${name}`);

      // Group by: one small timeline per worker, with its total.
      await page.click('#pills .pill button'); // drop the sandwich
      await page.selectOption('#groupby', 'worker');
      await page.waitForFunction(() => document.querySelectorAll('#groups .group').length > 1);
      const shopGroups = await page.$$eval('#groups .group', (g) => g.map((x) => x.textContent));
      assert.ok(shopGroups.every((g) => /^worker=.+: .+/.test(g)), shopGroups.join(' | '));
      await shots(page, 'groups');

      // Views: table only hides the graph, graph only hides the table.
      await page.click('button[data-view="table"]');
      assert.equal(await page.isVisible('#flame'), false);
      assert.equal(await page.isVisible('#top'), true);
      await page.click('button[data-view="graph"]');
      assert.equal(await page.isVisible('#top'), false);
      assert.equal(await page.isVisible('#flame'), true);
      await page.click('button[data-view="both"]');
      assert.equal(await page.isVisible('#top'), true);

      /* ---------- A hand-built profile with hand-computed answers ---------- */
      const hand = await newPage();
      await openView(hand, handUrl);
      assert.ok((await hand.textContent('#status')).startsWith('2.00 s total'), await hand.textContent('#status'));
      assert.deepEqual(await tableRows(hand), [
        ['k', '1.40 s', '1.40 s'], ['g', '500 ms', '500 ms'], ['h', '100 ms', '100 ms'],
        ['f', '0 ns', '400 ms'], ['main', '0 ns', '2.00 s'],
      ]);
      // Sorted by total instead: main 200, k 140, g 50, f 40, h 10.
      await hand.click('#top thead th[data-sort="total"]');
      assert.deepEqual((await tableRows(hand)).map((r) => r[0]), ['main', 'k', 'g', 'f', 'h']);
      await hand.click('#top thead th[data-sort="self"]');

      // Flame (root at the bottom; 5 levels): x and width as shares of 200.
      const hw = await hand.$eval('#flame', (c) => c.clientWidth);
      const whole = [
        [0, 'total', 0, 1], [1, 'main', 0, 1],
        [2, 'f', 0, 0.2], [2, 'g', 0.2, 0.1], [2, 'k', 0.3, 0.7],
        [3, 'f', 0, 0.15], [3, 'h', 0.15, 0.05], [4, 'g', 0, 0.15],
      ];
      drawn = await hand.evaluate(() => window.flamecol.drawn());
      sameRects(drawn, whole, hw, 'hand flame graph');
      for (const b of drawn) assert.equal(b.y, (4 - b.level) * ROW, `flame row of ${b.name}`);

      // Search: 'F' (any case) matches both f blocks, 2 matches; their time
      // once, 40 of 200 = 20.00%. /^(f|g)$/: both f and both g, 4 matches;
      // outermost f 40 + g 20 (the other g is under f) = 60 of 200 = 30.00%.
      for (const [text, stats, names] of [
        ['F', '2 matches, 20.00% of total', ['f']],
        ['g', '2 matches, 25.00% of total', ['g']],
        ['/^(f|g)$/', '4 matches, 30.00% of total', ['g', 'f']],
      ]) {
        await hand.fill('#search', text);
        await hand.waitForFunction((s) => document.getElementById('search-stats').textContent === s, stats, { timeout: 5000 })
          .catch(() => {});
        assert.equal(await hand.textContent('#search-stats'), stats, `search ${text}`);
        assert.deepEqual((await tableRows(hand)).map((r) => r[0]), names, `table rows matching ${text}`);
      }
      await hand.click('#pills .pill button');
      assert.equal(await hand.textContent('#search-stats'), '');

      // Tooltip on k: 140 of 200, all of it self.
      const hbox = await hand.locator('#flame').boundingBox();
      const hover = async (p, box, b) => {
        await p.mouse.move(box.x + b.x + b.w / 2, box.y + b.y + b.h / 2);
        return p.textContent('#tooltip');
      };
      assert.equal(await hover(hand, hbox, drawn.find((b) => b.name === 'k')), 'kTotal: 1.40 s (70.00%)Self: 1.40 s (70.00%)');
      assert.equal(await hover(hand, hbox, drawn.find((b) => b.name === 'f' && b.level === 2)),
        'fTotal: 400 ms (20.00%)Self: 0 ns (0.00%)');

      // Focus on the outer f: it spans the width and its subtree is scaled to
      // its 40 (f 30 -> 3/4, h 10 -> 1/4); main and total full width; g and k gone.
      const f2 = drawn.find((b) => b.name === 'f' && b.level === 2);
      await hand.mouse.click(hbox.x + f2.x + f2.w / 2, hbox.y + f2.y + f2.h / 2);
      await hand.click('#menu button[data-act="focus"]');
      drawn = await hand.evaluate(() => window.flamecol.drawn());
      sameRects(drawn, [
        [0, 'total', 0, 1], [1, 'main', 0, 1], [2, 'f', 0, 1],
        [3, 'f', 0, 0.75], [3, 'h', 0.75, 0.25], [4, 'g', 0, 0.75],
      ], hw, 'focus on f');
      assert.match(await hand.textContent('#pills'), /Focus: f/);
      assert.ok(hand.url().includes('focus=2%3A0') || hand.url().includes('focus=2:0'), hand.url());
      await shots(hand, 'focus-hand');

      // Icicle: the same blocks, the root on top.
      await hand.click('button[data-orient="icicle"]');
      drawn = await hand.evaluate(() => window.flamecol.drawn());
      for (const b of drawn) assert.equal(b.y, b.level * ROW, `icicle row of ${b.name}`);
      assert.equal(drawn.find((b) => b.level === 0).y, 0);
      await shots(hand, 'icicle');
      await hand.click('button[data-orient="flame"]');

      // Sandwich on the recursive f: callees from its outermost block only,
      // f 40 -> f 30 -> g 30, h 10; its callers main 40 above it.
      await hand.click('#pills .pill button'); // drop the focus
      await hand.locator('#top tbody tr', { hasText: /^f/ }).first().locator('button', { hasText: 'sandwich' }).click();
      drawn = await hand.evaluate(() => window.flamecol.drawn());
      sameRects(drawn, [[1, 'f', 0, 1], [2, 'f', 0, 0.75], [2, 'h', 0.75, 0.25], [3, 'g', 0, 0.75]],
        hw, 'callees of f');
      assert.deepEqual(drawn.filter((b) => b.level === 1).map((b) => [b.total, b.self]), [[4e8, 0]]);
      callers = await hand.evaluate(() => window.flamecol.callers());
      assert.deepEqual(callers.map((b) => [b.level, b.name]).sort(), [[1, 'f'], [2, 'main']]);
      for (const b of callers) near(b.w, hw, `caller ${b.name} spans the width`);
      // g's callers: main 20 directly, f 30 through f;f: widths 2/5 and 3/5.
      await hand.goto(handUrl + '&sandwich=g');
      await hand.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
      callers = await hand.evaluate(() => window.flamecol.callers());
      const cw = callers.map((b) => [b.level, b.name, +(b.w / hw).toFixed(4)]).sort();
      assert.deepEqual(cw, [[1, 'g', 1], [2, 'f', 0.6], [2, 'main', 0.4], [3, 'f', 0.6], [4, 'main', 0.6]]);

      // A link reopens the same view.
      await hand.locator('#top tbody tr', { hasText: /^h/ }).first().locator('button', { hasText: 'sandwich' }).click();
      const again = await newPage();
      await again.goto(hand.url());
      await again.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
      assert.equal((await again.evaluate(() => window.flamecol.state())).sandwich, 'h');
      assert.deepEqual((await again.evaluate(() => window.flamecol.callers())).map((b) => [b.level, b.name]).sort(),
        [[1, 'h'], [2, 'f'], [3, 'main']]);
      // A focus link reopens focused (it once failed: "levels is not defined").
      await again.goto(handUrl + '&focus=2:0');
      await again.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
      sameRects(await again.evaluate(() => window.flamecol.drawn()), [
        [0, 'total', 0, 1], [1, 'main', 0, 1], [2, 'f', 0, 1],
        [3, 'f', 0, 0.75], [3, 'h', 0.75, 0.25], [4, 'g', 0, 0.75],
      ], hw, 'a focus link reopens');
      await again.close();

      // Group by worker: a = 30 + 10 + 100 = 140 samples, b = 40 + 20 = 60.
      await hand.goto(handUrl);
      await hand.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
      await hand.selectOption('#groupby', 'worker');
      await hand.waitForFunction(() => document.querySelectorAll('#groups .group').length > 1);
      assert.deepEqual(await hand.$$eval('#groups .group', (g) => g.map((x) => x.textContent)),
        ['worker=a: 1.40 s', 'worker=b: 600 ms']);
      await hand.selectOption('#groupby', '');

      // Downloads: the folded text is the four stacks, in nanoseconds.
      const handFolded = await (await fetch(await hand.$eval('#dl-folded', (a) => a.href))).text();
      assert.deepEqual(handFolded.trim().split('\n').sort(),
        ['main;f;f;g 300000000', 'main;f;h 100000000', 'main;g 200000000', 'main;k 1400000000']);

      // Drag on the timeline from 20% to 60% of [T0, T0 + 1000]: 10 s steps,
      // 101 points from T0, so T0 + 202 to T0 + 606 (a pixel is ~1 s); only
      // the push at T0 + 400 is inside: 60 samples, 600 ms.
      const tl = await hand.locator('#timeline').boundingBox();
      await hand.mouse.move(tl.x + tl.width * 0.2, tl.y + 10);
      await hand.mouse.down();
      await hand.mouse.move(tl.x + tl.width * 0.6, tl.y + 10);
      // While dragging, the picked part is highlighted.
      const brush = await hand.locator('#timeline-box .brush').boundingBox();
      assert.ok(brush, 'a highlight while dragging');
      near(brush.x, tl.x + tl.width * 0.2, 'highlight starts at the mouse-down', 1.5);
      near(brush.width, tl.width * 0.4, 'highlight follows the mouse', 1.5);
      await hand.mouse.up();
      assert.equal(await hand.isVisible('#timeline-box .brush'), false, 'the highlight goes on release');
      await hand.waitForFunction((t) => window.flamecol.state().from !== String(t), T0);
      const dragged = await hand.evaluate(() => window.flamecol.state());
      assert.equal(dragged.range, 'custom');
      near(+dragged.from, T0 + 202, 'dragged from', 2);
      near(+dragged.until, T0 + 606, 'dragged until', 2);
      await hand.waitForFunction(() => document.getElementById('status').textContent.startsWith('600 ms total'));
      assert.deepEqual(await tableRows(hand), [['k', '400 ms', '400 ms'], ['g', '200 ms', '200 ms'], ['main', '0 ns', '600 ms']]);

      // The label picker adds worker="a" to the filter: 140 samples, 1.40 s.
      await hand.goto(handUrl);
      await hand.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
      await hand.selectOption('#lname', 'worker');
      await hand.waitForFunction(() => document.querySelectorAll('#lvalue option').length > 0);
      assert.deepEqual(await hand.$$eval('#lvalue option', (o) => o.map((x) => x.value)), ['a', 'b']);
      await hand.selectOption('#lvalue', 'a');
      await hand.click('#ladd');
      await hand.waitForFunction(() => document.getElementById('status').textContent.startsWith('1.40 s total'));
      assert.equal((await hand.evaluate(() => window.flamecol.state())).filter, 'worker="a"');
      assert.deepEqual(await tableRows(hand), [
        ['k', '1.00 s', '1.00 s'], ['g', '300 ms', '300 ms'], ['h', '100 ms', '100 ms'],
        ['f', '0 ns', '400 ms'], ['main', '0 ns', '1.40 s'],
      ]);

      /* ---------- Diff, worked out by hand ---------- */
      // b: 10 of 20 (50%) -> 30 of 40 (75%): its share grew by half, +50.0%.
      // a: 10 of 20 (50%) -> 10 of 40 (25%): it halved, -50.0%.
      // Drawn as one graph of both sides: a 10 + 10 = 20, b 10 + 30 = 40 of 60.
      const diffPage = await newPage();
      await openView(diffPage, `${base}/?service=diffsvc&type=${encodeURIComponent(CPU)}&diff=1&range=custom` +
        `&from=${t2 - 5}&until=${t2 + 20}&bfrom=${t1 - 5}&buntil=${t1 + 20}`);
      const dw = await diffPage.$eval('#flame', (c) => c.clientWidth);
      drawn = await diffPage.evaluate(() => window.flamecol.drawn());
      sameRects(drawn, [[0, 'total', 0, 1], [1, 'main', 0, 1], [2, 'a', 0, 1 / 3], [2, 'b', 1 / 3, 2 / 3]], dw, 'diff graph');
      assert.deepEqual(Object.fromEntries(drawn.filter((b) => b.level === 2).map((b) => [b.name, b.kind])), { a: 'shrank', b: 'grew' });
      // The colours painted: red where the share grew, green where it shrank,
      // grey where it stayed (main and total: all of both sides).
      const paint = async (b) => pixel(diffPage, '#flame', b.x + b.w - 4, b.y + 2);
      const [ra, ga, ba] = await paint(drawn.find((b) => b.name === 'a'));
      const [rb, gb, bb] = await paint(drawn.find((b) => b.name === 'b'));
      const [rm, gm, bm] = await paint(drawn.find((b) => b.name === 'main'));
      assert.ok(ga > ra + 50 && ga > ba + 50, `a (shrank) is painted green: ${[ra, ga, ba]}`);
      assert.ok(rb > gb + 50 && rb > bb + 50, `b (grew) is painted red: ${[rb, gb, bb]}`);
      assert.ok(Math.max(rm, gm, bm) - Math.min(rm, gm, bm) < 10, `main (same) is painted grey: ${[rm, gm, bm]}`);
      assert.deepEqual(await diffPage.$$eval('#top thead th', (ths) => ths.map((th) => th.textContent)),
        ['Symbol', 'Baseline', 'Comparison', 'Change']);
      assert.deepEqual(await tableRows(diffPage), [['b', '100 ms', '300 ms', '+50.0%'], ['a', '100 ms', '100 ms', '-50.0%']]);
      const dbox = await diffPage.locator('#flame').boundingBox();
      assert.equal(await hover(diffPage, dbox, drawn.find((b) => b.name === 'b')),
        'bBaseline: 100 ms (50.00%)Comparison: 300 ms (75.00%)Change: +50.0%');
      assert.equal(await hover(diffPage, dbox, drawn.find((b) => b.name === 'a')),
        'aBaseline: 100 ms (50.00%)Comparison: 100 ms (25.00%)Change: -50.0%');
      assert.equal(await diffPage.isVisible('#legend'), true);
      await shots(diffPage, 'diff-hand');


      /* ---------- Part 2: what was broken or thin (issue 17) ---------- */
      // favicon.ico answers (an SVG icon): no 404 on every load.
      const icon = await fetch(`${base}/favicon.ico`);
      assert.equal(icon.status, 200);
      assert.equal(icon.headers.get('content-type'), 'image/svg+xml');
      assert.match(await icon.text(), /^<svg /);

      // Profile types by name, the id on hover.
      const p2 = await newPage();
      await openView(p2, handUrl);
      assert.equal(await p2.$eval('#type', (s) => s.selectedOptions[0].textContent), 'CPU');
      assert.equal(await p2.$eval('#type', (s) => s.selectedOptions[0].title), CPU);

      // The table sorts both ways, with an indicator: self largest first
      // (k 140, g 50, h 10, f 0, main 0), again smallest first (ties by name:
      // f, main, h, g, k); by name A-Z, then Z-A.
      const sortedBy = async () => p2.$$eval('#top thead th[aria-sort]', (t) => t.map((x) => [x.dataset.sort, x.getAttribute('aria-sort')]));
      const names = async () => (await tableRows(p2)).map((r) => r[0]);
      assert.deepEqual(await sortedBy(), [['self', 'descending']]);
      await p2.click('#top thead th[data-sort="self"]');
      assert.deepEqual(await names(), ['f', 'main', 'h', 'g', 'k']);
      assert.deepEqual(await sortedBy(), [['self', 'ascending']]);
      await p2.click('#top thead th[data-sort="name"]');
      assert.deepEqual(await names(), ['f', 'g', 'h', 'k', 'main']);
      assert.deepEqual(await sortedBy(), [['name', 'ascending']]);
      await p2.click('#top thead th[data-sort="name"]');
      assert.deepEqual(await names(), ['main', 'k', 'h', 'g', 'f']);
      assert.deepEqual(await sortedBy(), [['name', 'descending']]);
      await p2.reload();
      await p2.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
      assert.deepEqual(await names(), ['main', 'k', 'h', 'g', 'f'], 'the order is kept in the URL');
      await p2.click('#top thead th[data-sort="self"]');
      assert.deepEqual(await names(), ['k', 'g', 'h', 'f', 'main']);

      // A bad regex says so instead of "0 matches".
      await p2.fill('#search', '/f(/');
      await p2.waitForFunction(() => /regex/.test(document.getElementById('search-stats').textContent));
      assert.match(await p2.textContent('#search-stats'), /^invalid regex: /);
      assert.equal(await p2.$eval('#search-stats', (e) => e.className), 'error');
      await p2.fill('#search', '');

      // The click menu closes on a click elsewhere and on Escape.
      let hd = await p2.evaluate(() => window.flamecol.drawn());
      const p2box = await p2.locator('#flame').boundingBox();
      const kb = hd.find((b) => b.name === 'k');
      const openMenu = async (b) => {
        await p2.mouse.click(p2box.x + b.x + b.w / 2, p2box.y + b.y + b.h / 2);
        assert.equal(await p2.isVisible('#menu'), true, 'the menu opens');
      };
      await openMenu(kb);
      await p2.click('header strong');
      assert.equal(await p2.isVisible('#menu'), false, 'a click elsewhere closes the menu');
      await openMenu(kb);
      await p2.keyboard.press('Escape');
      assert.equal(await p2.isVisible('#menu'), false, 'Escape closes the menu');

      // Focus follows its stack through a filter change: focus k, then paste a
      // Pyroscope query for worker b (main;k 40, main;g 20). k is then the
      // second block of level 2 (g, k) and spans the width; its total 400 ms.
      await openMenu(kb);
      await p2.click('#menu button[data-act="focus"]');
      assert.ok(p2.url().includes('focus=2%3A2'), p2.url());
      await p2.fill('#filter', '{service_name="handsvc", worker="b"}');
      await p2.press('#filter', 'Enter');
      await p2.waitForFunction(() => document.getElementById('status').textContent.startsWith('600 ms total'));
      const st = await p2.evaluate(() => window.flamecol.state());
      assert.deepEqual([st.service, st.filter, st.focus], ['handsvc', 'worker="b"', { level: 2, index: 1 }]);
      hd = await p2.evaluate(() => window.flamecol.drawn());
      sameRects(hd, [[0, 'total', 0, 1], [1, 'main', 0, 1], [2, 'k', 0, 1]], hw, 'focus on k after the filter change');
      assert.equal(hd.find((b) => b.name === 'k').total, 4e8);
      assert.match(await p2.textContent('#pills'), /Focus: k/);
      // ... through a reload of that URL, and a group-by change.
      await p2.reload();
      await p2.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
      sameRects(await p2.evaluate(() => window.flamecol.drawn()), [[0, 'total', 0, 1], [1, 'main', 0, 1], [2, 'k', 0, 1]],
        hw, 'focus on k reloaded');
      await p2.selectOption('#groupby', 'worker');
      await p2.waitForFunction(() => document.querySelectorAll('#groups .group').length > 0);
      assert.deepEqual((await p2.evaluate(() => window.flamecol.state())).focus, { level: 2, index: 1 });
      // ... and a timeline drag to the first 30% (only the T0 + 100 push,
      // worker a: no k): the focus goes, the whole graph is drawn.
      const tl2 = await p2.locator('#timeline').boundingBox();
      await p2.selectOption('#groupby', '');
      await p2.waitForFunction(() => document.querySelectorAll('#groups .group').length === 0);
      await p2.fill('#filter', '');
      await p2.press('#filter', 'Enter');
      await p2.waitForFunction(() => document.getElementById('status').textContent.startsWith('2.00 s total'));
      assert.deepEqual((await p2.evaluate(() => window.flamecol.state())).focus, { level: 2, index: 2 }, 'k again');
      await p2.mouse.move(tl2.x + 2, tl2.y + 10);
      await p2.mouse.down();
      await p2.mouse.move(tl2.x + tl2.width * 0.3, tl2.y + 10);
      await p2.mouse.up();
      await p2.waitForFunction(() => document.getElementById('status').textContent.startsWith('400 ms total'));
      assert.equal((await p2.evaluate(() => window.flamecol.state())).focus, null);
      assert.equal(await p2.textContent('#pills'), '');
      // An older answer arriving after a newer one is not drawn: the render of
      // a filter matching nothing is held while an unfiltered one is answered.
      let releaseFirst;
      const firstHeld = new Promise((resolve) => { releaseFirst = resolve; });
      let seen = 0;
      await p2.route(/\/pyroscope\/render\?/, async (route) => {
        if (++seen === 1) await firstHeld;
        await route.continue();
      });
      await p2.fill('#filter', '{worker="nobody"}');
      await p2.press('#filter', 'Enter');
      await p2.waitForFunction(() => /^loading/.test(document.getElementById('status').textContent));
      await p2.fill('#filter', '');
      await p2.press('#filter', 'Enter');
      await p2.waitForFunction(() => document.getElementById('status').textContent.startsWith('400 ms total'));
      const newer = await p2.textContent('#status');
      const newerDrawn = await p2.evaluate(() => window.flamecol.drawn().length);
      releaseFirst();
      await p2.waitForFunction(() => window.flamecol.staleLoads > 0);
      await p2.unroute(/\/pyroscope\/render\?/);
      assert.equal(await p2.textContent('#status'), newer, 'the older, empty answer is not shown');
      assert.equal(await p2.evaluate(() => window.flamecol.drawn().length), newerDrawn);
      // A query with a profile type and a service switches both. Its render
      // answer is held back until a bad filter has been typed: the late answer
      // must neither hide the filter's error nor (being older) draw over a newer one.
      let releaseRender;
      const renderHeld = new Promise((resolve) => { releaseRender = resolve; });
      let heldRenders = 0;
      let renderArrived;
      const renderSeen = new Promise((resolve) => { renderArrived = resolve; });
      await p2.route(/\/pyroscope\/render\?/, async (route) => {
        heldRenders++;
        renderArrived();
        await renderHeld;
        await route.continue();
      });
      await p2.fill('#filter', `${CPU}{service_name="shop"}`);
      await p2.press('#filter', 'Enter');
      await p2.waitForFunction(() => window.flamecol.state().service === 'shop' && document.getElementById('service').value === 'shop');
      assert.equal((await p2.evaluate(() => window.flamecol.state())).type, CPU);
      // The render must be on its way before the bad filter is typed: on a
      // loaded machine the page sent it after (CI rehearsal, 2026-11-26).
      await Promise.race([renderSeen, new Promise((resolve, reject) =>
        setTimeout(() => reject(new Error('the shop render was never sent')), 15000))]);
      // Not a query: said, not sent.
      await p2.fill('#filter', '{worker=a}');
      await p2.press('#filter', 'Enter');
      await p2.waitForFunction(() => /not a label matcher/.test(document.getElementById('status').textContent));
      assert.ok(heldRenders >= 1, 'the shop render was held back');
      const drawsBefore = await p2.evaluate(() => window.flamecol.draws);
      releaseRender();
      /* the late answer is drawn (the status is written in the same task) */
      await p2.waitForFunction((n) => window.flamecol.draws > n, drawsBefore);
      assert.match(await p2.textContent('#status'), /not a label matcher/, 'the filter error outlives the late render');
      assert.equal(await p2.$eval('#filter', (e) => e.classList.contains('bad')), true);
      await p2.close();

      // The time axis: in Kathmandu (UTC+5:45) over [T0, T0 + 1010] on about
      // 1380 px, ticks 90 px apart at least are 2 min apart, on whole local
      // 2 minutes (UTC + 20700 s), labelled in local HH:MM.
      const ktm = await newPage({ timezoneId: 'Asia/Kathmandu' });
      await openView(ktm, handUrl);
      const kw = await ktm.$eval('#timeline', (c) => c.clientWidth);
      const ticks = await ktm.evaluate(() => window.flamecol.ticks());
      assert.ok(ticks.length >= 5, JSON.stringify(ticks));
      /* local HH:MM, but local midnight is labelled with its date (MM-DD) */
      const hm = (t) => {
        const z = { timeZone: 'Asia/Kathmandu' };
        const time = new Date(t * 1000).toLocaleTimeString('en-GB', Object.assign({ hour: '2-digit', minute: '2-digit' }, z));
        if (time !== '00:00') return time;
        const p = Object.fromEntries(new Intl.DateTimeFormat('en-GB', Object.assign({ month: '2-digit', day: '2-digit' }, z))
          .formatToParts(new Date(t * 1000)).map((x) => [x.type, x.value]));
        return `${p.month}-${p.day}`;
      };
      ticks.forEach((tk, i) => {
        assert.equal((tk.t + 20700) % 120, 0, `tick ${tk.t} on a whole local 2 min`);
        if (i) assert.equal(tk.t - ticks[i - 1].t, 120);
        assert.equal(tk.label, hm(tk.t));
        near(tk.x, ((tk.t - T0) / 1010) * kw, `x of tick ${tk.label}`, 0.5);
      });
      assert.ok(ticks[0].t - T0 < 120 && ticks[0].t >= T0);
      await ktm.close();

      // Downloads: JSON too, the same numbers as pprof -top.
      const json = await (await fetch(await page.$eval('#dl-json', (a) => a.href))).json();
      assert.equal(json.flamebearer.numTicks, ref.total);

      // Findings are above the fold, beside the graph's top; their top function
      // is pprof's top flat one, and a click opens the block menu, whose
      // Search searches for it (more in tests/ui/findings.js).
      await page.setViewportSize({ width: 1400, height: 900 });
      await page.click('button[data-view="both"]');
      await page.waitForSelector('#findings .finding');
      const fbb = await page.locator('#findings').boundingBox();
      assert.ok(fbb.y + fbb.height < 900, `findings visible: ${JSON.stringify(fbb)}`);
      const first = page.locator('#findings .top .finding').first();
      assert.ok((await first.textContent()).startsWith(top + ' '), await first.textContent());
      await first.click();
      await page.click('#menu button[data-act="search"]');
      assert.equal((await page.evaluate(() => window.flamecol.state())).search, top);
      await page.click('#pills .pill button');

      // Nothing is cut off at 1024, 1400 and 1920 px: every number cell and row
      // button ends inside the table pane, which does not scroll sideways; only
      // names give way (ellipsis). The same for the diff table's Change column.
      const diffPage2 = await newPage();
      await openView(diffPage2, `${base}/?service=diffsvc&type=${encodeURIComponent(CPU)}&diff=1&range=custom` +
        `&from=${t2 - 5}&until=${t2 + 20}&bfrom=${t1 - 5}&buntil=${t1 + 20}`);
      for (const w of [1024, 1400, 1920]) {
        await page.setViewportSize({ width: w, height: 900 });
        await diffPage2.setViewportSize({ width: w, height: 900 });
        assert.deepEqual(await clipped(page), [], `table at ${w} px`);
        assert.deepEqual(await clipped(diffPage2), [], `diff table at ${w} px`);
        await page.screenshot({ path: path.join(ARTIFACTS, `explore-${w}.png`) });
        await diffPage2.screenshot({ path: path.join(ARTIFACTS, `diff-${w}.png`) });
      }
      await page.setViewportSize({ width: 1400, height: 900 });

      // Diff mode: no sandwich in the menu; both sides have a timeline over
      // the window holding both selections ([t1 - 5, t2 + 20]), and a drag on
      // the baseline's sets the baseline: its second half holds no samples, so
      // both functions are new there.
      const d2 = await diffPage2.evaluate(() => window.flamecol.drawn());
      const d2box = await diffPage2.locator('#flame').boundingBox();
      const bblock = d2.find((b) => b.name === 'b');
      await diffPage2.mouse.click(d2box.x + bblock.x + bblock.w / 2, d2box.y + bblock.y + bblock.h / 2);
      assert.equal(await diffPage2.isVisible('#menu button[data-act="sandwich"]'), false);
      assert.equal(await diffPage2.isVisible('#menu button[data-act="focus"]'), true);
      await diffPage2.keyboard.press('Escape');
      assert.equal(await diffPage2.isVisible('#btimeline'), true);
      const sums = await diffPage2.evaluate(() => window.flamecol.timelines());
      // every sample of the service is in the window: 20 + 40 samples of 10 ms, on both
      assert.deepEqual(sums, { selection: 60 * MS, baseline: 60 * MS });
      const bt = await diffPage2.locator('#btimeline').boundingBox();
      await diffPage2.mouse.move(bt.x + bt.width * 0.5, bt.y + 10);
      await diffPage2.mouse.down();
      await diffPage2.mouse.move(bt.x + bt.width * 0.6, bt.y + 10);
      await diffPage2.mouse.up();
      await diffPage2.waitForFunction(() => document.querySelector('#top tbody td:last-child').textContent === 'new');
      const bst = await diffPage2.evaluate(() => window.flamecol.state());
      const win = t2 + 20 - (t1 - 5);
      near(+bst.bfrom, t1 - 5 + 0.5 * win, 'baseline from', win / 100);
      near(+bst.buntil, t1 - 5 + 0.6 * win, 'baseline until', win / 100);
      assert.deepEqual(await tableRows(diffPage2), [['b', '0 ns', '300 ms', 'new'], ['a', '0 ns', '100 ms', 'new']]);
      // The window stays where it was (both pushes still in it), so the drag can be redone.
      assert.deepEqual(await diffPage2.evaluate(() => window.flamecol.timelines()), { selection: 60 * MS, baseline: 60 * MS });
      await shots(diffPage2, 'diff-baseline-dragged');
      await diffPage2.close();

      // Span profiles: spanProfile() above.
      await pushSpans();
      const spanUrl = `${base}/?service=spansvc&range=custom&from=${now - 200}&until=${now + 60}`;
      const sp = await newPage();
      await openView(sp, spanUrl + '&trace_id=4bf92f3577b34da6a3ce929d0e0e4736');
      assert.deepEqual(await tableRows(sp), [['a', '3', '3'], ['main', '0', '3']]);
      assert.match(await sp.textContent('#pills'), /Trace: 4bf92f3577b34da6a3ce929d0e0e4736/);
      assert.equal(await sp.inputValue('#spanid'), '4bf92f3577b34da6a3ce929d0e0e4736');
      await sp.fill('#spanid', '00000000000000ab, 00000000000000cd');
      await sp.press('#spanid', 'Enter');
      await sp.waitForFunction(() => document.querySelector('#top tbody tr td').textContent === 'b');
      assert.deepEqual(await tableRows(sp), [['b', '5', '5'], ['a', '3', '3'], ['main', '0', '8']]);
      assert.ok(sp.url().includes('span_id=00000000000000ab%2C00000000000000cd'), sp.url());
      await shots(sp, 'span');
      // The typed span ids' URL reopens them.
      const sp2 = await newPage();
      await openView(sp2, sp.url());
      assert.deepEqual(await tableRows(sp2), [['b', '5', '5'], ['a', '3', '3'], ['main', '0', '8']], 'span ids reloaded');
      assert.equal(await sp2.inputValue('#spanid'), '00000000000000ab,00000000000000cd');
      await sp2.close();
      await sp.click('#pills .pill button'); // no span: the whole profile, 15
      await sp.waitForFunction(() => document.querySelectorAll('#top tbody tr').length === 3 &&
        document.querySelector('#top tbody tr td').textContent === 'main');
      assert.deepEqual(await tableRows(sp), [['main', '7', '15'], ['b', '5', '5'], ['a', '3', '3']]);
      await sp.close();
    }

    // The views of part 2 (tests/ui/views.js); their overview counts the span service too.
    if (runs('views')) {
      if (!runs('explore')) await pushSpans();
      await views({ newPage, base, corpus: CORPUS, artifacts: ARTIFACTS, range, ns, handUrl, push, T0, t1, t2, spansvc: true, bin: BIN });
    }
    // The rest (tests/ui/more.js): object counts in the tooltip, source view.
    if (runs('more')) await more({ newPage, base, corpus: CORPUS, artifacts: ARTIFACTS, range, push, collector, bin: BIN });

    // Behind authentication (tests/ui/auth.js): the login form; a collector of its own.
    // Then an empty store shows its hint where it is seen.
    if (runs('auth')) {
      await auth({ browser, bin: BIN, artifacts: ARTIFACTS });

      const emptyCollector = await startCollector(BIN);
      try {
        const ep = await newPage({ viewport: { width: 1024, height: 700 } });
        await ep.goto(emptyCollector.base + '/');
        await ep.waitForSelector('#empty', { state: 'visible' });
        const eb = await ep.locator('#empty').boundingBox();
        assert.ok(eb.y + eb.height <= 700, `the hint is above the fold: ${JSON.stringify(eb)}`);
        assert.match(await ep.textContent('#empty'), /No profiles/);
        await shots(ep, 'empty');
        await ep.close();
      } finally {
        emptyCollector.stop();
      }
    }

    assert.deepEqual(errors, [], 'no script errors');
    console.log(`ok: browser test (${chosen.join(', ')}) passed; screenshots in ${ARTIFACTS}`);
  } finally {
    if (browser) await browser.close();
    collector.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
