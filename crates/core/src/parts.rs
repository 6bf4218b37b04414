//! Large Raft messages (snapshots: a partition's whole state) between the replicas of a group, in parts.
//!
//! A snapshot can be far larger than a frame of the node-to-node link, and sent whole it would hold up every other
//! message on that link (the heartbeats of the other groups among them) until it is through. So a replica sends a
//! snapshot larger than [`crate::Config::raft_part_bytes`] as a *stream* of parts
//! ([`ReplicaMessage::RaftPart`]), at most [`WINDOW`] parts unacknowledged at a time: the receiver acknowledges
//! how much of the stream it holds ([`ReplicaMessage::RaftPartAck`]) and hands the message to its group once it
//! holds all of it. Other messages go between the parts. The group hears whether the snapshot arrived when the
//! stream ends ([`crate::group::Group::report_snapshot`]), not when it starts: until then raft sends that follower
//! no other snapshot, so a long transfer is not restarted by each of the follower's refusals of appends.
//!
//! Losses (a link that broke and came back) are repaired by going back: no progress for a resend interval
//! ([`crate::Config::resend_after_us`]) sends again from what the receiver holds, and a receiver that lost the
//! stream (it restarted) answers a part from its middle with "I hold nothing", which starts it again. After
//! [`GIVE_UP_AFTER_RESENDS`] intervals without progress the stream is dropped at either end (Raft then sends
//! another snapshot). A newer stream
//! to the same node replaces an older one (Raft's newer snapshot supersedes it); a receiver that gets a part of a
//! stream it does not know, not at its start, ignores it.
//!
//! Both ends hold one stream's bytes whole (the leader loaded the checkpoint, the follower installs it whole), so
//! memory is what a snapshot costs already; what parts remove is the frame limit and the link's stall.

use crate::message::ReplicaMessage;
use crate::topology::NodeIndex;
use std::collections::BTreeMap;

/// Parts in flight per stream, unacknowledged.
pub const WINDOW: u64 = 4;

/// A stream that made no progress for this many resend intervals is dropped, at either end.
pub const GIVE_UP_AFTER_RESENDS: u64 = 60;

#[derive(Debug)]
struct Outgoing {
    stream: u64,
    /// The sender's name for what the stream carries (the Raft id of the replica it goes to).
    tag: u64,
    bytes: Vec<u8>,
    /// Bytes sent (from the start), and acknowledged by the receiver.
    sent: u64,
    acked: u64,
    /// When the receiver last acknowledged more, or the stream started.
    progress_us: u64,
    /// When the stream was last sent from `acked` on (no progress since: send again after `RESEND_AFTER_US`).
    resent_us: u64,
}

#[derive(Debug)]
struct Incoming {
    stream: u64,
    total: u64,
    bytes: Vec<u8>,
    progress_us: u64,
}

/// Counters of the streams.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartStats {
    /// Streams started, and of them delivered whole to the receiver's group (as the receiver counts them).
    pub streams_sent: u64,
    /// Streams received whole.
    pub streams_received: u64,
    /// Parts sent (again included).
    pub parts_sent: u64,
    /// Times a stream was sent again from the receiver's position (a loss, or no progress).
    pub resends: u64,
    /// Streams dropped without progress (either end).
    pub abandoned: u64,
}

/// The streams of one replica: to and from the replicas of its group on other nodes.
#[derive(Debug, Default)]
pub struct Parts {
    part_bytes: usize,
    resend_after_us: u64,
    next_stream: u64,
    outgoing: BTreeMap<NodeIndex, Outgoing>,
    incoming: BTreeMap<NodeIndex, Incoming>,
    /// Outgoing streams that ended since [`Parts::take_ended`]: their tags, and whether the receiver got all.
    ended: Vec<(u64, bool)>,
    stats: PartStats,
}

impl Parts {
    /// Streams in parts of `part_bytes` (at least 1), sent again from the receiver's position after
    /// `resend_after_us` without progress.
    pub fn new(part_bytes: usize, resend_after_us: u64) -> Self {
        Self { part_bytes: part_bytes.max(1), resend_after_us: resend_after_us.max(1), ..Self::default() }
    }

    fn give_up_after_us(&self) -> u64 {
        self.resend_after_us.saturating_mul(GIVE_UP_AFTER_RESENDS)
    }

