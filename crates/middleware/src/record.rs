//! What the middleware stores: one [`Record`] per key per local set, holding the current value, a vector clock
//! over local sets, and the dependency information of the last few versions.

use serde::{Deserialize, Serialize};

/// A local set: one site's application instances, middleware instances and store cluster (paper §3.1). Numbered
/// from 0; the numbering is the configuration's and must agree across every middleware instance.
pub type LocalSet = u16;

/// A key, as the application names it.
pub type Key = Vec<u8>;

/// One copy of a key: the record that local set `ls` writes (paper §3.4: "a key has distinct versions for each
/// local set"). Every local set's store holds every copy; only `ls` writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Copy {
    /// The key.
    pub key: Key,
    /// The local set that writes this copy.
    pub ls: LocalSet,
}

/// A vertex of a dependency graph: version `seq` of the copy of `key` written by local set `ls`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Vertex {
    /// The key.
    pub key: Key,
    /// The local set whose copy holds the version.
    pub ls: LocalSet,
    /// The version: the copy's own entry of its vector clock after the write (1 for the first write).
    pub seq: u64,
}

impl Vertex {
    /// The copy this version belongs to.
    pub fn copy(&self) -> Copy {
        Copy { key: self.key.clone(), ls: self.ls }
    }
}

/// `key@ls.seq`, as errors name a version (the key as [`KeyDisplay`] shows it).
impl std::fmt::Display for Vertex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}.{}", KeyDisplay(&self.key), self.ls, self.seq)
    }
}

/// A key as a message shows it: its text where it is UTF-8, control characters and bytes that are not UTF-8 as
/// `\xNN` (or `\u{..}`), so that a binary key (the proxy's keys start with a two-byte bucket length) neither
/// garbles a terminal nor loses bytes as `String::from_utf8_lossy` would.
pub struct KeyDisplay<'a>(pub &'a [u8]);

impl std::fmt::Display for KeyDisplay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    c if c.is_ascii_control() => write!(f, "\\x{:02x}", c as u32)?,
                    c if c.is_control() => write!(f, "{}", c.escape_unicode())?,
                    c => f.write_char(c)?,
                }
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// A dependency as embedded in a version: the vertex and its level relative to that version (1 = a direct
/// dependency; 2..=k only with multi-level graphs, paper §3.5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dep {
    /// The version depended on.
    pub vertex: Vertex,
    /// Its level below the version that embeds it.
    pub level: u8,
}

/// The dependency information of one version of a copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionDeps {
    /// The version.
    pub seq: u64,
    /// Its embedded graph: level 1 (the writer's last write and the reads since), and levels up to `k`.
    pub deps: Vec<Dep>,
}

/// What every read needs of a copy: its vector clock (to rank the copies of a key) and its newest value. Stored
/// apart from the [`Meta`] (Cassandra: its own column), so that a read of a version that needs no resolution (one
/// its own local set wrote, or one already resolved) reads no dependency information at all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// Vector clock over local sets, as in [`Meta::clock`].
    pub clock: Vec<u64>,
    /// The value of the newest version.
    pub value: Vec<u8>,
}

/// The part of a stored record a read asks for ([`Encoded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The [`Head`]: clock and value (what every read needs).
    Head,
    /// The [`Meta`]: clock and dependency information (what resolution and writes need).
    Meta,
}

/// What [`Head`] and [`Meta`] have in common: which [`Part`] they are, how they are decoded, and the clock.
pub trait RecordPart: Sized {
    /// The part this is.
    const PART: Part;
    /// Reads the part written by [`Record::encode`].
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;
    /// The copy's vector clock.
    fn clock(&self) -> &[u64];
    /// Rank in a total order that extends the vector clocks' partial order: the sum of the clock, then the local
    /// set. A reader returns the copy of highest rank (paper §3.4: "the causally latest, ties by local-set id").
    fn rank(&self, ls: LocalSet) -> (u64, LocalSet) {
        (self.clock().iter().sum(), ls)
    }
}

impl Head {
    /// The newest version of the copy written by local set `ls`: its own entry of the clock.
    pub fn seq(&self, ls: LocalSet) -> u64 {
        self.clock.get(ls as usize).copied().unwrap_or(0)
    }
}

