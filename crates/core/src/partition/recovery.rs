//! Checkpoints, and rebuilding a partition from a checkpoint and the log records after it.

use super::{Checkpoint, Partition, PreparedImage};
use crate::record::{LogRecord, Lsn};
use crate::{ClockKind, Config, PartitionId, Timestamp};

impl Partition {
    /// Rebuilds a partition from a complete checkpoint (every object) and the log records after it: the body of
    /// [`Partition::restore`].
    pub(super) fn rebuild(
        id: PartitionId,
        config: Config,
        now_us: u64,
        checkpoint: Option<Checkpoint>,
        tail: impl IntoIterator<Item = (Lsn, LogRecord)>,
    ) -> Self {
        let mut p = Partition::new(id, config, now_us);
        let mut floor = Timestamp::ZERO;
        let local = p.config.dc;
        if let Some(c) = checkpoint {
            p.last_lsn = c.lsn;
            floor = c.clock;
            p.store.restore_frontier(c.frontier);
            for (object, image) in c.objects {
                p.store.load(object, image);
            }
            for (tx, commit) in c.recent_commits {
                p.remember_commit(tx, commit);
            }
            p.sender.restore(c.unreplicated, c.peer_acked);
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
            for (origin, tx) in c.remote_pending {
                p.replay_remote(origin, tx);
            }
            for image in c.prepared {
                floor = floor.max(image.prepare_time);
                p.insert_prepared(image.tx, image.snapshot, image.prepare_time, image.writes, now_us);
                if let Some(commit) = image.commit {
                    p.prepared.get_mut(&image.tx).expect("just inserted").committing = Some(commit);
                    p.apply_commit(image.tx);
                }
            }
        }
        for (lsn, record) in tail {
            if lsn <= p.last_lsn {
                continue; // Covered by the checkpoint (truncation may lag behind it).
            }
            p.last_lsn = lsn;
            match record {
                LogRecord::Prepared { tx, snapshot, prepare_time, writes } => {
                    floor = floor.max(prepare_time);
                    p.insert_prepared(tx, snapshot, prepare_time, writes, now_us);
                }
                LogRecord::Committed { tx, commit } => {
                    floor = floor.max(commit.get(local));
                    if let Some(prepared) = p.prepared.get_mut(&tx) {
                        prepared.committing = Some(commit);
                        p.apply_commit(tx);
                    }
                }
                LogRecord::CommittedAlone { tx, snapshot, commit, writes } => {
                    let prepare_time = commit.get(local);
                    floor = floor.max(prepare_time);
                    p.insert_prepared(tx, snapshot, prepare_time, writes, now_us);
                    p.prepared.get_mut(&tx).expect("just inserted").committing = Some(commit);
                    p.apply_commit(tx);
                }
                LogRecord::Remote { origin, tx } => p.replay_remote(origin, tx),
                LogRecord::Aborted { tx } => {
                    p.remove_prepared(tx);
                }
            }
        }
        p.durable_lsn = p.last_lsn;
        // Before the crash this partition may have exposed (in pvc reports and reads) timestamps up to its clock,
        // which a hybrid clock may have pushed up to `max_clock_ahead_us` past physical time. Never issue a prepare
        // time at or below those: start above both the log and that bound.
        if p.config.clock == ClockKind::Hybrid {
            floor = floor.max(Timestamp::from_micros(now_us.saturating_add(p.config.max_clock_ahead_us)));
        }
        p.clock.raise_floor(floor);
        p.refresh_pvc(now_us);
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
                })
                .collect(),
            recent_commits: self.recent_commits.iter().cloned().collect(),
            unreplicated: self.sender.image().0,
            peer_acked: self.sender.image().1,
            pvc: Some(self.pvc.clone()),
            remote_applied: self.remote_applied.iter().map(|(d, (at, tx))| (*d, *at, *tx)).collect(),
            remote_pending: self
                .remote_pending
                .iter()
                .flat_map(|(origin, txs)| txs.iter().map(|tx| (*origin, tx.clone())))
                .collect(),
        }
    }
}
