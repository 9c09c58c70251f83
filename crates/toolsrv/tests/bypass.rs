//! docs/protocol.md, "Bypass requests", the bypass broker (issue 6), over the socket: pending requests,
//! resolution, expiry, withdrawal, background bypass, and the protections that
//! keep a tool from approving its own request.
//!
//! Every test drives a real `toolsrv serve` (the built-in `shell` tool, loaded
//! for agent `a1`). Requesters and observers use separate connections so that a
//! blocked read never hides another reply.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolsrv_wire::{Body, ORDWR, OREAD};

use crate::util::{cli, toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// The exact key set of a pending request (docs/protocol.md, "Bypass requests").
const PENDING_KEYS: [&str; 10] = [
    "agent",
    "command",
    "created",
    "cwd",
    "env",
    "id",
    "pid",
    "request_env",
    "session",
    "tool",
];

/// How long a read must stay unanswered to count as blocked.
const QUIET: Duration = Duration::from_millis(400);

/// A `--no-auth` server with the built-in tools and `shell` loaded for `a1`.
fn session(extra: &[&str]) -> (Server, Raw) {
    let mut args = vec!["--no-auth"];
    args.extend_from_slice(extra);
    let srv = Server::start(&args);
    let mut c = srv.attached();
    c.write("ctl", "load a1 shell").expect("load shell");
    (srv, c)
}

/// A `shell` payload for agent `a1` running `command`, plus `extra` fields.
fn shell(command: &str, extra: &[(&str, &str)]) -> String {
    let mut f = vec![("tool", "shell"), ("agent", "a1"), ("command", command)];
    f.extend_from_slice(extra);
    toolsrv_protocol::encode_payload(&f)
}

/// The same with `bypass=true`.
fn bypass(command: &str, extra: &[(&str, &str)]) -> String {
    let mut f = vec![("bypass", "true")];
    f.extend_from_slice(extra);
    shell(command, &f)
}

/// A synchronous call that must not fail with an Rerror; the ToolResult JSON.
fn call(c: &mut Raw, payload: &str) -> Value {
    let out = c
        .ask("proc/new", payload)
        .unwrap_or_else(|e| panic!("proc/new failed with Rerror {e:?}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("result is not JSON ({e}): {out}"))
}

/// A background call: the pid, or the Rerror text.
fn bg(c: &mut Raw, payload: &str) -> Result<u64, String> {
    let out = c.ask("proc/new.bg", payload)?;
    Ok(out
        .parse()
        .unwrap_or_else(|_| panic!("proc/new.bg returned {out:?}, not a pid")))
}

/// The single text item of a result and its `isError`.
fn result_text(r: &Value) -> (bool, String) {
    let content = r["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "one content item: {r}");
    let text = content[0]["text"].as_str().expect("text").to_string();
    (r["isError"] == true, text)
}

/// Open `proc/new` on `fid`, write `payload` and send the read without waiting
/// for its reply; returns the read's tag.
fn start_call(c: &mut Raw, fid: u32, payload: &str) -> u16 {
    c.walk(fid, "proc/new").expect("walk proc/new");
    c.ok(Body::Topen { fid, mode: ORDWR });
    c.ok(Body::Twrite {
        fid,
        offset: 0,
        data: payload.as_bytes().to_vec(),
    });
    c.send_read(fid, 65536)
}

/// Receive frames until the one tagged `tag`; returns its body.
fn reply_to(c: &mut Raw, tag: u16) -> Body {
    loop {
        let f = c.recv();
        if f.tag == tag {
            return f.body;
        }
    }
}

/// The ToolResult of a call started with [`start_call`].
fn finish_call(c: &mut Raw, tag: u16) -> Value {
    match reply_to(c, tag) {
        Body::Rread { data } => serde_json::from_slice(&data)
            .unwrap_or_else(|e| panic!("result is not JSON ({e}): {data:?}")),
        b => panic!("expected the result, got {b:?}"),
    }
}

/// Open `bypass/pending` on `fid` (an observer).
fn open_pending(c: &mut Raw, fid: u32) {
    c.walk(fid, "bypass/pending").expect("walk bypass/pending");
    c.ok(Body::Topen { fid, mode: OREAD });
}

/// One read of an open `bypass/pending` fid, as the raw line.
fn pending_line(c: &mut Raw, fid: u32) -> String {
    let tag = c.send_read(fid, 65536);
    match reply_to(c, tag) {
        Body::Rread { data } => String::from_utf8(data).expect("utf8 pending line"),
        b => panic!("expected a pending request, got {b:?}"),
    }
}

/// One pending request read from `fid`, parsed.
fn next_request(c: &mut Raw, fid: u32) -> Value {
    let line = pending_line(c, fid);
    serde_json::from_str(line.trim_end_matches('\n'))
        .unwrap_or_else(|e| panic!("pending line is not JSON ({e}): {line:?}"))
}

/// Whether no frame arrives on `c` for [`QUIET`].
fn quiet(c: &mut Raw) -> Option<toolsrv_wire::Frame> {
    c.s.set_read_timeout(Some(QUIET)).expect("set timeout");
    let f = c.try_recv();
    c.s.set_read_timeout(Some(WAIT)).expect("set timeout");
    f
}

/// Flush the outstanding request `oldtag`; asserts that it did not return data
/// meanwhile.
fn flush(c: &mut Raw, oldtag: u16) {
    let tag = c.tag();
    c.send(tag, Body::Tflush { oldtag });
    loop {
        let f = c.recv();
        if f.tag == tag {
            assert_eq!(f.body, Body::Rflush, "flush reply");
            return;
        }
        if f.tag == oldtag {
            if let Body::Rread { data } = &f.body {
                assert!(
                    data.is_empty(),
                    "the flushed read returned a request: {}",
                    String::from_utf8_lossy(data)
                );
            }
        }
    }
}

/// Open a fresh observer fid on `c` and assert that nothing is pending for it.
fn assert_nothing_pending(c: &mut Raw, fid: u32) {
    open_pending(c, fid);
    let tag = c.send_read(fid, 65536);
    if let Some(f) = quiet(c) {
        panic!("expected nothing pending, got {f:?}");
    }
    flush(c, tag);
    c.ok(Body::Tclunk { fid });
}

/// Write a resolution to `bypass/resolve`.
fn resolve(c: &mut Raw, json: &str) -> Result<(), String> {
    c.write("bypass/resolve", json)
}

/// Approve `id`, which must succeed.
fn approve(c: &mut Raw, id: &str) {
    resolve(c, &format!(r#"{{"id": "{id}", "approve": true}}"#))
        .unwrap_or_else(|e| panic!("approve {id}: {e}"));
}

/// Reject `id` with `reason`, which must succeed.
fn reject(c: &mut Raw, id: &str, reason: &str) {
    let r = serde_json::json!({"id": id, "approve": false, "reason": reason});
    resolve(c, &r.to_string()).unwrap_or_else(|e| panic!("reject {id}: {e}"));
}

/// `proc/{pid}/stat` as JSON.
fn stat(c: &mut Raw, pid: u64) -> Value {
    c.json(&format!("proc/{pid}/stat"))
}

/// Poll `proc/{pid}/stat` until its state is `state`; returns the stat.
fn wait_state(c: &mut Raw, pid: u64, state: &str) -> Value {
    let mut last = Value::Null;
    let ok = wait_until(WAIT, || {
        last = stat(c, pid);
        last["state"] == state
    });
    assert!(ok, "process {pid} never reached {state:?}: {last}");
    last
}

/// The pid of a pending request.
fn pid_of(req: &Value) -> u64 {
    req["pid"].as_u64().expect("numeric pid")
}

/// The id of a pending request.
fn id_of(req: &Value) -> String {
    req["id"].as_str().expect("string id").to_string()
}

/// Whether `s` is an RFC 3339 UTC or offset timestamp
/// (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`).
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let head = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && (b[10] == b'T' || b[10] == b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !head {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z'] | [b'z'] => true,
        [sign, h1, h2, b':', m1, m2] => {
            (*sign == b'+' || *sign == b'-') && [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit())
        }
        _ => false,
    }
}

/// Copy the `toolsrv` binary into `dir` (rwx for tools under the default
/// policy) so that a tool can run it as a 9P client; returns its path.
fn install_client(dir: &Path) -> PathBuf {
    let dst = dir.join("toolsrv-client");
    std::fs::copy(toolsrv_bin(), &dst).expect("copy toolsrv");
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dst
}

/// Single-quote `s` for sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn pending_request_has_exactly_the_contract_fields_and_the_complete_env() {
    let (srv, mut a) = session(&[]);
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    // The tool prints its own initial environment (sh's /proc/$$/environ).
    let payload = bypass(
        r"tr '\0' '\n' < /proc/$$/environ",
        &[
            ("session", "s1"),
            ("env.FOO", "bar baz"),
            ("env.OLLIE_EXTRA", "x=y"),
        ],
    );
    let tag = start_call(&mut a, 70, &payload);
    let line = pending_line(&mut o, 1);
    assert!(line.ends_with('\n'), "no trailing newline: {line:?}");
    assert_eq!(
        line.matches('\n').count(),
        1,
        "one line per request: {line:?}"
    );
    let req: Value = serde_json::from_str(line.trim_end()).expect("pending JSON");
    let mut keys: Vec<&str> = req
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, PENDING_KEYS, "{req}");
    let id = id_of(&req);
    assert!(
        id.starts_with('b') && id[1..].parse::<u64>().is_ok(),
        "id {id:?}"
    );
    assert_eq!(req["agent"], "a1");
    assert_eq!(req["session"], "s1");
    assert_eq!(req["tool"], "shell");
    let command = req["command"].as_str().expect("command");
    assert!(command.contains("/proc/$$/environ"), "command {command:?}");
    let cwd = PathBuf::from(req["cwd"].as_str().expect("cwd"));
    assert_eq!(
        cwd.canonicalize().expect("cwd exists"),
        srv.cwd().canonicalize().expect("dir")
    );
    let created = req["created"].as_str().expect("created");
    assert!(is_rfc3339(created), "created {created:?}");
    let env: BTreeMap<String, String> =
        serde_json::from_value(req["env"].clone()).expect("env is a string map");
    assert_eq!(env.get("FOO").map(String::as_str), Some("bar baz"));
    assert_eq!(env.get("OLLIE_EXTRA").map(String::as_str), Some("x=y"));
    assert_eq!(env.get("OLLIE_AGENT_ID").map(String::as_str), Some("a1"));
    assert!(env.contains_key("PATH"), "{env:?}");
    // `request_env`: the request's own fields and nothing else.
    let request_env: BTreeMap<String, String> =
        serde_json::from_value(req["request_env"].clone()).expect("request_env is a string map");
    assert_eq!(
        request_env,
        BTreeMap::from([
            ("FOO".to_string(), "bar baz".to_string()),
            ("OLLIE_EXTRA".to_string(), "x=y".to_string()),
        ])
    );

    // The process exists already and waits.
    let st = stat(&mut a, pid_of(&req));
    assert_eq!(st["state"], "awaiting_approval", "{st}");
    assert_eq!(st["tool"], "shell");
    assert_eq!(st["agent"], "a1");
    assert!(st["exit_code"].is_null(), "{st}");

    // Approved: the environment the tool got is exactly the one shown.
    approve(&mut o, &id);
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(!is_error, "{text}");
    let got: BTreeMap<String, String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or((l, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    assert_eq!(
        got, env,
        "the tool's environment differs from the one shown"
    );
}

#[test]
fn approved_bypass_writes_where_the_policy_forbids_and_is_unsandboxed() {
    let (srv, mut a) = session(&[]);
    let outside = tempfile::tempdir().expect("outside dir");
    let target = outside.path().join("escaped");
    let cmd = format!("echo escaped > {}", sh_quote(&target.display().to_string()));

    // Without bypass, Landlock refuses the write.
    let (is_error, text) = result_text(&call(&mut a, &shell(&cmd, &[])));
    assert!(is_error && crate::sandbox::refused(&text), "{text}");
    assert!(
        !target.exists(),
        "the sandboxed tool wrote outside its rules"
    );

    // With bypass, approved, it runs without Landlock.
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let tag = start_call(&mut a, 70, &bypass(&cmd, &[]));
    let req = next_request(&mut o, 1);
    approve(&mut o, &id_of(&req));
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(!is_error, "{text}");
    assert_eq!(
        std::fs::read_to_string(&target).expect("written"),
        "escaped\n"
    );
    let st = stat(&mut a, pid_of(&req));
    assert_eq!(st["sandboxed"], false, "{st}");
    assert_eq!(st["state"], "exited", "{st}");
    assert_eq!(st["exit_code"], 0, "{st}");
}

/// Control (issue 33 item 5): a root server's confined tools run as uid 0
/// of their own user namespace (unprivileged host ids), but an approved
/// bypass run is unconfined: real root, in the host's user namespace (its
/// `uid_map` is the initial one) with the capabilities of the server.
#[test]
fn an_approved_bypass_run_of_a_root_server_is_real_root() {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let (srv, mut a) = session(&[]);
    let cmd = "id -u; tr -s ' ' < /proc/self/uid_map; grep ^CapEff /proc/self/status";
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let tag = start_call(&mut a, 70, &bypass(cmd, &[]));
    let req = next_request(&mut o, 1);
    approve(&mut o, &id_of(&req));
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(!is_error, "{text}");
    // Every capability the test (root) holds.
    let caps = std::fs::read_to_string("/proc/self/status")
        .expect("status")
        .lines()
        .find(|l| l.starts_with("CapEff:"))
        .map(str::to_string)
        .expect("CapEff");
    assert_eq!(
        text,
        format!("0\n 0 0 4294967295\n{caps}\n"),
        "an approved bypass run is not real root"
    );
}

/// An approved bypass run is not under the seccomp filter of confined runs,
/// even after a confined run made the server's worker thread carry it (the
/// filter is inherited from the spawning thread): System V IPC, refused in a
/// sandboxed call, works in the approved run.
#[test]
fn an_approved_bypass_run_is_not_under_the_confined_runs_seccomp_filter() {
    let (_srv, mut a) = session(&[]);
    let key = "0x7a11d0c5";
    let cmd = format!(
        "perl -e 'use IPC::SysV qw(IPC_CREAT IPC_PRIVATE); my $id = shmget({key}, 4096, IPC_CREAT | 0600); if (defined $id) {{ shmctl($id, 0, 0); print \"made\\n\" }} else {{ print \"refused: $!\\n\" }}'"
    );
    let (_, text) = result_text(&call(&mut a, &shell(&cmd, &[])));
    assert!(
        text.contains("refused"),
        "a sandboxed run made a segment: {text}"
    );
    let mut o = _srv.attached();
    open_pending(&mut o, 1);
    let tag = start_call(&mut a, 70, &bypass(&cmd, &[]));
    let req = next_request(&mut o, 1);
    approve(&mut o, &id_of(&req));
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(!is_error && text.contains("made"), "{text}");
}

#[test]
fn rejected_bypass_is_an_error_result_with_state_rejected_and_exit_126() {
    let (srv, mut a) = session(&[]);
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let tag = start_call(&mut a, 70, &bypass("echo never", &[]));
    let req = next_request(&mut o, 1);
    reject(&mut o, &id_of(&req), "not now");
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(is_error);
    assert_eq!(text, "bypass rejected: not now");
    let st = stat(&mut a, pid_of(&req));
    assert_eq!(st["state"], "rejected", "{st}");
    assert_eq!(st["exit_code"], 126, "{st}");
    let wait = a.read_file(&format!("proc/{}/wait", pid_of(&req)));
    assert_eq!(wait, b"126\n");
}

#[test]
fn resolving_unknown_or_resolved_ids_and_malformed_json_fail() {
    let (srv, mut a) = session(&[]);
    let mut o = srv.attached();
    assert_eq!(
        resolve(&mut o, r#"{"id": "b99", "approve": true}"#),
        Err(r#"unknown bypass request "b99""#.to_string())
    );

    open_pending(&mut o, 1);
    let pid = bg(&mut a, &bypass("true", &[])).expect("bg");
    let req = next_request(&mut o, 1);
    let id = id_of(&req);
    approve(&mut o, &id);
    wait_state(&mut a, pid, "exited");
    assert_eq!(
        resolve(&mut o, &format!(r#"{{"id": "{id}", "approve": false}}"#)),
        Err(format!("unknown bypass request \"{id}\""))
    );

    // Malformed JSON: the parser's own message.
    for bad in [
        r#"{"id": "b1", "approve": tru}"#,
        r#"{"id": "b1"}"#,
        "not json",
    ] {
        let parser = serde_json::from_str::<toolsrv_protocol::Resolution>(bad)
            .expect_err("the sample is malformed")
            .to_string();
        assert_eq!(resolve(&mut o, bad), Err(parser), "for {bad:?}");
    }
}

#[test]
fn every_observer_sees_each_request_once_oldest_first() {
    let (srv, mut a) = session(&[]);
    let mut o1 = srv.attached();
    let mut o2 = srv.attached();
    open_pending(&mut o1, 1);
    open_pending(&mut o2, 1);
    let p1 = bg(&mut a, &bypass("echo one", &[])).expect("bg");

    let r1 = next_request(&mut o1, 1);
    // The second observer reads in 7-byte pieces; they join to the same line.
    let mut line = Vec::new();
    while !line.ends_with(b"\n") {
        let tag = o2.send_read(1, 7);
        match reply_to(&mut o2, tag) {
            Body::Rread { data } => {
                assert!(!data.is_empty() && data.len() <= 7, "{data:?}");
                line.extend_from_slice(&data);
            }
            b => panic!("{b:?}"),
        }
    }
    let r2: Value = serde_json::from_slice(&line).expect("JSON");
    assert_eq!(r1, r2, "both observers see the same request");
    assert_eq!(pid_of(&r1), p1);

    // The same fid does not see it again: its next read blocks, then returns
    // the next request when one comes.
    let tag = o1.send_read(1, 65536);
    if let Some(f) = quiet(&mut o1) {
        panic!("a fid saw a request twice: {f:?}");
    }
    let p2 = bg(&mut a, &bypass("echo two", &[])).expect("bg");
    let next = match reply_to(&mut o1, tag) {
        Body::Rread { data } => serde_json::from_slice::<Value>(&data).expect("JSON"),
        b => panic!("{b:?}"),
    };
    assert_eq!(pid_of(&next), p2);
    assert_ne!(id_of(&next), id_of(&r1));
    assert_eq!(pid_of(&next_request(&mut o2, 1)), p2);

    // A new observer sees every request still pending, oldest first.
    open_pending(&mut o2, 2);
    assert_eq!(next_request(&mut o2, 2), r1);
    assert_eq!(pid_of(&next_request(&mut o2, 2)), p2);
}

#[test]
fn unresolved_requests_are_rejected_with_timed_out() {
    let (srv, mut a) = session(&["--bypass-timeout", "2s"]);
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let start = Instant::now();
    let tag = start_call(&mut a, 70, &bypass("echo late", &[]));
    let req = next_request(&mut o, 1);
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    let waited = start.elapsed();
    assert!(is_error);
    assert_eq!(text, "bypass rejected: timed out");
    assert!(
        waited >= Duration::from_millis(1900),
        "expired after {waited:?}"
    );
    let st = stat(&mut a, pid_of(&req));
    assert_eq!(st["state"], "rejected", "{st}");
    assert_eq!(st["exit_code"], 126, "{st}");
    assert_resolved_or_withdrawn(&mut o, &id_of(&req));
    assert_nothing_pending(&mut o, 2);
}

#[test]
fn clunking_the_request_withdraws_it() {
    let (srv, mut a) = session(&[]);
    let mut o = srv.attached();
    let mut late = srv.attached();
    open_pending(&mut o, 1);
    // An observer whose fid is open but has not read (so has not seen it).
    open_pending(&mut late, 1);

    let tag = start_call(&mut a, 70, &bypass("echo withdrawn", &[]));
    let req = next_request(&mut o, 1);
    let (id, pid) = (id_of(&req), pid_of(&req));

    // Clunk the proc/new fid: the blocked read ends, the request is withdrawn.
    let ctag = a.tag();
    a.send(ctag, Body::Tclunk { fid: 70 });
    let (mut clunked, mut read_done) = (false, false);
    while !(clunked && read_done) {
        let f = a.recv();
        if f.tag == ctag {
            assert_eq!(f.body, Body::Rclunk);
            clunked = true;
        } else if f.tag == tag {
            read_done = true;
        }
    }
    let st = wait_state(&mut a, pid, "cancelled");
    assert!(!st["exit_code"].is_null(), "{st}");

    // The late observer's read stays blocked: the request is gone.
    let rtag = late.send_read(1, 65536);
    if let Some(f) = quiet(&mut late) {
        panic!("a withdrawn request was still handed out: {f:?}");
    }
    flush(&mut late, rtag);
    assert_eq!(
        resolve(&mut o, &format!(r#"{{"id": "{id}", "approve": true}}"#)),
        Err(format!("unknown bypass request \"{id}\""))
    );
}

#[test]
fn background_bypass_returns_at_once_and_follows_the_decision() {
    let (srv, mut a) = session(&[]);
    let mut o = srv.attached();
    open_pending(&mut o, 1);

    // Approved: awaiting_approval, then runs to exited, unsandboxed.
    let start = Instant::now();
    let p1 = bg(&mut a, &bypass("echo done", &[("session", "s1")])).expect("bg");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "bg waited for approval"
    );
    let st = stat(&mut a, p1);
    assert_eq!(st["state"], "awaiting_approval", "{st}");
    assert_eq!(st["background"], true, "{st}");
    let r1 = next_request(&mut o, 1);
    assert_eq!(pid_of(&r1), p1);
    approve(&mut o, &id_of(&r1));
    let st = wait_state(&mut a, p1, "exited");
    assert_eq!(st["exit_code"], 0, "{st}");
    assert_eq!(st["sandboxed"], false, "{st}");
    assert_eq!(a.read_file(&format!("proc/{p1}/out")), b"done\n");

    // Rejected.
    let p2 = bg(&mut a, &bypass("echo never", &[])).expect("bg");
    let r2 = next_request(&mut o, 1);
    assert_eq!(pid_of(&r2), p2);
    reject(&mut o, &id_of(&r2), "no");
    let st = wait_state(&mut a, p2, "rejected");
    assert_eq!(st["exit_code"], 126, "{st}");
    assert_eq!(
        a.read_file(&format!("proc/{p2}/out")),
        b"bypass rejected: no"
    );

    // Killed while awaiting approval: withdrawn.
    let p3 = bg(&mut a, &bypass("echo never", &[])).expect("bg");
    let r3 = next_request(&mut o, 1);
    assert_eq!(pid_of(&r3), p3);
    a.write(&format!("proc/{p3}/ctl"), "kill").expect("kill");
    let st = wait_state(&mut a, p3, "killed");
    assert_eq!(st["exit_code"], 128 + 9, "{st}");
    assert_resolved_or_withdrawn(&mut o, &id_of(&r3));
    assert_nothing_pending(&mut o, 2);
}

#[test]
fn validation_refuses_before_anything_is_queued() {
    let (srv, mut a) = session(&[]);
    let (is_error, plain) = result_text(&call(&mut a, &shell("rm -rf /", &[])));
    assert!(is_error);
    assert!(
        plain.starts_with("command refused by validation rule"),
        "{plain}"
    );
    let (is_error, text) = result_text(&call(&mut a, &bypass("rm -rf /", &[])));
    assert!(is_error);
    assert_eq!(text, plain);
    assert_eq!(bg(&mut a, &bypass("rm -rf /", &[])), Err(plain));
    let mut o = srv.attached();
    assert_nothing_pending(&mut o, 1);
    let list = a.json("proc/list");
    assert!(
        list.as_array()
            .expect("array")
            .iter()
            .all(|p| p["state"] != "awaiting_approval"),
        "{list}"
    );
}

/// The secret used by the authenticated server.
const SECRET: &str = "bypass-test-secret-5e1f";

#[test]
fn a_tool_has_neither_secret_nor_token_to_approve_with() {
    // The socket and its secret file live outside the server's --cwd, and the
    // server's own environment carries TOOLSRV_SECRET.
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = tempfile::tempdir().expect("cwd");
    let secret_file = dir.path().join("toolsrv.sock.secret");
    std::fs::write(&secret_file, SECRET).expect("secret file");
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let srv = Launch::new()
        .cwd(cwd.path())
        .listen(&dir.path().join("toolsrv.sock"))
        .env("TOOLSRV_SECRET", SECRET)
        .start();
    let (mut a, token) = srv.authed(SECRET);
    a.write("ctl", "load a1 shell").expect("load");
    let (mut o, _) = srv.authed(SECRET);
    open_pending(&mut o, 1);
    let t = [("token", token.as_str())];
    let pid = bg(&mut a, &bypass("echo approved", &t)).expect("bg");
    let id = id_of(&next_request(&mut o, 1));

    let mut run = |cmd: &str| result_text(&call(&mut a, &shell(cmd, &t)));

    // Nothing secret in the tool's environment.
    let (_, env) = run("env");
    assert!(env.contains("OLLIE_AGENT_ID=a1"), "{env}");
    assert!(!env.contains("TOOLSRV_"), "{env}");
    assert!(!env.contains(SECRET) && !env.contains(&token), "{env}");
    // The secret file and the server's environment are unreadable.
    let (is_error, text) = run(&format!(
        "cat {}",
        sh_quote(&secret_file.display().to_string())
    ));
    assert!(is_error && crate::sandbox::refused(&text), "{text}");
    let (is_error, text) = run(&format!("cat /proc/{}/environ", srv.pid()));
    assert!(is_error && !text.contains(SECRET), "{text}");

    // The tool runs a 9P client against the socket: it cannot approve.
    let client = install_client(cwd.path());
    let (is_error, text) = run(&format!(
        "{} --socket {} approve {id}",
        sh_quote(&client.display().to_string()),
        sh_quote(&srv.socket.display().to_string())
    ));
    assert!(is_error, "the tool's approve succeeded: {text}");
    assert!(!text.contains(SECRET), "{text}");
    let st = stat(&mut a, pid);
    assert_eq!(st["state"], "awaiting_approval", "{st}");

    // The real observer still can.
    approve(&mut o, &id);
    wait_state(&mut a, pid, "exited");
}

/// A `--no-auth` server with one background bypass request pending: the
/// server, the agent's connection, the observer's (fid 1 open on
/// `bypass/pending`), the process's pid and the request's ID.
///
/// The server runs without the filesystem view (`TOOLSRV_VIEW=off`): the
/// view masks the socket, so a tool cannot connect at all
/// (`sandbox_view::a_tool_cannot_connect_to_its_own_servers_socket`); these
/// tests check the server's own refusal of observers that are tools, which
/// is what stands where there is no view.
fn no_auth_bypass_pending() -> (Server, Raw, Raw, u64, String) {
    let srv = crate::util::Launch::new()
        .arg("--no-auth")
        .env("TOOLSRV_VIEW", "off")
        .start();
    let mut a = srv.attached();
    a.write("ctl", "load a1 shell").expect("load shell");
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let pid = bg(&mut a, &bypass("echo approved", &[])).expect("bg");
    let id = id_of(&next_request(&mut o, 1));
    (srv, a, o, pid, id)
}

#[test]
fn under_no_auth_a_tool_is_refused_as_an_observer() {
    let (srv, mut a, _observer, pid, id) = no_auth_bypass_pending();
    let client = install_client(srv.cwd());
    // A secret from the environment: `<socket>.secret` is out of the tool's
    // reach, and a --no-auth server ignores the secret anyway.
    let base = format!(
        "TOOLSRV_SECRET=unused {} --socket {}",
        sh_quote(&client.display().to_string()),
        sh_quote(&srv.socket.display().to_string())
    );
    // The tool can connect (it gets an answer from the server), but opening
    // bypass/resolve or bypass/pending is refused.
    for sub in [format!("approve {id}"), "pending".to_string()] {
        let (is_error, text) = result_text(&call(&mut a, &shell(&format!("{base} {sub}"), &[])));
        assert!(is_error, "{sub}: {text}");
        assert!(text.contains("permission denied"), "{sub}: {text}");
    }
    let st = stat(&mut a, pid);
    assert_eq!(st["state"], "awaiting_approval", "{st}");
}

#[test]
fn a_tool_that_daemonizes_cannot_approve_under_no_auth() {
    let (srv, mut a, _observer, pid, id) = no_auth_bypass_pending();
    let client = install_client(srv.cwd());
    let out = srv.cwd().join("escaped.out");
    let done = srv.cwd().join("escaped.done");
    // The tool starts a detached grandchild (new session) and exits; once its
    // parent is gone (it is an orphan) the grandchild tries to approve.
    let started = srv.cwd().join("escaped.started");
    let inner = format!(
        "touch {}; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done; \
         TOOLSRV_SECRET=unused {} --socket {} approve {id} > {} 2>&1; touch {}",
        sh_quote(&started.display().to_string()),
        sh_quote(&client.display().to_string()),
        sh_quote(&srv.socket.display().to_string()),
        sh_quote(&out.display().to_string()),
        sh_quote(&done.display().to_string()),
    );
    // The grandchild is orphaned at once (the subshell that started it
    // exits) and runs in a session of its own; the tool waits for it to finish,
    // since everything of a run dies when the run ends.
    let _ = &started;
    let cmd = format!(
        "( setsid sh -c {} < /dev/null > /dev/null 2>&1 & ) ; while [ ! -e {} ]; do sleep 0.05; done",
        sh_quote(&inner),
        sh_quote(&done.display().to_string()),
    );
    let (is_error, text) = result_text(&call(&mut a, &shell(&cmd, &[])));
    assert!(!is_error, "{text}");
    assert!(
        wait_until(WAIT, || done.exists()),
        "the detached grandchild did not finish"
    );
    let said = std::fs::read_to_string(&out).unwrap_or_default();
    let st = stat(&mut a, pid);
    assert_eq!(
        st["state"], "awaiting_approval",
        "a daemonized tool approved its request (it said {said:?}): {st}"
    );
    assert!(said.contains("permission denied"), "{said}");
}

#[test]
fn cli_pending_lists_follows_and_resolves() {
    let (srv, mut a) = session(&[]);
    let p1 = bg(&mut a, &bypass("echo one", &[])).expect("bg");
    let p2 = bg(&mut a, &bypass("echo two", &[])).expect("bg");
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let (b1, b2) = (
        id_of(&next_request(&mut o, 1)),
        id_of(&next_request(&mut o, 1)),
    );

    // `pending` prints what is pending now and exits.
    let out = cli(&srv.socket)
        .arg("pending")
        .output()
        .expect("run pending");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains(&format!("{b1}  pid {p1}")), "{text}");
    assert!(text.contains(&format!("{b2}  pid {p2}")), "{text}");
    assert!(
        text.contains("echo one") && text.contains("echo two"),
        "{text}"
    );

    // `--json pending -f` prints them, keeps waiting, and prints a new one.
    let mut child = cli(&srv.socket)
        .args(["--json", "pending", "-f"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pending -f");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next_line = || -> Value {
        let l = rx.recv_timeout(WAIT).expect("a line from pending -f");
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))
    };
    assert_eq!(id_of(&next_line()), b1);
    assert_eq!(id_of(&next_line()), b2);
    let p3 = bg(&mut a, &bypass("echo three", &[])).expect("bg");
    let r3 = next_line();
    assert_eq!(pid_of(&r3), p3);
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "pending -f exited"
    );
    child.kill().expect("kill pending -f");
    child.wait().expect("reap pending -f");

    // approve / reject through the CLI.
    let ok = cli(&srv.socket)
        .args(["approve", &b1])
        .output()
        .expect("approve");
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(wait_state(&mut a, p1, "exited")["exit_code"], 0);
    let ok = cli(&srv.socket)
        .args(["reject", &b2, "not today"])
        .output()
        .expect("reject");
    assert!(ok.status.success(), "{ok:?}");
    wait_state(&mut a, p2, "rejected");
    assert_eq!(
        a.read_file(&format!("proc/{p2}/out")),
        b"bypass rejected: not today"
    );
    let bad = cli(&srv.socket)
        .args(["approve", &b1])
        .output()
        .expect("approve");
    assert!(!bad.status.success(), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains(&format!("unknown bypass request \"{b1}\"")),
        "{err}"
    );
    reject(&mut o, &id_of(&r3), "cleanup");
}

/// The selfapprove example binary (crates/toolsrv/examples/selfapprove.rs),
/// built once per test run with the same cargo and profile as this test binary.
fn selfapprove() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| crate::util::example("selfapprove"))
}

/// Run selfapprove (copied into the server's cwd) as a tool in `mode` against
/// request `id`; returns what it reported.
fn run_selfapprove(srv: &Server, a: &mut Raw, mode: &str, id: &str) -> String {
    let exe = srv.cwd().join("selfapprove");
    if !exe.exists() {
        std::fs::copy(selfapprove(), &exe).expect("copy selfapprove");
    }
    let out = srv.cwd().join(format!("selfapprove-{mode}.out"));
    // The tool waits for the report: everything of a run dies when it ends,
    // and a handed-off connection must be tried while the run lasts.
    let cmd = format!(
        "{} {mode} {} {id} {} < /dev/null > /dev/null 2>&1; while [ ! -e {} ]; do sleep 0.05; done",
        sh_quote(&exe.display().to_string()),
        sh_quote(&srv.socket.display().to_string()),
        sh_quote(&out.display().to_string()),
        sh_quote(&out.display().to_string()),
    );
    let (is_error, text) = result_text(&call(a, &shell(&cmd, &[])));
    assert!(!is_error, "{text}");
    assert!(
        wait_until(WAIT, || out.exists()),
        "selfapprove {mode} reported nothing"
    );
    std::fs::read_to_string(&out).expect("read report")
}

#[test]
fn a_tool_whose_connecting_process_exited_cannot_approve_under_no_auth() {
    let (srv, mut a, _observer, pid, id) = no_auth_bypass_pending();

    // Control: the connecting process itself asks, and is refused.
    let said = run_selfapprove(&srv, &mut a, "direct", &id);
    assert_eq!(said, "permission denied");

    // The connection outlives the process that made it: still refused.
    let said = run_selfapprove(&srv, &mut a, "handoff", &id);
    let st = stat(&mut a, pid);
    assert_eq!(
        st["state"], "awaiting_approval",
        "a tool approved its request through a connection whose creator exited \
         (it said {said:?}): {st}"
    );
    assert_eq!(said, "permission denied");
}

#[test]
fn closing_the_connection_withdraws_but_flushing_the_read_does_not() {
    let (srv, mut a) = session(&[]);
    let mut o = srv.attached();
    open_pending(&mut o, 1);

    // Flushing the blocked result read abandons the read only: the request
    // stays pending, and a new read on the same fid returns the result.
    let tag = start_call(&mut a, 70, &bypass("echo kept", &[]));
    let req = next_request(&mut o, 1);
    flush(&mut a, tag);
    let mut fresh = srv.attached();
    open_pending(&mut fresh, 1);
    assert_eq!(
        next_request(&mut fresh, 1),
        req,
        "flush withdrew the request"
    );
    assert_eq!(stat(&mut a, pid_of(&req))["state"], "awaiting_approval");
    approve(&mut o, &id_of(&req));
    let tag = a.send_read(70, 65536);
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(!is_error, "{text}");
    assert_eq!(text, "kept\n");

    // Closing the requester's connection clunks its fids: withdrawn.
    let mut gone = srv.attached();
    start_call(&mut gone, 70, &bypass("echo gone", &[]));
    let req = next_request(&mut o, 1);
    drop(gone);
    wait_state(&mut a, pid_of(&req), "cancelled");
    assert_resolved_or_withdrawn(&mut o, &id_of(&req));
    assert_nothing_pending(&mut o, 2);
}

/// Resolving `id` fails: it is no longer pending (resolved, expired or withdrawn).
fn assert_resolved_or_withdrawn(o: &mut Raw, id: &str) {
    assert_eq!(
        resolve(o, &format!(r#"{{"id": "{id}", "approve": true}}"#)),
        Err(format!("unknown bypass request \"{id}\""))
    );
}

/// A bypass request of a tool with `file: true` arguments shows their values
/// (the command names them only by path): what the observer approves is what
/// is written.
#[test]
fn pending_request_shows_the_values_of_file_arguments() {
    let (srv, mut a) = session(&[]);
    a.write("ctl", "load a1 file_write")
        .expect("load file_write");
    let mut o = srv.attached();
    open_pending(&mut o, 1);
    let content = "approved text\n".repeat(2_000);
    let payload = toolsrv_protocol::encode_payload(&[
        ("tool", "file_write"),
        ("agent", "a1"),
        ("bypass", "true"),
        ("path", "w.txt"),
        ("content", &content),
    ]);
    let tag = start_call(&mut a, 71, &payload);
    let req = next_request(&mut o, 1);
    assert_eq!(
        req["files"]["content"],
        content.as_str(),
        "files of {}",
        req["command"]
    );
    let command = req["command"].as_str().expect("command");
    assert!(
        command.contains("--content-file /proc/self/fd/3"),
        "{command}"
    );
    approve(&mut o, &id_of(&req));
    let (is_error, text) = result_text(&finish_call(&mut a, tag));
    assert!(!is_error, "{text}");
    assert_eq!(
        std::fs::read_to_string(srv.cwd().join("w.txt")).expect("read"),
        content
    );
}
