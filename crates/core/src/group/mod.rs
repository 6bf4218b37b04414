//! A Raft group replica, sans-I/O: a wrapper around raft-rs's `RawNode` in the shape of core's other state
//! machines, which the node layer will own per partition replica (see `docs/design/raft-groups.md`).
//!
//! Inputs: [`Group::handle_timeout`], [`Group::handle_message`] (a peer's message, as bytes),
//! [`Group::propose`] and [`Group::handle_written`] (the driver made a [`GroupOutput::Write`] durable).
//! Outputs: [`Group::poll_output`] and [`Group::poll_timeout`]. No raft or protobuf type appears in the API, so a
//! driver needs neither crate: messages cross as opaque bytes, and log entries and the hard state are our own
//! serde types, which the driver persists and hands back at restart as a [`DurableState`].
//!
//! # Why it is shaped this way
//!
//! - **Asynchronous persistence.** Every raft `Ready` that changes the log or the hard state becomes one
//!   [`GroupOutput::Write`], numbered. The leader's messages leave at once, so followers replicate while the
//!   leader's own fsync is outstanding (raft thesis §10.2.1); a follower's or candidate's messages (votes, append
//!   acknowledgements) promise what its Write holds, so they are held until [`Group::handle_written`] covers it.
//!   Raft counts the leader itself towards a quorum only once its Write is durable.
//! - **Committed means durable at a majority and here.** [`GroupOutput::Committed`] carries an entry only once a
//!   quorum persisted it *and* this replica did (raft 0.7 hands out committed entries up to
//!   `min(committed, persisted)`), in index order, each exactly once per incarnation. A restarted replica
//!   reports again every committed entry after [`DurableState::applied`].
//! - **The storage view comes first.** Raft reads its log synchronously through `Storage`; core keeps an
//!   in-memory view (`storage.rs`) and applies each Write to it before advancing raft past the Ready.
//! - **Determinism, and randomized elections all the same.** raft-rs draws its randomized election timeout from
//!   `rand::thread_rng()`. The group pins that range to one value (`min_election_tick = election_ticks`,
//!   `max = min + 1`), and randomizes on its own: every time raft's election clock restarts (a heartbeat, a
//!   new term, a campaign), the group draws a number of ticks in `0..election_ticks` and withholds that many
//!   ticks from raft before ticking it again (never on a leader). The draw is a hash of
//!   [`GroupConfig::election_seed`], which the driver picks from its seeded random source, and a counter, so the
//!   simulator replays exactly. A jitter fixed per replica is not enough: two followers whose timeouts and tick
//!   phases happen to be close split the vote term after term (the tests found it after a leader crash).
//!   Withholding ticks only lengthens a follower's wait, so it refuses votes at least as long as raft would.
//!   raft's hash maps use a fixed hasher and its logger is discarded.
//! - **Ticks without bursts.** [`Group::handle_timeout`] calls raft's `tick()` at most once per call, however
//!   late the call: a process that was paused must not count the pause as many elapsed ticks and campaign at
//!   once; it first hears from the leader it may still have.
//! - **Lost proposals.** [`Group::propose`] works only on a leader and returns the [`Proposal`]: the index and
//!   term the entry will have. A leader deposed before its entry committed may see it overwritten; the driver
//!   learns that from [`GroupOutput::ProposalLost`], emitted when a committed entry rules it out: the entry
//!   committed at that index has another term, or an entry committed at an earlier index has a later term (by
//!   log matching, a log holding the proposal holds only entries of its term or earlier before it). Those are
//!   the only sound tests: an entry overwritten on its proposer can still be committed by a later leader that
//!   holds it (raft paper, figure 8). The second one matters when the log stops growing: a deposed leader's
//!   proposals beyond the new leader's last entry would otherwise wait for a verdict until something commits at
//!   their index, which in an idle group is never. A proposal is known by index *and* term, because one replica
//!   can have two pending at one index: a newer leader's conflicting append truncates its log below the index,
//!   and it leads again and proposes there.
//! - **Untrusted bytes.** Every message carries a checksum; bytes that fail it or do not parse, messages from
//!   non-members or addressed to another replica, and message kinds this brick does not use are dropped and
//!   counted, never stepped: raft-rs panics on some inconsistent messages, and a panic would take the whole node
//!   down. (Raft is not Byzantine-tolerant: a well-formed lie from a member is still believed.)
//!
//! - **Compaction and snapshots.** The driver compacts a replica's log ([`Group::compact`]) once its own state
//!   covers the entries durably (its checkpoint is on disk). A follower that needs compacted entries gets a
//!   snapshot: raft asks the storage view for one, which answers "temporarily unavailable" and has the group emit
//!   [`GroupOutput::SnapshotWanted`]; the driver offers its stored state ([`Group::offer_snapshot`]), which the
//!   group ships with the committed entries after the point the application still reads back; raft sends it on
//!   the follower's next heartbeat response. The group reports a snapshot sent as finished at once (raft probes
//!   the follower next; a lost snapshot makes the probe fail and raft sends one again). The follower validates it
//!   on receipt, the driver installs it with a Write ([`GroupOutput::Write`]'s `snapshot`), and once that is
//!   durable the group reports [`GroupOutput::Restored`] and moves raft's applied index to it (raft reads its log
//!   from there on: a campaign checks the unapplied entries).
//!
//! - **Membership.** A new group's voters are [`GroupConfig::voters`]; from then on the membership is raft's conf
//!   state, changed by entries ([`Group::change_membership`]: one step at a time, or a joint change, which the
//!   leader leaves explicitly, since raft's automatic leaving would append an entry of its own at an index the
//!   driver may have promised to something else). A change takes effect on each replica as it applies the entry;
//!   the group keeps the membership by index ([`Group::membership_at`]), so that the driver stores the one as of
//!   its state with that state ([`DurableState::membership`]) and a restart applies the later changes again on
//!   top of it; snapshots carry it ([`GroupSnapshot::membership`]). A snapshot older than the change that added
//!   its receiver is not sent to it (raft would drop it): the driver is asked for a newer one. A replica that is
//!   not a member (it joins under a new id, its node having lost its disk) starts from the first voters, does
//!   not campaign, and hears from any leader, since its view of who leads may be out of date.
//!
//! # Left out of this brick
//!
//! - **Read index and leases**, priorities, and forwarding proposals from followers: `MsgReadIndex` and
//!   `MsgPropose` from peers are dropped. Leader transfer is used ([`Group::transfer_leadership`]): a leader hands
//!   leadership to a caught-up replica with `MsgTimeoutNow`.
//! - **Batching of messages per destination node**, which the node layer does.

mod storage;
#[cfg(test)]
mod tests;

use self::storage::LogView;
use crate::record::Lsn;
use protobuf::Message as _;
use raft::prelude::{
    ConfState, Entry as RaftEntry, EntryType, HardState as RaftHardState, Message as RaftMessage, MessageType, Snapshot,
};
use raft::{RawNode, StateRole, Storage as _};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A replica's id in its group: unique per replica incarnation with its disk (a replica that lost its disk must
/// come back under a new id). Never zero (raft reserves 0 for "none").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReplicaId(pub u64);

/// A group's membership (raft's conf state), as of some log index: who votes, who only receives the log, and during
/// a joint change the voters of the configuration being left (a decision then needs a majority of both).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Membership {
    /// The voters (of the incoming configuration, during a joint change), ascending.
    pub voters: Vec<ReplicaId>,
    /// Replicas that receive the log and do not vote, ascending.
    pub learners: Vec<ReplicaId>,
    /// During a joint change, the voters of the outgoing configuration; empty otherwise.
    pub outgoing: Vec<ReplicaId>,
    /// During a joint change, outgoing voters that become learners when it is left.
    pub learners_next: Vec<ReplicaId>,
}

