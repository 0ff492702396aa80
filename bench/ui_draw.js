// The web UI with a large flame graph: time to first draw and to redraw after
// a focus, for a ~20,000-node profile beside a ~200-node one measured in the
// same run (ratios, not bare times: the machines are shared and noisy); and
// the overview page with 50 services (every tile's timeline drawn) beside the
// same 200-node baseline.
// Figures, not assertions.
//   node bench/ui_draw.js [build/flamecol]
// Needs Debian's chromium and tests/ui/node_modules (scripts/setup installs both).
'use strict';
const path = require('node:path');
const { startCollector } = require(path.join(__dirname, '..', 'tests', 'ui', 'collector.js'));
const { chromium } = require(path.join(__dirname, '..', 'tests', 'ui', 'node_modules', 'playwright-core'));

const BIN = process.argv[2] || 'build/flamecol';
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const RUNS = 5;

// Folded stacks for a tree with the given fan-out per level: prod(fanout) leaves.
function folded(fanout) {
  const lines = [];
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 100 + 1;
  const walk = (prefix, depth) => {
    if (depth === fanout.length) {
      lines.push(prefix.join(';') + ' ' + rnd());
      return;
    }
    for (let i = 0; i < fanout[depth]; i++) walk(prefix.concat([`pkg${depth}.fn${i}`]), depth + 1);
  };
  walk(['main'], 0);
  return lines.join('\n') + '\n';
}

const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];

async function measure(browser, url) {
  const first = [];
  const draw = [];
  const focus = [];
  let blocks = 0;
  let nodes = 0;
  for (let i = 0; i < RUNS; i++) {
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    await page.goto(url);
    await page.waitForFunction(() => window.flamecol && window.flamecol.draws > 0, null, { timeout: 60000 });
    const m = await page.evaluate(() => ({ first: window.flamecol.firstDrawAt, draw: window.flamecol.lastDrawMs, nodes: window.flamecol.nodes() }));
    nodes = m.nodes;
    first.push(m.first);
    draw.push(m.draw);
    const drawn = await page.evaluate(() => window.flamecol.drawn());
    blocks = drawn.length;
    const target = drawn.filter((b) => b.level === 2).sort((a, b) => b.w - a.w)[0];
    const box = await page.locator('#flame').boundingBox();
    const before = await page.evaluate(() => window.flamecol.draws);
    await page.mouse.click(box.x + target.x + target.w / 2, box.y + target.y + target.h / 2);
    await page.click('#menu button[data-act="focus"]');
    await page.waitForFunction((n) => window.flamecol.draws > n, before);
    focus.push(await page.evaluate(() => window.flamecol.lastDrawMs));
    await page.close();
  }
  return { first: median(first), draw: median(draw), focus: median(focus), blocks, nodes };
}

// The overview (page=overview): from navigation to every tile drawn (its
// LabelValues and one-node render answered and its timeline painted).
async function overview(browser, url) {
  const first = [];
  let tiles = 0;
  for (let i = 0; i < RUNS; i++) {
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    await page.goto(url);
    await page.waitForFunction(() => window.flamecol && window.flamecol.pageDrawnAt > 0 && window.flamecol.tiles(), null, { timeout: 60000 });
    const m = await page.evaluate(() => ({ first: window.flamecol.pageDrawnAt, tiles: window.flamecol.tiles().length }));
    first.push(m.first);
    tiles = m.tiles;
    await page.close();
  }
  return { first: median(first), tiles };
}

async function main() {
  const collector = await startCollector(BIN);
  const base = collector.base;
  let browser;
  try {
    const now = Math.floor(Date.now() / 1000);
    // ~20,000 nodes: 1 + 10 + 100 + 1,000 + 20,000 (plus main and total)
    for (const [name, fanout] of [['big', [10, 10, 10, 20]], ['small', [4, 5, 9]]]) {
      const r = await fetch(`${base}/ingest?name=${name}.cpu&from=${now - 60}&until=${now - 50}`, { method: 'POST', body: folded(fanout) });
      if (r.status !== 200) throw new Error(await r.text());
    }
    // 48 more services (a small tree each): 50 services on the overview
    const services = 50;
    for (let i = 0; i < services - 2; i++) {
      const name = `svc${String(i).padStart(2, '0')}.cpu{worker=w${i % 4}}`;
      const r = await fetch(`${base}/ingest?name=${encodeURIComponent(name)}&from=${now - 60 - i}&until=${now - 50 - i}`,
        { method: 'POST', body: folded([3, 4]) });
      if (r.status !== 200) throw new Error(await r.text());
    }
    browser = await chromium.launch({ executablePath: process.env.FC_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
    const url = (svc) => `${base}/?service=${svc}&type=${encodeURIComponent(CPU)}&range=now-15m&maxNodes=65536&view=graph`;
    const small = await measure(browser, url('small'));
    const big = await measure(browser, url('big'));
    const ov = await overview(browser, `${base}/?page=overview&range=now-15m`);
    if (ov.tiles !== services) throw new Error(`the overview drew ${ov.tiles} tiles, not ${services}`);
    const row = (name, m) => `${name.padEnd(6)} ${String(m.nodes).padStart(6)} nodes, ${String(m.blocks).padStart(5)} blocks drawn (narrow ones merged) | first draw ${m.first.toFixed(0)} ms after navigation | draw ${m.draw.toFixed(1)} ms | redraw after focus ${m.focus.toFixed(1)} ms`;
    console.log(`web UI, chromium headless, 1600 px wide, median of ${RUNS} page loads`);
    console.log(row('small', small));
    console.log(row('big', big));
    console.log(`big / small: first draw ${(big.first / small.first).toFixed(1)}x, draw ${(big.draw / small.draw).toFixed(1)}x, redraw after focus ${(big.focus / small.focus).toFixed(1)}x`);
    console.log(`overview ${ov.tiles} services | every tile drawn ${ov.first.toFixed(0)} ms after navigation | overview / small first draw ${(ov.first / small.first).toFixed(1)}x`);
  } finally {
    if (browser) await browser.close();
    collector.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
