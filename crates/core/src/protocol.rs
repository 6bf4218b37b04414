//! The protocol variants, as a few decisions over the shared state machines (the DKVF lesson: a variant is a small
//! module and one configuration value, so comparisons are fair: same storage, transport and API).
//!
//! - **Cure** (the default): snapshots from the stable vector, reads wait until the partition can serve the
//!   snapshot, remote transactions apply once their dependencies are here.
//! - **GentleRain**: one scalar global stable time: every remote entry of a snapshot is the smallest remote entry
//!   of the stable vector, so remote updates become visible together, as slowly as the slowest DC, and a DC that is
//!   cut off freezes all remote visibility.
//! - **Eventual**: no causal tracking: reads return the latest applied state at once, remote transactions apply on
//!   arrival. Not causally consistent; the baseline the papers compare against.

use crate::{DcId, Timestamp, VectorClock};
use serde::{Deserialize, Serialize};

/// Which protocol a DC runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Cure: vector stable snapshots (the default).
    #[default]
    Cure,
    /// GentleRain: a scalar global stable time.
    GentleRain,
    /// Eventual consistency: no causal tracking.
    Eventual,
}

impl Protocol {
    /// The snapshot a new transaction may take for the remote entries, given the DC's stable snapshot.
    pub fn remote_snapshot(self, stable: &VectorClock, local: DcId) -> VectorClock {
        match self {
            Protocol::Cure | Protocol::Eventual => stable.clone(),
            Protocol::GentleRain => {
                let global = (0..stable.len() as u16)
                    .map(DcId)
                    .filter(|d| *d != local)
                    .map(|d| stable.get(d))
                    .min()
                    .unwrap_or(Timestamp::ZERO);
                let mut snapshot = stable.clone();
                for d in (0..stable.len() as u16).map(DcId).filter(|d| *d != local) {
                    snapshot.set(d, global);
                }
                snapshot
            }
        }
    }

    /// Whether reads wait until the partition can serve their snapshot, and read at it.
    pub fn reads_snapshots(self) -> bool {
        self != Protocol::Eventual
    }

    /// Whether remote transactions wait for their causal dependencies before they apply.
    pub fn tracks_dependencies(self) -> bool {
        self != Protocol::Eventual
    }

    /// The name in configuration files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Cure => "cure",
            Protocol::GentleRain => "gentlerain",
            Protocol::Eventual => "eventual",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gentlerain_collapses_remote_entries_to_the_global_stable_time() {
        let stable = VectorClock::from_entries(vec![Timestamp(50), Timestamp(30), Timestamp(40)]);
        let s = Protocol::GentleRain.remote_snapshot(&stable, DcId(0));
        assert_eq!(s.entries(), &[Timestamp(50), Timestamp(30), Timestamp(30)]);
        assert_eq!(Protocol::Cure.remote_snapshot(&stable, DcId(0)), stable);
    }
}