/// What resolution and writes need of a copy: its vector clock and the dependency information of its versions
/// (no value).
///
/// # Dependencies of a version, and why old ones may be dropped
///
/// Besides the dependencies the paper gives a version (the writer's last write and its reads since), every version
/// of a copy depends on the copy's previous version. That edge costs no metadata (it is implied) and it is what
/// makes garbage collection sound: when a record keeps more than its retention limit of versions, the oldest
/// version's dependencies are *folded* into [`Meta::folded`], which every retained version requires. A reader
/// that needs a version whose own entry was dropped therefore requires at least what that version required. The
/// price is a false dependency between successive writers of one copy (usually long resolved by then).
///
/// The same property makes a newer `Meta` good for an older version: [`Meta::requirements`] of version `s` read
/// from a record at a later version still names everything version `s` required (its own entry, or the folded set
/// it went into), so a read may take a copy's [`Head`] and, in a later request, its `Meta`, as long as the `Meta`
/// is not older than the head ([`Meta::seq`] at least the head's version).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Vector clock over local sets: entry `ls` of the copy written by `ls` is its newest version's `seq`.
    pub clock: Vec<u64>,
    /// The retained versions' dependency information, oldest first; the last is the newest version.
    pub versions: Vec<VersionDeps>,
    /// Dependencies folded in from dropped versions, compacted to the newest version of each copy. Every retained
    /// version requires them.
    pub folded: Vec<Vertex>,
}

/// The stored record of one copy: the newest value and the copy's [`Meta`]. The store keeps it as two parts, the
/// [`Head`] (clock and value) and the `Meta` (clock and dependencies), written together ([`Record::encode`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The value of the newest version.
    pub value: Vec<u8>,
    /// Clock and dependency information.
    pub meta: Meta,
}

/// A record as the store keeps it: its two parts, encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The encoded [`Head`].
    pub head: Vec<u8>,
    /// The encoded [`Meta`].
    pub meta: Vec<u8>,
}

impl Encoded {
    /// Bytes stored: both parts.
    pub fn len(&self) -> usize {
        self.head.len() + self.meta.len()
    }

    /// Whether both parts are empty (never, for an encoded record).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A part of a record that cannot be decoded: the store holds something the middleware did not write, or a newer
/// format.
#[derive(Debug, thiserror::Error)]
#[error("a stored record could not be decoded ({0}); was the table written by something other than the middleware?")]
pub struct DecodeError(#[from] postcard::Error);

impl RecordPart for Head {
    const PART: Part = Part::Head;

    fn decode(bytes: &[u8]) -> Result<Head, DecodeError> {
        Ok(postcard::from_bytes(bytes)?)
    }

    fn clock(&self) -> &[u64] {
        &self.clock
    }
}

impl RecordPart for Meta {
    const PART: Part = Part::Meta;

    fn decode(bytes: &[u8]) -> Result<Meta, DecodeError> {
        Ok(postcard::from_bytes(bytes)?)
    }

    fn clock(&self) -> &[u64] {
        &self.clock
    }
}

impl Meta {
    /// The newest version of the copy.
    pub fn seq(&self) -> u64 {
        self.versions.last().map_or(0, |v| v.seq)
    }

    /// What a reader must find resolved before returning version `seq` of this copy (or before counting it as
    /// resolved in a graph): the dependencies of every retained version up to `seq` and the folded ones. `seq`
    /// must be at most [`Meta::seq`].
    pub fn requirements(&self, seq: u64) -> impl Iterator<Item = Dep> + '_ {
        debug_assert!(seq <= self.seq());
        let folded = self.folded.iter().map(|v| Dep { vertex: v.clone(), level: 1 });
        let retained = self.versions.iter().take_while(move |v| v.seq <= seq).flat_map(|v| v.deps.iter().cloned());
        folded.chain(retained)
    }

    /// The meta without the dependencies `stable` says are stable (present with their whole causal past in every
    /// local set: no reader needs to check them; see [`crate::op::StabilizeOp`]).
    pub fn without(mut self, stable: impl Fn(&Vertex) -> bool) -> Meta {
        self.folded.retain(|v| !stable(v));
        for version in &mut self.versions {
            version.deps.retain(|d| !stable(&d.vertex));
        }
        self
    }
}

impl Record {
    /// The newest version of the copy.
    pub fn seq(&self) -> u64 {
        self.meta.seq()
    }

