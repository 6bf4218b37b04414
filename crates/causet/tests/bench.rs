//! `causet bench` end to end: the real binary starts a local cluster, runs a workload, and writes the JSON and
//! Markdown reports and the SVG plots; `--compare` runs the same workload on two protocols, each on a fresh
//! cluster, with ratios and visibility across DCs.

use std::path::Path;
use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_causet")).arg("bench").args(args).output().expect("causet runs")
}

fn json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json is written");
    serde_json::from_str(&text).expect("report.json is JSON")
}

fn svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text.starts_with("<svg"), "{} is an SVG document", path.display());
    assert!(text.contains("<polyline"), "{} draws at least one line", path.display());
    text
}

fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "causet bench failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_run_on_a_local_cluster_writes_json_markdown_and_plots_with_every_figure() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = unix_now();
    let out = bench(
        &["--workload", "smoke", "--nodes-per-dc", "2", "--duration-s", "1", "--warmup-s", "0.2", "--out"]
            .into_iter()
            .chain([dir.path().to_str().expect("utf-8 path")])
            .collect::<Vec<_>>(),
    );
    succeeded(&out);
    let report = json(dir.path());
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "the smoke workload sweeps two update ratios");
    // Each point's measured window, in Unix time: inside the command's run, the second after the first.
    let windows: Vec<(f64, f64)> = runs
        .iter()
        .map(|r| {
            let start = r["window_start_unix_s"].as_f64().expect("the window's start");
            (start, start + r["measured_s"].as_f64().expect("the window's length"))
        })
        .collect();
    assert!(windows[0].0 > started && windows[1].1 < unix_now(), "{windows:?} within the run");
    assert!(windows[0].1 <= windows[1].0, "{windows:?}: the points' windows in order, apart");
    for run in runs {
        let committed = run["committed"].as_u64().expect("committed");
        assert!(committed > 0, "a run commits transactions: {run}");
        assert_eq!(run["errors"].as_u64(), Some(0), "no errors: {}", run["error_samples"]);
        assert_eq!(run["latency"]["count"].as_u64(), Some(committed), "every commit is in the histogram");
        let buckets: u64 = run["latency"]["buckets"]
            .as_array()
            .expect("the HDR histogram's buckets")
            .iter()
            .map(|b| b[1].as_u64().expect("a count"))
            .sum();
        assert_eq!(buckets, committed, "the histogram in the JSON holds every sample");
        let kinds = run["latency_by_kind"].as_object().expect("latency by kind");
        for kind in ["read", "update", "interactive", "read-only"] {
            assert!(kinds.contains_key(kind), "the mix ran {kind} transactions: {:?}", kinds.keys());
        }
        assert!(run["throughput_per_s"].as_f64().expect("throughput") > 0.0);
        let by_dc: Vec<u64> = run["committed_by_dc"]
            .as_array()
            .map_or(Vec::new(), |a| a.iter().map(|n| n.as_u64().expect("a count")).collect());
        assert_eq!(by_dc, vec![committed], "one DC's sessions committed everything");
        let server = run["server_time"].as_object().expect("server time");
        assert!(
            server.values().any(|t| t["requests"].as_u64().is_some_and(|n| n > 0)),
            "the servers' own request times were scraped: {server:?}"
        );
    }
    assert_eq!(report["workload"]["run"]["seed"].as_u64(), Some(7), "the report records the seed");
    assert_eq!(report["workload"]["run"]["duration_s"].as_f64(), Some(1.0), "and the overridden duration");
    assert!(report["machine"]["cores"].as_u64().expect("cores") >= 1);
    assert_eq!(report["cluster"]["kind"], "local");
    assert_eq!(report["cluster"]["dcs"].as_u64(), Some(1));
    assert_eq!(report["cluster"]["nodes_per_dc"].as_u64(), Some(2), "a DC of two nodes, as asked");
    assert_eq!(report["cluster"]["addresses"][0].as_array().map(Vec::len), Some(2), "sessions use both nodes");
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md is written");
    assert!(md.contains("| cure | 10% | 1000 |") && md.contains("| cure | 50% | 1000 |"), "{md}");
    assert!(md.contains("seed 7") && md.contains("cores"), "the Markdown records seed and machine: {md}");
    svg(&dir.path().join("throughput.svg"));
    svg(&dir.path().join("latency-cdf.svg"));
}

