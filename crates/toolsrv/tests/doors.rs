//! No door out but the rules (issue 33, items 2, 3, 4, 6, 7): what a tool
//! reaches besides the files its rules grant. Each attack test is one that
//! succeeded against the code before issue 33 (8877a1f): run it with
//! `TOOLSRV_TEST_BIN=<that build's toolsrv>` to see it fail. The servers run
//! as root, so DAC refuses nothing: every refusal is the view's, Landlock's
//! or the seccomp filter's.
//!
//! The project of most tests is a directory holding the sockets in `.run/`
//! that is both the servers' `--cwd` (the built-in policy makes it rwx) and
//! `$HOME` of the servers and of the human's client, so the per-user
//! directory (`~/.local/state/toolsrv`) lies under a writable rule too: the
//! hardest case for hiding it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::Value;

use crate::procs_util::{call, load};
use crate::util::{cli, example, toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// A canonical temporary directory.
fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = std::fs::canonicalize(d.path()).expect("canonical");
    (d, p)
}

/// A project with `.run/` for the sockets; it is also `$HOME`.
fn project() -> (tempfile::TempDir, PathBuf) {
    let (d, p) = tmp();
    std::fs::create_dir(p.join(".run")).expect(".run");
    (d, p)
}

/// A server in project `p` listening on `.run/<name>`, with `$HOME` the
/// project and no XDG variables (the per-user directory is
/// `<p>/.local/state/toolsrv`).
fn launch(p: &Path, name: &str) -> Launch {
    Launch::new()
        .cwd(p)
        .listen(&p.join(".run").join(name))
        .env("HOME", p)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME")
}

/// The human's `toolsrv` client of `socket`, in project `p` (its `$HOME`).
fn client(p: &Path, socket: &Path) -> Command {
    let mut c = cli(socket);
    c.current_dir(p)
        .env("HOME", p)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME");
    c
}

/// `toolsrv call shell command=<cmd>` through the human's client: whether it
/// succeeded, and stdout followed by stderr.
fn human_call(p: &Path, socket: &Path, cmd: &str) -> (bool, String) {
    let out = client(p, socket)
        .args(["call", "shell"])
        .arg(format!("command={cmd}"))
        .output()
        .expect("run toolsrv call");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The secret the human's client generated for `socket` (whichever place
/// it chose: beside the socket before issue 33, the per-user directory
/// since).
fn generated_secret(p: &Path, socket: &Path) -> String {
    let legacy = toolsrv_client::secret::default_secret_path(socket);
    let user_dir = p.join(".local/state/toolsrv");
    let file = if legacy.exists() {
        legacy
    } else {
        toolsrv_client::secret_store::secret_path(&user_dir, socket)
    };
    let s = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("no generated secret at {}: {e}", file.display()));
    let s = s.trim().to_string();
    assert_eq!(s.len(), 64, "{s}");
    s
}

