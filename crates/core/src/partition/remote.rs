//! Geo-replication at a partition: receiving and applying the transactions of other DCs (Cure Alg. 4, with the
//! inbound queues), and shipping this partition's own committed transactions (Cure Alg. 3, through
//! [`crate::replication::Replicator`]) with the acknowledgements of what arrived.

use super::{AfterDurable, Partition, PartitionOutput};
use crate::record::LogRecord;
use crate::replication::ReplicatedTx;
use crate::store::VersionStore;
use crate::{Address, DcId, Envelope, Message, Timestamp};
use causet_crdt::Stamp;
use std::collections::VecDeque;

/// Between transactions, an origin hears this partition's acknowledgement every this many replication intervals
/// ([`crate::replication::Inbound::ack`]), and at least every quarter of `resend_after_us` (500 ms by default,
/// fifty intervals), after which the origin resends what stays unacknowledged.
const ACK_EVERY_INTERVALS: u64 = 10;

impl<S: VersionStore> Partition<S> {
    /// Queues a batch of another DC's transactions and applies what it can.
    pub(super) fn on_replicate(
        &mut self,
        now_us: u64,
        origin: DcId,
        since: Timestamp,
        txs: Vec<ReplicatedTx>,
        up_to: Timestamp,
    ) {
        let Some(inbound) = self.inbound.get_mut(&origin) else { return };
        if txs
            .iter()
            .any(|t| !t.commit.has_dcs(self.config.vector_len()) || !t.snapshot.has_dcs(self.config.vector_len()))
        {
            return; // Malformed: dropped; the sender resends.
        }
        inbound.receive(origin, since, txs, up_to, self.config.max_inbound_queue);
        self.process_inbound(now_us);
        self.serve_waiting(now_us);
    }

    /// A remote transaction this partition logged (and applied when it logged it) is durable: its origin may
    /// now hear it acknowledged.
    pub(super) fn remote_durable(&mut self, origin: DcId) {
        let durable = self.remote_pending.get_mut(&origin).and_then(VecDeque::pop_front);
        assert!(durable.is_some(), "a remote record became durable that was never logged");
    }

    /// The position up to which this partition holds every transaction of `origin` durably: what it acknowledges.
    /// Below pvc by the transactions applied but not yet durable (`process_inbound`).
    pub(super) fn durable_from(&self, origin: DcId) -> Timestamp {
        let pvc = self.pvc.get(origin);
        match self.remote_pending.get(&origin).and_then(VecDeque::front) {
            Some(first) => pvc.min(first.prev()),
            None => pvc,
        }
    }

    /// Receives a durable remote transaction this partition did not log itself (recovery, a follower, a rebuilt
    /// leader), and says whether it is new.
    /// Remote records are logged in the origin's order, contiguously after what the checkpoint holds, so the
    /// stream is complete up to just below this one (another transaction may share its commit time); a resend
    /// brings the rest.
    pub(super) fn receive_logged_remote(&mut self, origin: DcId, tx: &ReplicatedTx) -> bool {
        let Some(inbound) = self.inbound.get_mut(&origin) else { return false };
        let position = (tx.commit.get(origin), Some(tx.tx));
        if position <= inbound.received {
            return false;
        }
        inbound.received = position;
        inbound.up_to = inbound.up_to.max(position.0.prev());
        // Its notices were not logged: a stream started from now on says nothing at or below it.
        if let Some(stream) = &mut self.away {
            stream.saw(origin, position.0);
        }
        true
    }