impl Membership {
    /// A configuration of `voters` only.
    pub fn of_voters(voters: &[ReplicaId]) -> Self {
        let mut voters = voters.to_vec();
        voters.sort();
        Self { voters, ..Self::default() }
    }

    /// Whether `id` belongs to the group in any role.
    pub fn contains(&self, id: ReplicaId) -> bool {
        self.is_voter(id) || self.learners.contains(&id) || self.learners_next.contains(&id)
    }

    /// Whether `id` votes (in either configuration, during a joint change).
    pub fn is_voter(&self, id: ReplicaId) -> bool {
        self.voters.contains(&id) || self.outgoing.contains(&id)
    }

    /// Whether a joint change is under way (it must be left before another change).
    pub fn is_joint(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Every replica of the group, in any role, without allocating (a replica may come twice: an outgoing voter
    /// that stays a learner).
    pub fn iter(&self) -> impl Iterator<Item = ReplicaId> + '_ {
        [&self.voters, &self.learners, &self.outgoing, &self.learners_next].into_iter().flatten().copied()
    }

    /// Every replica of the group, in any role, ascending and once each.
    pub fn members(&self) -> Vec<ReplicaId> {
        let mut all: Vec<ReplicaId> = self.iter().collect();
        all.sort();
        all.dedup();
        all
    }

    fn to_raft(&self) -> ConfState {
        let ids = |v: &[ReplicaId]| v.iter().map(|r| r.0).collect::<Vec<_>>();
        let mut cs = ConfState::from((ids(&self.voters), ids(&self.learners)));
        cs.voters_outgoing = ids(&self.outgoing);
        cs.learners_next = ids(&self.learners_next);
        cs
    }

    fn from_raft(cs: &ConfState) -> Self {
        let ids = |v: &[u64]| {
            let mut out: Vec<ReplicaId> = v.iter().map(|&r| ReplicaId(r)).collect();
            out.sort();
            out
        };
        Self {
            voters: ids(&cs.voters),
            learners: ids(&cs.learners),
            outgoing: ids(&cs.voters_outgoing),
            learners_next: ids(&cs.learners_next),
        }
    }
}

/// One step of a membership change ([`Group::change_membership`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MembershipChange {
    /// Make this replica a voter (a learner is promoted).
    AddVoter(ReplicaId),
    /// Add this replica as a learner: it receives the log (a snapshot first) and does not vote.
    AddLearner(ReplicaId),
    /// Remove this replica from the group.
    Remove(ReplicaId),
}

/// How a group replica runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// This replica.
    pub id: ReplicaId,
    /// The voters a new group starts with (its membership before the first entry). A replica that joins an
    /// existing group is not among them: it does not campaign, and learns the membership from the log or a
    /// snapshot. A restarted replica's membership comes from [`DurableState::membership`] instead.
    pub voters: Vec<ReplicaId>,
    /// The length of one raft tick, in microseconds.
    pub tick_us: u64,
    /// Ticks without hearing from a leader before a follower campaigns (before its jitter), and without hearing
    /// from a quorum before a leader steps down (`check_quorum`).
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats; less than `election_ticks`.
    pub heartbeat_ticks: usize,
    /// The seed of this replica's election jitter (module documentation), chosen by the driver from its seeded
    /// random source; the replicas of a group need different seeds, or they may campaign in lockstep.
    pub election_seed: u64,
    /// Append messages in flight to one follower before the leader waits for acknowledgements.
    pub max_inflight_msgs: usize,
    /// The largest batch of entries in one append message, in bytes (at least one entry is always sent).
    pub max_size_per_msg: u64,
    /// Uncommitted entries a leader accepts, in bytes, before [`Group::propose`] answers
    /// [`ProposeError::Busy`] (back-pressure).
    pub max_uncommitted_size: u64,
    /// The most committed entries, in bytes, handed out by one raft Ready (more follow at once).
    pub max_committed_size_per_ready: u64,
    /// A leader steps down when it has not heard from a quorum within `election_ticks`, and a follower refuses
    /// to vote while it hears from a leader. On by default; needed for leases later.
    pub check_quorum: bool,
    /// Pre-vote: a replica that cannot win an election (cut off, or behind) does not disturb the term. On by
    /// default.
    pub pre_vote: bool,
    /// A leader whose commit index moves sends every follower an append at once to tell it (raft's default).
    /// Off by default: a follower learns it from the leader's next append or heartbeat, or sooner from the driver
    /// ([`Group::learn_commit`]). Telling at once is two more messages each way per entry, half of what an entry
    /// costs the group in messages, and a second round of work on each follower.
    pub broadcast_commits: bool,
    /// A snapshot message larger than this, encoded, is reported to raft as delivered or not by the driver
    /// ([`Group::report_snapshot`]), which sends it in parts; a smaller one counts as delivered once sent. Until
    /// the report, raft sends that follower no other snapshot.
    pub report_snapshots_above: usize,
}

impl GroupConfig {
    /// A configuration with the defaults below for replica `id` of a group of `voters`.
    pub fn new(id: ReplicaId, voters: Vec<ReplicaId>) -> Self {
        Self {
            id,
            voters,
            tick_us: 10_000,
            election_ticks: 10,
            heartbeat_ticks: 2,
            election_seed: id.0,
            max_inflight_msgs: 256,
            max_size_per_msg: 1 << 20,
            max_uncommitted_size: 64 << 20,
            max_committed_size_per_ready: 4 << 20,
            check_quorum: true,
            report_snapshots_above: usize::MAX,
            pre_vote: true,
            broadcast_commits: false,
        }
    }
}

/// What an entry holds for raft.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EntryKind {
    /// Application data (empty data: a new leader's no-op entry).
    Normal,
    /// A membership change (raft's `ConfChange`); not proposed by this brick.
    ConfChange,
    /// A joint membership change (raft's `ConfChangeV2`); not proposed by this brick.
    ConfChangeV2,
}

/// One entry of a replica's log, as the driver persists it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    /// Its position in the log, from 1.
    pub index: Lsn,
    /// The term of the leader that created it.
    pub term: u64,
    /// What it holds.
    pub kind: EntryKind,
    /// Its payload.
    pub data: Vec<u8>,
}

/// The votes and commit index raft needs back after a restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HardState {
    /// The current term.
    pub term: u64,
    /// Who this replica voted for in `term`.
    pub vote: Option<ReplicaId>,
    /// The highest index known committed.
    pub commit: Lsn,
}

/// The compaction point of a replica's log: the index and term of the last entry removed from its start. Raft
/// needs the term of the entry just before its first one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Compacted {
    /// The last index removed.
    pub index: Lsn,
    /// Its term.
    pub term: u64,
}

/// What a replica recovered from its disk: every [`GroupOutput::Write`] made durable, applied in order. Empty
/// ([`Default`]) for a new replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableState {
    /// The last hard state written.
    pub hard_state: HardState,
    /// Where the log was compacted, if it was: the entries start right after it.
    pub compacted: Option<Compacted>,
    /// The log, consecutive, from `compacted.index + 1` (from 1 without compaction).
    pub entries: Vec<Entry>,
    /// Entries up to here were already applied by the driver (say, covered by its checkpoint): they are not
    /// reported [`GroupOutput::Committed`] again. Within the log; the stored commit index may lag it (it is not
    /// written on every commit), and is raised to it at recovery.
    pub applied: Lsn,
    /// The membership as of `applied` ([`Group::membership_at`], kept with the driver's state); `None`: the
    /// configured voters (nothing applied changed them, or the log holds every change from the first entry on).
    pub membership: Option<Membership>,
}

