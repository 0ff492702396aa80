// The UI's flame-graph model and layout (ui/flame.js), with exact numbers.
// Run: node --test tests/ui/
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const Flame = require('../../ui/flame.js');

// total 100 -> main 100 -> {a 60 (self 20) -> c 40, b 40}
const simple = {
  names: ['total', 'main', 'a', 'b', 'c'],
  levels: [[0, 100, 0, 0], [0, 100, 0, 1], [0, 60, 20, 2, 0, 40, 40, 3], [0, 40, 40, 4]],
};

const rects = (rs) => rs.map((r) => [r.level, r.block ? r.block.name : 'merged', +r.x.toFixed(3), +r.w.toFixed(3), r.merged]);

test('decode: absolute x from deltas, parents by containment', () => {
  const lv = Flame.decode(simple);
  assert.deepEqual(lv[2].map((b) => [b.name, b.x, b.total, b.self, b.parent]), [['a', 0, 60, 20, 0], ['b', 60, 40, 40, 0]]);
  assert.deepEqual(lv[3].map((b) => [b.name, b.x, b.parent]), [['c', 0, 0]]);
  // a gap: the delta counts from the end of the previous block
  const gap = Flame.decode({ names: ['t', 'x', 'y'], levels: [[0, 10, 0, 0], [1, 3, 3, 1, 2, 4, 4, 2]] });
  assert.deepEqual(gap[1].map((b) => [b.name, b.x]), [['x', 1], ['y', 6]]);
});

test('layout: rectangles scaled to the width', () => {
  const lv = Flame.decode(simple);
  assert.deepEqual(rects(Flame.layout(lv, 1000)), [
    [0, 'total', 0, 1000, 0], [1, 'main', 0, 1000, 0],
    [2, 'a', 0, 600, 0], [2, 'b', 600, 400, 0], [3, 'c', 0, 400, 0],
  ]);
});

test('layout: focus spans the width, ancestors full width, siblings gone', () => {
  const lv = Flame.decode(simple);
  const rs = Flame.layout(lv, 1000, { focus: { level: 2, index: 0 } });
  assert.deepEqual(rects(rs), [
    [1, 'main', 0, 1000, 0], [0, 'total', 0, 1000, 0],
    [2, 'a', 0, 1000, 0], [3, 'c', 0, 666.667, 0],
  ]);
  assert.deepEqual(rs.map((r) => r.ancestor), [true, true, false, false]);
  // b (x 60, 40 wide) focused: it spans the width; a and a's child c are outside
  assert.deepEqual(rects(Flame.layout(lv, 1000, { focus: { level: 2, index: 1 } })), [
    [1, 'main', 0, 1000, 0], [0, 'total', 0, 1000, 0], [2, 'b', 0, 1000, 0],
  ]);
});

test('layout: narrow neighbours merge into one grey block', () => {
  const l1 = [0, 990, 990, 1];
  for (let i = 0; i < 10; i++) l1.push(0, 1, 1, 2);
  const lv = Flame.decode({ names: ['total', 'big', 'tiny'], levels: [[0, 1000, 0, 0], l1] });
  assert.deepEqual(rects(Flame.layout(lv, 100, { minPx: 2 })), [
    [0, 'total', 0, 100, 0], [1, 'big', 0, 99, 0], [1, 'merged', 99, 1, 10],
  ]);
});

// total 15 -> main 15 -> {f 10 -> f 10 (self 10), g 5 (self 5)}
const recursive = {
  names: ['total', 'main', 'f', 'g'],
  levels: [[0, 15, 0, 0], [0, 15, 0, 1], [0, 10, 0, 2, 0, 5, 5, 3], [0, 10, 10, 2]],
};

test('table: self and total per function, recursion counted once, sorted by self', () => {
  const t = Flame.table(Flame.decode(recursive));
  assert.deepEqual(t.map((r) => [r.name, r.self, r.total]), [['f', 10, 10], ['g', 5, 5], ['main', 0, 15]]);
});

// total 15 -> main 15 -> {f 10 -> g 10 -> f 10 (self 10), g 5 (self 5)}: f calls itself through g
const indirect = {
  names: ['total', 'main', 'f', 'g'],
  levels: [[0, 15, 0, 0], [0, 15, 0, 1], [0, 10, 0, 2, 0, 5, 5, 3], [0, 10, 0, 3], [0, 10, 10, 2]],
};

