'use strict';
// Causal clocks passed between transactions and connections: the client keeps the commit time of its last
// transaction (`getLastCommitTimestamp()`) and sends `minSnapshotTime` as the start timestamp of the next one. A
// commit time handed to another connection as its `minSnapshotTime` makes the commit visible there, along chains
// of connections too (monotonic sessions across connections).

const assert = require('node:assert/strict');
const h = require('./harness');

const { test } = h.suite();
const { write, read, read1, mergeClocks, decodeClock, encodeClock, ByteBuffer } = h;

test('a commit time is a Causet clock of one DC', async (ctx) => {
  const conn = ctx.connect();
  assert.equal(conn.getLastCommitTimestamp(), undefined, 'a new connection has no commit time');
  const clock = await write(conn, conn.counter('k').increment(1));
  const entries = decodeClock(clock);
  assert.equal(entries.length, 1);
  assert.ok(entries[0] > 0n);
  assert.deepEqual(decodeClock(conn.getLastCommitTimestamp()), entries);
});

test('a static commit time given to another connection makes the write visible to it', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const r = a.register('k');
  await write(a, r.set('from-a'));
  b.minSnapshotTime = a.getLastCommitTimestamp();
  assert.equal(await b.register('k').read(), 'from-a');
  const tx = await b.startTransaction();
  assert.equal(await tx.register('k').read(), 'from-a');
  await tx.commit();
});

test('an interactive commit time given to another connection, for a static read', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const tx = await a.startTransaction();
  await tx.update(tx.set('k').addAll(['p', 'q']));
  await tx.commit();
  b.minSnapshotTime = a.getLastCommitTimestamp();
  assert.deepEqual(await b.set('k').read(), ['p', 'q']);
});

test('a causal chain across three connections', async (ctx) => {
  const [a, b, c] = [ctx.connect(), ctx.connect(), ctx.connect()];
  await write(a, a.counter('x').increment(1));
  b.minSnapshotTime = a.getLastCommitTimestamp();
  const tx = await b.startTransaction();
  assert.equal(await tx.counter('x').read(), 1);
  await tx.update(tx.counter('y').increment(1));
  await tx.commit();
  // c only knows b's commit time; it sees b's write and a's, which b's write depends on.
  c.minSnapshotTime = b.getLastCommitTimestamp();
  assert.deepEqual(await c.readBatch([c.counter('x'), c.counter('y')]), [1, 1]);
});

test('a session of static requests on one connection reads its writes (MV register)', async (ctx) => {
  const conn = ctx.connect();
  const r = conn.multiValueRegister('k');
  await conn.update(r.set('lightkone'));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  assert.deepEqual(await r.read(), ['lightkone']);
  await conn.update(r.set('syncfree'));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  assert.deepEqual(await r.read(), ['syncfree']);
});

test('a static read\'s commit time (its snapshot) carries the session forward', async (ctx) => {
  const [a, b, c] = [ctx.connect(), ctx.connect(), ctx.connect()];
  const written = await write(a, a.counter('k').increment(4));
  b.minSnapshotTime = written;
  assert.equal(await b.counter('k').read(), 4);
  // The client keeps the read's snapshot as its last commit time; it is at or after a's commit.
  const snapshot = b.getLastCommitTimestamp();
  assert.ok(snapshot && snapshot.remaining() > 0, 'a static read answers its snapshot');
  const [r, w] = [decodeClock(snapshot), decodeClock(written)];
  assert.ok(r.every((x, i) => x >= w[i]), `read snapshot ${r} before the commit ${w}`);
  c.minSnapshotTime = snapshot;
  assert.equal(await c.counter('k').read(), 4);
});

test('commit times grow along a causal chain', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const first = decodeClock(await write(a, a.counter('k').increment(1)));
  b.minSnapshotTime = a.getLastCommitTimestamp();
  const tx = await b.startTransaction();
  await tx.update(tx.counter('k').increment(1));
  const second = decodeClock((await tx.commit()).commitTime);
  assert.equal(second.length, first.length);
  assert.ok(second.every((s, i) => s >= first[i]) && second.some((s, i) => s > first[i]), `${second} after ${first}`);
});