impl DurableState {
    /// Applies a [`GroupOutput::Write`] the way a driver persists it: the log from `entries[0].index` on is replaced
    /// by `entries`, then the hard state recorded, if given. (For drivers that keep the state in memory: the
    /// simulator, tests.)
    ///
    /// A Write's snapshot replaces the log by the snapshot's entries, after its compaction point, and the driver
    /// keeps its state as applied: `applied` moves to the snapshot's index.
    pub fn apply_write(
        &mut self,
        snapshot: Option<&GroupSnapshot>,
        entries: Vec<Entry>,
        hard_state: Option<HardState>,
    ) {
        if let Some(snapshot) = snapshot {
            self.install(snapshot.compacted, snapshot.entries.clone(), snapshot.index);
            self.membership = Some(snapshot.membership.clone());
        }
        if let Some(first) = entries.first() {
            let base = self.compacted.map_or(0, |c| c.index.0);
            self.entries.truncate(first.index.0.saturating_sub(base + 1) as usize);
            self.entries.extend(entries);
        }
        if let Some(hs) = hard_state {
            self.hard_state = hs;
        }
    }

    /// Installs a snapshot's log: its `entries`, which start right after `compacted`, replace the log, and the
    /// driver's state (the snapshot's) covers everything through `applied`.
    pub fn install(&mut self, compacted: Compacted, entries: Vec<Entry>, applied: Lsn) {
        self.compacted = Some(compacted);
        self.entries = entries;
        self.applied = applied;
    }

    /// Drops the entries through `through` (the driver's durable state covers them), noting the last one dropped
    /// as the compaction point. Nothing if the log is compacted that far already.
    pub fn compact(&mut self, through: Lsn) {
        let base = self.compacted.map_or(0, |c| c.index.0);
        if through.0 <= base {
            return;
        }
        let removed: Vec<Entry> = self.entries.drain(..(through.0 - base) as usize).collect();
        let last = removed.last().expect("the entries before a compaction point were written");
        self.compacted = Some(Compacted { index: last.index, term: last.term });
    }
}

/// A snapshot from the leader that a follower installs: the application's state after every entry through
/// `index` (opaque to the group: what the leader's driver offered with [`Group::offer_snapshot`]), and the
/// committed entries after `compacted` through `index` that the leader still kept.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupSnapshot {
    /// The last entry the state covers.
    pub index: Lsn,
    /// That entry's term.
    pub term: u64,
    /// The last entry not kept: `entries` start right after it.
    pub compacted: Compacted,
    /// The committed entries from `compacted.index + 1` through `index`.
    pub entries: Vec<Entry>,
    /// The application's state at `index`.
    pub state: Vec<u8>,
    /// The group's membership as of `index`: the installing replica starts from it.
    pub membership: Membership,
}

impl GroupSnapshot {
    /// Whether the parts agree: entries consecutive from the compaction point through `index`, terms never
    /// decreasing, the last one's term `term` (or the compaction point's, with no entries).
    fn consistent(&self) -> bool {
        let mut previous = self.compacted;
        for e in &self.entries {
            if e.index.0 != previous.index.0 + 1 || e.term < previous.term {
                return false;
            }
            previous = Compacted { index: e.index, term: e.term };
        }
        previous.index == self.index && previous.term == self.term && self.index.0 > 0
    }
}

/// What a group replica asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupOutput {
    /// Make this durable, after every earlier Write and atomically (all of it or none): install `snapshot` if
    /// given (the log becomes its entries, the application's state its state), replace the log from
    /// `entries[0].index` on by `entries` (dropping any conflicting suffix), then record `hard_state` if given.
    /// Report it with [`Group::handle_written`]`(ready)`, which also covers every earlier Write.
    Write {
        /// The Write's number; increasing, not consecutive.
        ready: u64,
        /// A snapshot from the leader to install first; [`GroupOutput::Restored`] follows once it is durable.
        snapshot: Option<Box<GroupSnapshot>>,
        /// Entries to append, consecutive; may be empty.
        entries: Vec<Entry>,
        /// The new hard state, if it changed.
        hard_state: Option<HardState>,
    },
    /// Deliver these bytes to replica `to`'s [`Group::handle_message`]. Loss, delay, duplication and reordering
    /// are tolerated.
    Send {
        /// The receiver.
        to: ReplicaId,
        /// The message.
        bytes: Vec<u8>,
        /// A snapshot larger than [`GroupConfig::report_snapshots_above`]: the driver sends it in parts and tells
        /// [`Group::report_snapshot`] whether it arrived.
        in_parts: bool,
    },
    /// An entry is committed (a quorum holds it durably, this replica too): apply it. In index order; raft's
    /// no-op and membership entries are applied silently, so indexes may skip.
    Committed {
        /// Its index.
        index: Lsn,
        /// Its term: a proposal made at `index` in another term was lost.
        term: u64,
        /// The data proposed.
        data: Vec<u8>,
    },
    /// A proposal this replica made is lost: another entry committed at its index, or an entry of a later term
    /// committed before it. Propose again if it still matters.
    ProposalLost {
        /// The index [`Group::propose`] returned.
        index: Lsn,
        /// The term [`Group::propose`] returned.
        term: u64,
    },
    /// The snapshot of a durable Write is installed: the application's state is the snapshot's, as of `index`;
    /// committed entries continue after it. Proposals this replica made at or below `index` may have been lost
    /// (they are reported [`GroupOutput::ProposalLost`], though some may have committed).
    Restored {
        /// The snapshot's index.
        index: Lsn,
    },
    /// A follower needs entries that were compacted away: offer a snapshot ([`Group::offer_snapshot`]) at an
    /// index at or above [`Group::first_index`]` - 1`. Repeated while none suitable is offered.
    SnapshotWanted,
    /// The leader or the term changed.
    Role {
        /// The leader this replica follows, or itself; `None` while there is none (an election).
        leader: Option<ReplicaId>,
        /// The current term.
        term: u64,
        /// This replica leads.
        is_leader: bool,
    },
}

/// A proposal taken by [`Group::propose`]: it committed when [`GroupOutput::Committed`] reports this index with
/// this term, and is lost when [`GroupOutput::ProposalLost`] reports both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Proposal {
    /// The index the entry has in the proposer's log.
    pub index: Lsn,
    /// The proposer's term.
    pub term: u64,
}

/// Why [`Group::propose`] did not take a proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// Only the leader takes proposals; this is who leads, as far as this replica knows.
    #[error("not the leader (leader: {leader_hint:?})")]
    NotLeader {
        /// The leader, if known.
        leader_hint: Option<ReplicaId>,
    },
    /// The leader holds more uncommitted data than [`GroupConfig::max_uncommitted_size`]; retry later.
    #[error("too much uncommitted data")]
    Busy,
    /// A membership change is not applied yet, or a joint change is not left (or there is none to leave).
    #[error("a membership change is under way")]
    MembershipChanging,
}

/// A group replica that cannot start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// The configuration is inconsistent.
    #[error("invalid group configuration: {0}")]
    Config(String),
    /// The recovered state is inconsistent (a driver bug or a damaged disk).
    #[error("invalid durable state: {0}")]
    Durable(String),
}

