'use strict';
// Interactive transactions: reading their own writes, snapshot isolation, atomic visibility, aborts (the TS client's
// `abort` sends a real ApbAbortTransaction), use after commit or abort, several transactions per connection,
// pipelined requests, idle timeouts and write-write certification.

const assert = require('node:assert/strict');
const h = require('./harness');

const { test } = h.suite();
const { write, read, read1, mergeClocks, sleep } = h;

test('a transaction reads its own writes before commit; nobody else does', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const tx = await a.startTransaction();
  const [c, s, r] = [tx.counter('c'), tx.set('s'), tx.register('r')];
  await tx.update([c.increment(3), s.addAll(['x', 'y']), r.set('mine')]);
  assert.deepEqual(await tx.readBatch([c, s, r]), [3, ['x', 'y'], 'mine']);
  await tx.update([c.increment(4), s.remove('x')]);
  assert.deepEqual(await tx.readBatch([c, s]), [7, ['y']]);
  // Nobody else sees them yet.
  assert.deepEqual(await b.readBatch([b.counter('c'), b.set('s'), b.register('r')]), [0, [], null]);
  const { commitTime } = await tx.commit();
  assert.deepEqual(await read(b, [b.counter('c'), b.set('s'), b.register('r')], commitTime), [7, ['y'], 'mine']);
});

test('a transaction reads from its snapshot (snapshot isolation)', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const k = a.counter('k');
  await write(a, k.increment(1));
  b.minSnapshotTime = a.getLastCommitTimestamp();
  const tx = await b.startTransaction();
  assert.equal(await tx.counter('k').read(), 1);
  await write(a, k.increment(10)); // commits after the transaction's snapshot
  assert.equal(await tx.counter('k').read(), 1, 'a transaction keeps reading its snapshot');
  await tx.update(k.increment(100));
  assert.equal(await tx.counter('k').read(), 101);
  const { commitTime } = await tx.commit();
  assert.equal(await read1(a, k, mergeClocks(a.getLastCommitTimestamp(), commitTime)), 111);
});

test('two concurrent transactions do not see each other\'s writes; both commit', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const t1 = await a.startTransaction();
  const t2 = await b.startTransaction();
  await t1.update([t1.counter('x').increment(1), t1.set('s').add('from-1')]);
  await t2.update([t2.counter('y').increment(2), t2.set('s').add('from-2')]);
  assert.deepEqual(await t1.readBatch([t1.counter('x'), t1.counter('y'), t1.set('s')]), [1, 0, ['from-1']]);
  assert.deepEqual(await t2.readBatch([t2.counter('x'), t2.counter('y'), t2.set('s')]), [0, 2, ['from-2']]);
  const c1 = (await t1.commit()).commitTime;
  assert.deepEqual(await t2.readBatch([t2.counter('x'), t2.set('s')]), [0, ['from-2']], 'still its own snapshot');
  const c2 = (await t2.commit()).commitTime;
  assert.deepEqual(await read(a, [a.counter('x'), a.counter('y'), a.set('s')], mergeClocks(c1, c2)),
    [1, 2, ['from-1', 'from-2']]);
});

test('committed updates become visible atomically', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const names = Array.from({ length: 8 }, (_, i) => `k${i}`);
  const tx = await a.startTransaction();
  for (const n of names) await tx.update(tx.counter(n).increment(1));
  assert.deepEqual(await b.readBatch(names.map((n) => b.counter(n))), names.map(() => 0));
  const { commitTime } = await tx.commit();
  assert.deepEqual(await read(b, names.map((n) => b.counter(n)), commitTime), names.map(() => 1));
});

test('abort: the transaction\'s writes are invisible to later transactions on every connection', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const c = a.counter('c');
  const s = a.set('s');
  await write(a, c.increment(1));
  a.minSnapshotTime = a.getLastCommitTimestamp();
  const tx = await a.startTransaction();
  await tx.update([c.increment(50), s.add('ghost')]);
  assert.equal(await tx.counter('c').read(), 51);
  assert.equal(await tx.abort(), undefined);
  assert.deepEqual(await read(a, [c, s]), [1, []]);
  await write(b, c.increment(1));
  assert.deepEqual(await read(b, [c, s]), [2, []]);
});

test('abort: the client\'s own "can abort transaction" (MV register)', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const reg = tx.multiValueRegister('tr-reg2');
  const max = Math.max(0, ...(await reg.read()));
  await tx.update(reg.set(max + 1));
  await tx.abort();
  assert.deepEqual(await conn.multiValueRegister('tr-reg2').read(), []);
});