test('client quirk: monotonicSnapshots does not follow commits by itself; setLastCommitTimestamp does', async (ctx) => {
  // The client documents that with monotonicSnapshots = true, minSnapshotTime follows the last commit time, but
  // antidote_ts_client 0.2.2 stores commit times without calling setLastCommitTimestamp, the only place that
  // updates minSnapshotTime. A client gap, pinned here; the suite's sessions set minSnapshotTime themselves.
  const a = ctx.connect();
  a.monotonicSnapshots = true;
  await a.update(a.counter('k').increment(1));
  assert.ok(a.getLastCommitTimestamp());
  assert.equal(a.minSnapshotTime, undefined, 'the client now updates minSnapshotTime: drop this pin');
  // Calling it by hand (it exists on the connection, though not in the typings) gives the documented session.
  a.setLastCommitTimestamp(a.getLastCommitTimestamp());
  assert.equal(a.minSnapshotTime, a.getLastCommitTimestamp());
  const b = ctx.connect();
  b.monotonicSnapshots = true;
  b.setLastCommitTimestamp(a.minSnapshotTime);
  assert.equal(await b.counter('k').read(), 1);
});

test('an empty minSnapshotTime means no clock', async (ctx) => {
  const conn = ctx.connect();
  await write(conn, conn.counter('k').increment(2));
  conn.minSnapshotTime = ByteBuffer.wrap(Buffer.alloc(0));
  assert.equal(await conn.counter('k').read(), 2);
  await conn.update(conn.counter('k').increment(1));
  const tx = await conn.startTransaction();
  await tx.commit();
});

const INVALID_CLOCKS = {
  garbage: ByteBuffer.wrap(Buffer.from('\u0000garbage', 'latin1')),
  truncated: ByteBuffer.wrap(Buffer.from([0x01, 0x00])),
  'wrong number of DCs': encodeClock([1, 2, 3]),
  'far future': encodeClock([(1n << 63n) | 12345n]),
};

for (const [name, clock] of Object.entries(INVALID_CLOCKS)) {
  test(`an invalid minSnapshotTime (${name}) is refused with a message; the connection goes on`, async (ctx) => {
    const conn = ctx.connect();
    const k = conn.counter('k');
    conn.minSnapshotTime = clock;
    await h.rejectsWith(conn.startTransaction(), /^Antidote-PB Error code 0:\n.*clock/s);
    await h.rejectsWith(k.read(), /^Antidote-PB Error code 0:\n.*clock/s);
    await h.rejectsWith(conn.update(k.increment(1)), /^Antidote-PB Error code 0:\n.*clock/s);
    // The connection is still usable, and nothing was written.
    conn.minSnapshotTime = undefined;
    assert.equal(await k.read(), 0);
  });
}

test('the merged clock of two connections sees both writes', async (ctx) => {
  const [a, b, c] = [ctx.connect(), ctx.connect(), ctx.connect()];
  await write(a, a.counter('x').increment(1));
  await write(b, b.counter('y').increment(1));
  const clock = mergeClocks(a.getLastCommitTimestamp(), b.getLastCommitTimestamp());
  assert.deepEqual(await read(c, [c.counter('x'), c.counter('y')], clock), [1, 1]);
});

test('a transaction without a clock sees the commits acknowledged before it started (one DC)', async (ctx) => {
  // In one DC a snapshot without a client clock is taken at the DC's current time, so it includes every commit
  // acknowledged before the request, whichever connection made it.
  const conns = [0, 1, 2, 3].map(() => ctx.connect());
  for (let i = 0; i < 12; i++) {
    const [writer, reader] = [conns[i % 4], conns[(i + 1 + Math.floor(i / 4)) % 4]];
    await writer.update(writer.counter('k').increment(1));
    reader.minSnapshotTime = undefined;
    assert.equal(await reader.counter('k').read(), i + 1);
  }
});

test('a clock from a static read of one connection serves an interactive transaction of another', async (ctx) => {
  const [a, b] = [ctx.connect(), ctx.connect()];
  await write(a, a.set('s').add('v'));
  assert.deepEqual(await read1(a, a.set('s')), ['v']);
  b.minSnapshotTime = a.getLastCommitTimestamp(); // the read's snapshot
  const tx = await b.startTransaction();
  assert.deepEqual(await tx.set('s').read(), ['v']);
  await tx.commit();
});
