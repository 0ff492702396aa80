// Issue 17: findings as a panel beside the flame graph, each finding opening
// the block menu (focus, sandwich, search, details). Called from more.js.
// Expected: the corpus CPU profile's `pprof -top` first row (Go's pprof at
// build/tools/pprof, sample index cpu), and the graph the findings stand for.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';

// pprof -top's first row: {name, flat} (flat% as printed, e.g. "18.52%").
function pprofFirst(file) {
  const bin = process.env.FLAMECOL_PPROF || 'build/tools/pprof';
  const out = execFileSync(bin, ['-top', '-sample_index=cpu', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const lines = out.split('\n');
  const head = lines.findIndex((l) => /^\s*flat\s+flat%/.test(l));
  const m = /^\s*\S+\s+([\d.]+%)\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(.+?)(?: \(inline\))?$/.exec(lines[head + 1]);
  return { flat: m[1], name: m[2] };
}

async function findings(ctx) {
  const { newPage, base, corpus, push, range, artifacts } = ctx;
  const file = path.join(corpus, 'go-1s-cpu.pb.gz');
  await push(base, 'findsvc', fs.readFileSync(file), 0, 0, 'application/octet-stream');
  const ref = pprofFirst(file);
  const url = `${base}/?service=findsvc&type=${encodeURIComponent(CPU)}&${range}`;
  const page = await newPage({ viewport: { width: 1920, height: 1000 } });
  const ready = async () => {
    await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && window.flamecol.findings());
    await page.waitForSelector('#findings .finding');
  };
  const st = () => page.evaluate(() => window.flamecol.state());
  const flameWidth = () => page.$eval('#flame', (c) => c.clientWidth);
  // A finding's menu, then one of its actions; the graph is drawn again.
  const act = async (finding, what) => {
    const draws = await page.evaluate(() => window.flamecol.draws);
    await finding.click();
    assert.equal(await page.isVisible('#menu'), true, 'a finding opens the menu');
    // as for a block: no focus inside a sandwich
    const sandwiched = !!(await st()).sandwich;
    for (const a of ['focus', 'sandwich', 'search', 'details']) {
      assert.equal(await page.isVisible(`#menu button[data-act="${a}"]`), a !== 'focus' || !sandwiched, `the menu's ${a}`);
    }
    await page.click(`#menu button[data-act="${what}"]`);
    assert.equal(await page.isVisible('#menu'), false, 'the menu closes');
    await page.waitForFunction((n) => window.flamecol.draws > n, draws);
  };
  await page.goto(url);
  await ready();

  // The top function and its share: pprof -top's first row.
  const f = await page.evaluate(() => window.flamecol.findings());
  assert.deepEqual(f.top[0], { name: ref.name, share: ref.flat }, 'top finding = pprof -top first row');
  const top = page.locator('#findings .top .finding').first();
  assert.equal(await top.textContent(), `${ref.name} ${ref.flat}`);

  // 1920 px: the panel beside the graph (to its right, their heights overlapping).
  const fb = await page.locator('#findings').boundingBox();
  const gb = await page.locator('#flame').boundingBox();
  assert.ok(fb.x >= gb.x + gb.width, `findings right of the graph: ${JSON.stringify({ fb, gb })}`);
  assert.ok(fb.y < gb.y + gb.height && gb.y < fb.y + fb.height, `findings beside the graph: ${JSON.stringify({ fb, gb })}`);
  assert.ok(fb.x + fb.width <= 1920, 'inside the window');
  await page.screenshot({ path: path.join(artifacts, 'findings-1920.png') });

  // Focus: the widest block of the top function fills the graph's width.
  const before = await page.evaluate(() => window.flamecol.drawn());
  const widest = before.filter((b) => b.name === ref.name).sort((a, b) => b.total - a.total)[0];
  assert.ok(widest, 'the top function is drawn');
  await act(top, 'focus');
  const check = async (what) => {
    const s = await st();
    assert.ok(s.focus, what + ': focused');
    assert.equal(s.focus.level, widest.level, what);
    const drawn = await page.evaluate(() => window.flamecol.drawn());
    const w = await flameWidth();
    const fo = drawn.filter((b) => b.level === widest.level && b.w >= w - 1);
    assert.equal(fo.length, 1, what + ': one full-width block at the focused level');
    assert.equal(fo[0].name, ref.name, what);
    assert.equal(fo[0].total, widest.total, what);
    // below it only its own callees: their totals add up to at most its own
    const deeper = drawn.filter((b) => b.level === widest.level + 1).reduce((a, b) => a + b.total, 0);
    assert.ok(deeper <= widest.total, what + ': only callees below');
    assert.match(await page.textContent('#pills'), new RegExp('Focus: ' + ref.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  };
  await check('focus from a finding');
  await page.reload();
  await ready();
  await check('focus from a finding, reloaded');

  // Sandwich: the function between its callers and callees, full width.
  await act(page.locator('#findings .top .finding').first(), 'sandwich');
  let s = await st();
  assert.equal(s.sandwich, ref.name);
  assert.equal(s.focus, null);
  assert.equal(await page.isVisible('#callers'), true, 'callers drawn');
  const w = await flameWidth();
  const callees = await page.evaluate(() => window.flamecol.drawn());
  const self = callees.filter((b) => b.name === ref.name && b.w >= w - 1);
  assert.equal(self.length, 1, 'the sandwiched function spans the callees');
  const callers = await page.evaluate(() => window.flamecol.callers());
  assert.ok(callers.some((b) => b.name === ref.name && b.w >= w - 1), 'and the callers');

  // Search, then details.
  await act(page.locator('#findings .top .finding').first(), 'search');
  assert.equal((await st()).search, ref.name);
  assert.equal(await page.inputValue('#search'), ref.name);
  await page.locator('#findings .top .finding').first().click();
  await page.click('#menu button[data-act="details"]');
  await page.waitForFunction((n) => window.flamecol.fn() && window.flamecol.fn().function === n, ref.name);
  assert.equal(await page.isVisible('#fn-panel'), true, 'details panel');
  assert.match(await page.textContent('#fn-panel .fn-head'), new RegExp(ref.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  await page.reload();
  await ready();
  await page.waitForFunction((n) => window.flamecol.fn() && window.flamecol.fn().function === n, ref.name);
  s = await st();
  assert.deepEqual([s.sandwich, s.search, s.fn], [ref.name, ref.name, ref.name], 'reload keeps sandwich, search, details');

  // A step of the hottest path: its own block, found by its stack.
  await page.goto(url);
  await ready();
  const names = (await page.evaluate(() => window.flamecol.findings())).path;
  assert.ok(names.length >= 2, 'a hottest path');
  const i = Math.min(2, names.length - 1);
  await act(page.locator('#findings .path .finding').nth(i), 'focus');
  s = await st();
  assert.equal(s.focus.level, i + 1, 'the step\'s level');
  const drawn = await page.evaluate(() => window.flamecol.drawn());
  const fw = await flameWidth();
  for (let d = 1; d <= i + 1; d++) {
    const full = drawn.filter((b) => b.level === d && b.w >= fw - 1);
    assert.deepEqual(full.map((b) => b.name), [names[d - 1]], `level ${d} of the focused path`);
  }
  await page.reload();
  await ready();
  assert.deepEqual((await st()).focus, s.focus, 'reload keeps the path focus');

  // 1024 px: above the graph, nothing cut off.
  await page.setViewportSize({ width: 1024, height: 900 });
  await page.waitForTimeout(50);
  const nb = await page.locator('#findings').boundingBox();
  const ng = await page.locator('#flame').boundingBox();
  assert.ok(nb.y + nb.height <= ng.y, `findings above the graph at 1024: ${JSON.stringify({ nb, ng })}`);
  const bad = await page.$eval('#findings', (el) => {
    const r = el.getBoundingClientRect();
    const out = [];
    if (r.right > window.innerWidth) out.push('panel ends at ' + r.right);
    if (el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight) out.push('panel overflows');
    for (const b of el.querySelectorAll('.finding')) {
      const q = b.getBoundingClientRect();
      if (q.left < r.left || q.right > r.right + 0.5) out.push(b.textContent + ' outside');
      if (b.scrollWidth > b.clientWidth) out.push(b.textContent + ' cut');
    }
    return out;
  });
  assert.deepEqual(bad, [], 'nothing clipped at 1024');
  await page.screenshot({ path: path.join(artifacts, 'findings-1024.png') });
  await page.close();
}

module.exports = { findings };
