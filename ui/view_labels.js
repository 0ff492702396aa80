/*
 * Labels (page=labels): for the service and profile type picked, every label
 * with each value's total, maximum (largest timeline point) and a small
 * timeline; sorted by total or by maximum (lsort=max); a value is a link to
 * the flame graph filtered to it; "compare" on one value then "vs A" on
 * another opens the compare page with A as baseline (lpick keeps A). Data: Connect LabelNames, and one
 * /pyroscope/render per label grouped by it (groupBy: a timeline per value).
 * app.js hands it ctx: {state, connect, range(), secs(v), drawSeries, href(changes)}.
 */
(function (root) {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const quote = (v) => '"' + String(v).replace(/["\\]/g, '\\$&') + '"';

  function selector(state) {
    const sel = ['service_name=' + quote(state.service)];
    if (state.filter && state.filter.trim()) sel.push(state.filter.trim());
    return '{' + sel.join(',') + '}';
  }
  /* One label's values: [{value, total, max, samples}] from a render grouped by it. */
  async function valuesOf(ctx, name, range) {
    const p = new URLSearchParams({ query: ctx.state.type + selector(ctx.state), format: 'json', maxNodes: '1',
      groupBy: name, from: range.from, until: range.until });
    const r = await fetch('pyroscope/render?' + p.toString());
    if (!r.ok) throw new Error('render: ' + (await r.text()));
    const doc = await r.json();
    const out = [];
    for (const [value, g] of Object.entries(doc.groups || {})) {
      if (value === '*') continue; /* the series without this label */
      const samples = g.samples || [];
      out.push({ value, samples, total: samples.reduce((a, b) => a + b, 0), max: Math.max(0, ...samples) });
    }
    return { values: out, units: doc.metadata && doc.metadata.units };
  }

  function sortLink(ctx, key, label) {
    const a = document.createElement('a');
    a.href = ctx.href({ lsort: key === 'total' ? '' : key });
    a.textContent = label;
    a.className = 'sort-' + key;
    const on = (ctx.state.lsort || 'total') === key;
    if (on) a.setAttribute('aria-sort', 'descending');
    return a;
  }

  /* Resolves with [{label, values: [{value, total, max}]}] in the order drawn. */
  async function show(ctx) {
    const box = $('page');
    box.innerHTML = '';
    const state = ctx.state;
    const range = ctx.range();
    if (!state.service || !state.type) {
      box.appendChild(Object.assign(document.createElement('p'), { textContent: 'No profiles in this store yet.' }));
      return [];
    }
    const h = document.createElement('h3');
    h.textContent = state.service + ' · ' + root.Flame.typeName(state.type) + ': labels';
    h.title = state.type;
    box.appendChild(h);
    const names = ((await ctx.connect('LabelNames', {
      matchers: [selector(state)], start: ctx.secs(range.from) * 1000, end: ctx.secs(range.until) * 1000,
    })).names || []).filter((n) => !n.startsWith('__') && n !== 'service_name').sort();
    if (!names.length) {
      box.appendChild(Object.assign(document.createElement('p'), { textContent: 'No labels besides the service in this range.' }));
      return [];
    }
    const key = state.lsort === 'max' ? 'max' : 'total';
    const answers = await Promise.all(names.map((n) => valuesOf(ctx, n, range)));
    const out = [];
    const grid = document.createElement('div');
    grid.className = 'labels';
    box.appendChild(grid);
    names.forEach((name, i) => {
      const { values, units } = answers[i];
      values.sort((a, b) => b[key] - a[key] || (a.value < b.value ? -1 : 1));
      const fmt = (v) => root.Flame.formatValue(v, units || '');
      const sec = document.createElement('section');
      sec.className = 'label';
      const t = document.createElement('table');
      const head = t.insertRow();
      const th = (content, cls) => {
        const c = document.createElement('th');
        if (cls) c.className = cls;
        c.append(content);
        head.appendChild(c);
      };
      th(name + ' (' + values.length + ')');
      th(sortLink(ctx, 'total', 'Total'), 'num');
      th(sortLink(ctx, 'max', 'Max'), 'num');
      th('Over time');
      th('');
      for (const v of values) {
        const tr = t.insertRow();
        const a = document.createElement('a');
        const m = name + '=' + quote(v.value);
        const withM = (x) => (state.filter && state.filter.trim() ? state.filter.trim() + ',' + x : x);
        a.href = ctx.href({ page: '', filter: withM(m) });
        a.textContent = v.value;
        a.title = 'flame graph of ' + m;
        tr.insertCell().appendChild(a);
        tr.cells[0].className = 'name';
        Object.assign(tr.insertCell(), { className: 'num', textContent: fmt(v.total) });
        Object.assign(tr.insertCell(), { className: 'num', textContent: fmt(v.max) });
        const c = document.createElement('canvas');
        c.height = 22;
        tr.insertCell().appendChild(c);
        ctx.drawSeries(c, v.samples, '#5a7bd0', null);
        /* two values to compare: the first picked (lpick) is the baseline */
        const pick = document.createElement('a');
        pick.className = 'pick';
        const picked = state.lpick && state.lpick.startsWith(name + '=') ? state.lpick.slice(name.length + 1) : null;
        if (picked === v.value) {
          pick.textContent = 'A ×';
          pick.title = 'picked as the baseline (click: unpick)';
          pick.href = ctx.href({ lpick: '' });
        } else if (picked !== null) {
          pick.textContent = 'vs A';
          pick.title = 'compare ' + name + '=' + picked + ' (A, baseline) with ' + m;
          pick.href = ctx.href({ page: 'compare', diff: '1', lpick: '', filter: withM(m),
            bfilter: withM(name + '=' + quote(picked)), bfrom: range.from, buntil: range.until });
        } else {
          pick.textContent = 'compare';
          pick.title = 'pick as the baseline of a comparison';
          pick.href = ctx.href({ lpick: name + '=' + v.value });
        }
        tr.insertCell().appendChild(pick);
      }
      sec.appendChild(t);
      grid.appendChild(sec);
      out.push({ label: name, values: values.map((v) => ({ value: v.value, total: v.total, max: v.max })) });
    });
    return out;
  }

  root.LabelsView = { show };
})(this);
