// The views of issue 17 part 2 (function details, overview, ...) in the real
// browser, called from browser.js with its collector, pages and helpers.
// Expected numbers come from Go's pprof run here on the corpus file
// (-lines -top for per-line figures, -peek for callers and callees) or from
// the hand-built pushes of browser.js, worked out in the comments.
'use strict';
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const PPROF = process.env.FLAMECOL_PPROF || 'build/tools/pprof';

function pprof(args, file) {
  return execFileSync(PPROF, ['-sample_index=1', '-unit=ns'].concat(args, [file]), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}
const nsOf = (s) => (s === '0' ? 0 : +/^(\d+)ns$/.exec(s)[1]);

// pprof's per-line flat and cum of one function: [[file:line, flat, cum]] in file and line order.
function pprofLines(file, fn) {
  const out = [];
  for (const line of pprof(['-lines', '-top', '-nodecount=1000000'], file).split('\n')) {
    const m = /^\s*(\S+)\s+\S+\s+\S+\s+(\S+)\s+\S+\s+(\S+) (\S+):(\d+)$/.exec(line);
    if (m && m[3] === fn) out.push([m[4], +m[5], nsOf(m[1]), nsOf(m[2])]);
  }
  out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
  return out.map((l) => [l[0] + ':' + l[1], l[2], l[3]]);
}
// pprof -peek of one function: {callers: [[name, ns]], callees: [[name, ns]]}.
function pprofPeek(file, fn) {
  const text = pprof(['-peek', '^' + fn.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'], file);
  const body = text.split(/^-+\+-+$/m).find((part) => part.includes('| ' + fn + '\n'));
  const callers = [], callees = [];
  let seen = false;
  for (const line of body.split('\n')) {
    const edge = /^\s+(\d+ns)\s+[\d.]+%\s+\|\s+(.+?)(?: \(inline\))?$/.exec(line);
    if (edge) (seen ? callees : callers).push([edge[2], nsOf(edge[1])]);
    else if (/\|\s+\S/.test(line)) seen = true;
  }
  return { callers, callees };
}

// The rows of the panel's three tables, as text cells.
const panel = (page) => page.$$eval('#fn-panel .fn-block', (bs) => bs.map((b) =>
  [...b.querySelectorAll('tr')].slice(1).map((tr) => [...tr.cells].map((td) => td.textContent))));

async function functionDetails(ctx) {
  const { newPage, base, corpus, artifacts, range, ns, handUrl } = ctx;
  const file = path.join(corpus, 'go-1s-cpu.pb.gz');
  const fn = 'runtime.mallocgc';
  const lines = pprofLines(file, fn);
  const peek = pprofPeek(file, fn);
  assert.ok(lines.length > 1 && peek.callers.length && peek.callees.length, 'pprof has lines, callers and callees');

  // From a table row of the corpus profile: per line pprof's flat and cum,
  // callers and callees pprof's -peek.
  const page = await newPage();
  await page.goto(`${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}`);
  await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
  const row = page.locator('#top tbody tr').filter({ has: page.locator('td.name', { hasText: new RegExp('^' + fn.replace('.', '\\.') + '$') }) });
  await row.locator('button[title^="details"]').click();
  await page.waitForFunction((n) => window.flamecol.fn() && window.flamecol.fn().function === n, fn);
  const check = async (p, what) => {
    const [l, callers, callees] = await panel(p);
    assert.deepEqual(l, lines.map(([at, flat, cum]) => [at, ns(flat), ns(cum)]), what + ': lines as pprof -lines -top');
    const edges = (rows) => rows.map((r) => [r[0], r[1]]).sort();
    assert.deepEqual(edges(callers), peek.callers.map(([n, v]) => [n, ns(v)]).sort(), what + ': callers as pprof -peek');
    assert.deepEqual(edges(callees), peek.callees.map(([n, v]) => [n, ns(v)]).sort(), what + ': callees as pprof -peek');
  };
  await check(page, 'details from the table');
  assert.ok(page.url().includes('fn=' + encodeURIComponent(fn)), page.url());
  for (const w of [1024, 1920]) {
    await page.setViewportSize({ width: w, height: 900 });
    await page.locator('#fn-panel').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(artifacts, `function-${w}.png`) });
  }
  await page.reload();
  await page.waitForFunction((n) => window.flamecol && window.flamecol.fn() && window.flamecol.fn().function === n, fn);
  await check(page, 'details reloaded');
  await page.close();

  // From a flame block of the hand-built service (browser.js):
  //   main;f;f;g 30, main;f;h 10, main;k 40, main;g 20, main;k 100
  // f: self 0, total 40 samples = 400 ms of 2.00 s (20.00%); callers: main
  // (40, every f sample), f (30, the recursive call); callees f 30, g 30, h 10.
  // g, picked among f's callees: self = total = 30 + 20 = 500 ms (25.00%),
  // callers f 30 (300 ms), main 20 (200 ms), no callees.
  const hand = await newPage({ viewport: { width: 1024, height: 800 } });
  await hand.goto(handUrl);
  await hand.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
  const box = await hand.locator('#flame').boundingBox();
  const f = (await hand.evaluate(() => window.flamecol.drawn())).find((b) => b.name === 'f' && b.level === 2);
  await hand.mouse.click(box.x + f.x + f.w / 2, box.y + f.y + f.h / 2);
  await hand.click('#menu button[data-act="details"]');
  await hand.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'f');
  assert.match(await hand.textContent('#fn-panel .fn-sum'), /^Self 0 ns \(0\.00%\) · Total 400 ms \(20\.00%\)$/);
  assert.deepEqual(await panel(hand), [
    [['(no line information)', '0 ns', '400 ms']],
    [['main', '400 ms', '20.00%'], ['f', '300 ms', '15.00%']],
    [['f', '300 ms', '15.00%'], ['g', '300 ms', '15.00%'], ['h', '100 ms', '5.00%']],
  ]);
  await hand.locator('#fn-panel .fn-block').nth(2).locator('button', { hasText: /^g$/ }).click();
  await hand.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'g');
  const gWant = [
    [['(no line information)', '500 ms', '500 ms']],
    [['f', '300 ms', '15.00%'], ['main', '200 ms', '10.00%']],
    [['none']],
  ];
  assert.deepEqual(await panel(hand), gWant);
  assert.match(await hand.textContent('#fn-panel .fn-sum'), /^Self 500 ms \(25\.00%\) · Total 500 ms \(25\.00%\)$/);
  assert.ok(hand.url().includes('fn=g'), hand.url());
  await hand.reload();
  await hand.waitForFunction(() => window.flamecol && window.flamecol.fn() && window.flamecol.fn().function === 'g');
  assert.deepEqual(await panel(hand), gWant, 'g reloaded');
  await hand.screenshot({ path: path.join(artifacts, 'function-hand-1024.png') });
  // Escape closes the panel and takes it out of the URL.
  await hand.keyboard.press('Escape');
  assert.equal(await hand.isVisible('#fn-panel'), false);
  assert.ok(!hand.url().includes('fn='), hand.url());
  await hand.close();
}

