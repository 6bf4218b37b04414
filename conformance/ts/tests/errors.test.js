'use strict';
// Error cases: operations that do not fit their object, requests over the frame limit, a closed port, a server
// that stops under an open connection. Each time the client must surface the error (a rejected promise with the
// server's explanation), and the connection and the server must go on serving. (Using a transaction after commit
// or abort is in transactions.test.js, invalid clocks in causality.test.js, counters over 32 bits in
// semantics.test.js.)

const assert = require('node:assert/strict');
const h = require('./harness');

const { test } = h.suite();
const { write, read, read1, T } = h;

// The operation of one kind of object sent to the key of another: the client names each object with its type, so
// a wrong-type operation is the operation of one object on the key of another.
function misapplied(target, op) {
  return { boundobject: target.key, operation: op.operation };
}

const WRONG = {
  'counter op on an LWW register': (f) => misapplied(f.register('k'), f.counter('x').increment(1)),
  'register op on a counter': (f) => misapplied(f.counter('k'), f.register('x').set('v')),
  'flag op on an add-wins set': (f) => misapplied(f.set('k'), f.flag_ew('x').set(true)),
  'set op on a flag': (f) => misapplied(f.flag_ew('k'), f.set('x').add('v')),
  'map op on an MV register': (f) => misapplied(f.multiValueRegister('k'), f.gmap('x').counter('c').increment(1)),
  'counter op on a grow-only map': (f) => misapplied(f.gmap('k'), f.counter('x').increment(1)),
  'set op on a remove-resets map': (f) => misapplied(f.rrmap('k'), f.set('x').add('v')),
  'remove on a grow-only map': (f) => f.gmap('k').remove(f.gmap('k').counter('c')),
  'nested set op on a nested counter key': (f) => {
    const m = f.rrmap('k');
    const op = m.counter('c').increment(1);
    op.operation.mapop.updates[0].update = m.set('c').add('v').operation.mapop.updates[0].update;
    return op;
  },
};

for (const [name, make] of Object.entries(WRONG)) {
  test(`a wrong-type operation is refused with a message (${name}); connection and transaction go on`, async (ctx) => {
    const conn = ctx.connect();
    await h.rejectsWith(conn.update(make(conn)), /^Antidote-PB Error code 0:\n.+/s);
    const tx = await conn.startTransaction();
    await h.rejectsWith(tx.update(make(tx)), /^Antidote-PB Error code 0:\n.+/s);
    // The connection is in step and the transaction still usable.
    await tx.update(tx.counter('other').increment(1));
    assert.equal(await tx.counter('other').read(), 1);
    const { commitTime } = await tx.commit();
    assert.equal(await read1(conn, conn.counter('other'), commitTime), 1);
  });
}

test('a batch with one wrong operation applies none of it', async (ctx) => {
  const conn = ctx.connect();
  const good = conn.counter('good');
  const bad = misapplied(conn.register('bad'), conn.counter('bad').increment(1));
  await h.rejectsWith(conn.update([good.increment(1), bad]), /^Antidote-PB Error code 0:\n.+/s);
  const tx = await conn.startTransaction();
  await h.rejectsWith(tx.update([good.increment(10), bad]), /^Antidote-PB Error code 0:\n.+/s);
  assert.equal(await tx.counter('good').read(), 0, 'the refused request left nothing in the transaction');
  await tx.commit();
  assert.deepEqual(await read(conn, [good, conn.register('bad')]), [0, null]);
});

test('an error reply among pipelined requests answers its own request; the others get theirs', async (ctx) => {
  const conn = ctx.connect();
  const c = conn.counter('c');
  await write(conn, c.increment(5));
  const bad = misapplied(conn.set('s'), c.increment(1));
  const [r1, r2, r3, r4] = await Promise.allSettled([c.read(), conn.update(bad), c.read(), conn.update(c.increment(1))]);
  assert.deepEqual([r1.status, r1.value], ['fulfilled', 5]);
  assert.equal(r2.status, 'rejected');
  assert.match(r2.reason.message, /^Antidote-PB Error code 0:\n.*set_aw/s);
  assert.deepEqual([r3.status, r3.value], ['fulfilled', 5]);
  assert.equal(r4.status, 'fulfilled');
  assert.equal(await read1(conn, c, r4.value.commitTime), 6);
});

