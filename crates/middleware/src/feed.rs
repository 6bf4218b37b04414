//! Feeds: each local set's writer publishes the order of its writes, and every other local set resolves them in
//! that order, ahead of its reads. Not in the paper (departure 10 in `docs/middleware.md`).
//!
//! # Why
//!
//! A read resolves the version it returns by walking its dependency graph down to versions it knows resolved
//! (marks). A version of a hot key written in another local set has a large graph: its record's folded set names
//! the newest version of every copy that the key's older versions depended on, thousands of them when those are
//! not known stable, and each is a record to read before the read can answer. Measured with Cassandra in two
//! emulated datacenters: every read in the second datacenter that met such a version read thousands of records.
//!
//! # How
//!
//! An exclusive writer (the only instance of its local set) appends each write the store acknowledged to its
//! *feed*: numbered batches of [`Entry`]s (the version and what it required when written), in acknowledgement
//! order, stored in the store itself (which replicates them like everything else). A feed belongs to one *epoch*
//! (one run of the writer), announced with the writer's own frontier row. Every other local set's instance follows
//! the feed: it reads the batches in order and resolves their versions against its local store, up to
//! [`RESOLVE_SPAN`] at a time, each with its own requirements and its copy's previous version
//! ([`Resolution::with_requirements`]: a record's requirements for a version its copy has moved past
//! over-approximate, and would walk everything written since), marking them resolved. A version's requirements
//! written by the same writer were acknowledged before it was written, so they come earlier in the feed and are
//! usually marked when it is resolved: following costs about one meta read per write. Reads check a version that
//! waits in a followed feed with its entry too ([`Resolution::adopt`]). When the follower keeps up, a read of a hot
//! key finds its winner marked (one round, no dependency information read); when it falls behind (measured: under
//! saturation on two shared cores, `bench/RESULTS-letting-it-be.md` run 6), reads walk what it has not reached.
//!
//! A follower publishes how far it has resolved the feed: its [`Frontier`] (epoch, the range of positions resolved
//! without a gap, and the batch to read next). A version resolved in a local set is present there with its whole
//! causal past (by its own or its records' requirements, which contain it), and the writer's own local set holds it with its
//! causal past too, so a version every other local set has resolved is *stable*: the writer marks it stable when
//! every other local set's frontier has passed it, and its later records leave it out (the invariant of
//! [`crate::record::Meta::without`]). This replaces the confirmation of each write by a read in every local set
//! (Cassandra: at `ALL`, across the WAN), which cost the foreground too much to keep up with the writes.
//!
//! Correctness never depends on the feed: a follower marks only what its own [`Resolution`] found present, and a
//! writer marks stable only what every follower resolved. A batch missing, a feed abandoned (a new epoch), a
//! follower behind: reads resolve as without it, and records keep what is not stable.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::op::{Marks, Resolution};
use crate::record::{Copy, DecodeError, LocalSet, Meta, Vertex};

/// One version of a feed: the version and what its writer required of it (its record's dependencies for it when
/// written, without stable ones, and without its copy's previous version, which it always requires).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The version written.
    pub version: Vertex,
    /// Its own requirements.
    pub requires: Vec<Vertex>,
}

/// The feed entry of `meta`'s newest version, just stored as version `meta.seq()` of `copy`.
pub fn entry(copy: &Copy, meta: &Meta) -> Entry {
    let requires = meta.versions.last().map(|v| v.deps.iter().map(|d| d.vertex.clone()).collect());
    Entry {
        version: Vertex { key: copy.key.clone(), ls: copy.ls, seq: meta.seq() },
        requires: requires.unwrap_or_default(),
    }
}

/// One batch of a feed: the versions, in acknowledgement order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The versions written.
    pub versions: Vec<Entry>,
}

impl Batch {
    /// The batch as stored.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a batch serializes")
    }

    /// A stored batch.
    pub fn decode(bytes: &[u8]) -> Result<Batch, DecodeError> {
        Ok(postcard::from_bytes(bytes)?)
    }
}

/// Where a follower stands on a writer's feed, as published in the store (rows keyed by follower and writer):
/// it has resolved every version of the feed at positions `start..position`, and reads on from batch `batch`, the
/// first at or after `position`. The writer's own row (follower = writer) announces its epoch, with `position` and
/// `batch` where its feed ends: a follower that starts with no row of its own for this epoch starts there rather
/// than read the whole feed (`start` is then above zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frontier {
    /// The feed's epoch.
    pub epoch: u64,
    /// The first position the follower resolved (where it started following this epoch).
    pub start: u64,
    /// Versions before this position (and from `start`) are resolved; always a batch boundary.
    pub position: u64,
    /// The batch that starts at `position`.
    pub batch: u64,
}

