//! Multi-version objects of one partition.
//!
//! Each object is a base state plus the committed effects since, sorted by their [`Stamp`] (an order that extends
//! causality), plus one cached materialised version. A read at snapshot `vs` starts from the cached version when
//! it lies below `vs` and applies only the effects visible at `vs` but not in the cache; garbage collection folds
//! the effects every future snapshot contains into the base. A read's cost is the number of effects since the
//! nearest materialised version, never the object's whole history.
//!
//! [`VersionStore`] is what a partition needs from such a store; [`Store`] implements it in memory.

use crate::message::RemoteError;
use crate::{DcId, DetHashMap, ObjectId, Timestamp, VectorClock};
use causet_crdt::{Crdt, Effect, Stamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A committed effect on one object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Version {
    /// The commit vector of the transaction that made it.
    pub commit: VectorClock,
    /// Its last-writer-wins stamp.
    pub stamp: Stamp,
    /// The effect.
    pub effect: Effect,
}

/// An object as a checkpoint keeps it: the base state and the effects not folded into it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectImage {
    /// The base state: every effect every future snapshot contains.
    pub base: Crdt,
    /// The other committed effects, ascending by stamp.
    pub versions: Vec<Version>,
}

#[derive(Clone, Debug)]
struct VersionedObject {
    /// Every effect with a commit vector at or below the store's frontier, folded.
    base: Crdt,
    /// The effects not folded into `base`, ascending by stamp.
    versions: Vec<Version>,
    /// A materialised version: the state at the snapshot.
    cached: Option<(VectorClock, Crdt)>,
}

impl VersionedObject {
    fn new(ty: causet_crdt::CrdtType) -> Self {
        Self { base: Crdt::new(ty), versions: Vec::new(), cached: None }
    }

    /// The object's keys in the store's index of unfolded objects: for each DC `d`, the least entry `d` of the
    /// versions whose commit vector is largest in entry `d` (their *origin* here). A version at or below a frontier
    /// has its origin entry at or below the frontier's, so an object none of whose keys is at or below the
    /// frontier's entry of the same DC has nothing to fold.
    fn fold_keys(&self) -> Vec<(usize, Timestamp)> {
        let mut keys: Vec<(usize, Timestamp)> = Vec::new();
        for v in &self.versions {
            let (d, t) = origin(&v.commit);
            match keys.iter_mut().find(|(k, _)| *k == d) {
                Some((_, least)) => *least = (*least).min(t),
                None => keys.push((d, t)),
            }
        }
        keys
    }

    /// The object's key for DC `d` ([`VersionedObject::fold_keys`]), if a version originates there.
    fn fold_key(&self, d: usize) -> Option<Timestamp> {
        self.versions.iter().map(|v| origin(&v.commit)).filter(|(o, _)| *o == d).map(|(_, t)| t).min()
    }
}

/// A vector's largest entry and its index (the first such): where a commit vector was cut, usually.
fn origin(v: &VectorClock) -> (usize, Timestamp) {
    let mut at = (0, Timestamp::ZERO);
    for (d, t) in v.entries().iter().enumerate() {
        if *t > at.1 {
            at = (d, *t);
        }
    }
    at
}

/// Counters of the work reads do, for metrics and for tests of the read-cost bound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Reads served.
    pub reads: u64,
    /// Effects applied to serve reads.
    pub effects_applied: u64,
    /// Reads that started from the cached version.
    pub cache_hits: u64,
    /// Effects folded into base states by garbage collection.
    pub effects_folded: u64,
}

/// What a partition needs from its multi-version object store: committed effects at their commit vectors, reads
/// at a snapshot, garbage collection below a frontier, certification, and checkpoint images. [`Store`] is the
/// in-memory implementation every partition runs today; [`crate::partition::Partition`] is generic over this
/// trait (with `Store` as its default), so its hot read path is statically dispatched.
pub trait VersionStore {
    /// Adds a committed effect on an object, at its commit vector, ordered among the object's effects by `stamp`.
    /// The partition inserts an effect only at a commit vector no snapshot already read from contains.
    fn insert(&mut self, id: &ObjectId, commit: &VectorClock, stamp: Stamp, effect: Effect);

