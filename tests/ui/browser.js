// The web UI in a real browser: Debian's chromium driven by playwright-core.
// Starts the real binary on free ports, pushes profiles, opens the UI and
// checks by clicks and reads. Screenshots go to FC_UI_ARTIFACTS (default
// build/ui-artifacts).
//   FLAMECOL_BIN=build/flamecol FLAMECOL_CORPUS=tests/corpus node tests/ui/browser.js
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

const BIN = process.env.FLAMECOL_BIN || 'build/flamecol';
const CORPUS = process.env.FLAMECOL_CORPUS || 'tests/corpus';
const ARTIFACTS = process.env.FC_UI_ARTIFACTS || 'build/ui-artifacts';
const CHROMIUM = process.env.FC_CHROMIUM || '/usr/bin/chromium';
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const ROW = 18; // the UI's row height in CSS pixels
const MS = 1e7; // one folded CPU sample: 10 ms in nanoseconds (100 Hz)

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

async function push(base, name, body, from, until, type) {
  let url = `${base}/ingest?name=${encodeURIComponent(name)}`;
  if (from) url += `&from=${from}&until=${until}`;
  const r = await fetch(url, { method: 'POST', body, headers: type ? { 'Content-Type': type } : {} });
  assert.equal(r.status, 200, await r.text());
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

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const errors = [];
    const newPage = async () => {
      const p = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      p.on('pageerror', (e) => errors.push(String(e)));
      return p;
    };

    /* ---------- A corpus profile against `pprof -top` ---------- */
    const page = await newPage();
    await openView(page, `${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'explore.png') });
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
    await page.screenshot({ path: path.join(ARTIFACTS, 'search.png') });
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
    const hot = drawn.find((b) => b.name === single[0]);
    const pbox = await page.locator('#flame').boundingBox();
    await page.mouse.move(pbox.x + hot.x + hot.w / 2, pbox.y + hot.y + hot.h / 2);
    assert.equal(await page.textContent('#tooltip'), `${single[0]}Total: ${ns(single[1].cum)} (${single[1].cumPct})` +
      `Self: ${ns(single[1].flat)} (${single[1].flatPct})`);

    // Sandwich from the table: runtime.mallocgc becomes the root, with
    // pprof's cum as its total and flat as its self; its callers above it.
    const malloc = ref.rows.get('runtime.mallocgc');
    const row = page.locator('#top tbody tr', { hasText: 'runtime.mallocgc' }).first();
    await row.locator('button', { hasText: 'sandwich' }).click();
    drawn = await page.evaluate(() => window.flamecol.drawn());
    const mroot = drawn.filter((b) => b.level === 1);
    assert.deepEqual(mroot.map((b) => [b.name, b.total, b.self]), [['runtime.mallocgc', malloc.cum, malloc.flat]]);
    near(mroot[0].w, width, 'the sandwiched function spans the width');
    near(drawn.find((b) => b.level === 0).w, width, 'root spans the width');
    let callers = await page.evaluate(() => window.flamecol.callers());
    assert.deepEqual(callers.filter((b) => b.level === 1).map((b) => b.name), ['runtime.mallocgc']);
    near(callers.filter((b) => b.level === 2).reduce((s, b) => s + b.w, 0), width, 'its callers share its width');
    assert.ok(page.url().includes('sandwich=runtime.mallocgc'), page.url());
    await page.screenshot({ path: path.join(ARTIFACTS, 'sandwich.png') });

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
    await page.screenshot({ path: path.join(ARTIFACTS, 'groups.png') });

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
    await hand.screenshot({ path: path.join(ARTIFACTS, 'focus.png') });

    // Icicle: the same blocks, the root on top.
    await hand.click('button[data-orient="icicle"]');
    drawn = await hand.evaluate(() => window.flamecol.drawn());
    for (const b of drawn) assert.equal(b.y, b.level * ROW, `icicle row of ${b.name}`);
    assert.equal(drawn.find((b) => b.level === 0).y, 0);
    await hand.screenshot({ path: path.join(ARTIFACTS, 'icicle.png') });
    await hand.click('button[data-orient="flame"]');

    // Sandwich on the recursive f: callees from its outermost block only,
    // f 40 -> f 30 -> g 30, h 10; its callers main 40 above it.
    await hand.click('#pills .pill button'); // drop the focus
    await hand.locator('#top tbody tr', { hasText: /^f/ }).first().locator('button', { hasText: 'sandwich' }).click();
    drawn = await hand.evaluate(() => window.flamecol.drawn());
    sameRects(drawn, [[0, 'total', 0, 1], [1, 'f', 0, 1], [2, 'f', 0, 0.75], [2, 'h', 0.75, 0.25], [3, 'g', 0, 0.75]],
      hw, 'callees of f');
    assert.deepEqual(drawn.filter((b) => b.level === 1).map((b) => [b.total, b.self]), [[4e8, 0]]);
    callers = await hand.evaluate(() => window.flamecol.callers());
    assert.deepEqual(callers.map((b) => [b.level, b.name]).sort(), [[0, 'total'], [1, 'f'], [2, 'main']]);
    for (const b of callers) near(b.w, hw, `caller ${b.name} spans the width`);
    // g's callers: main 20 directly, f 30 through f;f: widths 2/5 and 3/5.
    await hand.goto(handUrl + '&sandwich=g');
    await hand.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
    callers = await hand.evaluate(() => window.flamecol.callers());
    const cw = callers.map((b) => [b.level, b.name, +(b.w / hw).toFixed(4)]).sort();
    assert.deepEqual(cw, [[0, 'total', 1], [1, 'g', 1], [2, 'f', 0.6], [2, 'main', 0.4], [3, 'f', 0.6], [4, 'main', 0.6]]);

    // A link reopens the same view.
    await hand.locator('#top tbody tr', { hasText: /^h/ }).first().locator('button', { hasText: 'sandwich' }).click();
    const again = await newPage();
    await again.goto(hand.url());
    await again.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
    assert.equal((await again.evaluate(() => window.flamecol.state())).sandwich, 'h');
    assert.deepEqual((await again.evaluate(() => window.flamecol.callers())).map((b) => [b.level, b.name]).sort(),
      [[0, 'total'], [1, 'h'], [2, 'f'], [3, 'main']]);
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
    await hand.mouse.up();
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
    await diffPage.screenshot({ path: path.join(ARTIFACTS, 'diff.png') });

    assert.deepEqual(errors, [], 'no script errors');
    console.log('ok: browser test passed; screenshots in ' + ARTIFACTS);
  } finally {
    if (browser) await browser.close();
    collector.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
