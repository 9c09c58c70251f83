//! `serve --audit <file>` over the socket (docs/audit.md): runs, bypass
//! approvals and rejections (with the approver's uid and pid) and denials
//! are appended as hash-chained JSON lines, across restarts; the file is
//! private and hidden from tools, holds no secret or token, and `toolsrv
//! audit verify` finds an edited or a removed record.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;
use toolsrv_wire::{Body, OREAD};

use crate::util::{toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// The shared secret of the servers here.
const SECRET: &str = "audit-suite-secret-5f1c0e";

fn start(audit: &Path, cwd: &Path) -> Server {
    Launch::new()
        .cwd(cwd)
        .args(["--audit".as_ref(), audit.as_os_str()])
        .start()
}

fn payload(token: &str, command: &str, bypass: bool) -> String {
    let mut f = vec![
        ("tool", "shell"),
        ("agent", "a1"),
        ("token", token),
        ("command", command),
    ];
    if bypass {
        f.push(("bypass", "true"));
    }
    toolsrv_protocol::encode_payload(&f)
}

/// The next pending bypass request's id, read on a fresh fid of `c`.
fn next_pending(c: &mut Raw) -> String {
    let fid = c.fid();
    c.walk(fid, "bypass/pending").expect("walk bypass/pending");
    c.ok(Body::Topen { fid, mode: OREAD });
    let data = match c.rpc(Body::Tread {
        fid,
        offset: 0,
        count: 65536,
    }) {
        Body::Rread { data } => data,
        b => panic!("no pending request: {b:?}"),
    };
    c.ok(Body::Tclunk { fid });
    let v: Value = serde_json::from_slice(&data).expect("pending JSON");
    v["id"].as_str().expect("an id").to_string()
}

/// Starts a background bypass run of `command`; waits until it is pending.
fn bypass_bg(c: &mut Raw, token: &str, command: &str) -> u64 {
    let pid = c
        .ask("proc/new.bg", &payload(token, command, true))
        .expect("started");
    pid.trim().parse().expect("a pid")
}

fn wait_ended(c: &mut Raw, pid: u64) {
    let ok = wait_until(WAIT, || {
        let s = c.json(&format!("proc/{pid}/stat"));
        s["ended"].is_string()
    });
    assert!(ok, "run {pid} did not end");
}

fn records(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .expect("the audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

fn verify(file: &Path) -> (bool, String) {
    let out = std::process::Command::new(toolsrv_bin())
        .args(["audit", "verify"])
        .arg(file)
        .output()
        .expect("toolsrv audit verify");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn runs_and_decisions_are_chained_across_restarts_and_tampering_is_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().join("work");
    std::fs::create_dir(&cwd).expect("mkdir");
    let log = dir.path().join("audit.log");
    let mut srv = start(&log, &cwd);
    let (mut c, token) = srv.authed(SECRET);
    c.write("ctl", "load a1 shell").expect("load");
    let r = c
        .ask("proc/new", &payload(&token, "echo hello", false))
        .expect("a result");
    assert!(r.contains("hello"), "{r}");
    // The log is hidden from tools.
    let peek = c
        .ask(
            "proc/new",
            &payload(
                &token,
                &format!("cat {} || echo refused", log.display()),
                false,
            ),
        )
        .expect("a result");
    assert!(
        !peek.contains("run_start"),
        "a tool read the audit log: {peek}"
    );
    // A bypass approved and one rejected, by this process (an observer).
    let approved = bypass_bg(&mut c, &token, "echo approved");
    let id = next_pending(&mut c);
    c.write(
        "bypass/resolve",
        &format!(r#"{{"id": "{id}", "approve": true}}"#),
    )
    .expect("approve");
    wait_ended(&mut c, approved);
    let rejected = bypass_bg(&mut c, &token, "echo never");
    let id2 = next_pending(&mut c);
    c.write(
        "bypass/resolve",
        &format!(r#"{{"id": "{id2}", "approve": false, "reason": "not now"}}"#),
    )
    .expect("reject");
    wait_ended(&mut c, rejected);
    drop(c);
    srv.stop(libc::SIGTERM);
    // Appended, not truncated, by the next server on the same file.
    let srv2 = start(&log, &cwd);
    let (mut c2, token2) = srv2.authed(SECRET);
    c2.write("ctl", "load a1 shell").expect("load");
    c2.ask("proc/new", &payload(&token2, "true", false))
        .expect("a result");
    drop(c2);
    let recs = records(&log);
    let events: Vec<&str> = recs.iter().filter_map(|r| r["event"].as_str()).collect();
    assert_eq!(
        events,
        [
            "run_start",
            "run_end",
            "run_start",
            "run_end",
            "approval",
            "run_start",
            "run_end",
            "rejection",
            "run_start",
            "run_end"
        ],
        "{recs:#?}"
    );
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1, "{r}");
    }
    let start0 = &recs[0];
    assert_eq!(
        start0["command"].as_str().map(|c| c.contains("echo hello")),
        Some(true),
        "{start0}"
    );
    assert_eq!(start0["sandboxed"], true);
    assert_eq!(start0["class_uid"], 1007);
    assert_eq!(recs[1]["state"], "exited");
    assert_eq!(recs[1]["exit_code"], 0);
    let approval = &recs[4];
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    assert_eq!(approval["approver_uid"], uid, "{approval}");
    assert_eq!(approval["approver_pid"], std::process::id(), "{approval}");
    assert_eq!(approval["kind"], "bypass");
    assert_eq!(
        recs[5]["sandboxed"], false,
        "the approved run ran unsandboxed"
    );
    assert_eq!(recs[7]["reason"], "not now");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!text.contains(SECRET) && !text.contains(&token) && !text.contains(&token2));
    let mode = std::fs::metadata(&log).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (ok, out) = verify(&log);
    assert!(ok && out.contains("10 records, the chain holds"), "{out}");
    // `toolsrv audit FILE` reads it for a person.
    let shown = std::process::Command::new(toolsrv_bin())
        .arg("audit")
        .arg(&log)
        .output()
        .expect("toolsrv audit");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.lines().count() == 10 && shown.contains("approval"),
        "{shown}"
    );
    // An edited record, then a removed one.
    let lines: Vec<&str> = text.lines().collect();
    let edited = text.replacen("echo approved", "echo innocent", 1);
    let copy = dir.path().join("edited.log");
    std::fs::write(&copy, &edited).expect("write");
    let (ok, out) = verify(&copy);
    assert!(!ok && out.contains("breaks at seq 6"), "{out}");
    let mut removed: Vec<&str> = lines.clone();
    removed.remove(4);
    std::fs::write(&copy, removed.join("\n") + "\n").expect("write");
    let (ok, out) = verify(&copy);
    assert!(!ok && out.contains("breaks at seq 5"), "{out}");
}
