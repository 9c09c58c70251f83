//! docs/protocol.md, "Requests and results" "Cancellation" and the process table under load: clunk, closed
//! connection and `Tflush`; no zombies and no leaked descriptors after many
//! mixed calls; 500 background processes at once.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use toolsrv_wire::Body;

use crate::procs_util::{
    bg, call, call_shell, error_text, fd_count, final_stat, is_cancelled_reply, list, ok_text,
    only_proc, os_dead, patient, payload, recv_tag, shell_session, start_read, subdir,
    tools_session, zombie_children,
};
use crate::util::{wait_until, Raw, Server, WAIT};

/// Starts a grandchild, records its OS pid in ./f, and waits for it.
const SPAWN: &str = "description: Start a grandchild\ncommand: \"sleep 300 & echo $! > f; wait\"\n";

/// Start the spawning tool synchronously on `c` (fid 20) in `<cwd>/<dir>`;
/// returns the read's tag and the grandchild's OS pid once it is running.
fn start_spawn(srv: &Server, c: &mut Raw, dir: &str) -> (u16, i32) {
    let d = subdir(srv, dir);
    let tag = start_read(
        c,
        20,
        "proc/new",
        &payload(&[("tool", "spawn"), ("agent", dir), ("cwd", dir)]),
    );
    (tag, grandchild(srv, &d))
}

/// The pid the tool wrote to `<dir>/f`, once it is there (as this process
/// sees it: the tool wrote its pid in the server's tools PID namespace).
fn grandchild(srv: &Server, dir: &Path) -> i32 {
    let f = dir.join("f");
    let mut pid = None;
    assert!(
        wait_until(WAIT, || {
            pid = std::fs::read_to_string(&f)
                .ok()
                .filter(|s| s.ends_with('\n'))
                .and_then(|s| s.trim().parse::<i32>().ok());
            pid.is_some()
        }),
        "the tool did not write its grandchild's pid"
    );
    let pid = srv.host_pid(pid.unwrap_or_default());
    assert!(!os_dead(pid), "grandchild {pid} is not running");
    pid
}

/// A session with the spawning tool loaded for the agents the tests use.
fn spawn_session() -> (Server, Raw) {
    let (srv, mut c) = tools_session(&[("spawn.yaml", SPAWN)], &[]);
    for a in ["w1", "w2", "w3"] {
        crate::procs_util::load(&mut c, a, "spawn");
    }
    (srv, c)
}

/// The process group is gone within 3 s and the state is `cancelled`.
fn assert_cancelled(c: &mut Raw, agent: &str, gpid: i32) {
    assert!(
        wait_until(Duration::from_secs(3), || os_dead(gpid)),
        "grandchild {gpid} survived the cancellation"
    );
    let pid = only_proc(c, agent)["pid"].as_u64().expect("pid");
    let st = final_stat(c, pid);
    assert_eq!(st["state"], "cancelled", "{st}");
}

#[test]
fn clunking_a_blocked_proc_new_cancels_and_kills_the_group() {
    let (srv, mut c) = spawn_session();
    let (tag, gpid) = start_spawn(&srv, &mut c, "w1");
    let mut o = srv.attached();
    assert_eq!(only_proc(&mut o, "w1")["state"], "running");
    let ctag = c.tag();
    c.send(ctag, Body::Tclunk { fid: 20 });
    let mut others = Vec::new();
    let reply = recv_tag(&mut c, tag, &mut others);
    assert!(is_cancelled_reply(&reply), "blocked read got {reply:?}");
    let clunk = match others.pop() {
        Some(f) => f,
        None => c.recv(),
    };
    assert_eq!((clunk.tag, clunk.body), (ctag, Body::Rclunk));
    assert_cancelled(&mut o, "w1", gpid);
}

#[test]
fn closing_the_connection_cancels_like_a_clunk() {
    let (srv, mut c) = spawn_session();
    let mut d = srv.attached();
    let (_tag, gpid) = start_spawn(&srv, &mut d, "w2");
    assert_eq!(only_proc(&mut c, "w2")["state"], "running");
    drop(d);
    assert_cancelled(&mut c, "w2", gpid);
}

