//! `causet check` end to end, as CI runs it: a real 3-DC cluster under every fault kind passes on cure, and the
//! known-bad eventual baseline is flagged by the same command, so the checker demonstrably sees what it claims to.
//! Longer runs: `causet check --duration 600 --seed N`.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// One cluster at a time: the runs are timing-sensitive and the machine is small.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// Runs `causet check` with `args`, writing the history into `dir`; returns the exit code, the printed report and
/// the history file.
fn check(dir: &Path, args: &[&str]) -> (i32, String, Value) {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let history = dir.join("history.json");
    let output = Command::new(env!("CARGO_BIN_EXE_causet"))
        .arg("check")
        .arg("--dir")
        .arg(dir.join("cluster"))
        .arg("--history")
        .arg(&history)
        .args(args)
        .output()
        .expect("causet check runs");
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(&history).unwrap_or_else(|e| panic!("no history file ({e}); output:\n{report}"));
    let file: Value = serde_json::from_str(&text).expect("the history file is JSON");
    (output.status.code().unwrap_or(-1), report, file)
}

/// The faults the nemesis applied, as the history file lists them.
fn faults(file: &Value) -> &[Value] {
    file["faults"].as_array().expect("a faults list")
}

fn count_faults(file: &Value, kind: &str) -> usize {
    faults(file).iter().filter(|a| a["step"]["fault"].as_object().is_some_and(|f| f.contains_key(kind))).count()
}

#[test]
fn cure_under_kills_pauses_cuts_and_clock_jumps_is_tcc_loses_nothing_and_converges() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Seed 11's schedule (a pure function of the seed) has every fault kind within 40 s.
    let (code, report, file) =
        check(dir.path(), &["--seed", "11", "--duration", "40", "--fault-interval-ms", "1500", "--protocol", "cure"]);
    assert_eq!(code, 0, "cure must pass:\n{report}");
    for kind in ["Kill", "Restart", "Pause", "Resume", "Cut", "Heal", "Clock"] {
        assert!(count_faults(&file, kind) > 0, "no {kind} fault was injected:\n{report}");
    }
    let stats = &file["stats"];
    let jumps: Vec<i64> =
        faults(&file).iter().filter_map(|a| a["step"]["fault"]["Clock"]["jump_ms"].as_i64()).collect();
    assert!(jumps.iter().any(|&j| j > 0) && jumps.iter().any(|&j| j < 0), "clocks jump both ways: {jumps:?}");
    // A loaded 2-core machine commits about 1,000 transactions in these 40 s; an idle one several times more.
    assert!(stats["committed"].as_u64().unwrap_or(0) > 300, "too little work was checked:\n{report}");
    assert!(file["report"]["reads_checked"].as_u64().unwrap_or(0) > 300, "too few reads checked:\n{report}");
    assert_eq!(file["final_reads"].as_array().map(Vec::len), Some(3), "one final read per DC:\n{report}");
    assert!(file["report"]["anomalies"].as_array().is_some_and(Vec::is_empty));
    assert!(report.contains("PASSED"), "{report}");
}

/// DCs of three nodes whose partitions are Raft groups of three, checkpointing every second: nodes killed, paused
/// (SIGSTOP: a leader stops answering with its connections open), cut from another node of their DC, and one node
/// of a DC losing its disk (killed, its data directory deleted, started again empty: it joins under new replica
/// ids), links between DCs cut. The history is TCC, no acknowledged write is lost, the DCs converge.
#[test]
fn replicated_dcs_under_kills_pauses_and_cuts_between_their_nodes_are_tcc_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let args = [
        "--seed",
        "3",
        "--duration",
        "40",
        "--fault-interval-ms",
        "1500",
        "--dcs",
        "2",
        "--nodes-per-dc",
        "3",
        "--replicas",
        "3",
        "--faults",
        "kill,pause,cut,wipe",
        "--checkpoint-interval-s",
        "1",
    ];
    let (code, report, file) = check(dir.path(), &args);
    assert_eq!(code, 0, "cure on replicated DCs must pass:\n{report}");
    for kind in ["Kill", "Wipe", "Restart", "Pause", "Resume", "CutNodes", "HealNodes"] {
        assert!(count_faults(&file, kind) > 0, "no {kind} fault was injected:\n{report}");
    }
    let applied_ok = |kind: &str| {
        faults(&file).iter().any(|a| {
            a["step"]["fault"].as_object().is_some_and(|f| f.contains_key(kind)) && a["error"].as_str() == Some("")
        })
    };
    assert!(applied_ok("CutNodes"), "no cut between nodes took effect:\n{report}");
    assert!(file["stats"]["committed"].as_u64().unwrap_or(0) > 200, "too little work was checked:\n{report}");
    assert!(file["report"]["anomalies"].as_array().is_some_and(Vec::is_empty));
    assert!(report.contains("PASSED"), "{report}");
}

/// `causet check`'s arguments for 30 s on two DCs of three nodes, one copy of each partition, a fault every 2 s
/// (kills, pauses, cuts and clock jumps), seed `seed`, every node configured with `node_config`.
fn caching_dcs(seed: &'static str, node_config: &'static str) -> [&'static str; 16] {
    [
        "--seed",
        seed,
        "--duration",
        "30",
        "--fault-interval-ms",
        "2000",
        "--dcs",
        "2",
        "--nodes-per-dc",
        "3",
        "--replicas",
        "1",
        "--faults",
        "kill,pause,cut,clock",
        "--node-config",
        node_config,
    ]
}

