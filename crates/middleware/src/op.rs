//! The middleware's operations as sans-I/O state machines: an operation asks for store actions ([`Step`]) and is
//! resumed with their results ([`Input`]). The same code runs over a real store ([`crate::Middleware`]) and in the
//! deterministic simulation ([`crate::sim`]).

use std::collections::{HashMap, VecDeque};

use crate::record::{compact_deps, Copy, Dep, Head, Key, LocalSet, Meta, Record, RecordPart, Vertex};

/// Protocol settings shared by every operation of one middleware instance.
#[derive(Clone, Debug)]
pub struct Protocol {
    /// This instance's local set.
    pub local_set: LocalSet,
    /// How many local sets there are (every key has one copy per local set).
    pub local_sets: usize,
    /// Levels of the dependency graph embedded in each version (`k`, paper §3.5; 1 = the base protocol).
    pub levels: u8,
    /// Versions whose dependency information a record keeps before folding the oldest (at least 1).
    pub retain: usize,
}

impl Protocol {
    /// Every copy of `key`, in local-set order.
    pub fn copies(&self, key: &[u8]) -> Vec<Copy> {
        (0..self.local_sets as LocalSet).map(|ls| Copy { key: key.to_vec(), ls }).collect()
    }
}

/// What an operation asks the store to do next, or its result.
#[derive(Debug)]
pub enum Step<T> {
    /// Read these copies' [`Head`]s (clock and value) from the local store (in parallel; each may be missing).
    FetchHeads(Vec<Copy>),
    /// Read these copies' [`Meta`]s (clock and dependency information) from the local store (in parallel; each may
    /// be missing).
    Fetch(Vec<Copy>),
    /// Compare-and-swap the copy: store `record` if the stored version is `expect` (`None`: no record yet).
    Cas {
        /// The copy written (always this local set's).
        copy: Copy,
        /// The version the write was based on.
        expect: Option<u64>,
        /// The new record.
        record: Record,
    },
    /// The operation finished.
    Done(T),
}

/// The store's answer to the last [`Step`].
#[derive(Debug)]
pub enum Input {
    /// The heads asked for by [`Step::FetchHeads`], in the same order.
    Heads(Vec<Option<Head>>),
    /// The metas asked for by [`Step::Fetch`], in the same order.
    Fetched(Vec<Option<Meta>>),
    /// Whether the [`Step::Cas`] applied.
    Swapped(bool),
}

/// One element of a session's history (paper §3.2): a version the session wrote or read, with the levels of its
/// own graph that a later write embeds when `k > 1`.
#[derive(Clone, Debug)]
struct Seen {
    vertex: Vertex,
    below: Vec<Dep>,
}

/// A client session: its last write and the versions it read since — level 1 of its next write's graph.
#[derive(Clone, Debug, Default)]
pub struct Session {
    history: Vec<Seen>,
    /// The middleware instance the session has used (see [`Session::bind`]).
    instance: Option<u64>,
}

impl Session {
    /// Binds the session to middleware instance `instance` on first use; returns whether it is bound to it (a
    /// session that moved between instances is served without the instance's write cache).
    pub fn bind(&mut self, instance: u64) -> bool {
        *self.instance.get_or_insert(instance) == instance
    }

    /// A session that has seen nothing.
    pub fn new() -> Session {
        Session::default()
    }

    /// How many versions the next write will depend on directly.
    pub fn history_len(&self) -> usize {
        self.history.len()
    }

    fn saw(&mut self, seen: Seen) {
        // The newest version of a copy subsumes older ones (a version depends on its copy's previous version).
        match self.history.iter_mut().find(|h| h.vertex.key == seen.vertex.key && h.vertex.ls == seen.vertex.ls) {
            Some(h) if h.vertex.seq >= seen.vertex.seq => {}
            Some(h) => *h = seen,
            None => self.history.push(seen),
        }
    }

    /// Level 1 and, with `k = levels`, levels up to `k` of the graph of the session's next write.
    fn graph(&self, levels: u8) -> Vec<Dep> {
        let mut deps = Vec::new();
        for h in &self.history {
            deps.push(Dep { vertex: h.vertex.clone(), level: 1 });
            deps.extend(
                h.below
                    .iter()
                    .filter(|d| d.level < levels)
                    .map(|d| Dep { vertex: d.vertex.clone(), level: d.level + 1 }),
            );
        }
        compact_deps(deps)
    }
}

/// The versions this middleware instance knows to be resolved: for each copy, the newest such version (which
/// covers the older ones, see [`Record`]). Bounded: when full it forgets about a quarter of its marks, which costs
/// only repeated resolution of those copies.
#[derive(Clone, Debug)]
pub struct Marks {
    resolved: HashMap<Copy, u64>,
    capacity: usize,
    /// Evictions so far (each forgets a different quarter).
    evictions: u64,
}

impl Marks {
    /// An empty set of marks holding at most `capacity` copies.
    pub fn new(capacity: usize) -> Marks {
        Marks { resolved: HashMap::new(), capacity: capacity.max(1), evictions: 0 }
    }

    /// Whether version `v` is known resolved.
    pub fn covers(&self, v: &Vertex) -> bool {
        self.resolved.get(&v.copy()).is_some_and(|&s| s >= v.seq)
    }

    /// Records that version `seq` of `copy` (and so every older one) is covered.
    pub fn mark(&mut self, copy: Copy, seq: u64) {
        if self.resolved.len() >= self.capacity && !self.resolved.contains_key(&copy) {
            self.evict();
        }
        let s = self.resolved.entry(copy).or_insert(0);
        *s = (*s).max(seq);
    }

    /// Forgets about a quarter of the marks, chosen by a hash of the copy that changes with every eviction (the same
    /// ones whatever the map's order, so a simulation replays exactly). Forgetting every mark at once, as this did
    /// until 2026-11-29, made every read of a keyspace larger than the capacity walk long graphs again at once.
    fn evict(&mut self) {
        self.evictions += 1;
        let round = self.evictions;
        self.resolved.retain(|copy, _| !forgotten_in(round, copy));
        if self.resolved.len() >= self.capacity {
            self.resolved.clear();
        }
    }

    /// How many copies have a mark.
    pub fn len(&self) -> usize {
        self.resolved.len()
    }

    /// Whether no copy has a mark.
    pub fn is_empty(&self) -> bool {
        self.resolved.is_empty()
    }

    /// Forgets every mark (as a restarted instance would).
    pub fn clear(&mut self) {
        self.resolved.clear();
        self.evictions += 1;
    }

    /// The newest version of `copy` known resolved, if any is.
    pub fn resolved(&self, copy: &Copy) -> Option<u64> {
        self.resolved.get(copy).copied()
    }

    /// Changes whenever marks are forgotten (an eviction, or [`Marks::clear`]): while it stays the same, every
    /// version marked since an instant is still covered.
    pub fn epoch(&self) -> u64 {
        self.evictions
    }
}

/// Whether eviction round `round` of a bounded map forgets `key`: about a quarter of the keys, chosen by a hash
/// that changes with every round (the same ones whatever the map's order, so a simulation replays exactly).
fn forgotten_in(round: u64, key: &impl std::hash::Hash) -> bool {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (key, round).hash(&mut h);
    h.finish().is_multiple_of(4)
}

/// How a read ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// No copy of the key exists in the local store.
    Missing,
    /// The value of `version`, whose whole dependency graph is present locally.
    Value {
        /// The value.
        value: Vec<u8>,
        /// The version returned.
        version: Vertex,
    },
    /// The causally latest version's graph is not yet present locally: `missing` has not arrived.
    Unresolved {
        /// The newest version of the key here.
        version: Vertex,
        /// A vertex of its graph that is not present locally.
        missing: Vertex,
    },
}

/// Counters of one operation's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Store round trips (parallel batches of reads, and compare-and-swaps).
    pub rounds: u32,
    /// Records read.
    pub reads: u32,
    /// Compare-and-swaps that failed because another instance wrote first.
    pub conflicts: u32,
}

/// Whether `v` needs no resolution in `local_set`: it is marked, or `local_set` wrote it. A version written here had
/// its whole graph present here when it was written (its dependencies are the writer's resolved reads and earlier
/// writes of this local set, and its copy's earlier versions, all written here), and the local store only moves
/// forward (one replica per datacenter, or quorum reads and writes inside it).
fn known_resolved(local_set: LocalSet, marks: &Marks, v: &Vertex) -> bool {
    v.ls == local_set || marks.covers(v)
}

/// The check that a set of versions can be returned here: each is present in the local store and so is, level by
/// level, everything it requires, down to versions known resolved (paper §3.2, resolution on read). One parallel
/// batch of local meta reads per level ([`Check::Fetch`]); a meta older than the vertex checked counts as the
/// version not present yet. A read resolves one version this way ([`ReadOp`]); a follower of another local set's
/// feed resolves that local set's writes in batches ([`crate::feed`]).
///
/// A version may come with its *own* requirements (a feed's entry: what its writer required of it when it wrote
/// it), given at the start ([`Resolution::with_requirements`]) or learnt while checking ([`Resolution::adopt`]).
/// Such a version is checked present, then its own requirements and its copy's previous version are checked,
/// instead of the requirements its record gives now. Those over-approximate once the copy has moved on (its folded
/// set names the newest version of every copy that its dropped versions depended on, see
/// [`Meta::requirements`]), so checking a version of a hot key written a moment ago from its record walks much of
/// what was written since. Marking such a version resolved needs exactly its own requirements and its copy's
/// previous version (its mark covers the older versions too).
#[derive(Debug, Default)]
pub struct Resolution {
    local_set: LocalSet,
    /// Versions with their own requirements: each must be present, then its requirements and its copy's previous
    /// version are checked like any vertex.
    given: Vec<(Vertex, Vec<Vertex>)>,
    /// The versions of `given`.
    given_versions: std::collections::HashSet<Vertex>,
    /// How many of `given` have been checked present and expanded.
    given_expanded: usize,
    /// Metas read during this check (one snapshot of each is enough: a local copy only moves forward).
    fetched: HashMap<Copy, Option<Meta>>,
    /// For each copy, the newest version whose requirements (from its record) have been expanded.
    visited: HashMap<Copy, u64>,
    /// Vertices whose presence the next batch checks.
    pending: Vec<Vertex>,
    /// Copies whose meta is wanted although nothing pending needs it (a read's winner, for its levels below).
    wanted: Vec<Copy>,
    asked: Vec<Copy>,
    /// Versions expanded with their own requirements (given or adopted), and with their records'.
    pub expanded_own: u32,
    /// Versions expanded with their records' requirements.
    pub expanded_records: u32,
}

/// What a [`Resolution`] needs next, or its result.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Read these copies' metas from the local store (in parallel), then call [`Resolution::fetched`].
    Fetch(Vec<Copy>),
    /// Everything checked is present with its whole graph: [`Resolution::mark`] records it.
    Present,
    /// This vertex of the graph has not reached the local store.
    Missing(Vertex),
}

