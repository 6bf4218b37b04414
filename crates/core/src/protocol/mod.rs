//! The protocol variants, as a few decisions over the shared state machines (the DKVF lesson: a variant is a small
//! module and one configuration value, so comparisons are fair: same storage, transport and API).
//!
//! Each variant is a zero-sized type in its own module implementing [`ProtocolRules`]; [`Protocol`] is the
//! configuration value that names one of them and hands out its rules with [`Protocol::rules`].
//!
//! - [`cure`] (the default): snapshots from the stable vector, reads wait until the partition can serve the
//!   snapshot, remote transactions apply once their dependencies are here.
//! - [`gentlerain`]: one scalar global stable time for every remote entry of a snapshot.
//! - [`eventual`]: no causal tracking; the baseline the papers compare against.

pub mod cure;
pub mod eventual;
pub mod gentlerain;

use crate::{DcId, VectorClock};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which version of an object a read returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadVersion {
    /// The object's state at the transaction's snapshot.
    AtSnapshot,
    /// The latest state this partition applied, whatever the snapshot.
    Latest,
}

/// The decisions in which the protocol variants differ. Everything else (storage, two-phase commit, replication,
/// stabilisation, garbage collection) is shared, so a variant is only these answers.
pub trait ProtocolRules: fmt::Debug + Send + Sync {
    /// The variant's name in configuration files, on the command line and in reports.
    fn name(&self) -> &'static str;

    /// The snapshot a new transaction may take for the remote entries, given the DC's stable snapshot. The local
    /// entry of the result is the stable snapshot's; the coordinator replaces it with its clock.
    fn remote_snapshot(&self, stable: &VectorClock, local: DcId) -> VectorClock;

    /// Whether a read waits until the partition has everything its snapshot includes before it is served.
    fn read_waits_for_snapshot(&self) -> bool;

    /// Which version a read returns.
    fn read_version(&self) -> ReadVersion;

    /// Whether a remote transaction waits until its causal dependencies are applied here before it applies.
    fn tracks_dependencies(&self) -> bool;

    /// Whether a read at `snapshot` may be served by a partition that has applied everything up to `available`
    /// (its pvc).
    fn may_serve_read(&self, snapshot: &VectorClock, available: &VectorClock) -> bool {
        !self.read_waits_for_snapshot() || snapshot.le(available)
    }

    /// Whether a remote transaction that depends on `dependencies` may apply at a partition that has applied
    /// everything up to `available` (its pvc).
    fn may_apply_remote(&self, dependencies: &VectorClock, available: &VectorClock) -> bool {
        !self.tracks_dependencies() || dependencies.le(available)
    }
}

/// Which protocol a DC runs: the configuration value naming a [`ProtocolRules`] implementation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Every variant, the default first: the valid names, in the order help texts list them.
    pub const ALL: [Protocol; 3] = [Protocol::Cure, Protocol::GentleRain, Protocol::Eventual];

    /// The variant's rules.
    pub fn rules(self) -> &'static dyn ProtocolRules {
        match self {
            Protocol::Cure => &cure::Cure,
            Protocol::GentleRain => &gentlerain::GentleRain,
            Protocol::Eventual => &eventual::Eventual,
        }
    }

    /// The name in configuration files, on the command line and in reports.
    pub fn name(self) -> &'static str {
        self.rules().name()
    }

    /// The valid names, comma-separated with a final "or", for messages.
    pub fn names_list() -> String {
        let names: Vec<&str> = Protocol::ALL.iter().map(|p| p.name()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A protocol name that names no variant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol {name:?}: use {}", Protocol::names_list())]
pub struct UnknownProtocol {
    /// The name that was given.
    pub name: String,
}

impl FromStr for Protocol {
    type Err = UnknownProtocol;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Protocol::ALL.into_iter().find(|p| p.name() == name).ok_or_else(|| UnknownProtocol { name: name.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::value::{Error as DeError, StrDeserializer};
    use serde::de::IntoDeserializer;

    #[test]
    fn every_name_parses_back_to_its_variant() {
        for p in Protocol::ALL {
            assert_eq!(p.name().parse::<Protocol>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_valid_ones() {
        let err = "causal".parse::<Protocol>().expect_err("no such protocol");
        assert_eq!(err.name, "causal");
        assert_eq!(err.to_string(), "unknown protocol \"causal\": use cure, gentlerain or eventual");
        // Names are exact, as in configuration files.
        assert!("Cure".parse::<Protocol>().is_err());
    }

    #[test]
    fn configuration_files_use_the_same_names() {
        // The serde names are derived separately from `name()`; a configuration file and the command line must
        // agree on them.
        for p in Protocol::ALL {
            let d: StrDeserializer<'_, DeError> = p.name().into_deserializer();
            assert_eq!(Protocol::deserialize(d), Ok(p));
        }
    }

    #[test]
    fn all_lists_each_variant_once_with_the_default_first() {
        assert_eq!(Protocol::ALL[0], Protocol::default());
        for (i, p) in Protocol::ALL.iter().enumerate() {
            assert!(!Protocol::ALL[i + 1..].contains(p));
            assert_eq!(p.rules().name(), p.name());
        }
    }
}