// The overview's tiles as drawn: [[name, sub-line, hover]].
const tilesOf = (page) => page.$$eval('#page .tile', (ts) => ts.map((t) =>
  [t.querySelector('.tile-name').textContent, t.querySelector('.tile-sub').textContent, t.title]));
const tilesDrawn = (page) => page.waitForFunction(() => window.flamecol && window.flamecol.tiles() &&
  document.querySelectorAll('#page .tile').length === window.flamecol.tiles().length);

async function overview(ctx) {
  const { newPage, base, corpus, artifacts, range, ns } = ctx;
  // The three services of browser.js, each with its CPU timeline's total:
  // diffsvc main;a 10, main;b 10 + main;a 10, main;b 30 = 60 samples = 600 ms;
  // handsvc 30 + 10 + 40 + 20 + 100 = 200 samples = 2.00 s; shop the corpus
  // profile, pprof's total of sample type 1 (cpu).
  const cpuTotal = +/of (\d+)ns total/.exec(pprof(['-top'], path.join(corpus, 'go-1s-cpu.pb.gz')))[1];
  const samplesTotal = +/of (\d+) total/.exec(execFileSync(PPROF, ['-sample_index=0', '-top', path.join(corpus, 'go-1s-cpu.pb.gz')],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }))[1];
  const page = await newPage();
  await page.goto(`${base}/?page=overview&${range}`);
  await tilesDrawn(page);
  const want = [
    ['diffsvc', 'CPU · 600 ms', `diffsvc: ${CPU} (click: its 1 profile types)`],
    ['handsvc', 'CPU · 2.00 s', `handsvc: ${CPU} (click: its 1 profile types)`],
    ['shop', 'CPU · ' + ns(cpuTotal), `shop: ${CPU} (click: its 2 profile types)`],
  ];
  const wantTotals = [['diffsvc', 6e8], ['handsvc', 2e9], ['shop', cpuTotal]];
  if (ctx.spansvc) {
    // browser.js's span profile: main;a 3, main;b 5, main 7 = 15 samples of
    // its only type, a count (no CPU type there: the first type's timeline).
    want.push(['spansvc', 'CPU samples · 15', 'spansvc: process_cpu:samples:count:: (click: its 1 profile types)']);
    wantTotals.push(['spansvc', 15]);
  }
  assert.deepEqual(await tilesOf(page), want, 'one tile per service, its CPU total');
  assert.deepEqual((await page.evaluate(() => window.flamecol.tiles())).map((t) => [t.service, t.total]),
    wantTotals, 'each tile draws its own service\'s timeline');
  for (const w of [1024, 1920]) {
    await page.setViewportSize({ width: w, height: 700 });
    await page.screenshot({ path: path.join(artifacts, `overview-${w}.png`) });
  }
  await page.reload();
  await tilesDrawn(page);
  assert.deepEqual(await tilesOf(page), want, 'overview reloaded');
  // Pick shop: its two profile types by name, the id on hover, each total
  // pprof's (sample_index 0: samples as a count; 1: cpu in ns).
  await page.click('#page .tile >> text=shop');
  await page.waitForURL(/page=service/);
  await tilesDrawn(page);
  const wantTypes = [
    ['CPU', ns(cpuTotal), CPU],
    ['CPU samples', String(samplesTotal), 'process_cpu:samples:count:cpu:nanoseconds'],
  ];
  assert.deepEqual(await tilesOf(page), wantTypes, 'the service\'s profile types');
  assert.ok(page.url().includes('service=shop'), page.url());
  for (const w of [1024, 1920]) {
    await page.setViewportSize({ width: w, height: 700 });
    await page.screenshot({ path: path.join(artifacts, `overview-types-${w}.png`) });
  }
  await page.reload();
  await tilesDrawn(page);
  assert.deepEqual(await tilesOf(page), wantTypes, 'profile types reloaded');
  // Pick CPU: the flame graph of shop's CPU profile, its status pprof's total.
  await page.click('#page .tile >> text=CPU >> nth=0');
  await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
  const st = await page.evaluate(() => window.flamecol.state());
  assert.deepEqual([st.page, st.service, st.type], ['', 'shop', CPU]);
  assert.ok((await page.textContent('#status')).startsWith(ns(cpuTotal) + ' total'), await page.textContent('#status'));
  await page.close();
}

