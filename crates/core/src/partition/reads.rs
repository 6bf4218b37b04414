//! Snapshot reads and the requests that wait for their snapshot (Cure Alg. 2): a read is served once its whole
//! snapshot is available here, a prepare once the clock passed its snapshot's local entry; until then both wait,
//! and give up at their deadline.

use super::Partition;
use crate::bugs::{self, Bug};
use crate::message::{Fetched, RemoteError};
use crate::protocol::ReadVersion;
use crate::store::{VersionStore, Visibility};
use crate::{Address, ClockKind, Message, ObjectId, TxId, VectorClock};
use causet_crdt::{Crdt, Effect};

#[derive(Clone, Debug)]
pub(super) enum Request {
    /// A read; `boxes`: for a cache ([`Message::Fetch`]), answered with each state's visibility box.
    Read {
        from: Address,
        tx: TxId,
        request: u64,
        snapshot: VectorClock,
        objects: Vec<ObjectId>,
        boxes: bool,
    },
    Prepare(Prepare),
}

/// A prepare (or, `alone`, a prepare-and-commit) as it arrived from its coordinator.
#[derive(Clone, Debug)]
pub(super) struct Prepare {
    pub from: Address,
    pub tx: TxId,
    pub snapshot: VectorClock,
    pub writes: Vec<(ObjectId, Effect)>,
    pub alone: bool,
    pub oldest_open: u64,
}