    /// The record's [`Head`].
    pub fn head(&self) -> Head {
        Head { clock: self.meta.clock.clone(), value: self.value.clone() }
    }

    /// Serialises the record's two parts for the store.
    pub fn encode(&self) -> Encoded {
        let head = (&self.meta.clock, &self.value);
        Encoded {
            head: postcard::to_allocvec(&head).expect("a head always serialises"),
            meta: postcard::to_allocvec(&self.meta).expect("a meta always serialises"),
        }
    }

    /// The record after local set `ls` writes `value` with dependencies `deps` over `current` (this copy's meta as
    /// read, `None` if never written), having seen `others` (the metas, or at least the clocks, of the other copies
    /// of the key in the local store). Keeps at most `retain` versions' dependency information (at least 1).
    pub fn next(
        current: Option<&Meta>,
        others: &[&Meta],
        ls: LocalSet,
        local_sets: usize,
        value: Vec<u8>,
        deps: Vec<Dep>,
        retain: usize,
    ) -> Record {
        let mut clock = vec![0; local_sets];
        for r in current.into_iter().chain(others.iter().copied()) {
            for (c, &x) in clock.iter_mut().zip(&r.clock) {
                *c = (*c).max(x);
            }
        }
        let seq = current.map_or(0, Meta::seq) + 1;
        // Only this local set writes its copy, under compare-and-swap: no other copy can have seen a newer version.
        debug_assert!(clock[ls as usize] < seq, "another copy is ahead of local set {ls}'s own copy");
        clock[ls as usize] = seq;
        let (mut versions, mut folded) = match current {
            Some(r) => (r.versions.clone(), r.folded.clone()),
            None => (Vec::new(), Vec::new()),
        };
        versions.push(VersionDeps { seq, deps });
        let retain = retain.max(1);
        if versions.len() > retain {
            let dropped = versions.len() - retain;
            for v in versions.drain(..dropped) {
                folded.extend(v.deps.into_iter().map(|d| d.vertex));
            }
            folded = compact(folded);
        }
        Record { value, meta: Meta { clock, versions, folded } }
    }