    /// Starts a stream of `bytes` to node `to`, named `tag` for [`Parts::take_ended`] (replacing any stream to that
    /// node, which ends undelivered); returns the first parts to send.
    pub fn send(&mut self, now_us: u64, to: NodeIndex, tag: u64, bytes: Vec<u8>) -> Vec<ReplicaMessage> {
        let stream = self.next_stream;
        self.next_stream += 1;
        self.stats.streams_sent += 1;
        let out = Outgoing { stream, tag, bytes, sent: 0, acked: 0, progress_us: now_us, resent_us: now_us };
        if let Some(replaced) = self.outgoing.insert(to, out) {
            self.ended.push((replaced.tag, false));
        }
        self.fill(to)
    }

    /// The outgoing streams that ended since the last call: each one's tag, and whether the receiver got it whole
    /// (else it was replaced or given up).
    pub fn take_ended(&mut self) -> Vec<(u64, bool)> {
        std::mem::take(&mut self.ended)
    }

    /// The receiver's acknowledgement of stream `stream`: it holds its first `received` bytes. Returns the parts to
    /// send next (again from `received` if it holds less than was sent).
    pub fn on_ack(&mut self, now_us: u64, from: NodeIndex, stream: u64, received: u64) -> Vec<ReplicaMessage> {
        let Some(out) = self.outgoing.get_mut(&from).filter(|o| o.stream == stream) else { return Vec::new() };
        if received >= out.bytes.len() as u64 {
            let done = self.outgoing.remove(&from).expect("found");
            self.ended.push((done.tag, true));
            return Vec::new();
        }
        if received > out.acked {
            out.acked = received;
            out.progress_us = now_us;
        } else if received < out.acked {
            // The receiver lost what it held (it restarted): start again from what it holds now.
            out.acked = received;
            out.sent = received;
            out.progress_us = now_us;
            self.stats.resends += 1;
        }
        // An acknowledgement lags what was sent by up to the window; a lost part shows only as no progress, which
        // `handle_timeout` repairs.
        self.fill(from)
    }

    /// A part from node `from`. Returns the acknowledgement to send back, and the whole message once this part
    /// completes it.
    pub fn on_part(
        &mut self,
        now_us: u64,
        from: NodeIndex,
        stream: u64,
        offset: u64,
        total: u64,
        bytes: Vec<u8>,
    ) -> (Option<ReplicaMessage>, Option<Vec<u8>>) {
        let known = self.incoming.get(&from).is_some_and(|i| i.stream == stream);
        if !known {
            if total == 0 {
                return (None, None);
            }
            if offset != 0 {
                // The middle of a stream this end dropped or never saw: the sender starts it again.
                return (Some(ReplicaMessage::RaftPartAck { stream, received: 0 }), None);
            }
            let incoming = Incoming { stream, total, bytes: Vec::new(), progress_us: now_us };
            self.incoming.insert(from, incoming);
        }
        let incoming = self.incoming.get_mut(&from).expect("just found or made");
        if offset == incoming.bytes.len() as u64 && incoming.total == total {
            let room = (total - offset) as usize;
            incoming.bytes.extend_from_slice(&bytes[..bytes.len().min(room)]);
            incoming.progress_us = now_us;
        }
        let received = incoming.bytes.len() as u64;
        let ack = ReplicaMessage::RaftPartAck { stream, received };
        if received == incoming.total {
            let whole = self.incoming.remove(&from).expect("found").bytes;
            self.stats.streams_received += 1;
            return (Some(ack), Some(whole));
        }
        (Some(ack), None)
    }

