'use strict';
// CRDT semantics as the TS client sees them: sequential effects, resets, nested maps and removals, and the conflict
// resolution of each type when two transactions run concurrently (both start before either commits).

const assert = require('node:assert/strict');
const h = require('./harness');

const { test } = h.suite();
const { write, read1, read, concurrent, mergeClocks, resetOp, Long } = h;

// Counters --------------------------------------------------------------------------------------------------------

for (const kind of ['counter', 'fatCounter']) {
  test(`${kind}: increments and decrements add up, static and interactive`, async (ctx) => {
    const conn = ctx.connect();
    const c = conn[kind]('k');
    for (const n of [5, -3, 10, -1, 0]) await write(conn, c.increment(n));
    await write(conn, [c.increment(2), c.increment(2), c.increment(-1)]);
    conn.minSnapshotTime = conn.getLastCommitTimestamp();
    const tx = await conn.startTransaction();
    await tx.update(tx[kind]('k').increment(100));
    await tx.update(c.increment(-50));
    assert.equal(await tx[kind]('k').read(), 5 - 3 + 10 - 1 + 3 + 50);
    await tx.commit();
    assert.equal(await read1(conn, c), 5 - 3 + 10 - 1 + 3 + 50);
  });
}

test('two increments from two connections sum', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  await write(a, a.counter('k').increment(3));
  await write(b, b.counter('k').increment(4));
  const clock = mergeClocks(a.getLastCommitTimestamp(), b.getLastCommitTimestamp());
  assert.equal(await read1(a, a.counter('k'), clock), 7);
});

test('counter: large increments as Long and negative totals', async (ctx) => {
  const conn = ctx.connect();
  const c = conn.counter('k');
  await write(conn, c.increment(Long.fromString('2000000000')));
  await write(conn, c.increment(Long.fromString('-2000000001')));
  assert.equal(await read1(conn, c), -1);
});

test('counter beyond 32 bits reads as an error naming the limit, not a wrapped value', async (ctx) => {
  // ApbGetCounterResp.value is a sint32: the server says so rather than send a truncated number. The increment
  // itself (a sint64) is accepted; the connection stays in step.
  const conn = ctx.connect();
  const c = conn.counter('k');
  const other = conn.counter('other');
  await write(conn, [c.increment(2 ** 31 - 1), other.increment(1)]);
  assert.equal(await read1(conn, c), 2 ** 31 - 1);
  await write(conn, c.increment(1));
  await h.rejectsWith(read1(conn, c), /^Antidote-PB Error code 0:\n.*32-bit/s);
  assert.equal(await read1(conn, other), 1);
  await write(conn, c.increment(-2));
  assert.equal(await read1(conn, c), 2 ** 31 - 2);
});

test('fatCounter: reset clears the increments it saw', async (ctx) => {
  const conn = ctx.connect();
  const c = conn.fatCounter('k');
  await write(conn, [c.increment(4), c.increment(6)]);
  await write(conn, resetOp(c));
  assert.equal(await read1(conn, c), 0);
  await write(conn, c.increment(3));
  assert.equal(await read1(conn, c), 3);
});

test('fatCounter: an increment concurrent with a reset survives it', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const c = a.fatCounter('k');
  await write(a, c.increment(10));
  const clock = await concurrent([[a, resetOp(c)], [b, c.increment(5)]], a.getLastCommitTimestamp());
  assert.equal(await read1(a, c, clock), 5);
});

for (const kind of ['counter', 'register']) {
  test(`reset of a type without reset (${kind}) is refused and changes nothing`, async (ctx) => {
    // AntidoteDB's counter_pn and register_lww have no reset operation.
    const conn = ctx.connect();
    const obj = conn[kind]('k');
    await write(conn, kind === 'counter' ? obj.increment(1) : obj.set('v'));
    conn.minSnapshotTime = conn.getLastCommitTimestamp();
    await h.rejectsWith(conn.update(resetOp(obj)), /^Antidote-PB Error code 0:\n.*reset/s);
    assert.equal(await read1(conn, obj), kind === 'counter' ? 1 : 'v');
  });
}

// Sets ------------------------------------------------------------------------------------------------------------

