//! Geo-replication of one partition (Cure Alg. 3, the sender; the receiver's queues live in the partition).
//!
//! A partition ships its committed local transactions, in commit-time order, to the same partition in every other
//! DC. A transaction may leave only once no local transaction can still commit below it (its commit time is at or
//! below pvc[local], Alg. 3 line 4); every message carries that bound (`up_to`), so an empty message is Cure's
//! heartbeat. Each peer acknowledges what it has durably applied; the sender keeps every transaction some peer has
//! not acknowledged and resends from the acknowledged position when a peer falls silent (a cut link, a restart),
//! so a DC that was away catches up by itself (AntidoteDB #420).

use crate::{DcId, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::Effect;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// A committed transaction's effects on one partition, as shipped to the other DCs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicatedTx {
    /// The transaction.
    pub tx: TxId,
    /// Its snapshot: its causal dependencies.
    pub snapshot: VectorClock,
    /// Its commit vector.
    pub commit: VectorClock,
    /// Its effects on this partition.
    pub writes: Vec<(ObjectId, Effect)>,
}

/// What the sender knows of one peer DC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerProgress {
    /// Everything of origin-commit time at or below this is durably applied at the peer.
    pub acked: Timestamp,
    /// Everything at or below this was sent (since the last resend).
    pub sent: Timestamp,
    /// When the peer last acknowledged progress (local µs).
    #[serde(skip)]
    pub last_heard_us: u64,
    /// After a gap: the position the peer reported, to claim in the next message instead of `sent`.
    #[serde(skip)]
    pub resume_from: Option<Timestamp>,
}

/// The sending side of one partition.
#[derive(Clone, Debug)]
pub struct Sender {
    local: DcId,
    /// Committed local transactions, by commit time, not yet acknowledged by every peer.
    log: BTreeMap<(Timestamp, TxId), ReplicatedTx>,
    peers: BTreeMap<DcId, PeerProgress>,
    /// Most transactions in one message.
    batch_max: usize,
    /// Resend from the acknowledged position when a peer has not acknowledged for this long.
    resend_after_us: u64,
}

/// One message to send: to the same partition in `to`.
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    /// The peer DC.
    pub to: DcId,
    /// Everything at or below this was sent in earlier messages: a receiver that has not received that much
    /// lost messages (a cut link, its own crash) and must ask for a resend instead of trusting `up_to`.
    pub since: Timestamp,
    /// Transactions in commit order.
    pub txs: Vec<ReplicatedTx>,
    /// No local transaction will commit at or below this that is not in this message or an earlier one.
    pub up_to: Timestamp,
}

impl Sender {
    /// A sender for DC `local` to the DCs `targets` (the topology's replication targets of its partition).
    pub fn new(local: DcId, targets: Vec<DcId>, resend_after_us: u64) -> Self {
        assert!(!targets.contains(&local), "a DC does not replicate to itself");
        let peers = targets.into_iter().map(|d| (d, PeerProgress::default())).collect();
        Self { local, log: BTreeMap::new(), peers, batch_max: 256, resend_after_us }
    }

    /// Records a local transaction that just became visible here.
    pub fn committed(&mut self, tx: ReplicatedTx) {
        if self.peers.is_empty() {
            return; // Nobody to replicate to.
        }
        let at = tx.commit.get(self.local);
        self.log.insert((at, tx.tx), tx);
    }

    /// Transactions not yet acknowledged by every peer.
    pub fn backlog(&self) -> usize {
        self.log.len()
    }

    /// Peers' progress.
    pub fn peers(&self) -> &BTreeMap<DcId, PeerProgress> {
        &self.peers
    }

    /// A peer acknowledged everything at or below `up_to`; with `gap`, it missed messages and needs everything
    /// after `up_to` again.
    pub fn acked(&mut self, peer: DcId, up_to: Timestamp, gap: bool, now_us: u64) {
        let Some(p) = self.peers.get_mut(&peer) else { return };
        if up_to > p.acked {
            p.acked = up_to;
            p.sent = p.sent.max(up_to);
        }
        if gap {
            // Resend everything after what the peer acknowledged. A peer that restarted may report less than it
            // acknowledged before (its heartbeat progress was not durable); what lies between was durably applied
            // there (an acknowledgement covers only durably applied transactions), so the next message claims
            // only what the peer reports now.
            p.sent = p.acked;
            p.resume_from = Some(up_to.min(p.acked));
        }
        p.last_heard_us = now_us;
        let floor = self.peers.values().map(|p| p.acked).min().unwrap_or(Timestamp::ZERO);
        // Forget what every peer has.
        while self.log.first_key_value().is_some_and(|((at, _), _)| *at <= floor) {
            self.log.pop_first();
        }
    }

    /// The messages to send now, given the local entry of pvc: transactions at or below it are final.
    pub fn poll(&mut self, pvc_local: Timestamp, now_us: u64) -> Vec<Outgoing> {
        let mut out = Vec::new();
        for (dc, p) in self.peers.iter_mut() {
            if p.last_heard_us == 0 {
                p.last_heard_us = now_us;
            }
            if p.sent > p.acked && now_us.saturating_sub(p.last_heard_us) >= self.resend_after_us {
                // Silent peer: go back to what it acknowledged (go-back-N); the receiver drops duplicates.
                p.sent = p.acked;
                p.last_heard_us = now_us;
            }
            let since = p.resume_from.take().map_or(p.sent, |r| r.min(p.sent));
            let mut txs = Vec::new();
            let mut up_to = pvc_local;
            for ((at, _), tx) in self.log.range((p.sent.next(), TxId::MIN)..) {
                if *at > pvc_local {
                    break;
                }
                if txs.len() >= self.batch_max {
                    // The rest next time: promise only up to just below the first one left out.
                    up_to = at.prev();
                    break;
                }
                txs.push(tx.clone());
            }
            // Even with nothing new this goes out: a heartbeat keeps the peer's pvc for this DC moving.
            p.sent = p.sent.max(up_to);
            out.push(Outgoing { to: *dc, since, txs, up_to: p.sent });
        }
        out
    }

