//! Notices of writes to objects a DC does not hold (partial replication), so that its coordinators' lease caches
//! keep serving a state fetched from another DC for as long as nobody wrote the object since: Karma's cache
//! invalidation, for vector snapshots (docs/placement.md, "The cache and objects held elsewhere").
//!
//! A state fetched from a holder at another DC comes with a visibility box whose entries stop at what that holder
//! had applied from each DC (its pvc), about one one-way delay in the past; every later transaction of the
//! reader's sessions starts above that, so without more knowledge the cached state would miss every later window.
//! But a DC hears of every write to every object, held or not: its own clients' writes commit at its own
//! partitions, and every other DC sends it, with the commit times of all its transactions, a fingerprint of each
//! write to an object it does not hold ([`crate::Message::Replicate`]'s `away`). If no write of origin `k` to the
//! object came in a stretch, the state stays exact over that stretch in entry `k`, as long as the holder did not
//! cut entry `k` to leave out a version it had (the box's `open` entries, [`crate::store::visibility_box`]).
//! This module carries that knowledge from the partitions to the coordinators, as a stream:
//!
//! - each partition ([`Stream`]) collects the notices it receives and its own commits of objects its DC does not
//!   hold, and sends them with its pvc report ([`Report`]). Every notice of origin `k` at or below the report's
//!   pvc entry `k` was collected before the report (a remote transaction arrives before pvc passes it; a local
//!   commit lands above the pvc's local entry), so it is in that report or an earlier one of the stream;
//! - each stabilizer ([`Merge`]) joins the partitions' streams and hands its coordinators, with each stable
//!   snapshot, the notices of the stretch since the last one ([`Chunk`]): every notice of origin `k` with a time
//!   in `(from[k], stable[k]]` is in that chunk (the stable snapshot is the least pvc), and later ones wait for
//!   their chunk;
//! - each coordinator's cache ([`Known`]) keeps the latest notice per object and origin for a while, and raises a
//!   cached state's open entry `k` up to the stable snapshot's when no notice of origin `k` came after it.
//!
//! Without partial replication the same stream carries a notice of every write a DC's partitions apply (their own
//! commits and the remote transactions they apply: `Partition::notices_held_writes`), and a holder marks
//! the boxes of states fetched by its own DC's coordinators open too: a state cached at a coordinator stays exact
//! above the owner's pvc at the fetch for as long as nobody wrote it, so that a session whose clock a later commit
//! moved past the box still reads it (HoneyPot's cache, whose boxes otherwise end where they were fetched).
//!
//! Gaps are never papered over: a partition that starts a new stream (a restart, a new leader) or a report that
//! went missing (sequence numbers) makes the stabilizer start its chunks above everything that partition had
//! seen, and a coordinator that misses a chunk (the next one starts above what it knows) raises its floor: no entry
//! is raised from below a floor.

use crate::{DcId, DetHashMap, PartitionId, Timestamp, VectorClock};
use serde::{Deserialize, Serialize};

/// A notice: the write's origin DC, its object's fingerprint ([`crate::ObjectId::fingerprint`]) and the origin's
/// entry of its commit vector.
pub type Notice = (DcId, u32, Timestamp);

/// A partition's notices since its last report (in [`crate::Message::PvcReport`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Names the stream (its local start time): every notice the partition collected since the stream started is
    /// in this report or an earlier one of it.
    pub since: Timestamp,
    /// The report's number in its stream, from 0.
    pub seq: u64,
    /// Per origin, at or above every notice the partition has seen so far, collected or not (where a gap before
    /// this report ends).
    pub seen: VectorClock,
    /// The notices collected since the last report.
    pub notices: Vec<Notice>,
}

/// A stabilizer's notices of the stretch since its last stable snapshot (in [`crate::Message::Stable`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// Every notice of origin `k` with a time in `(from[k], stable[k]]` is in this chunk. The chunks' stretches
    /// follow each other unless one starts above the last one's end: a gap.
    pub from: VectorClock,
    /// The notices of the stretch (and perhaps some below it).
    pub notices: Vec<Notice>,
}