#[test]
fn flushing_the_blocked_read_does_not_kill() {
    let (srv, mut c) = spawn_session();
    let (tag, gpid) = start_spawn(&srv, &mut c, "w3");
    let ftag = c.tag();
    c.send(ftag, Body::Tflush { oldtag: tag });
    let f = c.recv();
    assert_eq!(
        (f.tag, f.body),
        (ftag, Body::Rflush),
        "no reply for the flushed read"
    );
    let mut o = srv.attached();
    let pid = only_proc(&mut o, "w3")["pid"].as_u64().expect("pid");
    // Past the 2 s kill grace: still running.
    let killed = wait_until(Duration::from_millis(2500), || {
        os_dead(gpid) || crate::procs_util::stat(&mut o, pid)["state"] != "running"
    });
    assert!(!killed, "flushing the read killed the process");
    // The fid still cancels when clunked.
    c.ok(Body::Tclunk { fid: 20 });
    assert_cancelled(&mut o, "w3", gpid);
}

/// Wait until no process of the server is running.
fn all_finished(c: &mut Raw) {
    let mut last = Vec::new();
    let done = wait_until(Duration::from_secs(60), || {
        last = list(c, None);
        last.iter().all(|p| p["state"] != "running")
    });
    assert!(done, "processes still running: {last:?}");
}

/// One cancelled call: clunk (on `c`) or connection close (on a fresh one).
fn cancelled_call(srv: &Server, c: &mut Raw, by_close: bool) {
    let p = payload(&[("tool", "shell"), ("agent", "a1"), ("command", "sleep 30")]);
    if by_close {
        let mut d = srv.attached();
        start_read(&mut d, 21, "proc/new", &p);
        drop(d);
        return;
    }
    let tag = start_read(c, 21, "proc/new", &p);
    let ctag = c.tag();
    c.send(ctag, Body::Tclunk { fid: 21 });
    let mut others = Vec::new();
    let reply = recv_tag(c, tag, &mut others);
    assert!(is_cancelled_reply(&reply), "{reply:?}");
    if others.is_empty() {
        others.push(c.recv());
    }
    assert_eq!(others[0].tag, ctag);
}

/// One call of each kind, by `i`.
fn mixed_call(srv: &Server, c: &mut Raw, i: usize) {
    let f = |cmd: &'static str| [("tool", "shell"), ("agent", "a1"), ("command", cmd)];
    match i % 6 {
        0 => assert_eq!(ok_text(&call_shell(c, "echo ok")), "ok\n"),
        1 => {
            let t = error_text(&call_shell(c, "echo no; exit 2"));
            assert!(t.ends_with("exit status 2"), "{t}");
        }
        2 => cancelled_call(srv, c, false),
        3 => cancelled_call(srv, c, true),
        4 => {
            let mut fields = f("sleep 30").to_vec();
            fields.push(("timeout", "100ms"));
            let t = error_text(&call(c, &fields));
            assert!(t.contains("timed out") || t.contains("timeout"), "{t}");
        }
        _ => {
            bg(c, &f("echo bg")).expect("bg");
        }
    }
}

#[test]
fn no_zombies_and_no_leaked_descriptors_after_200_mixed_calls() {
    let (srv, mut c) = shell_session(&[]);
    let server = srv.pid();
    for i in 0..12 {
        mixed_call(&srv, &mut c, i);
    }
    all_finished(&mut c);
    assert!(wait_until(WAIT, || zombie_children(server).is_empty()));
    let baseline = fd_count(server);
    assert!(baseline > 0);
    for i in 0..200 {
        mixed_call(&srv, &mut c, i);
    }
    all_finished(&mut c);
    let states: Vec<String> = list(&mut c, None)
        .iter()
        .map(|p| p["state"].as_str().unwrap_or("?").to_string())
        .collect();
    // Timed-out calls are not listed: a synchronous call's entry goes once its
    // result was read and its fid clunked (docs/containment.md).
    for s in ["exited", "cancelled"] {
        assert!(states.iter().any(|x| x == s), "no {s} among {states:?}");
    }
    let mut z = Vec::new();
    assert!(
        wait_until(WAIT, || {
            z = zombie_children(server);
            z.is_empty()
        }),
        "zombie children of the server: {z:?}"
    );
    let mut n = 0;
    assert!(
        wait_until(WAIT, || {
            n = fd_count(server);
            n <= baseline
        }),
        "descriptors: {n} now, {baseline} after the warm-up"
    );
}

