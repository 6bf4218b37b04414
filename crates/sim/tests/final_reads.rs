//! The final-read checks of a run (no acknowledged update lost, convergence) flag what they claim to and pass a
//! clean run.

use causet_sim::history::{HistOp, History, ObjectKind, ObjectName, Observed, Outcome, TxRecord};
use causet_sim::{final_read_problems, FinalRead};

fn set(key: &str) -> ObjectName {
    ObjectName { key: key.into(), kind: ObjectKind::Set }
}

fn tx(index: usize, session: u64, dc: u16, ops: Vec<HistOp>, outcome: Outcome) -> TxRecord {
    TxRecord { index, session, dc, start_us: index as u64 * 10, end_us: index as u64 * 10 + 5, ops, outcome }
}

fn write(id: u64) -> HistOp {
    HistOp::Write { object: set("x"), id, amount: 0 }
}

fn read(ids: &[u64]) -> HistOp {
    HistOp::Read { object: set("x"), observed: Observed::Set(ids.to_vec()) }
}

/// Two writes (one acknowledged, one of unknown outcome), then final reads at DC 0 and DC 1.
fn history(dc0: &[u64], dc1: &[u64]) -> (History, Vec<FinalRead>) {
    let txs = vec![
        tx(0, 1, 0, vec![write(1)], Outcome::Committed),
        tx(1, 2, 1, vec![write(2)], Outcome::Unknown),
        tx(2, 100, 0, vec![read(dc0)], Outcome::Committed),
        tx(3, 101, 1, vec![read(dc1)], Outcome::Committed),
    ];
    (History { txs }, vec![FinalRead { dc: 0, tx: 2 }, FinalRead { dc: 1, tx: 3 }])
}

#[test]
fn identical_final_reads_with_every_acknowledged_write_pass() {
    let (h, reads) = history(&[2, 1], &[1, 2]);
    assert_eq!(final_read_problems(&h, &reads), Vec::<String>::new());
    // A write of unknown outcome may be absent, as long as it is absent everywhere.
    let (h, reads) = history(&[1], &[1]);
    assert_eq!(final_read_problems(&h, &reads), Vec::<String>::new());
}

#[test]
fn an_acknowledged_write_missing_at_one_dc_is_a_lost_update() {
    let (h, reads) = history(&[1], &[]);
    let problems = final_read_problems(&h, &reads);
    assert!(problems.iter().any(|p| p.starts_with("DC 1: acknowledged write 1 to x is missing")), "{problems:?}");
}

#[test]
fn dcs_that_disagree_have_not_converged() {
    let (h, reads) = history(&[1, 2], &[1]);
    let problems = final_read_problems(&h, &reads);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("DCs 0 and 1 diverged on Set x"), "{problems:?}");
}

#[test]
fn a_final_read_that_did_not_commit_is_a_problem() {
    let (mut h, reads) = history(&[1], &[1]);
    h.txs[3].outcome = Outcome::Unknown;
    let problems = final_read_problems(&h, &reads);
    assert!(problems.iter().any(|p| p.contains("did not commit")), "{problems:?}");
}

fn counter_history(final_value: i64) -> (History, Vec<FinalRead>) {
    let c = ObjectName { key: "c".into(), kind: ObjectKind::Counter };
    let inc = |id, amount| HistOp::Write { object: c.clone(), id, amount };
    let read = HistOp::Read { object: c.clone(), observed: Observed::Counter(final_value) };
    let txs = vec![
        tx(0, 1, 0, vec![inc(1, 5)], Outcome::Committed),
        // Its commit reply was lost: it may or may not have committed.
        tx(1, 2, 1, vec![inc(2, 1)], Outcome::Unknown),
        tx(2, 100, 0, vec![read], Outcome::Committed),
    ];
    (History { txs }, vec![FinalRead { dc: 0, tx: 2 }])
}

#[test]
fn a_final_counter_may_include_increments_of_unknown_outcome() {
    for value in [5, 6] {
        let (h, reads) = counter_history(value);
        assert_eq!(final_read_problems(&h, &reads), Vec::<String>::new(), "final counter {value}");
    }
}

#[test]
fn a_final_counter_outside_what_the_writes_explain_is_a_problem() {
    for value in [4, 7] {
        let (h, reads) = counter_history(value);
        let problems = final_read_problems(&h, &reads);
        assert_eq!(problems.len(), 1, "final counter {value}: {problems:?}");
        assert!(problems[0].contains("counter c reads"), "{problems:?}");
    }
}