/// A partition's side: collects and reports.
#[derive(Debug)]
pub struct Stream {
    /// `(since, next seq)` of the stream, once started.
    started: Option<(Timestamp, u64)>,
    /// Per origin, at or above every notice seen.
    seen: VectorClock,
    notices: Vec<Notice>,
}

impl Stream {
    /// A stream for vectors of `dcs` entries.
    pub fn new(dcs: usize) -> Self {
        Self { started: None, seen: VectorClock::zero(dcs), notices: Vec::new() }
    }

    /// A write of origin `origin` to the object `fingerprint`, committed at `at` there.
    pub fn notice(&mut self, origin: DcId, fingerprint: u32, at: Timestamp) {
        self.saw(origin, at);
        self.notices.push((origin, fingerprint, at));
    }

    /// A transaction of origin `origin` at `at` whose notices were not kept (replayed from the log after a
    /// restart): a new stream starts above it.
    pub fn saw(&mut self, origin: DcId, at: Timestamp) {
        if (origin.0 as usize) < self.seen.len() && at > self.seen.get(origin) {
            self.seen.set(origin, at);
        }
    }

    /// Starts a new stream at the next report: the partition took the lead, and what it collected before went
    /// nowhere.
    pub fn restart(&mut self) {
        self.started = None;
    }

    /// The report to send now. `pvc` is the partition's, `local` its DC and `clock` its clock (at or above every
    /// local commit it applied).
    pub fn report(&mut self, pvc: &VectorClock, local: DcId, clock: Timestamp) -> Report {
        let mut seen = self.seen.clone();
        seen.merge_max(pvc);
        if clock > seen.get(local) {
            seen.set(local, clock);
        }
        let (since, seq) = *self.started.get_or_insert_with(|| {
            self.notices.clear();
            (clock, 0)
        });
        self.started = Some((since, seq + 1));
        Report { since, seq, seen, notices: std::mem::take(&mut self.notices) }
    }
}

/// A stabilizer's side: joins the partitions' streams.
#[derive(Debug)]
pub struct Merge {
    /// Per partition, the stream followed and the sequence number expected next.
    streams: Vec<Option<(Timestamp, u64)>>,
    /// Chunks start at or above this: no stream is known complete below it.
    gap_to: VectorClock,
    /// The stable snapshot when the last chunk went out.
    emitted_to: Option<VectorClock>,
    pending: Vec<Notice>,
    /// Whether any partition reports notices at all (only then do chunks go out).
    active: bool,
}

impl Merge {
    /// For a DC of `partitions` partitions and vectors of `dcs` entries.
    pub fn new(partitions: usize, dcs: usize) -> Self {
        Self {
            streams: vec![None; partitions],
            gap_to: VectorClock::zero(dcs),
            emitted_to: None,
            pending: Vec::new(),
            active: false,
        }
    }

    /// Partition `p` reported.
    pub fn report(&mut self, p: PartitionId, report: Report) {
        let Some(slot) = self.streams.get_mut(p.0 as usize) else { return };
        if report.seen.len() != self.gap_to.len() {
            return;
        }
        self.active = true;
        if *slot != Some((report.since, report.seq)) {
            // A new stream, the first report heard, or a report went missing: what the partition saw before this
            // report is not all known.
            self.gap_to.merge_max(&report.seen);
        }
        *slot = Some((report.since, report.seq + 1));
        self.pending.extend(report.notices);
    }

