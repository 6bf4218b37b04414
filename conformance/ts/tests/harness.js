'use strict';
// The harness of the TypeScript/JavaScript client-conformance suite: one `causet start` server per test file on free
// loopback ports with a fresh data directory, connections of the published `antidote_ts_client` package to it,
// per-test unique buckets, session helpers (clocks passed along as the client's README describes), and the
// decoding of Causet's clocks where a test must merge the commit times of several connections.
//
// The server binary comes from $CAUSET_BIN (run.sh builds one when it is unset); without it, the harness looks
// for target/debug/causet under the workspace (or $CARGO_TARGET_DIR).

const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const nodeTest = require('node:test');

const antidote = require('antidote_ts_client');
const ByteBuffer = require('bytebuffer');
const Long = require('long');

const HOST = '127.0.0.1';
const WORKSPACE = path.resolve(__dirname, '..', '..', '..');
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;
// Each test is bounded; client requests time out well before (the client's own default is 1 s, too short for a
// debug build on a busy 2-core machine: its own test suite raises it to 60 s).
const TEST_TIMEOUT_MS = 60_000;
const REQUEST_TIMEOUT_MS = 30_000;

// CRDT_type numbers of antidote.proto (the client's enum is a TypeScript const enum, absent at run time).
const T = Object.freeze({
  COUNTER: 3, ORSET: 4, LWWREG: 5, MVREG: 6, GMAP: 8, RWSET: 10, RRMAP: 11, FATCOUNTER: 12, FLAG_EW: 13, FLAG_DW: 14,
});

const running = new Set();

function causetBinary() {
  if (process.env.CAUSET_BIN) return path.resolve(process.env.CAUSET_BIN);
  let target = process.env.CARGO_TARGET_DIR || path.join(WORKSPACE, 'target');
  if (!path.isAbsolute(target)) target = path.join(WORKSPACE, target);
  return path.join(target, 'debug', 'causet');
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function portOpen(port, timeoutMs = 500) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: HOST, port });
    const done = (ok) => { sock.destroy(); resolve(ok); };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

function httpGet(url, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

// On Linux, `setpriv --pdeathsig TERM` makes the server receive SIGTERM if this process dies (even by SIGKILL), so
// no server outlives a killed run. Elsewhere the exit and signal handlers below are the only guard.
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => process.platform === 'linux' && fs.existsSync(p));

/** One `causet start` process on free loopback ports with its own data directory. */
class CausetServer {
  constructor({ extraArgs = [], dataDir, logPath, ports } = {}) {
    this.binary = causetBinary();
    this.extraArgs = extraArgs;
    this.ownDir = fs.mkdtempSync(path.join(os.tmpdir(), 'causet-ts-'));
    this.dataDir = dataDir || path.join(this.ownDir, 'data');
    this.logPath = logPath || path.join(this.ownDir, 'causet.log');
    this.host = HOST;
    this.port = undefined;
    this.adminPort = undefined;
    this.child = undefined;
    this.exited = undefined; // a promise of {code, signal}
    this.fixedPorts = ports; // {port, adminPort}: a restart on the ports of an earlier server
  }

  get adminUrl() { return `http://${this.host}:${this.adminPort}`; }

  log() {
    try { return fs.readFileSync(this.logPath, 'utf8'); } catch { return ''; }
  }