/// Message kinds this brick exchanges; everything else received is dropped (see the module documentation).
const ACCEPTED: [MessageType; 10] = [
    MessageType::MsgAppend,
    MessageType::MsgAppendResponse,
    MessageType::MsgRequestVote,
    MessageType::MsgRequestVoteResponse,
    MessageType::MsgRequestPreVote,
    MessageType::MsgRequestPreVoteResponse,
    MessageType::MsgHeartbeat,
    MessageType::MsgHeartbeatResponse,
    // A leader handing leadership over tells the chosen replica to campaign at once.
    MessageType::MsgTimeoutNow,
    // A follower that needs compacted entries gets a snapshot (checked before it is stepped).
    MessageType::MsgSnapshot,
];

/// Bytes of the checksum that trails every message.
const CHECKSUM_LEN: usize = 8;

/// What a leader knows of another replica of its group ([`Group::followers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The replica.
    pub id: ReplicaId,
    /// The last index it is known to hold.
    pub matched: Lsn,
    /// It is being sent a snapshot.
    pub snapshot: bool,
}

/// Counters of a group replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Snapshots this replica sent to followers that needed compacted entries.
    pub snapshots_sent: u64,
    /// Snapshots this replica installed.
    pub snapshots_installed: u64,
    /// Times the driver was asked for a snapshot.
    pub snapshots_wanted: u64,
    /// Membership changes applied.
    pub membership_changes: u64,
    /// Elections this replica started: it heard from no leader for an election timeout and became a
    /// (pre-)candidate. With pre-vote, most that cannot win end there without disturbing the term.
    pub campaigns: u64,
    /// Times this replica stopped leading because it had not heard from a quorum for an election timeout
    /// (`check_quorum`), its term unchanged.
    pub quorum_lost: u64,
    /// Times this replica stopped leading because it saw a later term (another replica was elected).
    pub deposed: u64,
}

/// One replica of a Raft group. See the module documentation.
pub struct Group {
    id: ReplicaId,
    /// The membership from each index on where it changed, from the one in force at the start (or at the last
    /// snapshot, or compaction point) on: applied conf changes, as raft's own conf state follows them.
    memberships: BTreeMap<u64, Membership>,
    tick_us: u64,
    election_ticks: usize,
    election_seed: u64,
    raw: RawNode<LogView>,
    /// When the next tick is due.
    next_tick_us: u64,
    /// Ticks still to withhold from raft in this election round, the round's number, and raft's election clock
    /// as last seen (it going down means a new round).
    withhold: usize,
    election_round: u64,
    election_elapsed: usize,
    /// The last entry handed out as committed (or applied silently), and its term (0 before the first one
    /// handed out by this incarnation).
    applied: u64,
    applied_term: u64,
    /// The number of the last Write handed out, and of the last one reported durable.
    last_write: u64,
    written: u64,
    /// Messages that may leave once the Write they are filed under is durable.
    held: BTreeMap<u64, Vec<RaftMessage>>,
    /// Proposals this replica made whose index has not committed yet: (index, term).
    proposals: BTreeSet<(u64, u64)>,
    /// The last role reported, and raft's state as last seen (for the counters of campaigns and lost leadership).
    role: (Option<ReplicaId>, u64, bool),
    state: StateRole,
    /// The term, vote and commit index of the last hard state handed out in a Write (or recovered). Raft's
    /// commit index is volatile state (Raft §5.1, Fig. 2): a Ready whose hard state moved only the commit index
    /// writes nothing, which spares every replica a storage round trip per commit (the leader's commit and each
    /// follower's learning of it were each a Write of their own). The index rides along when entries, a snapshot
    /// or a new term or vote are written anyway, and is written when it passes a membership change: a restarted
    /// replica heeds only its members' messages ([`Group::decode`]), so it must find its latest membership
    /// committed. [`Group::new`] raises the recovered index to what the driver applied.
    stored: ((u64, Option<ReplicaId>), Lsn),
    /// A snapshot being installed: the number of the Write carrying it, its index and term.
    restoring: Option<(u64, u64, u64)>,
    /// Replicas sent a snapshot since the last Ready: raft hears that it left once the Ready is done.
    snapshots_out: Vec<u64>,
    /// Snapshots larger than this are reported by the driver ([`GroupConfig::report_snapshots_above`]).
    report_snapshots_above: usize,
    /// Counters.
    stats: GroupStats,
    outputs: VecDeque<GroupOutput>,
    dropped: u64,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("id", &self.id)
            .field("term", &self.term())
            .field("leader", &self.leader())
            .field("committed", &self.committed())
            .field("applied", &self.applied)
            .field("applied_term", &self.applied_term)
            .field("last_index", &self.raw.raft.raft_log.last_index())
            .field("role", &self.raw.raft.state)
            .field("last_write", &self.last_write)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl Group {
    /// Starts a replica at local time `now_us` from what its disk holds (empty for a new replica). A restarted
    /// replica reports every committed entry after `durable.applied` again.
    pub fn new(config: GroupConfig, now_us: u64, mut durable: DurableState) -> Result<Self, GroupError> {
        let GroupConfig { id, voters, tick_us, .. } = config.clone();
        check_config(&config)?;
        // The commit index is not written on every commit (`Group::stored`), so the stored one may lag what this
        // replica applied: everything applied was committed.
        durable.hard_state.commit = durable.hard_state.commit.max(durable.applied);
        check_durable(&durable)?;
        let membership = durable.membership.clone().unwrap_or_else(|| Membership::of_voters(&voters));
        let raft_config = raft::Config {
            id: id.0,
            election_tick: config.election_ticks,
            heartbeat_tick: config.heartbeat_ticks,
            // Determinism: a range of one value, so raft's thread_rng draw always yields it (module docs).
            min_election_tick: config.election_ticks,
            max_election_tick: config.election_ticks + 1,
            applied: durable.applied.0,
            max_size_per_msg: config.max_size_per_msg,
            max_inflight_msgs: config.max_inflight_msgs,
            max_uncommitted_size: config.max_uncommitted_size,
            max_committed_size_per_ready: config.max_committed_size_per_ready,
            check_quorum: config.check_quorum,
            pre_vote: config.pre_vote,
            skip_bcast_commit: !config.broadcast_commits,
            ..Default::default()
        };
        raft_config.validate().map_err(|e| GroupError::Config(e.to_string()))?;
        let hard_state = durable.hard_state;
        let base = durable.compacted.map_or((0, 0), |c| (c.index.0, c.term));
        let view = LogView::new(
            to_raft_hard_state(&hard_state),
            membership.to_raft(),
            base,
            durable.entries.iter().map(to_raft_entry).collect(),
        );
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&raft_config, view, &logger).map_err(|e| GroupError::Config(e.to_string()))?;
        let mut group = Self {
            id,
            memberships: BTreeMap::from([(durable.applied.0, membership)]),
            tick_us,
            election_ticks: config.election_ticks,
            election_seed: config.election_seed,
            raw,
            next_tick_us: now_us.saturating_add(tick_us),
            withhold: 0,
            election_round: 0,
            election_elapsed: 0,
            applied: durable.applied.0,
            applied_term: 0,
            last_write: 0,
            written: 0,
            held: BTreeMap::new(),
            proposals: BTreeSet::new(),
            role: (None, hard_state.term, false),
            state: StateRole::Follower,
            stored: ((hard_state.term, hard_state.vote), hard_state.commit),
            restoring: None,
            snapshots_out: Vec::new(),
            report_snapshots_above: config.report_snapshots_above,
            stats: GroupStats::default(),
            outputs: VecDeque::new(),
            dropped: 0,
        };
        group.new_election_round();
        // A recovered log's committed entries come out at once.
        group.pump();
        Ok(group)
    }