/// The writer's side of a feed: versions acknowledged, waiting to be appended; versions appended, waiting to be
/// stable.
#[derive(Debug)]
pub struct FeedWriter {
    local_set: LocalSet,
    local_sets: usize,
    /// This run's epoch.
    pub epoch: u64,
    next_batch: u64,
    /// Acknowledged, not yet in a batch.
    unbatched: Vec<Entry>,
    /// Appended (or being appended), not yet known stable, with their positions.
    unstable: VecDeque<(u64, Vertex)>,
    /// Position of the next version batched.
    next_position: u64,
    capacity: usize,
    /// Followers' frontiers in this epoch: the range each has resolved.
    frontiers: HashMap<LocalSet, (u64, u64)>,
    /// Versions kept out of the feed because `unbatched` was full (the store refused batches for long): followers
    /// never resolve them ahead of reads, and a read of one that waits for its follower waits in vain.
    pub unfed: u64,
    /// Versions in the feed but not kept for marking because `unstable` was full (another local set's follower
    /// stayed behind for long): never marked stable by the feed, so records go on depending on them.
    pub unmarked: u64,
}

impl FeedWriter {
    /// A new epoch's feed for local set `local_set`; at most `capacity` versions wait to be batched or marked.
    pub fn new(local_set: LocalSet, local_sets: usize, epoch: u64, capacity: usize) -> FeedWriter {
        FeedWriter {
            local_set,
            local_sets,
            epoch,
            next_batch: 0,
            unbatched: Vec::new(),
            unstable: VecDeque::new(),
            next_position: 0,
            capacity: capacity.max(1),
            frontiers: HashMap::new(),
            unfed: 0,
            unmarked: 0,
        }
    }

    /// Versions acknowledged or appended and not yet known stable.
    pub fn len(&self) -> usize {
        self.unbatched.len() + self.unstable.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The store has acknowledged `entry` (call in acknowledgement order).
    pub fn stored(&mut self, entry: Entry) {
        if self.unbatched.len() >= self.capacity {
            // The store is not taking batches: the version stays out of the feed (followers resolve it on demand).
            self.unfed += 1;
            return;
        }
        self.unbatched.push(entry);
    }

    /// The next batch to append (its number and versions, at most `max`), if any version waits. Append it, retrying
    /// until the store takes it, before asking for the next: followers read batches in order, without gaps.
    pub fn next_batch(&mut self, max: usize) -> Option<(u64, Batch)> {
        if self.unbatched.is_empty() {
            return None;
        }
        let take = self.unbatched.len().min(max.max(1));
        let versions: Vec<Entry> = self.unbatched.drain(..take).collect();
        for e in &versions {
            if self.unstable.len() >= self.capacity {
                self.unstable.pop_front();
                self.unmarked += 1;
            }
            self.unstable.push_back((self.next_position, e.version.clone()));
            self.next_position += 1;
        }
        let number = self.next_batch;
        self.next_batch += 1;
        Some((number, Batch { versions }))
    }

    /// The writer's own frontier row: this epoch, and where the feed ends (versions and batches handed out).
    pub fn announcement(&self) -> Frontier {
        Frontier { epoch: self.epoch, start: 0, position: self.next_position, batch: self.next_batch }
    }

    /// Takes follower `reader`'s frontier (from the store); marks stable, in `stable`, every version every other
    /// local set has resolved. Returns those versions.
    pub fn frontier(&mut self, reader: LocalSet, frontier: Frontier, stable: &mut Marks) -> Vec<Vertex> {
        if reader == self.local_set || frontier.epoch != self.epoch {
            return Vec::new();
        }
        // A follower that started over later in the epoch (no row of its own) claims only its new range.
        let known = self.frontiers.entry(reader).or_insert((frontier.start, frontier.position));
        *known = match frontier.start == known.0 {
            true => (known.0, known.1.max(frontier.position)),
            false => (frontier.start, frontier.position),
        };
        let followers: Vec<(u64, u64)> = (0..self.local_sets as LocalSet)
            .filter(|&ls| ls != self.local_set)
            .map(|ls| self.frontiers.get(&ls).copied().unwrap_or((0, 0)))
            .collect();
        let from = followers.iter().map(|f| f.0).max().unwrap_or(0);
        let to = followers.iter().map(|f| f.1).min().unwrap_or(0);
        let mut marked = Vec::new();
        while self.unstable.front().is_some_and(|(p, _)| *p < to) {
            let (p, v) = self.unstable.pop_front().expect("checked");
            // Below some follower's start: not resolved there, and never will be through the feed.
            if p >= from {
                stable.mark(v.copy(), v.seq);
                marked.push(v);
            }
        }
        marked
    }
}

/// The follower's side of one writer's feed.
#[derive(Debug)]
pub struct FeedReader {
    /// The local set whose feed this is.
    pub writer: LocalSet,
    local_set: LocalSet,
    epoch: Option<u64>,
    start: u64,
    next_batch: u64,
    /// Read, not yet resolved; the first is at position `resolved`.
    queue: VecDeque<Entry>,
    resolved: u64,
    /// The batches in `queue`: number and first position.
    boundaries: VecDeque<(u64, u64)>,
    capacity: usize,
    /// How many versions the next attempt resolves at once (halved after a failure, doubled after a success).
    span: usize,
    /// Where the writer last said its feed ends in the followed epoch (versions handed out).
    end: u64,
}

/// The most versions one attempt resolves at once.
pub const RESOLVE_SPAN: usize = 256;

impl FeedReader {
    /// Local set `local_set`'s follower of `writer`'s feed, reading ahead at most `capacity` versions.
    pub fn new(local_set: LocalSet, writer: LocalSet, capacity: usize) -> FeedReader {
        FeedReader {
            writer,
            local_set,
            epoch: None,
            start: 0,
            next_batch: 0,
            queue: VecDeque::new(),
            resolved: 0,
            boundaries: VecDeque::new(),
            capacity: capacity.max(1),
            span: RESOLVE_SPAN,
            end: 0,
        }
    }