test('commit: the client\'s own "can read and update" (MV register)', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const reg = tx.multiValueRegister('tr-reg');
  const max = Math.max(0, ...(await reg.read()));
  await tx.update(reg.set(max + 1));
  await tx.commit();
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  assert.deepEqual(await conn.multiValueRegister('tr-reg').read(), [1]);
});

test('an aborted transaction cannot be used afterwards; nothing of it is written', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const k = tx.counter('k');
  await tx.update(k.increment(1));
  await tx.abort();
  // The server answers the typed failures with error code 3 (aborted). The client rejects a read with the bare
  // code and a commit with an Error; its `update` never looks at ApbOperationResp.success, so an update of an
  // aborted transaction resolves (a client gap: the failure only surfaces at commit).
  await assert.rejects(k.read(), (err) => err === 3);
  assert.equal(await tx.update(k.increment(1)), undefined);
  await h.rejectsWith(tx.commit(), /^Failed to commit transaction \(Error code: 3\)$/);
  assert.equal(await conn.counter('k').read(), 0);
});

test('abort of a read-only transaction', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  assert.equal(await tx.counter('k').read(), 0);
  await tx.abort();
  assert.equal(await conn.counter('k').read(), 0, 'the connection goes on');
});

test('commit twice is an error; the first commit stands', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  await tx.update(tx.counter('k').increment(1));
  await tx.commit();
  await h.rejectsWith(tx.commit(), /^Antidote-PB Error code 0:\n.*transaction.*committed/s);
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  assert.equal(await conn.counter('k').read(), 1);
});

test('using a transaction after commit is an error surfaced by the client; the connection goes on', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const k = tx.counter('k');
  await tx.update(k.increment(1));
  await tx.commit();
  await h.rejectsWith(tx.update(k.increment(1)), /^Antidote-PB Error code 0:\n.*transaction/s);
  await h.rejectsWith(k.read(), /^Antidote-PB Error code 0:\n.*transaction/s);
  await h.rejectsWith(tx.abort(), /^Antidote-PB Error code 0:\n.*transaction/s);
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  assert.equal(await conn.counter('k').read(), 1);
  const tx2 = await conn.startTransaction();
  assert.equal(await tx2.counter('k').read(), 1);
  await tx2.commit();
});

test('several open transactions on one connection', async (ctx) => {
  const conn = ctx.connect();
  const t1 = await conn.startTransaction();
  const t2 = await conn.startTransaction();
  await t1.update(t1.counter('one').increment(1));
  await t2.update(t2.counter('two').increment(2));
  assert.equal(await t1.counter('two').read(), 0);
  assert.equal(await t2.counter('one').read(), 0);
  const c1 = (await t1.commit()).commitTime;
  const c2 = (await t2.commit()).commitTime;
  assert.deepEqual(await read(conn, [conn.counter('one'), conn.counter('two')], mergeClocks(c1, c2)), [1, 2]);
});

test('requests of a transaction pipelined without waiting are answered in order', async (ctx) => {
  // As in the client's tutorial example: updates issued together, awaited later. The client matches replies to
  // requests by order only, so the server must answer them in order.
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const k = tx.counter('k');
  const s = tx.set('s');
  const pending = [];
  for (let i = 1; i <= 10; i++) {
    pending.push(tx.update([k.increment(i), s.add(`e${i}`)]));
    pending.push(k.read());
  }
  const commit = tx.commit();
  const results = await Promise.all(pending);
  for (let i = 1; i <= 10; i++) {
    assert.equal(results[2 * i - 2], undefined);
    assert.equal(results[2 * i - 1], (i * (i + 1)) / 2, `read ${i} sees the ${i} updates before it`);
  }
  const { commitTime } = await commit;
  const [sum, set] = await read(conn, [conn.counter('k'), conn.set('s')], commitTime);
  assert.equal(sum, 55);
  assert.equal(set.length, 10);
});

