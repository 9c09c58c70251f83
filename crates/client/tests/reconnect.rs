//! Reconnect: the same `Client` survives a toolsrv restart on the same socket
//! path (CONTRACT §3: the new server stores the saved secret anew and issues a
//! new token, which later payloads carry); requests in flight fail with
//! `Disconnected`; files opened on the old connection fail the same way.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::toolsrv_bin;
use toolsrv_client::{Auth, CallRequest, Client, ClientError};
use toolsrv_wire::OREAD;

/// Bound of every wait in these tests.
const WAIT: Duration = Duration::from_secs(10);
const SECRET: &str = "reconnect-secret";

/// One `toolsrv serve` run on `<dir>/s` with tools in `<dir>/tools`.
struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    fn start(dir: &Path, run: u32) -> Daemon {
        let tools = dir.join("tools");
        if !tools.exists() {
            std::fs::create_dir(&tools).expect("tools dir");
            for (name, text) in [
                ("echo.yaml", "description: Echo v\nparams:\n  v: {type: string, description: v, required: true}\ncommand: \"printf '%s' {v}\"\n"),
                ("slow.yaml", "description: Sleep\ncommand: \"sleep 300\"\n"),
            ] {
                std::fs::write(tools.join(name), text).expect("tool file");
                std::fs::set_permissions(tools.join(name), std::fs::Permissions::from_mode(0o644))
                    .expect("chmod");
            }
        }
        let socket = dir.join("s");
        let child = Command::new(toolsrv_bin())
            .arg("serve")
            .arg("--listen")
            .arg(&socket)
            .arg("--cwd")
            .arg(dir)
            .arg("--tools")
            .arg(&tools)
            .arg("--log")
            .arg(dir.join(format!("log-{run}")))
            .env("OLLIE_CFG_PATH", dir.join("cfg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn toolsrv");
        let d = Daemon { child: Some(child) };
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(start.elapsed() < WAIT, "server run {run} did not come up");
            std::thread::sleep(Duration::from_millis(5));
        }
        d
    }

    /// Send `sig` and wait (bounded) for the exit.
    fn stop(&mut self, sig: i32) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        // Safety: kill(2) of our own child process.
        unsafe { libc::kill(c.id() as i32, sig) };
        let start = Instant::now();
        loop {
            if let Some(st) = c.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                start.elapsed() < WAIT,
                "server did not exit after signal {sig}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .expect("test step timed out")
}

async fn until(mut cond: impl FnMut() -> bool) {
    bounded(async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
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
async fn first_server() -> (tempfile::TempDir, std::path::PathBuf, Daemon, Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("s");
    let first = Daemon::start(dir.path(), 1);
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
    let _second = Daemon::start(dir.path(), 2);

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

    let _second = Daemon::start(dir.path(), 2);
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
    let _second = Daemon::start(dir.path(), 2);
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
