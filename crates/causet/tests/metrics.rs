//! `/metrics` of a running cluster (two DCs of three nodes, replicated partitions, after some transactions) passes
//! Prometheus' own checks, `promtool check metrics`: exposition format, naming conventions (base units, `_total`
//! counters), help texts. `.ci/run` installs promtool (Debian's `prometheus` package); elsewhere the test says it
//! is skipping when promtool is missing, unless CI is set, where a missing promtool fails it. The cluster's scrape
//! targets, `deploy/prometheus.yml` (`promtool check config`) and the metrics the Grafana dashboard
//! (`deploy/grafana/causet.json`) queries are checked against the same cluster.

use causet::cluster::{self, StartOptions};
use causet_client::{Client, Counter};
use std::io::Write;
use std::process::{Command, Stdio};

struct Running(cluster::ClusterFile);

impl Drop for Running {
    fn drop(&mut self) {
        cluster::stop_nodes(&self.0, false);
    }
}

fn promtool() -> Option<std::path::PathBuf> {
    let found = Command::new("promtool").arg("--version").output().is_ok_and(|o| o.status.success());
    if found {
        return Some("promtool".into());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "promtool is missing: install Debian's prometheus package (.ci/run does)"
    );
    eprintln!("skipping: promtool is not installed (Debian's prometheus package provides it; .ci/run installs it)");
    None
}

#[test]
fn every_nodes_metrics_pass_promtool_check_metrics() {
    let Some(promtool) = promtool() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = StartOptions {
        dcs: 2,
        nodes_per_dc: 3,
        replicas: 3,
        partitions: 3,
        wan_delay_ms: 5,
        dir: dir.path().to_path_buf(),
        base_port: 0,
        exe: Some(env!("CARGO_BIN_EXE_causet").into()),
        ..Default::default()
    };
    let file = cluster::start(&options).expect("the cluster starts");
    let running = Running(file);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        for addr in running.0.dc_clients(0) {
            let mut c = Client::connect(addr).await.expect("connects");
            for i in 0..10 {
                c.static_update(None, vec![Counter::new(format!("k{i}"), "metrics").increment(1)])
                    .await
                    .expect("commits");
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    // The scrape targets the cluster wrote: every node's admin address with its DC and node.
    let targets: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("prometheus-targets.json")).expect("prometheus-targets.json"),
    )
    .expect("JSON");
    for n in &running.0.nodes {
        let listed = targets.as_array().expect("a list").iter().any(|t| {
            t["targets"][0] == n.admin.to_string()
                && t["labels"]["causet_dc"].as_str() == Some(n.dc.to_string().as_str())
                && t["labels"]["causet_node"].as_str() == Some(n.node.to_string().as_str())
        });
        assert!(listed, "DC {} node {} is not in {targets}", n.dc, n.node);
    }
    // deploy/prometheus.yml, pointed at them, is a valid Prometheus configuration.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = std::fs::read_to_string(repo.join("deploy/prometheus.yml")).expect("deploy/prometheus.yml");
    assert!(config.contains("../causet-cluster/prometheus-targets.json"), "{config}");
    let copy = dir.path().join("prometheus.yml");
    std::fs::write(&copy, config.replace("../causet-cluster/prometheus-targets.json", "prometheus-targets.json"))
        .expect("writes the copy");
    let check = Command::new(&promtool).args(["check", "config"]).arg(&copy).output().expect("promtool runs");
    assert!(check.status.success(), "promtool check config: {}", String::from_utf8_lossy(&check.stdout));
    // Every metric the Grafana dashboard queries is one a node exposes.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join("deploy/grafana/causet.json")).expect("deploy/grafana/causet.json"),
    )
    .expect("the dashboard is JSON");
    let exposed: String =
        running.0.nodes.iter().map(|n| cluster::http_get(n.admin, "/metrics").unwrap_or_default()).collect();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("an expression");
            for word in
                expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("causet_"))
            {
                if word == "causet_dc" || word == "causet_node" {
                    continue; // Target labels, not metrics.
                }
                queried += 1;
                let sample = format!("\n{word}");
                assert!(
                    exposed.contains(&format!("{sample}{{")) || exposed.contains(&format!("{sample} ")),
                    "panel {:?} queries {word}, which no node exposes",
                    panel["title"]
                );
            }
        }
    }
    assert!(queried >= 12, "the dashboard queries the cluster's metrics ({queried})");
    for n in &running.0.nodes {
        let text = cluster::http_get(n.admin, "/metrics").expect("/metrics answers");
        for family in
            ["causet_transactions_committed_total", "causet_stable_snapshot_age_seconds", "causet_replica_term"]
        {
            assert!(text.contains(family), "DC {} node {}: no {family} in\n{text}", n.dc, n.node);
        }
        // One series per DC and outcome, summed over the links to its nodes: here the node's own DC, whose two
        // other nodes every node talks to (Raft, stabilization); only partition leaders talk to the other DC, and a
        // node may lead none.
        let series = format!("causet_link_messages_total{{peer=\"{}\",outcome=\"sent\"}} ", n.dc);
        let sent: Vec<&str> = text.lines().filter(|l| l.starts_with(&series)).collect();
        assert_eq!(sent.len(), 1, "{text}");
        let count: f64 = sent[0].rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a value");
        assert!(count > 0.0, "DC {} node {} sent nothing to its own DC: {}", n.dc, n.node, sent[0]);
        let report = check_metrics(&promtool, &text);
        assert!(report.is_empty(), "DC {} node {}: promtool says:\n{report}", n.dc, n.node);
    }
}

/// What `promtool check metrics` says of `text` (empty when it passes).
fn check_metrics(promtool: &std::path::Path, text: &str) -> String {
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    check.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("writes the exposition");
    let out = check.wait_with_output().expect("promtool finishes");
    let report = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        report.trim().to_string()
    } else {
        format!("(failed) {report}")
    }
}

#[test]
fn the_causal_middlewares_metrics_pass_promtool_check_metrics() {
    let Some(promtool) = promtool() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let text = rt.block_on(async {
        // The in-process store, one local set, so that one free port is enough.
        let args = causet::middleware::MiddlewareArgs {
            local_sets: 1,
            listen: "127.0.0.1:0".parse().unwrap(),
            admin: Some("127.0.0.1:0".parse().unwrap()),
            ..causet::middleware::MiddlewareArgs::defaults("memory")
        };
        let running = causet::middleware::start(&args).await.expect("the middleware starts");
        let mut c = Client::connect(running.listening[0].1).await.expect("connects");
        let reg = causet_core::ObjectId::new("k", "b", causet_crdt::CrdtType::RegisterLww);
        c.static_update(None, [(reg, causet_crdt::Op::Assign(b"v".to_vec()))]).await.expect("writes");
        let admin = running.admin.expect("--admin serves");
        let text = tokio::task::spawn_blocking(move || cluster::http_get(admin, "/metrics")).await.unwrap();
        running.stop().await;
        text.expect("/metrics answers")
    });
    assert!(text.contains("causet_middleware_writes_total{local_set=\"0\"} 1"), "{text}");
    let report = check_metrics(std::path::Path::new(&promtool), &text);
    assert!(report.is_empty(), "promtool says:\n{report}\n{text}");
}
