//! The sans-I/O boundary is the architecture: the protocol core must not read clocks, sleep, touch the network or
//! the disk, draw from a global random source, or depend on an async runtime. This test reads the crate's sources
//! and manifest and fails on any of those.

use std::path::{Path, PathBuf};

/// Patterns that must not appear in `crates/core/src`, with the reason.
const FORBIDDEN: &[(&str, &str)] = &[
    ("Instant::now", "reads a clock"),
    ("SystemTime", "reads a clock"),
    ("std::time::Instant", "reads a clock"),
    ("UNIX_EPOCH", "reads a clock"),
    ("std::net", "uses the network"),
    ("TcpStream", "uses the network"),
    ("UdpSocket", "uses the network"),
    ("std::fs", "touches files"),
    ("File::open", "touches files"),
    ("File::create", "touches files"),
    ("thread::sleep", "sleeps"),
    ("std::thread", "starts threads"),
    ("thread_rng", "draws from a thread-local random source"),
    ("rand::random", "draws from a global random source"),
    ("rand::rng()", "draws from a thread-local random source"),
    ("OsRng", "draws from the operating system's random source"),
    ("getrandom", "draws from the operating system's random source"),
    ("RandomState", "hashes with a per-process random seed, which breaks deterministic replay"),
    ("tokio", "depends on an async runtime"),
    ("async_std", "depends on an async runtime"),
    ("smol::", "depends on an async runtime"),
    ("async fn", "is async: the core is driven, it does not run"),
    (".await", "is async: the core is driven, it does not run"),
];

/// Dependencies the core's manifest must not name.
const FORBIDDEN_DEPENDENCIES: &[&str] =
    &["tokio", "async-std", "smol", "mio", "rand", "getrandom", "fastrand", "chrono", "time", "socket2"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("crates/core/src is readable") {
        let path = entry.expect("directory entries are readable").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Removes `//` comments, so that documentation may name what the code must not do.
fn code_only(source: &str) -> String {
    source.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn violations(source: &str) -> Vec<(&'static str, &'static str)> {
    let code = code_only(source);
    FORBIDDEN.iter().filter(|(pattern, _)| code.contains(pattern)).copied().collect()
}

#[test]
fn core_sources_do_no_io_read_no_clock_and_draw_no_randomness() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() >= 5, "expected the core's sources under {}", src.display());
    let mut found = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("sources are UTF-8");
        for (pattern, why) in violations(&source) {
            found.push(format!("{}: `{pattern}` {why}", file.display()));
        }
    }
    assert!(found.is_empty(), "the sans-I/O core breaks its boundary:\n{}", found.join("\n"));
}

#[test]
fn core_manifest_names_no_runtime_clock_or_random_dependency() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .expect("the manifest is readable");
    let mut section = String::new();
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        if section != "[dependencies]" {
            continue; // Dev-dependencies (proptest) may use randomness in tests.
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if FORBIDDEN_DEPENDENCIES.contains(&name) {
            found.push(name.to_string());
        }
    }
    assert!(found.is_empty(), "the core depends on {found:?}");
}

#[test]
fn the_scanner_itself_catches_each_kind_of_violation() {
    // A check that cannot fail proves nothing: feed it code that breaks each rule.
    for (snippet, pattern) in [
        ("let t = std::time::Instant::now();", "Instant::now"),
        ("let s = std::net::TcpStream::connect(a);", "std::net"),
        ("std::fs::write(p, b)?;", "std::fs"),
        ("std::thread::sleep(d);", "thread::sleep"),
        ("let x: u8 = rand::random();", "rand::random"),
        ("let mut r = rand::thread_rng();", "thread_rng"),
        ("tokio::spawn(f);", "tokio"),
    ] {
        let hits = violations(snippet);
        assert!(hits.iter().any(|(p, _)| *p == pattern), "{snippet:?} not caught as {pattern}");
    }
    assert!(violations("// Instant::now is forbidden here").is_empty(), "comments are not code");
}