    /// The chunk to send with the stable snapshot `stable`, if partitions report notices: those up to it (later
    /// ones wait for theirs, so that a chunk that goes missing loses only its stretch).
    pub fn chunk(&mut self, stable: &VectorClock) -> Option<Chunk> {
        // Until every partition has reported a stream (a partition on a node without a cache never does), nothing
        // is known of its writes: no chunk.
        if !self.active || stable.len() != self.gap_to.len() || self.streams.iter().any(Option::is_none) {
            return None;
        }
        let mut from = self.emitted_to.replace(stable.clone()).unwrap_or_else(|| stable.clone());
        from.merge_max(&self.gap_to);
        let (notices, later) =
            std::mem::take(&mut self.pending).into_iter().partition(|(origin, _, at)| *at <= stable.get(*origin));
        self.pending = later;
        Some(Chunk { from, notices })
    }
}

/// A coordinator's side: what it knows of the writes its DC's partitions noticed.
#[derive(Debug)]
pub struct Known {
    /// The latest notice per (origin, fingerprint), above `floor`'s entry.
    latest: DetHashMap<(u16, u32), Timestamp>,
    /// Per origin, every notice with a time in `(floor, to]` is known (or a later one of the same object is).
    floor: VectorClock,
    /// Up to where notices are known; `None` before the first chunk.
    to: Option<VectorClock>,
}

impl Known {
    /// Nothing known, for vectors of `dcs` entries.
    pub fn new(dcs: usize) -> Self {
        Self { latest: DetHashMap::default(), floor: VectorClock::zero(dcs), to: None }
    }

    /// A chunk arrived with the stable snapshot `stable`.
    pub fn learn(&mut self, chunk: Chunk, stable: &VectorClock) {
        if chunk.from.len() != self.floor.len() || stable.len() != self.floor.len() {
            return;
        }
        match &mut self.to {
            Some(to) => {
                for k in 0..self.floor.len() {
                    let dc = DcId(k as u16);
                    // One went missing: nothing is known at or below this one's start.
                    if chunk.from.get(dc) > to.get(dc) && chunk.from.get(dc) > self.floor.get(dc) {
                        self.floor.set(dc, chunk.from.get(dc));
                    }
                }
                to.merge_max(stable);
            }
            None => {
                self.floor.merge_max(&chunk.from);
                self.to = Some(stable.clone());
            }
        }
        for (origin, fingerprint, at) in chunk.notices {
            let latest = self.latest.entry((origin.0, fingerprint)).or_insert(at);
            *latest = (*latest).max(at);
        }
    }

    /// How far entry `origin` of a cached state of the object `fingerprint`, exact up to `hi` there, stays exact:
    /// up to where notices are known, if none of that object and origin came after `hi`; else `hi`. (`blind`:
    /// whatever came after, only for the deliberate bug [`crate::Bug::CacheExtendsOverWrites`].)
    pub fn exact_until(&self, origin: DcId, fingerprint: u32, hi: Timestamp, blind: bool) -> Timestamp {
        let Some(to) = &self.to else { return hi };
        if origin.0 as usize >= to.len() {
            return hi;
        }
        let unwritten =
            || hi >= self.floor.get(origin) && self.latest.get(&(origin.0, fingerprint)).is_none_or(|&at| at <= hi);
        if blind || unwritten() {
            to.get(origin).max(hi)
        } else {
            hi
        }
    }

    /// Forgets notices at or below `cutoff` (which raises the floor): states exact only below it are not raised
    /// any more.
    pub fn forget(&mut self, cutoff: &VectorClock) {
        if cutoff.len() != self.floor.len() {
            return;
        }
        self.floor.merge_max(cutoff);
        let floor = &self.floor;
        self.latest.retain(|(origin, _), at| *at > floor.get(DcId(*origin)));
    }

    /// Nothing at or below it is raised.
    pub fn floor(&self) -> &VectorClock {
        &self.floor
    }

    /// Up to where notices are known (`None` before the first chunk).
    pub fn to(&self) -> Option<&VectorClock> {
        self.to.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u64) -> Timestamp {
        Timestamp(n)
    }

    fn v(a: u64, b: u64) -> VectorClock {
        VectorClock::from_entries(vec![t(a), t(b)])
    }

    const A: u32 = 0xa;
    const B: u32 = 0xb;
    const X: u32 = 0xc;