    /// The object's state at the snapshot: every effect whose commit vector the snapshot contains. A snapshot not
    /// at or above the garbage-collection frontier is refused ([`RemoteError::SnapshotTooOld`]).
    fn read(&mut self, id: &ObjectId, snapshot: &VectorClock) -> Result<Crdt, RemoteError>;

    /// The object's state with every committed effect, whatever its snapshot: what a new effect will land on.
    fn latest(&self, id: &ObjectId) -> Crdt;

    /// The box of snapshots at which the object reads as at `snapshot` ([`visibility_box`]), given that every
    /// effect of origin `k` up to `known[k]` is in the store and every later one will come above it;
    /// `extendable`: for a reader whose DC hears of every write to the object, which may raise the entries no
    /// version was cut at.
    fn visibility(&self, id: &ObjectId, snapshot: &VectorClock, known: &VectorClock, extendable: bool) -> Visibility;

    /// Whether a transaction of DC `dc` committed an effect on the object after `time` (write-write
    /// certification).
    fn written_by_dc_after(&self, id: &ObjectId, dc: DcId, time: Timestamp) -> bool;

    /// The garbage-collection frontier: every snapshot read from now on is at or above it.
    fn frontier(&self) -> &VectorClock;

    /// Moves the frontier up to `frontier` (ignored unless it dominates the current one) and folds away the
    /// versions every future snapshot contains.
    fn collect(&mut self, frontier: &VectorClock);

    /// Images of the objects changed since the last call, and forgets that they changed (checkpoints).
    fn take_dirty_images(&mut self) -> Vec<(ObjectId, ObjectImage)>;

    /// Loads an object image (recovery from a checkpoint).
    fn load(&mut self, id: ObjectId, image: ObjectImage);

    /// Sets the garbage-collection frontier without folding (recovery from a checkpoint).
    fn restore_frontier(&mut self, frontier: VectorClock);

    /// Counters of the work reads and garbage collection did.
    fn stats(&self) -> &StoreStats;

    /// The number of objects that were ever written.
    fn objects(&self) -> usize;

    /// The number of objects with versions not folded into their base yet (what [`VersionStore::collect`] visits).
    fn unfolded_objects(&self) -> usize;

    /// Up to `limit` ids of objects ever written, ascending, all above `after` (a backup pages through them).
    fn ids_after(&self, after: Option<&ObjectId>, limit: usize) -> Vec<ObjectId>;

    /// The number of effects kept unfolded, over all objects.
    fn versions(&self) -> usize;
}

/// HoneyPot's visibility range for vector snapshots: the box `[lo, hi]` of snapshots `W` at which an object whose
/// base holds every effect below `frontier` and whose other effects are `versions` reads exactly as at
/// `snapshot`, given that every effect of origin `k` up to `known[k]` is among them and every later one will have a
/// larger entry `k` (a partition's pvc: it applies each origin's transactions in commit order, and its own above its
/// clock and every prepared transaction).
///
/// - `lo` joins `frontier` and the commit vectors of the versions `snapshot` holds: every `W ≥ lo` holds them.
/// - `hi` starts at `known` and, for every version `c` that `snapshot` does not hold, drops below `c` in one entry
///   where `c` exceeds `snapshot` (the one it exceeds by most): no `W ≤ hi` holds it, nor any effect still to come.
///
/// `lo ≤ snapshot ≤ hi` whenever `frontier ≤ snapshot ≤ known`. With one DC this is the paper's range
/// `[version, visibility limit]`.
///
/// With `extendable` (a reader whose DC hears of the writes, [`crate::away`]), `open` has bit `k` set for every entry `k` (of the first 64) that
/// no version was cut at: `hi[k]` is what was known. The reader's DC hears of every write to the object
/// ([`crate::away`]), and may raise such an entry over any stretch in which origin `k` did not write it: effects
/// the box leaves out stay out by the entries they were cut at, or by their origin's.
pub fn visibility_box(
    frontier: &VectorClock,
    versions: &[Version],
    snapshot: &VectorClock,
    known: &VectorClock,
    extendable: bool,
) -> Visibility {
    let mut lo = frontier.clone();
    let mut hi = known.clone();
    let mut open = match known.len() {
        _ if !extendable => 0,
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    };
    for v in versions {
        if v.commit.le(snapshot) {
            lo.merge_max(&v.commit);
            continue;
        }
        let above = v.commit.entries().iter().zip(snapshot.entries()).enumerate().filter(|(_, (c, s))| c > s);
        let Some((k, (c, _))) = above.max_by_key(|(_, (c, s))| c.0 - s.0) else { continue };
        let dc = DcId(k as u16);
        if k < 64 {
            open &= !(1 << k);
        }
        if c.prev() < hi.get(dc) {
            hi.set(dc, c.prev());
        }
    }
    Visibility { lo, hi, open }
}

