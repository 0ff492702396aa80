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
    search: '', focus: null, sandwich: '', sort: 'self', order: '', /* order: '' natural, 'asc', 'desc' */
    trace_id: '', span_id: '', /* span profiles: only the samples of these (comma-separated hex ids) */
    diff: '', bfilter: '', bfrom: '', buntil: '', /* diff: the baseline beside the selection */
    maxNodes: '', /* empty: the server's query.max_nodes */
    fn: '', /* the function-details panel's function (view_function.js) */
    /* '' the explore view; 'overview' or 'service' (view_overview.js), 'labels' (view_labels.js),
       'compare' (the diff view with both sides' graphs, view_compare.js) */
    page: '',
    lsort: '', /* the labels page's order: '' by total, 'max' */
    lpick: '', /* the labels page's value picked as a comparison's baseline: name=value */
  };
  let data = null; /* {fb, levels, units, table} of the current answer */
  let rects = []; /* what the main canvas shows, for hit tests */
  let callerRects = []; /* the sandwich's callers canvas */
  let focusPath = null; /* the focused block's stack of names, to find it again in a new answer */
  let loadSeq = 0; /* the newest load(): an older answer arriving late draws nothing */
  let filterError = ''; /* a filter that did not parse: said until the box is fixed, not overwritten by a load */
  let ticks = []; /* the timeline's time axis: [{t, x, label}] */

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
    if (p.has('query')) {
      /* A Pyroscope query in the link (e.g. from a tracing UI): type, service and filter. */
      try {
        const q = Flame.parseQuery(p.get('query'));
        if (q.type) state.type = q.type;
        if (q.service) state.service = q.service;
        state.filter = q.filter;
      } catch (e) { /* left to the pickers' defaults */ }
    }
  }
  function writeUrl() {
    const url = urlOf(state);
    /* replaceState costs a round trip to the browser: not for the same URL */
    if (url !== location.search) history.replaceState(null, '', url);
    for (const a of document.querySelectorAll('#pages a')) {
      const page = a.dataset.page;
      const diff = page === 'compare' ? '1' : state.page === 'compare' ? '' : state.diff;
      a.href = urlOf(Object.assign({}, state, { page, diff, focus: null, fn: '' }));
      a.classList.toggle('on', a.dataset.page === (state.page === 'service' ? 'overview' : state.page));
    }
  }
  /* The link to a state. */
  function urlOf(st) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(st)) {
      if (k === 'focus') {
        if (v) p.set('focus', v.level + ':' + v.index);
      } else if (v) {
        p.set(k, v);
      }
    }
    return '?' + p.toString();
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
  function baseQuery() {
    return query(state.bfilter || state.filter);
  }
  function baseRange() {
    const r = rangeParams();
    return { from: state.bfrom || r.from, until: state.buntil || r.until };
  }
  /*
   * The window both diff timelines show: from the earlier start to the later
   * end, kept (only widened) while the baseline is dragged on it.
   */
  let diffWin = null;
  function diffWindow() {
    const r = rangeParams(), b = baseRange();
    let from = Math.min(toSecs(r.from), toSecs(b.from)), until = Math.max(toSecs(r.until), toSecs(b.until));
    if (diffWin) {
      from = Math.min(from, diffWin.from);
      until = Math.max(until, diffWin.until);
    }
    diffWin = { from, until };
    return { from: String(from), until: String(until) };
  }
  function diffUrl() {
    const r = rangeParams(), b = baseRange();
    const p = new URLSearchParams({
      leftQuery: baseQuery(), leftFrom: b.from, leftUntil: b.until,
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
  function renderUrl(format, maxNodes) {
    const p = new URLSearchParams(Object.assign({ query: query(), format }, rangeParams()));
    if (state.groupBy) p.set('groupBy', state.groupBy);
    if (maxNodes || state.maxNodes) p.set('maxNodes', String(maxNodes || state.maxNodes));
    return 'pyroscope/render?' + p.toString();
  }

  /* ---- pickers ---- */
  function fill(select, values, current, label) {
    select.innerHTML = '';
    const seen = new Set();
    for (const v of values) {
      const o = document.createElement('option');
      o.value = o.textContent = v;
      if (label) {
        const l = label(v);
        o.textContent = seen.has(l) ? v : l; /* two types with one name: the ids tell them apart */
        seen.add(l);
        o.title = v;
      }
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
    serviceTypes = forService;
    fill($('type'), forService, state.type, Flame.typeName);
    $('type').title = state.type;
    const names = ((await connect('LabelNames', { matchers: ['{service_name="' + state.service + '"}'] })).names || [])
      .filter((n) => !n.startsWith('__') && n !== 'service_name');
    fill($('groupby'), [''].concat(names), state.groupBy);
    $('groupby').options[0].textContent = 'none';
    fill($('lname'), [''].concat(names), '');
    $('lname').options[0].textContent = 'label…';
    fill($('lvalue'), [], '');
  }

  /* ---- loading ---- */
  let serviceTypes = []; /* the profile types of the picked service */
  /*
   * The tooltip's count (samples of a CPU type, objects of a bytes type) from
   * the service's matching count type, fetched after the graph is drawn;
   * data.counts = {label, levels} once it answers.
   */
  async function loadCounts(d) {
    const ct = Flame.countType(state.type, serviceTypes);
    if (!ct) return;
    const p = new URLSearchParams(Object.assign({ query: ct.id + query().slice(state.type.length), format: 'json' }, rangeParams()));
    if (state.maxNodes) p.set('maxNodes', String(state.maxNodes));
    const r = await fetch('pyroscope/render?' + p.toString());
    if (!r.ok || data !== d) return;
    const fb = (await r.json()).flamebearer;
    if (data === d) d.counts = { label: ct.label, levels: Flame.decode(fb) };
  }
  /* The count of a block of the graph as [total, self], or null. */
  function countOf(b) {
    const c = data.counts;
    if (!c || !data.levels[b.level] || data.levels[b.level][b.index] !== b) return null;
    const at = b.level === 0 ? { level: 0, index: 0 } : Flame.findPath(c.levels, Flame.pathOf(data.levels, b.level, b.index));
    const m = at && c.levels[at.level] && c.levels[at.level][at.index];
    return m ? [m.total, m.self] : null;
  }
  /* A span profile (trace or span ids): Connect's SelectMergeStacktraces, as a render answer. */
  async function spanRender() {
    const r = rangeParams();
    const secs = (v) => (/^\d+$/.test(v) ? +v : toSecs(v));
    const ids = (v) => v.split(/[\s,]+/).filter(Boolean);
    const body = {
      profileTypeID: state.type, labelSelector: query().slice(state.type.length),
      start: secs(r.from) * 1000, end: secs(r.until) * 1000,
      spanSelector: ids(state.span_id), traceIdSelector: ids(state.trace_id),
    };
    if (state.maxNodes) body.maxNodes = +state.maxNodes;
    const fg = (await connect('SelectMergeStacktraces', body)).flamegraph || {};
    const levels = (fg.levels || []).map((l) => (l.values || []).map(Number));
    const units = state.type.split(':')[2] || '';
    return { flamebearer: { names: fg.names || [], levels, numTicks: Number(fg.total || 0) }, metadata: { units } };
  }
  /* 'now', 'now-15m', 'now-2h', 'now-7d' or unix seconds, as unix seconds. */
  function toSecs(v) {
    const now = Math.floor(Date.now() / 1000);
    if (/^\d+$/.test(v)) return +v;
    const m = /^now(?:-(\d+)([smhd]))?$/.exec(v || 'now');
    if (!m) return now;
    return now - (m[1] ? +m[1] * { s: 1, m: 60, h: 3600, d: 86400 }[m[2]] : 0);
  }

  /* ---- the overview pages (ui/view_overview.js) ---- */
  let pageTiles = null; /* what the page drew, for the browser test */
  async function showPage() {
    pageTiles = null;
    $('status').textContent = 'loading…';
    $('status').className = '';
    try {
      const view = state.page === 'labels' ? LabelsView : OverviewView;
      pageTiles = await view.show({
        state, connect, range: rangeParams, secs: toSecs, drawSeries,
        href: (changes) => urlOf(Object.assign({}, state, { focus: null, fn: '', search: '', sandwich: '' }, changes)),
      });
      window.flamecol.pageDrawnAt = performance.now();
      $('status').textContent = '';
    } catch (e) {
      $('status').textContent = String(e.message || e);
      $('status').className = 'error';
    }
  }

  async function load() {
    writeUrl();
    document.body.classList.toggle('paged', !!state.page && state.page !== 'compare');
    document.body.classList.toggle('compare-page', state.page === 'compare');
    document.body.classList.toggle('all-services', state.page === 'overview');
    document.body.classList.toggle('labels-page', state.page === 'labels');
    if (state.page && state.page !== 'compare') return showPage();
    if (state.page !== 'compare') CompareView.hide();
    const seq = ++loadSeq;
    const stale = () => {
      if (seq === loadSeq) return false;
      window.flamecol.staleLoads++;
      return true;
    };
    $('status').textContent = 'loading…';
    $('status').className = '';
    const empty = !state.service || !state.type;
    $('empty').hidden = !empty;
    document.body.classList.toggle('empty', empty);
    if (empty) {
      $('status').textContent = 'No data yet: push profiles to this collector.';
      return;
    }
    try {
      /* the findings beside the graph, fetched meanwhile: shown before the graph is drawn, so its width stays */
      const findings = state.diff ? null : loadFindings().catch(() => {});
      const span = !state.diff && (state.trace_id || state.span_id);
      let doc;
      let nodesMerged = '?';
      if (span) {
        doc = await spanRender();
        /* the timeline is the whole selection's */
        const t = await fetch(renderUrl('json', 1));
        if (t.ok) doc.timeline = (await t.json()).timeline;
      } else {
        const r = await fetch(state.diff ? diffUrl() : renderUrl('json'));
        doc = await r.json();
        if (!r.ok) throw new Error(doc.message || r.statusText);
        if (stale()) return;
        nodesMerged = r.headers.get('X-Flamecol-Nodes-Merged') || '?';
      }
      if (state.diff) {
        const diff = Flame.decodeDiff(doc.flamebearer);
        data = { doc, levels: diff.levels, units: doc.metadata.units, diff,
          diffTable: Flame.diffTable(diff, doc.leftTicks, doc.rightTicks) };
        state.sandwich = '';
        /* the timelines of both sides, each over the window holding both */
        const win = diffWindow();
        const [rt, lt] = await Promise.all([timelineOf(query(), win), timelineOf(baseQuery(), win)]);
        if (stale()) return;
        data.doc.timeline = rt;
        data.btimeline = lt;
        if (state.page === 'compare') {
          await CompareView.show({ sides: () => [Object.assign({ query: baseQuery() }, baseRange()), Object.assign({ query: query() }, rangeParams())] });
        }
      } else {
        const levels = Flame.decode(doc.flamebearer);
        data = { doc, levels, units: doc.metadata.units, table: Flame.table(levels) };
      }
      if (state.focus) {
        const here = data.levels[state.focus.level] && data.levels[state.focus.level][state.focus.index];
        /* a focus made here follows its stack; one from a link must exist as given */
        state.focus = focusPath ? Flame.findPath(data.levels, focusPath) : here ? state.focus : null;
        focusPath = state.focus ? Flame.pathOf(data.levels, state.focus.level, state.focus.index) : null;
        writeUrl();
      }
      $('dl-pprof').href = renderUrl('pprof');
      $('dl-folded').href = renderUrl('folded');
      $('dl-json').href = state.diff ? diffUrl() : renderUrl('json');
      if (findings) await findings; else FindingsView.hide($('findings'));
      if (stale()) return;
      drawTimeline();
      drawGroups();
      drawAll();
      if (!state.diff && !span) loadCounts(data).catch(() => {});
      /* the sandwich's index of this answer, made while the page is idle */
      const levels = data.levels;
      (window.requestIdleCallback || setTimeout)(() => Flame.indexOf(levels));
      showFunction();
      $('status').textContent = Flame.formatValue(doc.flamebearer.numTicks, data.units) + ' total, ' +
        nodesMerged + ' windows merged';
      if (filterError) showFilterError();
    } catch (e) {
      if (stale()) return;
      $('status').textContent = String(e.message || e);
      $('status').className = 'error';
    }
  }
  /* ---- function details (ui/view_function.js) ---- */
  const fnCtx = {
    url: (name) => 'api/v1/function?' + new URLSearchParams(Object.assign({ query: query(), name }, rangeParams())).toString(),
    units: () => (data ? data.units : ''),
    pick: (name) => { state.fn = name; writeUrl(); showFunction(); },
    close: () => { state.fn = ''; writeUrl(); FunctionView.hide(); },
  };
  let fnShown = null; /* the answer the panel shows, for the browser test */
  async function showFunction() {
    if (!state.fn) { FunctionView.hide(); fnShown = null; return; }
    fnShown = await FunctionView.show(fnCtx, state.fn);
  }
  /* The timeline of a query over a range (a one-node render). */
  async function timelineOf(q, range) {
    const p = new URLSearchParams(Object.assign({ query: q, format: 'json', maxNodes: '1' }, range));
    const r = await fetch('pyroscope/render?' + p.toString());
    return r.ok ? (await r.json()).timeline : null;
  }

  /* Findings (ui/view_findings.js): each opens the block menu for its function. */
  function loadFindings() {
    const url = 'api/v1/findings?' + new URLSearchParams(Object.assign({ query: query() }, rangeParams())).toString();
    return FindingsView.show($('findings'), {
      url, levels: () => (data ? data.levels : []),
      open: (name, at, x, y) => openMenu(x, y, name, at),
    });
  }

  /* ---- timeline (drag to select a sub-range) ---- */
  const AXIS = 14; /* px under the bars for the time labels */
  /* A tick's local time, as precise as the step between ticks needs. */
  function tickLabel(t, step) {
    const d = new Date(t * 1000);
    const two = (n) => String(n).padStart(2, '0');
    const hm = two(d.getHours()) + ':' + two(d.getMinutes());
    const md = two(d.getMonth() + 1) + '-' + two(d.getDate());
    if (step >= 30 * 86400) return d.getFullYear() + '-' + two(d.getMonth() + 1);
    if (step >= 86400) return md;
    if (step < 60) return hm + ':' + two(d.getSeconds());
    return d.getHours() === 0 && d.getMinutes() === 0 ? md : hm;
  }
  /*
   * Bars of samples; with axis ({start, step} seconds) a local-time axis under
   * them and, with band ([from, until] seconds), that part highlighted.
   * Returns the ticks drawn.
   */
  function drawSeries(canvas, samples, colour, axis, band) {
    const ctx = canvas.getContext('2d');
    const w = (canvas.width = canvas.clientWidth || 300);
    const h = canvas.height;
    const bars = axis ? h - AXIS : h;
    ctx.clearRect(0, 0, w, h);
    const max = Math.max(1, ...samples);
    const bw = w / Math.max(1, samples.length);
    const out = [];
    if (axis) {
      const span = samples.length * axis.step;
      if (band) {
        const x0 = ((band[0] - axis.start) / span) * w, x1 = ((band[1] - axis.start) / span) * w;
        ctx.fillStyle = 'rgba(90, 123, 208, .18)';
        ctx.fillRect(x0, 0, Math.max(2, x1 - x0), bars);
      }
      ctx.fillStyle = '#777';
      ctx.font = '10px system-ui, sans-serif';
      ctx.textBaseline = 'top';
      const all = Flame.timeTicks(axis.start, axis.start + span, w, new Date().getTimezoneOffset(), 90);
      const step = all.length > 1 ? all[1].t - all[0].t : span;
      let right = -Infinity; /* where the last label ended: labels never overlap */
      ctx.textAlign = 'left';
      for (const tk of all) {
        const label = tickLabel(tk.t, step);
        const lw = ctx.measureText(label).width;
        const left = Math.min(Math.max(0, tk.x - lw / 2), w - lw);
        ctx.fillRect(tk.x, bars - 4, 1, 4);
        if (left < right + 6) continue;
        ctx.fillText(label, left, bars + 2);
        right = left + lw;
        out.push({ t: tk.t, x: tk.x, label });
      }
    }
    ctx.fillStyle = colour;
    samples.forEach((v, i) => {
      const bh = (v / max) * (bars - 2);
      ctx.fillRect(i * bw, bars - bh, Math.max(1, bw - 0.5), bh);
    });
    return out;
  }
  const axisOf = (t) => (t ? { start: t.startTime, step: t.durationDelta } : null);
  function drawTimeline() {
    const t = data && data.doc.timeline;
    let band = null;
    if (data && data.diff) {
      const r = rangeParams();
      band = [toSecs(r.from), toSecs(r.until)];
    }
    ticks = drawSeries($('timeline'), t ? t.samples : [], '#d0643c', axisOf(t), band);
    const bt = data && data.btimeline;
    $('btimeline').hidden = !bt;
    if (bt) {
      const b = baseRange();
      drawSeries($('btimeline'), bt.samples, '#5a7bd0', axisOf(bt), [toSecs(b.from), toSecs(b.until)]);
    }
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
  /*
   * Drag on a timeline canvas: a highlight follows the mouse, and on release
   * pick(from, until) gets the range in unix seconds.
   */
  function timelineDrag(c, timeline, pick) {
    const brush = document.createElement('div');
    brush.className = 'brush';
    brush.hidden = true;
    c.parentNode.insertBefore(brush, c.nextSibling);
    let start = null;
    const xOf = (e) => Math.max(0, Math.min(c.clientWidth, e.clientX - c.getBoundingClientRect().left));
    const show = (x) => {
      const a = Math.min(start, x), b = Math.max(start, x);
      brush.style.left = c.offsetLeft + a + 'px';
      brush.style.top = c.offsetTop + 'px';
      brush.style.width = b - a + 'px';
      brush.style.height = c.clientHeight - AXIS + 'px';
      brush.hidden = false;
    };
    c.addEventListener('mousedown', (e) => { start = xOf(e); show(start); e.preventDefault(); });
    window.addEventListener('mousemove', (e) => { if (start !== null) show(xOf(e)); });
    window.addEventListener('mouseup', (e) => {
      const t = timeline();
      if (start === null) return;
      const x = xOf(e);
      const a = Math.min(start, x), b = Math.max(start, x);
      start = null;
      brush.hidden = true;
      if (!t || b - a < 3) return;
      const secs = t.samples.length * t.durationDelta;
      const x2t = (px) => Math.round(t.startTime + (px / c.clientWidth) * secs);
      pick(String(x2t(a)), String(x2t(b)));
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
  /*
   * Draws levels into canvas (root at the bottom for 'flame', at the top for
   * 'icicle'), leaving out the first skip levels (the sandwich's "total").
   */
  function drawInto(canvas, levels, orient, focus, skip) {
    const width = canvas.clientWidth || 800;
    const ratio = window.devicePixelRatio || 1;
    const from = skip || 0;
    const out = Flame.layout(levels, width, { focus: focus, minPx: 1 }).filter((r) => r.level >= from);
    const depth = Math.max(0, levels.length - from);
    canvas.style.height = depth * ROW + 'px';
    canvas.width = width * ratio;
    canvas.height = depth * ROW * ratio;
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.font = '11px ui-monospace, monospace';
    ctx.textBaseline = 'middle';
    const info = { match: Flame.matcher(state.search), total: data.doc.flamebearer.numTicks };
    for (const r of out) {
      r.y = orient === 'icicle' ? (r.level - from) * ROW : (depth - 1 - (r.level - from)) * ROW;
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
    /* the sandwich of this answer and function, made once (a search or a sort redraws it) */
    if (state.sandwich && !data.diff && (!data.sw || data.sw.name !== state.sandwich)) {
      data.sw = Object.assign({ name: state.sandwich }, Flame.sandwich(data.levels, state.sandwich));
    }
    const sw = state.sandwich && !data.diff ? data.sw : null;
    const callers = $('callers');
    callers.hidden = !sw;
    if (sw) {
      /* Pyroscope's sandwich: callers above the function, callees below it. */
      /* without their "total" roots: the function meets itself between the halves */
      callerRects = drawInto(callers, sw.callers, 'flame', null, 1);
      rects = drawInto($('flame'), sw.callees, 'icicle', null, 1);
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
    } else if (e.target.id !== 'callers') {
      /* CPU time and bytes: the profile's own sample (or object) count, where it has one */
      const n = countOf(b);
      if (n) lines.push(data.counts.label + ': ' + n[0] + ' (self ' + n[1] + ')');
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
    if (!r) { $('menu').hidden = true; return; }
    openMenu(e.clientX, e.clientY, r.block.name, { level: r.block.level, index: r.block.index });
  }
  /* The block menu at (x, y) for a function; at: its block in the graph ({level, index}) or null. */
  function openMenu(x, y, name, at) {
    const m = $('menu');
    m.style.left = x + 'px';
    m.style.top = y + 'px';
    /* no sandwich of a diff; no focus inside a sandwich (its blocks are not the graph's) */
    m.querySelector('[data-act="sandwich"]').hidden = !!data.diff;
    m.querySelector('[data-act="focus"]').hidden = (!!state.sandwich && !data.diff) || !at;
    m.hidden = false;
    m.onclick = (ev) => {
      const act = ev.target.dataset.act;
      m.hidden = true;
      if (act === 'focus') {
        if (!state.sandwich && at) {
          state.focus = { level: at.level, index: at.index };
          focusPath = Flame.pathOf(data.levels, at.level, at.index);
        }
      } else if (act === 'sandwich' && !data.diff) {
        state.sandwich = name;
        state.focus = null;
      } else if (act === 'search') {
        state.search = name;
        $('search').value = name;
      } else if (act === 'details') {
        fnCtx.pick(name);
      } else if (act === 'copy' && navigator.clipboard) {
        navigator.clipboard.writeText(name);
      }
      drawAll(); /* writes the URL */
    };
  }

  function changeText(change) {
    if (change === Infinity) return 'new';
    return (change > 0 ? '+' : '') + (100 * change).toFixed(1) + '%';
  }

  /* ---- table ---- */
  /* Whether the table is sorted largest (or Z) first. */
  const sortedDesc = () => (state.order ? state.order === 'desc' : state.sort !== 'name');
  function tableHead(cols, current) {
    const tr = $('top').tHead.rows[0];
    tr.innerHTML = '';
    for (const [key, label, num] of cols) {
      const th = document.createElement('th');
      th.textContent = label;
      if (key) {
        th.dataset.sort = key;
        /* the same column again turns the order round */
        th.onclick = () => {
          if (current === key) {
            state.order = sortedDesc() ? 'asc' : 'desc';
          } else {
            state.sort = key;
            state.order = '';
          }
          drawAll();
        };
        if (current === key) th.setAttribute('aria-sort', sortedDesc() ? 'descending' : 'ascending');
      }
      if (num) th.className = 'num';
      tr.appendChild(th);
    }
  }
  function drawDiffTable(body) {
    const key = ['name', 'baseline', 'comparison', 'change'].includes(state.sort) ? state.sort : 'comparison';
    if (key !== state.sort) { state.sort = key; state.order = ''; }
    tableHead([['name', 'Symbol'], ['baseline', 'Baseline', 1], ['comparison', 'Comparison', 1], ['change', 'Change', 1]], key);
    const rows = Flame.sortRows(data.diffTable, key, state.order);
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
        if (i === 0) {
          td.title = r.name + ' (click: function details)';
          td.style.cursor = 'pointer';
          td.onclick = () => fnCtx.pick(r.name);
        }
        if (i === 3) td.style.background = diffColour(c.kind, c.change);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
  }
  let tableDrawn = { data: null, key: '' }; /* what the table shows: a focus or a sandwich leaves it as it is */
  function drawTable() {
    const body = $('top').tBodies[0];
    const shown = [state.sort, state.order, state.search].join('\n');
    if (data && tableDrawn.data === data && tableDrawn.key === shown) return;
    tableDrawn = { data, key: shown };
    body.innerHTML = '';
    if (!data) return;
    if (data.diff) {
      drawDiffTable(body);
      return;
    }
    const key = ['name', 'self', 'total'].includes(state.sort) ? state.sort : 'self';
    if (key !== state.sort) { state.sort = key; state.order = ''; }
    tableHead([['name', 'Symbol'], ['self', 'Self', 1], ['total', 'Total', 1], ['', '']], key);
    const rows = Flame.sortRows(data.table, key, state.order);
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
      act.className = 'acts';
      const s = document.createElement('button');
      s.textContent = 'search';
      s.onclick = () => { state.search = r.name; $('search').value = r.name; drawAll(); };
      const w = document.createElement('button');
      w.textContent = 'sandwich';
      w.onclick = () => { state.sandwich = r.name; state.focus = null; drawAll(); };
      const d = document.createElement('button');
      d.textContent = 'info';
      d.title = 'details: per line, callers, callees';
      d.onclick = () => fnCtx.pick(r.name);
      act.append(s, w, d);
      tr.appendChild(act);
      body.appendChild(tr);
    }
  }

  /* The pills shown, oldest first, each with its clear(): Esc takes the newest away. */
  let pillsShown = [];
  function drawPills() {
    const box = $('pills');
    box.innerHTML = '';
    const now = [];
    const pill = (kind, text, clear) => {
      now.push({ kind, clear });
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
      pill('focus', 'Focus: ' + b.name, () => { state.focus = null; focusPath = null; });
    }
    if (state.trace_id || state.span_id) {
      pill('span', (state.trace_id ? 'Trace: ' + state.trace_id : '') + (state.span_id ? ' Span: ' + state.span_id : ''), () => {
        state.trace_id = state.span_id = '';
        $('spanid').value = '';
        load();
      });
    }
    if (state.sandwich) pill('sandwich', 'Sandwich: ' + state.sandwich, () => { state.sandwich = ''; });
    if (state.search) {
      pill('search', 'Search: ' + state.search, () => { state.search = ''; $('search').value = ''; });
    }
    /* those kept keep their age; new ones are the newest */
    const kinds = now.map((p) => p.kind);
    const kept = pillsShown.filter((p) => kinds.includes(p.kind)).map((p) => now.find((q) => q.kind === p.kind));
    pillsShown = kept.concat(now.filter((p) => !kept.some((q) => q.kind === p.kind)));
    const stats = $('search-stats');
    const match = Flame.matcher(state.search);
    const bad = Flame.matcherError(state.search);
    stats.className = bad ? 'error' : '';
    if (bad) {
      stats.textContent = bad;
    } else if (match && data) {
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
    $('bfilter').value = state.bfilter;
    /* the baseline's times as the selection's: local date and time (what now-2h is now, for a relative one) */
    const b = baseRange();
    $('bfrom').value = toLocal(String(toSecs(b.from)));
    $('buntil').value = toLocal(String(toSecs(b.until)));
    $('spanid').value = [state.trace_id, state.span_id].filter(Boolean).join(',');
    $('colour').value = state.colour;
    $('align').value = state.align;
    for (const b of document.querySelectorAll('[data-view]')) b.classList.toggle('on', b.dataset.view === state.view);
    for (const b of document.querySelectorAll('[data-orient]')) b.classList.toggle('on', b.dataset.orient === state.orient);
  }

  const canvasOf = () => $('flame');
  /* The baseline: the period of the same length just before the selection. */
  function previousPeriod() {
    const r = rangeParams();
    const m = /^now-(\d+)([smhd])$/.exec(r.from);
    if (m && r.until === 'now') {
      state.bfrom = 'now-' + 2 * m[1] + m[2];
      state.buntil = r.from;
    } else {
      const a = toSecs(r.from), b = toSecs(r.until);
      state.bfrom = String(a - (b - a));
      state.buntil = String(a);
    }
  }
  function showFilterError() {
    $('status').textContent = 'filter: ' + filterError;
    $('status').className = 'error';
  }
  /* The filter box takes label matchers or a whole Pyroscope query. */
  async function applyFilter(text) {
    let q;
    try {
      q = Flame.parseQuery(text);
    } catch (e) {
      filterError = e.message;
      showFilterError();
      $('filter').classList.add('bad');
      $('filter').title = e.message;
      return;
    }
    filterError = '';
    $('filter').classList.remove('bad');
    $('filter').title = '';
    const repick = (q.service && q.service !== state.service) || (q.type && q.type !== state.type);
    if (q.service) state.service = q.service;
    if (q.type) state.type = q.type;
    state.filter = q.filter;
    $('filter').value = state.filter;
    if (repick) {
      state.focus = null;
      await loadPickers();
    }
    load();
  }

  function wire() {
    $('service').onchange = async () => { state.service = $('service').value; state.focus = null; await loadPickers(); load(); };
    $('type').onchange = () => { state.type = $('type').value; state.focus = null; load(); };
    $('filter').onchange = () => applyFilter($('filter').value);
    $('groupby').onchange = () => { state.groupBy = $('groupby').value; load(); };
    $('range').onchange = () => { diffWin = null; state.range = $('range').value; syncControls(); if (state.range !== 'custom') load(); };
    const fromLocal = (v) => (v ? String(Math.floor(new Date(v).getTime() / 1000)) : '');
    $('from').onchange = $('until').onchange = () => {
      diffWin = null;
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
    $('diff').onchange = () => {
      state.diff = $('diff').checked ? '1' : '';
      if (!state.diff && state.page === 'compare') state.page = '';
      state.focus = null;
      diffWin = null;
      if (state.diff && !state.bfrom && !state.buntil) previousPeriod();
      syncControls();
      load();
    };
    $('bfilter').onchange = () => { state.bfilter = $('bfilter').value; load(); };
    for (const id of ['bfrom', 'buntil']) {
      $(id).onchange = () => {
        state[id] = fromLocal($(id).value);
        diffWin = null;
        load();
      };
    }
    $('bprev').onclick = () => { previousPeriod(); syncControls(); load(); };
    $('bsame').onclick = () => { state.bfrom = state.buntil = ''; syncControls(); load(); };
    $('spanid').onchange = () => {
      const ids = $('spanid').value.split(/[\s,]+/).filter(Boolean);
      state.trace_id = ids.filter((x) => x.length === 32).join(',');
      state.span_id = ids.filter((x) => x.length !== 32).join(',');
      state.focus = null;
      load();
    };
    /* The menu closes on a click elsewhere and on Escape; "/" goes to the search. */
    document.addEventListener('mousedown', (e) => {
      if (!$('menu').hidden && !$('menu').contains(e.target) && e.target !== canvasOf()) $('menu').hidden = true;
    });
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') {
        const inField = /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
        /* one thing at a time: the menu or tooltip, else the details panel, else the newest pill */
        if ($('menu').hidden && $('tooltip').hidden) {
          if (state.fn) {
            fnCtx.close();
          } else if (pillsShown.length && !inField && !state.page) {
            pillsShown[pillsShown.length - 1].clear();
            drawAll();
          }
        }
        $('menu').hidden = true;
        $('tooltip').hidden = true;
      } else if (e.key === '/' && !/^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) {
        e.preventDefault();
        $('search').focus();
      }
    });
    const canvas = $('flame');
    canvas.addEventListener('mousemove', tooltip);
    canvas.addEventListener('mouseleave', () => { $('tooltip').hidden = true; });
    $('callers').addEventListener('mousemove', tooltip);
    $('callers').addEventListener('mouseleave', () => { $('tooltip').hidden = true; });
    canvas.addEventListener('click', menu);
    window.addEventListener('resize', () => { if (!state.page) { drawTimeline(); drawFlame(); } });
    timelineDrag($('timeline'), () => data && data.doc.timeline, (from, until) => {
      diffWin = null;
      state.range = 'custom';
      state.from = from;
      state.until = until;
      syncControls();
      load();
    });
    timelineDrag($('btimeline'), () => data && data.btimeline, (from, until) => {
      state.bfrom = from;
      state.buntil = until;
      syncControls();
      load();
    });
  }

  /* What is drawn, for scripts and the browser test (tests/ui/browser.js). */
  window.flamecol = {
    draws: 0,
    staleLoads: 0, /* answers that arrived after a newer load began, and were not drawn */
    lastDrawMs: 0, /* how long the last flame-graph draw took (bench/ui_draw.js) */
    firstDrawAt: 0, /* performance.now() of the first draw */
    pageDrawnAt: 0, /* performance.now() when an overview or labels page had every tile drawn */
    callers: () => callerRects.filter((r) => r.block).map((r) => ({ name: r.block.name, level: r.level, w: r.w, y: r.y })),
    drawn: () => rects.filter((r) => r.block).map((r) => ({
      name: r.block.name, level: r.level, x: r.x, y: r.y, w: r.w, h: ROW, total: r.block.total, self: r.block.self,
      kind: data && data.diff ? Flame.diffChange(r.block.left, r.block.right, data.doc.leftTicks, data.doc.rightTicks).kind : undefined,
    })),
    state: () => JSON.parse(JSON.stringify(state)),
    ticks: () => ticks.slice(), /* the timeline's time axis */
    timelines: () => { /* what each timeline adds up to (the baseline's only in diff mode) */
      const sum = (t) => (t ? t.samples.reduce((a, b) => a + b, 0) : null);
      return { selection: sum(data && data.doc.timeline), baseline: sum(data && data.btimeline) };
    },
    findings: () => FindingsView.drawn(), /* the findings panel: {top: [{name, share}], path: [name]} */
    sides: () => CompareView.drawn(), /* the compare page's two graphs: {a, b} */
    tiles: () => pageTiles, /* the page's answer: overview tiles [{service, type, total, points}], labels [{label, values}] */
    fn: () => (state.fn && fnShown && fnShown.function === state.fn ? fnShown : null), /* the details panel's answer */
    nodes: () => (data ? data.levels.reduce((n, lv) => n + lv.length, 0) : 0), /* in the answer */
    counts: () => !!(data && data.counts), /* the tooltip's sample or object counts have arrived */
  };

  readUrl();
  if (state.page === 'compare') {
    state.diff = '1';
    if (!state.bfrom && !state.buntil) previousPeriod();
  }
  syncControls();
  wire();
  loadPickers().then(load, (e) => { $('status').textContent = String(e.message || e); $('status').className = 'error'; });
})();
