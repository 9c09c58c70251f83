//! docs/lifecycle.md with the real binary: SIGTERM kills every process group and
//! removes the socket, SIGKILL takes the tools along (the watchdog), a second
//! signal ends a slow shutdown at once, orphans of tools are handled by the
//! subreaper (and what the watchdog cannot see).

use std::time::{Duration, Instant};

use crate::lifecycle_util::{
    all_dead_within, answer_or_close, kill_pids, pid_file, Outcome, ESCAPE_TOOL, PIDS_TOOL,
    QUICK_TOOL, STUBBORN_TOOL,
};
use crate::procs_util::{bg, call, load, os_dead, payload, start_read};
use crate::util::{wait_until, WAIT};
use crate::util::{Launch, Server};

const TOOLS: &[(&str, &str)] = &[
    ("pids", PIDS_TOOL),
    ("stubborn", STUBBORN_TOOL),
    ("escape", ESCAPE_TOOL),
    ("quick.yaml", QUICK_TOOL),
];

fn server() -> Server {
    Launch::new().tools(TOOLS).args(["--no-auth"]).start()
}

/// Start `tool` in the background as `name`; returns (tool pid, grandchild pid).
fn start_bg(d: &Server, c: &mut crate::util::Raw, tool: &str, name: &str) -> (i32, i32) {
    bg(c, &[("tool", tool), ("agent", "a1"), ("name", name)]).expect("bg");
    (
        pid_file(d, &format!("{name}.pid")),
        pid_file(d, &format!("{name}.gpid")),
    )
}

#[test]
fn sigterm_kills_sync_and_background_groups_removes_the_socket_and_exits_0() {
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "pids");
    let mut pids = Vec::new();
    for name in ["bg1", "bg2"] {
        let (p, g) = start_bg(&d, &mut c, "pids", name);
        pids.extend([p, g]);
    }
    // A synchronous call on its own connection, blocked in its read.
    let mut sync = d.attached();
    let tag = start_read(
        &mut sync,
        7,
        "proc/new",
        &payload(&[("tool", "pids"), ("agent", "a1"), ("name", "sync")]),
    );
    pids.extend([pid_file(&d, "sync.pid"), pid_file(&d, "sync.gpid")]);
    assert!(pids.iter().all(|&p| !os_dead(p)), "all tools run: {pids:?}");

    d.signal(libc::SIGTERM);
    let status = d.wait_exit(WAIT).expect("server exits after SIGTERM");
    assert_eq!(status.code(), Some(0), "exit status: {status:?}");
    assert!(
        all_dead_within(&pids, Duration::from_secs(1)),
        "tool processes survived SIGTERM: {:?}",
        pids.iter().filter(|&&p| !os_dead(p)).collect::<Vec<_>>()
    );
    assert!(!d.socket.exists(), "socket removed");
    // The blocked reader is answered or sees the connection close; no hang.
    match answer_or_close(&mut sync, tag) {
        Outcome::Closed => {}
        Outcome::Answered(b) => assert!(
            matches!(
                b,
                toolsrv_wire::Body::Rread { .. } | toolsrv_wire::Body::Rerror { .. }
            ),
            "{b:?}"
        ),
    }
    let log = d.log_text();
    assert!(log.contains("signal received; shutting down"), "{log}");
}

#[test]
fn sigint_takes_the_same_path() {
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "pids");
    let (p, g) = start_bg(&d, &mut c, "pids", "i1");
    d.signal(libc::SIGINT);
    let status = d.wait_exit(WAIT).expect("server exits after SIGINT");
    assert_eq!(status.code(), Some(0));
    assert!(all_dead_within(&[p, g], Duration::from_secs(1)));
    assert!(!d.socket.exists());
}