    #[test]
    fn a_stream_starts_above_what_it_saw_and_numbers_its_reports() {
        let mut s = Stream::new(2);
        s.notice(DcId(1), A, t(15));
        let first = s.report(&v(3, 9), DcId(0), t(10));
        assert_eq!(first, Report { since: t(10), seq: 0, seen: v(10, 15), notices: vec![] }, "before: unknown");
        s.notice(DcId(0), A, t(12));
        s.notice(DcId(1), B, t(17));
        let second = s.report(&v(11, 16), DcId(0), t(20));
        assert_eq!(
            second,
            Report { since: t(10), seq: 1, seen: v(20, 17), notices: vec![(DcId(0), A, t(12)), (DcId(1), B, t(17))] }
        );
        s.restart();
        s.saw(DcId(1), t(40));
        assert_eq!(
            s.report(&v(25, 30), DcId(0), t(30)),
            Report { since: t(30), seq: 0, seen: v(30, 40), notices: vec![] }
        );
    }

    #[test]
    fn chunks_start_above_gaps_and_a_coordinator_raises_its_floor_over_them() {
        let mut m = Merge::new(2, 2);
        assert_eq!(m.chunk(&v(5, 5)), None, "no partition reports notices: no chunks");
        let report = |since, seq, seen: VectorClock, notices| Report { since: t(since), seq, seen, notices };
        m.report(PartitionId(0), report(10, 0, v(10, 6), vec![]));
        assert_eq!(m.chunk(&v(5, 5)), None, "partition 1 has not reported a stream: its writes are unknown");
        m.report(PartitionId(1), report(8, 0, v(8, 4), vec![]));
        let first = m.chunk(&v(8, 4)).unwrap();
        assert_eq!(first.from, v(10, 6), "nothing is said at or below what the streams saw before they started");
        m.report(PartitionId(0), report(10, 1, v(22, 20), vec![(DcId(0), A, t(14)), (DcId(1), B, t(19))]));
        m.report(PartitionId(1), report(8, 1, v(18, 12), vec![]));
        let second = m.chunk(&v(18, 12)).unwrap();
        assert_eq!(second, Chunk { from: v(10, 6), notices: vec![(DcId(0), A, t(14))] }, "B's waits for its chunk");
        // Partition 1's report 2 went missing: nothing is known up to what it had seen at report 3.
        m.report(PartitionId(1), report(8, 3, v(32, 25), vec![]));
        m.report(PartitionId(0), report(10, 2, v(31, 30), vec![]));
        assert_eq!(m.chunk(&v(30, 25)).unwrap(), Chunk { from: v(32, 25), notices: vec![(DcId(1), B, t(19))] });

        let mut k = Known::new(2);
        assert_eq!(k.exact_until(DcId(0), X, t(9), false), t(9), "nothing known yet");
        k.learn(first, &v(8, 4));
        k.learn(second, &v(18, 12));
        assert_eq!(k.exact_until(DcId(0), X, t(12), false), t(18), "no write of X: exact up to what is known");
        assert_eq!(k.exact_until(DcId(1), X, t(7), false), t(12));
        assert_eq!(k.exact_until(DcId(0), X, t(9), false), t(9), "below the floor: unknown");
        assert_eq!(k.exact_until(DcId(0), A, t(12), false), t(12), "A was written at 14");
        assert_eq!(k.exact_until(DcId(1), A, t(7), false), t(12), "by DC 0, not DC 1");
        assert_eq!(k.exact_until(DcId(0), A, t(14), false), t(18), "the state already holds the write at 14");
        k.learn(Chunk { from: v(25, 12), notices: vec![] }, &v(30, 20));
        assert_eq!(k.exact_until(DcId(0), X, t(20), false), t(20), "a missed chunk raised the floor to 25");
        assert_eq!(k.exact_until(DcId(1), X, t(7), false), t(20), "DC 1's stretches follow each other");
        k.forget(&v(40, 40));
        assert!(k.latest.is_empty());
    }
}
