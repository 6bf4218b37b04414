//! `causet certs`: a CA and one certificate per node, usable as each node's `[tls]`; run again, it issues more
//! certificates from the same CA.

use causet_server::tls::{PeerTls, TlsConfig};
use std::process::Command;

fn certs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_causet")).arg("certs").args(args).output().expect("causet runs")
}

#[test]
fn certs_writes_a_ca_and_a_usable_certificate_per_node_and_reuses_the_ca() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().to_str().expect("utf-8");
    let run = certs(&["--cluster", "prod", "--dcs", "2", "--nodes-per-dc", "2", "--out", out]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca.pem");
    for (dc, node) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        let tls = TlsConfig {
            ca: dir.path().join("ca.pem"),
            cert: dir.path().join(format!("dc{dc}-n{node}.pem")),
            key: dir.path().join(format!("dc{dc}-n{node}.key")),
            cluster: "prod".into(),
        };
        PeerTls::load(&tls).unwrap_or_else(|e| panic!("dc{dc}-n{node}: {e}"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&tls.key).expect("the key").permissions().mode();
            assert_eq!(mode & 0o077, 0, "a private key is readable by its owner only");
        }
    }
    // A third DC later: same CA.
    let run = certs(&["--cluster", "prod", "--dcs", "3", "--nodes-per-dc", "1", "--out", out]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca.pem"), ca, "the CA is kept");
    assert!(dir.path().join("dc2-n0.pem").exists());
    let bad = certs(&["--cluster", "not a name", "--dcs", "1", "--nodes-per-dc", "1", "--out", out]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("DNS name"));
}
