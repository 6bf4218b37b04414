//! Geo-replication at a partition: receiving and applying the transactions of other DCs (Cure Alg. 4, with the
//! inbound queues), and shipping this partition's own committed transactions (Cure Alg. 3, through
//! [`crate::replication::Replicator`]) with the acknowledgements of what arrived.

use super::{AfterDurable, Partition, PartitionOutput};
use crate::record::LogRecord;
use crate::replication::ReplicatedTx;
use crate::store::VersionStore;
use crate::{Address, DcId, Envelope, Message, Timestamp};
use causet_crdt::Stamp;

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

    /// Whether this partition logged the remote transaction itself and has not applied it yet (the live path:
    /// it was received and queued when logged); if so, it is no longer pending.
    pub(super) fn take_staged_remote(&mut self, origin: DcId, tx: &ReplicatedTx) -> bool {
        let Some(pending) = self.remote_pending.get_mut(&origin).filter(|p| !p.is_empty()) else { return false };
        let staged = pending.pop_front();
        assert_eq!(
            staged,
            Some((tx.commit.get(origin), tx.tx)),
            "remote records become durable in the order they were logged"
        );
        true
    }

    /// Receives a durable remote transaction this partition did not stage (recovery), and says whether it is new.
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

    /// Makes a remote transaction visible. Called by `apply` once its record is durable. pvc for its origin advances in
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
                // Staged: received, and pending until its record is durable (which holds pvc[origin] below it).
                let lsn = self.persist(LogRecord::Remote { origin, tx: tx.clone() });
                self.remote_pending.entry(origin).or_default().push_back((tx.commit.get(origin), tx.tx));
                self.after_durable.push_back((lsn, AfterDurable::Apply(LogRecord::Remote { origin, tx }, None)));
            }
        }
        self.refresh_pvc(now_us);
    }

    /// Ships committed local transactions (or a heartbeat) to every peer DC, and acknowledges what arrived.
    pub(super) fn replicate(&mut self, now_us: u64) {
        self.refresh_pvc(now_us);
        let local = self.config.dc;
        let from = Address::Peer(local, self.id);
        // Under partial replication this DC tells its ring-mates, whose holders it reads from, its garbage-collection
        // frontier (`Partition::collect`): every ten stable intervals is fresh enough, and costs the WAN little.
        let gc_due = self.topology.placement().partial() && now_us >= self.next_gc_us;
        let gc = self.dc_gc.clone().filter(|_| gc_due);
        if gc.is_some() {
            self.next_gc_us = now_us.saturating_add(10 * self.config.stable_interval_us);
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
            let gc = gc.clone().filter(|_| self.topology.same_ring(local, o.to));
            let msg = Message::Replicate { since: o.since, txs: o.txs, up_to: o.up_to, gc, away };
            self.emit(Envelope { from, to: Address::Peer(o.to, self.id), msg });
        }
        let mut acks = Vec::new();
        for (d, inbound) in self.inbound.iter_mut() {
            acks.push((*d, self.pvc.get(*d), std::mem::take(&mut inbound.gap)));
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
