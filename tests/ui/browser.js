// The web UI in a real browser: Debian's chromium driven by playwright-core.
// Starts the real binary on free ports, pushes a corpus profile, opens the
// UI and checks by clicks and reads. Screenshots go to FC_UI_ARTIFACTS
// (default build/ui-artifacts).
//   FLAMECOL_BIN=build/flamecol FLAMECOL_CORPUS=tests/corpus node tests/ui/browser.js
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Flame = require('../../ui/flame.js');
const { startCollector } = require('./collector.js');

const BIN = process.env.FLAMECOL_BIN || 'build/flamecol';
const CORPUS = process.env.FLAMECOL_CORPUS || 'tests/corpus';
const ARTIFACTS = process.env.FC_UI_ARTIFACTS || 'build/ui-artifacts';
const CHROMIUM = process.env.FC_CHROMIUM || '/usr/bin/chromium';
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';

// The top flat function of a corpus profile, from its reference `pprof -top`.
function topFunction(name) {
  const text = fs.readFileSync(path.join(CORPUS, name + '.top.txt'), 'utf8');
  const row = text.split('\n').find((l) => /^\s*\d+(\.\d+)?\w*\s+[\d.]+%/.test(l));
  return row.trim().split(/\s+/).slice(5).join(' ');
}

async function main() {
  const { chromium } = require('playwright-core');
  const collector = await startCollector(BIN);
  const base = collector.base;
  let browser;
  try {
    const body = fs.readFileSync(path.join(CORPUS, 'go-1s-cpu.pb.gz'));
    const push = await fetch(`${base}/ingest?name=shop`, {
      method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' },
    });
    assert.equal(push.status, 200, await push.text());
    const until = Math.floor(Date.now() / 1000) + 60;
    const range = `range=custom&from=1&until=${until}`;
    // What the API says, to compare the page with.
    const api = await (await fetch(`${base}/pyroscope/render?query=${encodeURIComponent(CPU + '{service_name="shop"}')}&from=1&until=${until}`)).json();
    const table = Flame.table(Flame.decode(api.flamebearer));
    const top = topFunction('go-1s-cpu');
    assert.equal(table[0].name, top, 'the API and pprof -top agree on the top function');

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}`);
    await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
    await page.screenshot({ path: path.join(ARTIFACTS, 'explore.png') });

    // The table's first row is the top self function, with its value.
    const first = await page.$$eval('#top tbody tr:first-child td', (tds) => tds.map((td) => td.textContent));
    assert.equal(first[0], top);
    assert.equal(first[1], Flame.formatValue(table[0].self, api.metadata.units));

    // The flame graph draws the top function.
    let drawn = await page.evaluate(() => window.flamecol.drawn());
    assert.ok(drawn.some((b) => b.name === top), 'top function drawn');

    // Search: the matches are counted and shown as a pill.
    await page.fill('#search', top);
    await page.waitForFunction(() => /matches/.test(document.getElementById('search-stats').textContent));
    const stats = await page.textContent('#search-stats');
    const expected = Flame.searchStats(Flame.decode(api.flamebearer), Flame.matcher(top));
    assert.equal(stats, `${expected.count} matches, ${(100 * expected.share).toFixed(2)}% of total`);
    assert.match(await page.textContent('#pills'), /Search: /);
    await page.screenshot({ path: path.join(ARTIFACTS, 'search.png') });
    await page.click('#pills .pill button');

    // Focus: click a wide block, choose Focus: it spans the width, its siblings go.
    drawn = await page.evaluate(() => window.flamecol.drawn());
    const target = drawn.filter((b) => b.level === 4).sort((a, b) => b.w - a.w)[0];
    const width = await page.$eval('#flame', (c) => c.clientWidth);
    const box = await page.locator('#flame').boundingBox();
    await page.mouse.click(box.x + target.x + target.w / 2, box.y + target.y + target.h / 2);
    await page.click('#menu button[data-act="focus"]');
    drawn = await page.evaluate(() => window.flamecol.drawn());
    const focused = drawn.find((b) => b.level === 4);
    assert.equal(focused.name, target.name);
    assert.equal(focused.x, 0);
    assert.ok(Math.abs(focused.w - width) < 0.01, 'focused block spans the width');
    assert.equal(drawn.filter((b) => b.level === 4).length, 1, 'siblings are gone');
    assert.match(await page.textContent('#pills'), new RegExp('Focus: ' + target.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.ok(page.url().includes('focus='), 'focus is in the URL');
    await page.screenshot({ path: path.join(ARTIFACTS, 'focus.png') });

    // Icicle: the root moves to the top.
    await page.click('button[data-orient="icicle"]');
    drawn = await page.evaluate(() => window.flamecol.drawn());
    assert.equal(drawn.find((b) => b.level === 0).y, 0);
    await page.screenshot({ path: path.join(ARTIFACTS, 'icicle.png') });

    // Sandwich from the table: the function becomes the root of what is drawn.
    await page.click('#pills .pill button'); // drop the focus
    const row = page.locator('#top tbody tr', { hasText: 'runtime.mallocgc' }).first();
    await row.locator('button', { hasText: 'sandwich' }).click();
    drawn = await page.evaluate(() => window.flamecol.drawn());
    assert.deepEqual([...new Set(drawn.filter((b) => b.level === 1).map((b) => b.name))], ['runtime.mallocgc']);
    const mallocgc = table.find((r) => r.name === 'runtime.mallocgc');
    const root = drawn.find((b) => b.level === 0);
    assert.ok(root && Math.abs(root.w - width) < 0.01);
    assert.ok(mallocgc.total > 0);
    // Its callers are drawn above it, the function nearest.
    const callers = await page.evaluate(() => window.flamecol.callers());
    assert.deepEqual([...new Set(callers.filter((b) => b.level === 1).map((b) => b.name))], ['runtime.mallocgc']);
    assert.ok(callers.some((b) => b.level === 2), 'callers of runtime.mallocgc drawn');
    await page.screenshot({ path: path.join(ARTIFACTS, 'sandwich.png') });

    // Diff: b's share grew from half to three quarters, a's shrank.
    const t1 = Math.floor(Date.now() / 1000) - 7200;
    const t2 = t1 + 6600;
    for (const [when, text] of [[t1, 'main;a 10\nmain;b 10\n'], [t2, 'main;a 10\nmain;b 30\n']]) {
      const r = await fetch(`${base}/ingest?name=diffsvc.cpu&from=${when}&until=${when + 10}`, { method: 'POST', body: text });
      assert.equal(r.status, 200, await r.text());
    }
    const diffPage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    diffPage.on('pageerror', (e) => errors.push(String(e)));
    await diffPage.goto(`${base}/?service=diffsvc&type=${encodeURIComponent(CPU)}&diff=1&range=custom` +
      `&from=${t2 - 5}&until=${t2 + 20}&bfrom=${t1 - 5}&buntil=${t1 + 20}`);
    await diffPage.waitForFunction(() => window.flamecol && window.flamecol.draws > 0 && document.querySelector('#top tbody tr'));
    drawn = await diffPage.evaluate(() => window.flamecol.drawn());
    const kinds = Object.fromEntries(drawn.filter((b) => b.level === 2).map((b) => [b.name, b.kind]));
    assert.deepEqual(kinds, { a: 'shrank', b: 'grew' });
    const diffRow = await diffPage.$$eval('#top tbody tr:first-child td', (tds) => tds.map((td) => td.textContent));
    assert.deepEqual(diffRow, ['b', '100 ms', '300 ms', '+50.0%']);
    assert.deepEqual(await diffPage.$$eval('#top thead th', (ths) => ths.map((th) => th.textContent)),
      ['Symbol', 'Baseline', 'Comparison', 'Change']);
    const grown = drawn.find((b) => b.name === 'b');
    const dbox = await diffPage.locator('#flame').boundingBox();
    await diffPage.mouse.move(dbox.x + grown.x + grown.w / 2, dbox.y + grown.y + grown.h / 2);
    assert.match(await diffPage.textContent('#tooltip'), /Change: \+50\.0%/);
    assert.equal(await diffPage.isVisible('#legend'), true);
    await diffPage.screenshot({ path: path.join(ARTIFACTS, 'diff.png') });

    // A link reopens the same view.
    const url = page.url();
    const again = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await again.goto(url);
    await again.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
    assert.equal((await again.evaluate(() => window.flamecol.state())).sandwich, 'runtime.mallocgc');
    // Tooltip: name, values with units and share.
    const pick = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    pick.on('pageerror', (e) => errors.push(String(e)));
    await pick.goto(`${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}`);
    await pick.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
    drawn = await pick.evaluate(() => window.flamecol.drawn());
    const hot = drawn.find((b) => b.name === top);
    let pbox = await pick.locator('#flame').boundingBox();
    await pick.mouse.move(pbox.x + hot.x + hot.w / 2, pbox.y + hot.y + hot.h / 2);
    const tip = await pick.textContent('#tooltip');
    const pct = (v) => (100 * v / api.flamebearer.numTicks).toFixed(2);
    assert.equal(tip, `${top}Total: ${Flame.formatValue(hot.total, 'samples')} (${pct(hot.total)}%)` +
      `Self: ${Flame.formatValue(hot.self, 'samples')} (${pct(hot.self)}%)`);
    assert.ok(/ (ms|s|µs|ns) /.test(tip), 'values carry units');

    // Group by: one small timeline per worker, with its total.
    await pick.selectOption('#groupby', 'worker');
    await pick.waitForFunction(() => document.querySelectorAll('#groups .group').length > 1);
    const groups = await pick.$$eval('#groups .group', (g) => g.map((x) => x.textContent));
    assert.ok(groups.every((g) => /^worker=.+: .+/.test(g)), groups.join(' | '));
    await pick.screenshot({ path: path.join(ARTIFACTS, 'groups.png') });

    // Views: table only hides the graph, graph only hides the table.
    await pick.click('button[data-view="table"]');
    assert.equal(await pick.isVisible('#flame'), false);
    assert.equal(await pick.isVisible('#top'), true);
    await pick.click('button[data-view="graph"]');
    assert.equal(await pick.isVisible('#top'), false);
    await pick.click('button[data-view="both"]');

    // Downloads: the selection as gzipped pprof and as folded text.
    const pprofHref = await pick.$eval('#dl-pprof', (a) => a.href);
    const pprofBody = Buffer.from(await (await fetch(pprofHref)).arrayBuffer());
    assert.deepEqual([...pprofBody.subarray(0, 2)], [0x1f, 0x8b]);
    const foldedText = await (await fetch(await pick.$eval('#dl-folded', (a) => a.href))).text();
    assert.ok(foldedText.includes(top), 'folded download holds the top function');

    // Drag on the timeline: the range becomes that absolute sub-range.
    const tl = await pick.locator('#timeline').boundingBox();
    await pick.mouse.move(tl.x + tl.width * 0.2, tl.y + 10);
    await pick.mouse.down();
    await pick.mouse.move(tl.x + tl.width * 0.6, tl.y + 10);
    await pick.mouse.up();
    await pick.waitForFunction(() => window.flamecol.state().from !== '1');
    const dragged = await pick.evaluate(() => window.flamecol.state());
    assert.equal(dragged.range, 'custom');
    assert.ok(+dragged.from > 1 && +dragged.until > +dragged.from && +dragged.until <= until, JSON.stringify(dragged));

    // The label picker adds name="value" to the filter and the view narrows to it.
    await pick.goto(`${base}/?service=shop&type=${encodeURIComponent(CPU)}&${range}`);
    await pick.waitForFunction(() => window.flamecol && window.flamecol.draws > 0);
    await pick.selectOption('#lname', 'worker');
    await pick.waitForFunction(() => document.querySelectorAll('#lvalue option').length > 0);
    const worker = await pick.$eval('#lvalue', (s) => s.value);
    await pick.click('#ladd');
    const narrowed = await (await fetch(`${base}/pyroscope/render?query=${encodeURIComponent(CPU + `{service_name="shop",worker="${worker}"}`)}&from=1&until=${until}`)).json();
    const want = Flame.formatValue(narrowed.flamebearer.numTicks, narrowed.metadata.units) + ' total';
    assert.ok(narrowed.flamebearer.numTicks < api.flamebearer.numTicks);
    await pick.waitForFunction((w) => document.getElementById('status').textContent.startsWith(w), want);
    assert.equal((await pick.evaluate(() => window.flamecol.state())).filter, `worker="${worker}"`);

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