#[test]
fn five_hundred_background_processes_at_once() {
    let (srv, mut c) = shell_session(&[]);
    patient(&mut c, Duration::from_secs(60));
    let gate = srv.cwd().join("gate");
    let st = std::process::Command::new("mkfifo")
        .arg(&gate)
        .status()
        .expect("mkfifo");
    assert!(st.success());
    let f = [
        ("tool", "shell"),
        ("agent", "a1"),
        ("command", "read x < gate"),
    ];
    let mut pids = Vec::new();
    for _ in 0..500 {
        pids.push(bg(&mut c, &f).expect("bg"));
    }
    let want: Vec<u64> = (1..=500).collect();
    assert_eq!(pids, want, "pids are 1, 2, 3, ... per server run");
    // Every one is blocked on the gate: the list answers with all 500 running.
    let l = list(&mut c, None);
    assert_eq!(l.len(), 500);
    assert!(
        l.iter().all(|p| p["state"] == "running"),
        "{:?}",
        l.iter().find(|p| p["state"] != "running")
    );
    // Open the gate: one line per reader.
    let mut w = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&gate)
        .expect("open gate");
    w.write_all(&[b'\n'; 500]).expect("write gate");
    let mut last: Vec<Value> = Vec::new();
    let done = wait_until(Duration::from_secs(120), || {
        last = list(&mut c, None);
        last.iter().all(|p| p["state"] != "running")
    });
    assert!(
        done,
        "still running: {}",
        last.iter().filter(|p| p["state"] == "running").count()
    );
    assert_eq!(last.len(), 500);
    for p in &last {
        assert_eq!(
            (&p["state"], &p["exit_code"]),
            (&Value::from("exited"), &Value::from(0)),
            "{p}"
        );
    }
    let server = srv.pid();
    let mut z = Vec::new();
    assert!(
        wait_until(WAIT, || {
            z = zombie_children(server);
            z.is_empty()
        }),
        "zombie children of the server: {} ({z:?})",
        z.len()
    );
    drop(w);
}

/// Wait (bounded) until `orphan` (the pid a confined tool knows it by) is
/// gone and `server` has no zombie children left. Where the server has a
/// tools PID namespace (docs/watch.md), the orphan was that namespace's
/// (reparented to its init, which the kernel reaps for): the namespace must
/// be empty but for its init, and the init have no zombie children.
fn assert_reaped(server: u32, orphan: i32) {
    let mut z = Vec::new();
    let tools_ns = toolsrv_testkit::pids::tools_namespace(server);
    assert!(
        wait_until(WAIT, || {
            z = zombie_children(server);
            let gone = match tools_ns {
                Some((_, init)) => {
                    z.extend(zombie_children(init as u32));
                    toolsrv_testkit::pids::in_tools_namespace(server).is_empty()
                }
                None => !Path::new(&format!("/proc/{orphan}")).exists(),
            };
            gone && z.is_empty()
        }),
        "orphan {orphan} not reaped; zombie children of the server or of the tools namespace's init: {z:?}"
    );
}

#[test]
fn an_orphan_a_tool_leaves_is_reaped_while_the_server_runs() {
    // What a tool leaves behind is re-parented to the server (a subreaper),
    // killed with the tool's group when the run ends, and reaped by the
    // orphan reaper, which looks after every run: no zombie stays.
    let (srv, mut c) = shell_session(&[]);
    let server = srv.pid();
    let r = call_shell(&mut c, "sleep 0.2 >/dev/null 2>&1 & echo $!");
    let orphan: i32 = ok_text(&r).trim().parse().expect("orphan pid");
    assert_reaped(server, orphan);
}

#[test]
fn an_escaped_orphan_dies_with_its_run_and_is_reaped() {
    // A descendant in a session of its own is killed with its run's kernel
    // group when the run ends (before containment it lived on), and the
    // reaper reaps it: no zombie stays.
    let (srv, mut c) = shell_session(&[]);
    let server = srv.pid();
    let r = call_shell(
        &mut c,
        "setsid sh -c 'echo $$ > esc.tmp && mv esc.tmp esc.pid; exec sleep 1' \
         >/dev/null 2>&1 & while [ ! -e esc.pid ]; do sleep 0.01; done",
    );
    assert_eq!(r["isError"], false, "{r}");
    let orphan: i32 = std::fs::read_to_string(srv.cwd().join("esc.pid"))
        .expect("esc.pid")
        .trim()
        .parse()
        .expect("orphan pid");
    assert_reaped(server, orphan);
}
