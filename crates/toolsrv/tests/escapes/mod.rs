//! Escape regression suite: the ways found to widen or step around the sandbox
//! (issue 14), each tried against the real binary, over its socket or its CLI,
//! with real processes and the real kernel's Landlock (the tests run as root,
//! so DAC never refuses anything: every "Permission denied" below is
//! Landlock's).
//!
//! Read top to bottom. Each test's doc comment names the attack, the expected
//! result (an error text or errno), and the finding it guards. Every test
//! fails on the code before issue 14 was fixed.
//!
//! The cases, in order:
//!
//! | hole (issue 14) | tests |
//! |---|---|
//! | 2: request `env` overriding the approved command | `env_overrides_of_a_tools_arguments_are_refused_and_nothing_runs`, `a_dangerous_command_hidden_in_an_env_value_is_refused`, `pending_shows_the_request_env_and_escapes_control_characters` |
//! | 3: a tool rewriting its own policy, tools, secret | `a_tool_can_neither_read_nor_write_the_servers_own_files_under_its_cwd`, `a_tool_cannot_create_the_policy_file_the_server_would_load`, `a_credential_store_under_a_readable_rule_is_unreadable` |
//! | 6: session paths, client trust, closed stdout | `a_session_or_agent_unsafe_in_a_path_is_refused`, `the_client_refuses_a_secret_file_others_can_read_or_another_user_owns`, `the_client_refuses_to_send_its_secret_to_a_server_of_another_uid`, `a_closed_stdout_ends_the_cli_quietly` |
//! | 1, 4, 5, 6 (kernel side): the cwd rename race, set-id files, port-list side doors, System V IPC | [`kernel`] |
//!
//! Containment escapes (processes outliving their run, limits) are in
//! `containment.rs`.

use std::collections::BTreeMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use toolsrv_wire::{Body, OREAD};