  async start() {
    if (!fs.existsSync(this.binary)) {
      throw new Error(`no causet binary at ${this.binary}: build it (run.sh does) or set CAUSET_BIN`);
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = this.fixedPorts ? this.fixedPorts.port : await freePort();
      this.adminPort = this.fixedPorts ? this.fixedPorts.adminPort : await freePort();
      if (this.port === this.adminPort) continue;
      const args = ['start', '--data-dir', this.dataDir, '--client-bind', `${HOST}:${this.port}`,
        '--admin-bind', `${HOST}:${this.adminPort}`, ...this.extraArgs];
      fs.appendFileSync(this.logPath, `$ ${this.binary} ${args.join(' ')}\n`);
      const log = fs.openSync(this.logPath, 'a');
      const [cmd, argv] = SETPRIV
        ? [SETPRIV, ['--pdeathsig', 'TERM', '--', this.binary, ...args]]
        : [this.binary, args];
      try {
        this.child = spawn(cmd, argv, { stdio: ['ignore', log, log], env: { ...process.env, NO_COLOR: '1' } });
      } finally {
        fs.closeSync(log);
      }
      this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
      this.child.once('error', () => {}); // reported through `exit` and the readiness check
      running.add(this);
      if (await this.waitReady()) return this;
      await this.stop();
      // Unless another process took a port between the probe and the bind: then retry with new ones.
      if (this.fixedPorts || !/in use/i.test(this.log())) break;
    }
    throw new Error(`causet did not start serving within ${START_TIMEOUT_MS} ms; its log:\n${this.log().slice(-4000)}`);
  }

  isRunning() { return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null; }

  async waitReady() {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (!this.isRunning()) return false;
      if (await portOpen(this.port)) {
        try {
          const { status, body } = await httpGet(`${this.adminUrl}/health`, 2000);
          if (status === 200 && body.trim() === 'ok') return true;
        } catch { /* not yet */ }
      }
      await sleep(50);
    }
    return false;
  }

  async health() {
    return httpGet(`${this.adminUrl}/health`);
  }

  /** SIGTERM, then SIGKILL after 15 s. Resolves to {code, signal}. */
  async stop() {
    if (!this.child) return undefined;
    if (this.isRunning()) {
      this.child.kill('SIGTERM');
      let timer;
      const timeout = new Promise((resolve) => { timer = setTimeout(resolve, STOP_TIMEOUT_MS, 'timeout'); });
      const first = await Promise.race([this.exited, timeout]);
      clearTimeout(timer);
      if (first === 'timeout') this.child.kill('SIGKILL');
    }
    const status = await this.exited;
    running.delete(this);
    return status;
  }

  async kill() {
    if (this.child && this.isRunning()) this.child.kill('SIGKILL');
    if (this.child) await this.exited;
    running.delete(this);
  }

  /** Removes the server's temporary directory (data and log). */
  cleanup() {
    fs.rmSync(this.ownDir, { recursive: true, force: true });
  }
}

// A test file whose process exits without stopping its servers (an uncaught error, process.exit) kills them here;
// a SIGTERM or SIGINT to the test process stops them properly first.
process.on('exit', () => {
  for (const s of running) { try { s.child.kill('SIGKILL'); } catch { /* gone */ } }
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, () => {
    Promise.allSettled([...running].map((s) => s.stop())).finally(() => process.exit(130));
  });
}

/** A connection of the client with a request timeout of 30 s and the given default bucket. */
function connectTo(server, bucket) {
  const conn = antidote.connect(server.port, server.host);
  conn.setTimeout(REQUEST_TIMEOUT_MS);
  if (bucket !== undefined) conn.defaultBucket = bucket;
  return conn;
}

/** The per-test context: its bucket, its connections (closed when the test ends), extra servers. */
class Context {
  constructor(t, server, name) {
    this.t = t;
    this.server = server;
    const slug = name.replace(/[^A-Za-z0-9_]+/g, '_').slice(0, 40);
    this.bucket = `${slug}-${crypto.randomBytes(6).toString('hex')}`;
    this.connections = [];
    this.servers = [];
  }

  /** A connection to the file's server (or `server`) whose default bucket is the test's own. */
  connect(server = this.server) {
    const conn = connectTo(server, this.bucket);
    this.connections.push(conn);
    return conn;
  }

  /** Starts another server for this test; it is stopped when the test ends. */
  async startServer(opts = {}) {
    const s = new CausetServer(opts);
    this.servers.push(s);
    return s.start();
  }

  async cleanup(failed) {
    for (const c of this.connections) { try { c.close(); } catch { /* closed */ } }
    for (const s of this.servers) await s.stop();
    if (!failed) for (const s of this.servers) s.cleanup();
  }
}