/// SIGKILL the server; every one of `pids` must be gone within 3 s (the
/// watchdog). Survivors are killed before the assertion fails.
fn sigkill_takes_along(d: &mut Server, pids: &[i32]) {
    d.signal(libc::SIGKILL);
    d.wait_exit(WAIT).expect("killed");
    let dead = all_dead_within(pids, Duration::from_secs(3));
    let alive: Vec<_> = pids.iter().copied().filter(|&p| !os_dead(p)).collect();
    kill_pids(&alive);
    assert!(
        dead,
        "tools alive 3 s after SIGKILL of the server: {alive:?}"
    );
}

#[test]
fn sigkill_of_the_server_takes_its_tools_along_within_3s() {
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "pids");
    let (p1, g1) = start_bg(&d, &mut c, "pids", "k1");
    let mut sync = d.attached();
    start_read(
        &mut sync,
        7,
        "proc/new",
        &payload(&[("tool", "pids"), ("agent", "a1"), ("name", "k2")]),
    );
    let pids = [p1, g1, pid_file(&d, "k2.pid"), pid_file(&d, "k2.gpid")];
    sigkill_takes_along(&mut d, &pids);
}

#[test]
fn sigkill_after_many_finished_tools_takes_the_running_ones_along() {
    // The watchdog's table has a slot per running group; finished tools free
    // theirs and new ones reuse them. Groups started after many finished
    // calls must still be killed, and only they (a stale slot would name a
    // group id the kernel may hand to an unrelated process).
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "quick");
    load(&mut c, "a1", "pids");
    for _ in 0..30 {
        let r = call(&mut c, &[("tool", "quick"), ("agent", "a1")]);
        assert_eq!(r["isError"], false, "{r}");
    }
    let (p1, g1) = start_bg(&d, &mut c, "pids", "r1");
    let r = call(&mut c, &[("tool", "quick"), ("agent", "a1")]);
    assert_eq!(r["isError"], false, "{r}");
    let (p2, g2) = start_bg(&d, &mut c, "pids", "r2");
    let pids = [p1, g1, p2, g2];
    sigkill_takes_along(&mut d, &pids);
}

#[test]
fn a_second_signal_ends_a_slow_shutdown_at_once() {
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "stubborn");
    let (p, g) = start_bg(&d, &mut c, "stubborn", "st");
    d.signal(libc::SIGTERM);
    let first = Instant::now();
    d.wait_log("signal received; shutting down");
    d.signal(libc::SIGTERM);
    let status = d
        .wait_exit(WAIT)
        .expect("server exits after the second signal");
    let took = first.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "the second signal did not end the shutdown at once: {took:?} (the KILL grace is 2 s)"
    );
    assert!(d.log_text().contains("second signal"), "{}", d.log_text());
    // The watchdog still takes the tools along.
    let dead = all_dead_within(&[p, g], Duration::from_secs(3));
    kill_pids(&[p, g]);
    assert!(dead, "stubborn tools survived the server");
    let _ = status;
}

#[test]
fn one_signal_waits_for_the_kill_grace_of_a_tool_that_ignores_term() {
    // The control of the test above: without the second signal the shutdown
    // takes the 2 s KILL grace, then exits 0 with the tool dead.
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "stubborn");
    let (p, g) = start_bg(&d, &mut c, "stubborn", "st");
    let start = Instant::now();
    d.signal(libc::SIGTERM);
    let status = d.wait_exit(WAIT).expect("server exits");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1800),
        "shutdown did not wait for the grace: {took:?}"
    );
    assert_eq!(status.code(), Some(0));
    assert!(all_dead_within(&[p, g], Duration::from_secs(1)));
    assert!(!d.socket.exists());
}

