//! The store adapter for Apache Cassandra (through the `scylla` driver, which speaks Cassandra 5's native
//! protocol).
//!
//! One table holds every copy: `copies (key, ls) → (seq, data)`, partitioned by key with one row per local set,
//! so that one single-partition read returns every copy of a key (what every read and write starts with). The
//! lightweight transactions run at `LOCAL_SERIAL`: Paxos among the local datacenter's replicas only, so under a
//! network partition between DCs they succeed on both sides independently, and the design relies on exactly
//! that: only local set `ls` ever writes row `ls` of a key. Reads are `LOCAL_ONE` and go to this local set's datacenter only
//! (no failover to another DC: a read served by a remote DC would make the local resolution meaningless).

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};

use crate::driver::{Error, Store, StoreError};
use crate::proxy::Backend;
use crate::record::Copy;

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
    get: PreparedStatement,
    get_all: PreparedStatement,
    insert: PreparedStatement,
    update: PreparedStatement,
}

/// Turns a driver error into a [`StoreError`] that says what was being done.
fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> StoreError {
    move |e| StoreError(format!("cassandra: {what}: {e}"))
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
            format!(
                "CREATE TABLE IF NOT EXISTS {ks}.copies (key blob, ls smallint, seq bigint, data blob, \
                 PRIMARY KEY (key, ls))"
            ),
            format!("CREATE TABLE IF NOT EXISTS {ks}.plain (key blob PRIMARY KEY, value blob)"),
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
    /// Connects, creates the schema if asked, and prepares the statements.
    pub async fn connect(options: &CassandraOptions) -> Result<CassandraStore, StoreError> {
        let session = connect(options).await?;
        let ks = &options.keyspace;
        let get = prepare(&session, format!("SELECT seq, data FROM {ks}.copies WHERE key = ? AND ls = ?")).await?;
        let insert = prepare(
            &session,
            format!("INSERT INTO {ks}.copies (key, ls, seq, data) VALUES (?, ?, ?, ?) IF NOT EXISTS"),
        )
        .await?;
        let update =
            prepare(&session, format!("UPDATE {ks}.copies SET seq = ?, data = ? WHERE key = ? AND ls = ? IF seq = ?"))
                .await?;
        let get_all = prepare(&session, format!("SELECT ls, data FROM {ks}.copies WHERE key = ?")).await?;
        Ok(CassandraStore { session, get, get_all, insert, update })
    }

    /// Runs a statement on the underlying session (for tests and tools: truncation, inspection).
    pub async fn execute(&self, cql: &str) -> Result<(), StoreError> {
        self.session.query_unpaged(cql, &[]).await.map_err(err("statement"))?;
        Ok(())
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
    async fn get(&self, copy: &Copy) -> Result<Option<Vec<u8>>, StoreError> {
        let result = self.session.execute_unpaged(&self.get, (&copy.key, copy.ls as i16)).await.map_err(err("read"))?;
        let rows = result.into_rows_result().map_err(err("read"))?;
        let row: Option<(i64, Vec<u8>)> = rows.maybe_first_row().map_err(err("read"))?;
        Ok(row.map(|(_, data)| data))
    }

    async fn get_copies(&self, key: &[u8], local_sets: usize) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let result = self.session.execute_unpaged(&self.get_all, (key,)).await.map_err(err("read"))?;
        let rows = result.into_rows_result().map_err(err("read"))?;
        let mut copies = vec![None; local_sets];
        for row in rows.rows::<(i16, Vec<u8>)>().map_err(err("read"))? {
            let (ls, data) = row.map_err(err("read"))?;
            if let Some(slot) = usize::try_from(ls).ok().and_then(|ls| copies.get_mut(ls)) {
                *slot = Some(data);
            }
        }
        Ok(copies)
    }

    async fn cas(&self, copy: &Copy, expect: Option<u64>, seq: u64, data: Vec<u8>) -> Result<bool, StoreError> {
        let result = match expect {
            None => self.session.execute_unpaged(&self.insert, (&copy.key, copy.ls as i16, seq as i64, data)).await,
            Some(old) => {
                self.session
                    .execute_unpaged(&self.update, (seq as i64, data, &copy.key, copy.ls as i16, old as i64))
                    .await
            }
        }
        .map_err(err("compare-and-swap"))?;
        applied(result)
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
