//! Clock tokens (docs/design/honeypot.md §4): a client that saw writes buffered at one coordinator keeps
//! read-your-writes and monotonic reads when its next transaction runs at another coordinator, of its node, of
//! another node or of another DC.
//!
//! A buffered write has no commit vector until its handover, so the clock a client gets back cannot cover it. The
//! reply carries a [`BufferToken`] instead, naming the coordinator whose buffer the client depends on; AntidoteDB's
//! clients carry it back untouched, inside the opaque clock bytes. A start whose clock names another coordinator's
//! buffer first asks that coordinator ([`Message::FlushBuffer`]) to hand everything buffered so far over — a
//! round of handovers takes every pending component, so the round after the question covers whatever the client
//! saw — and to answer with the join of its handovers' commits ([`Message::BufferFlushed`]). The start's clock is
//! raised to that vector and the start proceeds as Cure's does: at another DC it waits, as for any clock, until the
//! DC's stable snapshot covers the handover replicated there. A token of the starting coordinator itself is
//! satisfied at once (its transactions read the buffer, or wait for its handover if they do not).
//!
//! The question is sent again until answered (the caching node may be down: a start then waits for it, up to its
//! deadline, as its client would have to for a buffer only that node holds). A coordinator of an earlier run of
//! the node is answered by the coordinator of the same shard now, which recovered its buffer
//! (`coordinator::durable`): its answer covers what the earlier run handed over too (the log keeps the join).
//!
//! Invariant (tested in the simulator with sessions moving between nodes and DCs): a reply's clock with its token
//! covers everything the transaction read, once the token's answer is joined in.

use super::{ClientResponse, Coordinator, PendingStart};
use crate::{Address, CoordinatorId, DcId, Message, VectorClock};
use serde::{Deserialize, Serialize};

/// A client's dependency on a coordinator's write buffer: the client saw writes buffered there, possibly not at
/// their owners yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BufferToken {
    /// The coordinator's DC.
    pub dc: DcId,
    /// The coordinator (an earlier run's is answered by its successor on the same shard).
    pub coordinator: CoordinatorId,
}

/// The causal clock a client carries from one transaction to the next: a vector clock and, with buffered writes,
/// the write buffer it depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientClock {
    /// The largest commit or snapshot vector the client has seen.
    pub vector: VectorClock,
    /// The write buffer whose handover it must see, if any.
    pub token: Option<BufferToken>,
}

impl From<VectorClock> for ClientClock {
    fn from(vector: VectorClock) -> Self {
        ClientClock { vector, token: None }
    }
}

/// A start's question to the coordinator its clock's token names.
#[derive(Clone, Debug)]
pub(super) struct Question {
    id: u64,
    to: Address,
    sent_us: u64,
}

impl Coordinator {
    /// Starts whose client's clock named another coordinator's buffer (a session that moved).
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Where this coordinator is asked about its buffer, from any DC.
    fn own_address(&self) -> Address {
        Address::DcCoordinator(self.config.dc, self.id)
    }

    /// Sends a start's question to the buffer its clock's token names, if it is another coordinator's.
    pub(super) fn ask_for_handover(&mut self, now_us: u64, start: &mut PendingStart, token: Option<BufferToken>) {
        let Some(token) = token.filter(|t| (t.dc, t.coordinator) != (self.config.dc, self.id)) else { return };
        if crate::bugs::has(&self.config, crate::Bug::IgnoreBufferTokens) {
            return;
        }
        let id = self.next_fetch;
        self.next_fetch += 1;
        let to = Address::DcCoordinator(token.dc, token.coordinator);
        let question = Question { id, to, sent_us: now_us };
        self.moves += 1;
        self.send_question(&question);
        start.question = Some(question);
    }

    fn send_question(&mut self, q: &Question) {
        let from = self.own_address();
        self.emit(super::CoordinatorOutput::Send(crate::Envelope {
            from,
            to: q.to,
            msg: Message::FlushBuffer { query: q.id },
        }));
    }

