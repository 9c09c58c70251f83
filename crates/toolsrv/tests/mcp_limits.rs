//! `toolsrv mcp`'s message size limit (docs/mcp.md, "Limits"): over stdio a
//! request longer than 16 MiB is answered with a JSON-RPC error naming the
//! sizes, and the session goes on; one without an id ends the session; over
//! HTTP a body over the limit is answered `413`. The client here is raw
//! JSON-RPC, since an SDK might refuse to send such a message at all.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::util::{toolsrv_bin, Server, WAIT};

/// 16 MiB: rmcp's line limit, the bridge's.
const LIMIT: usize = 16 * 1024 * 1024;

/// `toolsrv mcp` on stdio, its stdout lines arriving on a channel.
struct Stdio_ {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Drop for Stdio_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stdio_ {
    fn start(srv: &Server) -> Stdio_ {
        let mut child = Command::new(toolsrv_bin())
            .arg("--socket")
            .arg(&srv.socket)
            .args(["mcp", "--agent", "limits", "--load", "shell", "--cwd"])
            .arg(srv.cwd())
            .env_remove("TOOLSRV_SECRET")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn toolsrv mcp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut s = Stdio_ {
            child,
            stdin,
            lines,
        };
        s.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        let init = s.answer(1);
        assert_eq!(init["result"]["serverInfo"]["name"], "toolsrv", "{init}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send_bytes(&mut self, b: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(b).expect("write to toolsrv mcp");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, v: &Value) {
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        self.send_bytes(&line);
    }

    /// The answer to request `id` (other messages are skipped), within [`WAIT`].
    fn answer(&mut self, id: u64) -> Value {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to request {id} within {WAIT:?}: {e}"));
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Whether stdout closes (the process ends its session) within [`WAIT`].
    fn closes(&mut self) -> bool {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

/// A `tools/call` of `shell` whose command is padded to `len` bytes of JSON
/// (newline not included).
fn call_line(id: Option<u64>, len: usize) -> Vec<u8> {
    let mut v = json!({"jsonrpc": "2.0", "method": "tools/call",
        "params": {"name": "shell", "arguments": {"command": "true", "pad": ""}}});
    if let Some(id) = id {
        v["id"] = json!(id);
    }
    let base = v.to_string().len();
    v["params"]["arguments"]["pad"] = json!("p".repeat(len - base));
    let mut line = v.to_string().into_bytes();
    assert_eq!(line.len(), len);
    line.push(b'\n');
    line
}

#[test]
fn a_stdio_request_over_the_limit_is_answered_with_an_error_and_the_session_goes_on() {
    let srv = Server::start(&[]);
    let mut m = Stdio_::start(&srv);
    m.send_bytes(&call_line(Some(5), LIMIT + 100));
    let a = m.answer(5);
    let msg = a["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(a["error"]["code"], -32600, "{a}");
    assert_eq!(
        msg,
        format!("request too large: the message is {} bytes, and toolsrv mcp takes at most {LIMIT} bytes per message (its newline included); the request was not run (docs/mcp.md, \"Limits\")", LIMIT + 101)
    );
    // The session is still usable, and a message of exactly the limit is taken.
    m.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "shell", "arguments": {"command": "echo still here"}}}));
    let a = m.answer(6);
    assert_eq!(a["result"]["content"][0]["text"], "still here\n", "{a}");
    m.send_bytes(&call_line(Some(7), LIMIT - 1));
    let a = m.answer(7);
    // Taken by the bridge and sent on: its payload, a little larger than the
    // message, is over the server's 16 MiB per request, which says so.
    let text = a["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        a["result"]["isError"],
        true,
        "{}",
        &text[..text.len().min(300)]
    );
    assert!(
        text.contains("request too large: more than 16777216 bytes"),
        "{}",
        &text[..text.len().min(300)]
    );
}

#[test]
fn a_stdio_message_over_the_limit_without_an_id_ends_the_session() {
    let srv = Server::start(&[]);
    let mut m = Stdio_::start(&srv);
    m.send_bytes(&call_line(None, LIMIT + 1));
    assert!(
        m.closes(),
        "toolsrv mcp kept the session after an oversized message it could not answer"
    );
    let status = crate::util::wait_until(WAIT, || m.child.try_wait().ok().flatten().is_some());
    assert!(status, "toolsrv mcp did not exit");
}

#[test]
fn an_http_body_over_the_limit_is_refused_with_413() {
    let srv = Server::start(&[]);
    let mut cmd = Command::new(toolsrv_bin());
    cmd.arg("--socket")
        .arg(&srv.socket)
        .args(["mcp", "--agent", "limits-http", "--http", "127.0.0.1:0"])
        .env_remove("TOOLSRV_SECRET")
        .env_remove("TOOLSRV_MCP_TOKEN");
    let (mut child, line) = crate::util::spawn_for_first_line(&mut cmd, "toolsrv mcp --http");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    let mut token_file = srv.socket.clone().into_os_string();
    token_file.push(".mcp-token");
    let token = std::fs::read_to_string(&token_file)
        .expect("token")
        .trim()
        .to_string();
    let host = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("host");
    let body = call_line(Some(1), LIMIT + 1);
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write head");
    // The server may answer and close before the whole body is sent.
    let _ = s.write_all(&body);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.starts_with("HTTP/1.1 413"),
        "{}",
        &out[..out.len().min(300)]
    );
    assert!(out.contains(&format!("exceeds {LIMIT} bytes")), "{out}");
}
