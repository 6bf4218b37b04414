//! The store adapter for Apache Cassandra (through the `scylla` driver, which speaks Cassandra 5's native
//! protocol).
//!
//! One table holds every copy: `records ((key, ls)) → (seq, head, meta)`, one partition of one row per copy, and
//! one read (`ls IN (…)`) returns every copy of a key (what every read and write starts with). Single-row
//! partitions matter: Cassandra answers a read of a whole row by name from the newest SSTable that holds it
//! (reading SSTables in timestamp order and stopping there), and a missing copy costs a Bloom filter lookup; a
//! read of a multi-row partition (the key with one row per local set, as until 2026-11-29) must instead merge
//! every SSTable holding any row of it, which for a hot key rewritten all the time is many
//! (`bench/RESULTS-letting-it-be.md`, run 5).
//!
//! A record's two parts are columns of one row, written together (a row is updated atomically at each replica):
//! a read selects `head` (clock and value) and never reads the dependency information unless it must resolve, and
//! a write selects `meta` and never reads the values. (Until 2026-11-29 the table was `copies`, with the whole
//! record in one column `data`; that table is no longer read.)
//!
//! The lightweight transactions run at `LOCAL_SERIAL`: Paxos among the local datacenter's replicas only, so under
//! a network partition between DCs they succeed on both sides independently, and the design relies on exactly
//! that: only local set `ls` ever writes copy `(key, ls)`. Reads are `LOCAL_ONE` and go to this local set's
//! datacenter only (no failover to another DC: a read served by a remote DC would make the local resolution
//! meaningless).
//!
//! Exclusive writers ([`crate::Writers::Exclusive`]) write with plain `LOCAL_QUORUM` inserts instead, after
//! reading the key's copies at `LOCAL_QUORUM` when it does not have them cached (so the instance sees its own last
//! write whatever the replication factor in its DC). Each insert's timestamp is above every write time the instance
//! has read or written, so a later version wins everywhere even across a change of writer on a host with a slower
//! clock. The writer lease is a row of table
//! `writers`, written with lightweight transactions and a TTL of one term: Cassandra drops it on its own when the
//! holder stops renewing.
//!
//! Feeds ([`crate::feed`]) are two more tables: `feeds ((ls, epoch, bucket), number) → versions`, batches in number
//! order inside partitions of 4,096 batches (so no partition grows without bound), kept for a day (TTL); and
//! `frontiers ((reader, writer)) → (epoch, start, position, next_batch)`, one row per follower and feed.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures_util::future::try_join_all;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};

use crate::driver::{Error, Lease, Part, Store, StoreError};
use crate::feed::Frontier;
use crate::proxy::Backend;
use crate::record::{Copy, Encoded, LocalSet};

/// Where and how to reach Cassandra.
#[derive(Clone, Debug)]
pub struct CassandraOptions {
    /// Contact points, `host:port`.
    pub nodes: Vec<String>,
    /// The datacenter (as Cassandra's snitch names it) of this middleware's local set.
    pub datacenter: String,
    /// The keyspace holding the middleware's table.
    pub keyspace: String,
    /// When set, create the keyspace (if missing) with `NetworkTopologyStrategy` and one replica in each of these
    /// datacenters, and the table.
    pub create_in: Option<Vec<String>>,
}

/// A Cassandra cluster seen from one datacenter.
pub struct CassandraStore {
    session: Session,
    get_head: PreparedStatement,
    get_meta: PreparedStatement,
    /// `get_many`: one part of many keys' copies of one local set.
    many_heads: PreparedStatement,
    many_metas: PreparedStatement,
    heads: PreparedStatement,
    metas: PreparedStatement,
    insert: PreparedStatement,
    update: PreparedStatement,
    metas_to_write: PreparedStatement,
    put: PreparedStatement,
    lease_take: PreparedStatement,
    lease_renew: PreparedStatement,
    lease_holder: PreparedStatement,
    lease_release: PreparedStatement,
    stabilize: PreparedStatement,
    feed_append: PreparedStatement,
    feed_read: PreparedStatement,
    feed_read_all: PreparedStatement,
    frontier_put: PreparedStatement,
    frontier_get: PreparedStatement,
    /// Exclusive writers: the highest write time (µs) of this local set's copies the instance has read or
    /// written; the next insert's timestamp is above it.
    write_floor: AtomicI64,
    local_set: LocalSet,
}