    /// Asks again the questions unanswered for a retry interval (a message lost, a node down).
    pub(super) fn ask_again(&mut self, now_us: u64) {
        let interval = self.config.retry_interval_us.max(1);
        let due: Vec<Question> = (self.starts.iter_mut())
            .filter_map(|s| s.question.as_mut())
            .filter(|q| now_us >= q.sent_us + interval)
            .map(|q| {
                q.sent_us = now_us;
                q.clone()
            })
            .collect();
        for q in &due {
            self.send_question(q);
        }
    }

    /// When a start's unanswered question is next asked again.
    pub(super) fn next_question_us(&self) -> Option<u64> {
        let interval = self.config.retry_interval_us.max(1);
        self.starts.iter().filter_map(|s| s.question.as_ref()).map(|q| q.sent_us + interval).min()
    }

    /// Another coordinator asks for this one's buffer to be handed over: answered once every round that takes
    /// what is buffered now has ended.
    pub(super) fn on_flush_asked(&mut self, now_us: u64, from: Address, query: u64) {
        let Some(b) = &mut self.buffering else {
            // Nothing was ever buffered here (a shard that buffered keeps a log, and recovers a buffer from it).
            return self.answer(from, query);
        };
        let after_round = b.request_flush();
        if b.rounds_done() >= after_round {
            return self.answer(from, query);
        }
        // (A question asked again while its round runs is answered once.)
        if !b.asked.iter().any(|(to, q, _)| (*to, *q) == (from, query)) {
            b.asked.push((from, query, after_round));
        }
        self.start_round(now_us);
    }

    /// Answers the questions whose rounds have ended.
    pub(super) fn answer_asked(&mut self) {
        let Some(b) = &mut self.buffering else { return };
        let done = b.rounds_done();
        let (ready, waiting) = std::mem::take(&mut b.asked).into_iter().partition(|(_, _, after)| *after <= done);
        b.asked = waiting;
        for (to, query, _) in ready {
            self.answer(to, query);
        }
    }

    fn answer(&mut self, to: Address, query: u64) {
        if let Some(b) = &mut self.buffering {
            b.stats.asked += 1;
        }
        let handed = (self.buffering.as_ref().and_then(|b| b.handed().cloned()))
            .unwrap_or_else(|| VectorClock::zero(self.config.vector_len()));
        let from = self.own_address();
        self.emit(super::CoordinatorOutput::Send(crate::Envelope {
            from,
            to,
            msg: Message::BufferFlushed { query, handed },
        }));
    }

    /// The answer to a start's question: its clock rises to the handovers' join, and it may begin.
    pub(super) fn on_flushed(&mut self, now_us: u64, query: u64, handed: VectorClock) {
        let Some(start) = self.starts.iter_mut().find(|s| s.question.as_ref().is_some_and(|q| q.id == query)) else {
            return;
        };
        if !handed.has_dcs(self.config.vector_len()) {
            return;
        }
        start.question = None;
        start.clock.merge_max(&handed);
        self.release_starts(now_us);
    }

    /// The token a reply carries: this coordinator's, while its buffer holds anything the reply's clock may not
    /// cover (pending, in a round, or handed over above `clock`).
    pub(super) fn token_for(&self, clock: &VectorClock) -> Option<BufferToken> {
        let b = self.buffering.as_ref()?;
        let covered = b.is_empty() && b.handed().is_none_or(|h| h.le(clock));
        (!covered).then_some(BufferToken { dc: self.config.dc, coordinator: self.id })
    }

    /// Sets a successful reply's token.
    pub(super) fn with_token(&self, mut response: ClientResponse) -> ClientResponse {
        match &mut response {
            ClientResponse::Started { snapshot: clock, token, .. }
            | ClientResponse::Committed { commit: clock, token }
            | ClientResponse::StaticValues { commit: clock, token, .. } => *token = self.token_for(clock),
            ClientResponse::Values(_) | ClientResponse::Updated | ClientResponse::Aborted => {}
        }
        response
    }
}
