//! Eventual consistency: no causal tracking, the baseline the papers compare against.
//!
//! Reads are served at once and return the latest state the partition applied, whatever the snapshot, and remote
//! transactions apply on arrival. Replicas still converge (the objects are CRDTs and replication is reliable), but
//! a client may see an effect before its cause: not causally consistent, and the checkers flag it on multi-DC runs.
//! Snapshots are still taken as under Cure so that garbage collection and the stable snapshot work unchanged.

use super::{ProtocolRules, ReadVersion};
use crate::{DcId, VectorClock};

/// The eventual-consistency baseline's rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Eventual;

impl ProtocolRules for Eventual {
    fn name(&self) -> &'static str {
        "eventual"
    }

    fn remote_snapshot(&self, stable: &VectorClock, _local: DcId) -> VectorClock {
        stable.clone()
    }

    fn read_waits_for_snapshot(&self) -> bool {
        false
    }

    fn read_version(&self) -> ReadVersion {
        ReadVersion::Latest
    }

    fn tracks_dependencies(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    #[test]
    fn nothing_waits() {
        let have = VectorClock::from_entries(vec![Timestamp(10), Timestamp(10)]);
        let ahead = VectorClock::from_entries(vec![Timestamp(10), Timestamp(11)]);
        assert!(Eventual.may_serve_read(&ahead, &have));
        assert!(Eventual.may_apply_remote(&ahead, &have));
        assert_eq!(Eventual.read_version(), ReadVersion::Latest);
    }
}