/// A visibility box ([`visibility_box`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visibility {
    /// The least snapshot of the box.
    pub lo: VectorClock,
    /// The greatest.
    pub hi: VectorClock,
    /// Bit `k`: entry `k` of `hi` is what was known, uncut by any version (only for an extendable read).
    pub open: u64,
}

/// Objects with unfolded versions of one origin DC, by their key ([`Store`]'s index).
type Index = BTreeSet<(Timestamp, ObjectId)>;

/// The objects of one partition, in memory.
#[derive(Clone, Debug)]
pub struct Store {
    objects: DetHashMap<ObjectId, VersionedObject>,
    /// Objects with effects not folded into their base, per DC `d` ordered by their key for `d`
    /// ([`VersionedObject::fold_keys`]): a collection visits only the objects with a key at or below the frontier's
    /// entry of the same DC, not every object written since the frontier (with a lease cache holding the frontier a
    /// lease back, that was every object written in the last lease, at every stable snapshot). An object is in the
    /// index of each DC one of its versions originates at. A visited object may still keep its versions when
    /// another entry of one of them is above the frontier's (rare: commit vectors are largest where they were cut).
    unfolded: Vec<Index>,
    /// Objects with versions not folded, and those versions.
    unfolded_count: (usize, usize),
    /// Every snapshot read from now on is at or above this vector.
    frontier: VectorClock,
    /// Objects changed since the last checkpoint image was taken.
    dirty: BTreeSet<ObjectId>,
    stats: StoreStats,
}

fn apply(state: &mut Crdt, effect: &Effect, stamp: Stamp) {
    // The store is keyed by ObjectId, whose type every effect on it shares: a mismatch is a bug.
    state.apply(effect, stamp).expect("an effect stored under an object has the object's type");
}

impl Store {
    /// An empty store for vectors of `dcs` entries.
    pub fn new(dcs: usize) -> Self {
        Self {
            objects: DetHashMap::default(),
            unfolded: vec![BTreeSet::new(); dcs],
            unfolded_count: (0, 0),
            frontier: VectorClock::zero(dcs),
            dirty: BTreeSet::new(),
            stats: StoreStats::default(),
        }
    }
}

