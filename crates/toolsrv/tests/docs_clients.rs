//! Every MCP client snippet in README.md and docs/mcp.md, run against the
//! real client as written (only the socket, the port and `npx` replaced by
//! this test's own): Claude Code's `claude mcp add` commands and `.mcp.json`
//! (then `claude mcp get`, whose health check starts or reaches the bridge:
//! `✔ Connected`), the generic `mcpServers` JSON (through `claude mcp
//! add-json`), Codex's `config.toml` (parsed by `codex mcp get --json`, and
//! the server it describes started and asked for its tools), and the MCP
//! Inspector's commands. `.ci/run` installs the clients into `target/`
//! (npm); a client that is not there is a recorded skip (a failure under
//! `CI=true`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

use serde_json::Value;

use crate::util::{toolsrv_bin, Server, WAIT};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One fenced code block of a document: its language and its text.
struct Block {
    doc: &'static str,
    lang: String,
    text: String,
}

/// The fenced code blocks of README.md and docs/mcp.md.
fn blocks() -> Vec<Block> {
    let mut out = Vec::new();
    for doc in ["README.md", "docs/mcp.md"] {
        let text = std::fs::read_to_string(workspace().join(doc)).expect("read the doc");
        let mut cur: Option<Block> = None;
        for line in text.lines() {
            match (&mut cur, line.trim_start().strip_prefix("```")) {
                (None, Some(lang)) => {
                    cur = Some(Block {
                        doc,
                        lang: lang.trim().to_string(),
                        text: String::new(),
                    })
                }
                (Some(_), Some(_)) => out.extend(cur.take()),
                (Some(b), None) => {
                    b.text.push_str(line);
                    b.text.push('\n');
                }
                (None, None) => {}
            }
        }
    }
    out
}

/// The shell commands of the `sh` blocks that start with `prefix`, with
/// their continuation lines joined.
fn commands(prefix: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for b in blocks().into_iter().filter(|b| b.lang == "sh") {
        let mut cmd = String::new();
        for line in b.text.lines() {
            let line = line.trim();
            if cmd.is_empty() && (line.starts_with('#') || line.is_empty()) {
                continue;
            }
            match line.strip_suffix('\\') {
                Some(part) => cmd.push_str(part),
                None => {
                    cmd.push_str(line);
                    if cmd.starts_with(prefix) {
                        out.push((b.doc, cmd.clone()));
                    }
                    cmd.clear();
                }
            }
        }
    }
    out
}

/// The blocks of language `lang` holding `marker`.
fn snippets(lang: &str, marker: &str) -> Vec<(&'static str, String)> {
    blocks()
        .into_iter()
        .filter(|b| b.lang == lang && b.text.contains(marker))
        .map(|b| (b.doc, b.text))
        .collect()
}

/// A client installed under `target/` by `.ci/run`, or `None` (skipped).
fn client(rel: &str, what: &str) -> Option<PathBuf> {
    let p = workspace().join("target").join(rel);
    if p.exists() {
        return Some(p);
    }
    toolsrv_testkit::skip::missing_prerequisite(&format!("{what} at {} (npm)", p.display()));
    None
}

fn claude() -> Option<PathBuf> {
    client(
        "claude-code/node_modules/.bin/claude",
        "the Claude Code CLI (@anthropic-ai/claude-code)",
    )
}

fn codex() -> Option<PathBuf> {
    client(
        "codex/node_modules/.bin/codex",
        "the Codex CLI (@openai/codex)",
    )
}

fn inspector() -> Option<PathBuf> {
    client(
        "mcp-inspector/node_modules/.bin/mcp-inspector",
        "the MCP Inspector CLI (@modelcontextprotocol/inspector)",
    )
}

/// `PATH` with this build's `toolsrv` first, as an installed one would be.
fn path_with_toolsrv() -> String {
    let dir = toolsrv_bin()
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    format!("{dir}:/usr/local/bin:/usr/bin:/bin")
}

