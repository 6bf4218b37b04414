//! Which ring's holder a read of an object held elsewhere goes to: the one this coordinator's reads have found
//! fastest lately (Karma's reads from the nearest ring, [`RingChoice::Nearest`](crate::placement::RingChoice)).
//!
//! Karma picks, for each read, the ring whose replica is nearest by latencies a background process measures, so
//! that a ring cut off or congested is left for another. Here the measure is the reads themselves: each read sent
//! to another DC is timed from sending to answer, and a DC's estimate is the smoothed round trip of its answers,
//! raised to the age of its oldest read still unanswered (so a DC that stops answering, or answers slowly, loses
//! its reads as soon as they are late, not one round trip after). What is measured is what a reader waits for —
//! the round trip, and the holder's wait until it has the snapshot's transactions — not the network alone: a
//! holder of another ring can be near and still slow to serve a snapshot that holds this DC's latest writes.
//!
//! A read goes to its own ring's holder until that one has been measured; then to the holder with the lowest
//! estimate. The others are measured by *probes*: at most every [`PROBE_US`], a holder not heard from for that
//! long is sent a copy of a read as it goes out (its answer only times the holder; the transaction takes the
//! first answer of the holder it chose, as with failover).
//!
//! None of this touches consistency: every holder serves a read at the transaction's snapshot, or refuses it
//! (`remote.rs`).

use crate::DcId;
use std::collections::{BTreeMap, BTreeSet};

/// A holder not heard from for this long is probed (and probed again no sooner).
pub const PROBE_US: u64 = 500_000;

/// An answer's weight in a DC's smoothed round trip (the rest is the estimate before it).
const NEW_SAMPLE_WEIGHT: f64 = 0.5;

/// A read unanswered for this long stops counting as in flight, and counts as a round trip this long.
const GIVE_UP_US: u64 = 5_000_000;

/// Round trips to other DCs' holders, as this coordinator's reads measured them.
#[derive(Debug)]
pub(super) struct Latencies {
    /// Per DC: the smoothed round trip, µs (`None` until an answer came), when the last answer and the last probe
    /// were, and its reads in flight.
    dcs: Vec<Estimate>,
    /// Reads in flight to other DCs, by fetch and DC: when they were sent (the same reads as the DCs'
    /// `in_flight`, found by fetch).
    sent_at: BTreeMap<(u64, DcId), u64>,
    /// Probes sent.
    probes: u64,
}

#[derive(Clone, Debug, Default)]
struct Estimate {
    smoothed_us: Option<f64>,
    answered_us: Option<u64>,
    probed_us: Option<u64>,
    /// Reads in flight to this DC, oldest first: (sent at, fetch).
    in_flight: BTreeSet<(u64, u64)>,
}

impl Latencies {
    pub(super) fn new(dcs: usize) -> Self {
        Latencies { dcs: vec![Estimate::default(); dcs], sent_at: BTreeMap::new(), probes: 0 }
    }

    /// Read `fetch` was sent to `dc`.
    pub(super) fn sent(&mut self, now_us: u64, fetch: u64, dc: DcId) {
        let Some(e) = self.dcs.get_mut(usize::from(dc.0)) else { return };
        if let Some(before) = self.sent_at.insert((fetch, dc), now_us) {
            e.in_flight.remove(&(before, fetch));
        }
        e.in_flight.insert((now_us, fetch));
    }

    /// `dc` answered read `fetch`; a refusal (`refused`) counts `penalty_us` longer: it sends the read on to
    /// another ring.
    pub(super) fn answered(&mut self, now_us: u64, fetch: u64, dc: DcId, refused: bool, penalty_us: u64) {
        let Some(sent_us) = self.sent_at.remove(&(fetch, dc)) else { return };
        let took = now_us.saturating_sub(sent_us) + if refused { penalty_us } else { 0 };
        self.sample(now_us, dc, took, (sent_us, fetch));
    }

    /// A round trip of `took_us` to `dc`, for the read `(sent at, fetch)` no longer in flight.
    fn sample(&mut self, now_us: u64, dc: DcId, took_us: u64, read: (u64, u64)) {
        let Some(e) = self.dcs.get_mut(usize::from(dc.0)) else { return };
        e.in_flight.remove(&read);
        let took = took_us as f64;
        e.smoothed_us = Some(e.smoothed_us.map_or(took, |s| s + NEW_SAMPLE_WEIGHT * (took - s)));
        e.answered_us = Some(now_us);
    }

    /// Reads unanswered for [`GIVE_UP_US`] stop counting as in flight; each counts as a round trip that long.
    pub(super) fn give_up(&mut self, now_us: u64) {
        for i in 0..self.dcs.len() {
            while let Some(&(sent, fetch)) = self.dcs[i].in_flight.first() {
                if now_us.saturating_sub(sent) < GIVE_UP_US {
                    break;
                }
                let dc = DcId(i as u16);
                self.sent_at.remove(&(fetch, dc));
                self.sample(now_us, dc, GIVE_UP_US, (sent, fetch));
            }
        }
    }

