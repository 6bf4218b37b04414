//! Workload files: the shipped ones parse and describe the papers' workloads; bad input gets an error that names
//! the field and says what it takes.

use causet_bench::keys::Distribution;
use causet_bench::workload::{self, CrdtKind, KeySpace, Point, Workload, WorkloadError, SHIPPED};

const MINIMAL: &str = "name = \"t\"\n[keys]\ncount = 100\n";

fn error(text: &str) -> String {
    match Workload::parse(text, "test.toml") {
        Ok(w) => panic!("accepted a bad workload: {:?}", w.file),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_shipped_workload_parses() {
    for (name, text) in SHIPPED {
        let w = Workload::parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&w.file.name, name, "a shipped workload's name matches its file");
        assert!(!w.file.description.is_empty(), "{name} says what it reproduces");
        assert!(!w.points(8).is_empty());
    }
}

#[test]
fn the_cure_workload_is_the_papers_fig_2_and_3() {
    let w = workload::load("cure").expect("shipped");
    assert_eq!(w.file.update_ratio.values(), vec![0.01, 0.10, 0.25, 0.50, 0.99]);
    assert_eq!(w.key_space, KeySpace::PerPartition(10_000));
    assert_eq!(w.file.keys.key_bytes, 8);
    assert_eq!(w.file.values.bytes, 10);
    assert_eq!(w.file.values.crdt, CrdtKind::LwwRegister);
    assert_eq!(w.distribution, Distribution::Uniform);
    assert_eq!((w.file.mix.single, w.file.mix.interactive), (1.0, 0.0));
    assert_eq!((w.file.cluster.dcs, w.file.cluster.wan_delay_ms), (3, 50));
    // 10,000 keys per partition over 8 partitions.
    assert!(w.points(8).iter().all(|p| p.keys == 80_000));
}

#[test]
fn the_honeypot_workloads_sweep_key_counts_and_mixes_with_ten_key_transactions() {
    for (name, dist) in [("honeypot-uniform", "uniform"), ("honeypot-pareto", "pareto")] {
        let w = workload::load(name).expect("shipped");
        assert_eq!(w.file.mix.keys_per_transaction, 10);
        assert_eq!(w.file.keys.distribution, dist);
        let points = w.points(12);
        assert_eq!(points.len(), 16, "4 key counts × 4 mixes");
        assert!(points.contains(&Point { update_ratio: 0.10, keys: 10 }));
        assert!(points.contains(&Point { update_ratio: 1.0, keys: 10_000 }));
    }
}

#[test]
fn karma_and_letting_it_be_are_zipfian_with_their_value_sizes() {
    let k = workload::load("karma").expect("shipped");
    assert_eq!(k.distribution, Distribution::Zipfian { theta: 0.99 });
    assert_eq!((k.file.values.bytes, k.file.update_ratio.values()), (200, vec![0.05]));
    let l = workload::load("letting-it-be").expect("shipped");
    assert_eq!(l.file.values.bytes, 1024);
    assert_eq!(l.file.update_ratio.values(), vec![0.50, 0.05]);
}

#[test]
fn defaults_fill_a_minimal_file() {
    let w = Workload::parse(MINIMAL, "t").expect("minimal");
    assert_eq!(w.points(8), vec![Point { update_ratio: 0.1, keys: 100 }]);
    assert_eq!(w.distribution, Distribution::Uniform);
    assert!(!w.file.visibility.enabled);
    assert_eq!(w.file.cluster.nodes_per_dc, 1);
}

#[test]
fn a_missing_file_names_its_path() {
    let e = workload::load("/nonexistent/workload.toml").expect_err("no such file");
    assert!(matches!(e, WorkloadError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/workload.toml"), "{e}");
}

#[test]
fn unknown_and_mistyped_fields_are_refused_with_their_name() {
    let e = error("name = \"t\"\n[keys]\ncount = 100\nkey_size = 8\n");
    assert!(e.contains("key_size"), "{e}");
    let e = error("name = \"t\"\n[keys]\ncount = \"many\"\n");
    assert!(e.contains("count") || e.contains("keys"), "{e}");
    let e = error("name = \"t\"\n");
    assert!(e.contains("keys"), "{e}");
    let e = error("name = \"t\"\n[keys]\ncount = 100\n[values]\ncrdt = \"bag\"\n");
    assert!(e.contains("bag") || e.contains("crdt"), "{e}");
}

#[test]
fn out_of_range_values_are_refused_with_what_the_field_takes() {
    let cases = [
        ("update_ratio = 1.5\n", "update_ratio"),
        ("update_ratio = []\n", "update_ratio"),
        ("[run]\nduration_s = 0\n", "run.duration_s"),
        ("[clients]\nsessions_per_dc = 0\n", "clients.sessions_per_dc"),
        ("[clients]\nremote_fraction = 0.7\nswitch_fraction = 0.7\n", "clients"),
        ("[mix]\nsingle = 0\n", "mix"),
        ("[mix]\nsingle = 0\ninteractive = 1\nkeys_per_transaction = 101\n", "mix.keys_per_transaction"),
        ("[mix]\nsingle = 1\nbatched = true\n", "mix.batched"),
        ("[cluster]\nsync = \"never\"\n", "cluster.sync"),
        ("[cluster]\nnodes_per_dc = 0\n", "cluster.nodes_per_dc"),
        ("[cluster]\npartitions = 2\nnodes_per_dc = 3\n", "cluster.nodes_per_dc"),
        ("[cluster]\nnodes_per_dc = 2\nreplicas = 3\n", "cluster.replicas"),
        ("[cluster]\nreplicas = 0\n", "cluster.replicas"),
        ("[cluster]\ndcs = 2\n[clients]\ndcs = [2]\n", "clients.dcs"),
    ];
    for (extra, field) in cases {
        let e = error(&format!("{MINIMAL}{extra}"));
        assert!(e.contains(field), "{extra:?}: the error names {field}: {e}");
        assert!(e.contains("test.toml"), "the error names the file: {e}");
    }
}

#[test]
fn key_space_and_distribution_errors_are_specific() {
    let e = error("name = \"t\"\n[keys]\ncount = 10\nper_partition = 10\n");
    assert!(e.contains("not both"), "{e}");
    let e = error("name = \"t\"\n[keys]\ncount = 10\ndistribution = \"gaussian\"\n");
    assert!(e.contains("gaussian") && e.contains("zipfian"), "{e}");
    let e = error("name = \"t\"\n[keys]\ncount = 10\ntheta = 0.9\n");
    assert!(e.contains("keys.theta") && e.contains("zipfian"), "{e}");
    let e = error("name = \"t\"\n[keys]\ncount = 10\ndistribution = \"zipfian\"\ntheta = -1\n");
    assert!(e.contains("keys.theta"), "{e}");
    let e = error("name = \"t\"\n[keys]\ncount = 1000\nkey_bytes = 2\n");
    assert!(e.contains("keys.key_bytes"), "{e}");
    let e = error("name = \"bad name\"\n[keys]\ncount = 10\n");
    assert!(e.contains("name"), "{e}");
}

#[test]
fn sweeps_cover_every_key_count_for_every_ratio_in_file_order() {
    let w = Workload::parse("name = \"t\"\nupdate_ratio = [0.0, 1.0]\n[keys]\ncount = [10, 20]\n", "t").expect("ok");
    assert_eq!(
        w.points(8),
        vec![
            Point { update_ratio: 0.0, keys: 10 },
            Point { update_ratio: 1.0, keys: 10 },
            Point { update_ratio: 0.0, keys: 20 },
            Point { update_ratio: 1.0, keys: 20 },
        ]
    );
}