    /// This replica's id.
    pub fn id(&self) -> ReplicaId {
        self.id
    }

    /// This replica leads its group (as far as it knows: a leader cut off from its quorum learns it only after
    /// `election_ticks`).
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The leader this replica follows, or itself.
    pub fn leader(&self) -> Option<ReplicaId> {
        replica(self.raw.raft.leader_id)
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The highest index this replica knows committed by a quorum (it may not hold it durably yet).
    pub fn committed(&self) -> Lsn {
        Lsn(self.raw.raft.raft_log.committed)
    }

    /// The commit index and the term of the entry there, for another replica's [`Group::learn_commit`] (`None`
    /// before anything committed, or if the entry was compacted away).
    pub fn commit_point(&self) -> Option<(u64, Lsn)> {
        let committed = self.committed();
        self.term_of(committed).filter(|&term| term > 0).map(|term| (term, committed))
    }

    /// Another replica's [`Group::commit_point`], from a message outside raft (the leader's pvc reports): this
    /// replica commits up to it if its own entry at that index has that term. Sound whoever sent it and however
    /// late: an entry a replica knew committed stays committed, and by log matching a log with the same term at
    /// that index holds the same entries up to it. A follower learns commits this way without raft's broadcast
    /// ([`GroupConfig::broadcast_commits`]). Nothing on a leader, whose commit index is its own to move. Whether
    /// the commit index moved.
    pub fn learn_commit(&mut self, term: u64, index: Lsn) -> bool {
        let moved = !self.is_leader() && self.raw.raft.raft_log.maybe_commit(index.0, term);
        if moved {
            self.pump();
        }
        moved
    }

    /// The last index handed out by [`GroupOutput::Committed`] (or applied silently).
    pub fn applied(&self) -> Lsn {
        Lsn(self.applied)
    }

    /// The term of the last entry handed out by this incarnation (0 before the first): a leader whose own term's
    /// first entry (its no-op) was handed out has applied every entry committed before it.
    pub fn applied_term(&self) -> u64 {
        self.applied_term
    }

    /// The index of the last entry in this replica's log (durable or not).
    pub fn last_index(&self) -> Lsn {
        Lsn(self.raw.raft.raft_log.last_index())
    }

    /// The application data of the entries after `after`, up to `through` and at most `max` of them, in index
    /// order (raft's no-op and membership entries are skipped), as the log holds them in memory. Entries up to
    /// [`Group::applied`] are committed: asking beyond it reads entries that may yet be overwritten.
    pub fn read_entries(&self, after: Lsn, through: Lsn, max: usize) -> Vec<(Lsn, &[u8])> {
        self.raw.store().read_data(after.0, through.0, max)
    }

    /// The first index this replica's log keeps (entries before it were compacted away).
    pub fn first_index(&self) -> Lsn {
        Lsn(self.raw.store().first_index())
    }

    /// The term of the entry at `index`, if this replica knows it (kept, or just before the first kept).
    pub fn term_of(&self, index: Lsn) -> Option<u64> {
        self.raw.store().term_of(index.0)
    }

    /// Counters.
    pub fn stats(&self) -> GroupStats {
        self.stats
    }

    /// Forgets the entries up to `through`, which the driver's state covers durably (say, a checkpoint at or
    /// above it is on disk, and the entries it still reads back are after it). Clamped to what was applied;
    /// followers that need them later get a snapshot.
    pub fn compact(&mut self, through: Lsn) {
        // Raft reads its log from its applied index on: never compact past it.
        let through = through.0.min(self.applied).min(self.raw.raft.raft_log.applied);
        self.raw.mut_store().compact(through);
        // The membership before the log's start is no longer asked for: keep the one in force there on.
        if let Some(&start) = self.memberships.range(..=through).next_back().map(|(k, _)| k) {
            self.memberships = self.memberships.split_off(&start);
        }
    }

    /// Offers a snapshot for followers that need compacted entries ([`GroupOutput::SnapshotWanted`]): `state` is
    /// the application's state after every entry through `index` (at least [`Group::first_index`]` - 1`, at
    /// most [`Group::applied`]); the entries after `keep_after` through `index` that this replica still holds go
    /// with it (the application reads them back on the follower). Returns whether it was taken.
    pub fn offer_snapshot(&mut self, index: Lsn, keep_after: Lsn, state: Vec<u8>) -> bool {
        let first = self.raw.store().first_index();
        if index.0 + 1 < first || index.0 > self.applied || index.0 == 0 {
            return false;
        }
        let Some(term) = self.term_of(index) else { return false };
        let after = keep_after.0.clamp(first - 1, index.0);
        let Some(base_term) = self.term_of(Lsn(after)) else { return false };
        let entries = self
            .raw
            .store()
            .entries(after + 1, index.0 + 1, None, raft::GetEntriesContext::empty(false))
            .unwrap_or_default();
        let membership = self.membership_at(index).clone();
        let data = GroupSnapshot {
            index,
            term,
            compacted: Compacted { index: Lsn(after), term: base_term },
            entries: entries.iter().map(from_raft_entry).collect(),
            state,
            membership,
        };
        debug_assert!(data.consistent());
        let mut snapshot = Snapshot {
            data: postcard::to_allocvec(&data).expect("a snapshot serializes").into(),
            ..Default::default()
        };
        let metadata = snapshot.mut_metadata();
        metadata.index = index.0;
        metadata.term = term;
        metadata.set_conf_state(data.membership.to_raft());
        self.raw.mut_store().offer(snapshot);
        true
    }

    /// Messages dropped on receipt: garbage, from non-members, or of kinds this brick does not use.
    pub fn dropped_messages(&self) -> u64 {
        self.dropped
    }

    /// The local time at which [`Group::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        Some(self.next_tick_us)
    }

    /// Hands over the next output, if any. Drain after every input.
    pub fn poll_output(&mut self) -> Option<GroupOutput> {
        if self.outputs.is_empty() {
            // Proposals are taken without a Ready cycle, so that a burst of them shares one Write.
            self.pump();
        }
        self.outputs.pop_front()
    }

    /// Time passed: advances raft's logical clock by one tick if one is due. Never more than one, however late
    /// the call, and none while this replica withholds ticks to randomize its election timeout (module
    /// documentation).
    pub fn handle_timeout(&mut self, now_us: u64) {
        if now_us >= self.next_tick_us {
            if self.withhold > 0 && !self.is_leader() {
                self.withhold -= 1;
            } else {
                self.raw.tick();
            }
            self.next_tick_us = self.next_tick_us.saturating_add(self.tick_us);
            if self.next_tick_us <= now_us {
                self.next_tick_us = now_us.saturating_add(self.tick_us);
            }
        }
        self.pump();
    }

    /// A message from another replica, as its [`GroupOutput::Send`] produced it. Anything that fails the
    /// checksum, does not parse, is not from a voter to this replica, or is of a kind this brick does not use is
    /// dropped.
    pub fn handle_message(&mut self, _now_us: u64, bytes: &[u8]) {
        match self.decode(bytes) {
            Some(message) => {
                // Errors are raft declining the message (say, a response from a replica it has no progress
                // for): nothing to do.
                let _ = self.raw.step(message);
                self.pump();
            }
            None => self.dropped += 1,
        }
    }