impl Resolution {
    /// A check of `roots` in `local_set`'s store.
    pub fn new(local_set: LocalSet, roots: Vec<Vertex>) -> Resolution {
        Resolution { local_set, pending: roots, ..Resolution::default() }
    }

    /// A check of versions whose own requirements are known (a feed's entries, without their copies' previous
    /// versions).
    pub fn with_requirements(local_set: LocalSet, entries: Vec<(Vertex, Vec<Vertex>)>) -> Resolution {
        let mut check = Resolution { local_set, ..Resolution::default() };
        for (v, requires) in entries {
            check.give(v, requires);
        }
        check
    }

    fn give(&mut self, v: Vertex, requires: Vec<Vertex>) {
        if self.given_versions.insert(v.clone()) {
            self.given.push((v, requires));
        }
    }

    /// Takes the own requirements `lookup` knows for vertices waiting to be checked (a followed feed's entries not
    /// resolved yet): those are then checked with them (see the type's documentation).
    pub fn adopt(&mut self, lookup: &dyn Fn(&Vertex) -> Option<Vec<Vertex>>) {
        for v in std::mem::take(&mut self.pending) {
            match lookup(&v) {
                Some(requires) => self.give(v, requires),
                None => self.pending.push(v),
            }
        }
    }

    /// Also reads `copy`'s meta, needed or not.
    fn want(&mut self, copy: Copy) {
        self.wanted.push(copy);
    }

    /// The next step, given what is known resolved.
    pub fn next(&mut self, marks: &Marks) -> Check {
        self.next_with(marks, &|_| None)
    }

    /// [`Resolution::next`], taking the own requirements `own` knows for the vertices met ([`Resolution::adopt`]
    /// at every level, so that a chain of versions that all have their own requirements is followed with them).
    pub fn next_with(&mut self, marks: &Marks, own: &dyn Fn(&Vertex) -> Option<Vec<Vertex>>) -> Check {
        loop {
            self.adopt(own);
            // Versions with their own requirements: present (their copies read first), then expanded.
            let unexpanded = &self.given[self.given_expanded..];
            let mut need: Vec<Copy> = (unexpanded.iter())
                .filter(|(v, _)| !known_resolved(self.local_set, marks, v))
                .map(|(v, _)| v.copy())
                .filter(|c| !self.fetched.contains_key(c))
                .collect();
            if need.is_empty() {
                if let Some(missing) = self.expand_given(marks) {
                    return Check::Missing(missing);
                }
            }
            // Drop what is already known resolved, expanded, or given, and keep one vertex per copy.
            let (visited, local_set, given) = (&self.visited, self.local_set, &self.given_versions);
            self.pending.retain(|v| {
                !known_resolved(local_set, marks, v)
                    && visited.get(&v.copy()).is_none_or(|&s| s < v.seq)
                    && !given.contains(v)
            });
            self.pending = crate::record::compact(std::mem::take(&mut self.pending));
            need.extend(self.pending.iter().map(Vertex::copy).filter(|c| !self.fetched.contains_key(c)));
            need.extend(std::mem::take(&mut self.wanted).into_iter().filter(|c| !self.fetched.contains_key(c)));
            if !need.is_empty() {
                need.sort();
                need.dedup();
                self.asked = need.clone();
                return Check::Fetch(need);
            }
            if self.pending.is_empty() && self.given_expanded == self.given.len() {
                return Check::Present;
            }
            // Everything pending was fetched: check it without another round.
            if let Some(missing) = self.expand_pending() {
                return Check::Missing(missing);
            }
        }
    }

    /// Takes the metas asked for by the last [`Check::Fetch`], in the same order.
    pub fn fetched(&mut self, metas: Vec<Option<Meta>>) {
        assert_eq!(metas.len(), self.asked.len(), "one answer per copy asked for");
        for (copy, meta) in std::mem::take(&mut self.asked).into_iter().zip(metas) {
            self.fetched.insert(copy, meta);
        }
    }

    /// Checks that every given version not yet expanded is present (its copy fetched, or it is known resolved) and
    /// replaces it by its requirements and its copy's previous version; returns the first one not present.
    fn expand_given(&mut self, marks: &Marks) -> Option<Vertex> {
        while let Some((v, requires)) = self.given.get(self.given_expanded) {
            self.given_expanded += 1;
            if known_resolved(self.local_set, marks, v) {
                continue;
            }
            match self.fetched.get(&v.copy()).and_then(Option::as_ref) {
                Some(m) if m.seq() >= v.seq => {
                    self.expanded_own += 1;
                    self.pending.extend(requires.iter().cloned());
                    self.pending.extend((v.seq > 1).then(|| Vertex { seq: v.seq - 1, ..v.clone() }));
                }
                _ => return Some(v.clone()),
            }
        }
        None
    }

    /// Checks that every pending vertex is present in its fetched copy and replaces it by its requirements;
    /// returns the first vertex that is not present.
    fn expand_pending(&mut self) -> Option<Vertex> {
        for v in std::mem::take(&mut self.pending) {
            match self.fetched.get(&v.copy()).and_then(Option::as_ref) {
                Some(m) if m.seq() >= v.seq => {
                    let seen = self.visited.entry(v.copy()).or_insert(0);
                    if *seen < v.seq {
                        *seen = v.seq;
                        self.expanded_records += 1;
                        self.pending.extend(m.requirements(v.seq).map(|d| d.vertex));
                    }
                }
                _ => return Some(v),
            }
        }
        None
    }

    /// After [`Check::Present`]: marks every vertex checked resolved — each had its whole graph present, not only
    /// the roots.
    pub fn mark(&mut self, marks: &mut Marks) {
        for (copy, seq) in self.visited.drain() {
            marks.mark(copy, seq);
        }
        for (v, _) in self.given.drain(..) {
            marks.mark(v.copy(), v.seq);
        }
    }

    /// The meta read for `copy` during this check, if it was read and the copy exists.
    fn meta(&self, copy: &Copy) -> Option<&Meta> {
        self.fetched.get(copy).and_then(Option::as_ref)
    }
}

/// A read with resolution on read (paper §3.2): read every copy of the key, take the causally latest, and unless
/// it is marked resolved, check its graph level by level, one parallel batch of local reads per level
/// ([`Resolution`]).
///
/// The first round reads the copies' [`Head`]s only (clock and value): a version that needs no resolution (written
/// by this local set, or marked) is returned without reading any dependency information. Otherwise the winner's
/// [`Meta`] is read next, and its graph's metas after it; a meta older than the winner's head (a store whose
/// replicas of one DC disagree for a moment) counts as the winner not being present yet, never as a version
/// without dependencies.
#[derive(Debug)]
pub struct ReadOp {
    key: Key,
    levels: u8,
    /// The winning copy's local set and head, once chosen.
    winner: Option<(LocalSet, Head)>,
    check: Resolution,
    asked: Vec<Copy>,
    /// How many heads the first round read.
    heads: u32,
    /// The version of each local set's copy's head the first round found (0: no such copy).
    found: Vec<u64>,
    /// Work done so far.
    pub work: Work,
}

impl ReadOp {
    /// Starts a read of `key`; the first step reads the head of every copy of the key.
    pub fn start(protocol: &Protocol, key: &[u8]) -> (ReadOp, Step<ReadOutcome>) {
        let asked = protocol.copies(key);
        let op = ReadOp {
            key: key.to_vec(),
            levels: protocol.levels,
            winner: None,
            check: Resolution::new(protocol.local_set, Vec::new()),
            asked: asked.clone(),
            heads: asked.len() as u32,
            found: Vec::new(),
            work: Work { rounds: 1, reads: asked.len() as u32, conflicts: 0 },
        };
        (op, Step::FetchHeads(asked))
    }

    /// Runs a whole read against a store that answers at once (`heads` and `fetch` read copies' heads and metas):
    /// the simulation's and the tests' driver. [`crate::Middleware`] is the one for real stores.
    pub fn run(
        protocol: &Protocol,
        key: &[u8],
        marks: &mut Marks,
        session: &mut Session,
        mut heads: impl FnMut(&[Copy]) -> Vec<Option<Head>>,
        mut fetch: impl FnMut(&[Copy]) -> Vec<Option<Meta>>,
    ) -> ReadOutcome {
        let (mut op, mut step) = ReadOp::start(protocol, key);
        loop {
            match step {
                Step::FetchHeads(copies) => step = op.resume(Input::Heads(heads(&copies)), marks, session),
                Step::Fetch(copies) => step = op.resume(Input::Fetched(fetch(&copies)), marks, session),
                Step::Done(outcome) => return outcome,
                Step::Cas { .. } => unreachable!("a read only fetches"),
            }
        }
    }

    /// Resumes the read with the heads or metas fetched for its last step.
    pub fn resume(&mut self, input: Input, marks: &mut Marks, session: &mut Session) -> Step<ReadOutcome> {
        self.resume_with(input, marks, session, &|_| None)
    }

    /// [`ReadOp::resume`], with the own requirements `own` knows for versions not resolved yet (a followed feed's
    /// entries, see [`Resolution::adopt`]).
    pub fn resume_with(
        &mut self,
        input: Input,
        marks: &mut Marks,
        session: &mut Session,
        own: &dyn Fn(&Vertex) -> Option<Vec<Vertex>>,
    ) -> Step<ReadOutcome> {
        match input {
            Input::Heads(heads) => {
                assert!(self.winner.is_none(), "a read takes the heads once, first");
                assert_eq!(heads.len(), self.asked.len(), "one answer per copy asked for");
                for (c, h) in self.asked.iter().zip(&heads) {
                    if self.found.len() <= c.ls as usize {
                        self.found.resize(c.ls as usize + 1, 0);
                    }
                    self.found[c.ls as usize] = h.as_ref().map_or(0, |h| h.seq(c.ls));
                }
                let best = std::mem::take(&mut self.asked)
                    .into_iter()
                    .zip(heads)
                    .filter_map(|(c, h)| h.map(|h| (c.ls, h)))
                    .max_by_key(|(ls, h)| h.rank(*ls));
                let Some((ls, head)) = best else { return Step::Done(ReadOutcome::Missing) };
                let target = Vertex { key: self.key.clone(), ls, seq: head.seq(ls) };
                self.winner = Some((ls, head));
                self.check_winner(marks, target);
            }
            Input::Fetched(metas) => {
                assert!(self.winner.is_some(), "a read takes the heads first");
                self.check.fetched(metas);
            }
            Input::Swapped(_) => panic!("a read only fetches"),
        }
        self.step(marks, session, own)
    }

    /// Drops the resolution done so far and starts it again from the winner alone, with what `marks` knows now: a
    /// read that stopped walking a large graph to wait for a follower that resolves the winner ahead of reads
    /// ([`crate::feed`]) ends here at once if the follower has marked it meanwhile. The value returned is the head
    /// read first, which is the version that is now known resolved.
    pub fn restart(
        &mut self,
        marks: &mut Marks,
        session: &mut Session,
        own: &dyn Fn(&Vertex) -> Option<Vec<Vertex>>,
    ) -> Step<ReadOutcome> {
        let target = self.version().expect("a read restarts after the heads");
        let mut check = Resolution::new(self.check.local_set, Vec::new());
        (check.expanded_own, check.expanded_records) = self.expanded();
        self.check = check;
        self.check_winner(marks, target);
        self.step(marks, session, own)
    }