    /// Makes a remote transaction visible: on the live path when its record is logged (`process_inbound`), else by
    /// `apply` for a record this partition did not log. pvc for its origin advances in
    /// [`Partition::refresh_pvc`]: Cure Alg. 4 line 17 sets pvc[i] = T.c[i], which assumes commit times unique per
    /// origin; here another transaction of the same origin may share T's commit time and still be queued, so pvc[i]
    /// stops just below the first transaction not yet applied.
    pub(super) fn apply_remote(&mut self, origin: DcId, tx: ReplicatedTx) {
        let position = (tx.commit.get(origin), tx.tx);
        let last = self.remote_applied.entry(origin).or_insert(position);
        *last = (*last).max(position);
        let stamp = Stamp { time: tx.commit.sum(), tx: tx.tx.tag() };
        // The origin sends only what this DC holds; anything else (an origin placing differently) is left out.
        for (id, effect) in tx.writes {
            if self.holds(&id) {
                self.notice_write(origin, &id, tx.commit.get(origin));
                self.store.insert(&id, &tx.commit, stamp, effect);
            }
        }
    }

    /// Cure Alg. 4 ProcessQueue: applies the head of each origin's queue once its dependencies are here.
    pub(super) fn process_inbound(&mut self, now_us: u64) {
        let local = self.config.dc;
        let origins: Vec<DcId> = self.inbound.keys().copied().collect();
        for origin in origins {
            loop {
                let inbound = self.inbound.get_mut(&origin).expect("origins come from the map");
                let Some(head) = inbound.queue.front() else { break };
                // The dependencies from the origin itself are the queue order; every other entry must be here.
                // The local entry is a clock: a hybrid clock moves up to it.
                self.clock.observe(head.snapshot.get(local));
                let mut needed = head.snapshot.clone();
                needed.set(origin, Timestamp::ZERO);
                self.refresh_pvc(now_us);
                if !self.config.protocol.rules().may_apply_remote(&needed, &self.pvc) {
                    break;
                }
                let inbound = self.inbound.get_mut(&origin).expect("origins come from the map");
                let tx = inbound.queue.pop_front().expect("head exists");
                // Logged, and visible at once; acknowledged to the origin only once durable (the pending position
                // holds the acknowledgement below it, `durable_from`). The transaction is durable at its origin,
                // which resends everything past what this DC acknowledged: if this record is lost (a crash, a
                // deposed leader), the transaction comes again, and meanwhile a read at a snapshot that covered it
                // waits for it here, as every read waits for pvc. Cure applies a remote transaction on receipt; a
                // DC that waited for its own log write (and Raft round) before making it visible added that to the
                // remote visibility delay (docs/cure-in-causet.md, departure 5).
                let lsn = self.persist(LogRecord::Remote { origin, tx: tx.clone() });
                self.remote_pending.entry(origin).or_default().push_back(tx.commit.get(origin));
                self.after_durable.push_back((lsn, AfterDurable::RemoteDurable(origin)));
                self.apply_remote(origin, tx);
            }
        }
        self.refresh_pvc(now_us);
    }