    /// Streams that made no progress for a while: sent again from the receiver's position, or dropped. Returns the
    /// parts to send, by destination.
    pub fn handle_timeout(&mut self, now_us: u64) -> Vec<(NodeIndex, ReplicaMessage)> {
        let before = self.outgoing.len() + self.incoming.len();
        let (give_up, resend) = (self.give_up_after_us(), self.resend_after_us);
        let ended = &mut self.ended;
        self.outgoing.retain(|_, o| {
            let alive = now_us < o.progress_us.saturating_add(give_up);
            if !alive {
                ended.push((o.tag, false));
            }
            alive
        });
        self.incoming.retain(|_, i| now_us < i.progress_us.saturating_add(give_up));
        self.stats.abandoned += (before - self.outgoing.len() - self.incoming.len()) as u64;
        let stalled: Vec<NodeIndex> = self
            .outgoing
            .iter()
            .filter(|(_, o)| now_us >= o.progress_us.max(o.resent_us).saturating_add(resend))
            .map(|(to, _)| *to)
            .collect();
        let mut parts = Vec::new();
        for to in stalled {
            let out = self.outgoing.get_mut(&to).expect("listed");
            out.sent = out.acked;
            out.resent_us = now_us;
            self.stats.resends += 1;
            parts.extend(self.fill(to).into_iter().map(|p| (to, p)));
        }
        parts
    }

    /// When [`Parts::handle_timeout`] has something to do, if any stream is open.
    pub fn poll_timeout(&self) -> Option<u64> {
        let outgoing =
            self.outgoing.values().map(|o| o.progress_us.max(o.resent_us).saturating_add(self.resend_after_us));
        let incoming = self.incoming.values().map(|i| i.progress_us.saturating_add(self.give_up_after_us()));
        outgoing.chain(incoming).min()
    }

    /// Counters.
    pub fn stats(&self) -> &PartStats {
        &self.stats
    }

    /// Bytes held by open streams, both ways.
    pub fn held_bytes(&self) -> usize {
        self.outgoing.values().map(|o| o.bytes.len()).sum::<usize>()
            + self.incoming.values().map(|i| i.bytes.capacity()).sum::<usize>()
    }