test('table and search: recursion through another function counted once', () => {
  const lv = Flame.decode(indirect);
  assert.deepEqual(Flame.table(lv).map((r) => [r.name, r.self, r.total]), [['f', 10, 10], ['g', 5, 15], ['main', 0, 15]]);
  assert.deepEqual(Flame.searchStats(lv, Flame.matcher('f')), { count: 2, total: 10, share: 10 / 15 });
  assert.deepEqual(Flame.searchStats(lv, Flame.matcher('g')), { count: 2, total: 15, share: 1 });
});

test('search: matches, and the share of the outermost matches', () => {
  const lv = Flame.decode(recursive);
  assert.deepEqual(Flame.searchStats(lv, Flame.matcher('F')), { count: 2, total: 10, share: 10 / 15 });
  assert.deepEqual(Flame.searchStats(lv, Flame.matcher('/^(g|main)$/')), { count: 2, total: 15, share: 1 });
  assert.equal(Flame.matcher(''), null);
  assert.equal(Flame.matcher('/(/')('x'), false); // a bad regex matches nothing
});

test('packages, hues and units', () => {
  assert.equal(Flame.packageOf('net/http.(*conn).serve'), 'net/http');
  assert.equal(Flame.packageOf('runtime.mallocgc'), 'runtime');
  assert.equal(Flame.packageOf('std::vector::push_back'), 'std');
  // a hue is a whole number of degrees, the same for the same package every time
  for (const pkg of ['runtime', 'net/http', 'std', '']) {
    const h = Flame.hue(pkg);
    assert.ok(Number.isInteger(h) && h >= 0 && h < 360, `${pkg}: ${h}`);
    assert.equal(Flame.hue(pkg.slice()), h);
  }
  assert.equal(Flame.formatValue(1500000, 'samples'), '1.50 ms');
  assert.equal(Flame.formatValue(2.5e9, 'nanoseconds'), '2.50 s');
  assert.equal(Flame.formatValue(3 * 1048576, 'bytes'), '3.00 MB');
  assert.equal(Flame.formatValue(42, 'objects'), '42');
});

// baseline: main 20 = a 10 + b 10; comparison: main 40 = a 10 + b 30
const diff = {
  names: ['total', 'main', 'a', 'b'],
  levels: [[0, 20, 0, 0, 40, 0, 0], [0, 20, 0, 0, 40, 0, 1], [0, 10, 10, 0, 10, 10, 2, 0, 10, 10, 0, 30, 30, 3]],
};

test('diff: both sides drawn together, each side kept for its table', () => {
  const d = Flame.decodeDiff(diff);
  assert.deepEqual(d.levels[2].map((b) => [b.name, b.x, b.total, b.left, b.right, b.leftSelf, b.rightSelf]),
    [['a', 0, 20, 10, 10, 10, 10], ['b', 20, 40, 10, 30, 10, 30]]);
  assert.deepEqual(d.left[2].map((b) => [b.name, b.x, b.total]), [['a', 0, 10], ['b', 10, 10]]);
  assert.deepEqual(d.right[2].map((b) => [b.name, b.x, b.total]), [['a', 0, 10], ['b', 10, 30]]);
  assert.deepEqual(rects(Flame.layout(d.levels, 600)).slice(2), [[2, 'a', 0, 200, 0], [2, 'b', 200, 400, 0]]);
});

test('diff: change of share, and the table', () => {
  assert.deepEqual(Flame.diffChange(10, 30, 20, 40), { change: 0.5, kind: 'grew' });
  assert.deepEqual(Flame.diffChange(10, 10, 20, 40), { change: -0.5, kind: 'shrank' });
  assert.deepEqual(Flame.diffChange(10, 20, 20, 40), { change: 0, kind: 'same' });
  assert.deepEqual(Flame.diffChange(0, 5, 20, 40), { change: Infinity, kind: 'grew' });
  // under a 5% change of share is 'same': 50% -> 52% is +4%, 50% -> 53% is +6%
  assert.equal(Flame.diffChange(100, 208, 200, 400).kind, 'same');
  assert.equal(Flame.diffChange(100, 212, 200, 400).kind, 'grew');
  assert.equal(Flame.diffChange(100, 188, 200, 400).kind, 'shrank'); // 47%: -6%
  const t = Flame.diffTable(Flame.decodeDiff(diff), 20, 40);
  assert.deepEqual(t.map((r) => [r.name, r.baseline, r.comparison, r.change]), [['b', 10, 30, 0.5], ['a', 10, 10, -0.5]]);
});