/// How long a plain write may stay in flight: a third of the shortest lease term the driver accepts (3 s), so a
/// write started while the lease was valid lands before another instance can take it. Cassandra's own
/// `write_request_timeout` (2 s by default) drops a mutation that waited longer at the replica.
const PUT_TIMEOUT: Duration = Duration::from_secs(1);

/// The most keys one statement of [`Store::get_many`] reads (an `IN` list: one request, read by the local node).
pub const GET_MANY_KEYS: usize = 128;

/// Feed batches per partition of table `feeds`.
const FEED_BUCKET: u64 = 4096;

/// Turns a driver error into a [`StoreError`] that says what was being done.
fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> StoreError {
    move |e| StoreError(format!("cassandra: {what}: {e}"))
}

/// The statement that creates table `records` in keyspace `ks` (every copy: one single-row partition per key and
/// local set).
pub fn create_records(ks: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {ks}.records (key blob, ls smallint, seq bigint, head blob, meta blob, \
         PRIMARY KEY ((key, ls))) WITH read_repair = 'BLOCKING'"
    )
}

/// The statement that creates table `plain` in keyspace `ks` (Cassandra alone: `causet middleware --plain`).
pub fn create_plain(ks: &str) -> String {
    format!("CREATE TABLE IF NOT EXISTS {ks}.plain (key blob PRIMARY KEY, value blob)")
}

/// Connects to Cassandra with reads and writes pinned to `options.datacenter`, and creates the schema if asked.
async fn connect(options: &CassandraOptions) -> Result<Session, StoreError> {
    if !options.keyspace.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || options.keyspace.is_empty() {
        return Err(StoreError(format!(
            "cassandra: keyspace {:?} must be letters, digits and underscores",
            options.keyspace
        )));
    }
    let policy = DefaultPolicy::builder()
        .prefer_datacenter(options.datacenter.clone())
        .permit_dc_failover(false)
        .token_aware(true)
        .build();
    let profile = ExecutionProfile::builder()
        .load_balancing_policy(policy)
        .consistency(Consistency::LocalOne)
        .serial_consistency(Some(SerialConsistency::LocalSerial))
        .build();
    let session = SessionBuilder::new()
        .known_nodes(&options.nodes)
        .default_execution_profile_handle(profile.into_handle())
        .build()
        .await
        .map_err(err("connect"))?;
    let ks = &options.keyspace;
    if let Some(dcs) = &options.create_in {
        let replication: Vec<String> = dcs.iter().map(|dc| format!("'{dc}': 1")).collect();
        let statements = [
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', {}}}",
                replication.join(", ")
            ),
            create_records(ks),
            create_plain(ks),
            format!("CREATE TABLE IF NOT EXISTS {ks}.writers (ls smallint PRIMARY KEY, owner text)"),
            format!(
                "CREATE TABLE IF NOT EXISTS {ks}.feeds (ls smallint, epoch bigint, bucket bigint, number bigint, \
                 versions blob, PRIMARY KEY ((ls, epoch, bucket), number)) WITH default_time_to_live = 86400 \
                 AND read_repair = 'BLOCKING'"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {ks}.frontiers (reader smallint, writer smallint, epoch bigint, \
                 start bigint, position bigint, next_batch bigint, PRIMARY KEY ((reader, writer)))"
            ),
        ];
        for s in statements {
            session.query_unpaged(s, &[]).await.map_err(err("create schema"))?;
        }
        session.await_schema_agreement().await.map_err(err("schema agreement"))?;
    }
    Ok(session)
}

async fn prepare(session: &Session, cql: String) -> Result<PreparedStatement, StoreError> {
    session.prepare(cql).await.map_err(err("prepare"))
}

