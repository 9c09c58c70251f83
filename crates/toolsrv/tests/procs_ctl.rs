//! docs/protocol.md, "Processes": `ctl` (signals, kill, dismiss), `proc/list`, ProcStat fields,
//! `--gc-age`, and timeouts (request, tool metadata, `--default-timeout`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolsrv_wire::{Body, OREAD};

use crate::procs_util::{
    bg, call_held, error_text, final_stat, is_millis_timestamp, list, ok_text, only_proc, payload,
    start_read, stat, subdir, tools_session, PROCSTAT_KEYS,
};
use crate::util::{wait_until, Raw, WAIT};

/// Prints `up`, then sleeps as the shell's own process.
const SLEEPER: &str = "description: Sleep\ncommand: \"echo up; exec sleep 30\"\n";
const QUICK: &str = "description: Quick\ncommand: \"echo hi\"\n";
const NAP: &str = "description: Nap\ncommand: \"sleep 0.3\"\n";
const GATE: &str =
    "description: Wait for ./go\ncommand: \"while [ ! -e go ]; do sleep 0.02; done; echo done\"\n";
const SLOW: &str = "description: Sleep 30\ncommand: \"sleep 30\"\n";
const SLOW_1S: &str = "description: Sleep 30, 1s timeout\ntimeout: 1s\ncommand: \"sleep 30\"\n";
const NAP_1S: &str = "description: Sleep 1.5, 1s timeout\ntimeout: 1s\ncommand: \"sleep 1.5\"\n";

/// Block until the process has printed something (so it has started).
fn wait_started(c: &mut Raw, pid: u64) {
    let fid = 400;
    c.walk(fid, &format!("proc/{pid}/out")).expect("walk out");
    c.ok(Body::Topen { fid, mode: OREAD });
    match c.ok(Body::Tread {
        fid,
        offset: 0,
        count: 100,
    }) {
        Body::Rread { data } => assert_eq!(data, b"up\n", "first output of {pid}"),
        b => panic!("{b:?}"),
    }
    c.ok(Body::Tclunk { fid });
}

fn ctl(c: &mut Raw, pid: u64, cmd: &str) -> Result<(), String> {
    c.write(&format!("proc/{pid}/ctl"), cmd)
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("object").keys().cloned().collect()
}

