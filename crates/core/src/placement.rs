//! Which DCs hold which objects: full replication, or Karma's rings (partial geo-replication).
//!
//! DCs are grouped into **rings** of nearby DCs; each ring holds one full copy of a `rings` bucket, so an object
//! of such a bucket has exactly one replica per ring and the replication factor is the number of rings, not of
//! DCs (Karma, Middleware 2023: 8 DCs in 3 rings keep 3 copies). Every other bucket is `full`: every DC holds it,
//! as without rings.
//!
//! **The placement function.** An object's partition is a stable hash of its bucket and key
//! ([`crate::ObjectId::partition`], the same at every DC). Inside a ring `R = [d0, d1, …]` (in configuration
//! order), partition `p` of a `rings` bucket lives at `R[p mod |R|]`: partitions are the points of the ring's
//! consistent hashing, dealt round-robin so that the DCs of a ring share the data evenly. Every DC computes any
//! object's replicas from the configuration alone, without asking anyone.
//!
//! A DC that does not hold an object still runs the object's partition (it holds the partition's `full` objects
//! and its own transactions' writes until every holder has them, `replication`): writes commit locally, as every
//! write in Causet does, and reads go to a holder (`coordinator`).

use crate::{DcId, PartitionId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How a cluster places its buckets: which buckets are placed by rings, and the rings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Rings of nearby DCs, each DC in exactly one; empty: no rings, every bucket is replicated at every DC.
    pub rings: Vec<Vec<DcId>>,
    /// The buckets placed by rings (one replica per ring); every other bucket is at every DC.
    pub ring_buckets: BTreeSet<Vec<u8>>,
    /// Which ring's holder a DC reads an object it does not hold from.
    #[serde(default)]
    pub read_from: RingChoice,
}

/// Which ring's holder a DC reads an object it does not hold from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RingChoice {
    /// The holder its reads have found fastest lately, measured (Karma's reads from the nearest ring): its own
    /// ring's until another is measured faster; a holder that is cut off or congested is left for another ring's.
    #[default]
    Nearest,
    /// Always its own ring's holder, other rings' only when that one does not answer (static ring binding,
    /// Karma's COPS-PR baseline).
    Own,
}

/// How one bucket is placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketPlacement {
    /// Every DC holds the bucket (the default).
    Full,
    /// One replica per ring.
    Rings,
}

impl Placement {
    /// Full replication of every bucket.
    pub fn full() -> Self {
        Self::default()
    }

    /// `rings` over the DCs, with `buckets` placed by them.
    pub fn rings(rings: Vec<Vec<DcId>>, buckets: impl IntoIterator<Item = Vec<u8>>) -> Self {
        Self { rings, ring_buckets: buckets.into_iter().collect(), read_from: RingChoice::default() }
    }

    /// The same placement, reading objects held elsewhere from `choice`'s ring.
    pub fn reading_from(self, choice: RingChoice) -> Self {
        Self { read_from: choice, ..self }
    }

    /// [`Placement::rings`] with the rings given as DC indices (as configuration files write them).
    pub fn of_indices(rings: &[Vec<u16>], buckets: impl IntoIterator<Item = Vec<u8>>) -> Self {
        Self::rings(rings.iter().map(|r| r.iter().copied().map(DcId).collect()).collect(), buckets)
    }

    /// Checks the placement against a cluster of `dcs` DCs: every DC in exactly one ring (when there are rings),
    /// and no ring bucket without rings.
    pub fn validate(&self, dcs: u16) -> Result<(), String> {
        if self.rings.is_empty() {
            if !self.ring_buckets.is_empty() {
                return Err("buckets are placed by rings, but no rings are configured".into());
            }
            return Ok(());
        }
        let mut seen = vec![false; usize::from(dcs)];
        for ring in &self.rings {
            if ring.is_empty() {
                return Err("a ring needs at least one DC".into());
            }
            for dc in ring {
                let Some(slot) = seen.get_mut(usize::from(dc.0)) else {
                    return Err(format!("ring DC {} is not a DC of this cluster (it has {dcs})", dc.0));
                };
                if std::mem::replace(slot, true) {
                    return Err(format!("DC {} is in more than one ring", dc.0));
                }
            }
        }
        if let Some(missing) = seen.iter().position(|s| !s) {
            return Err(format!("DC {missing} is in no ring: every DC must be in exactly one"));
        }
        Ok(())
    }

    /// Whether any bucket is placed by rings.
    pub fn partial(&self) -> bool {
        !self.rings.is_empty() && !self.ring_buckets.is_empty()
    }

    /// Whether DCs read objects they do not hold from the holder measured fastest ([`RingChoice::Nearest`]): some
    /// bucket is placed by rings, and `read_from` says so.
    pub fn reads_nearest(&self) -> bool {
        self.partial() && self.read_from == RingChoice::Nearest
    }