use crate::procs_util::{bg, call, error_text, load, ok_text, shell_session};
use crate::util::{cli, example, toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// What Landlock makes a refused file operation print (EACCES).
const EACCES: &str = "Permission denied";

use crate::sandbox::refused;

/// The refusal of a reserved `env.NAME` (docs/protocol.md, "Requests and results").
fn reserved(name: &str) -> String {
    format!("environment variable \"{name}\" cannot be set by a request")
}

/// Single-quote `s` for sh.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// `proc/list` as JSON.
fn proc_list(c: &mut Raw) -> Value {
    serde_json::from_slice(&c.read_file("proc/list")).expect("proc/list JSON")
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

// ---------------------------------------------------------------------------
// Hole 2: the approved command is not the command that runs.
// ---------------------------------------------------------------------------

/// Attack (issue 14, hole 2): a request sets `env.ARG_COMMAND`, `env.TOOL_ARGS`,
/// `env.LD_PRELOAD` or `env.BASH_ENV`, which replace what a tool reads as its
/// arguments or change how its programs start: `toolsrv pending` shows
/// `shell --command 'touch visible'`, the human approves, and the smuggled
/// command runs unsandboxed.
///
/// Expected: the error result `environment variable "<NAME>" cannot be set by
/// a request`, for a sandboxed call and for a bypass request alike, before
/// anything runs or is queued: neither the visible command's marker nor the
/// smuggled one's exists, and no process was created (nothing awaits approval).
#[test]
fn env_overrides_of_a_tools_arguments_are_refused_and_nothing_runs() {
    let (srv, mut c) = shell_session(&[]);
    let cwd = srv.cwd().to_path_buf();
    let smuggled = cwd.join("smuggled");
    let bash_env = cwd.join("bash_env.sh");
    std::fs::write(&bash_env, format!("touch {}\n", q(&smuggled))).expect("bash_env script");
    let smuggle_cmd = format!("touch {}", q(&smuggled));
    let tool_args = serde_json::json!({ "command": smuggle_cmd }).to_string();
    let bash_env_s = bash_env.display().to_string();
    let cases: [(&str, &str); 4] = [
        ("ARG_COMMAND", &smuggle_cmd),
        ("TOOL_ARGS", &tool_args),
        ("LD_PRELOAD", "/nonexistent/libsmuggled.so"),
        ("BASH_ENV", &bash_env_s),
    ];
    for (name, value) in cases {
        let visible = cwd.join(format!("visible-{name}"));
        let command = format!("touch {}", q(&visible));
        let key = format!("env.{name}");
        let fields = [
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", command.as_str()),
            (key.as_str(), value),
        ];
        assert_eq!(error_text(&call(&mut c, &fields)), reserved(name));
        let mut with_bypass = fields.to_vec();
        with_bypass.push(("bypass", "true"));
        assert_eq!(bg(&mut c, &with_bypass), Err(reserved(name)), "{name}");
        assert!(!visible.exists(), "{name}: the visible command ran");
        assert!(!smuggled.exists(), "{name}: the smuggled command ran");
    }
    assert_eq!(
        proc_list(&mut c),
        serde_json::json!([]),
        "a process was created"
    );
}

/// Attack (issue 14, hole 2): the dangerous-command validation only looked at
/// the arguments, so a command hidden in an environment variable and run by
/// the visible one (`eval "$PAYLOAD"`) skipped it.
///
/// Expected: `command refused by validation rule "mkfs"` for the sandboxed
/// call and the bypass request, nothing runs (the marker the command would
/// touch first is absent), nothing is queued. (Validation is advisory; Landlock
/// is the boundary. This guards that it sees what a request adds.)
#[test]
fn a_dangerous_command_hidden_in_an_env_value_is_refused() {
    let (srv, mut c) = shell_session(&[]);
    let marker = srv.cwd().join("ran");
    let command = format!("touch {}; eval \"$PAYLOAD\"", q(&marker));
    let fields = [
        ("tool", "shell"),
        ("agent", "a1"),
        ("command", command.as_str()),
        ("env.PAYLOAD", "mkfs.ext4 /nonexistent/toolsrv-escape-test"),
    ];
    let text = error_text(&call(&mut c, &fields));
    assert!(
        text.starts_with("command refused by validation rule \"mkfs\""),
        "{text}"
    );
    let mut with_bypass = fields.to_vec();
    with_bypass.push(("bypass", "true"));
    let refused = bg(&mut c, &with_bypass).expect_err("the bypass request was queued");
    assert!(
        refused.starts_with("command refused by validation rule \"mkfs\""),
        "{refused}"
    );
    assert!(!marker.exists(), "the command ran");
    assert_eq!(proc_list(&mut c), serde_json::json!([]));
}

/// Attack (issue 14, hole 2): `toolsrv pending` showed only the command, so
/// the human could not see the variables a request added, and it printed
/// `\r` and escape sequences raw: a request could rewrite the line the human
/// reads (`\r` back to the start, ESC `[2K` to erase, OSC to retitle).
///
/// Expected: `pending` prints `request env: NAME=value` for each `env.NAME`
/// field, and every control character of every field escaped (`\r`, `\e`,
/// `\x07`): its output holds no byte below 0x20 but newlines. `--json`
/// carries `request_env` with the exact values, control characters escaped
/// as JSON escapes.
#[test]
fn pending_shows_the_request_env_and_escapes_control_characters() {
    let (srv, mut c) = shell_session(&[]);
    let command = "echo safe\r\u{1b}[2Kcat /etc/shadow";
    let value = "a\rb\u{1b}]0;pwned\u{7}c";
    let pid = bg(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", command),
            ("env.FOO", value),
            ("bypass", "true"),
        ],
    )
    .expect("bypass request");
    // Wait (on the pending file itself) until the request is queued.
    let mut observer = srv.attached();
    observer.open(7, "bypass/pending", OREAD);
    match observer.rpc(Body::Tread {
        fid: 7,
        offset: 0,
        count: 65536,
    }) {
        Body::Rread { data } => assert!(!data.is_empty()),
        b => panic!("reading bypass/pending: {b:?}"),
    }

    let out = cli(&srv.socket)
        .env("TOOLSRV_SECRET", "unused-under-no-auth")
        .arg("pending")
        .output()
        .expect("run pending");
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !out.stdout.iter().any(|&b| b < 0x20 && b != b'\n'),
        "raw control characters reached the terminal: {text:?}"
    );
    assert!(text.contains(&format!("pid {pid}")), "{text}");
    assert!(text.contains(r"echo safe\r\e[2Kcat /etc/shadow"), "{text}");
    assert!(
        text.contains(r"request env: FOO=a\rb\e]0;pwned\x07c"),
        "{text}"
    );

    let out = cli(&srv.socket)
        .env("TOOLSRV_SECRET", "unused-under-no-auth")
        .args(["--json", "pending"])
        .output()
        .expect("run pending --json");
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(!out.stdout.iter().any(|&b| b < 0x20 && b != b'\n'));
    let line = String::from_utf8_lossy(&out.stdout);
    let req: Value = serde_json::from_str(line.trim_end()).expect("pending JSON");
    let request_env: BTreeMap<String, String> =
        serde_json::from_value(req["request_env"].clone()).expect("request_env");
    assert_eq!(
        request_env,
        BTreeMap::from([("FOO".to_string(), value.to_string())])
    );
    assert!(
        req["command"].as_str().is_some_and(|c| c.contains(command)),
        "{req}"
    );
}