    /// Proposes `data` (not empty: empty entries are raft's no-ops) for the log. Only the leader takes
    /// proposals; it returns the index and term the entry has. The entry is committed when
    /// [`GroupOutput::Committed`] reports that index with that term, and lost ([`GroupOutput::ProposalLost`])
    /// when another entry commits there or an entry of a later term commits before it, e.g. because this leader
    /// was deposed first. A proposer that crashes learns neither.
    ///
    /// Proposals are batched: the Write and the messages carrying them come out of the next
    /// [`Group::poll_output`].
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Proposal, ProposeError> {
        assert!(!data.is_empty(), "an empty proposal would be taken for a leader's no-op");
        if !self.is_leader() {
            let leader_hint = self.leader().filter(|l| *l != self.id);
            return Err(ProposeError::NotLeader { leader_hint });
        }
        match self.raw.propose(Vec::new(), data) {
            Ok(()) => {
                let index = self.raw.raft.raft_log.last_index();
                let term = self.raw.raft.term;
                let new = self.proposals.insert((index, term));
                assert!(new, "two proposals at index {index} in term {term}");
                Ok(Proposal { index: Lsn(index), term })
            }
            // A leader drops a proposal over `max_uncommitted_size`, and while it hands leadership over.
            Err(_) => Err(ProposeError::Busy),
        }
    }