fn procstat_keys() -> BTreeSet<String> {
    PROCSTAT_KEYS.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ctl_signals_by_name_number_and_full_name_and_kill() {
    let (_srv, mut c) = tools_session(&[("sleeper.yaml", SLEEPER)], &[]);
    for (cmd, sig) in [
        ("signal TERM", 15),
        ("signal 15", 15),
        ("signal SIGTERM", 15),
        ("signal INT\n", 2),
        ("kill", 9),
    ] {
        let pid = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("bg");
        wait_started(&mut c, pid);
        ctl(&mut c, pid, cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        let code = 128 + sig;
        assert_eq!(
            c.read_file(&format!("proc/{pid}/wait")),
            format!("{code}\n").into_bytes(),
            "{cmd}"
        );
        let st = final_stat(&mut c, pid);
        assert_eq!(st["state"], "killed", "{cmd}");
        assert_eq!(st["exit_code"], code, "{cmd}");
    }
}

#[test]
fn ctl_errors_and_dismiss() {
    let (_srv, mut c) = tools_session(&[("sleeper.yaml", SLEEPER)], &[]);
    let pid = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("bg");
    wait_started(&mut c, pid);
    assert_eq!(
        ctl(&mut c, pid, "dismiss").unwrap_err(),
        format!("process {pid} is still running")
    );
    let e = ctl(&mut c, pid, "signal FOO").unwrap_err();
    assert!(e.contains("FOO") && e.contains("signal"), "{e}");
    let e = ctl(&mut c, pid, "signal 0").unwrap_err();
    assert!(e.contains('0'), "{e}");
    let e = ctl(&mut c, pid, "frobnicate").unwrap_err();
    assert!(e.contains("frobnicate"), "{e}");
    assert_eq!(stat(&mut c, pid)["state"], "running");
    ctl(&mut c, pid, "kill").expect("kill");
    final_stat(&mut c, pid);
    ctl(&mut c, pid, "dismiss").expect("dismiss");
    assert_eq!(
        c.walk(70, &format!("proc/{pid}")).unwrap_err(),
        "file not found"
    );
    assert_eq!(
        c.walk(70, &format!("proc/{pid}/stat")).unwrap_err(),
        "file not found"
    );
    assert!(list(&mut c, None).is_empty());
    // Never a pid that does not exist, nor a non-canonical name.
    assert_eq!(c.walk(70, "proc/999").unwrap_err(), "file not found");
}

#[test]
fn ctl_kill_right_after_bg_is_not_refused() {
    // docs/protocol.md, "Processes": the process is `running` as soon as new.bg answered, so
    // signalling it must work at once.
    let (_srv, mut c) = tools_session(&[("sleeper.yaml", SLEEPER)], &[]);
    for _ in 0..20 {
        let pid = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("bg");
        ctl(&mut c, pid, "kill").unwrap_or_else(|e| panic!("kill right after bg: {e}"));
        let st = final_stat(&mut c, pid);
        assert_eq!(st["state"], "killed", "{st}");
    }
}

#[test]
fn list_shows_all_or_one_agents_processes_including_running_sync_calls() {
    let (srv, mut c) = tools_session(&[("sleeper.yaml", SLEEPER), ("gate.yaml", GATE)], &[]);
    crate::procs_util::load(&mut c, "a2", "sleeper");
    crate::procs_util::load(&mut c, "a2", "gate");
    assert!(list(&mut c, None).is_empty());
    let p1 = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("bg");
    let p2 = bg(&mut c, &[("tool", "sleeper"), ("agent", "a2")]).expect("bg");
    // A synchronous call from another connection.
    let mut other = srv.attached();
    let tag = start_read(
        &mut other,
        10,
        "proc/new",
        &payload(&[("tool", "gate"), ("agent", "a2")]),
    );
    let mut all = Vec::new();
    assert!(wait_until(WAIT, || {
        all = list(&mut c, None);
        all.len() == 3
    }));
    for p in &all {
        assert_eq!(keys(p), procstat_keys(), "{p}");
        assert_eq!(p["state"], "running", "{p}");
    }
    let pids: Vec<u64> = all
        .iter()
        .map(|p| p["pid"].as_u64().expect("pid"))
        .collect();
    assert_eq!(pids[..2], [p1, p2], "sorted by pid");
    let sync = &all[2];
    assert_eq!(sync["background"], false);
    assert_eq!(sync["agent"], "a2");
    assert_eq!(sync["tool"], "gate");
    let a2: Vec<u64> = list(&mut c, Some("a2\n"))
        .iter()
        .map(|p| p["pid"].as_u64().expect("pid"))
        .collect();
    assert_eq!(a2, [p2, pids[2]]);
    let a1 = list(&mut c, Some("a1"));
    assert_eq!(a1.len(), 1);
    assert_eq!(a1[0]["pid"], p1);
    assert!(list(&mut c, Some("nobody")).is_empty());
    assert_eq!(
        c.ask("proc/list", "bad agent").unwrap_err(),
        format!("invalid agent ID: {}", toolsrv_protocol::AGENT_ID_RULE)
    );
    // Release the sync call: its result arrives and the list shows it ended.
    std::fs::write(srv.cwd().join("go"), "").expect("go");
    let f = other.recv();
    assert_eq!(f.tag, tag);
    match f.body {
        Body::Rread { data } => {
            let r: Value = serde_json::from_slice(&data).expect("json");
            assert_eq!(ok_text(&r), "done\n");
        }
        b => panic!("{b:?}"),
    }
    let st = stat(&mut c, pids[2]);
    assert_eq!(st["state"], "exited");
    for p in [p1, p2] {
        ctl(&mut c, p, "kill").expect("kill");
    }
}

#[test]
fn procstat_fields() {
    let (srv, mut c) = tools_session(
        &[
            ("quick.yaml", QUICK),
            ("nap.yaml", NAP),
            ("sleeper.yaml", SLEEPER),
        ],
        &[],
    );
    let sub = subdir(&srv, "sub");
    let t0 = Instant::now();
    let pid = bg(
        &mut c,
        &[
            ("tool", "nap"),
            ("agent", "a1"),
            ("session", "s1"),
            ("cwd", "sub"),
        ],
    )
    .expect("bg");
    let running = stat(&mut c, pid);
    assert_eq!(keys(&running), procstat_keys());
    assert_eq!(running["state"], "running");
    assert_eq!(running["exit_code"], Value::Null);
    assert_eq!(running["ended"], Value::Null);
    assert_eq!(c.read_file(&format!("proc/{pid}/wait")), b"0\n");
    let elapsed = t0.elapsed();
    let st = final_stat(&mut c, pid);
    assert_eq!(keys(&st), procstat_keys());
    assert_eq!(st["pid"], pid);
    assert_eq!(st["tool"], "nap");
    assert_eq!(st["agent"], "a1");
    assert_eq!(st["session"], "s1");
    assert_eq!(st["background"], true);
    assert_eq!(st["state"], "exited");
    assert_eq!(st["exit_code"], 0);
    let started = st["started"].as_str().expect("started");
    let ended = st["ended"].as_str().expect("ended");
    assert!(is_millis_timestamp(started), "{started}");
    assert!(is_millis_timestamp(ended), "{ended}");
    assert!(started <= ended, "{started} > {ended}");
    let ms = st["runtime_ms"].as_u64().expect("runtime_ms");
    assert!(
        (300..=elapsed.as_millis() as u64 + 50).contains(&ms),
        "runtime_ms {ms}, wall {elapsed:?}"
    );
    let cmd = st["command"].as_str().expect("command");
    assert!(cmd.contains("sleep 0.3"), "{cmd}");
    let cwd = std::fs::canonicalize(&sub).expect("canonical");
    assert_eq!(st["cwd"], cwd.to_str().expect("utf8"));
    assert_eq!(st["sandboxed"], true);
    // A stat of a finished process does not change.
    assert_eq!(stat(&mut c, pid), st);

    // A synchronous call without a session, in the default cwd.
    crate::procs_util::load(&mut c, "a2", "quick");
    ok_text(&call_held(
        &mut c,
        91,
        &[("tool", "quick"), ("agent", "a2")],
    ));
    check_sync_stat(&mut c, &srv);
    c.ok(Body::Tclunk { fid: 91 });
    // runtime_ms grows while a process runs.
    let pid = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("bg");
    let r0 = stat(&mut c, pid)["runtime_ms"].as_u64().expect("ms");
    assert!(wait_until(WAIT, || stat(&mut c, pid)["runtime_ms"]
        .as_u64()
        .is_some_and(|r| r >= r0 + 20)));
    ctl(&mut c, pid, "kill").expect("kill");
}

fn check_sync_stat(c: &mut Raw, srv: &crate::util::Server) {
    let st = only_proc(c, "a2");
    assert_eq!(st["session"], Value::Null);
    assert_eq!(st["background"], false);
    assert_eq!(st["state"], "exited");
    assert_eq!(st["exit_code"], 0);
    assert_eq!(st["tool"], "quick");
    let cwd = std::fs::canonicalize(srv.cwd()).expect("canonical");
    assert_eq!(st["cwd"], cwd.to_str().expect("utf8"));
    assert_eq!(st["sandboxed"], true);
}

#[test]
fn yolo_processes_are_not_sandboxed() {
    let (_srv, mut c) = tools_session(&[("quick.yaml", QUICK)], &["--yolo"]);
    ok_text(&call_held(
        &mut c,
        91,
        &[("tool", "quick"), ("agent", "a1")],
    ));
    assert_eq!(only_proc(&mut c, "a1")["sandboxed"], false);
}

#[test]
fn gc_age_dismisses_finished_processes_by_itself() {
    let (_srv, mut c) = tools_session(
        &[("quick.yaml", QUICK), ("sleeper.yaml", SLEEPER)],
        &["--gc-age", "1s"],
    );
    let running = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("bg");
    // Its fid stays open: the entry goes by age, not by read and clunk.
    ok_text(&call_held(
        &mut c,
        91,
        &[("tool", "quick"), ("agent", "a1")],
    ));
    let done = list(&mut c, None)
        .iter()
        .find(|p| p["tool"] == "quick")
        .and_then(|p| p["pid"].as_u64())
        .expect("quick is listed");
    c.walk(70, &format!("proc/{done}"))
        .expect("walks while fresh");
    c.ok(Body::Tclunk { fid: 70 });
    assert!(
        wait_until(WAIT, || list(&mut c, None).len() == 1),
        "the finished process was not dismissed"
    );
    assert_eq!(
        c.walk(70, &format!("proc/{done}")).unwrap_err(),
        "file not found"
    );
    // The running one stays.
    assert_eq!(list(&mut c, None)[0]["pid"], running);
    ctl(&mut c, running, "kill").expect("kill");
}

/// Assert a timed-out synchronous call and its stat.
fn assert_timed_out(c: &mut Raw, agent: &str, fields: &[(&str, &str)]) {
    let t0 = Instant::now();
    let r = call_held(c, 91, fields);
    let took = t0.elapsed();
    let t = error_text(&r);
    assert!(t.contains("timed out") || t.contains("timeout"), "{t}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(8),
        "took {took:?}"
    );
    let st = only_proc(c, agent);
    assert_eq!(st["state"], "timeout", "{st}");
    assert_eq!(st["exit_code"], 128 + 15, "{st}");
    c.ok(Body::Tclunk { fid: 91 });
}

#[test]
fn timeouts_from_the_request_the_tool_and_the_server_default() {
    let (_srv, mut c) = tools_session(
        &[
            ("slow.yaml", SLOW),
            ("slow_1s.yaml", SLOW_1S),
            ("nap_1s.yaml", NAP_1S),
        ],
        &[],
    );
    for a in ["r", "t", "o"] {
        for t in ["slow", "slow_1s", "nap_1s"] {
            crate::procs_util::load(&mut c, a, t);
        }
    }
    assert_timed_out(
        &mut c,
        "r",
        &[("tool", "slow"), ("agent", "r"), ("timeout", "1s")],
    );
    assert_timed_out(&mut c, "t", &[("tool", "slow_1s"), ("agent", "t")]);
    // The request's timeout overrides the tool's.
    let r = call_held(
        &mut c,
        91,
        &[("tool", "nap_1s"), ("agent", "o"), ("timeout", "20s")],
    );
    ok_text(&r);
    assert_eq!(only_proc(&mut c, "o")["state"], "exited");
    c.ok(Body::Tclunk { fid: 91 });
    // Background runs time out too.
    let pid = bg(
        &mut c,
        &[("tool", "slow"), ("agent", "a1"), ("timeout", "500ms")],
    )
    .expect("bg");
    let st = final_stat(&mut c, pid);
    assert_eq!(st["state"], "timeout");
}

#[test]
fn the_default_timeout_flag_is_honoured() {
    let (_srv, mut c) = tools_session(&[("slow.yaml", SLOW)], &["--default-timeout", "1s"]);
    assert_timed_out(&mut c, "a1", &[("tool", "slow"), ("agent", "a1")]);
}