/// DCs of three nodes, one copy of each partition, every node running the lease cache (HoneyPot's reads):
/// sessions read through caches at windows of snapshots while nodes are killed, paused and skewed and DCs cut off.
/// The history is TCC, nothing acknowledged is lost, the DCs converge, and the caches did serve reads.
#[test]
fn dcs_whose_nodes_read_through_lease_caches_are_tcc_under_faults() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let args = caching_dcs("11", "cache = { enabled = true, lease_ms = 500 }");
    let (code, report, file) = check(dir.path(), &args);
    assert_eq!(code, 0, "cure with lease caches must pass:\n{report}");
    assert!(file["stats"]["committed"].as_u64().unwrap_or(0) > 200, "too little work was checked:\n{report}");
    // Few: the sessions write half the time and carry their clocks, so most of their reads need something newer
    // than any cached state (a few tens to a hundred in 30 s on this machine; buffered writes will change that).
    let hits = file["stats"]["cache_reads"][0].as_u64().unwrap_or(0);
    assert!(hits > 10, "the caches served {hits} reads:\n{report}");
    assert!(file["report"]["anomalies"].as_array().is_some_and(Vec::is_empty));
}

/// The same DCs with buffered writes (HoneyPot's write buffer): update transactions are acknowledged once
/// buffered at their node and handed over in one commit per round; sessions move between nodes and DCs with their
/// clock's buffer token while nodes are killed (their buffers come back from their logs), paused and skewed and DCs
/// cut off. The history is TCC, nothing acknowledged is lost and the DCs converge.
#[test]
fn dcs_whose_nodes_buffer_writes_are_tcc_under_faults_as_sessions_move() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let args = caching_dcs("12", "cache = { enabled = true, lease_ms = 500, buffer_writes = true }");
    let (code, report, file) = check(dir.path(), &args);
    assert_eq!(code, 0, "cure with buffered writes must pass:\n{report}");
    assert!(file["stats"]["committed"].as_u64().unwrap_or(0) > 200, "too little work was checked:\n{report}");
    assert!(file["report"]["anomalies"].as_array().is_some_and(Vec::is_empty));
    let buffered = &file["stats"]["buffered"];
    let (transactions, questions) = (buffered[0].as_u64().unwrap_or(0), buffered[2].as_u64().unwrap_or(0));
    assert!(transactions > 50, "only {transactions} transactions were buffered:\n{report}");
    assert!(questions > 0, "no session moved away from its buffered writes:\n{report}");
}

/// Partial replication under faults: three DCs in two rings (DCs 0 and 1, and DC 2), every other checked object
/// in a bucket placed by them, so sessions read objects their DC does not hold from a holder (another ring's when
/// theirs is cut off or down, or from their lease cache) while nodes are killed, paused and skewed and DCs cut off.
/// The history is TCC, nothing acknowledged is lost, the DCs converge, and reads did go to other DCs.
#[test]
fn dcs_that_hold_one_copy_per_ring_are_tcc_under_faults() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let args = [
        "--seed",
        "13",
        "--duration",
        "30",
        "--fault-interval-ms",
        "2000",
        "--dcs",
        "3",
        "--faults",
        "kill,pause,cut,clock",
        "--rings",
        "0,1/2",
        // With the lease caches, which keep objects held at other DCs and raise them by notices of writes.
        "--node-config",
        "cache = { enabled = true, lease_ms = 500 }",
    ];
    let (code, report, file) = check(dir.path(), &args);
    assert_eq!(code, 0, "cure with rings must pass:\n{report}");
    assert!(file["stats"]["committed"].as_u64().unwrap_or(0) > 200, "too little work was checked:\n{report}");
    assert!(file["report"]["anomalies"].as_array().is_some_and(Vec::is_empty));
    assert!(report.contains("remote reads"), "the report says how many reads went to other DCs:\n{report}");
}

#[test]
fn the_eventual_baseline_is_flagged_by_the_same_command() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (code, report, file) =
        check(dir.path(), &["--seed", "5", "--duration", "12", "--faults", "none", "--protocol", "eventual"]);
    assert_eq!(code, 1, "eventual consistency must be flagged:\n{report}");
    let anomalies = file["report"]["anomalies"].as_array().expect("anomalies");
    let kinds: Vec<&str> = anomalies.iter().filter_map(|a| a["kind"].as_str()).collect();
    // Sessions that move between DCs miss their own writes; readers see a transaction's writes only in part.
    assert!(kinds.contains(&"ReadYourWrites"), "no read-your-writes violation found: {kinds:?}\n{report}");
    assert!(
        kinds.iter().any(|k| ["CausalityViolation", "FracturedRead", "MonotonicReads"].contains(k)),
        "no causality or atomicity violation found: {kinds:?}\n{report}"
    );
    // Every anomaly names its transactions and explains itself.
    assert!(anomalies.iter().all(|a| a["txs"].as_array().is_some_and(|t| !t.is_empty())
        && a["explanation"].as_str().is_some_and(|e| e.len() > 20)));
    assert!(report.contains("FAILED"), "{report}");
}

#[test]
fn a_history_file_is_rechecked_with_the_same_verdict() {
    // A tiny hand-written history in the documented format: T1 observed T0's aborted write.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("h.json");
    std::fs::write(
        &path,
        r#"{"txs": [
            {"index": 0, "session": 1, "dc": 0, "start_us": 1, "end_us": 2, "outcome": "Aborted",
             "ops": [{"Write": {"object": {"key": "x", "kind": "Set"}, "id": 7, "amount": 0}}]},
            {"index": 1, "session": 2, "dc": 1, "start_us": 3, "end_us": 4, "outcome": "Committed",
             "ops": [{"Read": {"object": {"key": "x", "kind": "Set"}, "observed": {"Set": [7]}}}]}
        ]}"#,
    )
    .expect("writes");
    let output =
        Command::new(env!("CARGO_BIN_EXE_causet")).arg("check").arg("--recheck").arg(&path).output().expect("runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(report.contains("AbortedRead"), "{report}");
}