test('two transactions interleaved on one connection without waiting', async (ctx) => {
  const conn = ctx.connect();
  const [t1, t2] = await Promise.all([conn.startTransaction(), conn.startTransaction()]);
  const ops = [];
  for (let i = 0; i < 5; i++) {
    ops.push(t1.update(t1.counter('a').increment(1)));
    ops.push(t2.update(t2.counter('b').increment(10)));
  }
  const reads = Promise.all([t1.readBatch([t1.counter('a'), t1.counter('b')]), t2.readBatch([t2.counter('a'), t2.counter('b')])]);
  await Promise.all(ops);
  assert.deepEqual(await reads, [[5, 0], [0, 50]]);
  const [c1, c2] = await Promise.all([t1.commit(), t2.commit()]);
  assert.deepEqual(await read(conn, [conn.counter('a'), conn.counter('b')], mergeClocks(c1.commitTime, c2.commitTime)),
    [5, 50]);
});

test('an empty transaction commits with a commit time', async (ctx) => {
  const conn = ctx.connect();
  const tx = await conn.startTransaction();
  const { commitTime } = await tx.commit();
  assert.ok(commitTime.remaining() > 0);
  h.decodeClock(commitTime);
});

test('a static update of no operations commits; a static read of no objects reads nothing', async (ctx) => {
  const conn = ctx.connect();
  const { commitTime } = await conn.update([]);
  assert.ok(commitTime.remaining() > 0);
  assert.deepEqual(await conn.readBatch([]), []);
  const tx = await conn.startTransaction();
  assert.deepEqual(await tx.readBatch([]), []);
  await tx.update([]);
  await tx.commit();
});

test('a later transaction without a clock sees the earlier commit of its connection (one DC)', async (ctx) => {
  // The client's own tests read, without any clock, what the same connection committed just before; on one DC
  // that holds in AntidoteDB (a snapshot takes the DC's current time).
  const conn = ctx.connect();
  const r = conn.register('k');
  const tx = await conn.startTransaction();
  await tx.update(r.set('v1'));
  await tx.commit();
  assert.equal(await r.read(), 'v1');
  await conn.update(r.set('v2'));
  const tx2 = await conn.startTransaction();
  assert.equal(await tx2.register('k').read(), 'v2');
  await tx2.commit();
});

test('the transaction of a closed connection is abandoned: nothing of it is visible', async (ctx) => {
  const a = ctx.connect();
  const b = ctx.connect();
  const tx = await a.startTransaction();
  await tx.update(tx.counter('k').increment(5));
  a.close();
  await write(b, b.counter('k').increment(1));
  assert.equal(await read1(b, b.counter('k')), 1);
});

test('an idle transaction is aborted after the idle timeout; the client sees error code 3 at commit', async (ctx) => {
  const srv = await ctx.startServer({ extraArgs: ['--tx-idle-timeout-ms', '600'] });
  const conn = ctx.connect(srv);
  const k = conn.counter('k');
  const tx = await conn.startTransaction();
  await tx.update(k.increment(1));
  await sleep(1500);
  await assert.rejects(tx.counter('k').read(), (err) => err === 3);
  await h.rejectsWith(tx.commit(), /^Failed to commit transaction \(Error code: 3\)$/);
  assert.equal(await k.read(), 0);
  // A transaction that keeps working longer than the timeout is not affected (100 ms pauses leave 500 ms slack).
  const busy = await conn.startTransaction();
  for (let i = 0; i < 8; i++) {
    await sleep(100);
    await busy.update(k.increment(1));
  }
  const { commitTime } = await busy.commit();
  assert.equal(await read1(conn, k, commitTime), 8);
});

test('with --certify-writes the second of two concurrent writers of one object aborts (error code 3)', async (ctx) => {
  const srv = await ctx.startServer({ extraArgs: ['--certify-writes'] });
  const a = ctx.connect(srv);
  const b = ctx.connect(srv);
  const [k, other] = [a.counter('k'), a.counter('other')];
  let [t1, t2] = [await a.startTransaction(), await b.startTransaction()];
  await t1.update(k.increment(1));
  await t2.update([k.increment(10), other.increment(10)]);
  await t1.commit();
  await h.rejectsWith(t2.commit(), /^Failed to commit transaction \(Error code: 3\)$/);
  assert.deepEqual(await read(a, [k, other], a.getLastCommitTimestamp()), [1, 0], 'the aborted one left nothing');
  // Concurrent writers of different objects both commit.
  [t1, t2] = [await a.startTransaction(), await b.startTransaction()];
  await t1.update(k.increment(1));
  await t2.update(other.increment(1));
  const c1 = (await t1.commit()).commitTime;
  const c2 = (await t2.commit()).commitTime;
  assert.deepEqual(await read(a, [k, other], mergeClocks(c1, c2)), [2, 1]);
});