// ---------------------------------------------------------------------------
// Hole 3: a tool rewrites its own policy (or tools, or reads the secret).
// ---------------------------------------------------------------------------

/// The server's own files in a `--cwd` that holds them all, and their content.
struct OwnFiles {
    srv: Server,
    conn: Raw,
    token: String,
    cwd: PathBuf,
}

const SECRET: &str = "escape-suite-secret-71c2";

impl OwnFiles {
    /// A server started in `cwd` (as a server started in `$HOME` with the
    /// default `--cwd` would be), with `--cwd` holding its policy file
    /// (`cfg/sandbox.yaml`, written by `toolsrv init`), the profiles directory
    /// (`cfg/sandbox/`), the tools directory (`cfg/tools/`), the socket and
    /// `<socket>.secret` (mode 0600); auth on.
    fn start() -> OwnFiles {
        let dir = tempfile::tempdir().expect("tempdir");
        let cwd = std::fs::canonicalize(dir.path()).expect("canonical");
        let init = Command::new(toolsrv_bin())
            .args(["init", "--dir"])
            .arg(cwd.join("cfg"))
            .output()
            .expect("toolsrv init");
        assert!(init.status.success(), "{}", stderr_of(&init));
        std::fs::create_dir(cwd.join("cfg/sandbox")).expect("profiles dir");
        std::fs::copy(
            cwd.join("cfg/sandbox.yaml"),
            cwd.join("cfg/sandbox/strict.yaml"),
        )
        .expect("profile");
        std::fs::create_dir(cwd.join("work")).expect("work dir");
        let secret = cwd.join("toolsrv.sock.secret");
        std::fs::write(&secret, SECRET).expect("secret");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let policy = cwd.join("cfg/sandbox.yaml").display().to_string();
        let tools = cwd.join("cfg/tools").display().to_string();
        let srv = Launch::new()
            .cwd_dir(dir)
            .listen(&cwd.join("toolsrv.sock"))
            .log(&cwd.join("server.log"))
            .args(["--sandbox", &policy, "--tools", &tools])
            .start();
        let (mut conn, token) = srv.authed(SECRET);
        load(&mut conn, "a1", "shell");
        OwnFiles {
            srv,
            conn,
            token,
            cwd,
        }
    }

    /// Run `command` with the built-in shell tool, sandboxed.
    fn sh(&mut self, command: &str) -> Value {
        let token = self.token.clone();
        call(
            &mut self.conn,
            &[
                ("token", &token),
                ("tool", "shell"),
                ("agent", "a1"),
                ("command", command),
            ],
        )
    }

    /// The protected files and their content now.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        [
            "cfg/sandbox.yaml",
            "cfg/sandbox/strict.yaml",
            "cfg/tools/shell",
            "toolsrv.sock.secret",
        ]
        .iter()
        .map(|rel| {
            let p = self.cwd.join(rel);
            let content = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, content)
        })
        .collect()
    }
}

