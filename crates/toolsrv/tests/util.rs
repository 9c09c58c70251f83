//! The integration tests' harness: the test kit's launcher, raw 9P client
//! and binaries (crates/testkit), shared by every module.

#![allow(unused_imports)]

pub use toolsrv_testkit::{cli, example, toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// Spawns `cmd` (an MCP bridge, say) with no stdin or stdout and its stderr
/// piped, and reads the first line it writes there (its address, or why it
/// could not start): the child and that line (empty if it ended first).
pub fn spawn_for_first_line(
    cmd: &mut std::process::Command,
    what: &str,
) -> (std::process::Child, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let mut line = String::new();
    if let Some(err) = child.stderr.take() {
        let _ = std::io::BufReader::new(err).read_line(&mut line);
    }
    (child, line)
}