test('fromPaths: weighted paths become a flamebearer', () => {
  const fb = Flame.fromPaths([{ path: ['m', 'a'], value: 3 }, { path: ['m', 'b'], value: 2 }, { path: ['m'], value: 1 }]);
  assert.deepEqual(fb.names, ['total', 'm', 'a', 'b']);
  assert.deepEqual(fb.levels, [[0, 6, 0, 0], [0, 6, 1, 1], [0, 3, 3, 2, 0, 2, 2, 3]]);
});

// total 30 -> main 30 -> {x 20 -> f 20 -> {g 5, f 15 -> h 15}, y 10 -> f 10 (self)}
test('sandwich: callees and callers of a function, recursion counted once', () => {
  const levels = Flame.decode({
    names: ['total', 'main', 'x', 'y', 'f', 'g', 'h'],
    levels: [[0, 30, 0, 0], [0, 30, 0, 1], [0, 20, 0, 2, 0, 10, 0, 3], [0, 20, 0, 4, 0, 10, 10, 4], [0, 5, 5, 5, 0, 15, 0, 4], [5, 15, 15, 6]],
  });
  const s = Flame.sandwich(levels, 'f');
  const flat = (lv) => lv.map((l) => l.map((b) => [b.name, b.total, b.self]));
  // callees: f 30 (self 10 from under y) -> g 5, f 15 -> h 15
  assert.deepEqual(flat(s.callees), [[['total', 30, 0]], [['f', 30, 10]], [['g', 5, 5], ['f', 15, 0]], [['h', 15, 15]]]);
  // callers: f 30 -> x 20 -> main 20, y 10 -> main 10
  assert.deepEqual(flat(s.callers), [[['total', 30, 0]], [['f', 30, 0]], [['x', 20, 0], ['y', 10, 0]], [['main', 20, 20], ['main', 10, 10]]]);
});

test('matcherError: a bad /regex/ says why, text and good regexes do not', () => {
  assert.match(Flame.matcherError('/a(/'), /^invalid regex: /);
  assert.equal(Flame.matcherError('/^a(b|c)$/'), '');
  assert.equal(Flame.matcherError('a('), ''); // plain text, not a regex
  assert.equal(Flame.matcherError(''), '');
});

test('sortRows: both ways, ties by name', () => {
  const rows = [{ name: 'k', self: 140 }, { name: 'main', self: 0 }, { name: 'g', self: 50 }, { name: 'f', self: 0 }];
  const names = (rs) => rs.map((r) => r.name);
  assert.deepEqual(names(Flame.sortRows(rows, 'self', '')), ['k', 'g', 'f', 'main']);
  assert.deepEqual(names(Flame.sortRows(rows, 'self', 'desc')), ['k', 'g', 'f', 'main']);
  assert.deepEqual(names(Flame.sortRows(rows, 'self', 'asc')), ['f', 'main', 'g', 'k']);
  assert.deepEqual(names(Flame.sortRows(rows, 'name', '')), ['f', 'g', 'k', 'main']);
  assert.deepEqual(names(Flame.sortRows(rows, 'name', 'desc')), ['main', 'k', 'g', 'f']);
  assert.deepEqual(names(rows), ['k', 'main', 'g', 'f'], 'the input is not reordered');
});

test('pathOf and findPath: a focus follows its stack into another answer', () => {
  const lv = Flame.decode(simple);
  assert.deepEqual(Flame.pathOf(lv, 3, 0), ['main', 'a', 'c']);
  assert.deepEqual(Flame.pathOf(lv, 2, 1), ['main', 'b']);
  // the same stacks in another order: total -> main -> {b 40, a 60 -> c 40}
  const other = Flame.decode({
    names: ['total', 'main', 'b', 'a', 'c'],
    levels: [[0, 100, 0, 0], [0, 100, 0, 1], [0, 40, 40, 2, 0, 60, 20, 3], [40, 40, 40, 4]],
  });
  assert.deepEqual(Flame.findPath(other, ['main', 'a', 'c']), { level: 3, index: 0 });
  assert.deepEqual(Flame.findPath(other, ['main', 'a']), { level: 2, index: 1 });
  assert.equal(Flame.findPath(other, ['main', 'b', 'c']), null);
  assert.equal(Flame.findPath(other, []), null);
});

