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
//! The question is sent again, backing off from one retry interval, until answered or the start's deadline passes
//! (the caching node may be down: a start then waits for it, up to its deadline, as its client would have to for a
//! buffer only that node holds). A clock may carry several tokens (a client that merged several sessions' clocks):
//! a start asks each and begins once all have answered. A coordinator of an earlier run of the node is answered by
//! the coordinator of the same shard now, which recovered its buffer (`coordinator::durable`): its answer covers
//! what the earlier run handed over too (the log keeps the join).
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
/// the write buffers it depends on (one from a reply; more where a client merged the clocks of several sessions).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientClock {
    /// The largest commit or snapshot vector the client has seen.
    pub vector: VectorClock,
    /// The write buffers whose handovers it must see, without repeats.
    pub tokens: Vec<BufferToken>,
}

impl ClientClock {
    /// Most tokens a clock may carry: a client merges few sessions' clocks, and each token costs a start a question.
    pub const MAX_TOKENS: usize = 64;

    /// A clock with one token, or none.
    pub fn new(vector: VectorClock, token: Option<BufferToken>) -> Self {
        ClientClock { vector, tokens: token.into_iter().collect() }
    }

    /// Raises this clock to include `other`: the entry-wise maximum of the vectors and both clocks' tokens. An
    /// empty vector counts as none; a vector of another number of DCs replaces this one (the DC configuration
    /// changed, and the older clock no longer applies).
    pub fn merge(&mut self, other: &ClientClock) {
        if !other.vector.is_empty() {
            if self.vector.len() == other.vector.len() {
                self.vector.merge_max(&other.vector);
            } else {
                self.vector = other.vector.clone();
            }
        }
        for t in &other.tokens {
            if !self.tokens.contains(t) {
                self.tokens.push(*t);
            }
        }
    }
}

impl From<VectorClock> for ClientClock {
    fn from(vector: VectorClock) -> Self {
        ClientClock { vector, tokens: Vec::new() }
    }
}

/// A start's question to the coordinator its clock's token names.
#[derive(Clone, Debug)]
pub(super) struct Question {
    id: u64,
    to: Address,
    /// When it is asked again, backing off as decisions do (`super::backoff`).
    again_us: u64,
    resends: u32,
}

impl Coordinator {
    /// Starts whose client's clock named another coordinator's buffer (a session that moved).
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Sends a question or an answer to another coordinator, of any DC, from this one's address there.
    fn tell(&mut self, to: Address, msg: Message) {
        let from = Address::DcCoordinator(self.config.dc, self.id);
        self.emit(super::CoordinatorOutput::Send(crate::Envelope { from, to, msg }));
    }

    /// Whether a token names this coordinator's buffer: its own, or that of an earlier run of its node on the same
    /// shard, whose buffer this one recovered (`coordinator::durable`).
    fn is_own(&self, t: &BufferToken) -> bool {
        let c = t.coordinator;
        t.dc == self.config.dc && c.node() == self.id.node() && c.shard() == self.id.shard()
    }

    /// Refuses tokens that name no DC of the cluster, or too many of them.
    pub(super) fn validate_tokens(&self, tokens: &[BufferToken]) -> Result<(), super::TxError> {
        if tokens.len() > ClientClock::MAX_TOKENS {
            let n = tokens.len();
            return Err(super::TxError::InvalidClock(format!(
                "{n} buffer tokens, more than {}",
                ClientClock::MAX_TOKENS
            )));
        }
        // (Which nodes a DC has is the node's business: a question to a node that does not exist goes nowhere,
        // and the start times out.)
        match tokens.iter().find(|t| t.dc.0 >= self.config.dcs) {
            Some(t) => Err(super::TxError::InvalidClock(format!(
                "a buffer token names DC {}, and the cluster has {} DCs",
                t.dc.0, self.config.dcs
            ))),
            None => Ok(()),
        }
    }

    /// Sends a start's questions to the buffers its clock's tokens name, other than this coordinator's.
    pub(super) fn ask_for_handovers(&mut self, now_us: u64, start: &mut PendingStart, tokens: Vec<BufferToken>) {
        if crate::bugs::has(&self.config, crate::Bug::IgnoreBufferTokens) {
            return;
        }
        let others: Vec<BufferToken> = tokens.into_iter().filter(|t| !self.is_own(t)).collect();
        for token in others {
            let id = self.next_fetch;
            self.next_fetch += 1;
            let to = Address::DcCoordinator(token.dc, token.coordinator);
            let again_us = now_us + super::backoff(self.config.retry_interval_us, 0);
            let question = Question { id, to, again_us, resends: 0 };
            self.send_question(&question);
            start.questions.push(question);
        }
        if !start.questions.is_empty() {
            self.moves += 1;
        }
    }

    fn send_question(&mut self, q: &Question) {
        self.tell(q.to, Message::FlushBuffer { query: q.id });
    }

    /// Asks again the questions left unanswered (a message lost, a node down).
    pub(super) fn ask_again(&mut self, now_us: u64) {
        let interval = self.config.retry_interval_us;
        let due: Vec<Question> = (self.starts.iter_mut())
            .flat_map(|s| s.questions.iter_mut())
            .filter(|q| now_us >= q.again_us)
            .map(|q| {
                q.resends += 1;
                q.again_us = now_us + super::backoff(interval, q.resends);
                q.clone()
            })
            .collect();
        for q in &due {
            self.send_question(q);
        }
    }

    /// When a start's unanswered question is next asked again.
    pub(super) fn next_question_us(&self) -> Option<u64> {
        self.starts.iter().flat_map(|s| &s.questions).map(|q| q.again_us).min()
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
        self.tell(to, Message::BufferFlushed { query, handed });
    }

    /// The answer to a start's question: its clock rises to the handovers' join, and it may begin.
    pub(super) fn on_flushed(&mut self, now_us: u64, query: u64, handed: VectorClock) {
        let Some(start) = self.starts.iter_mut().find(|s| s.questions.iter().any(|q| q.id == query)) else {
            return;
        };
        if !handed.has_dcs(self.config.vector_len()) {
            return;
        }
        start.questions.retain(|q| q.id != query);
        start.clock.merge_max(&handed);
        if start.questions.is_empty() {
            self.release_starts(now_us);
        }
    }

    /// The token a reply carries: this coordinator's, while its buffer holds anything the reply's clock may not
    /// cover (pending, in a round, or handed over above `clock`: the components still read from the buffer after
    /// their handover are all below `handed`).
    pub(super) fn token_for(&self, clock: &VectorClock) -> Option<BufferToken> {
        let b = self.buffering.as_ref()?;
        let covered = !b.holds_pending() && b.handed().is_none_or(|h| h.le(clock));
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