    /// Ships committed local transactions (or a heartbeat) to every peer DC, and acknowledges what arrived.
    pub(super) fn replicate(&mut self, now_us: u64) {
        self.refresh_pvc(now_us);
        let local = self.config.dc;
        let from = Address::Peer(local, self.id);
        // Under partial replication this DC tells the holders it may read from (its ring-mates, and with reads from
        // the nearest ring the other rings' holders of this partition) its garbage-collection frontier
        // (`Partition::collect`): every `GC_REPORT_INTERVALS` stable intervals is fresh enough, and costs the WAN little.
        let gc_due = self.topology.placement().partial() && now_us >= self.next_gc_us;
        let gc = self.dc_gc.clone().filter(|_| gc_due);
        if gc.is_some() {
            self.next_gc_us = now_us.saturating_add(super::GC_REPORT_INTERVALS * self.config.stable_interval_us);
        }
        let notices = self.away.is_some();
        for mut o in self.replicator.poll(self.pvc.get(local), self.durable_lsn, now_us) {
            // Each peer is sent the writes to objects it holds (all of them, unless buckets are placed by rings),
            // and every transaction's commit time: pvc there moves past it (`Topology::replication_targets`). With
            // caches, a notice of each write it does not hold (`crate::away`).
            let mut away = Vec::new();
            for (i, tx) in o.txs.iter_mut().enumerate() {
                tx.writes.retain(|(id, _)| {
                    let held = self.topology.holds_object(o.to, id);
                    if !held && notices {
                        away.push((i as u32, id.fingerprint()));
                    }
                    held
                });
                // What each write weighs on the wire, counted without encoding it.
                let bytes: usize =
                    tx.writes.iter().map(|w| postcard::experimental::serialized_size(w).unwrap_or(0)).sum();
                self.shipped.0 += tx.writes.len() as u64;
                self.shipped.1 += bytes as u64;
            }
            // Notices are shipped bytes too (counted as such, not as writes).
            self.shipped.1 +=
                away.iter().map(|n| postcard::experimental::serialized_size(n).unwrap_or(0) as u64).sum::<u64>();
            let gc = gc.clone().filter(|_| self.topology.reads_from(o.to, self.id));
            let msg = Message::Replicate { since: o.since, txs: o.txs, up_to: o.up_to, gc, away };
            self.emit(Envelope { from, to: Address::Peer(o.to, self.id), msg });
        }
        let mut acks = Vec::new();
        let origins: Vec<DcId> = self.inbound.keys().copied().collect();
        let every_us =
            (ACK_EVERY_INTERVALS * self.config.replication_interval_us).min(self.config.resend_after_us / 4).max(1);
        for d in origins {
            let durable = self.durable_from(d);
            let inbound = self.inbound.get_mut(&d).expect("origins come from the map");
            if let Some(gap) = inbound.ack(durable, now_us, every_us, self.config.resend_after_us) {
                acks.push((d, durable, gap));
            }
        }
        for (origin, up_to, gap) in acks {
            let msg = Message::ReplicateAck { up_to, gap };
            self.emit(Envelope { from, to: Address::Peer(origin, self.id), msg });
        }
        self.ask_log_read();
    }

