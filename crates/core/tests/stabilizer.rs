//! The stabilizer: the stable snapshot is the minimum of the partitions' pvc; the garbage-collection frontier
//! also waits for every coordinator, including ones that join later, until the driver retires them.

use causet_core::stabilizer::Stabilizer;
use causet_core::{Address, Config, CoordinatorId, DcId, Message, PartitionId, Timestamp, VectorClock};

fn vc(micros: u64) -> VectorClock {
    VectorClock::from_entries(vec![Timestamp::from_micros(micros)])
}

fn report(s: &mut Stabilizer, p: u32, at: u64) {
    s.handle_message(
        Address::Partition(PartitionId(p)),
        Message::PvcReport { pvc: vc(at), at: None, committed: None, frontier: None, away: None },
    );
}

fn oldest(s: &mut Stabilizer, c: u32, at: u64) {
    s.handle_message(Address::Coordinator(CoordinatorId(c)), Message::OldestSnapshot { snapshot: vc(at) });
}

fn drain(s: &mut Stabilizer) -> Vec<causet_core::Envelope> {
    std::iter::from_fn(|| s.poll_output()).collect()
}

#[test]
fn the_frontier_waits_for_joined_coordinators_and_moves_once_they_are_retired() {
    let config = Config::new(1, DcId(0), 2);
    let mut s = Stabilizer::new(config, vec![CoordinatorId(1)]);
    report(&mut s, 0, 100);
    assert_eq!(s.stable_snapshot(), &vc(0), "no stable snapshot before every partition reported");
    report(&mut s, 1, 80);
    assert_eq!(s.stable_snapshot(), &vc(80), "the minimum of the partitions' pvc");
    assert_eq!(s.gc_frontier(), &vc(0), "coordinator 1 has not reported");
    oldest(&mut s, 1, 70);
    assert_eq!(s.gc_frontier(), &vc(70));
    drain(&mut s);

    // Coordinator 2 joins (a node started): it is told the stable snapshot at once, and holds the frontier.
    oldest(&mut s, 2, 75);
    let out = drain(&mut s);
    assert!(out.iter().any(|e| e.to == Address::Coordinator(CoordinatorId(2))
        && matches!(&e.msg, Message::Stable { stable, .. } if stable == &vc(80))));
    report(&mut s, 0, 200);
    report(&mut s, 1, 200);
    oldest(&mut s, 1, 190);
    assert_eq!(s.gc_frontier(), &vc(75), "the frontier waits for coordinator 2's old snapshot");
    drain(&mut s);
    // Coordinator 2's node died: retired, it no longer holds the frontier back and receives nothing.
    s.retire(|c| c == CoordinatorId(2));
    assert_eq!(s.gc_frontier(), &vc(190));
    let out = drain(&mut s);
    assert!(out.iter().all(|e| e.to != Address::Coordinator(CoordinatorId(2))));
    assert_eq!(s.coordinators().collect::<Vec<_>>(), vec![CoordinatorId(1)]);
}

#[test]
fn coordinator_ids_carry_node_incarnation_and_shard() {
    let c = CoordinatorId::compose(5, 300_001, 17);
    assert_eq!((c.node(), c.incarnation(), c.shard()), (5, 300_001 % (1 << 18), 17));
    assert_ne!(CoordinatorId::compose(5, 7, 17), CoordinatorId::compose(5, 8, 17), "incarnations differ");
    assert_ne!(CoordinatorId::compose(4, 7, 17), CoordinatorId::compose(5, 7, 17), "nodes differ");
}

#[test]
fn a_report_from_a_nodes_new_incarnation_retires_its_earlier_coordinators() {
    let config = Config::new(1, DcId(0), 1);
    let (old, new) = (CoordinatorId::compose(1, 4, 0), CoordinatorId::compose(1, 5, 0));
    let mut s = Stabilizer::new(config, vec![old]);
    report(&mut s, 0, 100);
    s.handle_message(Address::Coordinator(old), Message::OldestSnapshot { snapshot: vc(10) });
    assert_eq!(s.gc_frontier(), &vc(10), "the old coordinator holds the frontier");
    s.handle_message(Address::Coordinator(new), Message::OldestSnapshot { snapshot: vc(90) });
    assert_eq!(s.coordinators().collect::<Vec<_>>(), vec![new], "node 1 restarted: its old coordinator is gone");
    assert_eq!(s.gc_frontier(), &vc(90));
    // A late report from the old incarnation does not bring it back.
    s.handle_message(Address::Coordinator(old), Message::OldestSnapshot { snapshot: vc(20) });
    assert_eq!(s.coordinators().collect::<Vec<_>>(), vec![new]);
}

#[test]
fn a_restarted_stabilizer_holds_the_frontier_until_every_node_has_a_coordinator_reporting() {
    let config = Config::new(1, DcId(0), 1);
    // The stabilizer's node (node 0) restarted: it knows only its own new coordinator.
    let node0 = CoordinatorId::compose(0, 1, 0);
    let node1 = CoordinatorId::compose(1, 0, 0);
    let mut s = Stabilizer::new(config, vec![node0]);
    s.expect_nodes(2);
    report(&mut s, 0, 100);
    s.handle_message(Address::Coordinator(node0), Message::OldestSnapshot { snapshot: vc(90) });
    assert_eq!(s.stable_snapshot(), &vc(100));
    assert_eq!(s.gc_frontier(), &vc(0), "node 1 may run a transaction at an old snapshot: the frontier waits");
    s.handle_message(Address::Coordinator(node1), Message::OldestSnapshot { snapshot: vc(40) });
    assert_eq!(s.gc_frontier(), &vc(40), "node 1's oldest snapshot bounds the frontier");
}
