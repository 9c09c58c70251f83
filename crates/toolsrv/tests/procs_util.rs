//! Helpers for the process-execution tests (docs/protocol.md, "Requests and results"; docs/protocol.md, "Processes"): servers with a
//! tools directory, payloads, calls, and views of the server's OS processes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use toolsrv_wire::{Body, ORDWR, OREAD};

use crate::util::{Launch, Raw, Server, WAIT};

/// The exact key set of a ProcStat object (docs/protocol.md, "Processes").
pub const PROCSTAT_KEYS: [&str; 13] = [
    "agent",
    "background",
    "command",
    "cwd",
    "ended",
    "exit_code",
    "pid",
    "runtime_ms",
    "sandboxed",
    "session",
    "started",
    "state",
    "tool",
];

/// Write one tool file: names ending in `.yaml` are plain files, others executables.
pub fn write_tool(dir: &Path, name: &str, text: &str) {
    toolsrv_testkit::write_tool(dir, name, text).expect("write tool file");
}

/// A server whose tools directory (outside its `--cwd`: the server carves
/// the tools directory out of every sandbox rule) holds `tools`
/// (`(file name, text)`), started with `--tools <dir>` plus `extra`.
pub fn tools_server(tools: &[(&str, &str)], extra: &[&str]) -> Server {
    Launch::new().tools(tools).args(extra).start()
}

/// A `--no-auth` server with `tools`, an attached connection, and every tool
/// loaded for agent `a1`.
pub fn tools_session(tools: &[(&str, &str)], extra: &[&str]) -> (Server, Raw) {
    let mut args = vec!["--no-auth"];
    args.extend_from_slice(extra);
    let srv = tools_server(tools, &args);
    let mut c = srv.attached();
    for (name, _) in tools {
        let tool = name.trim_end_matches(".yaml");
        load(&mut c, "a1", tool);
    }
    (srv, c)
}

/// A `--no-auth` server serving the built-in tools, with `shell` loaded for `a1`.
pub fn shell_session(extra: &[&str]) -> (Server, Raw) {
    let mut args = vec!["--no-auth"];
    args.extend_from_slice(extra);
    let srv = Server::start(&args);
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    (srv, c)
}

/// `ctl load <agent> <tool>`, which must succeed.
pub fn load(c: &mut Raw, agent: &str, tool: &str) {
    c.write("ctl", &format!("load {agent} {tool}"))
        .unwrap_or_else(|e| panic!("load {agent} {tool}: {e}"));
}

/// A payload built with the protocol's encoder.
pub fn payload(fields: &[(&str, &str)]) -> String {
    toolsrv_protocol::encode_payload(fields)
}