// Drawn blocks of level 2 as [name, x, w] fractions of the width, rounded.
const level2 = (side, width) => side.rects.filter((r) => r.level === 2)
  .map((r) => [r.name, +(r.x / width).toFixed(3), +(r.w / width).toFixed(3)]);

// The labels page's tables as drawn: [[label header, [[value, total, max]]]].
const labelTables = (page) => page.$$eval('#page .label table', (ts) => ts.map((t) => [
  t.rows[0].cells[0].textContent,
  [...t.rows].slice(1).map((tr) => [...tr.cells].slice(0, 3).map((c) => c.textContent))]));

async function labels(ctx) {
  const { newPage, base, artifacts, push, T0 } = ctx;
  // labsvc, 10 ms samples, in [L, L + 1000] (points 200 s apart, so each
  // push is its own timeline point):
  //   L+100 region=eu pod=p1: main;x 50      L+300 region=us pod=p1: main;x 80
  //   L+500 region=eu pod=p2: main;y 50
  // pod:    p1 total 130 = 1.30 s, max 80 = 800 ms; p2 500 ms, max 500 ms
  // region: eu total 100 = 1.00 s, max 50 = 500 ms; us 800 ms, max 800 ms
  // By total: p1, p2 and eu, us; by max: p1, p2 and us, eu.
  const L = T0 + 2000;
  await push(base, 'labsvc.cpu{region=eu,pod=p1}', 'main;x 50\n', L + 100, L + 110);
  await push(base, 'labsvc.cpu{region=us,pod=p1}', 'main;x 80\n', L + 300, L + 310);
  await push(base, 'labsvc.cpu{region=eu,pod=p2}', 'main;y 50\n', L + 500, L + 510);
  const url = `${base}/?page=labels&service=labsvc&type=${encodeURIComponent(CPU)}&range=custom&from=${L}&until=${L + 1000}`;
  const byTotal = [
    ['pod (2)', [['p1', '1.30 s', '800 ms'], ['p2', '500 ms', '500 ms']]],
    ['region (2)', [['eu', '1.00 s', '500 ms'], ['us', '800 ms', '800 ms']]],
  ];
  const byMax = [byTotal[0], ['region (2)', [['us', '800 ms', '800 ms'], ['eu', '1.00 s', '500 ms']]]];
  const page = await newPage();
  await page.goto(url);
  await page.waitForFunction(() => window.flamecol && window.flamecol.tiles() && document.querySelector('#page .label'));
  assert.deepEqual(await labelTables(page), byTotal, 'labels by total');
  for (const w of [1024, 1920]) {
    await page.setViewportSize({ width: w, height: 700 });
    await page.screenshot({ path: path.join(artifacts, `labels-${w}.png`) });
  }
  // Sort by maximum: the order is in the URL and survives a reload.
  await page.locator('#page .label').nth(1).locator('a.sort-max').click();
  await page.waitForURL(/lsort=max/);
  await page.waitForFunction(() => window.flamecol && window.flamecol.tiles() && document.querySelector('#page .label'));
  assert.deepEqual(await labelTables(page), byMax, 'labels by max');
  await page.reload();
  await page.waitForFunction(() => window.flamecol && window.flamecol.tiles() && document.querySelector('#page .label'));
  assert.deepEqual(await labelTables(page), byMax, 'labels by max, reloaded');
  // A value filters the flame graph to it: region us is main;x 80 = 800 ms.
  await page.click('#page .label >> nth=1 >> text=us');
  await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
  const st = await page.evaluate(() => window.flamecol.state());
  assert.deepEqual([st.page, st.service, st.filter], ['', 'labsvc', 'region="us"']);
  assert.ok((await page.textContent('#status')).startsWith('800 ms total'), await page.textContent('#status'));
  // Two values compared: eu picked (A, baseline: main;x 50, main;y 50, x and
  // y half each), then "vs A" on us (B: main;x 80, x all of it). x's share
  // 1/2 -> 1 (+100.0%), y's 1/2 -> 0 (-100.0%).
  await page.goto(url);
  await page.waitForFunction(() => window.flamecol && window.flamecol.tiles() && document.querySelector('#page .label'));
  const region = page.locator('#page .label').nth(1);
  await region.locator('tr', { hasText: 'eu' }).locator('a.pick').click();
  await page.waitForURL(/lpick=region/);
  await page.waitForFunction(() => document.querySelector('#page .label a.pick'));
  // The pick's URL in a fresh page: eu is A (its mark unpicks), us offers "vs A".
  const picked = await newPage();
  await picked.goto(page.url());
  await picked.waitForFunction(() => window.flamecol && window.flamecol.tiles() && document.querySelector('#page .label a.pick'));
  assert.deepEqual(await picked.locator('#page .label').nth(1).locator('a.pick').allTextContents(), ['A ×', 'vs A'], 'lpick reloaded');
  await picked.close();
  await page.locator('#page .label').nth(1).locator('tr', { hasText: 'us' }).locator('a.pick', { hasText: 'vs A' }).click();
  await page.waitForFunction(() => window.flamecol && window.flamecol.sides && window.flamecol.sides().a &&
    window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
  const cs = await page.evaluate(() => window.flamecol.state());
  assert.deepEqual([cs.page, cs.filter, cs.bfilter], ['compare', 'region="us"', 'region="eu"']);
  const sw = await page.$eval('#side-a', (c) => c.clientWidth);
  const sides = await page.evaluate(() => window.flamecol.sides());
  assert.deepEqual([level2(sides.a, sw), level2(sides.b, sw)], [[['x', 0, 0.5], ['y', 0.5, 0.5]], [['x', 0, 1]]]);
  assert.deepEqual(await page.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent))),
    [['x', '500 ms', '800 ms', '+100.0%'], ['y', '500 ms', '0 ns', '-100.0%']]);
  // The comparison's URL (bfilter region="eu") in a fresh page: the same sides and table.
  const again = await newPage();
  await again.goto(page.url());
  await again.waitForFunction(() => window.flamecol && window.flamecol.sides().a && window.flamecol.draws > 0 &&
    document.querySelector('#top tbody tr'));
  const sides2 = await again.evaluate(() => window.flamecol.sides());
  const sw2 = await again.$eval('#side-a', (c) => c.clientWidth);
  assert.deepEqual([level2(sides2.a, sw2), level2(sides2.b, sw2)], [[['x', 0, 0.5], ['y', 0.5, 0.5]], [['x', 0, 1]]], 'bfilter reloaded');
  assert.deepEqual(await again.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent))),
    [['x', '500 ms', '800 ms', '+100.0%'], ['y', '500 ms', '0 ns', '-100.0%']], 'bfilter reloaded: the diff');
  await again.close();
  await page.close();
}