/// Attack (issue 14, hole 3): with the server's `--cwd` holding its own
/// files (a server started in `$HOME`), the `{CWD}` rwx rule covers them: a
/// tool writes `rwx: ["/"]` into the policy (hot-reloaded on the next call),
/// adds a profile or a tool, rewrites the `shell` tool, replaces the socket,
/// or reads `<socket>.secret` and approves its own bypass requests.
///
/// Expected (docs/policy-format.md, "Protected paths"): the policy, profiles and tools stay readable and
/// are read-only; the secret reads as empty; every write, creation, removal
/// and rename fails (EROFS or EBUSY in the view, EACCES where Landlock
/// carves); afterwards each file's content is unchanged, the socket is still
/// there, the planted profile does not exist (`unknown sandbox profile
/// "evil"`), and tools still work in the rest of the cwd, the cwd's own
/// directory included.
#[test]
fn a_tool_can_neither_read_nor_write_the_servers_own_files_under_its_cwd() {
    let mut f = OwnFiles::start();
    let before = f.snapshot();
    let r = f.sh("cat toolsrv.sock.secret");
    assert!(!error_or_ok(&r).contains(SECRET), "{r}");
    let writes = [
        "printf 'filesystem:\\n  rwx: [\"/\"]\\n' > cfg/sandbox.yaml",
        "printf 'filesystem:\\n  rwx: [\"/\"]\\n' > cfg/sandbox/evil.yaml",
        "echo 'echo pwned' >> cfg/tools/shell",
        "printf 'command: \"true\"\\n' > cfg/tools/evil.yaml",
        "printf attacker > toolsrv.sock.secret",
        "rm toolsrv.sock",
        "rm cfg/sandbox.yaml",
        "mv cfg/tools cfg/tools.old",
        "mv cfg cfg.old",
    ];
    for cmd in writes {
        let r = f.sh(cmd);
        let text = error_text(&r);
        assert!(refused(&text), "{cmd}: {text}");
        assert!(!text.contains(SECRET), "{cmd}: {text}");
    }
    assert_eq!(f.snapshot(), before, "a protected file changed");
    assert!(f.srv.socket.exists(), "the socket was removed");
    for planted in ["cfg/sandbox/evil.yaml", "cfg/tools/evil.yaml"] {
        assert!(!f.cwd.join(planted).exists(), "{planted} was created");
    }
    let token = f.token.clone();
    let r = call(
        &mut f.conn,
        &[
            ("token", &token),
            ("tool", "shell"),
            ("agent", "a1"),
            ("sandbox", "evil"),
            ("command", "true"),
        ],
    );
    assert_eq!(error_text(&r), "unknown sandbox profile \"evil\"");
    // The rest of the cwd is still the tools' to use, its root included.
    let script =
        "echo ok > work/ok.txt && cat work/ok.txt && echo top > top.txt && rm top.txt && ls";
    assert_eq!(
        ok_text(&f.sh(script)),
        "ok\ncfg\nserver.log\ntoolsrv.sock\ntoolsrv.sock.secret\ntoolsrv.sock.state\nwork\n"
    );
    let log = f.srv.log_text();
    assert!(log.contains("filesystem view built"), "{log}");
}