/// A synchronous call; returns the ToolResult JSON.
pub fn call(c: &mut Raw, fields: &[(&str, &str)]) -> Value {
    let out = c
        .ask("proc/new", &payload(fields))
        .unwrap_or_else(|e| panic!("proc/new failed with Rerror {e:?}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("result is not JSON ({e}): {out}"))
}

/// A synchronous call like [`call`] whose `proc/new` fid (`fid`) stays open
/// until the caller clunks it: its process entry stays in the table meanwhile
/// (a synchronous call's entry is dismissed once its result was read and its
/// fid clunked, docs/containment.md).
pub fn call_held(c: &mut Raw, fid: u32, fields: &[(&str, &str)]) -> Value {
    c.walk(fid, "proc/new").expect("walk proc/new");
    c.ok(Body::Topen { fid, mode: ORDWR });
    c.ok(Body::Twrite {
        fid,
        offset: 0,
        data: payload(fields).into_bytes(),
    });
    let out = c.read_all(fid);
    serde_json::from_slice(&out).unwrap_or_else(|e| panic!("result is not JSON ({e})"))
}

/// A synchronous call of the built-in `shell` tool, as agent `a1`, running `command`.
pub fn call_shell(c: &mut Raw, command: &str) -> Value {
    call(
        c,
        &[("tool", "shell"), ("agent", "a1"), ("command", command)],
    )
}

/// A background call: the pid, or the Rerror text.
pub fn bg(c: &mut Raw, fields: &[(&str, &str)]) -> Result<u64, String> {
    let out = c.ask("proc/new.bg", &payload(fields))?;
    Ok(out
        .parse()
        .unwrap_or_else(|_| panic!("proc/new.bg returned {out:?}, not a pid")))
}

/// The single text of a result, asserting its shape.
pub fn text(result: &Value) -> String {
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "one content item: {result}");
    assert_eq!(content[0]["type"], "text", "{result}");
    content[0]["text"].as_str().expect("text").to_string()
}

/// The text of an error result (asserting `isError: true`).
pub fn error_text(result: &Value) -> String {
    assert_eq!(
        result["isError"], true,
        "expected an error result: {result}"
    );
    text(result)
}

/// The text of a successful result (asserting `isError: false`).
pub fn ok_text(result: &Value) -> String {
    assert_eq!(result["isError"], false, "expected success: {result}");
    text(result)
}

/// `proc/{pid}/stat` as JSON.
pub fn stat(c: &mut Raw, pid: u64) -> Value {
    c.json(&format!("proc/{pid}/stat"))
}

/// `proc/list`, optionally filtered by agent.
pub fn list(c: &mut Raw, agent: Option<&str>) -> Vec<Value> {
    let text = match agent {
        Some(a) => c.ask("proc/list", a).expect("proc/list"),
        None => String::from_utf8(c.read_file("proc/list")).expect("utf8"),
    };
    match serde_json::from_str(&text) {
        Ok(Value::Array(v)) => v,
        other => panic!("proc/list is not a JSON array: {other:?}"),
    }
}

/// The only process of `agent` (sync calls are found this way).
pub fn only_proc(c: &mut Raw, agent: &str) -> Value {
    let l = list(c, Some(agent));
    assert_eq!(l.len(), 1, "one process for {agent}: {l:?}");
    l.into_iter().next().expect("one")
}

/// Poll `proc/{pid}/stat` until the state is final; returns the stat.
pub fn final_stat(c: &mut Raw, pid: u64) -> Value {
    let mut last = Value::Null;
    let done = crate::util::wait_until(WAIT, || {
        last = stat(c, pid);
        last["state"] != "running" && last["state"] != "awaiting_approval"
    });
    assert!(done, "process {pid} did not end: {last}");
    last
}

/// Open `path` on `fid` (read-write when there is data, else read-only),
/// write `data`, and send a read without waiting
/// for its reply; returns the read's tag.
pub fn start_read(c: &mut Raw, fid: u32, path: &str, data: &str) -> u16 {
    c.walk(fid, path).expect("walk");
    let mode = if data.is_empty() { OREAD } else { ORDWR };
    c.ok(Body::Topen { fid, mode });
    if !data.is_empty() {
        c.ok(Body::Twrite {
            fid,
            offset: 0,
            data: data.as_bytes().to_vec(),
        });
    }
    c.send_read(fid, 60000)
}

/// Receive frames until one with `tag` arrives; the others are returned too.
pub fn recv_tag(c: &mut Raw, tag: u16, others: &mut Vec<toolsrv_wire::Frame>) -> Body {
    loop {
        let f = c.recv();
        if f.tag == tag {
            return f.body;
        }
        others.push(f);
    }
}

/// Whether a read reply means "cancelled": `Rerror cancelled`, or an error
/// result whose text is `cancelled`.
pub fn is_cancelled_reply(body: &Body) -> bool {
    match body {
        Body::Rerror { ename } => ename == "cancelled",
        Body::Rread { data } => serde_json::from_slice::<Value>(data)
            .is_ok_and(|v| v["isError"] == true && v["content"][0]["text"] == "cancelled"),
        _ => false,
    }
}

/// A fresh directory under the server's `--cwd`; returns (absolute path, name).
pub fn subdir(srv: &Server, name: &str) -> PathBuf {
    let p = srv.cwd().join(name);
    std::fs::create_dir_all(&p).expect("mkdir");
    p
}

/// The state letter of OS process `pid` (`None` when it does not exist).
pub fn os_state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// The parent pid of OS process `pid`.
pub fn os_ppid(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether OS process `pid` is dead: gone, or a zombie (orphans are reparented
/// to a pid 1 that may not reap them; a zombie runs nothing).
pub fn os_dead(pid: i32) -> bool {
    matches!(os_state(pid), None | Some('Z') | Some('X'))
}

/// The children of `ppid` in state `Z`.
pub fn zombie_children(ppid: u32) -> Vec<i32> {
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if os_ppid(pid) == Some(ppid as i32) && os_state(pid) == Some('Z') {
            v.push(pid);
        }
    }
    v
}

/// How many descriptors `pid` has open.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `VmRSS` of `pid` in KiB.
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A read timeout for long operations on `c`.
pub fn patient(c: &mut Raw, limit: Duration) {
    c.s.set_read_timeout(Some(limit)).expect("set timeout");
}

/// Whether `s` is `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn is_millis_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}
