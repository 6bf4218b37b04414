//! Reads of objects this DC does not hold (partial replication, [`crate::placement`]): where they go, and what
//! happens when the holder does not answer.
//!
//! A transaction reads an object its DC does not hold at one of its holders — the one measured fastest
//! (`nearest`), or with static ring binding the holder in its DC's ring — at the transaction's snapshot (or, for
//! a cached transaction, at the top of its window). That partition serves the read once it has
//! applied everything the snapshot holds, exactly as a partition here does, so the answer is what a full copy here
//! would return: the transaction stays TCC whichever DC answers. This is also why Karma's dynamic ring restriction
//! needs no state here: a session whose clock holds a write that only some rings have yet is served by whichever
//! holder has it, and waits at the others until they do.
//!
//! **Failover to another ring** (Karma's availability under a ring replica cut off or down): a read that its
//! holder has not answered within [`Config::ring_failover_us`](crate::Config), or that it refused (its
//! garbage collection passed the snapshot: a holder waits only for readers that keep reporting, and with static
//! ring binding only for its own ring's), is asked of the next holder (fastest first, or round the rings), and so
//! on; the first answer wins (later ones find the fetch gone). The transaction's deadline still bounds the whole
//! read.

use super::{Coordinator, TxError};
use crate::topology::Topology;
use crate::{Address, DcId, Message, ObjectId};
use causet_crdt::{CrdtType, Op};

/// A read waiting at a holder at another DC (the read itself is rebuilt from `fetches` to be sent again).
#[derive(Clone, Debug)]
pub(super) struct AwayRead {
    /// The object's partition.
    partition: crate::PartitionId,
    /// Every holder of the objects, in the order to try them: this DC's ring's first, then the following rings.
    holders: Vec<DcId>,
    /// How many of `holders` were asked.
    asked: usize,
    /// When the next holder is asked if no answer came.
    again_us: u64,
}

impl Coordinator {
    /// Where a transaction reads `object`: its partition here, or, for an object this DC does not hold (a bucket
    /// placed by rings), the same partition at the holder in this DC's ring.
    pub(super) fn read_address(topology: &Topology, object: &ObjectId, ignore_placement: bool) -> Address {
        let (p, dc) = (topology.partition_of(object), topology.read_dc(object));
        if dc == topology.dc() || ignore_placement {
            Address::Partition(p)
        } else {
            Address::Peer(dc, p)
        }
    }

    /// Refuses an update this DC cannot make because of where its object lives: a bounded counter of a bucket
    /// placed by rings, here where it is not held (its rights are checked against the state at the DC that logs
    /// the update, which has none of it).
    pub(super) fn misplaced(&self, updates: &[(ObjectId, Op)]) -> Option<TxError> {
        let local = self.config.dc;
        let (o, _) =
            updates.iter().find(|(o, _)| o.ty == CrdtType::CounterB && !self.topology.holds_object(local, o))?;
        let holders: Vec<String> = self.topology.dcs_holding(o).iter().map(|d| d.0.to_string()).collect();
        Some(TxError::Misplaced(format!(
            "bounded counter {:?} is in a bucket placed by rings, and DC {} does not hold it: update it at a DC \
             that does ({})",
            String::from_utf8_lossy(&o.key),
            local.0,
            holders.join(", ")
        )))
    }

    /// Notes a read about to be sent to `to`, if that is a holder at another DC, to ask the next ring's if need be;
    /// returns where it goes. With reads from the nearest ring that is the holder measured fastest (`nearest`),
    /// and holders not heard from lately are sent a copy of it, to measure them.
    pub(super) fn note_away(&mut self, now_us: u64, fetch: u64, to: Address, msg: &Message) -> Address {
        let Address::Peer(first, partition) = to else { return to };
        let objects = match msg {
            Message::Read { objects, .. } | Message::Fetch { objects, .. } => objects,
            _ => return to,
        };
        let Some(object) = objects.first() else { return to };
        self.remote_reads += 1;
        let holders = self.holders_in_order(now_us, object, first);
        if self.topology.placement().reads_nearest() {
            for &other in &holders[1..] {
                if self.latencies.probe(now_us, other) {
                    let probe = self.next_fetch;
                    self.next_fetch += 1;
                    self.latencies.sent(now_us, probe, other);
                    self.send(Address::Peer(other, partition), Self::with_request(msg, probe));
                }
            }
        }
        let chosen = holders[0];
        self.latencies.sent(now_us, fetch, chosen);
        let again_us = now_us.saturating_add(self.config.ring_failover_us);
        self.away.insert(fetch, AwayRead { partition, holders, asked: 1, again_us });
        Address::Peer(chosen, partition)
    }

