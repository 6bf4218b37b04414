'use strict';
// Batch reads of many objects in one request (`readBatch`, `readObjectsBatch`), static and in transactions, in
// the order asked; batch updates of many objects; large values (the client's own "big batch-reads", scaled to fit
// the server's default 16 MiB frame limit).

const assert = require('node:assert/strict');
const h = require('./harness');

const { test } = h.suite();
const { write, read } = h;

test('a static batch read of 250 counters answers every value in the order asked', async (ctx) => {
  const conn = ctx.connect();
  const counters = Array.from({ length: 250 }, (_, i) => conn.counter(`c${i}`));
  await write(conn, counters.map((c, i) => c.increment(i * 3 - 100)));
  // Read in a shuffled order: the client pairs values with objects by position only.
  const order = counters.map((_, i) => (i * 97) % 250);
  const values = await read(conn, order.map((i) => counters[i]));
  assert.deepEqual(values, order.map((i) => i * 3 - 100));
});

test('a batch read of 150 objects of every type, static and in a transaction', async (ctx) => {
  const conn = ctx.connect();
  const kinds = [
    [(f, k) => f.counter(k), (o, i) => o.increment(i), (i) => i],
    [(f, k) => f.fatCounter(k), (o, i) => o.increment(-i), (i) => -i],
    [(f, k) => f.set(k), (o, i) => o.addAll([`t${i}`, `s${i}`]), (i) => [`s${i}`, `t${i}`]],
    [(f, k) => f.set_removeWins(k), (o, i) => o.add(`r${i}`), (i) => [`r${i}`]],
    [(f, k) => f.register(k), (o, i) => o.set({ i }), (i) => ({ i })],
    [(f, k) => f.multiValueRegister(k), (o, i) => o.set(i), (i) => [i]],
    [(f, k) => f.flag_ew(k), (o, i) => o.set(i % 2 === 0), (i) => i % 2 === 0],
    [(f, k) => h.flagDw(f, k), (o, i) => o.set(i % 3 === 0), (i) => i % 3 === 0],
    [(f, k) => f.gmap(k), (o, i) => o.counter('n').increment(i + 1), (i) => ({ n: i + 1 })],
    [(f, k) => f.rrmap(k), (o, i) => o.register('r').set(`v${i}`), (i) => ({ r: `v${i}` })],
  ];
  const items = Array.from({ length: 150 }, (_, i) => [kinds[i % kinds.length], i]);
  await write(conn, items.map(([[make, op], i]) => op(make(conn, `o${i}`), i)));
  const expected = items.map(([[, , value], i]) => value(i));
  const plain = (v) => (v && typeof v.toJsObject === 'function' ? v.toJsObject() : v);
  const values = await read(conn, items.map(([[make], i]) => make(conn, `o${i}`)));
  assert.deepEqual(values.map(plain), expected);
  const tx = await conn.startTransaction();
  const inTx = await tx.readBatch(items.map(([[make], i]) => make(tx, `o${i}`)));
  assert.deepEqual(inTx.map(plain), expected);
  await tx.commit();
});

test('a transaction reads 200 objects it wrote and 200 it did not in one request', async (ctx) => {
  const conn = ctx.connect();
  await write(conn, Array.from({ length: 200 }, (_, i) => conn.counter(`old${i}`).increment(1)));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  const tx = await conn.startTransaction();
  await tx.update(Array.from({ length: 200 }, (_, i) => tx.counter(`new${i}`).increment(i)));
  const objs = [];
  for (let i = 0; i < 200; i++) objs.push(tx.counter(`old${i}`), tx.counter(`new${i}`));
  const values = await tx.readBatch(objs);
  assert.deepEqual(values, Array.from({ length: 200 }, (_, i) => [1, i]).flat());
  await tx.commit();
});

test('readObjectsBatch of 120 named objects', async (ctx) => {
  const conn = ctx.connect();
  const named = {};
  for (let i = 0; i < 120; i++) named[`n${i}`] = i % 2 ? conn.register(`r${i}`) : conn.set(`s${i}`);
  await write(conn, Object.entries(named).map(([name, o], i) => (i % 2 ? o.set(name) : o.add(name))));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  const values = await conn.readObjectsBatch(named);
  assert.deepEqual(values, Object.fromEntries(Object.keys(named).map((name, i) => [name, i % 2 ? name : [name]])));
});

test('a batch read of never-written objects answers initial values (the client\'s "read empty registers in batch")', async (ctx) => {
  const conn = ctx.connect();
  const objs = Array.from({ length: 100 }, (_, i) => conn.register(`empty-register-${i}`));
  assert.deepEqual(await conn.readBatch(objs), objs.map(() => null));
});

test('a batch update and read of 1000 registers of 10 KB each (the client\'s "big batch-reads", scaled down)', async (ctx) => {
  // The client's own test writes 1000 values of 165537 characters (166 MB in one request): over the server's
  // default 16 MiB frame limit (`--max-frame-bytes`), which errors.test.js checks. This one stays under it.
  const conn = ctx.connect();
  const registers = Array.from({ length: 1000 }, (_, i) => conn.register(`batch-reg-${i}`));
  const longStr = 'a'.repeat(10_000);
  await write(conn, registers.map((r, i) => r.set(`${i}:${longStr}`)));
  const values = await read(conn, registers);
  assert.equal(values.length, 1000);
  values.forEach((v, i) => assert.equal(v, `${i}:${longStr}`));
});

test('a set of 2000 elements read back whole', async (ctx) => {
  const conn = ctx.connect();
  const s = conn.set_removeWins('big');
  const elements = Array.from({ length: 2000 }, (_, i) => `element-${String(i).padStart(5, '0')}`);
  await write(conn, s.addAll(elements));
  assert.deepEqual((await read(conn, [s]))[0], elements);
});