    /// `dc`'s estimate, µs: its smoothed round trip, raised to the age of its oldest read in flight; `None` if it
    /// never answered and has nothing in flight.
    pub(super) fn estimate(&self, now_us: u64, dc: DcId) -> Option<u64> {
        let e = self.dcs.get(usize::from(dc.0))?;
        let smoothed = e.smoothed_us.map(|s| s as u64);
        let waiting = e.in_flight.first().map(|(sent, _)| now_us.saturating_sub(*sent));
        match (smoothed, waiting) {
            (None, None) => None,
            (s, w) => Some(s.unwrap_or(0).max(w.unwrap_or(0))),
        }
    }

    /// `holders` (the first is this DC's own ring's) ordered fastest first: the own ring's holder stays first
    /// until it has an estimate; then every holder with an estimate, lowest first, and those without after them
    /// in the order given.
    pub(super) fn order(&self, now_us: u64, holders: &mut [DcId]) {
        let key = |i: usize, dc: DcId| match self.estimate(now_us, dc) {
            Some(e) => e,
            None if i == 0 => 0,
            None => u64::MAX,
        };
        let mut keyed: Vec<(u64, usize, DcId)> = holders.iter().enumerate().map(|(i, d)| (key(i, *d), i, *d)).collect();
        keyed.sort_unstable();
        for (slot, (_, _, dc)) in holders.iter_mut().zip(keyed) {
            *slot = dc;
        }
    }

    /// Whether `dc` is due a probe: not heard from, nor probed, for [`PROBE_US`]. Notes the probe if so.
    pub(super) fn probe(&mut self, now_us: u64, dc: DcId) -> bool {
        let Some(e) = self.dcs.get_mut(usize::from(dc.0)) else { return false };
        let stale = |at: Option<u64>| at.is_none_or(|t| now_us.saturating_sub(t) >= PROBE_US);
        if stale(e.answered_us) && stale(e.probed_us) {
            e.probed_us = Some(now_us);
            self.probes += 1;
            return true;
        }
        false
    }

    /// Probes sent.
    pub(super) fn probes(&self) -> u64 {
        self.probes
    }

    /// The smoothed round trip to each DC measured, µs (for `/status`).
    pub(super) fn smoothed(&self) -> Vec<Option<u64>> {
        self.dcs.iter().map(|e| e.smoothed_us.map(|s| s as u64)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_ring_goes_first_until_measured_then_the_fastest() {
        let mut l = Latencies::new(3);
        let mut holders = [DcId(1), DcId(2)];
        l.order(0, &mut holders);
        assert_eq!(holders, [DcId(1), DcId(2)], "nothing measured: the own ring's holder");
        l.sent(0, 7, DcId(2));
        l.answered(30_000, 7, DcId(2), false, 0);
        l.order(30_000, &mut holders);
        assert_eq!(holders, [DcId(1), DcId(2)], "the own ring's holder is not measured yet");
        l.sent(30_000, 8, DcId(1));
        l.answered(130_000, 8, DcId(1), false, 0);
        l.order(130_000, &mut holders);
        assert_eq!(holders, [DcId(2), DcId(1)], "30 ms against 100 ms");
    }

    #[test]
    fn a_holder_that_stops_answering_loses_its_reads_as_soon_as_they_are_late() {
        let mut l = Latencies::new(3);
        l.sent(0, 1, DcId(1));
        l.answered(20_000, 1, DcId(1), false, 0);
        l.sent(0, 2, DcId(2));
        l.answered(60_000, 2, DcId(2), false, 0);
        let mut holders = [DcId(1), DcId(2)];
        l.order(60_000, &mut holders);
        assert_eq!(holders, [DcId(1), DcId(2)]);
        // DC 1 is cut off: its read waits, and at 70 ms the estimate passes DC 2's 60.
        l.sent(100_000, 3, DcId(1));
        assert_eq!(l.estimate(150_000, DcId(1)), Some(50_000));
        l.order(171_000, &mut holders);
        assert_eq!(holders, [DcId(2), DcId(1)]);
        // Given up on after five seconds, the read counts as a round trip that long.
        l.give_up(5_100_000);
        assert_eq!(l.estimate(5_100_000, DcId(1)), Some((20_000 + 5_000_000) / 2));
    }

    #[test]
    fn a_refusal_counts_as_the_wait_for_the_next_ring() {
        let mut l = Latencies::new(2);
        l.sent(0, 1, DcId(1));
        l.answered(10_000, 1, DcId(1), true, 500_000);
        assert_eq!(l.estimate(10_000, DcId(1)), Some(510_000));
        l.answered(20_000, 1, DcId(1), false, 0);
        assert_eq!(l.estimate(20_000, DcId(1)), Some(510_000), "an answer to a read not in flight is not timed");
    }

    #[test]
    fn a_holder_is_probed_when_not_heard_from_and_not_again_at_once() {
        let mut l = Latencies::new(3);
        assert!(l.probe(0, DcId(2)));
        assert!(!l.probe(PROBE_US - 1, DcId(2)));
        assert!(l.probe(PROBE_US, DcId(2)));
        l.sent(PROBE_US, 5, DcId(2));
        l.answered(PROBE_US + 50_000, 5, DcId(2), false, 0);
        assert!(!l.probe(2 * PROBE_US, DcId(2)), "heard from 450 ms ago");
        assert!(l.probe(2 * PROBE_US + 50_000, DcId(2)));
        assert!(!l.probe(0, DcId(9)), "no such DC");
    }
}
