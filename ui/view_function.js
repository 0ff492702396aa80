/*
 * Function details: one function's self and total per source line, its
 * callers and its callees, from GET /api/v1/function over the current
 * selection. Opened from a flame block's menu ("Details") or a table row;
 * kept in the URL as fn=<name>. app.js hands it ctx: {url(name), units(),
 * pick(name), close()}. Where the store maps a line's file to a local one
 * (query.ui.source_roots), GET /api/v1/source gives its text: shown with
 * each line's self and total beside it.
 */
(function (root) {
  'use strict';
  const $ = (id) => document.getElementById(id);

  function cell(tr, text, cls) {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }
  /* A table of rows [label, value...] under a heading; label cells may be links to another function. */
  function block(title, cols, rows, link) {
    const box = document.createElement('div');
    box.className = 'fn-block';
    const h = document.createElement('h4');
    h.textContent = title;
    box.appendChild(h);
    const t = document.createElement('table');
    const head = document.createElement('tr');
    cols.forEach((c, i) => {
      const th = document.createElement('th');
      th.textContent = c;
      if (i) th.className = 'num';
      head.appendChild(th);
    });
    t.appendChild(head);
    for (const r of rows) {
      const tr = document.createElement('tr');
      const name = cell(tr, '', 'name');
      if (link) {
        const b = document.createElement('button');
        b.textContent = r[0];
        b.title = 'details of ' + r[0];
        b.onclick = () => link(r[0]);
        name.appendChild(b);
      } else {
        name.textContent = r[0];
        name.title = r[0];
      }
      for (const v of r.slice(1)) cell(tr, v, 'num');
      t.appendChild(tr);
    }
    if (!rows.length) cell(t.insertRow(), 'none', 'none');
    box.appendChild(t);
    return box;
  }

  /* Lines shown around a function's costed lines, and at most this many in all. */
  const CONTEXT = 3;
  const MAX_ROWS = 1000;
  /*
   * A file's text with the costs of its lines (Map line -> {self, total}):
   * from CONTEXT lines before the first costed line to CONTEXT after the
   * last. Returns {file, rows: [[number, self, total, code]]} (costs as
   * numbers, '' for a line without) and the block.
   */
  function sourceBlock(file, text, costs, fmt) {
    const lines = text.split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    const numbers = [...costs.keys()];
    const lo = Math.max(1, Math.min(...numbers) - CONTEXT);
    const hi = Math.min(lines.length, Math.max(...numbers) + CONTEXT, lo + MAX_ROWS - 1);
    const rows = [];
    for (let n = lo; n <= hi; n++) {
      const c = costs.get(n);
      rows.push([n, c ? c.self : '', c ? c.total : '', lines[n - 1]]);
    }
    const box = document.createElement('div');
    box.className = 'fn-block fn-source';
    const h = document.createElement('h4');
    h.textContent = 'Source: ' + file;
    h.title = file;
    box.appendChild(h);
    const t = document.createElement('table');
    const head = t.insertRow();
    ['Line', 'Self', 'Total', ''].forEach((c, i) => {
      const th = document.createElement('th');
      th.textContent = c;
      if (i < 3) th.className = 'num';
      head.appendChild(th);
    });
    for (const [n, self, total, code] of rows) {
      const tr = t.insertRow();
      if (self !== '') tr.className = 'hot';
      cell(tr, String(n), 'num');
      cell(tr, self === '' ? '' : fmt(self), 'num');
      cell(tr, total === '' ? '' : fmt(total), 'num');
      cell(tr, code, 'code');
    }
    if (numbers.some((n) => n > lines.length)) {
      const p = document.createElement('div');
      p.className = 'error';
      p.textContent = 'the file has ' + lines.length + ' lines: not the profiled version?';
      box.appendChild(p);
    }
    box.appendChild(t);
    return { file, rows, box };
  }
  /* The store's source prefixes (GET /api/v1/source-roots), asked once. */
  let roots = null;
  /* Whether a prefix maps file, as the store decides (at a '/' boundary). */
  const mapped = (prefixes, file) => prefixes.some((p) => p && file.startsWith(p) &&
    (p.endsWith('/') || file.length === p.length || file[p.length] === '/'));
  /* The source of each file of the answer's lines that the store maps (at most 4 files). */
  async function sources(doc, fmt) {
    if (!roots) {
      roots = fetch('api/v1/source-roots').then((r) => (r.ok ? r.json() : {})).then((j) => j.prefixes || [], () => []);
    }
    const prefixes = await roots;
    const byFile = new Map();
    for (const l of doc.lines || []) {
      if (!l.file || !l.line || !mapped(prefixes, l.file)) continue;
      if (!byFile.has(l.file)) byFile.set(l.file, new Map());
      byFile.get(l.file).set(l.line, { self: l.self, total: l.total });
    }
    const files = [...byFile.keys()].slice(0, 4);
    const answers = await Promise.all(files.map(async (f) => {
      const r = await fetch('api/v1/source?file=' + encodeURIComponent(f)).catch(() => null);
      if (!r) return null;
      const text = await r.text();
      if (!r.ok) return { file: f, error: text || r.statusText };
      return sourceBlock(f, text, byFile.get(f), fmt);
    }));
    return answers.filter(Boolean);
  }

  /* Fetches and draws the panel for name; resolves with the answer (or null). */
  async function show(ctx, name) {
    const panel = $('fn-panel');
    panel.hidden = false;
    panel.innerHTML = '';
    const head = document.createElement('div');
    head.className = 'fn-head';
    const title = document.createElement('b');
    title.textContent = name;
    title.title = name;
    const close = document.createElement('button');
    close.textContent = '×';
    close.title = 'close (Esc)';
    close.className = 'fn-close';
    close.onclick = () => ctx.close();
    head.append('Function ', title, close);
    panel.appendChild(head);
    const r = await fetch(ctx.url(name));
    const doc = await r.json().catch(() => ({}));
    if (!r.ok) {
      const p = document.createElement('div');
      p.className = 'error';
      p.textContent = r.status === 404 ? 'not in this selection' : doc.message || r.statusText;
      panel.appendChild(p);
      return null;
    }
    const units = doc.unit || ctx.units();
    const fmt = (v) => root.Flame.formatValue(v, units);
    const pct = (v) => (doc.selection_total ? ((100 * v) / doc.selection_total).toFixed(2) : '0') + '%';
    const sum = document.createElement('div');
    sum.className = 'fn-sum';
    sum.textContent = 'Self ' + fmt(doc.self) + ' (' + pct(doc.self) + ') · Total ' + fmt(doc.total) + ' (' + pct(doc.total) + ')';
    panel.appendChild(sum);
    const grid = document.createElement('div');
    grid.className = 'fn-grid';
    const lines = (doc.lines || []).map((l) => [l.file ? l.file + ':' + l.line : '(no line information)', fmt(l.self), fmt(l.total)]);
    grid.appendChild(block('Source lines', ['Line', 'Self', 'Total'], lines));
    const edge = (list) => (list || []).map((e) => [e.name, fmt(e.total), pct(e.total)]);
    grid.appendChild(block('Callers', ['Caller', 'Total', '%'], edge(doc.callers), ctx.pick));
    grid.appendChild(block('Callees', ['Callee', 'Total', '%'], edge(doc.callees), ctx.pick));
    panel.appendChild(grid);
    doc.sources = [];
    for (const s of await sources(doc, fmt)) {
      if (s.error) {
        const p = document.createElement('div');
        p.className = 'error';
        p.textContent = 'Source of ' + s.file + ': ' + s.error;
        panel.appendChild(p);
      } else {
        panel.appendChild(s.box);
      }
      doc.sources.push({ file: s.file, rows: s.rows, error: s.error });
    }
    return doc;
  }
  function hide() {
    const panel = $('fn-panel');
    panel.hidden = true;
    panel.innerHTML = '';
  }

  root.FunctionView = { show, hide };
})(this);
