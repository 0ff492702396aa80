/*
 * Flame-graph model and layout: pure functions, no DOM, so that node's test
 * runner checks them with exact numbers (tests/ui/flame.test.js) and the
 * page (app.js) only draws what they return.
 *
 * Input is Pyroscope's flamebearer: names[] and levels[][] of 4-tuples
 * [x delta, total, self, name index], where a block's x is its delta plus
 * the end (x + total) of the block before it on the same level.
 */
(function (root) {
  'use strict';

  /* Blocks per level with absolute x: [{x, total, self, name, level, index, parent}]. */
  function decode(fb) {
    const levels = [];
    for (let d = 0; d < fb.levels.length; d++) {
      const src = fb.levels[d];
      const out = [];
      let end = 0;
      for (let i = 0; i + 3 < src.length; i += 4) {
        const x = end + src[i];
        out.push({
          x: x,
          total: src[i + 1],
          self: src[i + 2],
          name: fb.names[src[i + 3]],
          level: d,
          index: out.length,
          parent: -1,
        });
        end = x + src[i + 1];
      }
      levels.push(out);
    }
    /* A block's parent is the block of the level above that contains its x. */
    for (let d = 1; d < levels.length; d++) {
      let p = 0;
      const above = levels[d - 1];
      for (const b of levels[d]) {
        while (p < above.length && above[p].x + above[p].total <= b.x) {
          p++;
        }
        b.parent = p < above.length ? p : -1;
      }
    }
    return levels;
  }

  /*
   * Rectangles to draw for a width in pixels. focus: {level, index} or null.
   * The focused block spans the whole width and its descendants are scaled
   * to it; its ancestors are drawn full width too (marked ancestor). Blocks
   * narrower than minPx are merged with narrow neighbours into one grey
   * block per run (merged: the number of blocks in it).
   */
  function layout(levels, width, opts) {
    const minPx = (opts && opts.minPx) || 2;
    const focus = opts && opts.focus;
    let from = 0;
    let span = levels.length && levels[0].length ? levels[0][0].total : 0;
    let top = 0;
    const rects = [];
    if (focus) {
      const f = levels[focus.level][focus.index];
      from = f.x;
      span = f.total;
      top = focus.level;
      /* ancestors, full width */
      let a = f.parent;
      for (let d = focus.level - 1; d >= 0 && a >= 0; d--) {
        const b = levels[d][a];
        rects.push({ level: d, x: 0, w: width, block: b, ancestor: true, merged: 0 });
        a = b.parent;
      }
    }
    if (span <= 0) {
      return rects;
    }
    const scale = width / span;
    for (let d = top; d < levels.length; d++) {
      let run = null; /* the grey block being grown from narrow neighbours */
      for (const b of levels[d]) {
        if (b.x + b.total <= from || b.x >= from + span) {
          continue;
        }
        if (d === top && focus && b.index !== focus.index) {
          continue;
        }
        const x = (b.x - from) * scale;
        const w = b.total * scale;
        if (w < minPx) {
          if (run && Math.abs(run.x + run.w - x) < 1e-6) {
            run.w += w;
            run.merged++;
          } else {
            run = { level: d, x: x, w: w, block: null, ancestor: false, merged: 1 };
            rects.push(run);
          }
          continue;
        }
        run = null;
        rects.push({ level: d, x: x, w: w, block: b, ancestor: false, merged: 0 });
      }
    }
    return rects;
  }

  /*
   * Self and total per function name, total counted once per stack even
   * when the function recurses; sorted by self (then name).
   */
  function table(levels) {
    const byName = new Map();
    const row = (name) => {
      let r = byName.get(name);
      if (!r) {
        r = { name: name, self: 0, total: 0 };
        byName.set(name, r);
      }
      return r;
    };
    const onStack = new Map(); /* name -> depth count on the current path */
    const children = levels.map((lv) => lv.map(() => []));
    for (let d = 1; d < levels.length; d++) {
      for (const b of levels[d]) {
        if (b.parent >= 0) {
          children[d - 1][b.parent].push(b);
        }
      }
    }
    const visit = (b) => {
      const r = row(b.name);
      r.self += b.self;
      const seen = onStack.get(b.name) || 0;
      if (seen === 0) {
        r.total += b.total;
      }
      onStack.set(b.name, seen + 1);
      for (const c of children[b.level][b.index]) {
        visit(c);
      }
      onStack.set(b.name, seen);
    };
    if (levels.length) {
      for (const b of levels[0]) {
        for (const c of children[0][b.index]) {
          visit(c); /* level 0 is the "total" root */
        }
      }
    }
    return Array.from(byName.values()).sort(
      (a, b) => b.self - a.self || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    );
  }

  /* Blocks whose name matches the search (case-insensitive substring or /regex/). */
  function matcher(text) {
    if (!text) {
      return null;
    }
    const m = /^\/(.*)\/$/.exec(text);
    let test;
    if (m) {
      try {
        const re = new RegExp(m[1], 'i');
        test = (name) => re.test(name);
      } catch (e) {
        return () => false;
      }
    } else {
      const lower = text.toLowerCase();
      test = (name) => name.toLowerCase().indexOf(lower) >= 0;
    }
    /* a graph repeats its names (21,112 blocks, 52 names in the bench's): each tested once */
    const seen = new Map();
    return (name) => {
      let hit = seen.get(name);
      if (hit === undefined) seen.set(name, (hit = test(name)));
      return hit;
    };
  }

  /* Matches and their share: the total of matching blocks not under another match. */
  function searchStats(levels, match) {
    let count = 0;
    let total = 0;
    const under = levels.map((lv) => new Array(lv.length).fill(false));
    for (let d = 0; d < levels.length; d++) {
      for (const b of levels[d]) {
        const inherited = d > 0 && b.parent >= 0 && under[d - 1][b.parent];
        const hit = d > 0 && match(b.name);
        if (hit) {
          count++;
          if (!inherited) {
            total += b.total;
          }
        }
        under[d][b.index] = inherited || hit;
      }
    }
    const all = levels.length && levels[0].length ? levels[0][0].total : 0;
    return { count: count, total: total, share: all ? total / all : 0 };
  }

  /* The package of a frame, for colouring: "net/http.(*conn).serve" -> "net/http". */
  function packageOf(name) {
    const slash = name.lastIndexOf('/');
    const dot = name.indexOf('.', slash + 1);
    if (dot > 0) {
      return name.slice(0, dot);
    }
    const colons = name.indexOf('::');
    return colons > 0 ? name.slice(0, colons) : name;
  }

  /* A stable hue in [0, 360) for a string. */
  function hue(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619) >>> 0;
    }
    return h % 360;
  }

  /* A value with its unit: nanoseconds as ms/s, bytes as KB/MB/GB, else a count. */
  function formatValue(v, units) {
    const fixed = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
    if (units === 'nanoseconds' || units === 'samples') {
      /* Pyroscope calls CPU time "samples" with a 1e9 rate: both are nanoseconds here */
      if (v >= 1e9) return fixed(v / 1e9) + ' s';
      if (v >= 1e6) return fixed(v / 1e6) + ' ms';
      if (v >= 1e3) return fixed(v / 1e3) + ' µs';
      return v + ' ns';
    }
    if (units === 'bytes') {
      if (v >= 1 << 30) return fixed(v / (1 << 30)) + ' GB';
      if (v >= 1 << 20) return fixed(v / (1 << 20)) + ' MB';
      if (v >= 1 << 10) return fixed(v / (1 << 10)) + ' KB';
      return v + ' B';
    }
    if (v >= 1e6) return fixed(v / 1e6) + ' M';
    if (v >= 1e3) return fixed(v / 1e3) + ' k';
    return String(v);
  }

  /*
   * A diff ("double") flamebearer: 7-tuples [left x delta, left total, left
   * self, right x delta, right total, right self, name], each x column
   * delta-encoded on its own. Returns {levels, left, right}: levels for the
   * drawing (x and total are left + right, as Pyroscope draws a diff; each
   * block also carries its left/right totals and selfs), and each side alone
   * for its table.
   */
  function decodeDiff(fb) {
    const both = { names: fb.names, levels: [] };
    const left = { names: fb.names, levels: [] };
    const right = { names: fb.names, levels: [] };
    const sides = [];
    for (const src of fb.levels) {
      const b = [];
      const l = [];
      const r = [];
      const extra = [];
      let lend = 0; /* end (x + total) of the previous block, per column */
      let rend = 0;
      let bend = 0;
      for (let i = 0; i + 6 < src.length; i += 7) {
        const lx = lend + src[i];
        const rx = rend + src[i + 3];
        const x = lx + rx;
        l.push(src[i], src[i + 1], src[i + 2], src[i + 6]);
        r.push(src[i + 3], src[i + 4], src[i + 5], src[i + 6]);
        b.push(x - bend, src[i + 1] + src[i + 4], src[i + 2] + src[i + 5], src[i + 6]);
        extra.push({ left: src[i + 1], right: src[i + 4], leftSelf: src[i + 2], rightSelf: src[i + 5] });
        lend = lx + src[i + 1];
        rend = rx + src[i + 4];
        bend = x + src[i + 1] + src[i + 4];
      }
      both.levels.push(b);
      left.levels.push(l);
      right.levels.push(r);
      sides.push(extra);
    }
    const levels = decode(both);
    levels.forEach((lv, d) => lv.forEach((blk, i) => Object.assign(blk, sides[d][i])));
    return { levels: levels, left: decode(left), right: decode(right) };
  }

  /*
   * Whether a function grew or shrank between baseline and comparison, by its
   * share of each side's total (the sides may cover different lengths of
   * time). change is relative (+0.5 = its share grew by half); Infinity when
   * it is new.
   */
  function diffChange(left, right, leftTicks, rightTicks) {
    const ls = leftTicks ? left / leftTicks : 0;
    const rs = rightTicks ? right / rightTicks : 0;
    const change = ls ? (rs - ls) / ls : rs ? Infinity : 0;
    const kind = Math.abs(change) < 0.05 ? 'same' : change > 0 ? 'grew' : 'shrank';
    return { change: change, kind: kind };
  }

  /* Per function: baseline and comparison self, and the change of its self share. */
  function diffTable(diff, leftTicks, rightTicks) {
    const rows = new Map();
    for (const r of table(diff.left)) {
      rows.set(r.name, { name: r.name, baseline: r.self, comparison: 0 });
    }
    for (const r of table(diff.right)) {
      const row = rows.get(r.name) || { name: r.name, baseline: 0, comparison: 0 };
      row.comparison = r.self;
      rows.set(r.name, row);
    }
    const out = [];
    for (const row of rows.values()) {
      if (row.baseline === 0 && row.comparison === 0) continue;
      row.change = diffChange(row.baseline, row.comparison, leftTicks, rightTicks).change;
      out.push(row);
    }
    return out.sort((a, b) => b.comparison - a.comparison || b.baseline - a.baseline);
  }

  /*
   * A flamebearer from weighted paths ([{path: [names, root first], value}]):
   * each path adds value to the total of every node on it and to the self of
   * its last node; siblings in first-seen order. Level 0 is "total".
   */
  function fromPaths(paths) {
    const root = { name: 'total', total: 0, self: 0, children: new Map() };
    for (const p of paths) {
      let n = root;
      root.total += p.value;
      for (const name of p.path) {
        let c = n.children.get(name);
        if (!c) {
          c = { name: name, total: 0, self: 0, children: new Map() };
          n.children.set(name, c);
        }
        c.total += p.value;
        n = c;
      }
      n.self += p.value;
    }
    const names = [];
    const index = new Map();
    const levels = [];
    const ends = [];
    const emit = (n, depth, x) => {
      if (!index.has(n.name)) {
        index.set(n.name, names.length);
        names.push(n.name);
      }
      const lv = levels[depth] || (levels[depth] = []);
      lv.push(x - (ends[depth] || 0), n.total, n.self, index.get(n.name));
      ends[depth] = x + n.total;
      let cx = x;
      for (const c of n.children.values()) {
        emit(c, depth + 1, cx);
        cx += c.total;
      }
    };
    emit(root, 0, 0);
    return { names: names, levels: levels };
  }

  /* Whether a block has an ancestor (below the root) called name. */
  function underName(levels, b, name) {
    for (let p = b.parent, d = b.level - 1; d > 0 && p >= 0; d--) {
      const a = levels[d][p];
      if (a.name === name) return true;
      p = a.parent;
    }
    return false;
  }

  /*
   * The sandwich of a function, over every place it appears (outermost
   * occurrences only, so recursion is not counted twice): callees, the
   * function as root with everything it calls; callers, the function as root
   * with its callers above it, nearest first. Both as decoded levels.
   */
  /*
   * Each block's children and each name's blocks (level by level), made once
   * per answer: {children: [level][index] -> blocks, byName: Map name -> blocks}.
   * The UI warms it while idle, so a sandwich does not pay for it.
   */
  const indexes = new WeakMap();
  function indexOf(levels) {
    let ix = indexes.get(levels);
    if (ix) return ix;
    const children = levels.map((lv) => lv.map(() => []));
    const byName = new Map();
    for (let d = 1; d < levels.length; d++) {
      for (const b of levels[d]) {
        if (b.parent >= 0) children[d - 1][b.parent].push(b);
        const list = byName.get(b.name);
        if (list) list.push(b); else byName.set(b.name, [b]);
      }
    }
    ix = { children, byName };
    indexes.set(levels, ix);
    return ix;
  }
  function sandwich(levels, name) {
    const node = (n) => ({ name: n, total: 0, self: 0, children: new Map() });
    const callees = node('total');
    const callers = node('total');
    const { children, byName } = indexOf(levels);
    /* b's subtree added into n (iterative: as deep as the graph, no deeper) */
    const merge = (n, b) => {
      const stack = [[n, b]];
      while (stack.length) {
        const [into, from] = stack.pop();
        into.total += from.total;
        into.self += from.self;
        const kids = children[from.level][from.index];
        /* children made in their order, visited in it (pushed backwards) */
        const pairs = kids.map((c) => {
          let k = into.children.get(c.name);
          if (!k) into.children.set(c.name, (k = node(c.name)));
          return [k, c];
        });
        for (let i = pairs.length - 1; i >= 0; i--) stack.push(pairs[i]);
      }
    };
    for (const b of byName.get(name) || []) {
      const d = b.level;
      {
        if (underName(levels, b, name)) continue;
        callees.total += b.total;
        let top = callees.children.get(name);
        if (!top) callees.children.set(name, (top = node(name)));
        merge(top, b);
        /* its callers, nearest first, as one path weighing its total */
        callers.total += b.total;
        let n = callers.children.get(name);
        if (!n) callers.children.set(name, (n = node(name)));
        n.total += b.total;
        for (let p = b.parent, k = d - 1; k > 0 && p >= 0; k--) {
          const a = levels[k][p];
          let c = n.children.get(a.name);
          if (!c) n.children.set(a.name, (c = node(a.name)));
          c.total += b.total;
          n = c;
          p = a.parent;
        }
        n.self += b.total;
      }
    }
    return { callees: treeLevels(callees), callers: treeLevels(callers) };
  }
  /* A tree of {name, total, self, children: Map} as decoded levels (as decode() makes them). */
  function treeLevels(root) {
    const levels = [];
    let row = [{ n: root, x: 0, parent: -1 }];
    for (let d = 0; row.length; d++) {
      const out = [];
      const next = [];
      for (const r of row) {
        const b = { x: r.x, total: r.n.total, self: r.n.self, name: r.n.name, level: d, index: out.length, parent: r.parent };
        out.push(b);
        let cx = r.x;
        for (const c of r.n.children.values()) {
          next.push({ n: c, x: cx, parent: b.index });
          cx += c.total;
        }
      }
      levels.push(out);
      row = next;
    }
    return levels;
  }

  /* Why a search text cannot be used ('' when it can): an invalid /regex/. */
  function matcherError(text) {
    const m = /^\/(.*)\/$/.exec(text || '');
    if (!m) return '';
    try {
      new RegExp(m[1], 'i');
      return '';
    } catch (e) {
      return 'invalid regex: ' + e.message;
    }
  }

  /*
   * Table rows sorted by key ('name' or a number column) in order 'asc' or
   * 'desc' ('' is the column's natural order: names A-Z, numbers largest
   * first); ties by name A-Z. A new array.
   */
  function sortRows(rows, key, order) {
    const desc = order ? order === 'desc' : key !== 'name';
    const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    const cmp = key === 'name' ? byName : (a, b) => a[key] - b[key];
    return rows.slice().sort((a, b) => (desc ? cmp(b, a) : cmp(a, b)) || byName(a, b));
  }

  /* A block's stack as names from level 1 down to it (level 0 is "total"). */
  function pathOf(levels, level, index) {
    const out = [];
    for (let d = level, i = index; d > 0 && i >= 0; d--) {
      const b = levels[d][i];
      out.unshift(b.name);
      i = b.parent;
    }
    return out;
  }
  /* The block at the end of a stack of names, as {level, index}, or null. */
  function findPath(levels, path) {
    if (!path || !path.length || !levels.length) return null;
    let parent = 0;
    for (let d = 1; d <= path.length; d++) {
      const lv = levels[d];
      const b = lv && lv.find((x) => x.parent === parent && x.name === path[d - 1]);
      if (!b) return null;
      parent = b.index;
    }
    return { level: path.length, index: parent };
  }

  /*
   * A Pyroscope query pasted into the filter box: `type{matchers}`,
   * `{matchers}` or bare matchers `a="b", c=~"d"`, or a bare profile type id.
   * Returns {type, service, filter}: the type ('' if none), service_name="x"
   * taken out as the service ('' if none), the other matchers re-joined.
   * Throws Error on what is not a query.
   */
  function parseQuery(text) {
    let s = (text || '').trim();
    let type = '';
    if (/^[^{}=~!"\s]+(:[^{}=~!"\s]*){4}$/.test(s)) return { type: s, service: '', filter: '' };
    const brace = s.indexOf('{');
    if (brace >= 0) {
      type = s.slice(0, brace).trim();
      if (!s.endsWith('}')) throw new Error('a query ends with }');
      s = s.slice(brace + 1, -1);
    }
    const re = /\s*([A-Za-z_][\w.]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)/y;
    let service = '';
    const rest = [];
    let pos = 0;
    while (s.slice(pos).trim()) {
      re.lastIndex = pos;
      const m = re.exec(s);
      if (!m) throw new Error('not a label matcher: ' + s.slice(pos).trim());
      pos = re.lastIndex;
      if (m[1] === 'service_name' && m[2] === '=') {
        service = m[3].replace(/\\(.)/g, '$1');
      } else {
        rest.push(m[1] + m[2] + '"' + m[3] + '"');
      }
      if (!m[4]) break;
    }
    return { type: type, service: service, filter: rest.join(',') };
  }

  /* A profile type id in words: "CPU", "Memory allocated (bytes)", ...; else the id. */
  const TYPE_NAMES = {
    'process_cpu:cpu': 'CPU',
    'process_cpu:samples': 'CPU samples',
    'memory:alloc_space': 'Memory allocated (bytes)',
    'memory:alloc_objects': 'Memory allocations (objects)',
    'memory:inuse_space': 'Memory in use (bytes)',
    'memory:inuse_objects': 'Memory in use (objects)',
    'goroutine:goroutine': 'Goroutines',
    'goroutines:goroutine': 'Goroutines',
    'block:delay': 'Block delay',
    'block:contentions': 'Block contentions',
    'mutex:delay': 'Mutex delay',
    'mutex:contentions': 'Mutex contentions',
    'wall:wall': 'Wall time',
    'exceptions:exceptions': 'Exceptions',
  };
  /*
   * The count that goes with a type, when the service has it: a CPU time
   * type's sample count (`…:samples:count:…` of the same profile) or a bytes
   * type's object count (`alloc_space` → `alloc_objects`). {id, label} or null.
   */
  function countType(id, types) {
    const p = String(id).split(':');
    if (p.length !== 5) return null;
    let name;
    let label;
    if (p[1] === 'cpu' && p[2] === 'nanoseconds') {
      name = 'samples';
      label = 'Samples';
    } else if (p[2] === 'bytes' && /_space$/.test(p[1])) {
      name = p[1].replace(/_space$/, '_objects');
      label = 'Objects';
    } else {
      return null;
    }
    const want = [p[0], name, 'count', p[3], p[4]].join(':');
    return (types || []).includes(want) ? { id: want, label } : null;
  }
  function typeName(id) {
    const p = String(id).split(':');
    return TYPE_NAMES[p[0] + ':' + p[1]] || id;
  }

  /*
   * Time axis ticks for [start, end] seconds drawn over width pixels: whole
   * steps of local time (tzOffsetMin as Date's getTimezoneOffset) at least
   * minGap pixels apart. [{t, x}].
   */
  const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172800, 604800];
  function timeTicks(start, end, width, tzOffsetMin, minGap) {
    const span = end - start;
    if (!(span > 0) || !(width > 0)) return [];
    const gap = minGap || 80;
    const step = STEPS.find((s) => (s * width) / span >= gap) || Math.ceil((gap * span) / width / 86400) * 86400;
    const shift = -(tzOffsetMin || 0) * 60; /* local = utc + shift */
    let t = Math.ceil((start + shift) / step) * step - shift;
    const out = [];
    for (; t <= end; t += step) out.push({ t: t, x: ((t - start) / span) * width });
    return out;
  }

  const api = {
    decode, layout, table, matcher, searchStats, packageOf, hue, formatValue,
    decodeDiff, diffChange, diffTable, fromPaths, sandwich, indexOf,
    matcherError, sortRows, pathOf, findPath, parseQuery, typeName, countType, timeTicks,
  };
  if (typeof module !== 'undefined' && module.exports) {
    module.exports = api;
  } else {
    root.Flame = api;
  }
})(this);
