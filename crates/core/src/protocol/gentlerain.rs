//! GentleRain (Du et al., SoCC 2014): causal consistency with one scalar global stable time.
//!
//! Every remote entry of a new transaction's snapshot is the smallest remote entry of the DC's stable vector, so
//! the updates of all other DCs become visible together, as slowly as the slowest DC allows, and a DC that is cut
//! off freezes the visibility of every remote update. In exchange a snapshot needs one scalar instead of a vector,
//! which is the trade-off Cure's evaluation measures. Reads and remote transactions wait as under Cure.

use super::{ProtocolRules, ReadVersion};
use crate::{DcId, Timestamp, VectorClock};

/// GentleRain's rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GentleRain;

impl GentleRain {
    /// The global stable time: the smallest remote entry of the stable vector (zero when there is no other DC, as
    /// nothing remote is visible then anyway).
    pub fn global_stable_time(stable: &VectorClock, local: DcId) -> Timestamp {
        remote_dcs(stable, local).map(|d| stable.get(d)).min().unwrap_or(Timestamp::ZERO)
    }
}

/// The DCs of a vector other than the local one.
fn remote_dcs(stable: &VectorClock, local: DcId) -> impl Iterator<Item = DcId> {
    let len = u16::try_from(stable.len()).expect("a vector has one entry per DC, and DC ids are u16");
    (0..len).map(DcId).filter(move |d| *d != local)
}

impl ProtocolRules for GentleRain {
    fn name(&self) -> &'static str {
        "gentlerain"
    }

    fn remote_snapshot(&self, stable: &VectorClock, local: DcId) -> VectorClock {
        let global = GentleRain::global_stable_time(stable, local);
        let mut snapshot = stable.clone();
        for d in remote_dcs(stable, local) {
            snapshot.set(d, global);
        }
        snapshot
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

    #[test]
    fn gentlerain_collapses_remote_entries_to_the_global_stable_time() {
        let stable = VectorClock::from_entries(vec![Timestamp(50), Timestamp(30), Timestamp(40)]);
        let s = GentleRain.remote_snapshot(&stable, DcId(0));
        assert_eq!(s.entries(), &[Timestamp(50), Timestamp(30), Timestamp(30)]);
        // The local entry is left alone wherever the local DC sits in the vector.
        let s = GentleRain.remote_snapshot(&stable, DcId(1));
        assert_eq!(s.entries(), &[Timestamp(40), Timestamp(30), Timestamp(40)]);
    }

    #[test]
    fn a_single_dc_snapshot_is_the_stable_vector() {
        let stable = VectorClock::from_entries(vec![Timestamp(50)]);
        assert_eq!(GentleRain.remote_snapshot(&stable, DcId(0)), stable);
        assert_eq!(GentleRain::global_stable_time(&stable, DcId(0)), Timestamp::ZERO);
    }
}