#[test]
fn an_escaped_double_forked_orphan_dies_at_sigterm_through_the_subreaper() {
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "escape");
    let r = call(
        &mut c,
        &[("tool", "escape"), ("agent", "a1"), ("name", "e1")],
    );
    assert_eq!(r["isError"], false, "{r}");
    let orphan = pid_file(&d, "e1.epid");
    // Re-parented to toolsrv (a child subreaper), in its own session; where
    // the server has a tools PID namespace (docs/watch.md), to that
    // namespace's init, a child of the server.
    // (The run's kernel group is killed when the call returns, so the orphan
    // is usually dead by now: its zombie was re-parented to the server, or
    // reaped at once by the tools namespace's init, which leaves no pid to
    // name; then nothing of the run may be left in the namespace.)
    let tools_ns = toolsrv_testkit::pids::tools_namespace(d.pid());
    let reaper = tools_ns.map_or(d.pid() as i32, |(_, init)| init);
    if orphan == 0 && tools_ns.is_some() {
        assert!(
            wait_until(WAIT, || toolsrv_testkit::pids::in_tools_namespace(d.pid())
                .is_empty()),
            "the escaped orphan left something in the tools namespace"
        );
    } else {
        assert!(
            wait_until(WAIT, || crate::procs_util::os_ppid(orphan) == Some(reaper)),
            "orphan {orphan} was not re-parented to the server (or its tools namespace's init {reaper})"
        );
    }
    d.signal(libc::SIGTERM);
    let status = d.wait_exit(WAIT).expect("exit");
    let dead = all_dead_within(&[orphan], Duration::from_secs(1));
    kill_pids(&[orphan]);
    assert!(dead, "the escaped orphan survived SIGTERM");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn an_escaped_orphan_dies_when_the_server_is_killed() {
    // A descendant in a session of its own is still in its run's kernel group:
    // the watchdog kills the server's groups when the server is SIGKILLed
    // (before containment, it escaped).
    let mut d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "escape");
    let r = call(
        &mut c,
        &[("tool", "escape"), ("agent", "a1"), ("name", "e2")],
    );
    assert_eq!(r["isError"], false, "{r}");
    let orphan = pid_file(&d, "e2.epid");
    d.signal(libc::SIGKILL);
    d.wait_exit(WAIT).expect("killed");
    let died = all_dead_within(&[orphan], Duration::from_secs(5));
    kill_pids(&[orphan]);
    assert!(died, "the escaped orphan survived SIGKILL of the server");
}

#[test]
fn fast_tools_are_never_reaped_by_the_orphan_reaper() {
    // Every tool is reaped by its executor through its pidfd; the subreaper's
    // orphan reaper must not steal the status of a tool that just exited.
    let d = server();
    let mut c = d.attached();
    load(&mut c, "a1", "quick");
    let mut bad = Vec::new();
    for i in 0..150 {
        let r = call(&mut c, &[("tool", "quick"), ("agent", "a1")]);
        if r["isError"] != false {
            bad.push((i, r.to_string()));
        }
    }
    assert!(bad.is_empty(), "calls of `true` failed: {bad:?}");
}

#[test]
fn a_slow_shutdown_does_not_remove_the_socket_of_a_successor() {
    // A supervisor restarts toolsrv: SIGTERM to the old one and a new one at
    // once on the same path. The old server, still waiting for a tool that
    // ignores TERM, must not delete the new server's socket when it ends.
    let mut old = server();
    let mut c = old.attached();
    load(&mut c, "a1", "stubborn");
    let (p, g) = start_bg(&old, &mut c, "stubborn", "st");
    old.signal(libc::SIGTERM);
    old.wait_log("signal received; shutting down");
    let new = Launch::new()
        .tools(TOOLS)
        .args(["--no-auth"])
        .listen(&old.socket)
        .start();
    let status = old.wait_exit(WAIT).expect("old server exits");
    assert_eq!(status.code(), Some(0));
    assert!(all_dead_within(&[p, g], Duration::from_secs(1)));
    assert!(
        new.socket.exists(),
        "the old server removed its successor's socket {}",
        new.socket.display()
    );
    let mut n = new.attached();
    assert!(!n.read_file("info").is_empty());
}