// pprof -top of a corpus file's cpu (sample_index=1), by Go's pprof: the
// total and every function's flat value in ns (pprof's " (inline)" mark dropped).
function pprofFlat(file) {
  const text = pprof(['-top', '-nodecount=1000000', '-nodefraction=0', '-edgefraction=0'], file);
  const total = +/of (\d+)ns total/.exec(text)[1];
  const flat = new Map();
  for (const line of text.split('\n')) {
    const m = /^\s*(\S+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(.+?)(?: \(inline\))?$/.exec(line);
    if (m && /^(0|\d+ns)$/.test(m[1]) && nsOf(m[1]) > 0) flat.set(m[2], (flat.get(m[2]) || 0) + nsOf(m[1]));
  }
  return { total, flat };
}

// Labels and Compare on real corpus data: go-1s-cpu as region=eu, go-3s-cpu
// as region=us of one service. The labels page's region totals (and maxima:
// one profile each) are the two files' pprof -top totals; the comparison of
// us against eu lists each function's flat value on both sides as pprof -top
// gives it for each file.
async function corpusLabelsAndCompare(ctx) {
  const { newPage, base, corpus, push, range, ns } = ctx;
  const eu = pprofFlat(path.join(corpus, 'go-1s-cpu.pb.gz'));
  const us = pprofFlat(path.join(corpus, 'go-3s-cpu.pb.gz'));
  const fs = require('node:fs');
  for (const [region, file] of [['eu', 'go-1s-cpu'], ['us', 'go-3s-cpu']]) {
    await push(base, `corplab{region=${region}}`, fs.readFileSync(path.join(corpus, file + '.pb.gz')), 0, 0,
      'application/octet-stream');
  }
  const type = encodeURIComponent(CPU);
  const page = await newPage();
  await page.goto(`${base}/?page=labels&service=corplab&type=${type}&${range}`);
  await page.waitForFunction(() => window.flamecol && window.flamecol.tiles() && document.querySelector('#page .label'));
  const region = (await labelTables(page)).find((t) => t[0].startsWith('region'));
  assert.ok(region, 'a region table on the labels page');
  const byTotal = [['eu', eu.total], ['us', us.total]].sort((a, b) => b[1] - a[1]);
  assert.deepEqual(region[1], byTotal.map(([v, t]) => [v, ns(t), ns(t)]), 'corpus labels: totals and maxima');
  // Compare: us (the selection) against eu (the baseline), every function with a flat value.
  const baseline = range.replace(/^range=custom&/, '').replace('from=', 'bfrom=').replace('until=', 'buntil=');
  await page.goto(`${base}/?page=compare&service=corplab&type=${type}&${range}&${baseline}` +
    `&filter=${encodeURIComponent('region="us"')}&bfilter=${encodeURIComponent('region="eu"')}`);
  await page.waitForFunction(() => window.flamecol && window.flamecol.sides && window.flamecol.sides().a &&
    window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
  const rows = new Map((await page.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent))))
    .map((r) => [r[0], [r[1], r[2]]]));
  const names = new Set([...eu.flat.keys(), ...us.flat.keys()]);
  assert.ok(names.size > 50, `${names.size} functions with a flat value`);
  for (const fn of names) {
    assert.deepEqual(rows.get(fn), [ns(eu.flat.get(fn) || 0), ns(us.flat.get(fn) || 0)], `compare row of ${fn}`);
  }
  assert.equal(await page.textContent('#side-a-total'), ns(eu.total), 'baseline total');
  assert.equal(await page.textContent('#side-b-total'), ns(us.total), 'selection total');
  await page.close();
}

