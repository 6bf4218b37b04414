//! Cached states of objects held at other DCs fetched again in the background when a write makes them stale (the
//! lease cache's `refresh`, [`crate::cache`]).
//!
//! A notice of a write closes the cache's entry of the object ([`Cache::learn_away`](crate::cache::Cache)); when
//! transactions had read that entry, the object is likely read again soon, and the next transaction to read it
//! would wait a round trip to another DC for the new state. Instead this coordinator asks for it at once, at its
//! stable snapshot (which holds the write: the notice came with it), from the holder a read would go to, all of a
//! partition's stale objects in one fetch. The answer is cached as any fetched state is, with its box; nothing
//! waits for it, and one that does not come is forgotten after [`REFRESH_GIVE_UP_US`] (the next transaction then
//! fetches the object itself). This is Karma's write propagation to caches by updates rather than invalidations
//! (the paper's §4.3 names both and builds invalidations), only for objects read here, and pulled by the cache
//! rather than pushed by the holder, which keeps no record of who caches what.
//!
//! A transaction whose read misses while such a fetch of the object is in flight waits for it instead of fetching
//! the object itself (it *joins* it): the answer comes sooner than a fetch sent now, and costs the holder nothing
//! more. It joins only a fetch at a snapshot at or below the one it fetches at, with no write of the object known
//! in between: otherwise the answer would be cut below where the read needs it. When the answer comes, the read
//! is served from the cache if the state is exact at the snapshot the transaction's other reads are fetched at
//! (`cached_at`, the top of its window when it read: every box of a transaction's reads holds it, so its window
//! never closes); otherwise, or if no answer came within `ring_failover_us` of the background fetch (when a read
//! would ask the next ring's holder), the read is sent as any other.

use super::{Coordinator, Phase};
use crate::bugs::{self, Bug};
use crate::cache::Cache;
use crate::message::{Fetched, RemoteError};
use crate::{Address, Message, ObjectId, TxId, VectorClock};
use std::collections::BTreeMap;

/// A background fetch unanswered for this long is forgotten.
pub const REFRESH_GIVE_UP_US: u64 = 5_000_000;

/// A background fetch in flight.
#[derive(Debug)]
pub(super) struct Refresh {
    sent_us: u64,
    snapshot: VectorClock,
    objects: Vec<ObjectId>,
    /// Transactions' reads (by fetch number, each of one of `objects`) waiting for the answer.
    joined: Vec<u64>,
}

impl Coordinator {
    /// Fetches again the objects whose cached states writes closed and transactions had read.
    pub(super) fn refresh_stale(&mut self, now_us: u64) {
        let Some(cache) = &mut self.cache else { return };
        let stale = cache.take_stale();
        let mut by_partition: BTreeMap<Address, Vec<ObjectId>> = BTreeMap::new();
        for object in stale {
            by_partition.entry(Self::read_address(&self.topology, &object, false)).or_default().push(object);
        }
        for (to, objects) in by_partition {
            let Address::Peer(first, partition) = to else {
                // Held here (the cache keeps only objects held elsewhere when it refreshes): nothing to save.
                objects.into_iter().for_each(|o| self.cache.as_mut().expect("checked").refreshed(now_us, o, None));
                continue;
            };
            let dc = self.holders_in_order(now_us, &objects[0], first)[0];
            let request = self.next_fetch;
            self.next_fetch += 1;
            self.latencies.sent(now_us, request, dc);
            // No transaction: the answer is matched by its request number, and the transaction id only echoed.
            let tx = TxId { dc: self.config.dc, coordinator: self.id, seq: u64::MAX };
            let snapshot = self.stable.clone();
            let msg = Message::Fetch { tx, request, snapshot: snapshot.clone(), objects: objects.clone() };
            self.send(Address::Peer(dc, partition), msg);
            for object in &objects {
                self.refresh_of.insert(object.clone(), request);
            }
            self.refreshing.insert(request, Refresh { sent_us: now_us, snapshot, objects, joined: Vec::new() });
        }
    }

    /// The background fetch of `object` a read that missed, of a transaction that fetches at `at`, may wait for:
    /// one in flight, sent less than `ring_failover_us` ago, at a snapshot at or below `at` with no write of the
    /// object known between the two (else its answer would not be exact at `at`).
    pub(super) fn joinable(
        (refresh_of, refreshing): (&BTreeMap<ObjectId, u64>, &BTreeMap<u64, Refresh>),
        cache: &Cache,
        (failover_us, now_us): (u64, u64),
        object: &ObjectId,
        at: &VectorClock,
    ) -> Option<u64> {
        let request = *refresh_of.get(object)?;
        let refresh = refreshing.get(&request)?;
        let recent = now_us < refresh.sent_us.saturating_add(failover_us);
        let below = refresh.snapshot.le(at) && !cache.written_between(object, &refresh.snapshot, at);
        (recent && below).then_some(request)
    }