impl CassandraStore {
    /// Connects for local set `local_set`, creates the schema if asked, and prepares the statements.
    pub async fn connect(options: &CassandraOptions, local_set: LocalSet) -> Result<CassandraStore, StoreError> {
        let session = connect(options).await?;
        let ks = &options.keyspace;
        let get_head = prepare(&session, format!("SELECT head FROM {ks}.records WHERE key = ? AND ls = ?")).await?;
        let get_meta = prepare(&session, format!("SELECT meta FROM {ks}.records WHERE key = ? AND ls = ?")).await?;
        let many_heads =
            prepare(&session, format!("SELECT key, head FROM {ks}.records WHERE key IN ? AND ls = ?")).await?;
        let many_metas =
            prepare(&session, format!("SELECT key, meta FROM {ks}.records WHERE key IN ? AND ls = ?")).await?;
        let insert = prepare(
            &session,
            format!("INSERT INTO {ks}.records (key, ls, seq, head, meta) VALUES (?, ?, ?, ?, ?) IF NOT EXISTS"),
        )
        .await?;
        let update = prepare(
            &session,
            format!("UPDATE {ks}.records SET seq = ?, head = ?, meta = ? WHERE key = ? AND ls = ? IF seq = ?"),
        )
        .await?;
        // Reads select no write time (a selector Cassandra computes per cell); only a write's read needs it.
        let heads = prepare(&session, format!("SELECT ls, head FROM {ks}.records WHERE key = ? AND ls IN ?")).await?;
        let metas = prepare(&session, format!("SELECT ls, meta FROM {ks}.records WHERE key = ? AND ls IN ?")).await?;
        let mut metas_to_write =
            prepare(&session, format!("SELECT ls, meta, writetime(meta) FROM {ks}.records WHERE key = ? AND ls IN ?"))
                .await?;
        metas_to_write.set_consistency(Consistency::LocalQuorum);
        let mut put = prepare(
            &session,
            format!("INSERT INTO {ks}.records (key, ls, seq, head, meta) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?"),
        )
        .await?;
        put.set_consistency(Consistency::LocalQuorum);
        put.set_request_timeout(Some(PUT_TIMEOUT));
        let lease_take =
            prepare(&session, format!("INSERT INTO {ks}.writers (ls, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?"))
                .await?;
        let lease_renew =
            prepare(&session, format!("UPDATE {ks}.writers USING TTL ? SET owner = ? WHERE ls = ? IF owner = ?"))
                .await?;
        let mut lease_holder = prepare(&session, format!("SELECT owner FROM {ks}.writers WHERE ls = ?")).await?;
        lease_holder.set_consistency(Consistency::LocalQuorum);
        let mut stabilize = prepare(&session, format!("SELECT seq FROM {ks}.records WHERE key = ? AND ls = ?")).await?;
        stabilize.set_consistency(Consistency::All);
        stabilize.set_request_timeout(Some(Duration::from_secs(5)));
        let lease_release = prepare(&session, format!("DELETE FROM {ks}.writers WHERE ls = ? IF owner = ?")).await?;
        let mut feed_append = prepare(
            &session,
            format!("INSERT INTO {ks}.feeds (ls, epoch, bucket, number, versions) VALUES (?, ?, ?, ?, ?)"),
        )
        .await?;
        feed_append.set_consistency(Consistency::LocalQuorum);
        let read = format!(
            "SELECT number, versions FROM {ks}.feeds WHERE ls = ? AND epoch = ? AND bucket = ? AND number >= ? LIMIT ?"
        );
        let feed_read = prepare(&session, read.clone()).await?;
        let mut feed_read_all = prepare(&session, read).await?;
        feed_read_all.set_consistency(Consistency::All);
        let mut frontier_put = prepare(
            &session,
            format!(
                "INSERT INTO {ks}.frontiers (reader, writer, epoch, start, position, next_batch) VALUES (?, ?, ?, ?, ?, ?)"
            ),
        )
        .await?;
        frontier_put.set_consistency(Consistency::LocalQuorum);
        let frontier_get = prepare(
            &session,
            format!("SELECT epoch, start, position, next_batch FROM {ks}.frontiers WHERE reader = ? AND writer = ?"),
        )
        .await?;
        Ok(CassandraStore {
            session,
            get_head,
            get_meta,
            many_heads,
            many_metas,
            heads,
            metas,
            insert,
            update,
            metas_to_write,
            put,
            lease_take,
            lease_renew,
            lease_holder,
            lease_release,
            stabilize,
            feed_append,
            feed_read,
            feed_read_all,
            frontier_put,
            frontier_get,
            write_floor: AtomicI64::new(i64::MIN),
            local_set,
        })
    }

    /// The rows of `statement` (`heads`, `metas` or `metas_to_write`) for every copy of `key`.
    async fn copy_rows(
        &self,
        statement: &PreparedStatement,
        key: &[u8],
        local_sets: usize,
    ) -> Result<scylla::response::query_result::QueryRowsResult, StoreError> {
        let all: Vec<i16> = (0..local_sets as i16).collect();
        let result = self.session.execute_unpaged(statement, (key, &all)).await.map_err(err("read"))?;
        result.into_rows_result().map_err(err("read"))
    }