impl VersionStore for Store {
    /// Images of the objects changed since the last call, and forgets that they changed.
    fn take_dirty_images(&mut self) -> Vec<(ObjectId, ObjectImage)> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .map(|id| {
                let o = &self.objects[&id];
                let image = ObjectImage { base: o.base.clone(), versions: o.versions.clone() };
                (id, image)
            })
            .collect()
    }

    /// Loads an object image (recovery from a checkpoint).
    fn load(&mut self, id: ObjectId, image: ObjectImage) {
        let object = VersionedObject { base: image.base, versions: image.versions, cached: None };
        if let Some(old) = self.objects.remove(&id) {
            Self::unindex(&mut self.unfolded, &mut self.unfolded_count, &id, &old);
        }
        Self::index(&mut self.unfolded, &mut self.unfolded_count, &id, &object);
        self.objects.insert(id, object);
    }

    /// Sets the garbage-collection frontier without folding (recovery from a checkpoint).
    fn restore_frontier(&mut self, frontier: VectorClock) {
        self.frontier = frontier;
    }

    fn stats(&self) -> &StoreStats {
        &self.stats
    }

    /// The number of objects that were ever written.
    fn objects(&self) -> usize {
        self.objects.len()
    }

    fn unfolded_objects(&self) -> usize {
        self.unfolded_count.0
    }

    fn ids_after(&self, after: Option<&ObjectId>, limit: usize) -> Vec<ObjectId> {
        let mut ids: Vec<&ObjectId> = self.objects.keys().filter(|id| after.is_none_or(|a| *id > a)).collect();
        if ids.len() > limit {
            ids.select_nth_unstable(limit);
            ids.truncate(limit);
        }
        ids.sort_unstable();
        ids.into_iter().cloned().collect()
    }

    /// The number of effects kept unfolded, over all objects.
    fn versions(&self) -> usize {
        self.unfolded_count.1
    }

    /// The object's state at the snapshot.
    fn read(&mut self, id: &ObjectId, snapshot: &VectorClock) -> Result<Crdt, RemoteError> {
        if !self.frontier.le(snapshot) {
            return Err(RemoteError::SnapshotTooOld);
        }
        self.stats.reads += 1;
        let Some(object) = self.objects.get_mut(id) else {
            return Ok(Crdt::new(id.ty));
        };
        let (mut state, start) = match &object.cached {
            Some((at, state)) if at.le(snapshot) => {
                self.stats.cache_hits += 1;
                (state.clone(), Some(at))
            }
            _ => (object.base.clone(), None),
        };
        let mut applied = 0u64;
        for v in &object.versions {
            let in_snapshot = v.commit.le(snapshot);
            let already = start.is_some_and(|at| v.commit.le(at));
            if in_snapshot && !already {
                apply(&mut state, &v.effect, v.stamp);
                applied += 1;
            }
        }
        self.stats.effects_applied += applied;
        let newer = object.cached.as_ref().is_none_or(|(at, _)| at.le(snapshot));
        if newer && applied > 0 || object.cached.is_none() {
            object.cached = Some((snapshot.clone(), state.clone()));
        }
        Ok(state)
    }

    fn visibility(&self, id: &ObjectId, snapshot: &VectorClock, known: &VectorClock, extendable: bool) -> Visibility {
        let versions = self.objects.get(id).map_or(&[][..], |o| &o.versions[..]);
        visibility_box(&self.frontier, versions, snapshot, known, extendable)
    }

    /// The object's state with every committed effect, whatever its snapshot: what a new effect will land on.
    fn latest(&self, id: &ObjectId) -> Crdt {
        let Some(object) = self.objects.get(id) else {
            return Crdt::new(id.ty);
        };
        let mut state = object.base.clone();
        for v in &object.versions {
            apply(&mut state, &v.effect, v.stamp);
        }
        state
    }

    /// Whether a transaction of DC `dc` committed an effect on the object after `time` (certification).
    fn written_by_dc_after(&self, id: &ObjectId, dc: DcId, time: Timestamp) -> bool {
        self.objects.get(id).is_some_and(|o| o.versions.iter().any(|v| v.commit.get(dc) > time))
    }

    /// The garbage-collection frontier: every snapshot read from now on is at or above it.
    fn frontier(&self) -> &VectorClock {
        &self.frontier
    }

    /// Adds a committed effect.
    fn insert(&mut self, id: &ObjectId, commit: &VectorClock, stamp: Stamp, effect: Effect) {
        let object = self.objects.entry(id.clone()).or_insert_with(|| VersionedObject::new(id.ty));
        let (d, t) = origin(commit);
        let old = object.fold_key(d);
        if old.is_none_or(|old| t < old) {
            let index = Self::index_for(&mut self.unfolded, d);
            if let Some(old) = old {
                index.remove(&(old, id.clone()));
            }
            index.insert((t, id.clone()));
        }
        self.unfolded_count.0 += usize::from(object.versions.is_empty());
        self.unfolded_count.1 += 1;
        let at = object.versions.partition_point(|v| v.stamp <= stamp);
        object.versions.insert(at, Version { commit: commit.clone(), stamp, effect });
        // A cached version stays valid: the protocol only inserts effects whose commit vector is not below any
        // snapshot already served (their commit time exceeds the pvc at the time of every earlier read).
        if let Some((cached_at, _)) = &object.cached {
            if commit.le(cached_at) {
                object.cached = None;
            }
        }
        self.dirty.insert(id.clone());
    }

    /// Folds into the base state every effect that every future snapshot contains.
    fn collect(&mut self, frontier: &VectorClock) {
        // Called at every stable report: a frontier that did not move folds nothing that the last call left.
        if !self.frontier.le(frontier) || self.frontier == *frontier {
            return;
        }
        self.frontier = frontier.clone();
        // The candidates: every object with a key at or below the frontier's entry of its DC, once.
        let mut visited: Vec<ObjectId> = Vec::new();
        for (index, limit) in self.unfolded.iter().zip(frontier.entries()) {
            visited.extend(index.iter().take_while(|(key, _)| key <= limit).map(|(_, id)| id.clone()));
        }
        visited.sort_unstable();
        visited.dedup();
        let Store { objects, unfolded, unfolded_count: count, stats, .. } = self;
        for id in visited {
            let object = objects.get_mut(&id).expect("unfolded objects exist");
            if object.versions.iter().any(|v| v.commit.le(frontier)) {
                Self::unindex(unfolded, count, &id, object);
                let mut kept = Vec::with_capacity(object.versions.len());
                for v in object.versions.drain(..) {
                    if v.commit.le(frontier) {
                        apply(&mut object.base, &v.effect, v.stamp);
                        stats.effects_folded += 1;
                    } else {
                        kept.push(v);
                    }
                }
                // Folding changes how the object is represented, not what it holds: an older checkpoint image
                // stays valid, so the object need not be written again.
                object.versions = kept;
                if object.cached.as_ref().is_some_and(|(at, _)| !frontier.le(at)) {
                    // A cached version below the frontier can never be read again.
                    object.cached = None;
                }
                Self::index(unfolded, count, &id, object);
            }
        }
    }
}

