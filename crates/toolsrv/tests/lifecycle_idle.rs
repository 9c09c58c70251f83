//! The idle monitor (docs/lifecycle.md): `--idle-timeout` after the last client
//! leaves, not while a background process runs, and the no-connection grace.
//! Durations are what these tests measure, so they wait on the clock, with
//! tolerances.

use std::time::{Duration, Instant};

use crate::lifecycle_util::{NAP_TOOL, QUICK_TOOL};
use crate::procs_util::{bg, call, load};
use crate::util::Launch;

const TOOLS: &[(&str, &str)] = &[("nap.yaml", NAP_TOOL), ("quick.yaml", QUICK_TOOL)];

#[test]
fn idle_timeout_exits_about_2s_after_the_last_client_disconnects() {
    let mut d = Launch::new()
        .tools(TOOLS)
        .args(["--no-auth", "--idle-timeout", "2s"])
        .start();
    let mut c = d.attached();
    load(&mut c, "a1", "quick");
    let r = call(&mut c, &[("tool", "quick"), ("agent", "a1")]);
    assert_eq!(r["isError"], false, "{r}");
    // A connection held open keeps it alive beyond the timeout.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(d.running(), "exited while a client was connected");
    drop(c);
    let gone = Instant::now();
    let status = d
        .wait_exit(Duration::from_secs(10))
        .expect("idle server did not exit");
    let took = gone.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took <= Duration::from_secs(6),
        "exited {took:?} after the last disconnect (expected ~2 s)"
    );
    assert_eq!(status.code(), Some(0));
    assert!(!d.socket.exists(), "socket removed");
    assert!(d.log_text().contains("idle timeout; shutting down"));
}

#[test]
fn a_running_background_process_keeps_an_idle_server_alive() {
    let mut d = Launch::new()
        .tools(TOOLS)
        .args(["--no-auth", "--idle-timeout", "2s"])
        .start();
    let mut c = d.attached();
    load(&mut c, "a1", "nap");
    let started = Instant::now();
    bg(&mut c, &[("tool", "nap"), ("agent", "a1"), ("s", "4")]).expect("bg");
    drop(c);
    let gone = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        d.running(),
        "exited while a background process ran ({:?} after the disconnect)",
        gone.elapsed()
    );
    let status = d.wait_exit(Duration::from_secs(10)).expect("no exit");
    let took = started.elapsed();
    // The nap ends ~4 s after it started; the server ~2 s later.
    assert!(
        took >= Duration::from_millis(5500) && took <= Duration::from_secs(10),
        "exited {took:?} after the background start (expected ~6 s)"
    );
    assert_eq!(status.code(), Some(0));
}

#[test]
fn without_any_connection_the_server_exits_after_the_grace() {
    let mut d = Launch::new()
        .tools(TOOLS)
        .args(["--no-auth", "--idle-timeout", "1h", "--idle-grace", "2s"])
        .unconnected()
        .start();
    let status = d
        .wait_exit(Duration::from_secs(10))
        .expect("no exit after the grace");
    let took = d.started.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took <= Duration::from_secs(6),
        "exited {took:?} after start (expected ~2 s)"
    );
    assert_eq!(status.code(), Some(0));
    assert!(!d.socket.exists(), "socket removed");
    assert!(d
        .log_text()
        .contains("no client connected within the grace period"));
}

#[test]
fn without_idle_timeout_the_grace_does_not_apply() {
    let mut d = Launch::new()
        .tools(TOOLS)
        .args(["--no-auth", "--idle-grace", "1s"])
        .unconnected()
        .start();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(d.running(), "exited without --idle-timeout");
}