for (const kind of ['set', 'set_removeWins']) {
  test(`${kind}: add and remove`, async (ctx) => {
    const conn = ctx.connect();
    const s = conn[kind]('k');
    await write(conn, s.addAll(['a', 'b']));
    await write(conn, s.add('c'));
    await write(conn, s.add('a')); // already there
    assert.deepEqual(await read1(conn, s), ['a', 'b', 'c']);
    await write(conn, s.remove('b'));
    await write(conn, s.remove('zzz')); // never added: no effect
    assert.deepEqual(await read1(conn, s), ['a', 'c']);
    await write(conn, s.add('b'));
    assert.deepEqual(await read1(conn, s), ['a', 'b', 'c']);
    await write(conn, s.removeAll(['a', 'b', 'c']));
    assert.deepEqual(await read1(conn, s), []);
  });

  test(`${kind}: the client's own "add and remove" in one request, and structured elements`, async (ctx) => {
    // antidote_ts_client's tests: elements are MessagePack-encoded JavaScript values, read back in the order of
    // their encodings.
    const conn = ctx.connect();
    const s = conn[kind]('k');
    await write(conn, [s.add('x'), s.addAll(['y', [1, 2, 3]])]);
    assert.deepEqual(await read1(conn, s), [[1, 2, 3], 'x', 'y']);
    await write(conn, s.addAll(['a', 'b', 'c', 'd', 'e']));
    await write(conn, [s.remove('a'), s.removeAll(['b', 'c', 'x', 'y', [1, 2, 3]])]);
    assert.deepEqual(await read1(conn, s), ['d', 'e']);
  });

  test(`${kind}: reset empties it`, async (ctx) => {
    const conn = ctx.connect();
    const s = conn[kind]('k');
    await write(conn, s.addAll(['x', 'y', 'z']));
    await write(conn, resetOp(s));
    assert.deepEqual(await read1(conn, s), []);
    await write(conn, s.add('w'));
    assert.deepEqual(await read1(conn, s), ['w']);
  });

  test(`${kind}: many elements in one operation`, async (ctx) => {
    const conn = ctx.connect();
    const s = conn[kind]('k');
    const elements = Array.from({ length: 200 }, (_, i) => `e${String(i).padStart(3, '0')}`);
    await write(conn, s.addAll(elements));
    await write(conn, s.removeAll(elements.filter((_, i) => i % 2 === 0)));
    assert.deepEqual(await read1(conn, s), elements.filter((_, i) => i % 2 === 1));
  });
}

test('add-wins set: a concurrent add and remove of one element, the add wins', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const s = a.set('k');
  await write(a, s.addAll(['x', 'keep']));
  const clock = await concurrent([[a, s.remove('x')], [b, s.add('x')]], a.getLastCommitTimestamp());
  // Elements come in the byte order of their MessagePack encodings: 'x' (a1 78) before 'keep' (a4 6b ...).
  assert.deepEqual(await read1(a, s, clock), ['x', 'keep']);
});

test('remove-wins set: a concurrent add and remove of one element, the remove wins', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const s = a.set_removeWins('k');
  await write(a, s.addAll(['x', 'keep']));
  const clock = await concurrent([[a, s.remove('x')], [b, s.add('x')]], a.getLastCommitTimestamp());
  assert.deepEqual(await read1(a, s, clock), ['keep']);
});

// Registers -------------------------------------------------------------------------------------------------------

test('LWW register: the last assign wins', async (ctx) => {
  const conn = ctx.connect();
  const r = conn.register('k');
  for (const v of ['one', 'two', 'three']) await write(conn, r.set(v));
  assert.equal(await read1(conn, r), 'three');
  await write(conn, [r.set('four'), r.set('five')]);
  assert.equal(await read1(conn, r), 'five');
  await write(conn, r.set(['a', 'b'])); // the client's own "can be used to store and read values"
  assert.deepEqual(await read1(conn, r), ['a', 'b']);
  await write(conn, r.set(null));
  assert.equal(await read1(conn, r), null);
});

test('LWW register: concurrent assigns keep exactly one, the same for every reader', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const r = a.register('k');
  const clock = await concurrent([[a, r.set('from-a')], [b, r.set('from-b')]], undefined);
  const first = await read1(a, r, clock);
  assert.ok(first === 'from-a' || first === 'from-b', first);
  assert.equal(await read1(b, b.register('k'), clock), first);
});

