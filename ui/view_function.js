/*
 * Function details: one function's self and total per source line, its
 * callers and its callees, from GET /api/v1/function over the current
 * selection. Opened from a flame block's menu ("Details") or a table row;
 * kept in the URL as fn=<name>. app.js hands it ctx: {url(name), units(),
 * pick(name), close()}.
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
    return doc;
  }
  function hide() {
    const panel = $('fn-panel');
    panel.hidden = true;
    panel.innerHTML = '';
  }

  root.FunctionView = { show, hide };
})(this);
