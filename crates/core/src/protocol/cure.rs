//! Cure (Akkoorath et al., ICDCS 2016), the default: transactional causal consistency with vector stable
//! snapshots.
//!
//! A new transaction takes every remote entry of its snapshot from the DC's stable vector, so an update from one DC
//! becomes visible as soon as every partition here has it, however far behind another DC is. A read waits until
//! its partition has applied everything its snapshot includes and returns the object at that snapshot; a remote
//! transaction applies once its dependencies on the other DCs are applied here.

use super::{ProtocolRules, ReadVersion};
use crate::{DcId, VectorClock};

/// Cure's rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cure;

impl ProtocolRules for Cure {
    fn name(&self) -> &'static str {
        "cure"
    }

    fn remote_snapshot(&self, stable: &VectorClock, _local: DcId) -> VectorClock {
        stable.clone()
    }

    fn read_waits_for_snapshot(&self) -> bool {
        true
    }

    fn read_version(&self) -> ReadVersion {
        ReadVersion::AtSnapshot
    }

    fn tracks_dependencies(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    #[test]
    fn snapshots_take_the_stable_vector_as_it_is() {
        let stable = VectorClock::from_entries(vec![Timestamp(50), Timestamp(30), Timestamp(40)]);
        assert_eq!(Cure.remote_snapshot(&stable, DcId(0)), stable);
    }

    #[test]
    fn reads_and_remote_transactions_wait_for_what_they_depend_on() {
        let have = VectorClock::from_entries(vec![Timestamp(10), Timestamp(10)]);
        let ahead = VectorClock::from_entries(vec![Timestamp(10), Timestamp(11)]);
        assert!(Cure.may_serve_read(&have, &have));
        assert!(!Cure.may_serve_read(&ahead, &have));
        assert!(Cure.may_apply_remote(&have, &have));
        assert!(!Cure.may_apply_remote(&ahead, &have));
    }
}