test('MV register: sequential assigns keep the latest', async (ctx) => {
  const conn = ctx.connect();
  const r = conn.multiValueRegister('k');
  await write(conn, r.set(15)); // the client's own test
  assert.deepEqual(await read1(conn, r), [15]);
  await write(conn, r.set('v2'));
  assert.deepEqual(await read1(conn, r), ['v2']);
});

test('MV register: concurrent assigns are all kept until an assign that saw them', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const r = a.multiValueRegister('k');
  await write(a, r.set('base'));
  const clock = await concurrent([[a, r.set('left')], [b, r.set('right')]], a.getLastCommitTimestamp());
  assert.deepEqual(await read1(a, r, clock), ['left', 'right']);
  a.minSnapshotTime = clock;
  const tx = await a.startTransaction();
  assert.deepEqual(await tx.multiValueRegister('k').read(), ['left', 'right']);
  await tx.update(r.set('final'));
  const { commitTime } = await tx.commit();
  assert.deepEqual(await read1(b, r, mergeClocks(clock, commitTime)), ['final']);
});

test('MV register: reset empties it', async (ctx) => {
  const conn = ctx.connect();
  const r = conn.multiValueRegister('k');
  await write(conn, r.set('v'));
  await write(conn, resetOp(r));
  assert.deepEqual(await read1(conn, r), []);
});

// Flags -----------------------------------------------------------------------------------------------------------

for (const [kind, make] of [['flag_ew', (f, k) => f.flag_ew(k)], ['flag_dw', (f, k) => h.flagDw(f, k)]]) {
  test(`${kind}: enable, disable and reset`, async (ctx) => {
    const conn = ctx.connect();
    const f = make(conn, 'k');
    for (const value of [true, false, true, true, false]) {
      await write(conn, f.set(value));
      assert.equal(await read1(conn, f), value);
    }
    await write(conn, f.set(true));
    await write(conn, resetOp(f));
    assert.equal(await read1(conn, f), false);
  });
}

for (const [kind, make, winner] of [['flag_ew', (f, k) => f.flag_ew(k), true], ['flag_dw', h.flagDw, false]]) {
  test(`${kind}: a concurrent enable and disable, ${winner ? 'enable' : 'disable'} wins`, async (ctx) => {
    const a = ctx.connect();
    const b = ctx.connect();
    const f = make(a, 'k');
    await write(a, f.set(true));
    const clock = await concurrent([[a, f.set(false)], [b, f.set(true)]], a.getLastCommitTimestamp());
    assert.equal(await read1(a, f, clock), winner);
  });
}

// Maps ------------------------------------------------------------------------------------------------------------

test('grow-only map: nested objects of every kind the client can name, updated twice', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.gmap('k');
  await write(conn, [
    m.counter('count').increment(2),
    m.fatCounter('fat').increment(1),
    m.set('tags').addAll(['a', 'b']),
    m.set_removeWins('rw').add('r'),
    m.register('name').set('alice'),
    m.multiValueRegister('mv').set('m1'),
    m.flag_ew('ew').set(true),
    h.flagDw(m, 'dw').set(true),
    m.gmap('inner').counter('deep').increment(7),
    m.rrmap('rr').register('x').set('y'),
  ]);
  await write(conn, [m.counter('count').increment(3), m.set('tags').add('c'), m.gmap('inner').set('s').add(1)]);
  const v = await read1(conn, m);
  assert.deepEqual(v.toJsObject(), {
    count: 5, fat: 1, tags: ['a', 'b', 'c'], rw: ['r'], name: 'alice', mv: ['m1'], ew: true, dw: true,
    inner: { deep: 7, s: [1] }, rr: { x: 'y' },
  });
  // The typed accessors find each entry under its own type.
  assert.equal(v.counterValue('count'), 5);
  assert.equal(v.get('fat', h.T.FATCOUNTER), 1);
  assert.equal(v.counterValue('fat'), undefined, 'a FATCOUNTER entry is not a COUNTER entry');
  assert.deepEqual(v.rwsetValue('rw'), ['r']);
  assert.deepEqual(v.mvRegisterValue('mv'), ['m1']);
  assert.equal(v.flag_ewValue('ew'), true);
  assert.equal(v.flag_dwValue('dw'), true);
  assert.equal(v.gmapValue('inner').counterValue('deep'), 7);
  assert.equal(v.get('rr', h.T.RRMAP).registerValue('x'), 'y');
});

