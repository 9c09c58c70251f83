//! The tools PID namespace over the socket (docs/watch.md): confined runs
//! are born in it and unconfined ones are not, it holds every process of
//! the runs (a killed server takes them all within 3 s, whatever
//! containment is in use), the death of its init is noticed and survived,
//! and the startup log and the `doctor` file say how creations are
//! attributed.

use std::time::Duration;

use toolsrv_testkit::pids::{in_tools_namespace, tools_namespace};

use crate::procs_util::{bg, call_shell, load, ok_text, os_dead};
use crate::util::{wait_until, Launch, Raw, Server, WAIT};

fn started(env: &[(&str, &str)], extra: &[&str]) -> (Server, Raw) {
    let mut l = Launch::new().args(["--no-auth"]).args(extra);
    for (k, v) in env {
        l = l.env(k, v);
    }
    let srv = l.start();
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    (srv, c)
}

/// A background run that leaves detached processes behind: three in
/// sessions of their own, one double-forked; it sleeps on.
const LEAVES: &str = "for i in 1 2 3; do setsid sleep 300 </dev/null >/dev/null 2>&1 & done; \
                      ( sh -c 'sleep 300 </dev/null >/dev/null 2>&1 &' & ); exec sleep 300";

#[test]
fn killing_the_server_kills_every_process_of_its_tools_namespace_within_3s() {
    // Without containment only the namespace holds the detached ones (the
    // watchdog kills process groups, which they left); with it, both do.
    for containment in ["none", "cgroup"] {
        let (mut srv, mut c) = started(&[("TOOLSRV_CONTAINMENT", containment)], &[]);
        let server = srv.pid();
        let (_, init) = tools_namespace(server).expect("a tools PID namespace");
        bg(
            &mut c,
            &[("tool", "shell"), ("agent", "a1"), ("command", LEAVES)],
        )
        .expect("bg");
        let mut pids = Vec::new();
        assert!(
            wait_until(WAIT, || {
                pids = in_tools_namespace(server);
                pids.len() >= 5
            }),
            "{containment}: the run's processes are not in the tools namespace: {pids:?}"
        );
        srv.signal(libc::SIGKILL);
        srv.wait_exit(WAIT).expect("the server dies");
        let mut alive = Vec::new();
        let dead = wait_until(Duration::from_secs(3), || {
            alive = pids
                .iter()
                .copied()
                .chain([init])
                .filter(|&p| !os_dead(p))
                .collect();
            alive.is_empty()
        });
        for &p in &alive {
            // Safety: kill(2) of what this test's server started.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        assert!(
            dead,
            "{containment}: alive 3 s after SIGKILL of the server: {alive:?}"
        );
    }
}

#[test]
fn a_confined_run_is_born_in_the_tools_namespace_an_unconfined_one_is_not() {
    for yolo in [false, true] {
        let extra: &[&str] = if yolo { &["--yolo"] } else { &[] };
        let (srv, mut c) = started(&[], extra);
        let (ns, _) = tools_namespace(srv.pid()).expect("a tools PID namespace");
        bg(
            &mut c,
            &[
                ("tool", "shell"),
                ("agent", "a1"),
                (
                    "command",
                    "echo $$ > me.tmp && mv me.tmp me && exec sleep 300",
                ),
            ],
        )
        .expect("bg");
        let pid = crate::lifecycle_util::read_pid_file(&srv.cwd().join("me"));
        let host = srv.host_pid(pid);
        assert!(host > 0, "yolo {yolo}: {pid} names no process of the run");
        let ino = std::fs::metadata(format!("/proc/{host}/ns/pid"))
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .expect("its namespace");
        if yolo {
            // No confinement, so no tools namespace for the run either: it
            // knows itself by the pid the server knows it by.
            assert_eq!(host, pid);
            assert_ne!(ino, ns);
        } else {
            assert_ne!(host, pid);
            assert_eq!(ino, ns);
        }
    }
}

#[test]
fn the_death_of_the_tools_namespaces_init_is_logged_and_the_next_run_gets_a_new_one() {
    let (srv, mut c) = started(&[], &[]);
    let server = srv.pid();
    let (ns, init) = tools_namespace(server).expect("a tools PID namespace");
    let pid = bg(
        &mut c,
        &[("tool", "shell"), ("agent", "a1"), ("command", "sleep 300")],
    )
    .expect("bg");
    assert!(wait_until(WAIT, || !in_tools_namespace(server).is_empty()));
    let inside = in_tools_namespace(server);
    // Safety: kill(2) of the init of this test's server's namespace.
    unsafe { libc::kill(init, libc::SIGKILL) };
    srv.wait_log("the tools PID namespace's init died");
    assert!(
        wait_until(WAIT, || inside.iter().all(|&p| os_dead(p))),
        "the run's processes outlived the namespace's init"
    );
    let st = crate::procs_util::final_stat(&mut c, pid);
    assert_eq!(st["state"], "killed", "{st}");
    // A new namespace, and the next confined run is born in it.
    assert!(wait_until(WAIT, || tools_namespace(server)
        .is_some_and(|(n, i)| n != ns && i != init)));
    let r = call_shell(&mut c, "echo $$");
    assert_eq!(ok_text(&r).trim(), "2", "{r}");
    assert!(srv
        .log_text()
        .contains("a new tools PID namespace replaces the dead one"));
}

#[test]
fn the_startup_log_and_the_doctor_file_say_how_creations_are_attributed() {
    let (srv, mut c) = started(&[], &[]);
    assert!(
        srv.log_text()
            .contains("creation attribution mechanism=\"tools-pid-namespace\""),
        "{}",
        srv.log_text()
    );
    let doctor: serde_json::Value =
        serde_json::from_slice(&c.read_file("doctor")).expect("doctor JSON");
    assert_eq!(
        doctor["attribution"]["mechanism"], "tools-pid-namespace",
        "{doctor}"
    );
    // Off, and with a PID namespace per run: runs stay out of it, and the
    // attribution is unknown.
    for env in [
        ("TOOLSRV_TOOLS_PIDNS", "off"),
        ("TOOLSRV_CONTAINMENT", "pidns"),
    ] {
        let (srv, mut c) = started(&[env], &[]);
        assert!(tools_namespace(srv.pid()).is_none(), "{env:?}");
        assert!(
            srv.log_text()
                .contains("creation attribution mechanism=\"unknown\""),
            "{env:?}: {}",
            srv.log_text()
        );
        let r = call_shell(&mut c, "echo ran");
        assert_eq!(ok_text(&r), "ran\n", "{env:?}");
        let doctor: serde_json::Value =
            serde_json::from_slice(&c.read_file("doctor")).expect("doctor JSON");
        assert_eq!(doctor["attribution"]["mechanism"], "unknown", "{env:?}");
    }
}