/// `cmd` run as the one user the docs' snippets are run as: the server's home
/// as `$XDG_RUNTIME_DIR` (where the documents' `$XDG_RUNTIME_DIR/toolsrv.sock`
/// is), so every client this test starts finds the same per-user directory
/// and in it the same generated secret, as the clients of one login session
/// do; and none of the test's own `TOOLSRV_*` variables.
fn as_the_user<'a>(cmd: &'a mut Command, srv: &Server) -> &'a mut Command {
    cmd.env("XDG_RUNTIME_DIR", srv.home())
        .env_remove("TOOLSRV_SECRET")
        .env_remove("TOOLSRV_SOCKET")
        .env_remove("TOOLSRV_MCP_TOKEN")
}

/// A `toolsrv mcp --http` bridge on a free loopback port; killed on drop.
struct Bridge {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bridge for `agent`; with `token`, that fixed `$TOOLSRV_MCP_TOKEN`.
fn bridge(srv: &Server, agent: &str, token: Option<&str>) -> Bridge {
    let mut cmd = Command::new(toolsrv_bin());
    cmd.arg("--socket")
        .arg(&srv.socket)
        .args(["mcp", "--agent", agent, "--load", "shell", "--cwd"])
        .arg(srv.cwd())
        .args(["--http", "127.0.0.1:0"]);
    as_the_user(&mut cmd, srv);
    if let Some(t) = token {
        cmd.env("TOOLSRV_MCP_TOKEN", t);
    }
    let (child, line) = crate::util::spawn_for_first_line(&mut cmd, "toolsrv mcp --http");
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    Bridge { child, addr }
}

/// `snippet` made to run here: the documents' socket paths are `srv`'s, the
/// documents' port is the bridge's, `npx` of the Inspector is the installed one.
fn localize(snippet: &str, srv: &Server, addr: Option<&str>) -> String {
    let sock = srv.socket.display().to_string();
    let mut s = snippet
        .replace("/run/user/1000/toolsrv.sock", &sock)
        .replace("/tmp/toolsrv.sock", &sock);
    if let Some(addr) = addr {
        s = s.replace("127.0.0.1:8765", addr);
    }
    if let Some(i) = inspector_if_there() {
        s = s.replace(
            "npx @modelcontextprotocol/inspector@0.16.8",
            &i.display().to_string(),
        );
    }
    s
}

fn inspector_if_there() -> Option<PathBuf> {
    let p = workspace().join("target/mcp-inspector/node_modules/.bin/mcp-inspector");
    p.exists().then_some(p)
}

/// A shell command of a snippet, run in `dir` with `home` as `$HOME` and the
/// server's home as `$XDG_RUNTIME_DIR` (where its `toolsrv.sock` is).
fn sh(cmd: &str, srv: &Server, home: &Path, dir: &Path, client_dir: &Path) -> Output {
    let mut sh = Command::new("/bin/sh");
    as_the_user(&mut sh, srv)
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("HOME", home)
        .env(
            "PATH",
            format!("{}:{}", client_dir.display(), path_with_toolsrv()),
        )
        // No update checks or telemetry: there is no network here, and each
        // would wait out its timeout (10 s per `claude` command).
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the snippet")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `claude mcp get toolsrv` in `dir`: its health check must connect.
fn assert_claude_connects(claude: &Path, srv: &Server, home: &Path, dir: &Path, what: &str) {
    let o = sh(
        &format!("{} mcp get toolsrv", claude.display()),
        srv,
        home,
        dir,
        claude.parent().expect("dir"),
    );
    let said = text(&o);
    assert!(
        o.status.success() && said.contains("Status: ✔ Connected"),
        "{what}: claude mcp get toolsrv:\n{said}"
    );
}

#[test]
fn every_client_snippet_of_the_docs_is_found() {
    let count = |v: &[(&str, String)], doc: &str| v.iter().filter(|(d, _)| *d == doc).count();
    let claude = commands("claude mcp add");
    assert_eq!(count(&claude, "README.md"), 1, "{claude:?}");
    assert_eq!(count(&claude, "docs/mcp.md"), 2, "{claude:?}");
    assert_eq!(snippets("json", "mcpServers").len(), 2);
    assert_eq!(snippets("toml", "[mcp_servers.toolsrv]").len(), 2);
    assert_eq!(commands("npx @modelcontextprotocol/inspector").len(), 2);
    // The Inspector the docs name is the one .ci/run installs.
    let ci = std::fs::read_to_string(workspace().join(".ci/run")).expect(".ci/run");
    let pinned = ci
        .lines()
        .find_map(|l| l.strip_prefix("INSPECTOR_VERSION="))
        .expect("INSPECTOR_VERSION in .ci/run");
    for (_, c) in commands("npx @modelcontextprotocol/inspector") {
        assert!(
            c.starts_with(&format!("npx @modelcontextprotocol/inspector@{pinned} ")),
            "{c}"
        );
    }
}

#[test]
fn the_claude_code_commands_of_the_docs_add_a_server_that_connects() {
    let Some(claude) = claude() else { return };
    let srv = Server::start(&[]);
    for (doc, cmd) in commands("claude mcp add") {
        let http = cmd.contains("--transport http");
        let b = http.then(|| bridge(&srv, "docs-claude-http", None));
        let cmd = localize(&cmd, &srv, b.as_ref().map(|b| b.addr.as_str()));
        let home = tempfile::tempdir().expect("home");
        let project = tempfile::tempdir().expect("project");
        let o = sh(
            &cmd,
            &srv,
            home.path(),
            project.path(),
            claude.parent().expect("dir"),
        );
        assert!(o.status.success(), "{doc}: {cmd}\n{}", text(&o));
        assert_claude_connects(
            &claude,
            &srv,
            home.path(),
            project.path(),
            &format!("{doc}: {cmd}"),
        );
    }
}

#[test]
fn the_mcp_json_snippets_connect_in_claude_code() {
    let Some(claude) = claude() else { return };
    let srv = Server::start(&[]);
    let client_dir = claude.parent().expect("dir").to_path_buf();
    for (doc, json) in snippets("json", "mcpServers") {
        let json = localize(&json, &srv, None);
        let parsed: Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{doc}: {e}\n{json}"));
        let home = tempfile::tempdir().expect("home");
        let project = tempfile::tempdir().expect("project");
        if parsed["mcpServers"]["toolsrv"]["type"] == "stdio" {
            // Claude Code's own `.mcp.json`, approved as its first-run
            // question would: the project trusted, the server enabled.
            std::fs::write(project.path().join(".mcp.json"), &json).expect(".mcp.json");
            std::fs::create_dir(project.path().join(".claude")).expect(".claude");
            std::fs::write(
                project.path().join(".claude/settings.local.json"),
                r#"{"enabledMcpjsonServers": ["toolsrv"]}"#,
            )
            .expect("settings.local.json");
            let trusted = serde_json::json!({"projects": {
                project.path().display().to_string(): {"hasTrustDialogAccepted": true}}});
            std::fs::write(home.path().join(".claude.json"), trusted.to_string())
                .expect(".claude.json");
        } else {
            // The generic `mcpServers` entry, as Claude Code takes one.
            let entry = parsed["mcpServers"]["toolsrv"].to_string();
            let quoted = format!("'{}'", entry.replace('\'', r"'\''"));
            let o = sh(
                &format!("{} mcp add-json toolsrv {quoted}", claude.display()),
                &srv,
                home.path(),
                project.path(),
                &client_dir,
            );
            assert!(o.status.success(), "{doc}: add-json {entry}\n{}", text(&o));
        }
        assert_claude_connects(
            &claude,
            &srv,
            home.path(),
            project.path(),
            &format!("{doc}: {json}"),
        );
    }
}

/// The tool names a stdio MCP server started by `cmd` lists.
fn list_tools(mut cmd: Command) -> Vec<String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the MCP server");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let answer = |id: u64| loop {
        let line = rx.recv_timeout(WAIT).expect("an answer in time");
        let v: Value = serde_json::from_str(&line).expect("JSON-RPC");
        if v["id"] == id {
            break v;
        }
    };
    for msg in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"docs","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ] {
        writeln!(stdin, "{msg}").expect("write");
    }
    stdin.flush().expect("flush");
    assert!(answer(1)["result"].is_object());
    let list = answer(2);
    let _ = child.kill();
    let _ = child.wait();
    list["result"]["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_codex_config_snippets_parse_and_their_servers_answer() {
    let Some(codex) = codex() else { return };
    let srv = Server::start(&[]);
    for (doc, toml) in snippets("toml", "[mcp_servers.toolsrv]") {
        let home = tempfile::tempdir().expect("home");
        let token = "d0c5".repeat(16);
        let b = toml
            .contains("url =")
            .then(|| bridge(&srv, "docs-codex-http", Some(&token)));
        let toml = localize(&toml, &srv, b.as_ref().map(|b| b.addr.as_str()));
        std::fs::create_dir(home.path().join(".codex")).expect(".codex");
        std::fs::write(home.path().join(".codex/config.toml"), &toml).expect("config.toml");
        let o = Command::new(&codex)
            .args(["mcp", "get", "toolsrv", "--json"])
            .env("HOME", home.path())
            .env("CODEX_HOME", home.path().join(".codex"))
            .stdin(Stdio::null())
            .output()
            .expect("run codex");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{doc}: codex mcp get:\n{}", text(&o));
        let got: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let t = &got["transport"];
        match t["type"].as_str() {
            Some("stdio") => {
                // What Codex would start.
                let mut cmd = Command::new(t["command"].as_str().expect("command"));
                let args: Vec<&str> = t["args"]
                    .as_array()
                    .expect("args")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                as_the_user(&mut cmd, &srv)
                    .args(&args)
                    .env("PATH", path_with_toolsrv());
                for (k, v) in t["env"].as_object().into_iter().flatten() {
                    cmd.env(k, v.as_str().unwrap_or_default());
                }
                let tools = list_tools(cmd);
                assert!(tools.iter().any(|n| n == "shell"), "{doc}: {tools:?}");
                assert!(tools.iter().any(|n| n == "file_grep"), "{doc}: {tools:?}");
            }
            Some("streamable_http") => {
                let url = t["url"].as_str().expect("url");
                let var = t["bearer_token_env_var"]
                    .as_str()
                    .expect("bearer_token_env_var");
                assert_eq!(var, "TOOLSRV_MCP_TOKEN", "{got}");
                // What Codex would send: the token from that variable.
                let status = initialize_over_http(url, &token);
                assert!(status.contains(" 200 "), "{doc}: {url}: {status}");
            }
            other => panic!("{doc}: transport {other:?}: {got}"),
        }
    }
}

/// POSTs `initialize` to `url` with the bearer `token`: the status line.
fn initialize_over_http(url: &str, token: &str) -> String {
    use std::io::Read;
    let host = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("host");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"docs","version":"0"}}}"#;
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or_default().to_string()
}

#[test]
fn the_inspector_commands_of_the_docs_list_and_call() {
    let Some(inspector) = inspector() else { return };
    let srv = Server::start(&[]);
    let dir = tempfile::tempdir().expect("dir");
    for (doc, cmd) in commands("npx @modelcontextprotocol/inspector") {
        let http = cmd.contains("--transport http");
        let b = http.then(|| bridge(&srv, "docs-insp-http", None));
        let cmd = localize(&cmd, &srv, b.as_ref().map(|b| b.addr.as_str()));
        let o = sh(
            &cmd,
            &srv,
            dir.path(),
            dir.path(),
            inspector.parent().expect("dir"),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{doc}: {cmd}\n{}", text(&o));
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        if cmd.contains("tools/call") {
            assert_eq!(v["content"][0]["text"], "hi\n", "{doc}: {v}");
        } else {
            assert_eq!(v["tools"][0]["name"], "shell", "{doc}: {v}");
        }
    }
}
