'use strict';
// Several connections at once, and many requests in flight on one connection (the client sends a request without
// waiting for the previous reply): no increment or element is lost, and every reply answers its own request.

const assert = require('node:assert/strict');
const h = require('./harness');

const { test } = h.suite();
const { read1, mergeClocks } = h;

const CONNECTIONS = 8;
const ROUNDS = 25;

/** Runs body(conn, index) on CONNECTIONS connections at once; returns a clock after all their commits. */
async function runConcurrently(ctx, body) {
  const conns = Array.from({ length: CONNECTIONS }, () => ctx.connect());
  await Promise.all(conns.map((c, i) => body(c, i)));
  return mergeClocks(...conns.map((c) => c.getLastCommitTimestamp()));
}

test('concurrent static increments from 8 connections add up', async (ctx) => {
  const clock = await runConcurrently(ctx, async (conn, i) => {
    for (let n = 0; n < ROUNDS; n++) await conn.update(conn.counter('k').increment(i + 1));
  });
  const expected = ROUNDS * ((CONNECTIONS * (CONNECTIONS + 1)) / 2);
  const reader = ctx.connect();
  assert.equal(await read1(reader, reader.counter('k'), clock), expected);
});

test('concurrent interactive transactions from 8 connections add up', async (ctx) => {
  const rounds = Math.floor(ROUNDS / 2);
  const clock = await runConcurrently(ctx, async (conn) => {
    for (let n = 0; n < rounds; n++) {
      const tx = await conn.startTransaction();
      const c = tx.fatCounter('k');
      assert.ok((await c.read()) >= 0);
      await tx.update(c.increment(2));
      await tx.update(c.increment(-1));
      await tx.commit();
    }
  });
  const reader = ctx.connect();
  assert.equal(await read1(reader, reader.fatCounter('k'), clock), CONNECTIONS * rounds);
});

test('concurrent set adds from 8 connections are all kept', async (ctx) => {
  const rounds = Math.floor(ROUNDS / 2);
  const clock = await runConcurrently(ctx, async (conn, i) => {
    for (let n = 0; n < rounds; n++) await conn.update(conn.set('k').add(`${i}-${String(n).padStart(2, '0')}`));
  });
  const expected = [];
  for (let i = 0; i < CONNECTIONS; i++) for (let n = 0; n < rounds; n++) expected.push(`${i}-${String(n).padStart(2, '0')}`);
  const reader = ctx.connect();
  assert.deepEqual(await read1(reader, reader.set('k'), clock), expected);
});

test('100 static updates in flight on one connection all apply, each answered with its own commit time', async (ctx) => {
  const conn = ctx.connect();
  const c = conn.counter('k');
  const results = await Promise.all(Array.from({ length: 100 }, (_, i) => conn.update(c.increment(i + 1))));
  for (const r of results) h.decodeClock(r.commitTime);
  assert.equal(await read1(conn, c, mergeClocks(...results.map((r) => r.commitTime))), 5050);
});

test('reads and updates in flight on one connection are answered in order', async (ctx) => {
  const conn = ctx.connect();
  const regs = Array.from({ length: 20 }, (_, i) => conn.register(`r${i}`));
  await conn.update(regs.map((r, i) => r.set(i)));
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  // Replies carry no request id: a reply out of order would give a register another's value.
  const values = await Promise.all(regs.flatMap((r) => [r.read(), conn.readBatch([r, r])]));
  regs.forEach((_, i) => {
    assert.equal(values[2 * i], i);
    assert.deepEqual(values[2 * i + 1], [i, i]);
  });
});

test('64 connections at once', async (ctx) => {
  const conns = Array.from({ length: 64 }, () => ctx.connect());
  const results = await Promise.all(conns.map((c) => c.update(c.counter('k').increment(1))));
  const clock = mergeClocks(...results.map((r) => r.commitTime));
  for (const c of conns.filter((_, i) => i % 8 === 0)) assert.equal(await read1(c, c.counter('k'), clock), 64);
});

// Latency ---------------------------------------------------------------------------------------------------------
// The client writes each request as one buffer; the server must answer without waiting on TCP acknowledgement
// timing (a delayed ACK costs ~40 ms a request), also when requests are pipelined.

async function medianMs(f, n = 12) {
  const samples = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await f();
    samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  samples.sort((x, y) => x - y);
  return samples[Math.floor(n / 2)];
}

test('requests of the client are not delayed (median under 20 ms, one request and pipelined pairs)', async (ctx) => {
  const conn = ctx.connect();
  const c = conn.counter('k');
  await conn.update(c.increment(1)); // warm up
  const read = await medianMs(() => c.read());
  const update = await medianMs(() => conn.update(c.increment(1)));
  const pair = await medianMs(() => Promise.all([c.read(), conn.update(c.increment(1))]));
  ctx.t.diagnostic(`median ms: read ${read.toFixed(2)}, update ${update.toFixed(2)}, pipelined pair ${pair.toFixed(2)}`);
  assert.ok(read < 20 && update < 20 && pair < 20, `median ms: read ${read}, update ${update}, pipelined pair ${pair}`);
});
