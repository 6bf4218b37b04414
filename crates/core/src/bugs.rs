//! Deliberate protocol bugs, for showing that the TCC checkers catch what they claim to, and the one place that
//! decides whether one is in force.
//!
//! A bug is requested with [`Config::bug`], but honoured only where this build allows it ([`HONOURED`]): in test
//! and debug builds, and in builds with the `deliberate-bugs` feature (the simulator turns it on, so that
//! `causet sim --bug` works in release builds too). Elsewhere [`has`] is always false and [`checks_invariants`]
//! always true, so a release server cannot be talked out of its invariant checks by a stray configuration value.
//! State machines ask [`has`] where a bug changes behaviour and [`checks_invariants`] before asserting an invariant
//! that a deliberate bug breaks on purpose; they never read [`Config::bug`] themselves.

use crate::Config;
use serde::{Deserialize, Serialize};

/// A deliberate protocol bug. Never set in production; the server has no way to set one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bug {
    /// Partitions serve reads at once, without waiting for their clock or for earlier prepared transactions
    /// (Cure Alg. 2 line 6 removed).
    SkipReadWait,
    /// The coordinator commits at the smallest prepare time instead of the largest (Cure Alg. 1 line 33).
    CommitAtMinPrepareTime,
    /// Partitions ignore prepared transactions when computing pvc (Cure Alg. 2 UpdateClock), so one partition
    /// exposes a transaction's effects while another still holds it prepared.
    IgnorePreparedInPvc,
    /// The coordinators' lease cache serves any entry whose lease has not ended, whatever its visibility box and
    /// the transaction's window (HoneyPot's consistency test, Spec 1 line 12, removed).
    CacheIgnoresBoxes,
    /// The write buffer hands a component over one object per commit rather than all of it in one commit
    /// (HoneyPot's atomic handover removed).
    SplitHandover,
    /// Coordinators ignore the buffer token in a client's clock: a session that saw writes buffered at one
    /// coordinator starts at another without their handover (HoneyPot's obligation for sessions that move).
    IgnoreBufferTokens,
    /// Coordinators read every object at their own DC, whether it holds it or not (a bucket placed by rings): a
    /// DC that does not hold an object serves the state it has of it, none (partial replication's routing
    /// removed).
    ReadsIgnorePlacement,
    /// The lease cache raises the entries of states held at another DC up to what notices of writes are known to,
    /// whether or not a notice says the object was written since (the check of [`crate::away`] removed).
    CacheExtendsOverWrites,
}

impl Bug {
    /// Every deliberate bug.
    pub const ALL: [Bug; 8] = [
        Bug::SkipReadWait,
        Bug::CommitAtMinPrepareTime,
        Bug::IgnorePreparedInPvc,
        Bug::CacheIgnoresBoxes,
        Bug::SplitHandover,
        Bug::IgnoreBufferTokens,
        Bug::ReadsIgnorePlacement,
        Bug::CacheExtendsOverWrites,
    ];
}

/// Whether this build honours deliberate bugs at all: test and debug builds, and builds with the
/// `deliberate-bugs` feature.
pub const HONOURED: bool = cfg!(any(test, debug_assertions, feature = "deliberate-bugs"));

/// The deliberate bug in force under this configuration: the configured one where the build honours bugs, else
/// none.
pub fn active(config: &Config) -> Option<Bug> {
    if HONOURED {
        config.bug
    } else {
        None
    }
}

/// Whether `bug` is in force under this configuration.
pub fn has(config: &Config, bug: Bug) -> bool {
    active(config) == Some(bug)
}

/// Whether the state machines assert their invariants: always, unless a deliberate bug is in force (a bug breaks
/// some invariant on purpose, and the point is to see the checker, not an assertion, catch it).
pub fn checks_invariants(config: &Config) -> bool {
    active(config).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DcId;

    #[test]
    fn test_builds_honour_a_configured_bug() {
        const { assert!(HONOURED) };
        let mut config = Config::new(1, DcId(0), 1);
        assert!(checks_invariants(&config));
        assert!(Bug::ALL.iter().all(|b| !has(&config, *b)));
        for bug in Bug::ALL {
            config.bug = Some(bug);
            assert_eq!(active(&config), Some(bug));
            assert!(has(&config, bug));
            assert!(Bug::ALL.iter().filter(|b| **b != bug).all(|b| !has(&config, *b)));
            assert!(!checks_invariants(&config));
        }
    }
}