/// A result's text and whether it is an error.
fn out(r: &Value) -> (bool, String) {
    (
        r["isError"] == true,
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// Runs `cmd` with the shell tool as agent `a1` on `c` (loaded already).
fn sh(c: &mut Raw, cmd: &str) -> (bool, String) {
    out(&call(
        c,
        &[("tool", "shell"), ("agent", "a1"), ("command", cmd)],
    ))
}

/// A `--no-auth` session: the server and a connection with `shell` loaded.
fn no_auth(launch: Launch) -> (Server, Raw) {
    let srv = launch.arg("--no-auth").start();
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    (srv, c)
}

/// Copies `bin` into `dir` as `name`, executable; its path.
fn install(bin: &Path, dir: &Path, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(bin, &dst).expect("copy");
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dst
}

/// The first request of `bypass/pending`, read as an observer.
fn first_pending(c: &mut Raw) -> Value {
    let fid = c.fid();
    c.open(fid, "bypass/pending", toolsrv_wire::OREAD);
    let tag = c.send_read(fid, 65536);
    loop {
        let f = c.recv();
        if f.tag != tag {
            continue;
        }
        match f.body {
            toolsrv_wire::Body::Rread { data } => {
                let line = String::from_utf8(data).expect("utf8");
                return serde_json::from_str(line.trim_end()).expect("pending JSON");
            }
            b => panic!("expected a pending request, got {b:?}"),
        }
    }
}

/// Single-quoted for sh.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Attack (issue 33, critical): with the socket in a directory under a rule
/// (`.run/` in the project), the client writes `<socket>.secret` on its
/// first use, after the server built its view: the first call's tool read
/// it, and whoever has the secret approves bypass requests.
///
/// Expected: the secret the first use generated is nowhere the tool looks:
/// not beside the socket, not in the per-user directory (which lies under
/// the project's rwx rule here, and is hidden whole from the start).
#[test]
fn the_first_call_after_the_clients_first_use_cannot_read_the_secret() {
    let (_d, p) = project();
    let srv = launch(&p, "s.sock").start();
    let (ok, text) = human_call(
        &p,
        &srv.socket,
        "cat .run/s.sock.secret 2>&1; find \"$HOME/.local/state/toolsrv\" -type f -exec cat {} + 2>&1; ls -A \"$HOME/.local/state/toolsrv\"; echo end",
    );
    assert!(ok, "{text}");
    let secret = generated_secret(&p, &srv.socket);
    assert!(!text.contains(&secret), "the tool read the secret: {text}");
    assert!(
        !toolsrv_client::secret::default_secret_path(&srv.socket).exists(),
        "the secret was written beside the socket"
    );
}

/// Attack (issue 33, critical): two servers of one user on one project (one
/// per agent, sockets in `.run/`). A tool of server A read B's
/// `.run/b.sock.secret` and connected to `.run/b.sock`: A's view hid only
/// A's own files.
///
/// Expected: within a few rescans of B's start, B's socket shows in A's view
/// as something that is not a socket, connecting to it fails, and B's
/// secret (wherever the client put it) never reaches A's tool.
#[test]
fn a_tool_of_one_server_can_neither_read_anothers_secret_nor_connect_to_its_socket() {
    let (_d, p) = project();
    let a = launch(&p, "a.sock").start();
    let b = launch(&p, "b.sock").start();
    let (ok, text) = human_call(&p, &a.socket, "true");
    assert!(ok, "{text}");
    let info = client(&p, &b.socket)
        .arg("info")
        .output()
        .expect("toolsrv info");
    assert!(info.status.success(), "{info:?}");
    let b_secret = generated_secret(&p, &b.socket);
    let mut last = String::new();
    let hidden = wait_until(WAIT, || {
        let (_, t) = human_call(
            &p,
            &a.socket,
            "if [ -S .run/b.sock ]; then echo socket; else echo hidden; fi",
        );
        last = t;
        last.contains("hidden")
    });
    assert!(hidden, "B's socket stayed a socket in A's view: {last}");
    let (ok, text) = human_call(
        &p,
        &a.socket,
        "/usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\".run/b.sock\"); print(\"connected\")'",
    );
    assert!(!ok && !text.contains("connected"), "{text}");
    let (_, text) = human_call(
        &p,
        &a.socket,
        "cat .run/b.sock.secret 2>&1; find . -type f -exec cat {} + 2>/dev/null; echo end",
    );
    assert!(text.contains("end"), "{text}");
    assert!(
        !text.contains(&b_secret),
        "A's tool read B's secret: {text}"
    );
}

/// Attack (issue 33, critical): a tool of server A that reaches server B's
/// socket by a name B does not know (here a hard link the test makes; on a
/// host, any path to the socket no server registered) approved its own
/// bypass request there: B refused only its own descendants as observers.
///
/// Expected: B refuses A's tool as an observer (`permission denied` for
/// `pending` and `approve`), the request stays pending and nothing runs;
/// the human's approval afterwards still works. Both ways B tells A's run:
/// with A's runs in cgroups (the run group), and with A's runs in PID
/// namespaces, no cgroup (the registry and the ancestry alone).
#[test]
fn a_tool_of_one_server_cannot_get_another_to_approve_a_bypass() {
    approval_attack(None);
    approval_attack(Some("pidns"));
}

/// [`a_tool_of_one_server_cannot_get_another_to_approve_a_bypass`] with A's
/// containment forced to `containment` (`TOOLSRV_CONTAINMENT`).
fn approval_attack(containment: Option<&str>) {
    let (_d, p) = project();
    let (_r, run) = tmp();
    let b_launch = Launch::new()
        .cwd(&p)
        .listen(&p.join(".run/b.sock"))
        .env("XDG_RUNTIME_DIR", &run);
    let (b, mut human) = no_auth(b_launch);
    let mut a_launch = Launch::new()
        .cwd(&p)
        .listen(&p.join(".run/a.sock"))
        .env("XDG_RUNTIME_DIR", &run);
    if let Some(c) = containment {
        a_launch = a_launch.env("TOOLSRV_CONTAINMENT", c);
    }
    let (_a, mut tool) = no_auth(a_launch);
    let link = p.join("b-link.sock");
    std::fs::hard_link(&b.socket, &link).expect("a second name for B's socket");
    let client = install(toolsrv_bin(), &p, "toolsrv-client");
    let marker = p.join("approved.txt");
    let payload = toolsrv_protocol::encode_payload(&[
        ("tool", "shell"),
        ("agent", "a1"),
        ("command", &format!("echo ran > {}", q(&marker))),
        ("bypass", "true"),
    ]);
    let pid: u64 = human
        .ask("proc/new.bg", &payload)
        .expect("bypass request")
        .parse()
        .expect("pid");
    let pending = first_pending(&mut human);
    let id = pending["id"].as_str().expect("request id").to_string();
    let (_, pend) = sh(
        &mut tool,
        &format!("{} --socket b-link.sock pending 2>&1", q(&client)),
    );
    assert!(
        pend.contains("permission denied"),
        "{containment:?}: {pend}"
    );
    assert!(
        !pend.contains(&id),
        "A's tool read B's pending list: {pend}"
    );
    let (err, text) = sh(
        &mut tool,
        &format!("{} --socket b-link.sock approve {id} 2>&1", q(&client)),
    );
    assert!(
        err && text.contains("permission denied"),
        "{containment:?}: {text}"
    );
    let stat = human.json(&format!("proc/{pid}/stat"));
    assert_eq!(stat["state"], "awaiting_approval", "{stat}");
    assert!(!marker.exists(), "the bypass ran");
    human
        .write(
            "bypass/resolve",
            &serde_json::json!({"id": id, "approve": true}).to_string(),
        )
        .expect("the human approves");
    assert!(
        wait_until(WAIT, || marker.exists()),
        "the human's approval did not run the request"
    );
}

/// Attack (issue 33, medium): every server of a user shared
/// `<TMPDIR>/toolsrv-<uid>`: a tool of one server read and changed what a
/// tool of another left there, and nothing was ever cleaned.
///
/// Expected: two servers with one `TMPDIR` give their tools different
/// directories, and a tool of one can neither list, read nor change the
/// other's; a server that stops removes its directory; one killed leaves
/// its directory, which the next server to start removes.
#[test]
fn two_servers_with_one_tmpdir_neither_see_nor_change_each_others_temporary_files() {
    let (_t, t) = tmp();
    let with_tmp = |l: Launch| l.env("TMPDIR", &t);
    let (mut a, mut ca) = no_auth(with_tmp(Launch::new()));
    let (mut b, mut cb) = no_auth(with_tmp(Launch::new()));
    let (err, a_tmp) = sh(
        &mut ca,
        "printf a-secret > \"$TMPDIR/a.txt\" && echo \"$TMPDIR\"",
    );
    assert!(!err, "{a_tmp}");
    let a_tmp = PathBuf::from(a_tmp.trim());
    let (_, b_tmp) = sh(&mut cb, "echo \"$TMPDIR\"");
    let b_tmp = PathBuf::from(b_tmp.trim());
    assert_ne!(a_tmp, b_tmp, "one temporary directory for both servers");
    assert!(
        a_tmp.starts_with(&t) && b_tmp.starts_with(&t),
        "{a_tmp:?} {b_tmp:?}"
    );
    let (_, text) = sh(
        &mut cb,
        &format!(
            "cat {a}/a.txt; ls -A {a}; echo changed >> {a}/a.txt; rm -f {a}/a.txt; ls -A {parent}; echo end",
            a = q(&a_tmp),
            parent = q(a_tmp.parent().expect("parent")),
        ),
    );
    assert!(!text.contains("a-secret"), "B's tool read A's file: {text}");
    assert_eq!(
        std::fs::read_to_string(a_tmp.join("a.txt")).expect("A's file"),
        "a-secret",
        "B's tool changed A's file: {text}"
    );
    // A stops: its directory goes with it.
    a.stop(libc::SIGTERM);
    assert!(!a_tmp.exists(), "a stopped server left {}", a_tmp.display());
    // B is killed: the next server with this TMPDIR removes what it left.
    b.kill();
    assert!(b_tmp.exists());
    let _c = with_tmp(Launch::new()).start();
    assert!(
        wait_until(WAIT, || !b_tmp.exists()),
        "the next server left {}",
        b_tmp.display()
    );
}

/// A server started with a session keyring of its own (`name`) holding a
/// `user` key `key` = `payload`, as a shell's would.
fn with_session_keyring(launch: Launch, name: &str, key: &str, payload: &str) -> Launch {
    use std::os::unix::process::CommandExt;
    let name = std::ffi::CString::new(name).expect("name");
    let key = std::ffi::CString::new(key).expect("key");
    let payload = payload.as_bytes().to_vec();
    launch.tweak(move |cmd| {
        // Safety: the closure only makes raw system calls on data prepared
        // before the fork (no allocation, no lock).
        unsafe {
            cmd.pre_exec(move || {
                let join = libc::syscall(libc::SYS_keyctl, 1, name.as_ptr());
                if join < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let added = libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    key.as_ptr(),
                    payload.as_ptr(),
                    payload.len(),
                    -3i64,
                );
                if added < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
}

/// Attack (issue 33, high): runs inherited the server's session keyring
/// (the human's, when the server was started from a shell): a tool read a
/// `user` key from it, and `add_key` into the user keyring worked.
///
/// Expected, under the built-in policy: every keyring call the probe makes
/// is refused (`Operation not permitted`), the key's payload never shows.
/// Under a policy that allows keyrings (`advanced.keyrings: true`), the
/// run's session keyring is a fresh anonymous one (`_ses`), not the
/// server's, and the server's key is not found in it.
#[test]
fn a_tools_keyring_calls_fail_and_its_session_keyring_is_its_own() {
    let tag = format!("doors-{}", std::process::id());
    let (keyring, key, payload) = (
        format!("{tag}-session"),
        format!("{tag}-key"),
        format!("{tag}-payload"),
    );
    let (_d, p) = tmp();
    let probe = install(&example("keyprobe"), &p, "keyprobe");
    let run = |policy: Option<&Path>| {
        let mut l = with_session_keyring(Launch::new().cwd(&p), &keyring, &key, &payload);
        if let Some(f) = policy {
            l = l.arg("--sandbox").arg(f);
        }
        let (_srv, mut c) = no_auth(l);
        let (_, text) = sh(&mut c, &format!("{} {key}", q(&probe)));
        text
    };
    let text = run(None);
    for what in [
        "session",
        "search",
        "read",
        "add-user",
        "add-session",
        "request",
        "join-named",
    ] {
        assert!(
            text.contains(&format!("{what}: error: Operation not permitted")),
            "{what}: {text}"
        );
    }
    assert!(
        !text.contains(&payload) && !text.contains(&keyring),
        "{text}"
    );

    let (_pd, pdir) = tmp();
    let policy = pdir.join("sandbox.yaml");
    std::fs::write(
        &policy,
        "filesystem:\n  ro: [/etc]\n  rox: [/usr, /bin, /sbin, /lib, /lib64]\n  rw: [/dev/null]\n  rwx: [\"{CWD}\"]\nadvanced:\n  add_exec: true\n  keyrings: true\n",
    )
    .expect("policy");
    let text = run(Some(&policy));
    let session = text
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap_or_default();
    assert!(session.ends_with(";_ses"), "{text}");
    assert!(
        text.contains("search: error: Required key not available"),
        "{text}"
    );
    assert!(
        !text.contains(&payload) && !text.contains(&keyring),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l
            .strip_prefix("add-session: ")
            .is_some_and(|v| v.parse::<i64>().is_ok())),
        "keyrings allowed: {text}"
    );
}

/// Attack (issue 33): `socket(AF_VSOCK)` opened, under every network rule.
///
/// Expected: `Permission denied`.
#[test]
fn a_tool_cannot_open_a_vsock_socket() {
    let (_srv, mut c) = no_auth(Launch::new());
    let (err, text) = sh(
        &mut c,
        "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(\"opened\")'",
    );
    assert!(err && !text.contains("opened"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
}

/// A `toolsrv mcp --http` bridge; killed on drop.
struct Bridge(Child);

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Attack (issue 33): the MCP bridge's `--token-file` under a rule (here in
/// the server's `--cwd`) stayed readable to tools: the server did not know
/// its path.
///
/// Expected: within a few rescans of the bridge's start, a tool reads
/// nothing of the token.
#[test]
fn a_bridges_token_file_under_a_rule_is_hidden_from_tools() {
    let (_d, p) = tmp();
    let (_r, run) = tmp();
    let srv = Launch::new().cwd(&p).env("XDG_RUNTIME_DIR", &run).start();
    let token_file = p.join("mcp.token");
    let mut cmd = Command::new(toolsrv_bin());
    cmd.arg("--socket")
        .arg(&srv.socket)
        .args([
            "mcp",
            "--agent",
            "m",
            "--load",
            "shell",
            "--http",
            "127.0.0.1:0",
        ])
        .arg("--token-file")
        .arg(&token_file)
        .env("XDG_RUNTIME_DIR", &run)
        .env_remove("TOOLSRV_SECRET")
        .env_remove("TOOLSRV_MCP_TOKEN");
    let (child, line) = crate::util::spawn_for_first_line(&mut cmd, "toolsrv mcp");
    let _bridge = Bridge(child);
    assert!(line.contains("http://"), "{line}");
    let token = std::fs::read_to_string(&token_file).expect("token file");
    let token = token.trim().to_string();
    assert_eq!(token.len(), 64, "{token}");
    let generated = toolsrv_client::secret_store::secret_path(&run.join("toolsrv"), &srv.socket);
    let legacy = toolsrv_client::secret::default_secret_path(&srv.socket);
    let secret = std::fs::read_to_string(if generated.exists() {
        generated
    } else {
        legacy
    })
    .expect("the bridge's secret");
    let (mut c, tok) = srv.authed(secret.trim());
    load(&mut c, "a1", "shell");
    let mut last = String::new();
    let hidden = wait_until(WAIT, || {
        let r = call(
            &mut c,
            &[
                ("tool", "shell"),
                ("agent", "a1"),
                ("command", "cat mcp.token; echo end"),
                ("token", &tok),
            ],
        );
        last = out(&r).1;
        last.contains("end") && !last.contains(&token)
    });
    assert!(hidden, "the token stayed readable: {last}");
}

/// Attack (issue 33): `toolsrv doctor` said everything the policy asks for
/// was enforced while pathname sockets, netlink and abstract socket names
/// stayed reachable.
///
/// Expected: the report lists them under `reachable` (JSON) and in the text.
#[test]
fn doctor_lists_what_stays_reachable_besides_the_rules() {
    let out = Command::new(toolsrv_bin())
        .args(["--json", "doctor"])
        .env_remove("TOOLSRV_SOCKET")
        .output()
        .expect("toolsrv doctor");
    let v: Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
    let reachable = v["host"]["reachable"].as_array().expect("reachable list");
    let whats: Vec<&str> = reachable
        .iter()
        .map(|r| r["what"].as_str().expect("what"))
        .collect();
    for want in ["pathname-unix-sockets", "netlink", "abstract-unix-sockets"] {
        assert!(whats.contains(&want), "{want} missing from {whats:?}");
    }
    for r in reachable {
        assert!(r["detail"].as_str().is_some_and(|d| !d.is_empty()), "{r}");
    }
    let text = Command::new(toolsrv_bin())
        .arg("doctor")
        .env_remove("TOOLSRV_SOCKET")
        .output()
        .expect("toolsrv doctor");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("reachable"), "{text}");
    assert!(
        !text.contains("\neverything the policy asks for is enforced\n"),
        "{text}"
    );
}

/// Control: the client still authenticates with a `<socket>.secret` that
/// already exists (read in place), with `$TOOLSRV_SECRET` and with
/// `--secret-file`, in that precedence; the server keeps the secret the
/// client sent.
#[test]
fn the_client_still_authenticates_with_a_legacy_secret_the_env_and_a_secret_file() {
    let (_d, p) = project();
    let write_private = |f: &Path, s: &str| {
        std::fs::write(f, s).expect("secret");
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    };
    // A legacy secret beside the socket.
    let legacy = launch(&p, "legacy.sock").start();
    let file = toolsrv_client::secret::default_secret_path(&legacy.socket);
    write_private(&file, "legacy-secret\n");
    let o = client(&p, &legacy.socket)
        .arg("info")
        .output()
        .expect("info");
    assert!(o.status.success(), "{o:?}");
    let (_c, _) = legacy.authed("legacy-secret");
    assert!(file.exists(), "the legacy file was moved");
    assert!(!toolsrv_client::secret_store::secret_path(
        &p.join(".local/state/toolsrv"),
        &legacy.socket
    )
    .exists());
    // $TOOLSRV_SECRET wins over the legacy file.
    let env = launch(&p, "env.sock").start();
    write_private(
        &toolsrv_client::secret::default_secret_path(&env.socket),
        "not-this-one",
    );
    let o = client(&p, &env.socket)
        .env("TOOLSRV_SECRET", "env-secret")
        .arg("info")
        .output()
        .expect("info");
    assert!(o.status.success(), "{o:?}");
    let (_c, _) = env.authed("env-secret");
    // --secret-file wins over the legacy file.
    let pinned = launch(&p, "file.sock").start();
    let f = p.join("my.secret");
    write_private(&f, "file-secret");
    write_private(
        &toolsrv_client::secret::default_secret_path(&pinned.socket),
        "not-this-one",
    );
    let o = client(&p, &pinned.socket)
        .arg("--secret-file")
        .arg(&f)
        .arg("info")
        .output()
        .expect("info");
    assert!(o.status.success(), "{o:?}");
    let (_c, _) = pinned.authed("file-secret");
}