test('grow-only map: the client\'s own "should be possible to store things"', async (ctx) => {
  const conn = ctx.connect();
  const map = conn.gmap('my-gmap');
  await write(conn, [map.register('a').set('x'), map.counter('b').increment(5)]);
  assert.deepEqual((await read1(conn, map)).toJsObject(), { a: 'x', b: 5 });
});

test('grow-only map: remove is refused and changes nothing', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.gmap('k');
  await write(conn, m.counter('c').increment(1));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  await h.rejectsWith(conn.update(m.remove(m.counter('c'))), /^Antidote-PB Error code 0:\n.+/s);
  assert.deepEqual((await read1(conn, m)).toJsObject(), { c: 1 });
});

test('grow-only map: entries whose nested object is back at its initial value stay', async (ctx) => {
  // map_go has no removal: its entries stay whatever their value (a remove-resets map drops them, below).
  const conn = ctx.connect();
  const m = conn.gmap('k');
  await write(conn, [m.set('s').add('x'), m.flag_ew('f').set(false), m.register('r').set(null), m.counter('c').increment(0)]);
  await write(conn, m.set('s').remove('x'));
  assert.deepEqual((await read1(conn, m)).toJsObject(), { s: [], f: false, r: null, c: 0 });
});

test('map: one key name with two types is two entries', async (ctx) => {
  // AntidoteDB's map keys are (key, type) pairs.
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  await write(conn, [m.counter('x').increment(1), m.set('x').add('v')]);
  const v = await read1(conn, m);
  assert.equal(v.entries.length, 2);
  assert.equal(v.counterValue('x'), 1);
  assert.deepEqual(v.setValue('x'), ['v']);
  await write(conn, m.remove(m.set('x')));
  const after = await read1(conn, m);
  assert.equal(after.entries.length, 1);
  assert.equal(after.counterValue('x'), 1);
});

test('map: two operations on one nested key in one request both apply', async (ctx) => {
  // The client builds one ApbUpdateOp per nested update, so both reach the map as separate operations.
  const conn = ctx.connect();
  const m = conn.gmap('k');
  await write(conn, [m.counter('c').increment(1), m.counter('c').increment(2)]);
  assert.deepEqual((await read1(conn, m)).toJsObject(), { c: 3 });
});

test('remove-resets map: the client\'s own "store things" with a nested map', async (ctx) => {
  const conn = ctx.connect();
  const map = conn.rrmap('my-rrmap1');
  await write(conn, [
    map.register('a').set('x'),
    map.counter('b').increment(5),
    map.rrmap('c').multiValueRegister('d').set('e'),
  ]);
  assert.deepEqual((await read1(conn, map)).toJsObject(), { a: 'x', b: 5, c: { d: ['e'] } });
});

test('remove-resets map: the client\'s own "store and then remove things"', async (ctx) => {
  const conn = ctx.connect();
  const map = conn.rrmap('my-rrmap2');
  await write(conn, [
    map.multiValueRegister('a').set('x'),
    map.multiValueRegister('b').set('x'),
    map.multiValueRegister('c').set('x'),
    map.multiValueRegister('d').set('x'),
    map.set('e').addAll([1, 2, 3, 4]),
    map.counter('f').increment(5),
  ]);
  await write(conn, [
    map.remove(map.multiValueRegister('a')),
    map.removeAll([map.multiValueRegister('b'), map.multiValueRegister('c')]),
  ]);
  assert.deepEqual((await read1(conn, map)).toJsObject(), { d: ['x'], e: [1, 2, 3, 4], f: 5 });
});

async function rrmapFill(conn, m) {
  await write(conn, [
    m.fatCounter('hits').increment(4),
    m.set('tags').addAll(['a', 'b']),
    m.multiValueRegister('owner').set('ann'),
    m.flag_ew('on').set(true),
  ]);
}

test('remove-resets map: a remove resets the entry, a later update starts from the initial value', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  await rrmapFill(conn, m);
  assert.deepEqual(Object.keys((await read1(conn, m)).toJsObject()).sort(), ['hits', 'on', 'owner', 'tags']);
  await write(conn, m.removeAll([m.set('tags'), m.fatCounter('hits')]));
  assert.deepEqual((await read1(conn, m)).toJsObject(), { owner: ['ann'], on: true });
  await write(conn, [m.set('tags').add('c'), m.fatCounter('hits').increment(1)]);
  const v = (await read1(conn, m)).toJsObject();
  assert.deepEqual(v.tags, ['c']);
  assert.equal(v.hits, 1);
});