    /// Whether the follower follows `epoch` already.
    pub fn follows(&self, epoch: u64) -> bool {
        self.epoch == Some(epoch)
    }

    /// Takes the writer's announcement (its own frontier row) and this follower's own row, if the store has one: a
    /// new epoch starts the feed over, where this follower's row says it was (a restarted follower), or else at the
    /// feed's beginning if it holds at most the follower's read-ahead capacity, or else where the feed ends now
    /// (what came before is resolved when read, and never made stable through the feed).
    pub fn announced(&mut self, writer: Frontier, own: Option<Frontier>) {
        if self.follows(writer.epoch) {
            return;
        }
        let (start, resolved, next_batch) = match own.filter(|o| o.epoch == writer.epoch) {
            Some(own) => (own.start, own.position, own.batch),
            None if writer.position <= self.capacity as u64 => (0, 0, 0),
            None => (writer.position, writer.position, writer.batch),
        };
        *self = FeedReader {
            epoch: Some(writer.epoch),
            start,
            next_batch,
            resolved,
            end: writer.position,
            ..FeedReader::new(self.local_set, self.writer, self.capacity)
        };
    }

    /// Takes the writer's announcement again: where its feed ends now (an announcement of another epoch is
    /// ignored; [`FeedReader::announced`] starts it).
    pub fn saw_end(&mut self, writer: Frontier) {
        if self.follows(writer.epoch) {
            self.end = self.end.max(writer.position);
        }
    }

    /// How far this follower is: the position of its first unresolved version, and the end of the feed as far as
    /// it knows (the writer's last announcement, or what it has read, whichever is further); `None` before it
    /// knows an epoch.
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.epoch?;
        Some((self.resolved, self.end.max(self.resolved + self.queue.len() as u64)))
    }

    /// The epoch followed and the next batch to read, if the follower knows the epoch and has room.
    pub fn wants(&self) -> Option<(u64, u64)> {
        let epoch = self.epoch?;
        (self.queue.len() < self.capacity).then_some((epoch, self.next_batch))
    }

    /// Takes batches read from the store (number and batch, in number order, starting at or after the one
    /// [`FeedReader::wants`] gave); keeps those that continue the feed without a gap. Returns whether the first
    /// batch was beyond the next one wanted (a batch that has not arrived yet, or was lost on the way).
    pub fn batches(&mut self, epoch: u64, batches: Vec<(u64, Batch)>) -> bool {
        if !self.follows(epoch) {
            return false;
        }
        let gap = batches.first().is_some_and(|(n, _)| *n > self.next_batch);
        for (n, batch) in batches {
            if n != self.next_batch {
                break;
            }
            self.boundaries.push_back((n, self.resolved + self.queue.len() as u64));
            self.queue.extend(batch.versions);
            self.next_batch += 1;
        }
        gap
    }

