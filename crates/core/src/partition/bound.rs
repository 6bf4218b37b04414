//! The durable bound on a hybrid clock: what lets a restarted partition start its clock just above what it
//! exposed before a crash, instead of a worst-case guess.
//!
//! Before a crash a partition exposed timestamps up to its clock: in pvc reports, in read replies (a read waits
//! until pvc passes its snapshot, and a hybrid clock jumps to a snapshot ahead of it), in prepare answers, in the
//! replication heartbeats' promises. After a restart it must never issue a prepare time at or below any of them,
//! or a transaction could commit under a snapshot already read. Records carry some of them (a prepare record its
//! prepare time, a commit record its commit time); nothing records the clock itself, and a hybrid clock can run
//! up to `max_clock_ahead_us` past physical time, so recovery used to start the clock that far (1 s) in the
//! future, committing in the future for a second after every restart.
//!
//! Now every message a partition sends leaves only once a durable [`LogRecord::ClockBound`] covers the clock
//! at that moment (the invariant asserted in [`BoundKeeper::release`]). A message that finds the clock above the
//! durable bound waits for a new bound, `clock_bound_us` past the clock, to be durable; and the partition renews
//! the bound on its timer once the clock comes within a quarter of that distance ([`super::BOUND_RENEW_DIVISOR`]),
//! so in steady state no message waits; a partition logging other records renews it with one of them once within
//! half ([`super::BOUND_RIDE_DIVISOR`]), so that the bound shares that record's log write (and Raft round).
//! Recovery starts the clock at the largest bound in the log or the checkpoint: at most `clock_bound_us` past
//! what was exposed. (A leader of a replicated partition does the same with its bound in the group's log, so a
//! new leader starts above whatever the old one exposed.)
//!
//! A physical clock never runs ahead of physical time, which has moved on by the time a partition restarts, so
//! partitions on a physical clock keep no bound.

use crate::record::Lsn;
use crate::{Envelope, Timestamp};
use std::collections::VecDeque;

/// The clock bounds logged and made durable, and the messages waiting for one.
#[derive(Debug, Default)]
pub(super) struct BoundKeeper {
    /// The largest bound logged.
    logged: Timestamp,
    /// The largest bound durable.
    durable: Timestamp,
    /// Bounds logged, not yet durable, in log order.
    in_flight: VecDeque<(Lsn, Timestamp)>,
    /// Messages waiting for the bound logged at that position, in the order they were sent.
    held: VecDeque<(Lsn, Timestamp, Envelope)>,
}

impl BoundKeeper {
    /// A bound found in the log or a checkpoint at recovery: durable.
    pub(super) fn recovered(&mut self, until: Timestamp) {
        self.logged = self.logged.max(until);
        self.durable = self.durable.max(until);
    }

    /// The largest bound logged: recovery starts the clock there, and a checkpoint carries it.
    pub(super) fn logged(&self) -> Timestamp {
        self.logged
    }

    /// Whether a message sent with the clock at `clock` may leave now.
    pub(super) fn may_send(&self, clock: Timestamp) -> bool {
        self.held.is_empty() && clock <= self.durable
    }

    /// A bound to log, if the clock at `clock` is within `margin` of the largest bound logged (renewal) or past
    /// it: the caller logs `ClockBound { until }` and reports its position with [`BoundKeeper::logged_at`].
    pub(super) fn due(&self, clock: Timestamp, margin: u64) -> bool {
        Timestamp::from_micros(clock.micros().saturating_add(margin)) > self.logged
    }

    /// The bound `until` was logged at `lsn`.
    pub(super) fn logged_at(&mut self, lsn: Lsn, until: Timestamp) {
        debug_assert!(until > self.logged, "a bound below one logged before");
        self.logged = until;
        self.in_flight.push_back((lsn, until));
    }

    /// Holds a message sent with the clock at `clock` until a bound covering it is durable. The caller logged
    /// one first if none covers it.
    pub(super) fn hold(&mut self, clock: Timestamp, envelope: Envelope) {
        assert!(clock <= self.logged, "held for a bound never logged ({clock} > {})", self.logged);
        let lsn = self
            .in_flight
            .iter()
            .find(|(_, until)| *until >= clock)
            .map(|(lsn, _)| *lsn)
            .expect("a logged bound above the durable one is in flight");
        let lsn = self.held.back().map_or(lsn, |(last, _, _)| (*last).max(lsn));
        self.held.push_back((lsn, clock, envelope));
    }

    /// Records up to `lsn` are durable: the messages now covered, in the order they were sent.
    pub(super) fn release(&mut self, lsn: Lsn) -> Vec<Envelope> {
        while self.in_flight.front().is_some_and(|(at, _)| *at <= lsn) {
            let (_, until) = self.in_flight.pop_front().expect("front exists");
            self.durable = self.durable.max(until);
        }
        let mut out = Vec::new();
        while self.held.front().is_some_and(|(at, _, _)| *at <= lsn) {
            let (_, clock, envelope) = self.held.pop_front().expect("front exists");
            assert!(clock <= self.durable, "a message leaves with the clock at {clock}, above the durable bound");
            out.push(envelope);
        }
        out
    }
}