/// `--batched`: interactive transactions send their reads in one request and their updates in another; they commit
/// as the unbatched ones do, and the report says how they ran.
#[test]
fn batched_interactive_transactions_commit_and_the_report_says_so() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().to_str().expect("utf-8 path");
    let args = ["--workload", "smoke", "--batched", "--update-ratio", "0.5", "--duration-s", "1", "--warmup-s", "0.2"];
    let out = bench(&args.into_iter().chain(["--out", path]).collect::<Vec<_>>());
    succeeded(&out);
    let report = json(dir.path());
    assert_eq!(report["workload"]["mix"]["batched"], true, "the report records the option");
    let run = &report["runs"][0];
    assert_eq!(run["errors"].as_u64(), Some(0), "no errors: {}", run["error_samples"]);
    let interactive = run["latency_by_kind"]["interactive"]["count"].as_u64().expect("interactive transactions ran");
    assert!(interactive > 0, "batched interactive transactions committed: {run}");
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md is written");
    assert!(md.contains("(reads and updates batched)"), "{md}");
}

#[test]
fn compare_runs_each_protocol_on_a_fresh_cluster_and_reports_ratios_and_visibility() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().to_str().expect("utf-8 path");
    let out = bench(&[
        "--workload",
        "smoke",
        "--compare",
        "cure,eventual",
        "--dcs",
        "2",
        "--update-ratio",
        "0.5",
        "--duration-s",
        "1.5",
        "--warmup-s",
        "0.2",
        "--out",
        path,
    ]);
    succeeded(&out);
    let report = json(dir.path());
    let runs = report["runs"].as_array().expect("runs");
    let protocols: Vec<&str> = runs.iter().map(|r| r["protocol"].as_str().expect("protocol")).collect();
    assert_eq!(protocols, ["cure", "eventual"]);
    let comparisons = report["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), 1);
    assert_eq!(comparisons[0]["baseline"], "cure");
    let ratio = comparisons[0]["throughput_ratio"].as_f64().expect("a ratio");
    let (cure, eventual) = (runs[0]["throughput_per_s"].as_f64(), runs[1]["throughput_per_s"].as_f64());
    let expected = eventual.expect("eventual") / cure.expect("cure");
    assert!((ratio - expected).abs() < 1e-9, "the ratio is eventual ÷ cure: {ratio} vs {expected}");
    for run in runs {
        let v = &run["visibility"];
        assert!(v["client"]["count"].as_u64().expect("samples") > 0, "visibility was probed: {v}");
        assert_eq!(v["pairs"].as_array().expect("pairs").len(), 2, "both directions between 2 DCs");
        for pair in v["pairs"].as_array().expect("pairs") {
            assert_eq!(pair["lost"].as_u64(), Some(0), "every probe write became visible: {pair}");
        }
    }
    assert!(
        runs[0]["visibility"]["server"]["count"].as_u64().expect("server samples") > 0,
        "the server-side metric was scraped"
    );
    let targets = report["targets"].as_array().expect("targets");
    assert!(targets.iter().any(|t| t["target"].as_str().is_some_and(|s| s.starts_with("cure ÷ eventual"))));
    svg(&dir.path().join("visibility-cdf.svg"));
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    assert!(md.contains("## Visibility across DCs") && md.contains("| eventual | 50% | 0 → 1 |"), "{md}");
}

/// `--wan-matrix` starts the local cluster with the matrix's DCs and delays, and the report says so.
#[test]
fn a_run_with_a_wan_matrix_takes_its_dcs_and_names_it_in_the_report() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let matrix = dir.path().join("m.toml");
    std::fs::write(&matrix, "rtt_ms = [[0, 10, 30], [10, 0, 20], [30, 20, 0]]\n").expect("writes the matrix");
    let out_dir = dir.path().join("out");
    let out = bench(&[
        "--workload",
        "smoke",
        "--wan-matrix",
        matrix.to_str().expect("utf-8"),
        "--update-ratio",
        "0.5",
        "--duration-s",
        "1",
        "--warmup-s",
        "0.2",
        "--out",
        out_dir.to_str().expect("utf-8"),
    ]);
    succeeded(&out);
    let report = json(&out_dir);
    assert_eq!(report["cluster"]["dcs"].as_u64(), Some(3), "the matrix's three DCs");
    assert_eq!(report["cluster"]["wan_matrix"].as_str(), matrix.to_str());
    assert!(report["cluster"]["wan_delay_ms"].is_null(), "no single delay: {}", report["cluster"]);
    let md = std::fs::read_to_string(out_dir.join("report.md")).expect("report.md");
    assert!(md.contains("WAN matrix"), "{md}");
}

#[test]
fn a_bad_workload_fails_with_the_field_named() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "name = \"bad\"\nupdate_ratio = 2\n[keys]\ncount = 10\n").expect("written");
    let out = bench(&["--workload", file.to_str().expect("utf-8"), "--out", dir.path().to_str().expect("utf-8")]);
    assert!(!out.status.success(), "a bad workload is refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("update_ratio") && stderr.contains("bad.toml"), "{stderr}");
}

#[test]
fn list_names_every_shipped_workload() {
    let out = bench(&["--list"]);
    succeeded(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in ["cure", "visibility", "honeypot-uniform", "honeypot-pareto", "karma", "letting-it-be", "smoke"] {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name} is listed: {stdout}");
    }
}
