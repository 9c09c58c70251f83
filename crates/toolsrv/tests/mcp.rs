//! `toolsrv mcp` driven by MCP clients this project did not write: the Python
//! `mcp` SDK (scripts in `tests/mcp/`) over stdio and Streamable HTTP, and the
//! MCP Inspector CLI. The virtual environment is `target/mcp-venv` (made by
//! `.ci/run`, or here on first use); `$TOOLSRV_MCP_PYTHON` names another
//! interpreter. Without python3 on the machine the tests skip, saying so.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::{toolsrv_bin, Server};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

/// The Python with the `mcp` SDK, or `None` when python3 is absent: then the
/// calling test is skipped (recorded; a failure under `CI=true`, since
/// `.ci/run` installs python3). Panics when python3 is there but the SDK
/// cannot be had.
fn python() -> Option<PathBuf> {
    let py = find_python();
    if py.is_none() {
        toolsrv_testkit::skip::missing_prerequisite(
            "python3 (for the Python MCP SDK the MCP tests drive the bridge with)",
        );
    }
    py
}

fn find_python() -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(p) = std::env::var_os("TOOLSRV_MCP_PYTHON") {
            return Some(PathBuf::from(p));
        }
        let venv = workspace().join("target/mcp-venv");
        let py = venv.join("bin/python");
        let has_sdk = |py: &Path| {
            Command::new(py)
                .args(["-c", "import mcp"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if has_sdk(&py) {
            return Some(py);
        }
        if Command::new("python3").arg("--version").output().is_err() {
            return None;
        }
        eprintln!("creating {} with the Python MCP SDK (pip install mcp)", venv.display());
        let ok = Command::new("python3").arg("-m").arg("venv").arg(&venv).status().is_ok_and(|s| s.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "mcp"])
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok && has_sdk(&py), "python3 is present but the `mcp` SDK could not be installed in {}: run .ci/run, or `python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp`", venv.display());
        Some(py)
    })
    .clone()
}

/// A server plus a directory outside its `--cwd` holding `secret.txt`.
fn server() -> (Server, tempfile::TempDir) {
    let srv = Server::start(&[]);
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "outside-secret").expect("secret");
    (srv, outside)
}

fn client_cmd(py: &Path, scenario: &str, srv: &Server, outside: &Path, agent: &str) -> Command {
    let mut c = Command::new(py);
    c.arg(script())
        .arg(scenario)
        .arg("--toolsrv")
        .arg(toolsrv_bin())
        .arg("--socket")
        .arg(&srv.socket)
        .arg("--agent")
        .arg(agent)
        .arg("--cwd")
        .arg(srv.cwd())
        .arg("--outside")
        .arg(outside)
        .env_remove("TOOLSRV_SECRET")
        .stdin(Stdio::null());
    c
}