    /// One part of every copy of `key` through `statement` (`heads` or `metas`: `ls` and the part).
    async fn read_copies(
        &self,
        statement: &PreparedStatement,
        key: &[u8],
        local_sets: usize,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let rows = self.copy_rows(statement, key, local_sets).await?;
        let mut copies = vec![None; local_sets];
        for row in rows.rows::<(i16, Vec<u8>)>().map_err(err("read"))? {
            let (ls, data) = row.map_err(err("read"))?;
            place(&mut copies, ls, data);
        }
        Ok(copies)
    }

    /// Every copy's meta of `key` for a write (`metas_to_write`: `ls`, the meta and its write time), with the
    /// write time of this local set's copy (`i64::MIN` if it has none).
    async fn read_copies_to_write(
        &self,
        key: &[u8],
        local_sets: usize,
    ) -> Result<(Vec<Option<Vec<u8>>>, i64), StoreError> {
        let rows = self.copy_rows(&self.metas_to_write, key, local_sets).await?;
        let (mut copies, mut own_written) = (vec![None; local_sets], i64::MIN);
        for row in rows.rows::<(i16, Vec<u8>, i64)>().map_err(err("read"))? {
            let (ls, data, written) = row.map_err(err("read"))?;
            if ls == self.local_set as i16 {
                own_written = written;
            }
            place(&mut copies, ls, data);
        }
        Ok((copies, own_written))
    }

    /// Runs a statement on the underlying session (for tests and tools: truncation, inspection).
    pub async fn execute(&self, cql: &str) -> Result<(), StoreError> {
        self.session.query_unpaged(cql, &[]).await.map_err(err("statement"))?;
        Ok(())
    }
}

/// Puts local set `ls`'s copy in its slot (a row of a local set beyond `copies` is ignored).
fn place(copies: &mut [Option<Vec<u8>>], ls: i16, data: Vec<u8>) {
    if let Some(slot) = usize::try_from(ls).ok().and_then(|ls| copies.get_mut(ls)) {
        *slot = Some(data);
    }
}

/// Whether a lightweight transaction applied: the first column of its result, `[applied]` (when it did not apply,
/// Cassandra also returns the current values, so the row's shape varies).
fn applied(result: scylla::response::query_result::QueryResult) -> Result<bool, StoreError> {
    let rows = result.into_rows_result().map_err(err("compare-and-swap result"))?;
    let row: Row = rows.first_row().map_err(err("compare-and-swap result"))?;
    match row.columns.first() {
        Some(Some(CqlValue::Boolean(b))) => Ok(*b),
        other => Err(StoreError(format!("cassandra: compare-and-swap answered {other:?} instead of [applied]"))),
    }
}

impl Store for CassandraStore {
    async fn get(&self, copy: &Copy, part: Part) -> Result<Option<Vec<u8>>, StoreError> {
        let statement = match part {
            Part::Head => &self.get_head,
            Part::Meta => &self.get_meta,
        };
        let result = self.session.execute_unpaged(statement, (&copy.key, copy.ls as i16)).await.map_err(err("read"))?;
        let rows = result.into_rows_result().map_err(err("read"))?;
        let row: Option<(Vec<u8>,)> = rows.maybe_first_row().map_err(err("read"))?;
        Ok(row.map(|(data,)| data))
    }

    const GETS_MANY: bool = true;

