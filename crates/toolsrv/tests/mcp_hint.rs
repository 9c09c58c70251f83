//! Issue 28: `toolsrv mcp --agent A` without `--load`, for an agent with
//! nothing loaded, serves an empty `tools/list`; it says why in its log
//! (stderr), and its `--help` says so beforehand. Raw JSON-RPC over stdio.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use crate::util::{toolsrv_bin, Server, WAIT};

/// Sends `initialize`, `notifications/initialized` and `tools/list` to a
/// `toolsrv mcp` bridge for `agent`; returns (the `tools/list` result, stderr).
fn list_over_stdio(srv: &Server, agent: &str) -> (serde_json::Value, String) {
    let mut child = Command::new(toolsrv_bin())
        .arg("--socket")
        .arg(&srv.socket)
        .args(["mcp", "--agent", agent, "--cwd"])
        .arg(srv.cwd())
        .env_remove("TOOLSRV_SECRET")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolsrv mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut stderr = child.stderr.take().expect("stderr");
    // Replies are read on a thread so that every wait is bounded.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let reply_to = |id: u64| -> serde_json::Value {
        loop {
            let line = rx.recv_timeout(WAIT).expect("a JSON-RPC reply in time");
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON-RPC");
            if v["id"] == id {
                return v;
            }
        }
    };
    let send = |stdin: &mut std::process::ChildStdin, msg: &str| {
        stdin.write_all(msg.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    };
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    );
    let init = reply_to(1);
    assert!(init["result"].is_object(), "{init}");
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
    );
    let list = reply_to(2)["result"].clone();
    // End of input ends the bridge; its stderr is then complete.
    drop(stdin);
    let exited = crate::util::wait_until(WAIT, || child.try_wait().ok().flatten().is_some());
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(exited, "toolsrv mcp did not end with its input");
    let mut err = String::new();
    stderr.read_to_string(&mut err).expect("stderr");
    (list, err)
}

#[test]
fn an_empty_tools_list_is_explained_in_the_log() {
    let srv = Server::start(&["--no-auth"]);
    let (list, err) = list_over_stdio(&srv, "nothing-loaded");
    assert_eq!(list["tools"], serde_json::json!([]), "{list}");
    assert!(
        err.contains("no tools are loaded for agent nothing-loaded")
            && err.contains("--load")
            && err.contains("toolsrv load nothing-loaded"),
        "{err}"
    );
    // With a tool loaded there is nothing to explain.
    let load = crate::util::cli(&srv.socket)
        .args(["load", "loaded", "shell"])
        .output()
        .expect("load");
    assert!(load.status.success(), "{load:?}");
    let (list, err) = list_over_stdio(&srv, "loaded");
    assert_eq!(list["tools"][0]["name"], "shell", "{list}");
    assert!(!err.contains("no tools are loaded"), "{err}");
}

#[test]
fn mcp_help_says_that_without_load_only_loaded_tools_are_served() {
    let out = Command::new(toolsrv_bin())
        .args(["mcp", "--help"])
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("Without --load, only the tools already loaded"),
        "{help}"
    );
}