    /// The check of the next versions to resolve (up to the current span), or `None` when none waits.
    pub fn next(&self) -> Option<(usize, Resolution)> {
        if self.queue.is_empty() {
            return None;
        }
        let n = self.span.min(self.queue.len());
        let entries = self.queue.iter().take(n).map(|e| (e.version.clone(), e.requires.clone())).collect();
        Some((n, Resolution::with_requirements(self.local_set, entries)))
    }

    /// The check of the first `n` waiting versions ended: [`Check::Present`](crate::op::Check::Present) (and
    /// marked) or not. Returns the versions resolved (none if not).
    pub fn checked(&mut self, n: usize, present: bool) -> Vec<Vertex> {
        let mut resolved = Vec::new();
        if present {
            resolved.extend(self.queue.drain(..n.min(self.queue.len())).map(|e| e.version));
            self.resolved += n as u64;
            // Batches wholly resolved: the frontier moves past them.
            while self.boundaries.get(1).is_some_and(|&(_, first)| first <= self.resolved)
                || (self.queue.is_empty() && !self.boundaries.is_empty())
            {
                self.boundaries.pop_front();
            }
            self.span = (self.span * 2).min(RESOLVE_SPAN);
        } else {
            self.span = (self.span / 2).max(1);
        }
        resolved
    }

    /// The frontier to publish, once the epoch is known: up to the first batch not wholly resolved.
    pub fn frontier(&self) -> Option<Frontier> {
        let (batch, position) = match self.boundaries.front() {
            Some(&(n, first)) => (n, first),
            None => (self.next_batch, self.resolved),
        };
        Some(Frontier { epoch: self.epoch?, start: self.start, position, batch })
    }

    /// The own requirements of `v`, if it waits in this follower's queue.
    pub fn requirements(&self, v: &Vertex) -> Option<Vec<Vertex>> {
        self.queue.iter().find(|e| e.version == *v).map(|e| e.requires.clone())
    }

