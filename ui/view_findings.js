/*
 * Findings (GET /api/v1/findings): the top functions by self value and the
 * hottest path, in a panel beside the flame graph on a wide window (above it
 * on a narrow one). Each finding opens the flame graph's block menu (focus,
 * sandwich, search, details) through ctx.open(name, at, x, y), where at is
 * the block of the graph it stands for ({level, index}) or null.
 */
(function (root) {
  'use strict';
  let shown = null; /* what the panel shows: {top: [{name, share}], path: [name]} */

  function item(ctx, name, text, at) {
    const b = document.createElement('button');
    b.className = 'finding';
    b.textContent = text;
    b.title = name + ' (click: focus, sandwich, search, details)';
    b.onclick = () => {
      const r = b.getBoundingClientRect();
      ctx.open(name, at(), r.left, r.bottom);
    };
    return b;
  }

  /* The widest block of a function in the graph (its top finding's block). */
  function widest(levels, name) {
    let best = null;
    for (const lv of levels) {
      for (const b of lv) {
        if (b.name === name && (!best || b.total > best.total)) best = b;
      }
    }
    return best ? { level: best.level, index: best.index } : null;
  }

  /* ctx: {url, levels() (the graph's blocks), open(name, at, x, y)} */
  async function show(el, ctx) {
    const r = await fetch(ctx.url);
    if (!r.ok) {
      hide(el);
      return null;
    }
    const f = await r.json();
    el.innerHTML = '';
    shown = { top: [], path: [] };
    const top = document.createElement('div');
    top.className = 'top';
    top.appendChild(Object.assign(document.createElement('b'), { textContent: 'Top functions' }));
    const tl = document.createElement('ol');
    for (const t of (f.top || []).slice(0, 5)) {
      const share = (100 * t.self_share).toFixed(2) + '%';
      const li = document.createElement('li');
      li.appendChild(item(ctx, t.name, t.name + ' ' + share, () => widest(ctx.levels(), t.name)));
      tl.appendChild(li);
      shown.top.push({ name: t.name, share });
    }
    top.appendChild(tl);
    const path = document.createElement('div');
    path.className = 'path';
    path.appendChild(Object.assign(document.createElement('b'), { textContent: 'Hottest path' }));
    const pl = document.createElement('ol');
    const names = (f.hottest_path || []).map((n) => n.name);
    names.forEach((n, i) => {
      const li = document.createElement('li');
      li.appendChild(item(ctx, n, n, () => Flame.findPath(ctx.levels(), names.slice(0, i + 1))));
      pl.appendChild(li);
    });
    shown.path = names;
    path.appendChild(pl);
    el.append(top, path);
    return shown;
  }

  function hide(el) {
    el.innerHTML = '';
    shown = null;
  }

  root.FindingsView = { show, hide, drawn: () => shown };
})(this);