    /// Asks the driver for the next read of the log, if the replicator wants one.
    pub(super) fn ask_log_read(&mut self) {
        if let Some(after) = self.replicator.next_read() {
            self.outputs.push_back(PartitionOutput::ReadLog { after });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Partition, PartitionOutput};
    use crate::record::{LogRecord, Lsn};
    use crate::replication::ReplicatedTx;
    use crate::store::VersionStore;
    use crate::{Address, ClockKind, Config, CoordinatorId, DcId, Message, ObjectId, PartitionId, Timestamp, TxId};
    use crate::{Envelope, VectorClock};
    use causet_crdt::{Crdt, CrdtType, EffectCtx, Op, Value};

    const PEER: DcId = DcId(1);

    fn at(entries: [u64; 2]) -> VectorClock {
        VectorClock::from_entries(entries.iter().map(|m| Timestamp::from_micros(*m)).collect())
    }

    /// Runs the partition's timers at `now` and returns the acknowledged position it sent its peer, if any.
    fn ack(p: &mut Partition, now: u64) -> Option<Timestamp> {
        acks(p, now).last().map(|(up_to, _)| *up_to)
    }

    #[test]
    fn a_remote_transaction_is_visible_once_logged_and_acknowledged_only_once_durable() {
        // A physical clock keeps no clock bound: messages leave without a durable record of their own.
        let mut config = Config::new(2, DcId(0), 1);
        config.clock = ClockKind::Physical;
        let mut p = Partition::new(PartitionId(0), config, 1_000);
        let t = TxId { dc: PEER, coordinator: CoordinatorId(0), seq: 1 };
        let id = ObjectId::new("z", "b", CrdtType::SetAw);
        let effect = Crdt::new(CrdtType::SetAw)
            .generate(&Op::Add(vec![b"r".to_vec()]), &mut EffectCtx::new(t.tag(), 0))
            .expect("fits");
        let commit = at([0, 500]);
        let remote =
            ReplicatedTx { tx: t, snapshot: at([0, 0]), commit: commit.clone(), writes: vec![(id.clone(), effect)] };
        let msg = Message::Replicate {
            since: Timestamp::ZERO,
            txs: vec![remote],
            up_to: Timestamp::from_micros(600),
            gc: None,
            away: Vec::new(),
        };
        p.handle_message(1_500, Address::Peer(PEER, PartitionId(0)), msg);
        let mut logged = None;
        while let Some(out) = p.poll_output() {
            if let PartitionOutput::Persist { lsn, record: LogRecord::Remote { .. } } = out {
                logged = Some(lsn);
            }
        }
        let logged: Lsn = logged.expect("the remote transaction is logged");

        // Not durable yet, and visible: pvc covers it, and a read at a snapshot that contains it sees its write.
        assert!(p.pvc().get(PEER) >= commit.get(PEER), "pvc passes the logged transaction");
        let value = p.store.read(&id, &at([1_400, 600])).expect("readable").value();
        assert!(
            matches!(&value, Value::Set(s) if s.contains(&b"r".to_vec())),
            "the remote write is visible: {value:?}"
        );
        // Acknowledged only below it: the origin resends it if this record is lost.
        let acked = ack(&mut p, 3_000).expect("an acknowledgement each replication interval");
        assert!(acked < commit.get(PEER), "acknowledged {acked} before its record ({:?}) is durable", logged);

        p.handle_persisted(3_100, logged);
        let acked = ack(&mut p, 5_000).expect("an acknowledgement");
        assert!(acked >= Timestamp::from_micros(600), "durable: acknowledged up to the origin's promise ({acked})");
    }

    /// All acknowledgements a partition sends its peer when its timers run at `now`: (up to, gap).
    fn acks(p: &mut Partition, now: u64) -> Vec<(Timestamp, bool)> {
        p.handle_timeout(now);
        std::iter::from_fn(|| p.poll_output())
            .filter_map(|out| match out {
                PartitionOutput::Send(Envelope { msg: Message::ReplicateAck { up_to, gap }, .. }) => Some((up_to, gap)),
                _ => None,
            })
            .collect()
    }

    fn heartbeat(since: u64, up_to: u64) -> Message {
        Message::Replicate {
            since: Timestamp::from_micros(since),
            txs: Vec::new(),
            up_to: Timestamp::from_micros(up_to),
            gc: None,
            away: Vec::new(),
        }
    }

    #[test]
    fn heartbeats_alone_are_acknowledged_every_ten_intervals_and_a_gap_at_once() {
        let mut config = Config::new(2, DcId(0), 1);
        config.clock = ClockKind::Physical;
        let interval = config.replication_interval_us;
        let mut p = Partition::new(PartitionId(0), config, 1_000);
        let from = Address::Peer(PEER, PartitionId(0));
        // The peer's heartbeats every interval for 100 intervals, this partition's timers after each.
        let mut sent = Vec::new();
        for i in 1..=100u64 {
            let now = 1_000 + i * interval;
            p.handle_message(now, from, heartbeat((i - 1) * interval, i * interval));
            sent.extend(acks(&mut p, now + 1));
        }
        assert!((9..=11).contains(&sent.len()), "one acknowledgement per ten intervals, not {}", sent.len());
        assert!(sent.windows(2).all(|w| w[0].0 < w[1].0), "each acknowledges more than the last: {sent:?}");
        assert!(sent.iter().all(|(_, gap)| !gap));

        // A message that does not continue the stream: the peer hears of the gap at the next interval.
        let now = 1_000 + 101 * interval;
        p.handle_message(now, from, heartbeat(500 * interval, 501 * interval));
        let now = now + 1;
        let after_gap = acks(&mut p, now);
        assert_eq!(after_gap.len(), 1, "the gap is reported at once");
        assert!(after_gap[0].1, "as a gap");
        assert!(acks(&mut p, now + interval).is_empty(), "and once");
    }
}
