// A first transaction against Causet with AntidoteDB's JavaScript client (antidote_ts_client 0.2.2).
// Usage: node first_transaction.js [HOST [PORT]]   (default: 127.0.0.1 8087, where `causet start` listens)
'use strict';
const antidote = require('antidote_ts_client');
const ByteBuffer = require('bytebuffer');

const host = process.argv[2] || '127.0.0.1';
const port = Number(process.argv[3] || 8087);
const added = ['new', 'sale'];

// A connection; objects are named by bucket (the connection's defaultBucket), key and CRDT type.
function connect() {
  const conn = antidote.connect(port, host);
  conn.defaultBucket = 'shop';
  conn.setTimeout(10000); // ms per request; the client's default is 1 s
  // The client stores set elements as MessagePack by default; plain UTF-8 text is what the Python and Java
  // examples write to the same set.
  conn.dataFormat = { jsToBinary: (s) => ByteBuffer.fromUTF8(s), binaryToJs: (bb) => bb.toUTF8() };
  return conn;
}

async function main() {
  // One interactive transaction: both updates become visible together at commit, or not at all.
  const writer = connect();
  const tx = await writer.startTransaction();
  await tx.update([tx.counter('visits').increment(1), tx.set('tags').addAll(added)]);
  await tx.commit();
  const commitTime = writer.getLastCommitTimestamp(); // the commit clock, an opaque ByteBuffer
  writer.close();

  // Read both back on a new connection, in a snapshot that includes at least that commit.
  const reader = connect();
  reader.minSnapshotTime = commitTime;
  const [visits, tags] = await reader.readBatch([reader.counter('visits'), reader.set('tags')]);
  reader.close();

  tags.sort();
  console.log(`js: visits = ${visits}, tags = [${tags.join(', ')}] (commit clock ${commitTime.toHex()})`);

  // The program may run again against the same server: the counter only grows, the set keeps its elements.
  if (!(visits >= 1 && added.every((t) => tags.includes(t)))) {
    throw new Error(`expected visits >= 1 and tags containing ${added}`);
  }
}

main().catch((err) => {
  console.error(`first_transaction.js: ${err.message || err}`);
  process.exit(1);
});