    /// What a checkpoint keeps: the unacknowledged transactions and the peers' progress.
    pub fn image(&self) -> (Vec<ReplicatedTx>, Vec<(DcId, Timestamp)>) {
        (self.log.values().cloned().collect(), self.peers.iter().map(|(d, p)| (*d, p.acked)).collect())
    }

    /// Restores from a checkpoint image.
    pub fn restore(&mut self, txs: Vec<ReplicatedTx>, acked: Vec<(DcId, Timestamp)>) {
        for tx in txs {
            self.committed(tx);
        }
        for (dc, at) in acked {
            if let Some(p) = self.peers.get_mut(&dc) {
                p.acked = p.acked.max(at);
                p.sent = p.acked;
            }
        }
    }
}

/// The receiving side's queue for one origin DC (Cure Alg. 4): transactions in the origin's commit order, and the
/// origin's promise that nothing else at or below `up_to` is coming.
///
/// Two transactions of one origin can share a commit time on one partition (each took its commit time from the
/// largest prepare time of *another* partition), so positions in the stream are (commit time, transaction id), the
/// order the sender ships in.
#[derive(Clone, Debug, Default)]
pub struct Inbound {
    /// Received, not yet applied.
    pub queue: VecDeque<ReplicatedTx>,
    /// The last position received (queued or applied).
    pub received: (Timestamp, Option<TxId>),
    /// Everything of the origin at or below this was received (queued or applied): the origin's promise,
    /// trusted only from messages that continue the stream without a gap.
    pub up_to: Timestamp,
    /// A message arrived after a gap: ask the origin to resend.
    pub gap: bool,
}

impl Inbound {
    /// Takes a message in, dropping duplicates of what was received before. A message that does not continue the
    /// stream (the messages before it were lost) is dropped whole and a resend requested. At most `max_queue`
    /// transactions wait: what does not fit is dropped, the origin's promise is trusted only below the first
    /// transaction dropped, and a resend is requested, so a receiver that falls behind its origin holds a bounded
    /// queue and catches up from the origin's log (go-back-N).
    pub fn receive(
        &mut self,
        origin: DcId,
        since: Timestamp,
        txs: Vec<ReplicatedTx>,
        up_to: Timestamp,
        max_queue: usize,
    ) {
        if since > self.up_to {
            self.gap = true;
            return;
        }
        let mut promise = up_to;
        for tx in txs {
            let position = (tx.commit.get(origin), Some(tx.tx));
            if position <= self.received {
                continue;
            }
            if self.queue.len() >= max_queue {
                // Another transaction of the same commit time may follow the last one taken: promise only below.
                promise = promise.min(position.0.prev());
                self.gap = true;
                break;
            }
            self.received = position;
            self.queue.push_back(tx);
        }
        self.up_to = self.up_to.max(promise);
    }

    /// Everything at or below this origin time was received (restore from a checkpoint: nothing below the
    /// checkpoint's pvc is missing).
    pub fn received_through(&mut self, at: Timestamp) {
        // `Some(TxId::MAX)` sorts after every transaction of that time.
        self.received = self.received.max((at, Some(TxId::MAX)));
        self.up_to = self.up_to.max(at);
    }
}

impl TxId {
    /// The smallest id, for range bounds.
    pub const MIN: TxId = TxId { dc: DcId(0), coordinator: crate::CoordinatorId(0), seq: 0 };
    /// The largest id, for range bounds.
    pub const MAX: TxId = TxId { dc: DcId(u16::MAX), coordinator: crate::CoordinatorId(u32::MAX), seq: u64::MAX };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoordinatorId;

    fn tx(seq: u64, at: u64) -> ReplicatedTx {
        let commit = VectorClock::from_entries(vec![Timestamp(0), Timestamp(at)]);
        let id = TxId { dc: DcId(1), coordinator: CoordinatorId(0), seq };
        ReplicatedTx { tx: id, snapshot: VectorClock::zero(2), commit, writes: Vec::new() }
    }

    #[test]
    fn a_full_inbound_queue_drops_the_rest_promises_only_below_it_and_asks_for_a_resend() {
        let origin = DcId(1);
        let mut inbound = Inbound::default();
        // Five transactions, two sharing commit time 20; room for two.
        let txs = vec![tx(1, 10), tx(2, 20), tx(3, 20), tx(4, 30), tx(5, 40)];
        inbound.receive(origin, Timestamp(0), txs.clone(), Timestamp(50), 2);
        assert_eq!(inbound.queue.len(), 2);
        assert!(inbound.gap, "the receiver asks for what it dropped");
        // Transaction 3 shares time 20 with the last one taken: the promise stops below 20.
        assert_eq!(inbound.up_to, Timestamp(19));
        // The origin resends from what was acknowledged; duplicates are skipped, the rest fits once room is made.
        inbound.gap = false;
        inbound.queue.clear();
        inbound.receive(origin, Timestamp(0), txs, Timestamp(50), 100);
        let seqs: Vec<u64> = inbound.queue.iter().map(|t| t.tx.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        assert_eq!(inbound.up_to, Timestamp(50));
        assert!(!inbound.gap);
    }
}