test('parseQuery: Pyroscope queries pasted into the filter', () => {
  assert.deepEqual(Flame.parseQuery('{service_name="x", region="y"}'), { type: '', service: 'x', filter: 'region="y"' });
  assert.deepEqual(Flame.parseQuery('process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="shop",pod=~"a.*" , zone!="b"}'),
    { type: 'process_cpu:cpu:nanoseconds:cpu:nanoseconds', service: 'shop', filter: 'pod=~"a.*",zone!="b"' });
  assert.deepEqual(Flame.parseQuery('worker="3"'), { type: '', service: '', filter: 'worker="3"' });
  assert.deepEqual(Flame.parseQuery('{}'), { type: '', service: '', filter: '' });
  assert.deepEqual(Flame.parseQuery('memory:alloc_space:bytes:space:bytes'),
    { type: 'memory:alloc_space:bytes:space:bytes', service: '', filter: '' });
  assert.deepEqual(Flame.parseQuery('{service_name="a\\"b"}'), { type: '', service: 'a"b', filter: '' });
  assert.throws(() => Flame.parseQuery('{service_name="x"'), /ends with }/);
  assert.throws(() => Flame.parseQuery('{region=y}'), /not a label matcher/);
});

test('typeName: friendly names, the id when unknown', () => {
  assert.equal(Flame.typeName('process_cpu:cpu:nanoseconds:cpu:nanoseconds'), 'CPU');
  assert.equal(Flame.typeName('memory:alloc_space:bytes:space:bytes'), 'Memory allocated (bytes)');
  assert.equal(Flame.typeName('memory:inuse_objects:count:space:bytes'), 'Memory in use (objects)');
  assert.equal(Flame.typeName('custom:thing:count::'), 'custom:thing:count::');
});

test('timeTicks: whole local steps at least minGap apart', () => {
  // 1000 s over 500 px, 80 px apart: 160 s at least -> 300 s steps (5 min), UTC.
  assert.deepEqual(Flame.timeTicks(1000, 2000, 500, 0, 80), [{ t: 1200, x: 100 }, { t: 1500, x: 250 }, { t: 1800, x: 400 }]);
  // One day over 4800 px: 18 s a pixel, 1440 s at least -> 1800 s; at
  // UTC+5:30 (offset -330 min) local half hours are whole UTC half hours: 0, 1800, ...
  const day = Flame.timeTicks(0, 86400, 4800, -330, 80);
  assert.equal(day[0].t, 0);
  assert.equal(day[1].t - day[0].t, 1800);
  // Over 600 px: 144 s a pixel, 11520 s at least -> 6 h steps on local 00,
  // 06, 12, 18 h: local 06:00 at UTC+5:30 is UTC 00:30, t = 1800.
  const wide = Flame.timeTicks(0, 86400, 600, -330, 80);
  assert.equal(wide[1].t - wide[0].t, 21600);
  assert.equal(wide[0].t, 1800);
  assert.equal(wide[0].x, 1800 / 144);
  assert.deepEqual(Flame.timeTicks(5, 5, 100, 0), []);
});

test('countType: the count type of the same profile, when the service has it', () => {
  const types = ['process_cpu:cpu:nanoseconds:cpu:nanoseconds', 'process_cpu:samples:count:cpu:nanoseconds',
    'memory:alloc_space:bytes:space:bytes', 'memory:alloc_objects:count:space:bytes', 'memory:inuse_space:bytes:space:bytes'];
  assert.deepEqual(Flame.countType(types[0], types), { id: types[1], label: 'Samples' });
  assert.deepEqual(Flame.countType(types[2], types), { id: types[3], label: 'Objects' });
  // no inuse_objects among the types; counts have no count of their own
  assert.equal(Flame.countType(types[4], types), null);
  assert.equal(Flame.countType(types[1], types), null);
  // another period type is another profile
  assert.equal(Flame.countType('process_cpu:cpu:nanoseconds:cpu:nanoseconds', ['process_cpu:samples:count::']), null);
});