fn run_client(mut c: Command, scenario: &str) {
    let out = c.output().expect("run the Python MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("ok {scenario}")),
        "scenario {scenario} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

fn stdio(scenario: &str) {
    let Some(py) = python() else { return };
    let (srv, outside) = server();
    let c = client_cmd(
        &py,
        scenario,
        &srv,
        outside.path(),
        &format!("s-{scenario}"),
    );
    run_client(c, scenario);
}

/// A `toolsrv mcp --http` bridge; killed on drop.
struct HttpBridge {
    child: Child,
    url: String,
    token: String,
}

impl Drop for HttpBridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_bridge(srv: &Server, agent: &str, listen: &str) -> HttpBridge {
    http_bridge_with(srv, agent, listen, |_| {})
}

/// [`http_bridge`], with `tweak` applied to the command first.
fn http_bridge_with(
    srv: &Server,
    agent: &str,
    listen: &str,
    tweak: impl FnOnce(&mut Command),
) -> HttpBridge {
    let mut cmd = Command::new(toolsrv_bin());
    tweak(&mut cmd);
    cmd.arg("--socket")
        .arg(&srv.socket)
        .args([
            "mcp",
            "--agent",
            agent,
            "--load",
            "shell,file_read,file_write",
            "--cwd",
        ])
        .arg(srv.cwd())
        .args(["--http", listen])
        .env_remove("TOOLSRV_SECRET")
        .env_remove("TOOLSRV_MCP_TOKEN");
    let (child, line) = crate::util::spawn_for_first_line(&mut cmd, "toolsrv mcp --http");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    let mut token_file = srv.socket.clone().into_os_string();
    token_file.push(".mcp-token");
    let meta = std::fs::metadata(&token_file).expect("token file");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "token file mode");
    let token = std::fs::read_to_string(&token_file)
        .expect("token")
        .trim()
        .to_string();
    assert_eq!(token.len(), 64, "{token}");
    HttpBridge { child, url, token }
}

fn http(scenario: &str) {
    let Some(py) = python() else { return };
    let (srv, outside) = server();
    let agent = format!("h-{scenario}");
    let b = http_bridge(&srv, &agent, "127.0.0.1:0");
    let mut c = client_cmd(&py, scenario, &srv, outside.path(), &agent);
    c.arg("--http").arg(&b.url).arg("--token").arg(&b.token);
    run_client(c, scenario);
}

macro_rules! both {
    ($($name:ident),*) => {
        mod stdio {
            $(#[test] fn $name() { super::stdio(stringify!($name)); })*
        }
        mod http {
            $(#[test] fn $name() { super::http(stringify!($name)); })*
        }
    };
}

// basic: initialize, list, call, isError, escaping, JSON types;
// list_changed: after `toolsrv load` from another process; cancel: every
// process of the run gone within 3 s; progress; bypass: approved with
// `toolsrv approve` (and one rejected); escape: the sandbox holds as over 9P;
// large: a file_write larger than a command line holds, and an unknown
// argument refused by name.
both!(basic, list_changed, cancel, progress, bypass, escape, large);

/// One raw HTTP/1.1 POST over a Unix socket: (status line, body).
fn post_unix(path: &Path, token: Option<&str>, body: &str) -> (String, String) {
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.lines().next().unwrap_or_default().to_string();
    (status, out)
}

/// Over a Unix socket (mode 0600), without the token: 401; with it: the
/// initialize answer.
#[test]
fn http_on_a_unix_socket_needs_the_bearer_token() {
    let (srv, _outside) = server();
    let sock_dir = tempfile::tempdir().expect("dir");
    let sock = sock_dir.path().join("mcp.sock");
    let b = http_bridge(&srv, "u1", sock.to_str().expect("utf-8 path"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sock)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let (status, _) = post_unix(&sock, None, init);
    assert!(status.contains(" 401 "), "{status}");
    let (status, _) = post_unix(
        &sock,
        Some("0000000000000000000000000000000000000000000000000000000000000000"),
        init,
    );
    assert!(status.contains(" 401 "), "{status}");
    let (status, body) = post_unix(&sock, Some(&b.token), init);
    assert!(status.contains(" 200 "), "{status}\n{body}");
    assert!(body.contains(r#""name":"toolsrv""#), "{body}");
}

#[test]
fn http_refuses_addresses_that_are_not_loopback() {
    let (srv, _outside) = server();
    let out = Command::new(toolsrv_bin())
        .arg("--socket")
        .arg(&srv.socket)
        .args(["mcp", "--agent", "x", "--http", "0.0.0.0:0"])
        .env_remove("TOOLSRV_SECRET")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("only loopback"), "{err}");
}

/// The official MCP Inspector CLI lists and calls the tools. `.ci/run`
/// installs it into `target/mcp-inspector` (bounded in time); when it is not
/// there the test is recorded as skipped, and fails under `CI=true`.
#[test]
fn the_mcp_inspector_cli_lists_and_calls_tools() {
    let inspector = workspace().join("target/mcp-inspector/node_modules/.bin/mcp-inspector");
    if !inspector.exists() {
        toolsrv_testkit::skip::missing_prerequisite(&format!(
            "the MCP Inspector CLI at {} (npm)",
            inspector.display()
        ));
        return;
    }
    let (srv, _outside) = server();
    let run = |extra: &[&str]| {
        let mut c = Command::new(&inspector);
        c.arg("--cli")
            .arg(toolsrv_bin())
            .arg("--socket")
            .arg(&srv.socket)
            .args(["mcp", "--agent", "insp", "--load", "shell", "--cwd"])
            .arg(srv.cwd())
            .args(extra)
            .env_remove("TOOLSRV_SECRET")
            .stdin(Stdio::null());
        let out = c.output().expect("run the inspector");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "inspector {extra:?}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let list = run(&["--method", "tools/list"]);
    assert_eq!(list["tools"][0]["name"], "shell", "{list}");
    assert_eq!(
        list["tools"][0]["inputSchema"]["properties"]["command"]["type"],
        "string"
    );
    let call = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "shell",
        "--tool-arg",
        "command=echo from the inspector",
    ]);
    assert_eq!(call["content"][0]["text"], "from the inspector\n", "{call}");
    assert_eq!(call["isError"], false);
}

/// The Inspector CLI over Streamable HTTP with the bearer header, as
/// docs/mcp.md shows it (`--header` needs Inspector 0.16.6 or later; `.ci/run`
/// pins 0.16.8); without the header it is refused.
#[test]
fn the_mcp_inspector_cli_reaches_http_with_the_bearer_header() {
    let inspector = workspace().join("target/mcp-inspector/node_modules/.bin/mcp-inspector");
    if !inspector.exists() {
        toolsrv_testkit::skip::missing_prerequisite(&format!(
            "the MCP Inspector CLI at {} (npm)",
            inspector.display()
        ));
        return;
    }
    let (srv, _outside) = server();
    let b = http_bridge(&srv, "insp-http", "127.0.0.1:0");
    let run = |header: Option<&str>| {
        let mut c = Command::new(&inspector);
        c.args(["--cli", &b.url, "--transport", "http"]);
        if let Some(h) = header {
            c.args(["--header", h]);
        }
        c.args(["--method", "tools/list"]).stdin(Stdio::null());
        c.output().expect("run the inspector")
    };
    let out = run(Some(&format!("Authorization: Bearer {}", b.token)));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let names: Vec<&str> = list["tools"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"shell"), "{list}");
    let out = run(None);
    assert!(!out.status.success(), "no bearer header, yet: {out:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("bearer token"), "{said}");
}

/// One raw HTTP/1.1 POST over TCP to `url`'s host: (status line, answer).
fn post_tcp(url: &str, token: &str, body: &str) -> (String, String) {
    let host = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("host in url");
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.lines().next().unwrap_or_default().to_string();
    (status, out)
}

/// Whether the peer closed `s` (end of file, or an error) within `limit`.
fn closed_within(s: &mut std::net::TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).expect("timeout");
    let mut b = [0u8; 1];
    !matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut)
}

/// Issue 23, hole 6: 1,000 idle connections (a bridge whose descriptor limit
/// is 512, so they would exhaust it) do not keep the bridge from serving its
/// client, and an idle connection is closed after the header-read timeout.
#[test]
fn http_an_idle_connection_flood_leaves_the_client_served() {
    let (srv, _outside) = server();
    let b = http_bridge_with(&srv, "f1", "127.0.0.1:0", |cmd| {
        use std::os::unix::process::CommandExt;
        // Safety: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let mut l = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
                l.rlim_cur = 512.min(l.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &l);
                Ok(())
            });
        }
    });
    let host = b.url["http://".len()..]
        .split('/')
        .next()
        .expect("host")
        .to_string();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        match std::net::TcpStream::connect(&host) {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect {host}: {e}"),
        }
    }
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let (status, body) = post_tcp(&b.url, &b.token, init);
    assert!(
        status.contains(" 200 "),
        "the client was not served: {status:?}\n{body}"
    );
    assert!(body.contains(r#""name":"toolsrv""#), "{body}");
    let mut last = idle.pop().expect("an idle connection");
    drop(idle);
    assert!(
        closed_within(&mut last, Duration::from_secs(20)),
        "an idle connection stayed open past the header-read timeout"
    );
}

/// Issue 23, hole 6: `--http <path>` where a regular file lies is refused,
/// and the file is kept as it was.
#[test]
fn http_never_replaces_a_regular_file_at_its_socket_path() {
    let (srv, _outside) = server();
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "precious\n").expect("write");
    let mut child = Command::new(toolsrv_bin())
        .arg("--socket")
        .arg(&srv.socket)
        .args(["mcp", "--agent", "x", "--http"])
        .arg(&path)
        .env_remove("TOOLSRV_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    // A bridge that took the path serves until killed: bounded here.
    let mut status = None;
    crate::util::wait_until(Duration::from_secs(10), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("bridge output");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{err}");
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("the file is still there"),
        "precious\n"
    );
}
