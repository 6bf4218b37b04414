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

use super::Coordinator;
use crate::bugs;
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
            self.refreshing.insert(request, Refresh { sent_us: now_us, snapshot, objects });
        }
    }

    /// The answer to a fetch: returns whether it was a background one (and is cached, if it holds states).
    pub(super) fn on_refreshed(
        &mut self,
        now_us: u64,
        request: u64,
        result: &Result<Vec<Fetched>, RemoteError>,
    ) -> bool {
        let Some(refresh) = self.refreshing.remove(&request) else { return false };
        let checks = bugs::checks_invariants(&self.config);
        let Some(cache) = &mut self.cache else { return true };
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
