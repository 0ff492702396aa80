// The real flamecol binary on free loopback ports, for the browser test and
// bench/ui_draw.js: the store pipeline of tests/integration/store_pipeline.yaml,
// a pprof receiver and the store's query API (and UI) on one port.
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function sourceRoots(roots) {
  if (!roots) return '';
  return '      ui:\n        source_roots:\n' +
    Object.entries(roots).map(([k, v]) => `          ${JSON.stringify(k)}: ${JSON.stringify(v)}\n`).join('');
}

// Starts bin and waits for /ready. Returns {base, log(), stop()}. opts.sourceRoots:
// the store's query.ui.source_roots ({prefix: local directory}).
async function startCollector(bin, opts) {
  const port = await freePort();
  const metrics = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'flamecol-ui-'));
  const template = fs.readFileSync(path.join(__dirname, '..', 'integration', 'store_pipeline.yaml'), 'utf8');
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(config, template.replace(/\{port\}/g, port).replace(/\{metrics\}/g, metrics)
    .replace(/\{dir\}/g, dir).replace('{sync}', 'batch').replace('{retention}', '0')
    .replace('      max_query_length: 0\n', '      max_query_length: 0\n' + sourceRoots(opts && opts.sourceRoots)));
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
      if ((await fetch(`http://127.0.0.1:${metrics}/ready`)).ok) {
        return { base: `http://127.0.0.1:${port}`, log: () => out, stop };
      }
    } catch (e) { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50)); // polling for readiness, not a fixed wait
  }
  stop();
  throw new Error('flamecol did not become ready: ' + out);
}

module.exports = { startCollector };