    /// The record without the dependencies `stable` says are stable ([`Meta::without`]).
    pub fn without(mut self, stable: impl Fn(&Vertex) -> bool) -> Record {
        self.meta = self.meta.without(stable);
        self
    }
}

/// Keeps the newest version of each copy: with the implied edge to a copy's previous version, requiring version
/// `s` of a copy requires every earlier one.
pub fn compact(mut vertices: Vec<Vertex>) -> Vec<Vertex> {
    vertices.sort_unstable_by(|a, b| (&a.key, a.ls, b.seq).cmp(&(&b.key, b.ls, a.seq)));
    vertices.dedup_by(|later, first| later.key == first.key && later.ls == first.ls);
    vertices
}

/// [`compact`] for embedded dependencies: the newest version of each copy, at the lowest level it appears.
pub fn compact_deps(mut deps: Vec<Dep>) -> Vec<Dep> {
    deps.sort_unstable_by(|a, b| {
        (&a.vertex.key, a.vertex.ls, b.vertex.seq, a.level).cmp(&(&b.vertex.key, b.vertex.ls, a.vertex.seq, b.level))
    });
    let mut out: Vec<Dep> = Vec::with_capacity(deps.len());
    for d in deps {
        match out.last_mut() {
            Some(last) if last.vertex.key == d.vertex.key && last.vertex.ls == d.vertex.ls => {
                last.level = last.level.min(d.level);
            }
            _ => out.push(d),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(key: &str, ls: LocalSet, seq: u64) -> Vertex {
        Vertex { key: key.as_bytes().to_vec(), ls, seq }
    }

    fn d(key: &str, ls: LocalSet, seq: u64) -> Dep {
        Dep { vertex: v(key, ls, seq), level: 1 }
    }

    #[test]
    fn a_vertex_shows_binary_key_bytes_escaped_and_text_as_text() {
        let proxied = Vertex { key: b"\0\x05bench".to_vec(), ls: 1, seq: 3 };
        assert_eq!(proxied.to_string(), "\\x00\\x05bench@1.3");
        assert_eq!(v("k\u{e9}y", 0, 2).to_string(), "k\u{e9}y@0.2");
        assert_eq!(KeyDisplay(b"a\xffb\\").to_string(), "a\\xffb\\\\");
        assert_eq!(KeyDisplay("x\u{85}".as_bytes()).to_string(), "x\\u{85}");
    }

    #[test]
    fn next_merges_clocks_and_bumps_its_own_entry() {
        let a = Record::next(None, &[], 0, 2, b"a".to_vec(), vec![], 4);
        assert_eq!((a.meta.clock.clone(), a.seq()), (vec![1, 0], 1));
        let b = Record::next(None, &[&a.meta], 1, 2, b"b".to_vec(), vec![], 4);
        assert_eq!(b.meta.clock, vec![1, 1]);
        assert!(b.meta.rank(1) > a.meta.rank(0), "a write that saw another copy ranks above it");
        assert_eq!(b.head().rank(1), b.meta.rank(1), "a head ranks as its meta");
        let a2 = Record::next(Some(&a.meta), &[&b.meta], 0, 2, b"a2".to_vec(), vec![], 4);
        assert_eq!((a2.meta.clock.clone(), a2.seq(), a2.head().seq(0)), (vec![2, 1], 2, 2));
    }

    #[test]
    fn dropped_versions_fold_their_dependencies_and_stay_required() {
        let mut r = Record::next(None, &[], 0, 1, vec![], vec![d("x", 0, 3)], 2);
        r = Record::next(Some(&r.meta), &[], 0, 1, vec![], vec![d("y", 0, 1)], 2);
        r = Record::next(Some(&r.meta), &[], 0, 1, vec![], vec![d("x", 0, 5)], 2);
        r = Record::next(Some(&r.meta), &[], 0, 1, vec![], vec![], 2);
        assert_eq!(r.meta.versions.iter().map(|v| v.seq).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(r.meta.folded, vec![v("x", 0, 3), v("y", 0, 1)]);
        // Version 1's own entry is gone; requiring it requires at least what it required.
        let req: Vec<Vertex> = r.meta.requirements(1).map(|d| d.vertex).collect();
        assert!(req.contains(&v("x", 0, 3)));
        // The newest requires everything older, through the implied edge to the previous version.
        let req: Vec<Vertex> = r.meta.requirements(4).map(|d| d.vertex).collect();
        assert!(req.contains(&v("x", 0, 5)) && req.contains(&v("y", 0, 1)));
    }

    #[test]
    fn a_record_is_stored_as_a_head_without_dependencies_and_a_meta_without_the_value() {
        let r = Record::next(None, &[], 1, 2, vec![7; 1024], vec![d("x", 0, 3), d("y", 1, 9)], 4);
        let encoded = r.encode();
        assert_eq!(Head::decode(&encoded.head).unwrap(), r.head());
        assert_eq!(Meta::decode(&encoded.meta).unwrap(), r.meta);
        assert!(encoded.head.len() < 1024 + 16, "the head holds the clock and the value only: {}", encoded.head.len());
        assert!(encoded.meta.len() < 64, "the meta holds no value: {}", encoded.meta.len());
    }

    #[test]
    fn compact_keeps_the_newest_version_of_each_copy_at_its_lowest_level() {
        let deps = vec![
            Dep { vertex: v("x", 0, 2), level: 2 },
            Dep { vertex: v("x", 0, 5), level: 2 },
            Dep { vertex: v("x", 1, 1), level: 1 },
            Dep { vertex: v("x", 0, 4), level: 1 },
        ];
        assert_eq!(
            compact_deps(deps),
            vec![Dep { vertex: v("x", 0, 5), level: 1 }, Dep { vertex: v("x", 1, 1), level: 1 }]
        );
    }

    #[test]
    fn a_foreign_record_is_a_clear_error() {
        for err in [Head::decode(b"\xff\xff\xff").unwrap_err(), Meta::decode(b"\xff\xff\xff").unwrap_err()] {
            assert!(err.to_string().contains("could not be decoded"), "{err}");
        }
    }
}
