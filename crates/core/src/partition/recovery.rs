//! Checkpoints, and rebuilding a partition from a checkpoint and the log records after it.

use super::{Checkpoint, Partition, PreparedImage};
use crate::record::{LogRecord, Lsn};
use crate::store::VersionStore;
use crate::{DcId, Timestamp};

impl<S: VersionStore> Partition<S> {
    /// Rebuilds a partition from a complete checkpoint (every object) and the log records after it: the body of
    /// [`Partition::restore`], from the new partition `p`. The checkpoint's images of state are loaded as they are; every record, and what
    /// the checkpoint holds of records not yet applied, goes through [`Partition::apply`], the path the live
    /// partition's records took when they became durable.
    pub(super) fn rebuild(
        mut p: Self,
        now_us: u64,
        checkpoint: Option<Checkpoint>,
        tail: impl IntoIterator<Item = (Lsn, LogRecord)>,
    ) -> Self {
        let mut floor = Timestamp::ZERO;
        let local = p.config.dc;
        if let Some(c) = checkpoint {
            p.last_lsn = c.lsn;
            floor = c.clock;
            p.bound.recovered(c.clock_bound);
            p.store.restore_frontier(c.frontier);
            for (object, image) in c.objects {
                p.store.load(object, image);
            }
            for (tx, commit) in c.recent_commits {
                p.remember_commit(tx, commit);
            }
            p.decided.restore(c.decided);
            // Nothing committed before the checkpoint lies above `committed_through`: the replicator reads those it
            // still ships back from the log, which the checkpoint kept from `keep_log_from`. (Not the checkpoint's
            // clock: a commit time is the largest prepare time of the transaction's partitions, which a physical
            // clock here need not have reached.)
            p.replicator.restore(c.peer_acked, c.committed_through, c.keep_log_from);
            if let Some(pvc) = c.pvc.filter(|v| v.has_dcs(p.config.vector_len())) {
                for (dc, inbound) in p.inbound.iter_mut() {
                    inbound.received_through(pvc.get(*dc));
                }
                let local_entry = p.pvc.get(local);
                p.pvc = pvc;
                p.pvc.set(local, local_entry);
            }
            for (origin, at, tx) in c.remote_applied {
                if let Some(inbound) = p.inbound.get_mut(&origin) {
                    inbound.received = inbound.received.max((at, Some(tx)));
                }
                p.remote_applied.insert(origin, (at, tx));
            }
            // What the checkpoint holds of records not yet applied when it was taken goes through `apply` like the
            // log tail: the pending remote transactions, and the prepared transactions with their decided commits.
            for (origin, tx) in c.remote_pending {
                p.apply(now_us, c.lsn, LogRecord::Remote { origin, tx });
            }
            for tx in c.fenced {
                p.apply(now_us, c.lsn, LogRecord::Fenced { tx });
            }
            for PreparedImage { tx, snapshot, prepare_time, writes, commit, fenced, lsn } in c.prepared {
                floor = floor.max(prepare_time);
                // The mark came with the checkpoint's memory.
                let oldest_open = 0;
                p.apply(now_us, lsn, LogRecord::Prepared { tx, snapshot, prepare_time, writes, oldest_open });
                if fenced {
                    p.apply(now_us, lsn, LogRecord::Fenced { tx });
                }
                if let Some(commit) = commit {
                    p.apply(now_us, lsn, LogRecord::Committed { tx, commit });
                }
            }
        }
        for (lsn, record) in tail {
            if lsn <= p.last_lsn {
                continue; // Covered by the checkpoint (truncation may lag behind it).
            }
            p.last_lsn = lsn;
            if let Some(exposed) = exposed_time(&record, local) {
                floor = floor.max(exposed);
            }
            p.apply(now_us, lsn, record);
        }
        p.durable_lsn = p.last_lsn;
        if p.replicated {
            // A replica's clock starts when it takes the lead, above everything it applied exposed
            // (`Partition::take_lead`); until then it only applies.
            p.exposed = p.exposed.max(floor).max(p.bound.logged());
            return p;
        }
        // Before the crash this partition may have exposed (in pvc reports and reads) timestamps up to its clock,
        // which a hybrid clock may have pushed past physical time; none above the largest durable clock bound
        // (`bound.rs`). Never issue a prepare time at or below those: start above both the log and the bound.
        floor = floor.max(p.bound.logged());
        p.clock.raise_floor(floor);
        p.refresh_pvc(now_us);
        p.renew_bound();
        p
    }

    /// The body of [`Partition::take_checkpoint`].
    pub(super) fn checkpoint(&mut self) -> Checkpoint {
        Checkpoint {
            lsn: self.last_lsn,
            clock: self.clock.last(),
            frontier: self.store.frontier().clone(),
            objects: self.store.take_dirty_images(),
            prepared: self
                .prepared
                .iter()
                .map(|(tx, p)| PreparedImage {
                    tx: *tx,
                    snapshot: p.snapshot.clone(),
                    prepare_time: p.prepare_time,
                    writes: p.writes.clone(),
                    commit: p.committing.clone(),
                    fenced: p.fenced,
                    lsn: p.lsn,
                })
                .collect(),
            fenced: self.fenced.iter().copied().collect(),
            committed_through: self.replicator.newest(),
            clock_bound: self.bound.logged(),
            recent_commits: self.recent_commits.iter().cloned().collect(),
            keep_log_from: self.replicator.keep_log_from(self.prepared.values().map(|p| p.lsn).min()),
            peer_acked: self.replicator.acked_image(),
            pvc: Some(self.pvc.clone()),
            remote_applied: self.remote_applied.iter().map(|(d, (at, tx))| (*d, *at, *tx)).collect(),
            // The live path applies a remote transaction when it logs it (`process_inbound`): the images hold them
            // all. (Checkpoints of earlier versions may list some, applied at recovery.)
            remote_pending: Vec::new(),
            decided: self.decided.image(),
            membership: None,
        }
    }
}

/// The local time a record shows this partition exposed: its prepare time, or a commit time (which pvc may have
/// reported). A restored clock starts above all of them.
pub(super) fn exposed_time(record: &LogRecord, local: DcId) -> Option<Timestamp> {
    match record {
        LogRecord::Prepared { prepare_time, .. } => Some(*prepare_time),
        LogRecord::Committed { commit, .. } | LogRecord::CommittedAlone { commit, .. } => Some(commit.get(local)),
        LogRecord::Remote { .. }
        | LogRecord::Aborted { .. }
        | LogRecord::Fenced { .. }
        | LogRecord::ClockBound { .. }
        | LogRecord::PeerAcked { .. } => None,
    }
}
