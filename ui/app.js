/*
 * The explore view: pickers kept in the URL, a timeline with drag-to-zoom and
 * per-label groups, a canvas flame graph (flame or icicle) with tooltip,
 * focus, sandwich and search, a sortable top table, findings and downloads.
 * It talks to the store's own API only: Connect ProfileTypes / LabelNames /
 * LabelValues, /pyroscope/render (flame graph + timeline + groups) and
 * /api/v1/findings. Layout and numbers come from flame.js.
 */
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const ROW = 18;
  const state = {
    service: '', type: '', filter: '', range: 'now-1h', from: '', until: '',
    groupBy: '', view: 'both', orient: 'flame', colour: 'package', align: 'left',
    search: '', focus: null, sandwich: '', sort: 'self',
    diff: '', bfilter: '', bfrom: '', buntil: '', /* diff: the baseline beside the selection */
    maxNodes: '', /* empty: the server's query.max_nodes */
  };
  let data = null; /* {fb, levels, units, table} of the current answer */
  let rects = []; /* what the main canvas shows, for hit tests */
  let callerRects = []; /* the sandwich's callers canvas */

  /* ---- URL state ---- */
  function readUrl() {
    const p = new URLSearchParams(location.search);
    for (const k of Object.keys(state)) {
      if (p.has(k) && k !== 'focus') state[k] = p.get(k);
    }
    if (p.has('focus')) {
      const [level, index] = p.get('focus').split(':').map(Number);
      state.focus = { level, index };
    }
  }
  function writeUrl() {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(state)) {
      if (k === 'focus') {
        if (v) p.set('focus', v.level + ':' + v.index);
      } else if (v) {
        p.set(k, v);
      }
    }
    history.replaceState(null, '', '?' + p.toString());
  }

  async function connect(method, body) {
    const r = await fetch('querier.v1.QuerierService/' + method, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(method + ': ' + (await r.text()));
    return r.json();
  }

  function query(filter) {
    const sel = ['service_name="' + state.service.replace(/["\\]/g, '\\$&') + '"'];
    const f = (filter === undefined ? state.filter : filter).trim();
    if (f) sel.push(f);
    return state.type + '{' + sel.join(',') + '}';
  }
  function diffUrl() {
    const r = rangeParams();
    const p = new URLSearchParams({
      leftQuery: query(state.bfilter || state.filter), leftFrom: state.bfrom || r.from, leftUntil: state.buntil || r.until,
      rightQuery: query(), rightFrom: r.from, rightUntil: r.until,
    });
    return 'pyroscope/render-diff?' + p.toString();
  }
  function rangeParams() {
    if (state.range === 'custom' && state.from && state.until) {
      return { from: state.from, until: state.until };
    }
    return { from: state.range === 'custom' ? 'now-1h' : state.range, until: 'now' };
  }
  function renderUrl(format) {
    const p = new URLSearchParams(Object.assign({ query: query(), format }, rangeParams()));
    if (state.groupBy) p.set('groupBy', state.groupBy);
    if (state.maxNodes) p.set('maxNodes', state.maxNodes);
    return 'pyroscope/render?' + p.toString();
  }

  /* ---- pickers ---- */
  function fill(select, values, current) {
    select.innerHTML = '';
    for (const v of values) {
      const o = document.createElement('option');
      o.value = o.textContent = v;
      select.appendChild(o);
    }
    if (current && values.includes(current)) select.value = current;
  }
  async function loadPickers() {
    const services = (await connect('LabelValues', { name: 'service_name' })).names || [];
    if (!state.service || !services.includes(state.service)) state.service = services[0] || '';
    fill($('service'), services, state.service);
    const types = ((await connect('ProfileTypes', {})).profileTypes || []).map((t) => t.ID);
    const forService = state.service
      ? (await connect('LabelValues', { name: '__profile_type__', matchers: ['{service_name="' + state.service + '"}'] })).names || types
      : types;
    if (!state.type || !forService.includes(state.type)) {
      state.type = forService.find((t) => t.startsWith('process_cpu:cpu')) || forService[0] || '';
    }
    fill($('type'), forService, state.type);
    const names = ((await connect('LabelNames', { matchers: ['{service_name="' + state.service + '"}'] })).names || [])
      .filter((n) => !n.startsWith('__') && n !== 'service_name');
    fill($('groupby'), [''].concat(names), state.groupBy);
    $('groupby').options[0].textContent = 'none';
    fill($('lname'), [''].concat(names), '');
    $('lname').options[0].textContent = 'label…';
    fill($('lvalue'), [], '');
  }

  /* ---- loading ---- */
  async function load() {
    writeUrl();
    $('status').textContent = 'loading…';
    $('status').className = '';
    if (!state.service || !state.type) {
      $('status').textContent = 'No data yet: push profiles to this collector.';
      return;
    }
    try {
      const r = await fetch(state.diff ? diffUrl() : renderUrl('json'));
      const doc = await r.json();
      if (!r.ok) throw new Error(doc.message || r.statusText);
      if (state.diff) {
        const diff = Flame.decodeDiff(doc.flamebearer);
        data = { doc, levels: diff.levels, units: doc.metadata.units, diff,
          diffTable: Flame.diffTable(diff, doc.leftTicks, doc.rightTicks) };
        state.sandwich = '';
      } else {
        const levels = Flame.decode(doc.flamebearer);
        data = { doc, levels, units: doc.metadata.units, table: Flame.table(levels) };
      }
      if (state.focus && !(data.levels[state.focus.level] && data.levels[state.focus.level][state.focus.index])) {
        state.focus = null;
      }
      $('dl-pprof').href = renderUrl('pprof');
      $('dl-folded').href = renderUrl('folded');
      drawTimeline();
      drawGroups();
      drawAll();
      if (!state.diff) loadFindings();
      $('status').textContent = Flame.formatValue(doc.flamebearer.numTicks, data.units) + ' total, ' +
        (r.headers.get('X-Flamecol-Nodes-Merged') || '?') + ' windows merged';
    } catch (e) {
      $('status').textContent = String(e.message || e);
      $('status').className = 'error';
    }
  }

  async function loadFindings() {
    const p = new URLSearchParams(Object.assign({ query: query() }, rangeParams()));
    const r = await fetch('api/v1/findings?' + p.toString());
    if (!r.ok) return;
    const f = await r.json();
    const el = $('findings');
    el.innerHTML = '<h3>Findings</h3>';
    const top = document.createElement('ol');
    for (const t of (f.top || []).slice(0, 5)) {
      const li = document.createElement('li');
      li.textContent = t.name + ' — ' + (100 * t.self_share).toFixed(1) + '% self';
      top.appendChild(li);
    }
    el.appendChild(top);
    const path = document.createElement('p');
    path.textContent = 'Hottest path: ' + (f.hottest_path || []).map((n) => n.name).join(' → ');
    el.appendChild(path);
  }

  /* ---- timeline (drag to select a sub-range) ---- */
  function drawSeries(canvas, samples, colour) {
    const ctx = canvas.getContext('2d');
    const w = (canvas.width = canvas.clientWidth || 300);
    const h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    const max = Math.max(1, ...samples);
    ctx.fillStyle = colour;
    const bw = w / Math.max(1, samples.length);
    samples.forEach((v, i) => {
      const bh = (v / max) * (h - 2);
      ctx.fillRect(i * bw, h - bh, Math.max(1, bw - 0.5), bh);
    });
  }
  function drawTimeline() {
    const t = data && data.doc.timeline;
    drawSeries($('timeline'), t ? t.samples : [], '#d0643c');
  }
  function drawGroups() {
    const box = $('groups');
    box.innerHTML = '';
    const groups = data && data.doc.groups;
    if (!groups) return;
    const entries = Object.entries(groups).map(([k, g]) => [k, g, g.samples.reduce((a, b) => a + b, 0)]);
    entries.sort((a, b) => b[2] - a[2]);
    for (const [k, g, total] of entries) {
      const div = document.createElement('div');
      div.className = 'group';
      div.title = 'filter to ' + state.groupBy + '=' + k;
      const c = document.createElement('canvas');
      c.width = 160;
      c.height = 30;
      div.textContent = state.groupBy + '=' + k + ': ' + Flame.formatValue(total, data.units);
      div.appendChild(c);
      box.appendChild(div);
      drawSeries(c, g.samples, '#5a7bd0');
      if (k !== '*') {
        div.style.cursor = 'pointer';
        div.onclick = () => { state.filter = state.groupBy + '="' + k + '"'; $('filter').value = state.filter; load(); };
      }
    }
  }
  function timelineDrag() {
    const c = $('timeline');
    let start = null;
    c.addEventListener('mousedown', (e) => { start = e.offsetX; });
    c.addEventListener('mouseup', (e) => {
      const t = data && data.doc.timeline;
      if (start === null || !t) return;
      const a = Math.min(start, e.offsetX), b = Math.max(start, e.offsetX);
      start = null;
      if (b - a < 3) return;
      const secs = t.samples.length * t.durationDelta;
      const x2t = (x) => Math.round(t.startTime + (x / c.clientWidth) * secs);
      state.range = 'custom';
      state.from = String(x2t(a));
      state.until = String(x2t(b));
      syncControls();
      load();
    });
  }

  /* ---- flame graph ---- */
  /* Diff colours: red where a function's share grew, green where it shrank, deeper with the change. */
  function diffColour(kind, change) {
    if (kind === 'same') return '#dcdcdc';
    const depth = Math.min(1, Math.abs(change));
    return kind === 'grew' ? 'hsl(0, 75%, ' + (82 - 30 * depth) + '%)' : 'hsl(120, 55%, ' + (80 - 28 * depth) + '%)';
  }
  function colourOf(block, ctxInfo) {
    if (ctxInfo.match && !ctxInfo.match(block.name)) return '#d8d8d8';
    if (data.diff) {
      const c = Flame.diffChange(block.left, block.right, data.doc.leftTicks, data.doc.rightTicks);
      return diffColour(c.kind, c.change);
    }
    if (state.colour === 'value') {
      const share = ctxInfo.total ? block.self / ctxInfo.total : 0;
      const l = 85 - Math.min(45, share * 300);
      return 'hsl(10, 75%, ' + l + '%)';
    }
    return 'hsl(' + Flame.hue(Flame.packageOf(block.name)) + ', 60%, 68%)';
  }
  /* Draws levels into canvas (root at the bottom for 'flame', at the top for 'icicle'). */
  function drawInto(canvas, levels, orient, focus) {
    const width = canvas.clientWidth || 800;
    const ratio = window.devicePixelRatio || 1;
    const out = Flame.layout(levels, width, { focus: focus, minPx: 1 });
    const depth = levels.length;
    canvas.style.height = depth * ROW + 'px';
    canvas.width = width * ratio;
    canvas.height = depth * ROW * ratio;
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.font = '11px ui-monospace, monospace';
    ctx.textBaseline = 'middle';
    const info = { match: Flame.matcher(state.search), total: data.doc.flamebearer.numTicks };
    for (const r of out) {
      r.y = orient === 'icicle' ? r.level * ROW : (depth - 1 - r.level) * ROW;
      ctx.fillStyle = r.block ? (r.ancestor ? '#eee' : colourOf(r.block, info)) : '#c8c8c8';
      ctx.fillRect(r.x, r.y, Math.max(r.w - 0.5, 0.5), ROW - 1);
      if (r.block && r.w > 30) {
        const text = fit(ctx, r.block.name, r.w - 6);
        ctx.fillStyle = '#111';
        ctx.textAlign = state.align === 'right' ? 'right' : 'left';
        ctx.fillText(text, state.align === 'right' ? r.x + r.w - 3 : r.x + 3, r.y + ROW / 2);
      }
    }
    return out;
  }
  function drawFlame() {
    if (!data) return;
    const t0 = performance.now();
    const sw = state.sandwich && !data.diff ? Flame.sandwich(data.levels, state.sandwich) : null;
    const callers = $('callers');
    callers.hidden = !sw;
    if (sw) {
      /* Pyroscope's sandwich: callers above the function, callees below it. */
      callerRects = drawInto(callers, sw.callers, 'flame', null);
      rects = drawInto($('flame'), sw.callees, 'icicle', null);
    } else {
      callerRects = [];
      rects = drawInto($('flame'), data.levels, state.orient, state.focus);
    }
    window.flamecol.draws++;
    window.flamecol.lastDrawMs = performance.now() - t0;
    if (!window.flamecol.firstDrawAt) window.flamecol.firstDrawAt = performance.now();
  }
  function fit(ctx, s, w) {
    if (ctx.measureText(s).width <= w) return s;
    let lo = 0, hi = s.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText('…' + s.slice(s.length - mid)).width <= w) lo = mid; else hi = mid - 1;
    }
    return lo ? '…' + s.slice(s.length - lo) : '';
  }
  function rectAt(x, y, among) {
    return (among || rects).find((r) => r.block && x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + ROW);
  }

  function tooltip(e) {
    const tip = $('tooltip');
    const r = rectAt(e.offsetX, e.offsetY, e.target.id === 'callers' ? callerRects : rects);
    if (!r) { tip.hidden = true; return; }
    const b = r.block;
    const total = data.doc.flamebearer.numTicks;
    const pct = (v) => (total ? (100 * v / total).toFixed(2) : '0') + '%';
    tip.innerHTML = '';
    const name = document.createElement('b');
    name.textContent = b.name;
    tip.appendChild(name);
    let lines = [
      'Total: ' + Flame.formatValue(b.total, data.units) + ' (' + pct(b.total) + ')',
      'Self: ' + Flame.formatValue(b.self, data.units) + ' (' + pct(b.self) + ')',
    ];
    /* A count only where the values are counts (CPU and bytes are not samples). */
    if (data.units !== 'samples' && data.units !== 'nanoseconds' && data.units !== 'bytes') {
      lines.push('Samples: ' + b.total);
    }
    if (data.diff) {
      const lt = data.doc.leftTicks, rt = data.doc.rightTicks;
      const share = (v, t) => (t ? (100 * v / t).toFixed(2) : '0') + '%';
      const c = Flame.diffChange(b.left, b.right, lt, rt);
      lines = [
        'Baseline: ' + Flame.formatValue(b.left, data.units) + ' (' + share(b.left, lt) + ')',
        'Comparison: ' + Flame.formatValue(b.right, data.units) + ' (' + share(b.right, rt) + ')',
        'Change: ' + changeText(c.change),
      ];
    }
    for (const l of lines) {
      const div = document.createElement('div');
      div.textContent = l;
      tip.appendChild(div);
    }
    tip.style.left = e.clientX + 12 + 'px';
    tip.style.top = e.clientY + 12 + 'px';
    tip.hidden = false;
  }
  function menu(e) {
    const r = rectAt(e.offsetX, e.offsetY);
    const m = $('menu');
    if (!r) { m.hidden = true; return; }
    m.style.left = e.clientX + 'px';
    m.style.top = e.clientY + 'px';
    m.hidden = false;
    m.onclick = (ev) => {
      const act = ev.target.dataset.act;
      m.hidden = true;
      if (act === 'focus') {
        if (!state.sandwich) state.focus = { level: r.block.level, index: r.block.index };
      } else if (act === 'sandwich' && !data.diff) {
        state.sandwich = r.block.name;
        state.focus = null;
      } else if (act === 'copy' && navigator.clipboard) {
        navigator.clipboard.writeText(r.block.name);
      }
      writeUrl();
      drawAll();
    };
  }

  function changeText(change) {
    if (change === Infinity) return 'new';
    return (change > 0 ? '+' : '') + (100 * change).toFixed(1) + '%';
  }

  /* ---- table ---- */
  function tableHead(cols) {
    const tr = $('top').tHead.rows[0];
    tr.innerHTML = '';
    for (const [key, label, num] of cols) {
      const th = document.createElement('th');
      th.textContent = label;
      if (key) {
        th.dataset.sort = key;
        th.onclick = () => { state.sort = key; drawAll(); };
      }
      if (num) th.className = 'num';
      tr.appendChild(th);
    }
  }
  function drawDiffTable(body) {
    tableHead([['name', 'Symbol'], ['baseline', 'Baseline', 1], ['comparison', 'Comparison', 1], ['change', 'Change', 1]]);
    const key = ['name', 'baseline', 'comparison', 'change'].includes(state.sort) ? state.sort : 'comparison';
    const rows = data.diffTable.slice();
    rows.sort(key === 'name' ? (a, b) => (a.name < b.name ? -1 : 1) : (a, b) => b[key] - a[key]);
    const match = Flame.matcher(state.search);
    for (const r of rows.slice(0, 500)) {
      if (match && !match(r.name)) continue;
      const tr = document.createElement('tr');
      const c = Flame.diffChange(r.baseline, r.comparison, data.doc.leftTicks, data.doc.rightTicks);
      const cells = [r.name, Flame.formatValue(r.baseline, data.units), Flame.formatValue(r.comparison, data.units), changeText(r.change)];
      cells.forEach((text, i) => {
        const td = document.createElement('td');
        td.textContent = text;
        td.className = i === 0 ? 'name' : 'num';
        if (i === 3) td.style.background = diffColour(c.kind, c.change);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
  }
  function drawTable() {
    const body = $('top').tBodies[0];
    body.innerHTML = '';
    if (!data) return;
    if (data.diff) {
      drawDiffTable(body);
      return;
    }
    tableHead([['name', 'Symbol'], ['self', 'Self', 1], ['total', 'Total', 1], ['', '']]);
    const rows = data.table.slice();
    const key = ['name', 'self', 'total'].includes(state.sort) ? state.sort : 'self';
    rows.sort(key === 'name' ? (a, b) => (a.name < b.name ? -1 : 1) : (a, b) => b[key] - a[key]);
    const total = data.doc.flamebearer.numTicks || 1;
    const match = Flame.matcher(state.search);
    for (const r of rows.slice(0, 500)) {
      if (match && !match(r.name)) continue;
      const tr = document.createElement('tr');
      const name = document.createElement('td');
      name.className = 'name';
      name.textContent = r.name;
      name.title = r.name;
      tr.appendChild(name);
      for (const k of ['self', 'total']) {
        const td = document.createElement('td');
        td.className = 'num';
        const bar = document.createElement('span');
        bar.className = 'bar';
        bar.style.width = (100 * r[k] / total).toFixed(1) + '%';
        td.appendChild(bar);
        td.appendChild(document.createTextNode(Flame.formatValue(r[k], data.units)));
        tr.appendChild(td);
      }
      const act = document.createElement('td');
      const s = document.createElement('button');
      s.textContent = 'search';
      s.onclick = () => { state.search = r.name; $('search').value = r.name; drawAll(); };
      const w = document.createElement('button');
      w.textContent = 'sandwich';
      w.onclick = () => { state.sandwich = r.name; state.focus = null; drawAll(); };
      act.append(s, w);
      tr.appendChild(act);
      body.appendChild(tr);
    }
  }

  function drawPills() {
    const box = $('pills');
    box.innerHTML = '';
    const pill = (text, clear) => {
      const s = document.createElement('span');
      s.className = 'pill';
      s.textContent = text + ' ';
      const x = document.createElement('button');
      x.textContent = '×';
      x.onclick = () => { clear(); drawAll(); };
      s.appendChild(x);
      box.appendChild(s);
    };
    if (state.focus && data) {
      const b = data.levels[state.focus.level][state.focus.index];
      pill('Focus: ' + b.name, () => { state.focus = null; });
    }
    if (state.sandwich) pill('Sandwich: ' + state.sandwich, () => { state.sandwich = ''; });
    if (state.search) {
      pill('Search: ' + state.search, () => { state.search = ''; $('search').value = ''; });
    }
    const stats = $('search-stats');
    const match = Flame.matcher(state.search);
    if (match && data) {
      const s = Flame.searchStats(data.levels, match);
      stats.textContent = s.count + ' matches, ' + (100 * s.share).toFixed(2) + '% of total';
    } else {
      stats.textContent = '';
    }
  }

  function drawAll() {
    writeUrl();
    $('panes').className = 'view-' + state.view;
    drawPills();
    drawTable();
    drawFlame();
  }

  function syncControls() {
    $('filter').value = state.filter;
    $('range').value = state.range;
    $('absolute').hidden = state.range !== 'custom';
    const toLocal = (s) => (s && /^\d+$/.test(s) ? new Date(s * 1000 - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 19) : '');
    $('from').value = toLocal(state.from);
    $('until').value = toLocal(state.until);
    $('search').value = state.search;
    $('diff').checked = !!state.diff;
    $('baseline').hidden = !state.diff;
    for (const id of ['bfilter', 'bfrom', 'buntil']) $(id).value = state[id];
    $('colour').value = state.colour;
    $('align').value = state.align;
    for (const b of document.querySelectorAll('[data-view]')) b.classList.toggle('on', b.dataset.view === state.view);
    for (const b of document.querySelectorAll('[data-orient]')) b.classList.toggle('on', b.dataset.orient === state.orient);
  }

  function wire() {
    $('service').onchange = async () => { state.service = $('service').value; state.focus = null; await loadPickers(); load(); };
    $('type').onchange = () => { state.type = $('type').value; state.focus = null; load(); };
    $('filter').onchange = () => { state.filter = $('filter').value; load(); };
    $('groupby').onchange = () => { state.groupBy = $('groupby').value; load(); };
    $('range').onchange = () => { state.range = $('range').value; syncControls(); if (state.range !== 'custom') load(); };
    const fromLocal = (v) => (v ? String(Math.floor(new Date(v).getTime() / 1000)) : '');
    $('from').onchange = $('until').onchange = () => {
      state.from = fromLocal($('from').value);
      state.until = fromLocal($('until').value);
      if (state.from && state.until) load();
    };
    $('refresh').onclick = load;
    $('search').oninput = () => { state.search = $('search').value; drawAll(); };
    $('colour').onchange = () => { state.colour = $('colour').value; drawAll(); };
    $('align').onchange = () => { state.align = $('align').value; drawAll(); };
    for (const b of document.querySelectorAll('[data-view]')) b.onclick = () => { state.view = b.dataset.view; syncControls(); drawAll(); };
    for (const b of document.querySelectorAll('[data-orient]')) b.onclick = () => { state.orient = b.dataset.orient; syncControls(); drawAll(); };
    /* Label filter picker: a name, then one of its values for this service, added to the filter. */
    $('lname').onchange = async () => {
      const name = $('lname').value;
      const values = name
        ? (await connect('LabelValues', { name, matchers: ['{service_name="' + state.service + '"}'] })).names || []
        : [];
      fill($('lvalue'), values, '');
    };
    $('ladd').onclick = () => {
      const name = $('lname').value, value = $('lvalue').value;
      if (!name || !value) return;
      const m = name + '="' + value.replace(/["\\]/g, '\\$&') + '"';
      state.filter = state.filter.trim() ? state.filter.trim() + ',' + m : m;
      $('filter').value = state.filter;
      load();
    };
    $('diff').onchange = () => { state.diff = $('diff').checked ? '1' : ''; state.focus = null; syncControls(); load(); };
    for (const id of ['bfilter', 'bfrom', 'buntil']) {
      $(id).onchange = () => { state[id] = $(id).value; load(); };
    }
    const canvas = $('flame');
    canvas.addEventListener('mousemove', tooltip);
    canvas.addEventListener('mouseleave', () => { $('tooltip').hidden = true; });
    $('callers').addEventListener('mousemove', tooltip);
    $('callers').addEventListener('mouseleave', () => { $('tooltip').hidden = true; });
    canvas.addEventListener('click', menu);
    window.addEventListener('resize', () => { drawTimeline(); drawFlame(); });
    timelineDrag();
  }

  /* What is drawn, for scripts and the browser test (tests/ui/browser.js). */
  window.flamecol = {
    draws: 0,
    lastDrawMs: 0, /* how long the last flame-graph draw took (bench/ui_draw.js) */
    firstDrawAt: 0, /* performance.now() of the first draw */
    callers: () => callerRects.filter((r) => r.block).map((r) => ({ name: r.block.name, level: r.level, w: r.w })),
    drawn: () => rects.filter((r) => r.block).map((r) => ({
      name: r.block.name, level: r.level, x: r.x, y: r.y, w: r.w, h: ROW, total: r.block.total, self: r.block.self,
      kind: data && data.diff ? Flame.diffChange(r.block.left, r.block.right, data.doc.leftTicks, data.doc.rightTicks).kind : undefined,
    })),
    state: () => JSON.parse(JSON.stringify(state)),
    nodes: () => (data ? data.levels.reduce((n, lv) => n + lv.length, 0) : 0), /* in the answer */
  };

  readUrl();
  syncControls();
  wire();
  loadPickers().then(load, (e) => { $('status').textContent = String(e.message || e); $('status').className = 'error'; });
})();