function withServerLogs(err, servers) {
  const logs = servers.filter(Boolean)
    .map((s) => `\n--- causet log (${s.logPath}), last lines ---\n${s.log().slice(-3000)}`).join('');
  if (err instanceof Error && logs) {
    try { err.message += logs; } catch { /* read-only message */ }
  }
  return err;
}

/**
 * Declares the file's server: started before the first test, stopped after the last (also on failure), its
 * directory removed when every test passed. Returns `test(name, fn)` and `knownBug(name, reason, fn)`; `fn`
 * receives a Context.
 */
function suite({ extraArgs = [] } = {}) {
  let server;
  let failures = 0;
  const unexpectedPasses = [];
  nodeTest.before(async () => {
    server = await new CausetServer({ extraArgs }).start();
  }, { timeout: START_TIMEOUT_MS * 5 + 10_000 });
  nodeTest.after(async () => {
    if (!server) return;
    const status = await server.stop();
    if (failures === 0) server.cleanup();
    else process.stderr.write(`causet log kept in ${server.logPath}\n`);
    assert.ok(status, 'the server exited');
    // A todo test cannot fail the run: the known failures that passed fail it here.
    assert.deepEqual(unexpectedPasses, [], 'known failures passed: the bugs seem fixed, remove their knownBug markers');
  }, { timeout: STOP_TIMEOUT_MS * 2 + 5000 });

  const body = (name, fn) => async (t) => {
    assert.ok(server, 'the file\'s server did not start');
    const ctx = new Context(t, server, name);
    let failed = false;
    try {
      await fn(ctx);
    } catch (err) {
      failed = true;
      throw withServerLogs(err, [server, ...ctx.servers]);
    } finally {
      await ctx.cleanup(failed);
    }
  };

  function test(name, fn, opts = {}) {
    return nodeTest(name, { timeout: TEST_TIMEOUT_MS, ...opts }, async (t) => {
      try {
        await body(name, fn)(t);
      } catch (err) {
        failures++;
        throw err;
      }
    });
  }

  /**
   * A test that fails because of a known server bug or incompatibility: reported as TODO with the reason (which
   * starts "server bug:"), so that the run passes while it fails. If it passes, the bug is fixed: the file's
   * `after` hook then fails, failing the run, so that the marker is removed and the test guards the fix.
   */
  function knownBug(name, reason, fn) {
    assert.match(reason, /^server bug: /);
    return nodeTest(name, { timeout: TEST_TIMEOUT_MS, todo: reason }, async (t) => {
      await body(name, fn)(t);
      unexpectedPasses.push(name);
      t.diagnostic(`UNEXPECTED PASS of a known failure (${reason}): remove the knownBug marker`);
      throw new Error(`known failure passed: ${reason}`);
    });
  }

  return { test, knownBug, server: () => server };
}

// Sessions --------------------------------------------------------------------------------------------------------
// The client keeps the commit time of the last transaction (static update, static read or commit) in
// getLastCommitTimestamp() and sends minSnapshotTime as the start timestamp of every transaction: a session that
// reads its writes sets one from the other before each request.

/** A static update (`connection.update`) after the connection's last commit. Returns its commit time. */
async function write(conn, ops) {
  conn.minSnapshotTime = conn.getLastCommitTimestamp();
  const res = await conn.update(ops);
  assert.ok(res && res.commitTime && res.commitTime.remaining() > 0, 'a static update answers a commit time');
  return res.commitTime;
}

/** A static read (`connection.readBatch`) of `objects` after `clock` (default: the connection's last commit). */
async function read(conn, objects, clock) {
  conn.minSnapshotTime = clock !== undefined ? clock : conn.getLastCommitTimestamp();
  const values = await conn.readBatch(objects);
  assert.equal(values.length, objects.length);
  return values;
}

async function read1(conn, object, clock) {
  return (await read(conn, [object], clock))[0];
}

/**
 * Runs interactive transactions that all start (after `clock`) before any of them updates or commits, so that
 * none sees another's effects. `pairs` is a list of [connection, ops]. Returns a clock after every commit.
 */