    /// The holders of `object` in the order to ask them, `first` (its own ring's) leading the ring order, the
    /// fastest first with reads from the nearest ring.
    pub(super) fn holders_in_order(&self, now_us: u64, object: &ObjectId, first: DcId) -> Vec<DcId> {
        // Round the rings from this DC's: its own ring's holder first.
        let mut holders = self.topology.dcs_holding(object);
        let at = holders.iter().position(|d| *d == first).unwrap_or(0);
        holders.rotate_left(at);
        if self.topology.placement().reads_nearest() {
            self.latencies.order(now_us, &mut holders);
        }
        holders
    }

    /// `msg` (a read) as read `request`: a probe's copy, whose answer no transaction waits for.
    fn with_request(msg: &Message, request: u64) -> Message {
        let mut copy = msg.clone();
        if let Message::Read { request: r, .. } | Message::Fetch { request: r, .. } = &mut copy {
            *r = request;
        }
        copy
    }

    /// Times an answer from a holder at DC `dc` (a read's, or a probe's).
    pub(super) fn timed_away(&mut self, now_us: u64, dc: DcId, msg: &Message) {
        let (request, refused) = match msg {
            Message::ReadReply { request, result, .. } => (*request, result.is_err()),
            Message::Fetched { request, result, .. } => (*request, result.is_err()),
            _ => return,
        };
        self.latencies.answered(now_us, request, dc, refused, self.config.ring_failover_us);
    }

    /// An answer to fetch `fetch` arrived (`refused`: an error). Returns whether it is to be ignored because the
    /// read went to the next ring's holder instead; otherwise the read is settled.
    pub(super) fn answered_away(&mut self, now_us: u64, fetch: u64, refused: bool) -> bool {
        if refused && self.away.get(&fetch).is_some_and(|a| a.asked < a.holders.len()) {
            self.ask_next_ring(now_us, fetch);
            return true;
        }
        self.away.remove(&fetch);
        false
    }

    /// Asks the next ring's holder the reads their holders have not answered in time (and forgets those whose
    /// transaction gave up).
    pub(super) fn fail_over_reads(&mut self, now_us: u64) {
        let fetches = &self.fetches;
        self.away.retain(|fetch, _| fetches.contains_key(fetch));
        self.latencies.give_up(now_us);
        let due: Vec<u64> = (self.away.iter())
            .filter(|(_, a)| now_us >= a.again_us && a.asked < a.holders.len())
            .map(|(fetch, _)| *fetch)
            .collect();
        for fetch in due {
            self.ask_next_ring(now_us, fetch);
        }
    }

    /// When a read waiting at another DC is next asked elsewhere.
    pub(super) fn next_failover_us(&self) -> Option<u64> {
        self.away.values().filter(|a| a.asked < a.holders.len()).map(|a| a.again_us).min()
    }

    fn ask_next_ring(&mut self, now_us: u64, fetch: u64) {
        let Some(msg) = self.fetch_again(fetch) else {
            self.away.remove(&fetch);
            return;
        };
        let interval = self.config.ring_failover_us;
        let Some(a) = self.away.get_mut(&fetch) else { return };
        let to = a.holders[a.asked];
        a.asked += 1;
        a.again_us = now_us.saturating_add(interval);
        let partition = a.partition;
        self.ring_failovers += 1;
        self.latencies.sent(now_us, fetch, to);
        let to = if to == self.config.dc { Address::Partition(partition) } else { Address::Peer(to, partition) };
        self.send(to, msg);
    }
}