/// The text of a result, error or not.
fn error_or_ok(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Attack (issue 14, hole 3): the policy file does not exist yet (the
/// built-in policy is in use and the default path is watched), and the
/// default path lies under `{CWD}`: a tool creates it with `rwx: ["/"]`, and
/// the server loads it on the next call.
///
/// Expected: the file does not survive: in the filesystem view the server's
/// guard moves the tool's `ollie/` to quarantine before the run is reported
/// ended (and before any policy is read again); where Landlock carves,
/// creating it fails (EACCES). No placeholder is made on the host, and the
/// next call is confined as before (a file outside every rule stays
/// unreadable).
#[test]
fn a_tool_cannot_create_the_policy_file_the_server_would_load() {
    let cwd = tempfile::tempdir().expect("cwd");
    let outside = tempfile::tempdir().expect("outside");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "outside-secret").expect("secret");
    let cfg = cwd.path().join("ollie");
    let cfg_s = cfg.display().to_string();
    let srv = Launch::new()
        .cwd_dir(cwd)
        .env("OLLIE_CFG_PATH", &cfg_s)
        .arg("--no-auth")
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    let sh =
        |c: &mut Raw, cmd: &str| call(c, &[("tool", "shell"), ("agent", "a1"), ("command", cmd)]);
    let plant = "mkdir -p ollie && printf 'filesystem:\\n  rwx: [\"/\"]\\n' > ollie/sandbox.yaml";
    let _ = sh(&mut c, plant);
    let planted = cfg.join("sandbox.yaml");
    assert!(!planted.exists(), "the tool created {}", planted.display());
    assert!(
        !cfg.exists(),
        "{} stayed (or a placeholder was made)",
        cfg.display()
    );
    let text = error_text(&sh(&mut c, &format!("cat {}", q(&secret))));
    assert!(
        crate::sandbox::refused(&text) && !text.contains("outside-secret"),
        "{text}"
    );
}

/// Attack (issue 14, hole 3): a server whose `--cwd` is `$HOME` (the natural
/// default on a remote host), or any policy with a readable rule on `{HOME}`,
/// handed the user's credential stores to every tool: ssh keys, `.netrc`,
/// cloud and registry tokens.
///
/// Expected: under `ro: ["{HOME}"]` an ordinary file in `$HOME` is readable,
/// while `~/.ssh/id_ed25519`, `~/.netrc`, `~/.aws/credentials`,
/// `~/.docker/config.json` and `~/.config/gh/hosts.yml` fail with EACCES
/// (`Permission denied`), their content never shown. (Names stay listable:
/// the list-only rule that keeps `ls ~` working is inherited by the
/// directories below it; see docs/sandbox-policy.md.)
#[test]
fn a_credential_store_under_a_readable_rule_is_unreadable() {
    let home = tempfile::tempdir().expect("home");
    let h = std::fs::canonicalize(home.path()).expect("canonical");
    let stores = [
        ".ssh/id_ed25519",
        ".netrc",
        ".aws/credentials",
        ".docker/config.json",
        ".config/gh/hosts.yml",
    ];
    for rel in stores {
        let p = h.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, format!("credential-{rel}")).expect("write");
    }
    std::fs::write(h.join("notes.txt"), "just notes").expect("notes");
    let outside = tempfile::tempdir().expect("outside");
    let policy = outside.path().join("sandbox.yaml");
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ["/etc", "{HOME}"],
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
        },
        "advanced": {"add_exec": true},
    });
    std::fs::write(&policy, rules.to_string()).expect("policy");
    let policy_s = policy.display().to_string();
    let home_s = h.display().to_string();
    let srv = Launch::new()
        .env("HOME", &home_s)
        .args(["--no-auth", "--sandbox", &policy_s])
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    let mut sh = |cmd: String| {
        call(
            &mut c,
            &[("tool", "shell"), ("agent", "a1"), ("command", &cmd)],
        )
    };
    assert_eq!(
        ok_text(&sh(format!("cat {}", q(&h.join("notes.txt"))))),
        "just notes"
    );
    for rel in stores {
        // Refused (Landlock), or masked by the view: an empty file, or
        // nothing at all inside an empty directory.
        let r = sh(format!("cat {}", q(&h.join(rel))));
        let text = error_or_ok(&r);
        let masked = text.is_empty() || text.contains("No such file or directory");
        assert!(masked || text.contains(EACCES), "{rel}: {text}");
        assert!(!text.contains("credential-"), "{rel}: {text}");
    }
}

// ---------------------------------------------------------------------------
// Hole 6: leftovers Landlock does not cover.
// ---------------------------------------------------------------------------

/// Attack (issue 14, hole 6): a `session` of `..` (or with a `/`) made the
/// background-completion message go to `s/../prompt` in the Ollie
/// namespace; an `agent` of `..` is the same kind of value.
///
/// Expected: the error result `invalid session "..": must not be "." or
/// ".."` (likewise for `x/../y`, an empty session, and an agent of `..`),
/// for sync and background requests, and nothing runs.
#[test]
fn a_session_or_agent_unsafe_in_a_path_is_refused() {
    let (srv, mut c) = shell_session(&[]);
    let marker = srv.cwd().join("ran");
    let command = format!("touch {}", q(&marker));
    let cases = [
        (
            "session",
            "..",
            r#"invalid session "..": must not be "." or "..""#,
        ),
        (
            "session",
            "x/../y",
            r#"invalid session "x/../y": must not contain "/""#,
        ),
        ("session", "", r#"invalid session "": must not be empty"#),
        (
            "agent",
            "..",
            r#"invalid agent ID "..": must not be "." or "..""#,
        ),
    ];
    for (key, value, expected) in cases {
        let mut fields = vec![("tool", "shell"), ("command", command.as_str())];
        if key == "session" {
            fields.push(("agent", "a1"));
        }
        fields.push((key, value));
        assert_eq!(error_text(&call(&mut c, &fields)), expected);
        assert_eq!(bg(&mut c, &fields), Err(expected.to_string()));
    }
    assert!(!marker.exists(), "the command ran");
}

/// Attack (issue 14, hole 6): the client trusted a secret file of any mode
/// and owner: a `<socket>.secret` that others can read (0644) lets any local
/// user authenticate, and one another user owns lets that user choose the
/// secret the client sends.
///
/// Expected: the CLI exits 1 naming the file and its mode (`0644`) or owner
/// (`owned by uid 65534`), and never sends the secret: the server has still
/// stored none, so a different secret authenticates afterwards (the first
/// secret a server receives is the one it keeps).
#[test]
fn the_client_refuses_a_secret_file_others_can_read_or_another_user_owns() {
    let srv = Server::start(&[]);
    let file = PathBuf::from(format!("{}.secret", srv.socket.display()));
    std::fs::write(&file, "leaked-secret").expect("secret");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = cli(&srv.socket).arg("ps").output().expect("run ps");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains(&file.display().to_string()) && err.contains("0644"),
        "{err}"
    );

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let c_path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).expect("path");
    // Safety: chown(2) of a file we created.
    assert_eq!(unsafe { libc::chown(c_path.as_ptr(), 65534, 65534) }, 0);
    let out = cli(&srv.socket).arg("ps").output().expect("run ps");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("owned by uid 65534"),
        "{}",
        stderr_of(&out)
    );

    let (_, token) = srv.authed("a-different-secret");
    assert_eq!(token.len(), 64, "the server had stored the refused secret");
}