    /// Puts the winner `target` in the check, unless it is known resolved.
    fn check_winner(&mut self, marks: &Marks, target: Vertex) {
        if !known_resolved(self.check.local_set, marks, &target) {
            // The winner itself is the first vertex to check: its meta must be present, at its version.
            self.check.pending.push(target);
        } else if self.levels > 1 {
            // Resolved already, but the session's next write embeds the levels below it.
            self.check.want(target.copy());
        }
    }

    fn step(
        &mut self,
        marks: &mut Marks,
        session: &mut Session,
        own: &dyn Fn(&Vertex) -> Option<Vec<Vertex>>,
    ) -> Step<ReadOutcome> {
        match self.check.next_with(marks, own) {
            Check::Fetch(copies) => {
                self.work.rounds += 1;
                self.work.reads += copies.len() as u32;
                Step::Fetch(copies)
            }
            Check::Present => Step::Done(self.resolved(marks, session)),
            Check::Missing(missing) => Step::Done(self.unresolved(missing)),
        }
    }

    /// Versions this read expanded with their own requirements (feed entries), and with their records'.
    pub fn expanded(&self) -> (u32, u32) {
        (self.check.expanded_own, self.check.expanded_records)
    }

    /// Whether the read has read more than `budget` records of its winner's graph (beyond the heads), and the
    /// local set that wrote the winner: a driver waits for its follower of that local set's feed rather than walk
    /// further (`crate::Config::walk_budget`).
    pub fn walked_past(&self, budget: usize) -> Option<LocalSet> {
        let walked = (self.work.reads - self.heads) as usize;
        self.winner.as_ref().filter(|_| walked > budget).map(|(ls, _)| *ls)
    }

    /// The version of each local set's copy's head the first round found (0 where there is none), for
    /// [`ReadCache::fill`].
    pub fn found(&self) -> Vec<u64> {
        self.found.clone()
    }

    /// The version being resolved (the causally latest copy of the key), once the heads have been read.
    pub fn version(&self) -> Option<Vertex> {
        let (ls, head) = self.winner.as_ref()?;
        Some(Vertex { key: self.key.clone(), ls: *ls, seq: head.seq(*ls) })
    }

    fn unresolved(&self, missing: Vertex) -> ReadOutcome {
        let version = self.version().expect("resolution starts after the winner is chosen");
        ReadOutcome::Unresolved { version, missing }
    }

    fn resolved(&mut self, marks: &mut Marks, session: &mut Session) -> ReadOutcome {
        let (ls, head) = self.winner.take().expect("resolution starts after the winner is chosen");
        self.check.mark(marks);
        let version = Vertex { key: self.key.clone(), ls, seq: head.seq(ls) };
        marks.mark(version.copy(), version.seq);
        // With `k > 1` the winner's meta was read (for resolution, or for this): its levels below go to the session.
        let below = match self.check.meta(&version.copy()) {
            Some(m) if self.levels > 1 && m.seq() >= version.seq => {
                m.requirements(version.seq).filter(|d| d.level < self.levels).collect()
            }
            _ => Vec::new(),
        };
        session.saw(Seen { vertex: version.clone(), below });
        ReadOutcome::Value { value: head.value, version }
    }
}

/// A write (paper §3.2–3.4): embed the session's graph, and compare-and-swap this local set's copy of the key until
/// it applies.
#[derive(Debug)]
pub struct WriteOp {
    key: Key,
    value: Vec<u8>,
    deps: Vec<Dep>,
    pending_seq: Option<u64>,
    /// Work done so far.
    pub work: Work,
}

impl WriteOp {
    /// Starts a write of `value` to `key` by `session`; the first step fetches every copy of the key.
    pub fn start(protocol: &Protocol, session: &Session, key: &[u8], value: Vec<u8>) -> (WriteOp, Step<Vertex>) {
        let asked = protocol.copies(key);
        // A dependency is resolved by construction where it was written and where this write happens (see
        // `known_resolved`); with two local sets, one written by the other local set is therefore needed nowhere.
        let mut deps = session.graph(protocol.levels);
        if protocol.local_sets <= 2 {
            deps.retain(|d| d.vertex.ls == protocol.local_set);
        }
        let op = WriteOp {
            key: key.to_vec(),
            value,
            deps,
            pending_seq: None,
            work: Work { rounds: 1, reads: asked.len() as u32, conflicts: 0 },
        };
        (op, Step::Fetch(asked))
    }

    /// The key being written.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Resumes the write with the store's answer to its last step. `stable` holds the versions this instance knows
    /// to be stable (see [`StabilizeOp`]): the new record leaves them out of its dependencies.
    pub fn resume(&mut self, protocol: &Protocol, input: Input, session: &mut Session, stable: &Marks) -> Step<Vertex> {
        match input {
            Input::Fetched(records) => {
                assert_eq!(records.len(), protocol.local_sets, "a write fetches every copy of its key");
                let own = records[protocol.local_set as usize].as_ref();
                let others: Vec<&Meta> = (0..)
                    .zip(&records)
                    .filter(|&(ls, _)| ls != protocol.local_set)
                    .filter_map(|(_, r)| r.as_ref())
                    .collect();
                let record = Record::next(
                    own,
                    &others,
                    protocol.local_set,
                    protocol.local_sets,
                    self.value.clone(),
                    self.deps.clone(),
                    protocol.retain,
                )
                .without(|v| stable.covers(v));
                self.pending_seq = Some(record.seq());
                self.work.rounds += 1;
                Step::Cas {
                    copy: Copy { key: self.key.clone(), ls: protocol.local_set },
                    expect: own.map(Meta::seq),
                    record,
                }
            }
            Input::Heads(_) => panic!("a write reads metas only"),
            Input::Swapped(true) => {
                let seq = self.pending_seq.take().expect("a swap answers a compare-and-swap");
                let vertex = Vertex { key: self.key.clone(), ls: protocol.local_set, seq };
                let below = self.deps.iter().filter(|d| d.level < protocol.levels).cloned().collect();
                // The write starts a new history: level 1 of the next write is this write and the reads after it.
                session.history.clear();
                session.saw(Seen { vertex: vertex.clone(), below });
                Step::Done(vertex)
            }
            Input::Swapped(false) => {
                // Another instance of this local set wrote the copy first: read it again and retry (paper §3.4).
                self.work.conflicts += 1;
                self.work.rounds += 1;
                self.work.reads += protocol.local_sets as u32;
                Step::Fetch(protocol.copies(&self.key))
            }
        }
    }
}

/// Exclusive writers with feeds and `k = 1`: the versions this instance's reads returned lately, returned again
/// without reading the store while nothing newer of their keys is known resolved here.
///
/// **Why it is sound.** A read must return a resolved version that ranks at least as high as every version of its
/// key in the session's causal past. Take an entry filled by a read that found, in the local store, heads at
/// versions `F[ls]` of the key's copies and returned `E`, the highest ranked of them. Every version `u` of copy
/// `ls` in a session's causal past was resolved here (reads and their resolutions mark what they return and walk,
/// and with feeds a stable version is one this instance's follower resolved, so marked) — or, for this local set's
/// own copy, written here by this instance, the copy's only writer. If `u` entered a past before the fill, it was
/// present locally then, so `u.seq <= F[ls]` and `E` ranks at least as high as `u`. If it entered after, it is
/// marked: while the marks forget nothing ([`Marks::epoch`] unchanged) the entry is served only if
/// `marks.resolved(copy ls) <= F[ls]` for every other local set's copy, and an own write of the key drops the
/// entry (at its start and when acknowledged, and a fill that began before either is refused). `E` itself is
/// resolved (its read resolved it). So a hit returns what a store read at the fill could have returned, and that
/// is still a legitimate answer. Sessions that moved between instances are not served from it ([`Session::bind`]),
/// nor are `k > 1` reads (a hit has no metadata to hand the session's next write).
///
/// **Freshness.** A newer version of another local set is served once it is resolved here (the follower resolves
/// the feed's versions in order, and then the entry is refused); entries are also dropped after the caller's
/// time-to-live, so a version kept out of a feed is read within that time too.
#[derive(Debug)]
pub struct ReadCache {
    entries: HashMap<Key, CachedRead>,
    /// Own writes: key, and the generation of its last write's start or acknowledgement.
    written: HashMap<Key, u64>,
    generation: u64,
    /// Fills that began before this generation are refused (`written` was forgotten then).
    floor: u64,
    bytes: usize,
    capacity_bytes: usize,
    /// Times the cache was full (each forgets a different quarter of the entries).
    evictions: u64,
}

/// Where a read stood when it started ([`ReadCache::begin`]).
#[derive(Clone, Copy, Debug)]
pub struct Began {
    generation: u64,
    marks_epoch: u64,
}

#[derive(Debug)]
struct CachedRead {
    version: Vertex,
    value: Vec<u8>,
    /// The version of each copy's head the filling read found (0: no such copy).
    heads: Vec<u64>,
    marks_epoch: u64,
    /// When it was filled, in the caller's milliseconds.
    at_ms: u64,
}

impl CachedRead {
    fn bytes(&self, key: &[u8]) -> usize {
        key.len() * 2 + self.value.len() + self.heads.len() * 8 + 64
    }
}

impl ReadCache {
    /// Whether a read cache is sound for an instance: an exclusive writer (its own copies change only through it),
    /// with feeds (a stable version is one its follower resolved, so marked), and `k = 1` (see the type).
    pub fn is_sound(exclusive: bool, feeds: bool, levels: u8) -> bool {
        exclusive && feeds && levels == 1
    }

    /// An empty cache of at most about `capacity_bytes` of keys, values and bookkeeping.
    pub fn new(capacity_bytes: usize) -> ReadCache {
        ReadCache {
            entries: HashMap::new(),
            written: HashMap::new(),
            generation: 0,
            floor: 0,
            bytes: 0,
            capacity_bytes,
            evictions: 0,
        }
    }

    /// A read is starting, before it reads the heads: what to hand [`ReadCache::fill`] when it ends.
    pub fn begin(&self, marks: &Marks) -> Began {
        Began { generation: self.generation, marks_epoch: marks.epoch() }
    }

    /// This instance starts writing `key`: drops its entry and refuses fills by reads that began before
    /// ([`ReadCache::wrote`]); what to hand [`ReadCache::wrote_through`] when the store acknowledges the write.
    pub fn start_write(&mut self, key: &[u8], marks: &Marks) -> Began {
        self.wrote(key);
        self.begin(marks)
    }

    /// This instance is writing `key` (call when the write starts and again when the store acknowledges it):
    /// drops its entry, and refuses fills by reads that began before.
    pub fn wrote(&mut self, key: &[u8]) {
        self.generation += 1;
        self.remove(key);
        if self.written.len() >= 1 << 16 && !self.written.contains_key(key) {
            self.written.clear();
            self.floor = self.generation;
        }
        self.written.insert(key.to_vec(), self.generation);
    }

