//! Reconnect: the same `Client` survives a toolsrv restart on the same socket
//! path (docs/protocol.md, "Authentication": the new server stores the saved secret anew and issues a
//! new token, which later payloads carry); requests in flight fail with
//! `Disconnected`; files opened on the old connection fail the same way.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{bounded, until};
use toolsrv_client::{Auth, CallRequest, Client, ClientError};
use toolsrv_testkit::{Launch, Server};
use toolsrv_wire::OREAD;

const SECRET: &str = "reconnect-secret";

const TOOLS: &[(&str, &str)] = &[
    (
        "echo.yaml",
        "description: Echo v\nparams:\n  v: {type: string, description: v, required: true}\ncommand: \"printf '%s' {v}\"\n",
    ),
    ("slow.yaml", "description: Sleep\ncommand: \"sleep 300\"\n"),
];

/// One `toolsrv serve` run on `<dir>/s`, with `dir` as its cwd.
fn start_server(dir: &Path) -> Server {
    Launch::new()
        .cwd(dir)
        .listen(&dir.join("s"))
        .tools(TOOLS)
        .start()
}

fn echo(v: &str) -> CallRequest {
    CallRequest::new("echo", "a1").arg("v", v)
}

/// The text of a successful result.
fn ok_text(r: &toolsrv_protocol::ToolResult) -> String {
    let v = serde_json::to_value(r).expect("result JSON");
    assert_eq!(v["isError"], false, "expected success: {v}");
    v["content"][0]["text"].as_str().expect("text").to_string()
}

/// The text of an error result.
fn error_text(r: &toolsrv_protocol::ToolResult) -> String {
    let v = serde_json::to_value(r).expect("result JSON");
    assert_eq!(v["isError"], true, "expected an error result: {v}");
    v["content"][0]["text"].as_str().expect("text").to_string()
}

/// A first server (generation 1) in a fresh directory and a client connected
/// to it with the secret: (directory, socket, server, client).
async fn first_server() -> (tempfile::TempDir, std::path::PathBuf, Server, Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("s");
    let first = start_server(dir.path());
    let c = bounded(Client::connect(&socket, Auth::Secret(SECRET.into())))
        .await
        .expect("connect");
    (dir, socket, first, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_client_and_its_clones_work_after_a_server_restart() {
    let (dir, _, mut first, c) = first_server().await;
    let clone = c.clone();
    let old_token = c.token().expect("token").to_owned();
    bounded(c.load("a1", &["echo"])).await.expect("load");
    let r = bounded(c.call(&echo("before"))).await.expect("call");
    assert_eq!(ok_text(&r), "before");

    assert!(first.stop(libc::SIGTERM).success(), "clean exit");
    until(|| !c.is_connected()).await;
    let _second = start_server(dir.path());

    // The next request reconnects and re-authenticates with the saved secret.
    let info = bounded(clone.read_file("info"))
        .await
        .expect("info after restart");
    assert!(String::from_utf8_lossy(&info).contains("\"platform\""));
    assert!(c.is_connected(), "every clone sees the new connection");
    let new_token = c.token().expect("token").to_owned();
    assert_eq!(new_token.len(), 64);
    assert_ne!(new_token, old_token, "a new server issues a new token");
    assert_eq!(clone.token().as_deref(), Some(&*new_token));

    // The new server's registry is empty: the call is refused for that reason,
    // not for its token.
    let r = bounded(c.call(&echo("x"))).await.expect("call");
    assert_eq!(
        error_text(&r),
        "tool \"echo\" is not loaded for agent \"a1\""
    );
    bounded(clone.load("a1", &["echo"])).await.expect("reload");
    let r = bounded(c.call(&echo("after"))).await.expect("call");
    assert_eq!(ok_text(&r), "after", "the payload carries the new token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_calls_and_old_files_fail_with_disconnected() {
    let (dir, _, mut first, c) = first_server().await;
    bounded(c.load("a1", &["slow"])).await.expect("load");
    let file = bounded(c.open("bypass/pending", OREAD))
        .await
        .expect("open pending");
    let caller = c.clone();
    let call = tokio::spawn(async move { caller.call(&CallRequest::new("slow", "a1")).await });
    // The call is running on the server.
    let mut running = false;
    for _ in 0..2000 {
        let ps = bounded(c.ps(Some("a1"))).await.expect("ps");
        if ps.iter().any(|p| p.tool == "slow") {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(running, "the slow call never showed up in proc/list");

    // SIGKILL: the server cannot answer anything any more.
    first.stop(libc::SIGKILL);
    let r = bounded(call).await.expect("task");
    assert!(matches!(r, Err(ClientError::Disconnected)), "{r:?}");
    assert_eq!(
        ClientError::Disconnected.to_string(),
        "disconnected from the server"
    );

    let _second = start_server(dir.path());
    let info = bounded(c.read_file("info"))
        .await
        .expect("info after restart");
    assert!(!info.is_empty());
    // A file of the old connection stays dead.
    let r = bounded(file.read_at(0, 100)).await;
    assert!(matches!(r, Err(ClientError::Disconnected)), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_is_bounded_and_a_refused_secret_is_not_retried() {
    let (dir, socket, mut first, c) = first_server().await;
    c.set_reconnect_timeout(Duration::from_secs(1));
    assert!(first.stop(libc::SIGTERM).success());

    // Nobody listens: the request gives up after about the timeout.
    let start = Instant::now();
    let e = bounded(c.read_file("info")).await.expect_err("no server");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(4),
        "gave up after {took:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("cannot reconnect to {}", socket.display())),
        "{msg}"
    );

    // A server that already holds another secret refuses ours: at once.
    let _second = start_server(dir.path());
    let other = bounded(Client::connect(&socket, Auth::Secret("another".into())))
        .await
        .expect("other client");
    let start = Instant::now();
    let e = bounded(c.read_file("info")).await.expect_err("refused");
    assert!(matches!(e, ClientError::Auth(_)), "{e:?}");
    assert_eq!(e.to_string(), "authentication failed");
    assert!(start.elapsed() < Duration::from_millis(900), "not retried");
    drop(other);
}