impl Store {
    /// The index of the objects with versions that originate at DC `d` (made if vectors grew).
    fn index_for(unfolded: &mut Vec<Index>, d: usize) -> &mut Index {
        if unfolded.len() <= d {
            unfolded.resize(d + 1, BTreeSet::new());
        }
        &mut unfolded[d]
    }

    /// Adds `object`'s keys to the index of unfolded objects, and counts its versions.
    fn index(unfolded: &mut Vec<Index>, count: &mut (usize, usize), id: &ObjectId, object: &VersionedObject) {
        for (d, key) in object.fold_keys() {
            Self::index_for(unfolded, d).insert((key, id.clone()));
        }
        count.0 += usize::from(!object.versions.is_empty());
        count.1 += object.versions.len();
    }

    /// Takes `object`'s keys out of the index of unfolded objects, and its versions out of the counts.
    fn unindex(unfolded: &mut Vec<Index>, count: &mut (usize, usize), id: &ObjectId, object: &VersionedObject) {
        for (d, key) in object.fold_keys() {
            Self::index_for(unfolded, d).remove(&(key, id.clone()));
        }
        count.0 -= usize::from(!object.versions.is_empty());
        count.1 -= object.versions.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causet_crdt::{CrdtType, EffectCtx, Op, TxTag};
    use proptest::prelude::*;

    fn vc(a: u64, b: u64) -> VectorClock {
        VectorClock::from_entries(vec![Timestamp(a), Timestamp(b)])
    }

    fn object(k: u8) -> ObjectId {
        ObjectId::new(vec![k], "b", CrdtType::SetAw)
    }

    /// The index of unfolded objects holds every object with versions under each of its keys, and nothing else;
    /// the counts are the objects with versions and their versions.
    fn assert_index(store: &Store) {
        let mut expected = vec![BTreeSet::new(); store.unfolded.len()];
        for (id, o) in &store.objects {
            for (d, key) in o.fold_keys() {
                expected[d].insert((key, id.clone()));
            }
        }
        assert_eq!(store.unfolded, expected);
        let versions = store.objects.values().map(|o| o.versions.len());
        let counts = (versions.clone().filter(|n| *n > 0).count(), versions.sum());
        assert_eq!(store.unfolded_count, counts);
    }

    /// Whether some object keeps a version every future snapshot contains.
    fn keeps_foldable(store: &Store) -> bool {
        store.objects.values().any(|o| o.versions.iter().any(|v| v.commit.le(&store.frontier)))
    }

    /// Adds element `n` to object `k` at commit vector (a, b); the stamp is the entries' sum, which extends the
    /// vectors' order as a partition's stamps do.
    fn add(store: &mut Store, k: u8, n: u64, (a, b): (u64, u64)) {
        let mut ctx = EffectCtx::new(TxTag(u128::from(n)), 0);
        let effect = Crdt::new(CrdtType::SetAw).generate(&Op::Add(vec![n.to_be_bytes().to_vec()]), &mut ctx).unwrap();
        store.insert(&object(k), &vc(a, b), Stamp { time: u128::from(a + b), tx: TxTag(u128::from(n)) }, effect);
    }

    #[test]
    fn collection_folds_what_the_frontier_covers_and_keeps_the_rest() {
        let mut s = Store::new(2);
        add(&mut s, 0, 1, (1, 1));
        add(&mut s, 0, 2, (5, 1));
        add(&mut s, 1, 3, (1, 5));
        assert_eq!(s.versions(), 3);
        s.collect(&vc(3, 3));
        assert_eq!((s.versions(), s.stats().effects_folded), (2, 1));
        // The same frontier again moves nothing; a lower one is ignored.
        s.collect(&vc(3, 3));
        s.collect(&vc(2, 2));
        assert_eq!((s.frontier(), s.versions()), (&vc(3, 3), 2));
        assert_index(&s);
        s.collect(&vc(5, 5));
        assert_eq!((s.versions(), s.stats().effects_folded, s.unfolded_objects()), (0, 3, 0));
        assert_index(&s);
        // Reads below the frontier are refused; at it, they see everything folded.
        assert_eq!(s.read(&object(0), &vc(4, 5)), Err(RemoteError::SnapshotTooOld));
        assert_eq!(s.read(&object(0), &vc(5, 5)).unwrap(), s.latest(&object(0)));
    }

    #[test]
    fn a_box_spans_the_snapshots_that_read_the_same() {
        let mut s = Store::new(2);
        add(&mut s, 0, 1, (2, 1));
        add(&mut s, 0, 2, (6, 3));
        add(&mut s, 0, 3, (4, 9)); // not in (5, 5) because of its second entry only
        let Visibility { lo, hi, .. } = s.visibility(&object(0), &vc(5, 5), &vc(20, 20), false);
        assert_eq!(lo, vc(2, 1), "the version at (2, 1) is in; nothing else");
        assert_eq!(hi, vc(5, 8), "(6, 3) is out above 5 in the first entry, (4, 9) above 8 in the second");
        // An object nobody wrote reads the same everywhere below what is known.
        let nobody = s.visibility(&object(1), &vc(5, 5), &vc(7, 6), false);
        assert_eq!((nobody.lo, nobody.hi), (vc(0, 0), vc(7, 6)));
    }

    #[test]
    fn a_box_for_another_dc_is_open_in_the_entries_no_version_was_cut_at() {
        let mut s = Store::new(2);
        add(&mut s, 0, 1, (2, 1));
        let uncut = s.visibility(&object(0), &vc(5, 5), &vc(20, 20), true);
        assert_eq!((uncut.hi, uncut.open), (vc(20, 20), 0b11), "nothing left out: both entries open");
        add(&mut s, 0, 2, (9, 7)); // out above 5 in both entries; by more in the first
        let cut = s.visibility(&object(0), &vc(5, 5), &vc(20, 20), true);
        assert_eq!((cut.hi, cut.open), (vc(8, 20), 0b10), "cut at the first entry, which closes");
        assert_eq!(s.visibility(&object(0), &vc(5, 5), &vc(20, 20), false).open, 0, "a local reader: none open");
    }

    proptest! {
        /// Every snapshot in a returned box reads exactly what the snapshot it was computed at reads, and still
        /// does after later effects (above what was known) arrive.
        #[test]
        fn every_snapshot_in_a_box_reads_the_same(
            versions in proptest::collection::vec((1u64..13, 1u64..13), 0..12),
            frontier in (0u64..6, 0u64..6),
            at in (0u64..13, 0u64..13),
            samples in proptest::collection::vec((0u64..14, 0u64..14), 1..12),
            later in proptest::collection::vec((14u64..20, 14u64..20), 0..4),
            extendable in any::<bool>(),
        ) {
            let mut s = Store::new(2);
            for (n, &(a, b)) in versions.iter().enumerate() {
                add(&mut s, 0, n as u64, (a, b));
            }
            let frontier = vc(frontier.0, frontier.1);
            s.collect(&frontier);
            let mut at = vc(at.0, at.1);
            at.merge_max(s.frontier());
            let known = vc(13, 13);
            let Visibility { lo, hi, open } = s.visibility(&object(0), &at, &known, extendable);
            prop_assert!(lo.le(&at) && at.le(&hi), "{:?} ≤ {:?} ≤ {:?}", lo, at, hi);
            // Every version left out is left out by a closed entry: raising the open ones lets none in.
            for (&(a, b), n) in versions.iter().zip(0..) {
                let c = vc(a, b);
                let closed_out = |k: usize, e: u64| open & (1 << k) == 0 && e > hi.get(DcId(k as u16)).0;
                prop_assert!(c.le(&at) || closed_out(0, a) || closed_out(1, b), "version {} at {:?} left out by an open entry", n, c);
            }
            let expected = s.read(&object(0), &at).unwrap();
            for (n, &(a, b)) in later.iter().enumerate() {
                add(&mut s, 0, 100 + n as u64, (a, b));
            }
            for (x, y) in samples {
                let mut w = vc(x, y);
                w.merge_max(&lo);
                w.merge_min(&hi);
                prop_assert_eq!(s.read(&object(0), &w).unwrap(), expected.clone(), "at {:?} in [{:?}, {:?}]", w, lo, hi);
            }
        }

        /// Collection changes how objects are represented, never what a read at or above the frontier returns: a
        /// store that collects and one that never does answer every such read alike.
        #[test]
        fn collection_never_changes_a_read_at_or_above_the_frontier(
            steps in proptest::collection::vec((0u8..3, 0u64..12, 0u64..12, any::<bool>()), 1..60),
            reads in proptest::collection::vec((0u64..14, 0u64..14), 1..8),
        ) {
            let (mut collected, mut reference) = (Store::new(2), Store::new(2));
            let mut frontier = vc(0, 0);
            for (n, (k, a, b, collect)) in steps.into_iter().enumerate() {
                if collect {
                    // The frontier only rises (a lower one would be ignored anyway).
                    let before = frontier.clone();
                    frontier.merge_max(&vc(a, b));
                    collected.collect(&frontier);
                    prop_assert_eq!(collected.frontier(), &frontier);
                    // A frontier that moved leaves nothing foldable (one that did not folds nothing).
                    prop_assert!(frontier == before || !keeps_foldable(&collected));
                } else {
                    add(&mut collected, k, n as u64, (a + 1, b + 1));
                    add(&mut reference, k, n as u64, (a + 1, b + 1));
                }
                assert_index(&collected);
                for &(x, y) in &reads {
                    let mut at = vc(x, y);
                    at.merge_max(&frontier);
                    for k in 0..3 {
                        prop_assert_eq!(collected.read(&object(k), &at), reference.read(&object(k), &at));
                    }
                }
            }
        }
    }
}