    /// This instance's write of `key`, begun when [`ReadCache::begin`] returned `began`, was acknowledged as
    /// `version` with `value` and vector clock `clock`: drops what was cached (as [`ReadCache::wrote`]) and keeps
    /// the write instead. Sound as a read's answer: the write's clock merged every copy of the key this instance had
    /// fetched (its write cache's clocks, or the store's copies), so it is at least every version of another local
    /// set's copy resolved here before the write began, and ranks above them; what is resolved after is checked as
    /// for any entry. Not kept if marks were forgotten since the write began.
    #[allow(clippy::too_many_arguments)]
    pub fn wrote_through(
        &mut self,
        key: &[u8],
        began: Began,
        version: Vertex,
        value: Vec<u8>,
        clock: &[u64],
        marks: &Marks,
        now_ms: u64,
    ) {
        self.wrote(key);
        if marks.epoch() == began.marks_epoch {
            self.insert(
                key,
                CachedRead { version, value, heads: clock.to_vec(), marks_epoch: began.marks_epoch, at_ms: now_ms },
            );
        }
    }

    /// A read that [`ReadCache::begin`] returned `began` for found heads at versions `heads` (one per local set,
    /// 0 where a copy does not exist) and returned `version`, with `value`: keeps it, unless the key was written
    /// here or marks were forgotten since the read began, or the entry holds newer heads (a read that overlapped it
    /// found them and filled first).
    #[allow(clippy::too_many_arguments)]
    pub fn fill(
        &mut self,
        key: &[u8],
        began: Began,
        heads: Vec<u64>,
        version: Vertex,
        value: Vec<u8>,
        marks: &Marks,
        now_ms: u64,
    ) {
        let written = self.written.get(key).is_some_and(|&g| g > began.generation);
        if began.generation < self.floor || written || marks.epoch() != began.marks_epoch {
            return;
        }
        // Reads that overlap may fill in any order: one that found older heads than the entry's keeps away (a
        // session may have read what the entry holds), and one that found some newer and some older leaves none.
        let entry = self.entries.get(key).filter(|e| e.marks_epoch == began.marks_epoch);
        let (older, newer) = entry.map_or((false, false), |e| {
            (heads.iter().zip(&e.heads))
                .fold((false, false), |(o, n), (found, cached)| (o || found < cached, n || found > cached))
        });
        match (older, newer) {
            (true, true) => return self.remove(key),
            (true, false) => return,
            _ => {}
        }
        self.insert(key, CachedRead { version, value, heads, marks_epoch: began.marks_epoch, at_ms: now_ms });
    }

    fn insert(&mut self, key: &[u8], entry: CachedRead) {
        let size = entry.bytes(key);
        if size > self.capacity_bytes {
            return;
        }
        self.remove(key);
        while self.bytes + size > self.capacity_bytes && !self.entries.is_empty() {
            self.evict();
        }
        self.bytes += size;
        self.entries.insert(key.to_vec(), entry);
    }

    /// Drops `key`'s entry, if any.
    fn remove(&mut self, key: &[u8]) {
        if let Some(e) = self.entries.remove(key) {
            self.bytes -= e.bytes(key);
        }
    }

    /// Forgets about a quarter of the entries, as [`Marks`] do.
    fn evict(&mut self) {
        self.evictions += 1;
        let round = self.evictions;
        let mut freed = 0;
        self.entries.retain(|key, e| {
            let forget = forgotten_in(round, key);
            if forget {
                freed += e.bytes(key);
            }
            !forget
        });
        self.bytes -= freed;
    }

    /// The version and value to return for a read of `key` by an instance of `local_set`, if the cache may answer
    /// it (see the type): its entry is younger than `ttl_ms` (any age: `None`, for a read that would otherwise wait
    /// for a newer version to be resolved), the marks forgot nothing since it was filled, and no other local set's
    /// copy of the key is known resolved beyond the head the filling read found.
    pub fn lookup(
        &self,
        local_set: LocalSet,
        key: &[u8],
        marks: &Marks,
        now_ms: u64,
        ttl_ms: Option<u64>,
    ) -> Option<(&Vertex, &[u8])> {
        let e = self.entries.get(key)?;
        let young = ttl_ms.is_none_or(|ttl| now_ms.saturating_sub(e.at_ms) < ttl);
        if !young || e.marks_epoch != marks.epoch() {
            return None;
        }
        let mut copy = Copy { key: key.to_vec(), ls: 0 };
        let newer_resolved = (0..e.heads.len() as LocalSet).filter(|&ls| ls != local_set).any(|ls| {
            copy.ls = ls;
            marks.resolved(&copy).is_some_and(|s| s > e.heads[ls as usize])
        });
        (!newer_resolved).then_some((&e.version, e.value.as_slice()))
    }

    /// A hit: what the session saw, as a read from the store would have recorded it.
    pub fn served(session: &mut Session, version: &Vertex) {
        session.saw(Seen { vertex: version.clone(), below: Vec::new() });
    }

    /// Forgets everything (a restarted instance).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.written.clear();
        self.bytes = 0;
        self.generation += 1;
        self.floor = self.generation;
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Exclusive writers: what the instance knows of keys it wrote, so that a write need not read the store first.
///
/// A write needs its copy's current record (to number and extend it) and clocks that dominate every version of
/// the key in the writer's causal past (so that the new version ranks above them). As the local set's only writer,
/// the instance knows the first exactly from its own last write. For the second, every version of a key that
/// enters a session's causal past through this instance was read by it — the read, or the resolution that walked
/// to it, or the one that marked it resolved, fetched the copy — or written by it, so the entry-wise maximum of
/// the clocks of every copy it has fetched or written dominates them. Entries are created only from a read of the
/// store made for a write (the store's copies dominate every version of them read before); fetches for reads and
/// stored writes only raise the clocks of existing entries, so an entry forgotten between a write's read and its
/// store stays forgotten. A missing
/// entry, a failed write, a session that moved from another instance, or a lease that may have passed to
/// another instance in between: the write reads the store, as without the cache.
///
/// The argument needs one more thing: records leave out dependencies on stable versions ([`StabilizeOp`]), so a
/// version can also enter a session's causal past *behind* a record that left it out, fetched by no instance of
/// this local set. That is sound only where "stable" implies that every other local set's instance has fetched
/// the version, which feeds guarantee (a version is stable once every follower resolved it) and a store's
/// confirmation does not (it only says every store holds it). [`WriteCache::is_sound`] says when to keep one.
#[derive(Debug)]
pub struct WriteCache {
    keys: HashMap<Key, Cached>,
    capacity: usize,
}

#[derive(Debug)]
struct Cached {
    /// This local set's copy's meta as last stored, `None` if there is none.
    own: Option<Meta>,
    /// Entry-wise maximum of the clocks of every copy of the key the instance has fetched or written.
    seen: Vec<u64>,
}

fn raise(clock: &mut Vec<u64>, other: &[u64]) {
    if clock.len() < other.len() {
        clock.resize(other.len(), 0);
    }
    for (c, &o) in clock.iter_mut().zip(other) {
        *c = (*c).max(o);
    }
}

impl WriteCache {
    /// Whether an exclusive writer may answer writes from a cache: when versions become stable only through
    /// feeds (`feeds`), or never (`confirms_stability` false: records leave nothing out). When an instance
    /// confirms stability with the store (its own writes, or walks of folded dependencies) without feeds, a
    /// session at local set A can read a record of another local set that left out a stable version V of key
    /// `k`, which A's instance never fetched; a cached write of `k` would then rank below V and the session would
    /// read V after its own write (read-your-writes broken: simulator seed 311). Writes read the store instead,
    /// which holds V (stable means present in every local set).
    pub fn is_sound(feeds: bool, confirms_stability: bool) -> bool {
        feeds || !confirms_stability
    }

    /// An empty cache of at most `capacity` keys (when full it forgets everything).
    pub fn new(capacity: usize) -> WriteCache {
        WriteCache { keys: HashMap::new(), capacity: capacity.max(1) }
    }

    /// What a write of `key` would read from the store, from the cache: this local set's copy, and one stand-in
    /// for the other copies carrying the maximum of their clocks (a write uses them for nothing else). `None`
    /// when the key is not cached.
    pub fn copies_for_write(&self, protocol: &Protocol, key: &[u8]) -> Option<Vec<Option<Meta>>> {
        let entry = self.keys.get(key)?;
        let mut metas = vec![None; protocol.local_sets];
        metas[protocol.local_set as usize] = entry.own.clone();
        if let Some(other) = (0..protocol.local_sets).find(|&ls| ls != protocol.local_set as usize) {
            metas[other] = Some(Meta { clock: entry.seen.clone(), versions: Vec::new(), folded: Vec::new() });
        }
        Some(metas)
    }

    /// Forgets `key` (a write whose outcome is unknown).
    pub fn forget(&mut self, key: &[u8]) {
        self.keys.remove(key);
    }

    /// Forgets everything (the writer lease may have passed to another instance and back).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    /// Learns from a write's read of the store: every copy of `key`, in local-set order.
    pub fn fetched(&mut self, protocol: &Protocol, key: &[u8], metas: &[Option<Meta>]) {
        if self.keys.len() >= self.capacity && !self.keys.contains_key(key) {
            self.keys.clear();
        }
        let own = metas[protocol.local_set as usize].clone();
        let entry = self.keys.entry(key.to_vec()).or_insert_with(|| Cached { own: None, seen: Vec::new() });
        entry.own = own;
        for m in metas.iter().flatten() {
            raise(&mut entry.seen, &m.clock);
        }
    }

    /// Learns this local set's copy of `key` as just stored. Only an entry that exists is updated: one that was
    /// forgotten while the write was in flight missed the reads in between (nothing raised it), and the written
    /// record's clock covers only what the write itself read, so the next write reads the store instead.
    pub fn stored(&mut self, key: &[u8], record: &Record) {
        if let Some(entry) = self.keys.get_mut(key) {
            entry.own = Some(record.meta.clone());
            raise(&mut entry.seen, &record.meta.clock);
        }
    }

    /// Raises the clocks of keys already cached with what a read fetched: `copies` and the clocks of their heads
    /// or metas, as a [`Step::FetchHeads`] or [`Step::Fetch`] asked and was answered.
    pub fn observe<'a>(&mut self, copies: &[Copy], clocks: impl IntoIterator<Item = Option<&'a [u64]>>) {
        for (copy, clock) in copies.iter().zip(clocks) {
            if let (Some(clock), Some(entry)) = (clock, self.keys.get_mut(&copy.key)) {
                raise(&mut entry.seen, clock);
            }
        }
    }
}