    /// On a leader, each other replica's progress as raft tracks it: the last index it is known to hold
    /// (`matched`), and whether it is being sent a snapshot. Empty on a follower.
    pub fn followers(&self) -> Vec<FollowerProgress> {
        if !self.is_leader() {
            return Vec::new();
        }
        let mut out: Vec<FollowerProgress> = self
            .raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != self.id.0)
            .map(|(id, p)| FollowerProgress {
                id: ReplicaId(*id),
                matched: Lsn(p.matched),
                snapshot: p.state == raft::ProgressState::Snapshot,
            })
            .collect();
        out.sort_by_key(|f| f.id);
        out
    }

    /// Whether this replica leads and knows that replica `id` holds every entry of its log.
    pub fn caught_up(&self, id: ReplicaId) -> bool {
        let last = self.raw.raft.raft_log.last_index();
        self.is_leader() && self.raw.raft.prs().get(id.0).is_some_and(|p| p.matched == last)
    }

    /// The membership in force: as of the last entry applied (raft acts on a membership change once it is
    /// applied, on every replica).
    pub fn membership(&self) -> &Membership {
        self.memberships.values().next_back().expect("a group always has a membership")
    }

    /// The membership as of entry `index` (at or after the start of the history this replica keeps: its applied
    /// index at start, its last snapshot, or its compaction point; earlier indexes get the oldest it knows).
    pub fn membership_at(&self, index: Lsn) -> &Membership {
        self.memberships
            .range(..=index.0)
            .next_back()
            .or_else(|| self.memberships.iter().next())
            .map(|(_, m)| m)
            .expect("a group always has a membership")
    }

    /// The index from which the membership in force holds (the entry that changed it last, or the start of the
    /// history this replica keeps). A snapshot must be at least this recent for every member to accept it.
    pub fn membership_index(&self) -> Lsn {
        Lsn(*self.memberships.keys().next_back().expect("a group always has a membership"))
    }

    /// On a leader, proposes a membership change: one step is made at once; several make a joint change, which
    /// [`Group::change_membership`] with no step then leaves (a decision needs a majority of the old and of the
    /// new voters meanwhile). Refused while a change is not applied yet, or while a joint change is not left
    /// (and leaving one that is not joint). The change takes effect on each replica as it applies the entry.
    pub fn change_membership(&mut self, changes: &[MembershipChange]) -> Result<Proposal, ProposeError> {
        use raft::prelude::{ConfChangeTransition, ConfChangeType, ConfChangeV2};
        if !self.is_leader() {
            let leader_hint = self.leader().filter(|l| *l != self.id);
            return Err(ProposeError::NotLeader { leader_hint });
        }
        if self.raw.raft.has_pending_conf() || self.membership().is_joint() != changes.is_empty() {
            return Err(ProposeError::MembershipChanging);
        }
        let mut cc = ConfChangeV2::default();
        for change in changes {
            let (id, kind) = match *change {
                MembershipChange::AddVoter(id) => (id, ConfChangeType::AddNode),
                MembershipChange::AddLearner(id) => (id, ConfChangeType::AddLearnerNode),
                MembershipChange::Remove(id) => (id, ConfChangeType::RemoveNode),
            };
            cc.mut_changes().push(single_change(id.0, kind));
        }
        // One step: a simple change. Several: a joint one, left explicitly (raft's automatic leaving appends an
        // entry of its own, at an index the driver may have promised to something else).
        let transition = if changes.len() > 1 { ConfChangeTransition::Explicit } else { ConfChangeTransition::Auto };
        cc.set_transition(transition);
        match self.raw.propose_conf_change(Vec::new(), cc) {
            Ok(()) => Ok(Proposal { index: self.last_index(), term: self.term() }),
            Err(_) => Err(ProposeError::Busy),
        }
    }

    /// Whether this replica leads and knows that replica `id` holds every committed entry, and receives new ones
    /// as they come (raft replicates to it, not probing it or sending it a snapshot). Unlike
    /// [`Group::caught_up`], it holds while entries are in flight: a group whose leader proposes now and then
    /// (clock bounds, acknowledgements) may always have one in flight when it looks.
    pub fn holds_committed(&self, id: ReplicaId) -> bool {
        let committed = self.raw.raft.raft_log.committed;
        self.is_leader()
            && (self.raw.raft.prs().get(id.0))
                .is_some_and(|p| p.state == raft::ProgressState::Replicate && p.matched >= committed)
    }

    /// Campaigns at once instead of waiting for an election timeout (with pre-vote: a replica that cannot win, or
    /// whose peers still hear from a leader, disturbs nobody).
    pub fn campaign(&mut self) {
        if !self.is_leader() && self.membership().is_voter(self.id) {
            // An error is raft declining (say, a conf change not applied yet): the election timeout still runs.
            let _ = self.raw.campaign();
            self.pump();
        }
    }

    /// Tells raft whether a snapshot sent to `to` in parts ([`GroupConfig::report_snapshots_above`]) arrived
    /// whole: if it did, the follower's answer says whether it took it; if not, raft sends another later.
    pub fn report_snapshot(&mut self, to: ReplicaId, delivered: bool) {
        let status = if delivered { raft::SnapshotStatus::Finish } else { raft::SnapshotStatus::Failure };
        self.raw.report_snapshot(to.0, status);
        self.pump();
    }

    /// Hands leadership to replica `id` (raft's leader transfer): this leader takes no proposal until the
    /// transfer ends, and `id` campaigns at once when it has the whole log. Raft gives up after an election
    /// timeout if it did not happen.
    pub fn transfer_leadership(&mut self, id: ReplicaId) {
        if self.is_leader() && id != self.id {
            self.raw.transfer_leader(id.0);
        }
    }

    /// Whether this leader is handing leadership over.
    pub fn transferring(&self) -> bool {
        self.is_leader() && self.raw.raft.lead_transferee.is_some()
    }

    /// The driver made every [`GroupOutput::Write`] up to the one numbered `ready` durable.
    pub fn handle_written(&mut self, ready: u64) {
        assert!(
            ready <= self.last_write,
            "Write {ready} reported durable, but the last handed out is {}",
            self.last_write
        );
        if ready <= self.written {
            return;
        }
        self.written = ready;
        self.raw.on_persist_ready(ready);
        if let Some((_, index, term)) = self.restoring.take_if(|(number, ..)| *number <= ready) {
            // The snapshot is durable: the application's state is its state. Raft hands out committed entries
            // after it from the next Ready on.
            self.applied = index;
            self.applied_term = self.applied_term.max(term);
            // Raft's own applied index moves with it now: raft reads entries from there on (a campaign looks for
            // unapplied membership changes), and those before the snapshot are not in the log.
            self.raw.advance_apply_to(index);
            self.stats.snapshots_installed += 1;
            let later = self.proposals.split_off(&(index + 1, 0));
            for (index, term) in std::mem::replace(&mut self.proposals, later) {
                self.outputs.push_back(GroupOutput::ProposalLost { index: Lsn(index), term });
            }
            self.outputs.push_back(GroupOutput::Restored { index: Lsn(index) });
        }
        let later = self.held.split_off(&(ready + 1));
        let released = std::mem::replace(&mut self.held, later);
        for message in released.into_values().flatten() {
            self.send(message);
        }
        // The leader's own persistence may commit entries; a follower may now hand out entries committed earlier.
        self.pump();
    }

    /// Runs raft's Ready cycle until it has nothing more to say.
    fn pump(&mut self) {
        while self.raw.has_ready() {
            let mut ready = self.raw.ready();
            self.note_role();
            // A leader's messages may leave before its own Write is durable.
            for message in ready.take_messages() {
                self.send(message);
            }
            // The storage view takes the Write before raft is advanced past this Ready: raft reads it back.
            let snapshot = (!ready.snapshot().is_empty()).then(|| self.take_snapshot(ready.snapshot()));
            let entries = ready.take_entries();
            self.raw.mut_store().append(&entries);
            let hard_state = ready.hs().cloned();
            if let Some(hs) = &hard_state {
                self.raw.mut_store().set_hard_state(hs.clone());
            }
            for entry in ready.take_committed_entries() {
                self.deliver(entry);
            }
            // (A membership change delivered in a later Ready than the commit that covered it has no hard state
            // of its own: raft's current one is written then.)
            let membership_passed = self.membership_index() > self.stored.1;
            let written = !entries.is_empty() || snapshot.is_some();
            let hard_state = (hard_state.or_else(|| membership_passed.then(|| self.raw.raft.hard_state())))
                .map(|hs| from_raft_hard_state(&hs))
                .filter(|hs| written || membership_passed || (hs.term, hs.vote) != self.stored.0);
            if let Some(hs) = &hard_state {
                self.stored = ((hs.term, hs.vote), hs.commit);
            }
            let held = ready.take_persisted_messages();
            let number = ready.number();
            self.raw.advance_append_async(ready);
            for to in std::mem::take(&mut self.snapshots_out) {
                // The snapshot left; the follower's answer tells raft whether it arrived (if it did not, the
                // follower rejects the next append, and raft sends a snapshot again).
                self.raw.report_snapshot(to, raft::SnapshotStatus::Finish);
            }
            if let Some(s) = &snapshot {
                self.restoring = Some((number, s.index.0, s.term));
            }
            if written || hard_state.is_some() {
                self.last_write = number;
                self.outputs.push_back(GroupOutput::Write {
                    ready: number,
                    snapshot: snapshot.map(Box::new),
                    entries: entries.iter().map(from_raft_entry).collect(),
                    hard_state,
                });
            } else if self.written == self.last_write {
                // Nothing to write and nothing outstanding: tell raft this Ready is "persisted", or its record
                // of it waits for the next Write (a leader's heartbeat Readies would pile up meanwhile).
                self.raw.on_persist_ready(number);
            }
            if self.written == self.last_write {
                for message in held {
                    self.send(message);
                }
            } else if !held.is_empty() {
                // These promise the state of this Ready, all of which is in Writes up to the last one.
                self.held.entry(self.last_write).or_default().extend(held);
            }
            self.raw.advance_apply_to(self.applied);
        }
        self.note_role();
        if self.raw.store().take_wanted() {
            self.stats.snapshots_wanted += 1;
            self.outputs.push_back(GroupOutput::SnapshotWanted);
        }
        let elapsed = self.raw.raft.election_elapsed;
        if elapsed < self.election_elapsed {
            self.new_election_round();
        }
        self.election_elapsed = elapsed;
    }

    /// raft's election clock restarted: draw how many ticks to withhold from it this round.
    fn new_election_round(&mut self) {
        self.election_round += 1;
        let draw = xxhash_rust::xxh3::xxh3_64_with_seed(&self.election_round.to_le_bytes(), self.election_seed);
        self.withhold = (draw % self.election_ticks.max(1) as u64) as usize;
    }

    /// A snapshot raft restored from the leader (validated on receipt): the view takes its entries, and the
    /// driver gets it with the Write.
    fn take_snapshot(&mut self, snapshot: &Snapshot) -> GroupSnapshot {
        let data: GroupSnapshot = postcard::from_bytes(&snapshot.data).expect("validated when received");
        // Raft took the snapshot's membership (its metadata's, checked equal on receipt): the history restarts.
        self.memberships = BTreeMap::from([(data.index.0, data.membership.clone())]);
        let base = (data.compacted.index.0, data.compacted.term);
        self.raw.mut_store().restore(base, data.entries.iter().map(to_raft_entry).collect());
        data
    }

    /// Hands out one committed entry.
    fn deliver(&mut self, entry: RaftEntry) {
        assert_eq!(entry.index, self.applied + 1, "committed entries out of order");
        self.applied = entry.index;
        // Proposals at earlier indexes cannot be pending: their index was delivered already.
        let later = self.proposals.split_off(&(entry.index + 1, 0));
        let settled = std::mem::replace(&mut self.proposals, later);
        for (index, term) in settled {
            assert_eq!(index, entry.index, "a proposal outlived its index");
            if term != entry.term {
                self.outputs.push_back(GroupOutput::ProposalLost { index: Lsn(index), term });
            }
        }
        // An entry of a later term rules out every proposal of an earlier term after it: a log holding one of
        // those holds nothing of a later term before it (log matching). Committed terms never decrease, and a
        // proposal's term is at least that of every entry this replica has delivered, so this only finds
        // anything on the first entry of a term.
        if entry.term > self.applied_term {
            self.applied_term = entry.term;
            let outputs = &mut self.outputs;
            self.proposals.retain(|&(index, term)| {
                let lost = term < entry.term;
                if lost {
                    outputs.push_back(GroupOutput::ProposalLost { index: Lsn(index), term });
                }
                !lost
            });
        }
        if entry.get_entry_type() != EntryType::EntryNormal {
            self.apply_membership_change(&entry);
        } else if !entry.data.is_empty() {
            self.outputs.push_back(GroupOutput::Committed {
                index: Lsn(entry.index),
                term: entry.term,
                data: entry.data.to_vec(),
            });
        }
    }

    /// A committed membership change takes effect (on every replica, as it applies the entry; at a restart, again
    /// for those after the driver's applied index, whose membership predates them).
    fn apply_membership_change(&mut self, entry: &RaftEntry) {
        use raft::prelude::{ConfChange, ConfChangeV2};
        let change = match entry.get_entry_type() {
            EntryType::EntryConfChange => ConfChange::parse_from_bytes(&entry.data).map(|c| {
                let mut v2 = ConfChangeV2::default();
                v2.mut_changes().push(single_change(c.node_id, c.get_change_type()));
                v2
            }),
            _ => ConfChangeV2::parse_from_bytes(&entry.data),
        };
        // Raft checked the change when its leader took it, against the membership every replica has at this
        // index: a change that does not apply means a damaged log, and taking it would split the group's view.
        let change =
            change.unwrap_or_else(|e| panic!("{:?}: membership entry {} does not parse: {e}", self.id, entry.index));
        let state = self
            .raw
            .apply_conf_change(&change)
            .unwrap_or_else(|e| panic!("{:?}: membership entry {} does not apply: {e}", self.id, entry.index));
        self.memberships.insert(entry.index, Membership::from_raft(&state));
        self.stats.membership_changes += 1;
    }

    /// Reports a change of leader, term or role.
    fn note_role(&mut self) {
        let state = self.raw.raft.state;
        if state != self.state {
            match (self.state, state) {
                (StateRole::Follower, StateRole::PreCandidate | StateRole::Candidate) => self.stats.campaigns += 1,
                (StateRole::Leader, _) if self.term() == self.role.1 => self.stats.quorum_lost += 1,
                (StateRole::Leader, _) => self.stats.deposed += 1,
                _ => {}
            }
            self.state = state;
        }
        let role = (self.leader(), self.term(), self.is_leader());
        if role != self.role {
            self.role = role;
            self.outputs.push_back(GroupOutput::Role { leader: role.0, term: role.1, is_leader: role.2 });
        }
    }

    /// Encodes a message for a peer: protobuf, then a checksum of it.
    fn send(&mut self, message: RaftMessage) {
        let Some(to) = replica(message.to) else { return };
        let mut bytes = message.write_to_bytes().expect("encoding a raft message into a Vec cannot fail");
        let checksum = xxhash_rust::xxh3::xxh3_64(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        let mut in_parts = false;
        if message.get_msg_type() == MessageType::MsgSnapshot {
            self.stats.snapshots_sent += 1;
            in_parts = bytes.len() > self.report_snapshots_above;
            if !in_parts {
                self.snapshots_out.push(message.to);
            }
        }
        self.outputs.push_back(GroupOutput::Send { to, bytes, in_parts });
    }

    /// The message in `bytes`, if it is one this replica should step.
    fn decode(&self, bytes: &[u8]) -> Option<RaftMessage> {
        let message = parse_message(bytes)?;
        // A replica that is not (yet) a member hears from whoever leads: its membership may be out of date (say,
        // the configured voters of a group that has changed since); raft counts only members' answers anyway.
        let membership = self.membership();
        let from = ReplicaId(message.from);
        let from_member = from != self.id && (membership.contains(from) || !membership.contains(self.id));
        let accepted = ACCEPTED.contains(&message.get_msg_type());
        let whole = message.get_msg_type() != MessageType::MsgSnapshot || snapshot_is_whole(&message);
        (message.to == self.id.0 && message.from != raft::INVALID_ID && from_member && accepted && whole)
            .then_some(message)
    }
}