    /// Versions read and waiting to be resolved.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(key: &str, seq: u64) -> Vertex {
        Vertex { key: key.as_bytes().to_vec(), ls: 0, seq }
    }

    /// The writer's announcement: its epoch and where its feed ends.
    fn writer(epoch: u64, position: u64, batch: u64) -> Frontier {
        Frontier { epoch, start: 0, position, batch }
    }

    /// A batch of versions of key `a`.
    fn batch(seqs: &[u64]) -> Batch {
        Batch { versions: seqs.iter().map(|&s| Entry { version: v("a", s), requires: Vec::new() }).collect() }
    }

    #[test]
    fn a_writer_marks_stable_what_every_follower_resolved_in_its_epoch() {
        let mut w = FeedWriter::new(0, 3, 7, 100);
        for s in 1..=5 {
            w.stored(Entry { version: v("a", s), requires: Vec::new() });
        }
        let (n, batch) = w.next_batch(3).expect("waiting");
        assert_eq!((n, batch.versions.len()), (0, 3));
        let (n, _) = w.next_batch(3).expect("waiting");
        assert_eq!(n, 1);
        assert!(w.next_batch(3).is_none());
        assert_eq!(w.announcement(), Frontier { epoch: 7, start: 0, position: 5, batch: 2 });
        let at = |start, position| Frontier { epoch: 7, start, position, batch: 0 };
        let mut stable = Marks::new(10);
        // One follower of two, or another epoch's frontier: nothing is stable.
        assert!(w.frontier(1, at(0, 4), &mut stable).is_empty());
        assert!(w.frontier(2, Frontier { epoch: 6, ..at(0, 5) }, &mut stable).is_empty());
        let marked = w.frontier(2, at(0, 2), &mut stable);
        assert_eq!(marked, vec![v("a", 1), v("a", 2)]);
        assert!(stable.covers(&v("a", 2)) && !stable.covers(&v("a", 3)));
        // A frontier never moves back.
        assert!(w.frontier(2, at(0, 1), &mut stable).is_empty());
        // A follower that started over at position 4 (no row of its own) resolved 4 only: 3 is passed unmarked.
        assert!(w.frontier(1, at(0, 5), &mut stable).is_empty());
        assert_eq!(w.frontier(2, at(4, 5), &mut stable), vec![v("a", 5)]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_follower_knows_how_far_behind_the_announced_end_it_is() {
        let mut r = FeedReader::new(1, 0, 100);
        assert_eq!(r.progress(), None, "no epoch yet");
        r.announced(writer(7, 3, 2), None);
        assert_eq!(r.progress(), Some((0, 3)));
        assert!(!r.batches(7, vec![(0, batch(&[1, 2])), (1, batch(&[3])), (2, batch(&[4]))]));
        assert_eq!(r.progress(), Some((0, 4)), "read further than announced");
        r.next().expect("waiting");
        r.checked(2, true);
        r.saw_end(writer(7, 10, 5));
        r.saw_end(writer(6, 50, 9));
        assert_eq!(r.progress(), Some((2, 10)), "two resolved of ten announced; another epoch's end is ignored");
    }

    #[test]
    fn a_full_writer_counts_what_it_keeps_out_of_the_feed_and_what_it_will_not_mark() {
        let mut w = FeedWriter::new(0, 2, 7, 2);
        for s in 1..=3 {
            w.stored(Entry { version: v("a", s), requires: Vec::new() });
        }
        assert_eq!((w.unfed, w.unmarked), (1, 0), "the store took no batch: the third version stays out");
        assert_eq!(w.next_batch(8).expect("waiting").1.versions.len(), 2);
        w.stored(Entry { version: v("a", 4), requires: Vec::new() });
        w.next_batch(8).expect("waiting");
        assert_eq!((w.unfed, w.unmarked), (1, 1), "no follower resolved anything: the oldest is not kept for marking");
        let mut stable = Marks::new(10);
        let marked = w.frontier(1, Frontier { epoch: 7, start: 0, position: 3, batch: 2 }, &mut stable);
        assert_eq!(marked, vec![v("a", 2), v("a", 4)], "version 1 was not kept");
    }

    #[test]
    fn a_follower_keeps_batches_in_order_and_starts_over_in_a_new_epoch() {
        let mut r = FeedReader::new(1, 0, 100);
        assert_eq!(r.wants(), None, "no epoch announced yet");
        r.announced(writer(7, 0, 0), None);
        assert_eq!(r.wants(), Some((7, 0)));
        assert!(r.batches(7, vec![(1, batch(&[3]))]), "batch 0 missing: a gap");
        assert_eq!(r.waiting(), 0);
        assert!(!r.batches(7, vec![(0, batch(&[1, 2])), (1, batch(&[3])), (3, batch(&[5]))]));
        assert_eq!((r.waiting(), r.wants()), (3, Some((7, 2))));
        let (n, _) = r.next().expect("waiting");
        assert_eq!(n, 3);
        for _ in 0..8 {
            assert!(r.checked(3, false).is_empty());
        }
        assert_eq!(r.next().expect("waiting").0, 1, "the span halves after each failure, down to one version");
        assert_eq!(r.checked(1, true), vec![v("a", 1)]);
        let at = |start, position, batch| Some(Frontier { epoch: 7, start, position, batch });
        assert_eq!(r.frontier(), at(0, 0, 0), "batch 0 is not wholly resolved");
        assert_eq!(r.checked(1, true).len(), 1);
        assert_eq!(r.frontier(), at(0, 2, 1));
        assert_eq!(r.checked(1, true).len(), 1);
        assert_eq!(r.frontier(), at(0, 3, 2));
        // Restarted: its own row says where it was; without one, it starts where the feed ends.
        let mut restarted = FeedReader::new(1, 0, 100);
        restarted.announced(writer(7, 9, 5), r.frontier());
        assert_eq!((restarted.frontier(), restarted.wants()), (at(0, 3, 2), Some((7, 2))));
        let mut late = FeedReader::new(1, 0, 100);
        late.announced(writer(7, 9, 5), None);
        assert_eq!((late.frontier(), late.wants()), (at(0, 0, 0), Some((7, 0))), "a short feed is read whole");
        let mut late = FeedReader::new(1, 0, 8);
        late.announced(writer(7, 9, 5), None);
        assert_eq!((late.frontier(), late.wants()), (at(9, 9, 5), Some((7, 5))), "a long one from its end");
        r.announced(writer(8, 0, 0), None);
        let fresh = Some(Frontier { epoch: 8, start: 0, position: 0, batch: 0 });
        assert_eq!((r.waiting(), r.frontier()), (0, fresh));
    }
}
