//! The `toolsrv-bench` binary end to end: it starts the real server (the
//! `toolsrv` built next to it in the same target dir), measures, and reports.

use std::path::PathBuf;
use std::process::Command;

/// The server binary next to the bench binary (`cargo test -p toolsrv` or
/// `cargo build -p toolsrv` puts it there).
fn server_bin() -> PathBuf {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_toolsrv-bench"));
    let bin = bench.with_file_name("toolsrv");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p toolsrv` first",
        bin.display()
    );
    bin
}

#[test]
fn rtt_reports_every_figure_with_ratios_for_both_servers() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsrv-bench"))
        .args(["rtt", "--iters", "200"])
        .env("TOOLSRV_BIN", server_bin())
        .output()
        .expect("run toolsrv-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("cores: "), "{stdout}");
    assert_eq!(stdout.matches("== rtt: server").count(), 2, "{stdout}");
    assert!(stdout.contains("server --no-auth"), "{stdout}");
    assert!(stdout.contains("server auth"), "{stdout}");
    assert!(stdout.contains("200 iterations per figure"), "{stdout}");
    for name in [
        "raw-echo (server thread)",
        "9p-read-info (bare codec)",
        "9p-read-info (bare, clunk after)",
        "9p-tstat (one rpc)",
    ] {
        assert_eq!(stdout.matches(name).count(), 2, "{name}: {stdout}");
    }
    let goal_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("9p-read-info ") && l.contains("goal < 4x"))
        .collect();
    assert_eq!(goal_lines.len(), 2, "{stdout}");
    for l in goal_lines {
        assert!(
            l.contains("n=200") && l.contains("| baseline raw-echo median"),
            "{l}"
        );
    }
}

#[test]
fn unknown_bench_and_bad_iters_exit_2() {
    let bench = env!("CARGO_BIN_EXE_toolsrv-bench");
    let out = Command::new(bench).arg("nope").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown bench \"nope\"; known: rtt"));
    let out = Command::new(bench)
        .args(["--iters", "-3"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iters \"-3\""));
}

#[test]
fn missing_server_binary_is_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsrv-bench"))
        .arg("rtt")
        .env("TOOLSRV_BIN", "/nonexistent/toolsrv")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("toolsrv binary not found at /nonexistent/toolsrv"),
        "{stderr}"
    );
}