impl Request {
    pub(super) fn snapshot(&self) -> &VectorClock {
        match self {
            Request::Read { snapshot, .. } | Request::Prepare(Prepare { snapshot, .. }) => snapshot,
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Waiting {
    pub(super) request: Request,
    /// When the request gives up.
    pub(super) deadline_us: u64,
}

impl<S: VersionStore> Partition<S> {
    pub(super) fn on_request(&mut self, now_us: u64, request: Request) {
        let snapshot = request.snapshot();
        if let Err(e) = self.validate_snapshot(now_us, snapshot) {
            self.refuse(&request, e);
            return;
        }
        if let Some(request) = self.try_serve(now_us, request) {
            if self.waiting.len() >= self.config.max_waiting_requests {
                self.refuse(&request, RemoteError::Busy);
                return;
            }
            let deadline_us = now_us.saturating_add(self.config.wait_timeout_us);
            self.waiting.push(Waiting { request, deadline_us });
        }
    }

    /// A snapshot must have an entry per DC.
    fn validate_length(&self, snapshot: &VectorClock) -> Result<(), RemoteError> {
        if !snapshot.has_dcs(self.config.vector_len()) {
            return Err(RemoteError::InvalidSnapshot(format!(
                "{} entries for {} DCs",
                snapshot.len(),
                self.config.dcs
            )));
        }
        Ok(())
    }

    fn validate_snapshot(&self, now_us: u64, snapshot: &VectorClock) -> Result<(), RemoteError> {
        self.validate_length(snapshot)?;
        let local = snapshot.get(self.config.dc);
        let limit = now_us.saturating_add(self.config.max_clock_ahead_us);
        if local.micros() > limit && local > self.clock.last() {
            return Err(RemoteError::InvalidSnapshot(format!(
                "local entry {local} is more than {} µs ahead of this partition's clock",
                self.config.max_clock_ahead_us
            )));
        }
        Ok(())
    }

    /// Serves the request if its snapshot is available, else hands it back to wait.
    fn try_serve(&mut self, now_us: u64, request: Request) -> Option<Request> {
        let local = self.config.dc;
        let is_read = matches!(request, Request::Read { .. });
        let rules = self.config.protocol.rules();
        let skip_wait = is_read && (bugs::has(&self.config, Bug::SkipReadWait) || !rules.read_waits_for_snapshot());
        let snapshot = request.snapshot();
        if !skip_wait {
            // With a hybrid clock the partition moves its clock up to the snapshot instead of waiting for physical
            // time to get there; only the wait for earlier prepared transactions remains.
            self.clock.observe(snapshot.get(local));
            self.refresh_pvc(now_us);
            let available = match &request {
                // Cure Alg. 2 line 6: the whole snapshot must be available here.
                Request::Read { .. } => rules.may_serve_read(snapshot, &self.pvc),
                // A prepare time must exceed the snapshot's local entry, so the commit lands above the snapshot.
                Request::Prepare(_) => self.clock.current(now_us) >= snapshot.get(local),
            };
            if !available {
                return Some(request);
            }
        }
        if let Request::Read { objects, .. } = &request {
            // A DC that does not hold an object has no state of it to read: its coordinators read it elsewhere.
            let misplaced = objects.iter().find(|o| !self.holds(o));
            if let Some(o) = misplaced.filter(|_| !bugs::has(&self.config, Bug::ReadsIgnorePlacement)) {
                debug_assert!(
                    !bugs::checks_invariants(&self.config),
                    "placement: a read of {o:?} where it is not held"
                );
                let e = RemoteError::NotHeld(format!("{:?}", String::from_utf8_lossy(&o.key)));
                self.refuse(&request, e);
                return None;
            }
        }
        match request {
            Request::Read { from, tx, request, snapshot, objects, boxes: false } => {
                let result = self.read_objects(&snapshot, &objects);
                self.send(from, Message::ReadReply { tx, request, result });
            }
            Request::Read { from, tx, request, snapshot, objects, boxes: true } => {
                // A reader at another DC, or one here when the caches hear of every write, may raise the boxes'
                // entries no version was cut at (`crate::away`).
                let away = matches!(from, Address::DcCoordinator(dc, _) if dc != local);
                let result = self.fetch_objects(&snapshot, &objects, away || self.notices_held_writes());
                self.send(from, Message::Fetched { tx, request, result });
            }
            Request::Prepare(prepare) => self.prepare(now_us, prepare),
        }
        None
    }

    /// One page of every object's state at `snapshot` (a backup): up to `limit` objects with ids above `after`,
    /// ascending, leaving out those still in their initial state there (written only after the snapshot). The
    /// snapshot must be one this partition can serve at once — at or below its pvc; a transaction's snapshot takes
    /// its local entry from its node's clock, which a partition may not have reached yet ([`RemoteError::
    /// NotYetApplied`]: ask again) — and stay at or above the garbage-collection frontier for the whole export: the backup holds it
    /// there with a transaction open at that snapshot.
    pub fn export(
        &mut self,
        snapshot: &VectorClock,
        after: Option<&ObjectId>,
        limit: usize,
    ) -> Result<ExportPage, RemoteError> {
        self.validate_length(snapshot)?;
        if self.config.protocol.rules().read_version() != ReadVersion::AtSnapshot {
            return Err(RemoteError::InvalidSnapshot("this protocol keeps no snapshots to back up".into()));
        }
        if !snapshot.le(&self.pvc) {
            return Err(RemoteError::NotYetApplied(format!("the partition's pvc is {:?}", self.pvc)));
        }
        let ids = self.store.ids_after(after, limit.max(1));
        let next = (ids.len() == limit.max(1)).then(|| ids[ids.len() - 1].clone());
        let mut objects = Vec::with_capacity(ids.len());
        for id in ids {
            let state = self.store.read(&id, snapshot)?;
            if state != Crdt::new(id.ty) {
                objects.push((id, state));
            }
        }
        Ok(ExportPage { objects, next })
    }

    /// The objects' states at `snapshot`, as this partition applied them.
    fn read_objects(&mut self, snapshot: &VectorClock, objects: &[ObjectId]) -> Result<Vec<Crdt>, RemoteError> {
        match self.config.protocol.rules().read_version() {
            ReadVersion::AtSnapshot => objects.iter().map(|id| self.store.read(id, snapshot)).collect(),
            // Eventual consistency: the latest applied state, whatever the snapshot.
            ReadVersion::Latest => Ok(objects.iter().map(|id| self.store.latest(id)).collect()),
        }
    }

    /// The objects' states at `snapshot` with their visibility boxes, for a cache. The snapshot is served here
    /// (at or below the pvc), and the pvc bounds what is known: every later effect comes above it.
    fn fetch_objects(
        &mut self,
        snapshot: &VectorClock,
        objects: &[ObjectId],
        extendable: bool,
    ) -> Result<Vec<Fetched>, RemoteError> {
        if self.config.protocol.rules().read_version() != ReadVersion::AtSnapshot {
            return Err(RemoteError::InvalidSnapshot("this protocol keeps no snapshots to cache".into()));
        }
        let mut out = Vec::with_capacity(objects.len());
        for id in objects {
            let state = self.store.read(id, snapshot)?;
            let Visibility { lo, hi, open } = self.store.visibility(id, snapshot, &self.pvc, extendable);
            // (A deliberate bug that serves reads before their snapshot is available breaks this on purpose.)
            debug_assert!(
                !bugs::checks_invariants(&self.config) || (lo.le(snapshot) && snapshot.le(&hi)),
                "a box holds the snapshot it was read at"
            );
            out.push(Fetched { state, lo, hi, open });
        }
        Ok(out)
    }

    /// A replica that does not lead serves a read from what it applied, if that covers the snapshot: every
    /// transaction at or below it is applied here, as the leader's pvc last reported with a log position this
    /// replica has applied says ([`Partition::note_closed`]). `None` otherwise: the leader must serve it.
    pub fn read_applied(
        &mut self,
        snapshot: &VectorClock,
        objects: &[ObjectId],
    ) -> Option<Result<Vec<Crdt>, RemoteError>> {
        let closed = self.closed.as_ref()?;
        if !snapshot.has_dcs(self.config.vector_len()) || !snapshot.le(closed) {
            return None;
        }
        Some(self.read_objects(snapshot, objects))
    }

    /// A replica that does not lead applied the log through a position at which its leader's pvc was `pvc`: every
    /// transaction that pvc covers is applied here (the records it depends on come before that position).
    pub fn note_closed(&mut self, pvc: &VectorClock) {
        match &mut self.closed {
            Some(closed) => closed.merge_max(pvc),
            None => self.closed = Some(pvc.clone()),
        }
    }

    /// A replica that does not lead folds away the versions below the DC's garbage-collection frontier `gc` (no
    /// read comes below it) and below what it applied (a version it has not applied yet may lie below `gc`, and
    /// folding must see a partition's versions in the order the leader did).
    pub fn collect_applied(&mut self, gc: &VectorClock) {
        let Some(closed) = &self.closed else { return };
        if !gc.has_dcs(self.config.vector_len()) {
            return;
        }
        let mut frontier = gc.clone();
        frontier.merge_min(closed);
        self.store.collect(&frontier);
    }

    pub(super) fn serve_waiting(&mut self, now_us: u64) {
        if self.waiting.is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut self.waiting);
        for w in waiting {
            if let Some(request) = self.try_serve(now_us, w.request) {
                if now_us >= w.deadline_us {
                    self.refuse(&request, RemoteError::Timeout);
                } else {
                    self.waiting.push(Waiting { request, deadline_us: w.deadline_us });
                }
            }
        }
    }

    /// When a request waiting on the physical clock can next be served (physical clocks only).
    pub(super) fn clock_wait_us(&self, request: &Request) -> Option<u64> {
        if self.config.clock != ClockKind::Physical {
            return None;
        }
        let snapshot = request.snapshot();
        let local = snapshot.get(self.config.dc);
        (local >= self.clock.last()).then(|| local.micros() + 1)
    }

    fn refuse(&mut self, request: &Request, reason: RemoteError) {
        match request {
            Request::Read { from, tx, request, boxes, .. } => {
                let (tx, request) = (*tx, *request);
                let msg = if *boxes {
                    Message::Fetched { tx, request, result: Err(reason) }
                } else {
                    Message::ReadReply { tx, request, result: Err(reason) }
                };
                self.send(*from, msg);
            }
            Request::Prepare(Prepare { from, tx, alone, .. }) => self.refuse_prepare(*from, *tx, *alone, reason),
        }
    }
}

/// One page of a partition's export ([`Partition::export`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ExportPage {
    /// The objects and their states at the snapshot, ascending by id.
    pub objects: Vec<(ObjectId, Crdt)>,
    /// The last id this page looked at, when more may follow: ask for the objects after it.
    pub next: Option<ObjectId>,
}