/// Making a version *stable*: present, with every version of its causal past, in every local set's store.
///
/// Departure from the paper (which leaves metadata unbounded): a record may leave out any dependency on a stable
/// version, since every reader everywhere would find it resolved. This is how the folded dependency set of a
/// record stays bounded ([`crate::Config::folded_cap`]): the instance makes the folded vertices stable in the
/// background, and its later writes of the key leave them out.
///
/// A version is made stable after everything it requires (post-order, depth first): read its record locally, make
/// each requirement that is not known stable stable, then ask the store to confirm that every local set holds the
/// copy at that version or later ([`StabilizeStep::Confirm`]; Cassandra: a read at consistency `ALL`, whose
/// blocking read repair brings every replica up to the newest version before it answers). A confirmed version is
/// marked in the instance's stable marks (one number per copy, like resolution marks: a version's causal past
/// holds its copy's older versions). Requirements that were left out of a record as stable are stable already,
/// so the walk need not see them. A walk gives up (and the vertex stays required) when the store cannot confirm,
/// for instance while another local set is unreachable: metadata grows during a partition and shrinks after.
#[derive(Debug)]
pub struct StabilizeOp {
    /// Vertices to visit; `true` once their requirements are on the stack above them.
    stack: Vec<(Vertex, bool)>,
    /// The vertices read in this walk, with the requirements their records gave that were not known stable.
    expanded: HashMap<Vertex, Vec<Vertex>>,
    /// The vertices the store confirmed in this walk, marked only when the walk ends ([`StabilizeOp::finish`]).
    confirmed: std::collections::HashSet<Vertex>,
    current: Option<Vertex>,
    root: Vertex,
    budget: usize,
    /// Versions the walk marked stable when it ended (confirmed ones whose requirements were not all stable are
    /// not counted).
    pub marked: usize,
}

/// The versions this instance stored, in the order their stores were acknowledged, waiting to be confirmed in every
/// local set: the cheap way to make versions stable (the walk of [`StabilizeOp`] is the general one).
///
/// A walk must read a version's records and confirm its whole causal past, and a hot key's folded set makes that
/// past large and cyclic, so walks mark little. But an instance knows its own writes: it confirms each of them once
/// (one [`StabilizeStep::Confirm`] per distinct copy of a batch, at the newest version stored), oldest first, and
/// marks a confirmed version stable if every version its record requires is stable already. That check makes the
/// mark safe: the marked version is in every local set (confirmed) with its whole causal past (each requirement is
/// there with its own), which is the invariant [`Meta::without`] relies on. The order makes marks frequent: a
/// version's requirements of its own local set that this instance wrote were usually acknowledged (and so queued)
/// before it and are marked first (one acknowledged later only leaves it unmarked); what it requires from
/// elsewhere, or from before the instance started, must have been marked by a walk. With two local sets,
/// records carry no dependencies of the other local set (see [`WriteOp::start`]), so a version written here is
/// typically stable one confirmation after it was stored.
#[derive(Debug)]
pub struct OwnWrites {
    pending: VecDeque<StoredVersion>,
    capacity: usize,
    /// Versions not queued because the queue was full (never marked by this mechanism; a walk still can).
    pub dropped: u64,
}

#[derive(Debug)]
struct StoredVersion {
    version: Vertex,
    requirements: Vec<Vertex>,
    /// When the store acknowledged it, in the caller's time unit.
    at: u64,
}

/// What [`OwnWrites::confirmed`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Confirmation {
    /// Versions marked stable.
    pub marked: usize,
    /// Versions confirmed but not marked: something they require is not known stable.
    pub unsupported: usize,
    /// Whether the queue stopped at a version the store did not confirm (it stays queued).
    pub stopped: bool,
}

impl OwnWrites {
    /// An empty queue of at most `capacity` versions.
    pub fn new(capacity: usize) -> OwnWrites {
        OwnWrites { pending: VecDeque::new(), capacity: capacity.max(1), dropped: 0 }
    }

    /// How many versions wait.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no version waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Forgets every queued version (as a restarted instance would).
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Queues `meta`'s newest version, which the store has just acknowledged (at time `at`) as version `seq` of
    /// `copy`. Call it in the order the acknowledgements arrive.
    pub fn stored(&mut self, copy: &Copy, meta: &Meta, at: u64) {
        if self.pending.len() >= self.capacity {
            self.dropped += 1;
            return;
        }
        let seq = meta.seq();
        let requirements = crate::record::compact(meta.requirements(seq).map(|d| d.vertex).collect());
        self.pending.push_back(StoredVersion {
            version: Vertex { key: copy.key.clone(), ls: copy.ls, seq },
            requirements,
            at,
        });
    }

    /// The next batch to confirm: the oldest queued versions stored at or before `before`, as many as cover at most
    /// `max` distinct copies; returns how many versions the batch covers, and each copy once, at the newest version
    /// queued (confirming it confirms the older ones).
    pub fn due(&self, before: u64, max: usize) -> (usize, Vec<Vertex>) {
        let mut newest: Vec<Vertex> = Vec::new();
        let mut index: HashMap<Copy, usize> = HashMap::new();
        let mut count = 0;
        for s in self.pending.iter().take_while(|s| s.at <= before) {
            let copy = s.version.copy();
            match index.get(&copy) {
                Some(&i) => newest[i].seq = newest[i].seq.max(s.version.seq),
                None if newest.len() >= max => break,
                None => {
                    index.insert(copy, newest.len());
                    newest.push(s.version.clone());
                }
            }
            count += 1;
        }
        (count, newest)
    }

    /// Takes the store's answers for a batch from [`OwnWrites::due`] (`count` versions; `answers` pairs each copy
    /// asked with whether every local set holds that version or a later one), oldest version first: marks each
    /// confirmed version whose requirements are all stable, and stops at the first version not confirmed.
    pub fn confirmed(&mut self, count: usize, answers: &[(Vertex, bool)], stable: &mut Marks) -> Confirmation {
        let confirmed: HashMap<Copy, u64> =
            answers.iter().filter(|(_, ok)| *ok).map(|(v, _)| (v.copy(), v.seq)).collect();
        let mut outcome = Confirmation::default();
        for _ in 0..count {
            let Some(s) = self.pending.front() else { break };
            if confirmed.get(&s.version.copy()).is_none_or(|&seq| seq < s.version.seq) {
                outcome.stopped = true;
                break;
            }
            let s = self.pending.pop_front().expect("checked");
            if s.requirements.iter().all(|r| stable.covers(r)) {
                stable.mark(s.version.copy(), s.version.seq);
                outcome.marked += 1;
            } else {
                outcome.unsupported += 1;
            }
        }
        outcome
    }
}

/// What a [`StabilizeOp`] asks for next, or its result.
#[derive(Debug, PartialEq, Eq)]
pub enum StabilizeStep {
    /// Read this copy's meta from the local store.
    Fetch(Copy),
    /// Ask the store whether every local set holds this version of its copy, or a later one.
    Confirm(Vertex),
    /// Finished: whether the root version is now stable.
    Done(bool),
}

/// The answer to a [`StabilizeStep`].
#[derive(Debug)]
pub enum StabilizeInput {
    /// The meta of the copy asked for by [`StabilizeStep::Fetch`] (`None`: not in the local store).
    Fetched(Option<Meta>),
    /// The store's answer to [`StabilizeStep::Confirm`].
    Confirmed(bool),
}

impl StabilizeOp {
    /// Starts making `root` stable, visiting at most `budget` versions (what it confirms before running out stays
    /// marked, so a later attempt goes further).
    pub fn start(root: Vertex, budget: usize, stable: &mut Marks) -> (StabilizeOp, StabilizeStep) {
        let mut op = StabilizeOp {
            stack: vec![(root.clone(), false)],
            expanded: HashMap::new(),
            confirmed: std::collections::HashSet::new(),
            current: None,
            root,
            budget,
            marked: 0,
        };
        let step = op.advance(stable);
        (op, step)
    }

    fn advance(&mut self, stable: &mut Marks) -> StabilizeStep {
        while let Some((v, expanded)) = self.stack.pop() {
            if stable.covers(&v) {
                continue;
            }
            if expanded {
                self.current = Some(v.clone());
                return StabilizeStep::Confirm(v);
            }
            if self.expanded.contains_key(&v) {
                // Already read in this walk: its confirmation is pending below (a cycle, see `finish`), or done.
                continue;
            }
            if self.budget == 0 {
                return self.finish(stable);
            }
            self.budget -= 1;
            let copy = v.copy();
            self.current = Some(v);
            return StabilizeStep::Fetch(copy);
        }
        self.finish(stable)
    }

    /// Ends the walk: marks the confirmed versions whose requirements are all stable or marked with them.
    ///
    /// Not each version as soon as it is confirmed: a record's requirements over-approximate a version's causal
    /// past (the folded set of an older version may name versions written after it), so the graph a walk reads can
    /// have cycles, and a depth-first walk reaches a version whose requirement is still waiting below it on the
    /// stack. Marking it at once (as this walk did until 2026-11-27) made a version stable while a version of its
    /// true causal past was not in every local set, when that requirement's own confirmation then failed (the
    /// middleware simulator's ground-truth check found it: `crates/middleware/src/sim.rs`). The set marked is the
    /// largest set of confirmed versions each of whose requirements is stable or in the set: every version in it
    /// is in every local set with everything its record requires, so with its whole causal past.
    fn finish(&mut self, stable: &mut Marks) -> StabilizeStep {
        let mut marked = std::mem::take(&mut self.confirmed);
        loop {
            let unsupported: Vec<Vertex> = (marked.iter())
                .filter(|v| {
                    let reqs = self.expanded.get(*v).expect("a confirmed version was read first");
                    !reqs.iter().all(|r| marked.contains(r) || stable.covers(r))
                })
                .cloned()
                .collect();
            if unsupported.is_empty() {
                break;
            }
            for v in unsupported {
                marked.remove(&v);
            }
        }
        // In a fixed order: a full set of marks forgets everything, and the simulator replays a seed exactly.
        let mut marked: Vec<Vertex> = marked.into_iter().collect();
        marked.sort();
        for v in &marked {
            stable.mark(v.copy(), v.seq);
        }
        self.marked = marked.len();
        StabilizeStep::Done(stable.covers(&self.root))
    }

    /// Resumes the walk with the store's answer to its last step.
    pub fn resume(&mut self, input: StabilizeInput, stable: &mut Marks) -> StabilizeStep {
        let v = self.current.take().expect("a walk is resumed only after a step");
        match input {
            StabilizeInput::Fetched(Some(meta)) if meta.seq() >= v.seq => {
                self.stack.push((v.clone(), true));
                let reqs: Vec<Vertex> =
                    meta.requirements(v.seq).map(|d| d.vertex).filter(|d| !stable.covers(d)).collect();
                self.stack.extend(reqs.iter().map(|d| (d.clone(), false)));
                self.expanded.insert(v, reqs);
                self.advance(stable)
            }
            // Not present here: nothing in this instance's causal past is like that, but a stale queue entry may be.
            StabilizeInput::Fetched(_) => self.finish(stable),
            StabilizeInput::Confirmed(true) => {
                self.confirmed.insert(v);
                self.advance(stable)
            }
            StabilizeInput::Confirmed(false) => self.finish(stable),
        }
    }