test('a request over --max-frame-bytes is refused naming the limit and its option; the connection goes on', async (ctx) => {
  const srv = await ctx.startServer({ extraArgs: ['--max-frame-bytes', String(1 << 20)] });
  const conn = ctx.connect(srv);
  const r = conn.register('big');
  await h.rejectsWith(conn.update(r.set('x'.repeat(2 << 20))), /^Antidote-PB Error code 0:\n.*limit.*max.frame.bytes/s);
  assert.equal(await r.read(), null, 'nothing was written');
  await conn.update(r.set('x'.repeat(1000)));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  assert.equal(await r.read(), 'x'.repeat(1000));
});

test('connecting to a closed port surfaces the error; the server keeps serving', async (ctx) => {
  const port = await h.freePort(); // bound then released: nothing listens there
  const conn = h.antidote.connect(port, h.HOST);
  conn.setTimeout(h.REQUEST_TIMEOUT_MS);
  ctx.connections.push(conn);
  const err = await h.rejectsWith(conn.counter('k').read(), /ECONNREFUSED/);
  assert.equal(err.code, 'ECONNREFUSED');
  // Later requests reconnect, and fail again: with the refusal, or with "Connection closed" when they were queued
  // on the refused socket before the client saw it close.
  await h.rejectsWith(conn.startTransaction(), /ECONNREFUSED|Connection closed/);
  await h.rejectsWith(conn.update(conn.counter('k').increment(1)), /ECONNREFUSED|Connection closed/);
  const ok = ctx.connect();
  await write(ok, ok.counter('k').increment(1));
  assert.equal(await read1(ok, ok.counter('k')), 1);
});

test('a server that stops under an open connection: requests fail, then the client reconnects to its restart', async (ctx) => {
  const first = await ctx.startServer();
  const conn = ctx.connect(first);
  const c = conn.counter('k');
  await write(conn, c.increment(7));
  const tx = await conn.startTransaction();
  await tx.update(tx.counter('k').increment(100));
  assert.deepEqual(await first.stop(), { code: 0, signal: null }, 'SIGTERM with an open transaction exits 0');
  await h.rejectsWith(c.read(), /ECONNREFUSED|ECONNRESET|Connection closed/);
  await h.rejectsWith(tx.commit(), /ECONNREFUSED|ECONNRESET|Connection closed/);
  // The same data directory and ports: the connection object reconnects on its next request.
  const second = await ctx.startServer({ dataDir: first.dataDir, ports: { port: first.port, adminPort: first.adminPort } });
  assert.equal(second.port, first.port);
  conn.minSnapshotTime = undefined;
  assert.equal(await c.read(), 7, 'the commit survived the restart; the open transaction did not');
  await write(conn, c.increment(1));
  assert.equal(await read1(conn, c), 8);
});

test('a connection over --max-connections gets the reason as its first reply; a later one gets in', async (ctx) => {
  const srv = await ctx.startServer({ extraArgs: ['--max-connections', '2'] });
  const [a, b] = [ctx.connect(srv), ctx.connect(srv)];
  assert.deepEqual(await Promise.all([a.counter('k').read(), b.counter('k').read()]), [0, 0]);
  // The server answers the third connection with ApbErrorResp and closes it; the client gives that reply to the
  // request it had queued.
  const over = ctx.connect(srv);
  await h.rejectsWith(over.counter('k').read(), /^Antidote-PB Error code 0:\n.*connections/s);
  b.close();
  const deadline = Date.now() + 10_000;
  for (;;) { // the server notices the close asynchronously
    const late = ctx.connect(srv);
    try {
      assert.equal(await late.counter('k').read(), 0);
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      late.close();
      await h.sleep(100);
    }
  }
  assert.equal(await a.counter('k').read(), 0, 'the connections within the limit were not disturbed');
});

test('the server is healthy after all of the above', async (ctx) => {
  const { status, body } = await ctx.server.health();
  assert.equal(status, 200);
  assert.equal(body.trim(), 'ok');
  const conn = ctx.connect();
  await write(conn, [conn.counter('k').increment(1), conn.set('s').add('v')]);
  assert.deepEqual(await read(conn, [conn.counter('k'), conn.set('s')]), [1, ['v']]);
  assert.equal(T.COUNTER, conn.counter('k').key.type);
});