    /// How `bucket` is placed.
    pub fn of_bucket(&self, bucket: &[u8]) -> BucketPlacement {
        if !self.rings.is_empty() && self.ring_buckets.contains(bucket) {
            BucketPlacement::Rings
        } else {
            BucketPlacement::Full
        }
    }

    /// The ring `dc` belongs to (`None` without rings).
    pub fn ring_of(&self, dc: DcId) -> Option<usize> {
        self.rings.iter().position(|r| r.contains(&dc))
    }

    /// Where partition `p` of a `rings` bucket lives in ring `ring`.
    pub fn home_in_ring(&self, ring: usize, p: PartitionId) -> DcId {
        let r = &self.rings[ring];
        r[(p.0 as usize) % r.len()]
    }

    /// Whether `dc` holds partition `p`'s objects of the buckets placed by rings.
    pub fn holds_ring_share(&self, dc: DcId, p: PartitionId) -> bool {
        self.ring_of(dc).is_some_and(|r| self.home_in_ring(r, p) == dc)
    }

    /// Whether `dc` holds partition `p`'s objects of `bucket`.
    pub fn holds(&self, dc: DcId, bucket: &[u8], p: PartitionId) -> bool {
        match self.of_bucket(bucket) {
            BucketPlacement::Full => true,
            BucketPlacement::Rings => self.holds_ring_share(dc, p),
        }
    }

    /// The DCs holding partition `p`'s objects of `bucket`, of `dcs` DCs: every DC, or one per ring (in ring
    /// order).
    pub fn holders(&self, dcs: u16, bucket: &[u8], p: PartitionId) -> Vec<DcId> {
        match self.of_bucket(bucket) {
            BucketPlacement::Full => (0..dcs).map(DcId).collect(),
            BucketPlacement::Rings => (0..self.rings.len()).map(|r| self.home_in_ring(r, p)).collect(),
        }
    }

    /// Where `dc` reads partition `p`'s objects of `bucket`: itself if it holds them, else the holder in its own
    /// ring (rings group nearby DCs, so that is the nearest copy).
    pub fn read_from(&self, dc: DcId, bucket: &[u8], p: PartitionId) -> DcId {
        if self.holds(dc, bucket, p) {
            return dc;
        }
        let ring = self.ring_of(dc).expect("a DC that does not hold a rings bucket is in a ring");
        self.home_in_ring(ring, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eight_dcs() -> Placement {
        Placement::of_indices(&[vec![0, 1, 2], vec![3, 4], vec![5, 6, 7]], [b"r".to_vec()])
    }

    #[test]
    fn a_rings_object_has_one_replica_per_ring_and_full_ones_are_everywhere() {
        let pl = eight_dcs();
        pl.validate(8).expect("valid");
        for p in (0..24).map(PartitionId) {
            let holders = pl.holders(8, b"r", p);
            assert_eq!(holders.len(), 3);
            for (ring, h) in holders.iter().enumerate() {
                assert_eq!(pl.ring_of(*h), Some(ring));
            }
            for dc in (0..8).map(DcId) {
                assert_eq!(pl.holds(dc, b"r", p), holders.contains(&dc));
                assert!(pl.holds(dc, b"f", p), "a full bucket is everywhere");
                let from = pl.read_from(dc, b"r", p);
                assert!(holders.contains(&from));
                assert_eq!(pl.ring_of(from), pl.ring_of(dc), "reads stay in the reader's ring");
            }
            assert_eq!(pl.holders(8, b"f", p).len(), 8);
        }
    }

    #[test]
    fn the_dcs_of_a_ring_share_its_partitions_evenly() {
        let pl = eight_dcs();
        let mut count = [0u32; 8];
        for p in (0..24).map(PartitionId) {
            for h in pl.holders(8, b"r", p) {
                count[usize::from(h.0)] += 1;
            }
        }
        assert_eq!(count, [8, 8, 8, 12, 12, 8, 8, 8]);
    }

    #[test]
    fn bad_rings_are_refused_with_the_reason() {
        let check = |rings: &[Vec<u16>]| Placement::of_indices(rings, [b"r".to_vec()]).validate(3);
        assert!(check(&[vec![0, 1], vec![2]]).is_ok());
        assert_eq!(check(&[vec![0, 1]]), Err("DC 2 is in no ring: every DC must be in exactly one".into()));
        assert_eq!(check(&[vec![0, 1], vec![1, 2]]), Err("DC 1 is in more than one ring".into()));
        assert!(check(&[vec![0, 1, 2], vec![3]]).unwrap_err().contains("not a DC of this cluster"));
        assert!(check(&[vec![0, 1, 2], vec![]]).unwrap_err().contains("at least one DC"));
        let no_rings = Placement::rings(Vec::new(), [b"r".to_vec()]).validate(3);
        assert!(no_rings.unwrap_err().contains("no rings"));
        assert_eq!(Placement::full().validate(3), Ok(()));
        assert!(!Placement::full().partial());
    }
}