    async fn get_many(&self, copies: &[Copy], part: Part) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let statement = match part {
            Part::Head => &self.many_heads,
            Part::Meta => &self.many_metas,
        };
        // One statement per local set and GET_MANY_KEYS distinct keys, all in flight at once.
        let mut by_ls: BTreeMap<LocalSet, Vec<&[u8]>> = BTreeMap::new();
        for c in copies {
            by_ls.entry(c.ls).or_default().push(&c.key);
        }
        let mut statements = Vec::new();
        for (ls, mut keys) in by_ls {
            keys.sort_unstable();
            keys.dedup();
            statements.extend(keys.chunks(GET_MANY_KEYS).map(move |chunk| (ls, chunk.to_vec())));
        }
        let answers = try_join_all(statements.iter().map(|(ls, keys)| async move {
            let result = self.session.execute_unpaged(statement, (keys, *ls as i16)).await.map_err(err("read many"))?;
            let rows = result.into_rows_result().map_err(err("read many"))?;
            let rows = rows.rows::<(Vec<u8>, Vec<u8>)>().map_err(err("read many"))?;
            let found = rows.collect::<Result<HashMap<Vec<u8>, Vec<u8>>, _>>().map_err(err("read many"))?;
            Ok::<_, StoreError>((*ls, found))
        }))
        .await?;
        let mut found: HashMap<LocalSet, HashMap<Vec<u8>, Vec<u8>>> = HashMap::new();
        for (ls, rows) in answers {
            found.entry(ls).or_default().extend(rows);
        }
        Ok(copies.iter().map(|c| found.get(&c.ls).and_then(|rows| rows.get(c.key.as_slice())).cloned()).collect())
    }

    async fn get_copies(&self, key: &[u8], local_sets: usize, part: Part) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let statement = match part {
            Part::Head => &self.heads,
            Part::Meta => &self.metas,
        };
        self.read_copies(statement, key, local_sets).await
    }

    async fn cas(&self, copy: &Copy, expect: Option<u64>, seq: u64, record: Encoded) -> Result<bool, StoreError> {
        let Encoded { head, meta } = record;
        let (key, ls, seq) = (&copy.key, copy.ls as i16, seq as i64);
        let result = match expect {
            None => self.session.execute_unpaged(&self.insert, (key, ls, seq, head, meta)).await,
            Some(old) => self.session.execute_unpaged(&self.update, (seq, head, meta, key, ls, old as i64)).await,
        }
        .map_err(err("compare-and-swap"))?;
        applied(result)
    }

    async fn get_copies_to_write(&self, key: &[u8], local_sets: usize) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let (copies, own_written) = self.read_copies_to_write(key, local_sets).await?;
        self.write_floor.fetch_max(own_written, Ordering::Relaxed);
        Ok(copies)
    }

    const CONFIRMS_STABILITY: bool = true;

    async fn stabilize(&self, copy: &Copy, seq: u64) -> Result<bool, StoreError> {
        // At `ALL`, with the table's blocking read repair, every replica holds what the read returns once it
        // answers. An unreachable datacenter fails the read: the version is not stable yet.
        let Ok(result) = self.session.execute_unpaged(&self.stabilize, (&copy.key, copy.ls as i16)).await else {
            return Ok(false);
        };
        let rows = result.into_rows_result().map_err(err("stabilize"))?;
        let row: Option<(i64,)> = rows.maybe_first_row().map_err(err("stabilize"))?;
        Ok(row.is_some_and(|(s,)| s as u64 >= seq))
    }

    const PULLS: bool = true;

    async fn pull(&self, copy: &Copy, seq: u64) -> Result<bool, StoreError> {
        // The same read at `ALL`: its blocking read repair writes the newest version into this datacenter's replica
        // before it answers, so a version it returns is here now.
        self.stabilize(copy, seq).await
    }

    async fn put(&self, copy: &Copy, seq: u64, record: Encoded) -> Result<(), StoreError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
        // Above every write time seen: strictly increasing across this instance's writes, whatever its clock does.
        let next = |floor: i64| floor.saturating_add(1).max(now as i64);
        let previous = self.write_floor.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| Some(next(f)));
        let at = next(previous.unwrap_or_else(|f| f));
        let values = (&copy.key, copy.ls as i16, seq as i64, record.head, record.meta, at);
        self.session.execute_unpaged(&self.put, values).await.map_err(err("write"))?;
        Ok(())
    }

    const FEEDS: bool = true;

    async fn feed_append(&self, ls: LocalSet, epoch: u64, number: u64, batch: Vec<u8>) -> Result<(), StoreError> {
        let values = (ls as i16, epoch as i64, (number / FEED_BUCKET) as i64, number as i64, batch);
        self.session.execute_unpaged(&self.feed_append, values).await.map_err(err("feed append"))?;
        Ok(())
    }

    async fn feed_read(
        &self,
        ls: LocalSet,
        epoch: u64,
        from: u64,
        limit: usize,
        everywhere: bool,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let statement = if everywhere { &self.feed_read_all } else { &self.feed_read };
        let values = (ls as i16, epoch as i64, (from / FEED_BUCKET) as i64, from as i64, limit as i32);
        let result = self.session.execute_unpaged(statement, values).await.map_err(err("feed read"))?;
        let rows = result.into_rows_result().map_err(err("feed read"))?;
        let rows = rows.rows::<(i64, Vec<u8>)>().map_err(err("feed read"))?;
        rows.map(|row| row.map(|(n, b)| (n as u64, b)).map_err(err("feed read"))).collect()
    }

    async fn frontier_put(&self, reader: LocalSet, writer: LocalSet, frontier: Frontier) -> Result<(), StoreError> {
        let Frontier { epoch, start, position, batch } = frontier;
        let values = (reader as i16, writer as i16, epoch as i64, start as i64, position as i64, batch as i64);
        self.session.execute_unpaged(&self.frontier_put, values).await.map_err(err("frontier"))?;
        Ok(())
    }

    async fn frontier_get(&self, reader: LocalSet, writer: LocalSet) -> Result<Option<Frontier>, StoreError> {
        let result = (self.session.execute_unpaged(&self.frontier_get, (reader as i16, writer as i16)).await)
            .map_err(err("frontier"))?;
        let rows = result.into_rows_result().map_err(err("frontier"))?;
        let row: Option<(i64, i64, i64, i64)> = rows.maybe_first_row().map_err(err("frontier"))?;
        Ok(row.map(|(epoch, start, position, batch)| Frontier {
            epoch: epoch as u64,
            start: start as u64,
            position: position as u64,
            batch: batch as u64,
        }))
    }

    async fn lease(&self, ls: LocalSet, owner: &str, term: Duration) -> Result<Lease, StoreError> {
        if term.is_zero() {
            self.session
                .execute_unpaged(&self.lease_release, (ls as i16, owner))
                .await
                .map_err(err("lease release"))?;
            return Ok(Lease::Held);
        }
        let ttl = term.as_secs().max(1) as i32;
        let renewed = self.session.execute_unpaged(&self.lease_renew, (ttl, owner, ls as i16, owner)).await;
        if applied(renewed.map_err(err("lease renewal"))?)? {
            return Ok(Lease::Held);
        }
        let taken = self.session.execute_unpaged(&self.lease_take, (ls as i16, owner, ttl)).await;
        if applied(taken.map_err(err("lease"))?)? {
            return Ok(Lease::Held);
        }
        let result = self.session.execute_unpaged(&self.lease_holder, (ls as i16,)).await.map_err(err("lease"))?;
        let rows = result.into_rows_result().map_err(err("lease"))?;
        let holder: Option<(String,)> = rows.maybe_first_row().map_err(err("lease"))?;
        Ok(Lease::HeldBy(holder.map_or_else(|| "another instance (its lease just ended)".into(), |(h,)| h)))
    }
}