/// Attack (issue 14, hole 6): the client sent its secret to whatever listened
/// at the socket path: another user who binds there first (or replaces a
/// stale socket) collects it.
///
/// Expected: before authenticating, the client reads the server's uid
/// (`SO_PEERCRED`); a server of another uid that is not root is refused:
/// the CLI exits 1 with `the server runs as uid 65534`, and the impostor saw
/// the version exchange but never the secret.
#[test]
fn the_client_refuses_to_send_its_secret_to_a_server_of_another_uid() {
    let impostor = example("otheruid");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let socket = dir.path().join("s.sock");
    let mut child = Command::new(&impostor)
        .arg("65534")
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the impostor");
    assert!(
        wait_until(WAIT, || socket.exists()),
        "the impostor never listened"
    );
    let out = cli(&socket)
        .env("TOOLSRV_SECRET", "impostor-must-not-see-this")
        .arg("ps")
        .output()
        .expect("run ps");
    // Safety: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let mut seen = String::new();
    if let Some(mut o) = child.stdout.take() {
        use std::io::Read;
        let _ = o.read_to_string(&mut seen);
    }
    assert!(
        !seen.contains("impostor-must-not-see-this"),
        "the secret reached the impostor: {seen}"
    );
    assert!(seen.contains("Tversion"), "the client never talked: {seen}");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("the server runs as uid 65534"),
        "{}",
        stderr_of(&out)
    );
}

/// Attack (issue 14, hole 6): `toolsrv ps | head -1` panicked (`failed
/// printing to stdout: Broken pipe`) once `head` had exited; any command
/// writing to a closed stdout did.
///
/// Expected: with stdout a pipe whose reader is already gone (what `head -1`
/// leaves behind; EPIPE on the first write), `ps`, `--json ps`, `all`,
/// `info` and `call` end quietly: exit 0, no panic, no error. The literal
/// `toolsrv ps | head -1` prints the header and no panic.
#[test]
fn a_closed_stdout_ends_the_cli_quietly() {
    let (srv, mut c) = shell_session(&[]);
    for i in 0..3 {
        let _ = call(
            &mut c,
            &[
                ("tool", "shell"),
                ("agent", "a1"),
                ("command", &format!("echo {i}")),
            ],
        );
    }
    let runs: [&[&str]; 5] = [
        &["ps"],
        &["--json", "ps"],
        &["all"],
        &["info"],
        &["call", "shell", "command=echo hi"],
    ];
    for args in runs {
        let mut fds = [0; 2];
        // Safety: pipe(2) fills the two descriptors of an array we own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // Safety: both descriptors are fresh and owned here only.
        let (reader, writer) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(reader);
        let out = cli(&srv.socket)
            .env("TOOLSRV_SECRET", "unused-under-no-auth")
            .args(args)
            .stdout(Stdio::from(writer))
            .output()
            .expect("run the CLI");
        let err = stderr_of(&out);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{} ps | head -1", q(Path::new(toolsrv_bin()))))
        .env("TOOLSRV_SOCKET", &srv.socket)
        .env("TOOLSRV_SECRET", "unused-under-no-auth")
        .output()
        .expect("run the pipeline");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("   PID"),
        "{out:?}"
    );
    assert!(!stderr_of(&out).contains("panicked"), "{}", stderr_of(&out));
}

mod kernel;
