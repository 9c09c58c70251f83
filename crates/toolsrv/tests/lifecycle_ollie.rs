//! Background completion messages (docs/protocol.md, "Completion messages") to a fake Ollie namespace
//! built from the project's own 9P server core, and what a dead Ollie socket
//! does (nothing but a log line).

use std::time::{Duration, Instant};

use crate::lifecycle_util::{FakeOllie, QUICK_TOOL};
use crate::procs_util::{bg, call, final_stat, load};
use crate::util::Raw;
use crate::util::{Launch, Server};

fn server(ollie: &std::path::Path) -> (Server, Raw) {
    let ollie = ollie.to_str().expect("utf8").to_string();
    let d = Launch::new()
        .tools(&[("quick.yaml", QUICK_TOOL)])
        .args(["--no-auth", "--ollie", &ollie])
        .start();
    let mut c = d.attached();
    load(&mut c, "a1", "quick");
    (d, c)
}

fn expected(pid: u64) -> String {
    format!(
        "[toolsrv] background process {pid} (quick) for agent a1 ended: exited, exit code 0. Output: proc/{pid}/out"
    )
}

#[test]
fn a_background_process_with_a_session_sends_exactly_one_message() {
    let ollie = FakeOllie::start(&["s1"]);
    let (_d, mut c) = server(&ollie.socket);

    // No session, and a synchronous call with one: no message.
    let quiet = bg(&mut c, &[("tool", "quick"), ("agent", "a1")]).expect("bg");
    final_stat(&mut c, quiet);
    let r = call(
        &mut c,
        &[("tool", "quick"), ("agent", "a1"), ("session", "s1")],
    );
    assert_eq!(r["isError"], false, "{r}");

    let first = bg(
        &mut c,
        &[("tool", "quick"), ("agent", "a1"), ("session", "s1")],
    )
    .expect("bg");
    let got = ollie.wait_for(1);
    assert_eq!(got, vec![("s1".to_string(), expected(first))]);

    // A second one as a barrier: anything the quiet runs had sent would be in
    // front of it by now.
    let second = bg(
        &mut c,
        &[("tool", "quick"), ("agent", "a1"), ("session", "s1")],
    )
    .expect("bg");
    let got = ollie.wait_for(2);
    assert_eq!(
        got,
        vec![
            ("s1".to_string(), expected(first)),
            ("s1".to_string(), expected(second)),
        ]
    );
}

/// Median and max of `n` synchronous calls' latencies.
fn latencies(c: &mut Raw, n: usize) -> (Duration, Duration) {
    let mut v: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let r = call(c, &[("tool", "quick"), ("agent", "a1")]);
            assert_eq!(r["isError"], false, "{r}");
            t.elapsed()
        })
        .collect();
    v.sort();
    (v[n / 2], v[n - 1])
}

fn dead_ollie_changes_nothing(ollie: &std::path::Path) {
    let (d, mut c) = server(ollie);
    let (baseline, _) = latencies(&mut c, 5);
    let t = Instant::now();
    let pid = bg(
        &mut c,
        &[("tool", "quick"), ("agent", "a1"), ("session", "s1")],
    )
    .expect("bg");
    final_stat(&mut c, pid);
    let (_, worst) = latencies(&mut c, 5);
    assert!(
        worst < baseline * 4 + Duration::from_millis(300),
        "calls slowed down after a failed delivery: {worst:?} vs median {baseline:?}"
    );
    d.wait_log("completion message not delivered");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "the failed delivery took {:?}",
        t.elapsed()
    );
    let line = d
        .log_text()
        .lines()
        .find(|l| l.contains("completion message not delivered"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(line.contains(&format!("pid={pid}")), "{line}");
    assert!(line.contains(&ollie.display().to_string()), "{line}");
    // The server still serves everything.
    assert!(!c.read_file("info").is_empty());
}

#[test]
fn an_ollie_socket_nobody_listens_on_is_logged_and_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ollie");
    // Bind and close: the socket file stays, nobody accepts.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
    assert!(path.exists());
    dead_ollie_changes_nothing(&path);
}

#[test]
fn a_missing_ollie_socket_is_logged_and_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    dead_ollie_changes_nothing(&dir.path().join("no-ollie-here"));
}
