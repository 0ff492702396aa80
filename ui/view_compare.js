/*
 * Compare (page=compare): the diff view of app.js (two selections, each with
 * its own timeline and drag brush, the diff flame graph and the sortable diff
 * table) plus each selection's own flame graph side by side above it:
 * baseline (A: bfilter, bfrom, buntil) and comparison (B: the filter and
 * range). Data: one /pyroscope/render per side.
 * app.js hands it ctx: {sides() -> [{query, from, until}, {…}], units()}.
 */
(function (root) {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const ROW = 16;
  let drawn = { a: null, b: null }; /* per side: {total, units, rects} */

  async function fetchSide(side) {
    const p = new URLSearchParams({ query: side.query, from: side.from, until: side.until, format: 'json' });
    const r = await fetch('pyroscope/render?' + p.toString());
    const doc = await r.json();
    if (!r.ok) throw new Error(doc.message || r.statusText);
    return doc;
  }
  function draw(canvas, doc) {
    const F = root.Flame;
    const levels = F.decode(doc.flamebearer);
    const width = canvas.clientWidth || 400;
    const ratio = window.devicePixelRatio || 1;
    const rects = F.layout(levels, width, { minPx: 1 });
    const depth = levels.length;
    canvas.style.height = depth * ROW + 'px';
    canvas.width = width * ratio;
    canvas.height = depth * ROW * ratio;
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.font = '10px ui-monospace, monospace';
    ctx.textBaseline = 'middle';
    for (const r of rects) {
      r.y = (depth - 1 - r.level) * ROW;
      ctx.fillStyle = r.block ? 'hsl(' + F.hue(F.packageOf(r.block.name)) + ', 60%, 68%)' : '#c8c8c8';
      ctx.fillRect(r.x, r.y, Math.max(r.w - 0.5, 0.5), ROW - 1);
      if (r.block && r.w > 30) {
        let text = r.block.name;
        while (text.length > 1 && ctx.measureText(text).width > r.w - 6) text = text.slice(0, -1);
        ctx.fillStyle = '#111';
        ctx.fillText(text === r.block.name ? text : text.slice(0, -1) + '…', r.x + 3, r.y + ROW / 2);
      }
    }
    const total = doc.flamebearer.numTicks;
    const units = doc.metadata && doc.metadata.units;
    /* the hovered block's name and value as the canvas's title */
    canvas.onmousemove = (e) => {
      const r = rects.find((q) => q.block && e.offsetX >= q.x && e.offsetX < q.x + q.w && e.offsetY >= q.y && e.offsetY < q.y + ROW);
      canvas.title = r ? r.block.name + ': ' + F.formatValue(r.block.total, units) +
        ' (' + (total ? ((100 * r.block.total) / total).toFixed(2) : '0') + '%)' : '';
    };
    return { total, units, rects: rects.filter((r) => r.block).map((r) => ({ name: r.block.name, level: r.level, x: r.x, w: r.w, total: r.block.total })) };
  }

  /* Draws both sides into #sides; resolves when drawn. */
  async function show(ctx) {
    const [a, b] = ctx.sides();
    $('sides').hidden = false;
    const [da, db] = await Promise.all([fetchSide(a), fetchSide(b)]);
    drawn = { a: draw($('side-a'), da), b: draw($('side-b'), db) };
    const F = root.Flame;
    $('side-a-total').textContent = F.formatValue(drawn.a.total, drawn.a.units);
    $('side-b-total').textContent = F.formatValue(drawn.b.total, drawn.b.units);
    return drawn;
  }
  function hide() {
    $('sides').hidden = true;
    drawn = { a: null, b: null };
  }

  root.CompareView = { show, hide, drawn: () => drawn };
})(this);