/// Cassandra alone, the baseline: one plain row per key, `LOCAL_ONE` reads and writes, last writer wins — no
/// dependency tracking, so no causal consistency across keys.
pub struct PlainCassandra {
    session: Session,
    get: PreparedStatement,
    put: PreparedStatement,
}

impl PlainCassandra {
    /// Connects, creates the schema if asked, and prepares the statements.
    pub async fn connect(options: &CassandraOptions) -> Result<PlainCassandra, StoreError> {
        let session = connect(options).await?;
        let ks = &options.keyspace;
        let get = prepare(&session, format!("SELECT value FROM {ks}.plain WHERE key = ?")).await?;
        let put = prepare(&session, format!("INSERT INTO {ks}.plain (key, value) VALUES (?, ?)")).await?;
        Ok(PlainCassandra { session, get, put })
    }
}

impl Backend for PlainCassandra {
    async fn read(&self, _: &mut crate::op::Session, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let result = self.session.execute_unpaged(&self.get, (key,)).await.map_err(err("read"))?;
        let rows = result.into_rows_result().map_err(err("read"))?;
        let row: Option<(Option<Vec<u8>>,)> = rows.maybe_first_row().map_err(err("read"))?;
        Ok(row.and_then(|(v,)| v))
    }

    async fn write(&self, _: &mut crate::op::Session, key: &[u8], value: Vec<u8>) -> Result<(), Error> {
        self.session.execute_unpaged(&self.put, (key, value)).await.map_err(err("write"))?;
        Ok(())
    }
}