    /// Runs a whole walk against a store that answers at once: the simulation's and the tests' driver.
    pub fn run(
        root: Vertex,
        budget: usize,
        stable: &mut Marks,
        mut fetch: impl FnMut(&Copy) -> Option<Meta>,
        mut confirm: impl FnMut(&Vertex) -> bool,
    ) -> bool {
        let (mut op, mut step) = StabilizeOp::start(root, budget, stable);
        loop {
            step = match step {
                StabilizeStep::Fetch(copy) => op.resume(StabilizeInput::Fetched(fetch(&copy)), stable),
                StabilizeStep::Confirm(v) => op.resume(StabilizeInput::Confirmed(confirm(&v)), stable),
                StabilizeStep::Done(done) => return done,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::VersionDeps;

    type Store = HashMap<Copy, Record>;

    fn protocol(ls: LocalSet) -> Protocol {
        Protocol { local_set: ls, local_sets: 2, levels: 1, retain: 4 }
    }

    fn read(store: &Store, ls: LocalSet, marks: &mut Marks, session: &mut Session, key: &str) -> ReadOutcome {
        ReadOp::run(&protocol(ls), key.as_bytes(), marks, session, |c| heads(store, c), |c| metas(store, c))
    }

    fn heads(store: &Store, copies: &[Copy]) -> Vec<Option<Head>> {
        copies.iter().map(|c| store.get(c).map(Record::head)).collect()
    }

    fn metas(store: &Store, copies: &[Copy]) -> Vec<Option<Meta>> {
        copies.iter().map(|c| store.get(c).map(|r| r.meta.clone())).collect()
    }

    fn write(store: &mut Store, ls: LocalSet, session: &mut Session, key: &str, value: &str) -> Vertex {
        let p = protocol(ls);
        let (mut op, mut step) = WriteOp::start(&p, session, key.as_bytes(), value.as_bytes().to_vec());
        loop {
            step = match step {
                Step::Fetch(copies) => op.resume(&p, Input::Fetched(metas(store, &copies)), session, &Marks::new(1)),
                Step::Cas { copy, expect, record } => {
                    let ok = store.get(&copy).map(Record::seq) == expect;
                    if ok {
                        store.insert(copy, record);
                    }
                    op.resume(&p, Input::Swapped(ok), session, &Marks::new(1))
                }
                Step::Done(v) => return v,
                Step::FetchHeads(_) => unreachable!("a write reads metas"),
            }
        }
    }

    fn value(outcome: ReadOutcome) -> Option<String> {
        match outcome {
            ReadOutcome::Value { value, .. } => Some(String::from_utf8(value).unwrap()),
            ReadOutcome::Missing => None,
            ReadOutcome::Unresolved { missing, .. } => panic!("unresolved: {missing:?} missing"),
        }
    }

    /// Replicates copy `(key, ls)` from one store to another.
    fn ship(from: &Store, to: &mut Store, key: &str, ls: LocalSet) {
        let copy = Copy { key: key.as_bytes().to_vec(), ls };
        to.insert(copy.clone(), from[&copy].clone());
    }

    #[test]
    fn a_read_waits_for_the_dependencies_of_what_it_returns() {
        let (mut here, mut there) = (Store::new(), Store::new());
        let mut alice = Session::new();
        write(&mut here, 0, &mut alice, "x", "x1");
        write(&mut here, 0, &mut alice, "y", "y1"); // y1 depends on x1 (same session)
        ship(&here, &mut there, "y", 0);
        let mut marks = Marks::new(100);
        let out = read(&there, 1, &mut marks, &mut Session::new(), "y");
        assert!(
            matches!(&out, ReadOutcome::Unresolved { missing, .. } if missing.key == b"x"),
            "y1 must not be returned before x1 arrives: {out:?}"
        );
        ship(&here, &mut there, "x", 0);
        assert_eq!(value(read(&there, 1, &mut marks, &mut Session::new(), "y")).as_deref(), Some("y1"));
        // Resolution marked both y1 and the x1 it depends on.
        assert!(marks.covers(&Vertex { key: b"x".to_vec(), ls: 0, seq: 1 }));
    }

    /// The steps of one read of `key` at local set `ls`: heads read from `at`, metas from `metas_at`.
    fn read_steps(
        at: &Store,
        metas_at: &Store,
        ls: LocalSet,
        marks: &mut Marks,
        key: &str,
    ) -> (Vec<String>, ReadOutcome) {
        let (mut op, mut step) = ReadOp::start(&protocol(ls), key.as_bytes());
        let mut steps = Vec::new();
        loop {
            step = match step {
                Step::FetchHeads(copies) => {
                    steps.push(format!("heads of {}", copies.len()));
                    op.resume(Input::Heads(heads(at, &copies)), marks, &mut Session::new())
                }
                Step::Fetch(copies) => {
                    steps.push(format!("metas of {}", copies.len()));
                    op.resume(Input::Fetched(metas(metas_at, &copies)), marks, &mut Session::new())
                }
                Step::Done(outcome) => return (steps, outcome),
                Step::Cas { .. } => unreachable!(),
            }
        }
    }

    /// A feed entry is checked with the requirements its writer gave it: its record is read to see it present, then
    /// its requirements' records (a level later), and its copy's previous version — not its record's requirements
    /// now (here the record has moved on and requires a version that has not arrived).
    #[test]
    fn a_feed_entry_is_checked_with_its_own_requirements_a_level_at_a_time() {
        let mut here: Store = HashMap::new();
        let x1 = requiring(1, &[]);
        let y1 = requiring(1, &[]);
        // x's record is at version 2 now, which requires a version of z that is not here.
        let mut x2 = requiring(2, &[v("z", 1)]);
        x2.versions.insert(0, x1.versions[0].clone());
        here.insert(v("x", 2).copy(), stored(x2));
        let fetch = |here: &Store, copies: &[Copy]| -> Vec<Option<Meta>> {
            copies.iter().map(|c| here.get(c).map(|r| r.meta.clone())).collect()
        };
        let check = |here: &Store, marks: &mut Marks| {
            let mut check = Resolution::with_requirements(1, vec![(v("x", 1), vec![v("y", 1)])]);
            let mut rounds = 0;
            loop {
                match check.next(marks) {
                    Check::Fetch(copies) => {
                        rounds += 1;
                        check.fetched(fetch(here, &copies));
                    }
                    Check::Present => {
                        check.mark(marks);
                        return (Check::Present, rounds);
                    }
                    other => return (other, rounds),
                }
            }
        };
        let mut marks = Marks::new(10);
        assert_eq!(check(&here, &mut marks), (Check::Missing(v("y", 1)), 2), "y@0.1 has not arrived");
        here.insert(v("y", 1).copy(), stored(y1));
        assert_eq!(check(&here, &mut marks), (Check::Present, 2), "x's record, then y's");
        assert!(marks.covers(&v("x", 1)) && marks.covers(&v("y", 1)) && !marks.covers(&v("z", 1)));
    }

    /// A read that stopped walking (the driver waits for a follower, `walk_budget`) starts its check again from
    /// the winner alone: while the winner is not marked it asks for the winner's meta only, whatever it had walked;
    /// once it is marked (the follower resolved it), the read returns the head it read first, reading nothing more.
    #[test]
    fn a_read_restarted_after_a_follower_marked_its_winner_returns_the_head_read_first() {
        let (mut here, mut there) = (Store::new(), Store::new());
        let mut alice = Session::new();
        for i in 0..5 {
            write(&mut here, 0, &mut alice, &format!("k{i}"), &format!("v{i}"));
        }
        for i in 0..5 {
            ship(&here, &mut there, &format!("k{i}"), 0);
        }
        let (mut marks, mut session) = (Marks::new(100), Session::new());
        let (mut op, step) = ReadOp::start(&protocol(1), b"k4");
        let Step::FetchHeads(copies) = step else { panic!("{step:?}") };
        let step = op.resume(Input::Heads(heads(&there, &copies)), &mut marks, &mut session);
        let Step::Fetch(copies) = step else { panic!("{step:?}") };
        // One level walked (k4's meta), which leads to k3.
        let step = op.resume(Input::Fetched(metas(&there, &copies)), &mut marks, &mut session);
        assert!(matches!(&step, Step::Fetch(c) if *c == [v("k3", 1).copy()]), "{step:?}");
        // Not marked yet: the restarted check asks for the winner alone.
        let step = op.restart(&mut marks, &mut session, &|_| None);
        assert!(matches!(&step, Step::Fetch(c) if *c == [v("k4", 1).copy()]), "{step:?}");
        // A newer version arrives meanwhile; the follower marks the one the read had chosen.
        write(&mut here, 0, &mut alice, "k4", "newer");
        ship(&here, &mut there, "k4", 0);
        marks.mark(v("k4", 1).copy(), 1);
        match op.restart(&mut marks, &mut session, &|_| None) {
            Step::Done(ReadOutcome::Value { value, version }) => {
                assert_eq!((value.as_slice(), version), (b"v4".as_slice(), v("k4", 1)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(op.work.rounds, 4, "heads, the winner's meta, k3's meta, the winner's meta again; nothing more");
    }

    #[test]
    fn a_read_that_needs_no_resolution_reads_no_dependency_information() {
        let (mut here, mut there) = (Store::new(), Store::new());
        let mut alice = Session::new();
        write(&mut here, 0, &mut alice, "x", "x1");
        write(&mut here, 0, &mut alice, "y", "y1"); // y1 depends on x1
                                                    // Written by this local set: the heads alone.
        let (steps, out) = read_steps(&here, &here, 0, &mut Marks::new(10), "y");
        assert_eq!((steps, value(out).as_deref()), (vec!["heads of 2".to_string()], Some("y1")));
        // Written elsewhere: the winner's meta, then its dependency's; then marked, and the heads alone again.
        ship(&here, &mut there, "x", 0);
        ship(&here, &mut there, "y", 0);
        let mut marks = Marks::new(10);
        let (steps, out) = read_steps(&there, &there, 1, &mut marks, "y");
        assert_eq!(steps, ["heads of 2", "metas of 1", "metas of 1"]);
        assert_eq!(value(out).as_deref(), Some("y1"));
        let (steps, _) = read_steps(&there, &there, 1, &mut marks, "y");
        assert_eq!(steps, ["heads of 2"]);
    }

    /// A store whose replicas of one DC disagree for a moment can answer the meta from an older version than the
    /// head: that meta says nothing about the head's version, which must not pass for one without dependencies.
    #[test]
    fn a_meta_older_than_the_head_is_the_version_not_yet_present() {
        let (mut here, mut there, mut stale) = (Store::new(), Store::new(), Store::new());
        let mut alice = Session::new();
        write(&mut here, 0, &mut alice, "y", "y1");
        ship(&here, &mut stale, "y", 0);
        write(&mut here, 0, &mut alice, "x", "x1");
        write(&mut here, 0, &mut alice, "y", "y2"); // y2 depends on x1, which `there` lacks
        ship(&here, &mut there, "y", 0);
        let (_, out) = read_steps(&there, &stale, 1, &mut Marks::new(10), "y");
        let y2 = Vertex { key: b"y".to_vec(), ls: 0, seq: 2 };
        assert_eq!(out, ReadOutcome::Unresolved { version: y2.clone(), missing: y2 });
        // With the meta of y2 it is x1 that is missing; with x1 too, y2 is returned.
        let (_, out) = read_steps(&there, &there, 1, &mut Marks::new(10), "y");
        assert!(matches!(out, ReadOutcome::Unresolved { missing, .. } if missing.key == b"x"));
        ship(&here, &mut there, "x", 0);
        assert_eq!(value(read_steps(&there, &there, 1, &mut Marks::new(10), "y").1).as_deref(), Some("y2"));
    }

    #[test]
    fn a_read_after_reads_carries_them_into_the_next_write() {
        let (mut here, mut there) = (Store::new(), Store::new());
        write(&mut here, 0, &mut Session::new(), "x", "x1");
        let mut bob = Session::new();
        assert_eq!(value(read(&here, 0, &mut Marks::new(10), &mut bob, "x")).as_deref(), Some("x1"));
        write(&mut here, 0, &mut bob, "z", "z1"); // z1 depends on the x1 bob read (rule 1)
        ship(&here, &mut there, "z", 0);
        assert!(matches!(
            read(&there, 1, &mut Marks::new(10), &mut Session::new(), "z"),
            ReadOutcome::Unresolved { .. }
        ));
    }

    /// A mark on a copy's newer version covers its older ones only because every version depends on the copy's
    /// previous version; without that edge a reader would trust an older version whose own graph never arrived.
    #[test]
    fn a_mark_on_a_newer_version_covers_the_older_versions_dependencies() {
        let (mut here, mut there) = (Store::new(), Store::new());
        let mut w1 = Session::new();
        write(&mut here, 0, &mut w1, "x", "x1");
        write(&mut here, 0, &mut w1, "y", "y1"); // y@1 depends on x@1
        let mut reader = Session::new();
        assert_eq!(value(read(&here, 0, &mut Marks::new(10), &mut reader, "y")).as_deref(), Some("y1"));
        write(&mut here, 0, &mut reader, "z", "z1"); // z@1 depends on y@1
        write(&mut here, 0, &mut Session::new(), "y", "y2"); // y@2: a fresh session, no dependencies of its own
        ship(&here, &mut there, "y", 0);
        ship(&here, &mut there, "z", 0);
        let mut marks = Marks::new(10);
        // y@2 requires y@1's dependencies too, so neither y nor z may be read before x arrives.
        assert!(matches!(read(&there, 1, &mut marks, &mut Session::new(), "y"), ReadOutcome::Unresolved { .. }));
        assert!(matches!(read(&there, 1, &mut marks, &mut Session::new(), "z"), ReadOutcome::Unresolved { .. }));
        ship(&here, &mut there, "x", 0);
        assert_eq!(value(read(&there, 1, &mut marks, &mut Session::new(), "z")).as_deref(), Some("z1"));
    }

    #[test]
    fn concurrent_copies_resolve_to_the_same_winner_everywhere() {
        let (mut a, mut b) = (Store::new(), Store::new());
        write(&mut a, 0, &mut Session::new(), "k", "from-0");
        write(&mut b, 1, &mut Session::new(), "k", "from-1");
        ship(&a, &mut b, "k", 0);
        ship(&b, &mut a, "k", 1);
        let read_a = value(read(&a, 0, &mut Marks::new(10), &mut Session::new(), "k"));
        let read_b = value(read(&b, 1, &mut Marks::new(10), &mut Session::new(), "k"));
        assert_eq!(read_a, read_b);
        // A write that saw both copies wins over both.
        write(&mut a, 0, &mut Session::new(), "k", "merged");
        ship(&a, &mut b, "k", 0);
        assert_eq!(value(read(&b, 1, &mut Marks::new(10), &mut Session::new(), "k")).as_deref(), Some("merged"));
    }

    #[test]
    fn a_lost_compare_and_swap_is_retried_on_the_new_version() {
        let p = protocol(0);
        let none = Marks::new(1);
        let mut store = Store::new();
        let mut s = Session::new();
        let (mut op, step) = WriteOp::start(&p, &s, b"k", b"mine".to_vec());
        let Step::Fetch(copies) = step else { panic!() };
        let step = op.resume(&p, Input::Fetched(metas(&store, &copies)), &mut s, &none);
        assert!(matches!(step, Step::Cas { expect: None, .. }));
        // Another instance writes first.
        write(&mut store, 0, &mut Session::new(), "k", "theirs");
        let step = op.resume(&p, Input::Swapped(false), &mut s, &none);
        let Step::Fetch(copies) = step else { panic!("a lost swap reads again") };
        let step = op.resume(&p, Input::Fetched(metas(&store, &copies)), &mut s, &none);
        let Step::Cas { expect: Some(1), record, .. } = step else { panic!("retries on version 1") };
        assert_eq!(record.seq(), 2);
        assert_eq!(op.work.conflicts, 1);
    }

    #[test]
    fn a_version_is_made_stable_after_its_causal_past_and_then_left_out_of_records() {
        let p = protocol(0);
        let (mut here, mut there) = (Store::new(), Store::new());
        let mut alice = Session::new();
        let x = write(&mut here, 0, &mut alice, "x", "x1");
        let y = write(&mut here, 0, &mut alice, "y", "y1"); // y1 depends on x1
        let mut stable = Marks::new(16);
        let walk = |here: &Store, there: &Store, stable: &mut Marks, confirmed: &mut Vec<Vertex>| {
            StabilizeOp::run(
                y.clone(),
                16,
                stable,
                |c| here.get(c).map(|r| r.meta.clone()),
                |v| {
                    let everywhere = [here, there].iter().all(|s| s.get(&v.copy()).is_some_and(|r| r.seq() >= v.seq));
                    if everywhere {
                        confirmed.push(v.clone());
                    }
                    everywhere
                },
            )
        };
        let mut confirmed = Vec::new();
        assert!(!walk(&here, &there, &mut stable, &mut confirmed), "nothing has reached the other local set");
        assert!(stable.is_empty());
        ship(&here, &mut there, "x", 0);
        assert!(!walk(&here, &there, &mut stable, &mut confirmed), "y1 has not arrived");
        assert!(stable.covers(&x) && !stable.covers(&y), "x1 stays stable: a later walk goes on from there");
        ship(&here, &mut there, "y", 0);
        assert!(walk(&here, &there, &mut stable, &mut confirmed));
        assert_eq!(confirmed, vec![x.clone(), y.clone()], "a version is confirmed after what it requires");
        // Alice's next write would depend on y1; it is stable, so the record leaves it out.
        let (mut op, step) = WriteOp::start(&p, &alice, b"z", b"z1".to_vec());
        let Step::Fetch(copies) = step else { panic!() };
        let fetched = Input::Fetched(metas(&here, &copies));
        let Step::Cas { record, .. } = op.resume(&p, fetched, &mut alice, &stable) else { panic!() };
        assert!(record.meta.versions[0].deps.is_empty(), "{:?}", record.meta.versions);
        // Without the stable marks it is there.
        let (mut op, _) = WriteOp::start(&p, &alice, b"z", b"z1".to_vec());
        let fetched = Input::Fetched(metas(&here, &copies));
        let Step::Cas { record, .. } = op.resume(&p, fetched, &mut alice, &Marks::new(1)) else { panic!() };
        assert_eq!(record.meta.versions[0].deps.len(), 1);
    }

    #[test]
    fn a_version_is_not_marked_stable_while_its_causal_past_is_not_everywhere_even_through_a_cycle() {
        // Records over-approximate: k2's folded set names what its dropped versions 5..7 required (k0@0.4 among
        // them), so it is also what k2@0.4 requires as read, though k0@0.4 itself came after k2@0.4. The walk from
        // k0@0.4 reaches k2@0.5 while k0@0.4 waits below it on the stack.
        let v = |key: &str, seq| Vertex { key: key.as_bytes().to_vec(), ls: 0, seq };
        let record = |seq, deps: Vec<Vertex>, folded| Record {
            value: Vec::new(),
            meta: Meta {
                clock: vec![seq],
                versions: vec![VersionDeps {
                    seq,
                    deps: deps.into_iter().map(|vertex| Dep { vertex, level: 1 }).collect(),
                }],
                folded,
            },
        };
        let mut here = Store::new();
        here.insert(v("k0", 4).copy(), record(4, vec![v("k2", 4)], vec![]));
        here.insert(v("k2", 8).copy(), record(8, vec![], vec![v("k0", 4), v("k3", 6)]));
        here.insert(v("k3", 6).copy(), record(6, vec![v("k2", 5)], vec![]));
        // k0@0.4 has not reached every local set; everything else has.
        let everywhere = |x: &Vertex| x.key != b"k0";
        let mut stable = Marks::new(16);
        assert!(!StabilizeOp::run(v("k0", 4), 16, &mut stable, |c| here.get(c).map(|r| r.meta.clone()), everywhere));
        assert!(!stable.covers(&v("k2", 5)), "k2@0.5 requires k0@0.4, which is not everywhere");
        assert!(stable.is_empty(), "nothing here is stable without k0@0.4");
        // Once it is, the whole cycle is marked together.
        assert!(StabilizeOp::run(v("k0", 4), 16, &mut stable, |c| here.get(c).map(|r| r.meta.clone()), |_| true));
        assert!(stable.covers(&v("k0", 4)) && stable.covers(&v("k2", 5)) && stable.covers(&v("k3", 6)));
    }

    #[test]
    fn a_walk_out_of_budget_stops_without_marking_the_root() {
        let mut here = Store::new();
        let mut s = Session::new();
        let mut last = write(&mut here, 0, &mut s, "k0", "v");
        for i in 1..10 {
            last = write(&mut here, 0, &mut s, &format!("k{i}"), "v"); // each depends on the one before
        }
        let mut stable = Marks::new(64);
        let fetch = |c: &Copy| here.get(c).map(|r| r.meta.clone());
        assert!(!StabilizeOp::run(last.clone(), 3, &mut stable, fetch, |_| true), "a chain of 10 needs 10 visits");
        assert!(!stable.covers(&last));
        assert!(StabilizeOp::run(last.clone(), 10, &mut stable, fetch, |_| true));
        assert!(stable.covers(&last) && stable.len() == 10);
    }

    /// A meta at version `seq` whose newest version requires `deps`.
    fn requiring(seq: u64, deps: &[Vertex]) -> Meta {
        Meta {
            clock: vec![seq, 0],
            versions: vec![VersionDeps {
                seq,
                deps: deps.iter().map(|v| Dep { vertex: v.clone(), level: 1 }).collect(),
            }],
            folded: Vec::new(),
        }
    }

    fn v(key: &str, seq: u64) -> Vertex {
        Vertex { key: key.as_bytes().to_vec(), ls: 0, seq }
    }

    #[test]
    fn own_writes_are_confirmed_once_per_copy_and_marked_oldest_first_when_what_they_require_is_stable() {
        let mut own = OwnWrites::new(16);
        let mut stable = Marks::new(16);
        // x1, then y1 requiring x1, then x2 (requiring x1 through its copy), then z1 requiring w1 (never stable).
        own.stored(&v("x", 1).copy(), &requiring(1, &[]), 10);
        own.stored(&v("y", 1).copy(), &requiring(1, &[v("x", 1)]), 11);
        own.stored(&v("x", 2).copy(), &requiring(2, &[]), 12);
        own.stored(&v("z", 1).copy(), &requiring(1, &[v("w", 1)]), 13);
        // Only what was stored by then is due, each copy once at its newest version.
        assert_eq!(own.due(9, 8), (0, vec![]));
        assert_eq!(own.due(12, 8), (3, vec![v("x", 2), v("y", 1)]));
        // A batch limited to one copy stops before the first version of another.
        assert_eq!(own.due(13, 1), (1, vec![v("x", 1)]));
        let (count, copies) = own.due(13, 8);
        assert_eq!((count, copies.len()), (4, 3));
        let answers: Vec<(Vertex, bool)> = copies.into_iter().map(|c| (c, true)).collect();
        let outcome = own.confirmed(count, &answers, &mut stable);
        // y1 is marked because x1 was marked just before it; z1 requires a version nobody made stable.
        assert_eq!(outcome, Confirmation { marked: 3, unsupported: 1, stopped: false });
        assert!(stable.covers(&v("x", 2)) && stable.covers(&v("y", 1)) && !stable.covers(&v("z", 1)));
        assert!(own.is_empty());
    }

    #[test]
    fn own_writes_stop_at_the_first_version_the_store_does_not_confirm_and_keep_it() {
        let mut own = OwnWrites::new(16);
        let mut stable = Marks::new(16);
        own.stored(&v("x", 1).copy(), &requiring(1, &[]), 1);
        own.stored(&v("y", 1).copy(), &requiring(1, &[]), 2);
        own.stored(&v("x", 2).copy(), &requiring(2, &[]), 3);
        // x is confirmed at version 1 only (an older answer), y not at all: x1 is marked, y1 and x2 wait.
        let outcome = own.confirmed(3, &[(v("x", 1), true), (v("y", 1), false)], &mut stable);
        assert_eq!(outcome, Confirmation { marked: 1, unsupported: 0, stopped: true });
        assert!(stable.covers(&v("x", 1)) && !stable.covers(&v("x", 2)));
        assert_eq!(own.due(3, 8), (2, vec![v("y", 1), v("x", 2)]));
        // A full queue takes nothing more, and says so.
        let mut full = OwnWrites::new(1);
        full.stored(&v("x", 1).copy(), &requiring(1, &[]), 1);
        full.stored(&v("y", 1).copy(), &requiring(1, &[]), 1);
        assert_eq!((full.len(), full.dropped), (1, 1));
    }

    /// A meta with `clock` and no dependencies, as a write cache sees it.
    fn clocked(clock: &[u64], ls: usize) -> Meta {
        Meta {
            clock: clock.to_vec(),
            versions: vec![VersionDeps { seq: clock[ls], deps: Vec::new() }],
            folded: Vec::new(),
        }
    }

    fn stored(meta: Meta) -> Record {
        Record { value: Vec::new(), meta }
    }

    /// Seed 2428 of the exclusive-writer simulation (3,000 seeds): the cache was cleared while a write was in
    /// flight (the instance restarted; in the driver, a lease renewal found a gap, or another key filled the
    /// cache), a read then fetched a newer copy of the key from another local set (nothing to raise: no entry), and
    /// the write's store recreated the entry from its own record alone. The next write ranked below the version the
    /// session had read, and the session read that version again after writing over it.
    #[test]
    fn a_write_cache_cleared_while_a_write_is_in_flight_does_not_come_back_without_the_reads_in_between() {
        let p = protocol(0);
        let key = b"k".as_slice();
        let copies = p.copies(key);
        let other_newer = clocked(&[1, 5], 1);
        for forget in [
            (|c: &mut WriteCache| c.clear()) as fn(&mut WriteCache),
            |c: &mut WriteCache| c.fetched(&protocol(0), b"j", &[None, None]), // a full cache forgets everything
        ] {
            let mut cache = WriteCache::new(1);
            cache.fetched(&p, key, &[Some(clocked(&[1, 1], 0)), Some(clocked(&[0, 1], 1))]);
            forget(&mut cache);
            cache.observe(&copies, [Some([1, 1].as_slice()), Some(other_newer.clock.as_slice())]);
            cache.stored(key, &stored(clocked(&[2, 1], 0)));
            if let Some(records) = cache.copies_for_write(&p, key) {
                let mut seen = vec![0; 2];
                for r in records.iter().flatten() {
                    raise(&mut seen, &r.clock);
                }
                assert!(
                    seen[1] >= other_newer.clock[1],
                    "the cache answers a write with {seen:?}, below the read of {:?}",
                    other_newer.clock
                );
            }
        }
        // Without the gap, a stored write keeps what reads raised.
        let mut cache = WriteCache::new(4);
        cache.fetched(&p, key, &[Some(clocked(&[1, 1], 0)), Some(clocked(&[0, 1], 1))]);
        cache.observe(&copies, [Some([1, 1].as_slice()), Some(other_newer.clock.as_slice())]);
        cache.stored(key, &stored(clocked(&[2, 1], 0)));
        let records = cache.copies_for_write(&p, key).expect("cached");
        assert_eq!(records[1].as_ref().map(|r| r.clock.clone()), Some(vec![2, 5]));
    }

    #[test]
    fn the_read_cache_answers_until_something_newer_is_resolved_written_or_forgotten() {
        let key = b"k".to_vec();
        let v = |ls, seq| Vertex { key: key.clone(), ls, seq };
        let mut marks = Marks::new(100);
        let mut cache = ReadCache::new(1 << 20);
        // Local set 1's instance read version 3 of local set 0's copy; its own copy was at 2.
        let began = cache.begin(&marks);
        marks.mark(v(0, 3).copy(), 3);
        cache.fill(&key, began, vec![3, 2], v(0, 3), b"x".to_vec(), &marks, 0);
        let hit = |cache: &ReadCache, marks: &Marks, now| {
            cache.lookup(1, &key, marks, now, Some(100)).map(|(v, _)| v.clone())
        };
        assert_eq!(hit(&cache, &marks, 10), Some(v(0, 3)));
        // Too old.
        assert_eq!(hit(&cache, &marks, 100), None);
        // A newer version of local set 0's copy resolved here: a read of the store would return it.
        marks.mark(v(0, 4).copy(), 4);
        assert_eq!(hit(&cache, &marks, 10), None);
        // Filled again at 4; then an own write drops it, and a fill by a read that began before the write is refused.
        let began = cache.begin(&marks);
        cache.fill(&key, began, vec![4, 2], v(0, 4), b"y".to_vec(), &marks, 20);
        assert_eq!(hit(&cache, &marks, 30), Some(v(0, 4)));
        let before_write = cache.begin(&marks);
        cache.wrote(&key);
        assert_eq!(hit(&cache, &marks, 30), None);
        cache.fill(&key, before_write, vec![4, 2], v(0, 4), b"y".to_vec(), &marks, 30);
        assert_eq!(hit(&cache, &marks, 30), None, "a fill that began before an own write");
        // Marks forgotten between the start of a read and its fill, or after the fill: no answer.
        let began = cache.begin(&marks);
        marks.clear();
        cache.fill(&key, began, vec![4, 3], v(1, 3), b"z".to_vec(), &marks, 40);
        assert_eq!(hit(&cache, &marks, 40), None, "marks forgotten while the read ran");
        let began = cache.begin(&marks);
        cache.fill(&key, began, vec![4, 3], v(1, 3), b"z".to_vec(), &marks, 40);
        assert_eq!(hit(&cache, &marks, 40), Some(v(1, 3)));
        marks.clear();
        assert_eq!(hit(&cache, &marks, 40), None, "marks forgotten since the fill");
        // A hit is in the session's past, as a read's answer.
        let mut session = Session::new();
        ReadCache::served(&mut session, &v(1, 3));
        assert_eq!(session.graph(1), vec![Dep { vertex: v(1, 3), level: 1 }]);
    }

    /// Two reads that began while an own write was in flight (after it started, so their fills are allowed) may
    /// fill in either order: the one that began first may have found the copy before the write landed and fill
    /// last. Its fill must not replace the entry of the one that found the write — a session that read the write
    /// would then be answered an older version (monotonic reads). Found by reading `fill` (2026-12-02); a fill that
    /// found older heads than the entry's is refused, and one that found some newer and some older drops the entry.
    #[test]
    fn a_fill_that_found_older_heads_does_not_replace_a_newer_entry() {
        let key = b"k".to_vec();
        let v = |ls, seq| Vertex { key: key.clone(), ls, seq };
        let marks = Marks::new(100);
        let mut cache = ReadCache::new(1 << 20);
        let hit = |cache: &ReadCache| cache.lookup(1, &key, &marks, 0, Some(100)).map(|(v, _)| v.clone());
        cache.wrote(&key); // local set 1's write of version 5 starts
        let (first, second) = (cache.begin(&marks), cache.begin(&marks));
        // The second read found the write in the store (own copy at 5) and filled first.
        cache.fill(&key, second, vec![3, 5], v(1, 5), b"own5".to_vec(), &marks, 0);
        // The first found the copy before the write landed (at 4), and fills after.
        cache.fill(&key, first, vec![3, 4], v(1, 4), b"own4".to_vec(), &marks, 0);
        assert_eq!(hit(&cache), Some(v(1, 5)), "the older fill must not replace the newer entry");
        // A fill newer on one copy and older on another: neither entry is what a read now would find.
        let third = cache.begin(&marks);
        cache.fill(&key, third, vec![4, 4], v(0, 4), b"x4".to_vec(), &marks, 0);
        assert_eq!(hit(&cache), None);
        // Equal or newer heads replace it as before.
        let fourth = cache.begin(&marks);
        cache.fill(&key, fourth, vec![4, 5], v(1, 5), b"own5".to_vec(), &marks, 0);
        assert_eq!(hit(&cache), Some(v(1, 5)));
    }

    #[test]
    fn the_read_cache_stays_within_its_bound_and_is_kept_only_where_sound() {
        let marks = Marks::new(100);
        let mut cache = ReadCache::new(10_000);
        for i in 0..100u64 {
            let key = format!("key{i}").into_bytes();
            let began = cache.begin(&marks);
            let version = Vertex { key: key.clone(), ls: 0, seq: 1 };
            cache.fill(&key, began, vec![1, 0], version, vec![0; 500], &marks, 0);
            assert!(cache.bytes <= 10_000, "{} bytes", cache.bytes);
        }
        assert!(cache.len() >= 5 && cache.len() < 100, "{} entries", cache.len());
        assert!(ReadCache::is_sound(true, true, 1));
        assert!(!ReadCache::is_sound(false, true, 1), "shared writers: other instances write the own copy");
        assert!(!ReadCache::is_sound(true, false, 1), "without feeds, stable versions may be unmarked here");
        assert!(!ReadCache::is_sound(true, true, 2), "k > 1: a hit has no levels for the next write");
    }
}
