//! Causet's protocol core, free of I/O.
//!
//! Every state machine here follows one shape: `handle_*` methods take inputs together with `now` (the local
//! physical clock in microseconds, read by the driver), and `poll_*` methods hand back outputs (messages to send,
//! records to persist, replies to clients) and the next deadline. Nothing in this crate reads a clock, sleeps,
//! opens a socket or a file, or draws a random number: the server and the simulator drive the same code.
//!
//! - [`partition::Partition`]: multi-version objects, snapshot reads (Cure Alg. 2), prepare/commit/abort, pvc.
//! - [`coordinator::Coordinator`]: interactive and static transactions, two-phase commit (Cure Alg. 1).
//! - [`stabilizer::Stabilizer`]: the DC's stable snapshot, the minimum of the partitions' pvc.
//! - [`node::Node`]: one shard of a node: the machines above that one driver task runs, and all routing.
//! - [`group::Group`]: one replica of a Raft group (raft-rs behind a sans-I/O wrapper), which
//!   [`replica::Replica`] drives for a replicated partition.
//! - [`cache::Cache`] and [`buffer::WriteBuffer`]: HoneyPot's lease cache and write buffer at a coordinator.
//! - [`topology::Topology`]: where objects, partitions and their replicas live.

#![warn(missing_docs)]

pub mod away;
pub mod buffer;
pub mod bugs;
pub mod cache;
pub mod config;
pub mod coordinator;
pub mod group;
pub mod ids;
pub mod message;
pub mod node;
pub mod partition;
pub mod parts;
pub mod placement;
pub mod protocol;
pub mod record;
pub mod replica;
pub mod replication;
pub mod stabilizer;
pub mod store;
pub mod time;
pub mod topology;

pub use bugs::Bug;
pub use config::Config;
pub use ids::{ClientId, CoordinatorId, DcId, ObjectId, PartitionId, RequestId, TxId};
pub use message::{Address, Envelope, Message};
pub use protocol::{Protocol, ProtocolRules};
pub use time::{Clock, ClockKind, Timestamp, VectorClock};

/// A deterministic hasher for the core's hash maps, so that the simulator replays identically.
pub(crate) type DetHasher = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;
/// A hash map with [`DetHasher`].
pub(crate) type DetHashMap<K, V> = std::collections::HashMap<K, V, DetHasher>;