async function concurrent(pairs, clock) {
  const txs = [];
  for (const [conn] of pairs) {
    conn.minSnapshotTime = clock;
    txs.push(await conn.startTransaction());
  }
  for (let i = 0; i < pairs.length; i++) await txs[i].update(pairs[i][1]);
  const clocks = [];
  for (const tx of txs) clocks.push((await tx.commit()).commitTime);
  return mergeClocks(...clocks);
}

// Causet's clocks -------------------------------------------------------------------------------------------------
// Opaque to AntidoteDB's clients; docs/protocol.md documents their layout (format byte 0x01, a big-endian u16
// count, then one big-endian u64 per DC). Tests that combine the clocks of several connections decode them.

function clockBytes(clock) {
  if (clock instanceof ByteBuffer) return clock.toBuffer(true); // offset..limit, without moving them
  return Buffer.from(clock);
}

function decodeClock(clock) {
  const b = clockBytes(clock);
  assert.ok(b.length >= 3 && b[0] === 0x01, `not a Causet clock: ${b.toString('hex')}`);
  const n = b.readUInt16BE(1);
  assert.equal(b.length, 3 + 8 * n, `a clock of ${n} entries has ${b.length} bytes`);
  const entries = [];
  for (let i = 0; i < n; i++) entries.push(b.readBigUInt64BE(3 + 8 * i));
  return entries;
}

function encodeClock(entries) {
  const b = Buffer.alloc(3 + 8 * entries.length);
  b[0] = 0x01;
  b.writeUInt16BE(entries.length, 1);
  entries.forEach((e, i) => b.writeBigUInt64BE(BigInt(e), 3 + 8 * i));
  return ByteBuffer.wrap(b);
}

/** The entry-wise maximum of several clocks (undefined ignored): a snapshot after all of them. */
function mergeClocks(...clocks) {
  const decoded = clocks.filter((c) => c !== undefined && c !== null).map(decodeClock);
  if (decoded.length === 0) return undefined;
  const n = Math.max(...decoded.map((d) => d.length));
  const merged = [];
  for (let i = 0; i < n; i++) merged.push(decoded.reduce((m, d) => (i < d.length && d[i] > m ? d[i] : m), 0n));
  return encodeClock(merged);
}

// Values ----------------------------------------------------------------------------------------------------------

/** A DataFormat that stores Buffers as they are (the default, MessagePack, encodes every value). */
const rawBytesFormat = Object.freeze({
  jsToBinary: (buf) => ByteBuffer.wrap(Buffer.from(buf)),
  binaryToJs: (bb) => bb.toBuffer(true),
});

/**
 * The client's `flag_dw(key)` builds its object with type FLAG_EW (13), not FLAG_DW (14): a client bug (pinned in
 * types.test.js). Tests of disable-wins flags correct the object's type, so that the server sees a FLAG_DW.
 */
function flagDw(factory, key) {
  const flag = factory.flag_dw(key);
  flag.key.type = T.FLAG_DW;
  return flag;
}

/**
 * A reset of a top-level object. The client has no method for AntidoteDB's `resetop`, but its `update` takes any
 * ApbUpdateOp of antidote.proto, which this builds by hand from the object's key.
 */
function resetOp(obj) {
  return { boundobject: obj.key, operation: { resetop: {} } };
}

/** Asserts that `promise` rejects with an Error of the client whose message matches `pattern`; returns it. */
async function rejectsWith(promise, pattern) {
  let error;
  await assert.rejects(promise, (err) => { error = err; return true; });
  const text = err2text(error);
  assert.match(text, pattern, `rejected with ${text}`);
  return error;
}

function err2text(err) {
  if (err instanceof Error) return err.message;
  return `non-Error rejection: ${typeof err} ${JSON.stringify(err)}`;
}

module.exports = {
  antidote, ByteBuffer, Long, T, HOST,
  CausetServer, Context, suite, connectTo, freePort, portOpen, httpGet, sleep,
  write, read, read1, concurrent,
  decodeClock, encodeClock, mergeClocks,
  rawBytesFormat, flagDw, resetOp, rejectsWith,
  REQUEST_TIMEOUT_MS,
};