async function compare(ctx) {
  const { newPage, base, artifacts, t1, t2 } = ctx;
  // diffsvc (browser.js): A at t1 main;a 10, main;b 10 (200 ms; a and b
  // half each); B at t2 main;a 10, main;b 30 (400 ms; a 1/4, b 3/4). The
  // diff: b's share 1/2 -> 3/4 (+50.0%), a's 1/2 -> 1/4 (-50.0%).
  const url = `${base}/?page=compare&service=diffsvc&type=${encodeURIComponent(CPU)}&range=custom` +
    `&from=${t2 - 5}&until=${t2 + 20}&bfrom=${t1 - 5}&buntil=${t1 + 20}`;
  const ready = (p) => p.waitForFunction(() => window.flamecol && window.flamecol.sides().a &&
    window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
  const page = await newPage();
  const check = async (what, a, b) => {
    const w = await page.$eval('#side-a', (c) => c.clientWidth);
    const sides = await page.evaluate(() => window.flamecol.sides());
    assert.deepEqual([await page.textContent('#side-a-total'), level2(sides.a, w)], a, what + ': side A');
    assert.deepEqual([await page.textContent('#side-b-total'), level2(sides.b, w)], b, what + ': side B');
  };
  await page.goto(url);
  await ready(page);
  const sideB = ['400 ms', [['a', 0, 0.25], ['b', 0.25, 0.75]]];
  await check('compare', ['200 ms', [['a', 0, 0.5], ['b', 0.5, 0.5]]], sideB);
  const diffRows = () => page.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
  assert.deepEqual(await diffRows(), [['b', '100 ms', '300 ms', '+50.0%'], ['a', '100 ms', '100 ms', '-50.0%']]);
  assert.equal(await page.isVisible('#btimeline'), true, 'the baseline has its own timeline');
  // A diff table row opens the details of its function over the selection
  // (B): b is main;b 30 of 40 = 300 ms (75.00%), called by main.
  await page.click('#top tbody td.name >> text=b');
  await page.waitForFunction(() => window.flamecol.fn() && window.flamecol.fn().function === 'b');
  assert.equal(await page.textContent('#fn-panel .fn-sum'), 'Self 300 ms (75.00%) · Total 300 ms (75.00%)');
  assert.deepEqual((await panel(page))[1], [['main', '300 ms', '75.00%']]);
  await page.keyboard.press('Escape');
  assert.equal(await page.isVisible('#fn-panel'), false);
  for (const w of [1024, 1920]) {
    await page.setViewportSize({ width: w, height: 900 });
    await page.screenshot({ path: path.join(artifacts, `compare-${w}.png`) });
  }
  await page.reload();
  await ready(page);
  await check('compare reloaded', ['200 ms', [['a', 0, 0.5], ['b', 0.5, 0.5]]], sideB);
  // Drag on the baseline's timeline over its last 3% (the window runs from
  // t1 - 5 to t2 + 20, 6625 s: that is t2 and nothing of t1): A becomes B.
  const tb = await page.locator('#btimeline').boundingBox();
  await page.mouse.move(tb.x + tb.width * 0.97, tb.y + 10);
  await page.mouse.down();
  await page.mouse.move(tb.x + tb.width - 1, tb.y + 10);
  await page.mouse.up();
  await page.waitForFunction(() => window.flamecol.sides().a && window.flamecol.sides().a.total === 4e8);
  await ready(page);
  await check('baseline dragged', sideB, sideB);
  const st = await page.evaluate(() => window.flamecol.state());
  assert.equal(st.page, 'compare');
  assert.ok(+st.bfrom > t1 + 20 && +st.bfrom <= t2 && +st.buntil > t2 + 10, JSON.stringify(st));
  await page.reload();
  await ready(page);
  await check('baseline dragged, reloaded', sideB, sideB);
  await page.close();
}

// The browser's dark preference: the new views' page goes dark (its
// background's luminance under a quarter), the flame graph stays drawn.
async function dark(ctx) {
  const { newPage, base, artifacts, range } = ctx;
  const page = await newPage({ colorScheme: 'dark', viewport: { width: 1024, height: 800 } });
  const lum = () => page.$eval('body', (b) => {
    const [r, g, bl] = getComputedStyle(b).backgroundColor.match(/\d+/g).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * bl) / 255;
  });
  await page.goto(`${base}/?page=overview&${range}`);
  await tilesDrawn(page);
  const l0 = await lum();
  assert.ok(l0 < 0.25, 'the overview is dark: ' + l0);
  await page.screenshot({ path: path.join(artifacts, 'overview-dark-1024.png') });
  await page.goto(`${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}&fn=runtime.mallocgc`);
  await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && window.flamecol.fn());
  assert.ok((await lum()) < 0.25, 'the explore view is dark');
  await page.screenshot({ path: path.join(artifacts, 'function-dark-1024.png') });
  await page.close();
}

// An empty store: each page says so (no console error, which browser.js counts).
async function emptyPages(ctx) {
  const { startCollector } = require('./collector.js');
  const empty = await startCollector(ctx.bin);
  try {
    const page = await ctx.newPage({ viewport: { width: 1024, height: 700 } });
    await page.goto(empty.base + '/?page=overview');
    await page.waitForFunction(() => /No service/.test(document.getElementById('page').textContent));
    await page.goto(empty.base + '/?page=labels');
    await page.waitForFunction(() => /No profiles/.test(document.getElementById('page').textContent));
    await page.goto(empty.base + '/?page=compare');
    await page.waitForSelector('#empty', { state: 'visible' });
    await page.close();
  } finally {
    empty.stop();
  }
}

async function views(ctx) {
  await functionDetails(ctx);
  await overview(ctx);
  await labels(ctx);
  await compare(ctx);
  await corpusLabelsAndCompare(ctx);
  await dark(ctx);
  if (ctx.bin) await emptyPages(ctx);
}

module.exports = { views, pprofLines, pprofPeek };
