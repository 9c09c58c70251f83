//! The test kit itself, against the real `toolsrv serve`.

use std::os::unix::fs::PermissionsExt;

use toolsrv_testkit::{Launch, LaunchError, Server};
use toolsrv_wire::Body;

#[test]
fn a_server_answers_raw_9p_and_helper_fids_are_clunked() {
    let srv = Server::start(&["--no-auth"]);
    assert!(srv.cwd().starts_with(srv.home()) && srv.cwd() != srv.home());
    assert!(srv.socket.starts_with(srv.home()));
    let mut c = srv.attached();
    assert_eq!(c.json("info")["platform"], "linux");
    let names: Vec<String> = c.list("/").into_iter().map(|s| s.name).collect();
    assert!(names.iter().any(|n| n == "proc"), "{names:?}");
    // The helpers took fids of their own and clunked them: the next fid is
    // new, and the ones before it are unknown to the server.
    let next = c.fid();
    let used = next - 1;
    let e = c.err(Body::Twalk {
        fid: used,
        newfid: next,
        wnames: vec![],
    });
    assert!(e.contains("fid"), "{e}");
    c.walk(next, "info").expect("walk with a fresh fid");
}

#[test]
fn tools_are_written_with_their_modes_and_the_cwd_can_be_given() {
    let cwd = tempfile::tempdir().expect("cwd");
    let srv = Launch::new()
        .cwd(cwd.path())
        .arg("--no-auth")
        .tools(&[
            ("hi.yaml", "description: Say hi\ncommand: \"echo hi\"\n"),
            (
                "script",
                "#!/bin/sh\n# ---\n# description: A script\n# ---\necho script\n",
            ),
        ])
        .start();
    assert_eq!(srv.cwd(), cwd.path());
    let mode = |n: &str| {
        std::fs::metadata(srv.tools_dir().join(n))
            .expect("tool file")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("hi.yaml"), 0o644);
    assert_eq!(mode("script"), 0o755);
    let mut c = srv.attached();
    let all = c.json("all");
    let names: Vec<&str> = all
        .as_array()
        .expect("all is a list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"hi") && names.contains(&"script"), "{all}");
}

#[test]
fn a_server_that_exits_at_start_is_an_error_naming_its_status() {
    let e = Launch::new()
        .arg("--tools")
        .arg("/nonexistent/toolsrv-testkit-tools")
        .try_start()
        .err()
        .expect("the server refuses a missing tools directory");
    match &e {
        LaunchError::Exited { status, .. } => assert!(!status.success(), "{e}"),
        other => panic!("expected Exited, got {other}"),
    }
}

#[test]
fn stop_signals_and_reaps_the_server() {
    let mut srv = Launch::new().arg("--no-auth").unconnected().start();
    assert!(srv.socket.exists());
    assert!(srv.running());
    let status = srv.stop(libc::SIGTERM);
    assert!(status.success(), "{status}");
    assert!(!srv.running());
    assert_eq!(srv.pid(), 0);
}

/// The signals ignored by `pid` (`SigIgn:` of its status, bit `n - 1` for
/// signal `n`).
fn ignored_signals(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .expect("SigIgn line");
    u64::from_str_radix(hex.trim(), 16).expect("hex mask")
}

#[test]
fn a_server_does_not_inherit_the_signals_the_test_process_ignores() {
    // SIGUSR2 and SIGWINCH mean nothing to the other tests of this binary.
    // Safety: installs SIG_IGN, which runs no code.
    unsafe {
        libc::signal(libc::SIGUSR2, libc::SIG_IGN);
        libc::signal(libc::SIGWINCH, libc::SIG_IGN);
    }
    assert_ne!(
        ignored_signals(std::process::id()) & (1 << (libc::SIGUSR2 - 1)),
        0
    );
    let srv = Launch::new().arg("--no-auth").start();
    // What toolsrv ignores itself: SIGPIPE (the Rust runtime's choice).
    assert_eq!(
        ignored_signals(srv.pid()),
        1 << (libc::SIGPIPE - 1),
        "the server ignores only SIGPIPE"
    );
}