    /// The parts of the stream to `to` that the window lets out now.
    fn fill(&mut self, to: NodeIndex) -> Vec<ReplicaMessage> {
        let part = self.part_bytes as u64;
        let Some(out) = self.outgoing.get_mut(&to) else { return Vec::new() };
        let total = out.bytes.len() as u64;
        let mut parts = Vec::new();
        while out.sent < total && out.sent < out.acked + part * WINDOW {
            let end = (out.sent + part).min(total);
            let bytes = out.bytes[out.sent as usize..end as usize].to_vec();
            parts.push(ReplicaMessage::RaftPart { stream: out.stream, offset: out.sent, total, bytes });
            out.sent = end;
        }
        self.stats.parts_sent += parts.len() as u64;
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESEND: u64 = 1_000;

    /// Delivers every message both ways until nothing is left, losing the parts `lose` picks (by sequence); returns
    /// what the receiver got whole.
    fn run(
        sender: &mut Parts,
        receiver: &mut Parts,
        first: Vec<ReplicaMessage>,
        lose: impl Fn(u64) -> bool,
    ) -> Option<Vec<u8>> {
        let mut to_receiver = first;
        let mut seq = 0;
        let mut now = 0;
        let mut whole = None;
        for _ in 0..10_000 {
            let mut to_sender = Vec::new();
            for m in std::mem::take(&mut to_receiver) {
                seq += 1;
                let ReplicaMessage::RaftPart { stream, offset, total, bytes } = m else { panic!("a part") };
                if lose(seq) {
                    continue;
                }
                let (ack, done) = receiver.on_part(now, 0, stream, offset, total, bytes);
                to_sender.extend(ack);
                whole = whole.or(done);
            }
            for m in to_sender {
                let ReplicaMessage::RaftPartAck { stream, received } = m else { panic!("an ack") };
                to_receiver.extend(sender.on_ack(now, 1, stream, received));
            }
            if to_receiver.is_empty() {
                now += RESEND;
                to_receiver.extend(sender.handle_timeout(now).into_iter().map(|(_, p)| p));
                if to_receiver.is_empty() {
                    break;
                }
            }
        }
        whole
    }

    fn message(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn a_message_goes_in_parts_a_window_at_a_time_and_arrives_whole() {
        let (mut sender, mut receiver) = (Parts::new(10, RESEND), Parts::new(10, RESEND));
        let first = sender.send(0, 1, 9, message(95));
        assert_eq!(first.len(), WINDOW as usize, "no more than the window before an acknowledgement");
        assert_eq!(run(&mut sender, &mut receiver, first, |_| false), Some(message(95)));
        assert_eq!(sender.stats().parts_sent, 10);
        assert_eq!((sender.held_bytes(), receiver.held_bytes()), (0, 0), "both ends let go");
        assert_eq!(receiver.stats().streams_received, 1);
    }

    #[test]
    fn lost_parts_are_sent_again_from_what_the_receiver_holds() {
        for lost in 1..=10 {
            let (mut sender, mut receiver) = (Parts::new(10, RESEND), Parts::new(10, RESEND));
            let first = sender.send(0, 1, 9, message(95));
            let got = run(&mut sender, &mut receiver, first, |seq| seq == lost || seq == lost + 3);
            assert_eq!(got, Some(message(95)), "parts {lost} and {} lost", lost + 3);
            assert!(sender.stats().resends > 0);
        }
    }

    #[test]
    fn a_newer_stream_replaces_an_older_one_and_a_stalled_one_is_dropped() {
        let (mut sender, mut receiver) = (Parts::new(10, RESEND), Parts::new(10, RESEND));
        let old = sender.send(0, 1, 9, message(50));
        let ReplicaMessage::RaftPart { stream, offset, total, bytes } = old[0].clone() else { panic!() };
        receiver.on_part(0, 0, stream, offset, total, bytes);
        let new = sender.send(0, 1, 10, message(30));
        assert_eq!(sender.take_ended(), vec![(9, false)], "the older stream ended undelivered");
        // A late part of the old stream is acknowledged for the old stream, which the sender ignores.
        let ReplicaMessage::RaftPart { stream, offset, total, bytes } = old[1].clone() else { panic!() };
        let (ack, _) = receiver.on_part(0, 0, stream, offset, total, bytes);
        let Some(ReplicaMessage::RaftPartAck { stream, received }) = ack else { panic!() };
        assert!(sender.on_ack(0, 1, stream, received).is_empty());
        assert_eq!(run(&mut sender, &mut receiver, new, |_| false), Some(message(30)));
        assert_eq!(sender.take_ended(), vec![(10, true)], "the newer one arrived");
        // A receiver drops a stream that stopped; so does a sender.
        let mut sender = Parts::new(10, RESEND);
        sender.send(0, 1, 9, message(50));
        let ReplicaMessage::RaftPart { stream, offset, total, bytes } = old[0].clone() else { panic!() };
        receiver.on_part(0, 0, stream + 10, offset, total, bytes);
        assert!(receiver.held_bytes() > 0);
        sender.handle_timeout(RESEND * GIVE_UP_AFTER_RESENDS);
        receiver.handle_timeout(RESEND * GIVE_UP_AFTER_RESENDS);
        assert_eq!(sender.take_ended(), vec![(9, false)], "given up");
        assert_eq!((sender.held_bytes(), receiver.held_bytes()), (0, 0));
        assert_eq!(sender.poll_timeout(), None);
        assert_eq!(receiver.stats().abandoned, 1);
    }

    #[test]
    fn the_middle_of_an_unknown_stream_is_answered_with_nothing_held() {
        let mut receiver = Parts::new(10, RESEND);
        let ack = Some(ReplicaMessage::RaftPartAck { stream: 3, received: 0 });
        assert_eq!(receiver.on_part(0, 0, 3, 10, 30, vec![1; 10]), (ack, None), "the sender is told to start again");
        assert_eq!(receiver.held_bytes(), 0);
    }

    #[test]
    fn a_receiver_that_restarted_gets_the_stream_again_from_its_start() {
        let (mut sender, mut receiver) = (Parts::new(10, RESEND), Parts::new(10, RESEND));
        let first = sender.send(0, 1, 9, message(95));
        for part in &first[..2] {
            let ReplicaMessage::RaftPart { stream, offset, total, bytes } = part.clone() else { panic!() };
            let (ack, _) = receiver.on_part(0, 0, stream, offset, total, bytes);
            let Some(ReplicaMessage::RaftPartAck { stream, received }) = ack else { panic!() };
            sender.on_ack(0, 1, stream, received);
        }
        let mut receiver = Parts::new(10, RESEND); // restarted: it holds nothing
        let rest = first[2..].to_vec();
        assert_eq!(run(&mut sender, &mut receiver, rest, |_| false), Some(message(95)));
        assert!(sender.stats().resends > 0);
    }
}
