//! The command line as a Unix tool: a command whose reader stops reading ends quietly.

use std::process::{Command, Stdio};

#[test]
fn a_command_whose_reader_goes_away_ends_quietly_instead_of_panicking() {
    // `causet sim --seed 1 | head -0`: the reading end closes before the first line is printed.
    let mut child = Command::new(env!("CARGO_BIN_EXE_causet"))
        .args(["sim", "--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("causet runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("it ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "a closed stdout is no panic: {stderr}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // Ended by SIGPIPE (13) at its first line, as `head` expects of any tool; or, had it printed everything
        // before the pipe closed, successfully.
        assert!(out.status.signal() == Some(13) || out.status.success(), "{:?}", out.status);
    }
}