test('remove-resets map: removing an absent key changes nothing', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  await rrmapFill(conn, m);
  await write(conn, m.remove(m.set('nothing')));
  await write(conn, m.remove(m.fatCounter('tags'))); // a key of another type
  assert.deepEqual(Object.keys((await read1(conn, m)).toJsObject()).sort(), ['hits', 'on', 'owner', 'tags']);
});

test('remove-resets map: an entry updated back to its initial value disappears', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  await write(conn, [m.set('s').add('x'), m.fatCounter('n').increment(1)]);
  await write(conn, m.set('s').remove('x'));
  // An add-wins set emptied by a remove is at bottom: the entry reads as absent, as in AntidoteDB.
  assert.deepEqual((await read1(conn, m)).toJsObject(), { n: 1 });
});

test('remove-resets map: removing a key whose type has no reset (counter, LWW register) leaves it', async (ctx) => {
  // AntidoteDB's map_rr resets a removed entry; counter_pn and register_lww have no reset, so the entry stays
  // (antidote_crdt_map_rr:generate_downstream_remove gives `none`). docs/protocol.md documents the same.
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  await write(conn, [m.counter('c').increment(2), m.register('r').set('v'), m.multiValueRegister('mv').set('w')]);
  await write(conn, m.removeAll([m.counter('c'), m.register('r'), m.multiValueRegister('mv')]));
  assert.deepEqual((await read1(conn, m)).toJsObject(), { c: 2, r: 'v' });
});

test('remove-resets map: reset removes every entry', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  await rrmapFill(conn, m);
  await write(conn, resetOp(m));
  assert.deepEqual((await read1(conn, m)).toJsObject(), {});
});

test('remove-resets map: nested maps are updated and removed', async (ctx) => {
  const conn = ctx.connect();
  const m = conn.rrmap('k');
  const inner = m.rrmap('inner');
  await write(conn, [inner.set('s').add('x'), inner.rrmap('deeper').fatCounter('n').increment(3), h.flagDw(m, 'f').set(true)]);
  assert.deepEqual((await read1(conn, m)).toJsObject(), { inner: { s: ['x'], deeper: { n: 3 } }, f: true });
  // A remove inside a nested map, then of the nested map itself.
  await write(conn, inner.remove(inner.rrmap('deeper')));
  assert.deepEqual((await read1(conn, m)).toJsObject(), { inner: { s: ['x'] }, f: true });
  await write(conn, m.remove(inner));
  assert.deepEqual((await read1(conn, m)).toJsObject(), { f: true });
});

test('remove-resets map: an update concurrent with a remove survives it', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const m = a.rrmap('k');
  await write(a, [m.fatCounter('c').increment(10), m.set('s').add('old')]);
  const clock = await concurrent(
    [[a, m.removeAll([m.fatCounter('c'), m.set('s')])], [b, m.fatCounter('c').increment(5)]],
    a.getLastCommitTimestamp(),
  );
  // The remove resets what it saw (10 and "old"); the concurrent increment survives.
  assert.deepEqual((await read1(a, m, clock)).toJsObject(), { c: 5 });
});

test('remove-resets map: nested counter and register in a transaction, then a remove (the Python client tutorial)', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const m = tx.rrmap('k');
  await tx.update([m.counter('k1').increment(1), m.register('k2').set('lightkone')]);
  assert.deepEqual((await m.read()).toJsObject(), { k1: 1, k2: 'lightkone' });
  await tx.commit();
  const cm = conn.rrmap('k');
  assert.deepEqual((await read1(conn, cm)).toJsObject(), { k1: 1, k2: 'lightkone' });
  await write(conn, cm.remove(cm.counter('k1')));
  assert.equal((await read1(conn, cm)).registerValue('k2'), 'lightkone');
});

test('batch read of maps and nested reads see one snapshot', async (ctx) => {
  const conn = ctx.connect();
  const m1 = conn.rrmap('m1');
  const m2 = conn.gmap('m2');
  await write(conn, [m1.counter('x').increment(1), m2.counter('x').increment(2)]);
  const [v1, v2] = await read(conn, [m1, m2]);
  assert.deepEqual([v1.toJsObject(), v2.toJsObject()], [{ x: 1 }, { x: 2 }]);
});
