//! Letting-It-Be: causal consistency as a middleware over an unmodified, eventually consistent store that offers
//! per-key get, put and compare-and-swap (Cassandra, or Causet itself run with `protocol = "eventual"`).
//!
//! Each write embeds its dependencies (the session's last write and the versions it read since) in the stored
//! record; each read takes the causally latest copy of the key in the local store and returns it only once its
//! whole dependency graph is present locally (resolution on read). Middleware instances never talk to each other:
//! writers of one local set exclude each other with the store's compare-and-swap (or one instance holds the local
//! set's writer lease), and each local set writes its own copy of every key, so nothing crosses the WAN
//! synchronously. See `docs/middleware.md`.

#![warn(missing_docs)]

pub mod cassandra;
pub mod causet;
pub mod counted;
pub mod driver;
pub mod feed;
pub mod memory;
pub mod op;
pub mod proxy;
pub mod record;
pub mod sim;

pub use counted::StoreRequests;
pub use driver::{Config, Error, Lease, Middleware, Stats, Store, StoreError, Writers};
pub use op::{
    Input, Marks, Protocol, ReadCache, ReadOp, ReadOutcome, Session, StabilizeInput, StabilizeOp, StabilizeStep, Step,
    WriteCache, WriteOp,
};
pub use record::{Copy, Dep, Key, KeyDisplay, LocalSet, Record, Vertex};