/// The message in `bytes`, if they pass the checksum [`Group::send`] appended and parse.
fn parse_message(bytes: &[u8]) -> Option<RaftMessage> {
    let split = bytes.len().checked_sub(CHECKSUM_LEN)?;
    let (body, checksum) = bytes.split_at(split);
    let checksum = u64::from_le_bytes(checksum.try_into().ok()?);
    if xxhash_rust::xxh3::xxh3_64(body) != checksum {
        return None;
    }
    RaftMessage::parse_from_bytes(body).ok()
}

/// Whether a snapshot message's data is a [`GroupSnapshot`] that agrees with itself and with the metadata (raft
/// restores what it is given; a bad snapshot must be dropped before it is stepped).
fn snapshot_is_whole(message: &RaftMessage) -> bool {
    let snapshot = message.get_snapshot();
    let meta = snapshot.get_metadata();
    match postcard::from_bytes::<GroupSnapshot>(&snapshot.data) {
        Ok(data) => {
            data.consistent()
                && data.index.0 == meta.index
                && data.term == meta.term
                && data.membership == Membership::from_raft(meta.get_conf_state())
        }
        Err(_) => false,
    }
}

/// A one-line description of an encoded message (kind, sender, receiver, term, log position, rejection), for
/// traces; `None` if the bytes are not a message.
pub fn describe_message(bytes: &[u8]) -> Option<String> {
    let m = parse_message(bytes)?;
    Some(format!(
        "{:?} {}->{} term {} index {} log_term {} commit {} entries {} reject {}",
        m.get_msg_type(),
        m.from,
        m.to,
        m.term,
        m.index,
        m.log_term,
        m.commit,
        m.entries.len(),
        m.reject
    ))
}

fn check_config(config: &GroupConfig) -> Result<(), GroupError> {
    let bad = |s: String| Err(GroupError::Config(s));
    if config.id.0 == 0 || config.voters.iter().any(|v| v.0 == 0) {
        return bad("replica id 0 is reserved".into());
    }
    let mut sorted = config.voters.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != config.voters.len() {
        return bad(format!("duplicate voters in {:?}", config.voters));
    }
    if config.tick_us == 0 {
        return bad("tick_us is 0".into());
    }
    Ok(())
}

fn check_durable(durable: &DurableState) -> Result<(), GroupError> {
    let bad = |s: String| Err(GroupError::Durable(s));
    let hs = &durable.hard_state;
    let base = durable.compacted.unwrap_or_default();
    let mut previous_term = base.term;
    for (k, e) in durable.entries.iter().enumerate() {
        if e.index.0 != base.index.0 + k as u64 + 1 {
            return bad(format!(
                "entry {} at position {k}: the log must start after the compaction point {} and be consecutive",
                e.index.0, base.index.0
            ));
        }
        if e.term < previous_term || e.term > hs.term {
            return bad(format!(
                "entry {} has term {} after {previous_term}, hard state term {}",
                e.index.0, e.term, hs.term
            ));
        }
        previous_term = e.term;
    }
    let last = base.index.0 + durable.entries.len() as u64;
    if base.index > hs.commit || base.index > durable.applied {
        return bad(format!(
            "compacted through {}, beyond commit {} or applied {}",
            base.index.0, hs.commit.0, durable.applied.0
        ));
    }
    if hs.commit.0 > last {
        return bad(format!("commit {} beyond the last entry {last}", hs.commit.0));
    }
    Ok(())
}

fn single_change(id: u64, kind: raft::prelude::ConfChangeType) -> raft::prelude::ConfChangeSingle {
    let mut single = raft::prelude::ConfChangeSingle { node_id: id, ..Default::default() };
    single.set_change_type(kind);
    single
}

fn replica(id: u64) -> Option<ReplicaId> {
    (id != raft::INVALID_ID).then_some(ReplicaId(id))
}

fn to_raft_entry(e: &Entry) -> RaftEntry {
    let entry_type = match e.kind {
        EntryKind::Normal => EntryType::EntryNormal,
        EntryKind::ConfChange => EntryType::EntryConfChange,
        EntryKind::ConfChangeV2 => EntryType::EntryConfChangeV2,
    };
    RaftEntry { entry_type, index: e.index.0, term: e.term, data: e.data.clone().into(), ..Default::default() }
}

fn from_raft_entry(e: &RaftEntry) -> Entry {
    Entry {
        index: Lsn(e.index),
        term: e.term,
        kind: match e.get_entry_type() {
            EntryType::EntryNormal => EntryKind::Normal,
            EntryType::EntryConfChange => EntryKind::ConfChange,
            EntryType::EntryConfChangeV2 => EntryKind::ConfChangeV2,
        },
        data: e.data.to_vec(),
    }
}

fn to_raft_hard_state(hs: &HardState) -> RaftHardState {
    RaftHardState {
        term: hs.term,
        vote: hs.vote.map_or(raft::INVALID_ID, |v| v.0),
        commit: hs.commit.0,
        ..Default::default()
    }
}

fn from_raft_hard_state(hs: &RaftHardState) -> HardState {
    HardState { term: hs.term, vote: replica(hs.vote), commit: Lsn(hs.commit) }
}
