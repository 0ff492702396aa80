// The web UI with a large flame graph: time to first draw and to redraw after
// a focus, for a ~20,000-node profile beside a ~200-node one measured in the
// same run (ratios, not bare times: the machines are shared and noisy).
// Figures, not assertions.
//   node bench/ui_draw.js [build/flamecol]
// Needs Debian's chromium and tests/ui/node_modules (scripts/setup installs both).
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require(path.join(__dirname, '..', 'tests', 'ui', 'node_modules', 'playwright-core'));

const BIN = process.argv[2] || 'build/flamecol';
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const RUNS = 5;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

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

async function main() {
  const port = await freePort();
  const metrics = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flamecol-uibench-'));
  const template = fs.readFileSync(path.join(__dirname, '..', 'tests', 'integration', 'store_pipeline.yaml'), 'utf8');
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(config, template.replace(/\{port\}/g, port).replace(/\{metrics\}/g, metrics)
    .replace(/\{dir\}/g, dir).replace('{sync}', 'batch').replace('{retention}', '0'));
  const child = spawn(BIN, ['--config', config], { stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  let browser;
  try {
    for (let i = 0; i < 200; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${metrics}/ready`)).ok) break;
      } catch (e) { /* not yet */ }
      await new Promise((r) => setTimeout(r, 50));
    }
    const now = Math.floor(Date.now() / 1000);
    // ~20,000 nodes: 1 + 10 + 100 + 1,000 + 20,000 (plus main and total)
    for (const [name, fanout] of [['big', [10, 10, 10, 20]], ['small', [4, 5, 9]]]) {
      const r = await fetch(`${base}/ingest?name=${name}.cpu&from=${now - 60}&until=${now - 50}`, { method: 'POST', body: folded(fanout) });
      if (r.status !== 200) throw new Error(await r.text());
    }
    browser = await chromium.launch({ executablePath: process.env.FC_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
    const url = (svc) => `${base}/?service=${svc}&type=${encodeURIComponent(CPU)}&range=now-15m&maxNodes=65536&view=graph`;
    const small = await measure(browser, url('small'));
    const big = await measure(browser, url('big'));
    const row = (name, m) => `${name.padEnd(6)} ${String(m.nodes).padStart(6)} nodes, ${String(m.blocks).padStart(5)} blocks drawn (narrow ones merged) | first draw ${m.first.toFixed(0)} ms after navigation | draw ${m.draw.toFixed(1)} ms | redraw after focus ${m.focus.toFixed(1)} ms`;
    console.log(`web UI, chromium headless, 1600 px wide, median of ${RUNS} page loads`);
    console.log(row('small', small));
    console.log(row('big', big));
    console.log(`big / small: first draw ${(big.first / small.first).toFixed(1)}x, draw ${(big.draw / small.draw).toFixed(1)}x, redraw after focus ${(big.focus / small.focus).toFixed(1)}x`);
  } finally {
    if (browser) await browser.close();
    child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
