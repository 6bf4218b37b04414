//! An async client for Causet over AntidoteDB's client protocol (it speaks to AntidoteDB too, for the parts whose
//! bytes Causet defines the same way).
//!
//! ```no_run
//! # async fn example() -> Result<(), causet_client::ClientError> {
//! use causet_client::{Client, Counter, Set, ValueExt};
//!
//! let mut client = Client::connect("127.0.0.1:8087").await?;
//! let hits = Counter::new("hits", "site");
//! let tags = Set::aw("tags", "site");
//!
//! let mut tx = client.start_transaction(None).await?;
//! tx.update([hits.increment(1), tags.add("rust")]).await?;
//! let values = tx.read(&[hits.key().clone()]).await?;
//! assert_eq!(values[0].as_counter(), Some(1));
//! tx.commit().await?;
//!
//! // The session's causal clock is passed along: this read sees the commit above.
//! let (values, _snapshot) = client.static_read(None, &[tags.key().clone()]).await?;
//! assert_eq!(values[0].as_set().map(<[_]>::len), Some(1));
//! # Ok(())
//! # }
//! ```
//!
//! - [`Client`]: a connection and the session's causal clock; static reads and updates.
//! - [`Transaction`]: an interactive transaction, borrowing its client (requests on a connection are sequential:
//!   the protocol has no request ids).
//! - [`Counter`], [`Set`], [`LwwRegister`], [`MvRegister`], [`Flag`], [`Map`]: typed operation builders, for
//!   objects and for map fields; [`ValueExt`] reads values back.
//! - [`ClientError`]: failures, with the server's message and AntidoteDB's error code.

#![warn(missing_docs)]

mod client;
mod connection;
mod error;
mod typed;

pub use client::{Client, Transaction};
pub use error::ClientError;
pub use typed::{Counter, Flag, LwwRegister, Map, MvRegister, Set, ValueExt};

pub use causet_core::coordinator::{BufferToken, ClientClock, ReadFrom};
pub use causet_core::{ObjectId, TxId, VectorClock};
pub use causet_crdt::{CrdtType, MapKey, Op, Value};
