/*
 * Overview: every service as a tile with its CPU (or first) profile type's
 * timeline over the range (page=overview); pick one and its profile types
 * are tiles, by friendly name with the id on hover (page=service); pick one
 * and the flame graph opens. Each step is a link, so the URL keeps it and a
 * reload reopens it. Data: Connect LabelValues (service_name,
 * __profile_type__; Series for all services at once) and /pyroscope/render
 * timelines (one-node renders; grouped by service_name on the overview).
 * app.js hands it ctx: {state, connect, range() -> {from, until},
 * secs(v), drawSeries(canvas, samples, colour, axis), href(changes)}.
 */
(function (root) {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const quote = (v) => '"' + String(v).replace(/["\\]/g, '\\$&') + '"';

  /* The CPU type when there is one, else the first. */
  const mainType = (types) => types.find((t) => t.startsWith('process_cpu:cpu:')) || types[0];

  async function typesOf(ctx, service, range) {
    const r = await ctx.connect('LabelValues', {
      name: '__profile_type__', matchers: ['{service_name=' + quote(service) + '}'],
      start: ctx.secs(range.from) * 1000, end: ctx.secs(range.until) * 1000,
    });
    return (r.names || []).slice().sort();
  }
  async function timeline(service, type, range) {
    const p = new URLSearchParams({ query: type + '{service_name=' + quote(service) + '}', format: 'json', maxNodes: '1',
      from: range.from, until: range.until });
    const r = await fetch('pyroscope/render?' + p.toString());
    if (!r.ok) return null;
    const doc = await r.json();
    return { timeline: doc.timeline, units: doc.metadata && doc.metadata.units };
  }

  /* One tile: a link with a title line, a total and a small timeline. */
  function tile(box, href, title, hover) {
    const a = document.createElement('a');
    a.className = 'tile';
    a.href = href;
    const h = document.createElement('div');
    h.className = 'tile-name';
    h.textContent = title;
    a.title = hover;
    const sub = document.createElement('div');
    sub.className = 'tile-sub';
    sub.textContent = '…';
    const c = document.createElement('canvas');
    c.height = 46;
    a.append(h, sub, c);
    box.appendChild(a);
    return { a, sub, c };
  }
  function fillTile(ctx, t, tl, typeLabel, out, entry) {
    const samples = (tl && tl.timeline && tl.timeline.samples) || [];
    const total = samples.reduce((x, y) => x + y, 0);
    t.sub.textContent = (typeLabel ? typeLabel + ' · ' : '') + root.Flame.formatValue(total, (tl && tl.units) || '');
    t.c.width = t.c.clientWidth || 220;
    ctx.drawSeries(t.c, samples, '#d0643c', null);
    entry.total = total;
    entry.points = samples.length;
    out.push(entry);
  }

  /*
   * Every service's profile types in one Connect Series call (label names
   * service_name and __profile_type__): Map service -> sorted types.
   */
  async function allTypes(ctx, range) {
    const r = await ctx.connect('Series', {
      matchers: ['{}'], labelNames: ['service_name', '__profile_type__'],
      start: ctx.secs(range.from) * 1000, end: ctx.secs(range.until) * 1000,
    });
    const out = new Map();
    for (const set of r.labelsSet || []) {
      const l = Object.fromEntries((set.labels || []).map((p) => [p.name, p.value]));
      if (!l.service_name || !l.__profile_type__) continue;
      if (!out.has(l.service_name)) out.set(l.service_name, []);
      out.get(l.service_name).push(l.__profile_type__);
    }
    for (const list of out.values()) list.sort();
    return out;
  }
  /* One type's timeline per service: a one-node render grouped by service_name. Map service -> {timeline, units}. */
  async function timelines(type, range) {
    const p = new URLSearchParams({ query: type + '{}', format: 'json', maxNodes: '1', groupBy: 'service_name',
      from: range.from, until: range.until });
    const r = await fetch('pyroscope/render?' + p.toString());
    const out = new Map();
    if (!r.ok) return out;
    const doc = await r.json();
    for (const [service, timeline] of Object.entries(doc.groups || {})) {
      out.set(service, { timeline, units: doc.metadata && doc.metadata.units });
    }
    return out;
  }

  /*
   * page=overview: the services. Resolves with [{service, type, total}] of the
   * tiles drawn. Requests: one Series and one grouped render per distinct
   * main type (not one of each per service: 50 services draw in 3 requests).
   */
  async function services(ctx, box) {
    const range = ctx.range();
    const types = await allTypes(ctx, range);
    const names = [...types.keys()].sort();
    heading(box, 'Services', names.length ? '' : 'No service has profiles in this range.');
    const grid = document.createElement('div');
    grid.className = 'tiles';
    box.appendChild(grid);
    const out = [];
    const byType = new Map(); /* main type -> its services' timelines (a promise) */
    await Promise.all(names.map(async (service) => {
      const t = tile(grid, ctx.href({ page: 'service', service, type: '' }), service, 'its profile types');
      const list = types.get(service);
      const type = mainType(list);
      t.a.title = service + ': ' + type + ' (click: its ' + list.length + ' profile types)';
      if (!byType.has(type)) byType.set(type, timelines(type, range));
      /* a service the grouped answer lacks: its own render */
      const tl = (await byType.get(type)).get(service) || (await timeline(service, type, range));
      fillTile(ctx, t, tl, root.Flame.typeName(type), out, { service, type });
    }));
    return out;
  }

  /* page=service: one service's profile types. */
  async function types(ctx, box) {
    const range = ctx.range();
    const service = ctx.state.service;
    const list = await typesOf(ctx, service, range);
    const back = document.createElement('a');
    back.href = ctx.href({ page: 'overview', service: '', type: '' });
    back.textContent = '← all services';
    box.appendChild(back);
    heading(box, service + ': profile types', list.length ? '' : 'No profiles of this service in this range.');
    const grid = document.createElement('div');
    grid.className = 'tiles';
    box.appendChild(grid);
    const out = [];
    await Promise.all(list.map(async (type) => {
      const t = tile(grid, ctx.href({ page: '', service, type }), root.Flame.typeName(type), type);
      fillTile(ctx, t, await timeline(service, type, range), '', out, { service, type });
    }));
    return out;
  }
  function heading(box, text, note) {
    const h = document.createElement('h3');
    h.textContent = text;
    box.appendChild(h);
    if (note) {
      const p = document.createElement('p');
      p.textContent = note;
      box.appendChild(p);
    }
  }

  /* Draws the page state.page names into #page; resolves with its tiles. */
  async function show(ctx) {
    const box = $('page');
    box.innerHTML = '';
    const tiles = ctx.state.page === 'service' ? await types(ctx, box) : await services(ctx, box);
    /* the grid's order is by name whatever order the answers came in */
    tiles.sort((a, b) => (a.service + a.type < b.service + b.type ? -1 : 1));
    return tiles;
  }

  root.OverviewView = { show };
})(this);