    /// Has read `fetch` (of one object, for a transaction) wait for background fetch `request` ([`Self::joinable`]).
    pub(super) fn join(&mut self, request: u64, fetch: u64) {
        self.refreshing.get_mut(&request).expect("joinable").joined.push(fetch);
        if let Some(cache) = &mut self.cache {
            cache.count_joined();
        }
    }

    /// Serves read `fetch`, which waited for a background fetch now answered (or given up), from the cache if that
    /// is exact where the transaction's other reads are; otherwise sends it.
    fn settle_joined(&mut self, now_us: u64, fetch: u64) {
        let Some((id, objects, Some(at))) = self.fetches.get(&fetch).cloned() else { return };
        let Some(tx) = self.txs.get_mut(&id) else { return };
        let Phase::Fetching { outstanding, .. } = &tx.phase else { return };
        if !outstanding.contains(&fetch) {
            return;
        }
        if let (Some(window), Some(cache)) = (&mut tx.window, &mut self.cache) {
            if let Some(state) = cache.read_joined(now_us, &objects[0], window, &at) {
                return self.on_read_reply(now_us, id, fetch, Ok(vec![state]));
            }
        }
        let Some(msg) = self.fetch_again(fetch) else { return };
        let to = Self::read_address(&self.topology, &objects[0], bugs::has(&self.config, Bug::ReadsIgnorePlacement));
        let to = self.note_away(now_us, fetch, to, &msg);
        self.send(to, msg);
    }

    /// Sends the reads that waited for background fetches sent `ring_failover_us` ago and still unanswered.
    pub(super) fn unjoin_late(&mut self, now_us: u64) {
        let failover_us = self.config.ring_failover_us;
        let mut late = Vec::new();
        for r in self.refreshing.values_mut() {
            if now_us >= r.sent_us.saturating_add(failover_us) {
                late.append(&mut r.joined);
            }
        }
        for fetch in late {
            self.settle_joined(now_us, fetch);
        }
    }

    /// When reads waiting for a background fetch are next sent themselves ([`Self::unjoin_late`]).
    pub(super) fn next_unjoin_us(&self) -> Option<u64> {
        let failover_us = self.config.ring_failover_us;
        (self.refreshing.values().filter(|r| !r.joined.is_empty())).map(|r| r.sent_us.saturating_add(failover_us)).min()
    }

    /// The answer to a fetch: returns whether it was a background one (and is cached, if it holds states).
    pub(super) fn on_refreshed(
        &mut self,
        now_us: u64,
        request: u64,
        result: &Result<Vec<Fetched>, RemoteError>,
    ) -> bool {
        let Some(refresh) = self.refreshing.remove(&request) else { return false };
        for object in &refresh.objects {
            if self.refresh_of.get(object) == Some(&request) {
                self.refresh_of.remove(object);
            }
        }
        let checks = bugs::checks_invariants(&self.config);
        if let Some(cache) = &mut self.cache {
            let fetched = match result {
                Ok(fetched) if fetched.len() == refresh.objects.len() => fetched.iter().map(Some).collect(),
                _ => vec![None; refresh.objects.len()],
            };
            for (object, f) in refresh.objects.into_iter().zip(fetched) {
                // Every box holds the snapshot fetched at.
                let exact = f.filter(|f| f.lo.le(&refresh.snapshot) && refresh.snapshot.le(&f.hi));
                debug_assert!(!checks || exact.is_some() == f.is_some(), "a fetched box misses its snapshot");
                cache.refreshed(now_us, object, exact.cloned());
            }
        }
        for fetch in refresh.joined {
            self.settle_joined(now_us, fetch);
        }
        true
    }

    /// Forgets background fetches unanswered for [`REFRESH_GIVE_UP_US`].
    pub(super) fn forget_refreshes(&mut self, now_us: u64) {
        let late: Vec<u64> = (self.refreshing.iter())
            .filter(|(_, r)| now_us.saturating_sub(r.sent_us) >= REFRESH_GIVE_UP_US)
            .map(|(request, _)| *request)
            .collect();
        for request in late {
            self.on_refreshed(now_us, request, &Err(RemoteError::Timeout));
        }
    }
}
