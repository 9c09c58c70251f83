//! Issue 23, items 1 and 2: the attacks on `toolsrv remote` that worked on
//! main (864bbee), against the loopback sshd of remote_util.rs. Each test is
//! the attack; it passes when the attack fails.
//!
//! - A sandboxed tool of a *local* server reaching `remote up`'s control
//!   socket and secret when `$XDG_RUNTIME_DIR` is unset (they were in the
//!   tools' own `{TOOLSRV_TMPDIR}`).
//! - A *remote* tool rewriting the remote server's pid file or its installed
//!   binary; the remote server's umask.
//! - A remote binary replaced behind `up`'s back, then run by the next `up`;
//!   `$HOME` as the default remote `--cwd`.
//! - `remote down` signalling whatever a rewritten pid file names.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::remote_util::Sshd;
use crate::util::{cli, toolsrv_bin, wait_until, Launch};

/// `out` must be a success; its stdout.
fn ok(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Single-quoted for `sh`.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// `toolsrv` as a user without `$XDG_RUNTIME_DIR` (sudo, cron, CI, a plain
/// SSH login) whose home is `home`.
fn without_runtime_dir(s: &Sshd, home: &Path) -> Command {
    let mut c = s.toolsrv();
    c.env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME")
        .env("HOME", home);
    c
}

/// The local per-address directory of `remote up localhost` made by
/// [`without_runtime_dir`]: under `home`'s state directory, or where main
/// put it, `/tmp/toolsrv-<uid>/remote/`.
fn local_dir_without_runtime_dir(home: &Path) -> PathBuf {
    // Safety: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let bases = [
        home.join(".local/state/toolsrv/remote"),
        PathBuf::from(format!("/tmp/toolsrv-{uid}/remote")),
    ];
    for base in &bases {
        let found = std::fs::read_dir(base).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .find(|p| p.join("state.json").is_file())
        });
        if let Some(d) = found {
            return d;
        }
    }
    panic!("no local state directory in {bases:?}");
}

/// Brings `remote up localhost` of [`without_runtime_dir`] down when a test
/// ends, passed or failed (the kit's sshd only knows the default directory).
struct DownOnDrop<'a> {
    sshd: &'a Sshd,
    home: PathBuf,
}

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = without_runtime_dir(self.sshd, &self.home)
            .args(["remote", "down", "localhost"])
            .output();
    }
}

#[test]
fn without_xdg_runtime_dir_a_local_tool_reaches_neither_the_control_socket_nor_the_secret() {
    let Some(s) = Sshd::start() else { return };
    let home = s.path("lhome");
    std::fs::create_dir_all(home.join("project")).expect("home");
    let _down = DownOnDrop {
        sshd: &s,
        home: home.clone(),
    };
    ok(
        "remote up",
        without_runtime_dir(&s, &home)
            .args(["remote", "up", "localhost"])
            .output()
            .expect("run"),
    );
    let dir = local_dir_without_runtime_dir(&home);
    let secret = std::fs::read_to_string(dir.join("toolsrv.sock.secret")).expect("secret");
    assert!(secret.trim().len() >= 32, "{secret:?}");

    // A local server of the same user with the default policy, whose tools
    // may write their {TOOLSRV_TMPDIR} and their --cwd: a project in the
    // user's home, and then the home itself, a writable rule that covers the
    // state directory (the filesystem view hides it whole: Landlock alone
    // would leave it listable, and the socket connectable).
    for cwd in [home.join("project"), home.clone()] {
        let server = Launch::new()
            .cwd(&cwd)
            .env("HOME", &home)
            .env("TMPDIR", "/tmp")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("XDG_STATE_HOME")
            .start();
        // The tool knows (or computes) the directory; it tries every name it
        // can find for the control socket: a listing, the old fixed name, and
        // what the kernel shows of listening Unix sockets (`ss -x`).
        let attack = format!(
            r#"d={d}
echo "== ls"; ls -a "$d" "$d"/* 2>&1
echo "== cat"; cat "$d/toolsrv.sock.secret" "$d/state.json" "$d/ctl.name" 2>&1
echo "== ssh"
for c in "$d/ctl" "$d"/ctl* "$d"/*/ctl $(ss -xlH 2>/dev/null | awk '{{print $5}}' | grep ctl | sed 's/\.[A-Za-z0-9]*$//'); do
  echo "trying $c"
  ssh -S "$c" -o BatchMode=yes -o ControlMaster=no -o ConnectTimeout=2 -p 1 127.0.0.1 echo REMOTE-RAN-FOR-THE-TOOL 2>&1
done
echo "== plant"; echo x > "$d/planted" 2>&1 && echo PLANTED
echo "== end""#,
            d = q(&dir)
        );
        let out = cli(&server.socket)
            .args(["call", "shell", &format!("command={attack}")])
            .output()
            .expect("call");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("== end"), "the attack did not run:\n{text}");
        assert!(
            !text.contains(secret.trim()),
            "the tool read the secret:\n{text}"
        );
        assert!(
            !text.contains("REMOTE-RAN-FOR-THE-TOOL"),
            "the tool ran a command on the remote host through the control socket:\n{text}"
        );
        assert!(
            !text.contains("PLANTED") && !dir.join("planted").exists(),
            "{text}"
        );
        let listing = text
            .split("== ls")
            .nth(1)
            .and_then(|t| t.split("== cat").next())
            .unwrap_or_default();
        assert!(
            !listing.contains("toolsrv.sock") && !listing.contains("state.json"),
            "the tool listed the directory:\n{listing}"
        );
        drop(server);
    }
    // And the state is where the docs say, private.
    use std::os::unix::fs::MetadataExt;
    assert!(
        dir.starts_with(home.join(".local/state/toolsrv/remote")),
        "{}",
        dir.display()
    );
    assert_eq!(std::fs::metadata(&dir).expect("stat").mode() & 0o777, 0o700);

    let down = without_runtime_dir(&s, &home)
        .args(["remote", "down", "localhost"])
        .output()
        .expect("down");
    ok("remote down", down);
    assert!(!dir.exists(), "local directory left");
    assert!(
        wait_until(Duration::from_secs(5), || s.processes().is_empty()),
        "left running: {:#?}",
        s.processes()
    );
}

#[test]
fn a_remote_tool_cannot_rewrite_the_pid_file_or_the_binary_and_its_files_are_0644() {
    let Some(s) = Sshd::start() else { return };
    let proj = s.path("proj");
    std::fs::create_dir(proj.join("work")).expect("mkdir");
    // A weak remote setup: no XDG_RUNTIME_DIR, and the state and data
    // directories inside the --cwd, where every rule of the tools reaches.
    let env = format!(
        "HOME={} XDG_RUNTIME_DIR= XDG_STATE_HOME={} XDG_DATA_HOME={}",
        s.path("rhome").display(),
        proj.join(".state").display(),
        proj.join(".data").display()
    );
    let up = s
        .toolsrv()
        .env("TOOLSRV_REMOTE_ENV", &env)
        .args(["remote", "up", "localhost"])
        .output()
        .expect("up");
    ok("remote up", up);
    let state = s.state();
    let pid_file =
        PathBuf::from(state["remote"]["state_dir"].as_str().expect("state_dir")).join("pid");
    let bin = PathBuf::from(state["remote"]["bin"].as_str().expect("bin"));
    let pid_before = std::fs::read_to_string(&pid_file).expect("pid file");
    let bin_before = std::fs::read(&bin).expect("binary");

    let attack = format!(
        r#"p={p}; b={b}
echo "== pid"; echo 999999999 > "$p" 2>&1 && echo PID-REWRITTEN
echo "== bin"; printf '#!/bin/sh\necho SWAPPED\n' > "$b" 2>&1 && echo BIN-REWRITTEN
mv -f "$b" "$b.moved" 2>&1 && echo BIN-MOVED
rm -f "$b" 2>&1; [ -e "$b" ] || echo BIN-REMOVED
echo "== umask"; cd work && echo x > made-by-tool && stat -c 'mode=%a' made-by-tool
echo "== end""#,
        p = q(&pid_file),
        b = q(&bin)
    );
    let out = s.run(&[
        "--socket",
        "ssh://localhost",
        "call",
        "shell",
        &format!("command={attack}"),
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("== end"), "the attack did not run:\n{text}");
    for done in ["PID-REWRITTEN", "BIN-REWRITTEN", "BIN-MOVED", "BIN-REMOVED"] {
        assert!(!text.contains(done), "{done}:\n{text}");
    }
    assert_eq!(
        std::fs::read_to_string(&pid_file).expect("pid file"),
        pid_before
    );
    assert!(
        std::fs::read(&bin).expect("binary") == bin_before,
        "the installed binary changed"
    );
    assert!(
        text.contains("mode=644"),
        "the remote server's tools create files 0644 (umask 022):\n{text}"
    );

    let down = s
        .toolsrv()
        .env("TOOLSRV_REMOTE_ENV", &env)
        .args(["remote", "down", "localhost"])
        .output()
        .expect("down");
    ok("remote down", down);
    assert!(
        wait_until(Duration::from_secs(5), || s.processes().is_empty()),
        "left running: {:#?}",
        s.processes()
    );
}

#[test]
fn a_swapped_remote_binary_is_installed_again_not_run_and_the_default_cwd_is_a_workspace() {
    let Some(s) = Sshd::start() else { return };
    let up = |s: &Sshd| {
        s.toolsrv()
            .env_remove("TOOLSRV_REMOTE_CWD")
            .args(["remote", "up", "localhost"])
            .output()
            .expect("up")
    };
    s.ok(&["init", "--dir", s.path("lcfg").to_str().expect("utf-8")]);
    ok("remote up", up(&s));
    // Without --cwd, tools run in a workspace directory, not in $HOME.
    let workspace = s.path("rhome/toolsrv-workspace");
    let out = s.ok(&[
        "--socket",
        "ssh://localhost",
        "call",
        "shell",
        "command=echo \"in $PWD\"",
    ]);
    assert_eq!(out.trim(), format!("in {}", workspace.display()));
    let bin = PathBuf::from(s.state()["remote"]["bin"].as_str().expect("bin"));
    s.ok(&["remote", "down", "localhost"]);

    // Someone (a tool on a host where nothing protected them) replaces the
    // installed binary with a program of its own, and a configuration
    // object (the sent policy) with a policy of its own.
    let objects = s.path("rhome/.local/share/toolsrv/objects");
    let policy = std::fs::read_dir(&objects)
        .expect("objects")
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("filesystem:")))
        .expect("the policy's object");
    let policy_text = std::fs::read_to_string(&policy).expect("policy");
    std::fs::write(&policy, "filesystem:\n  rwx: [\"/\"]\n").expect("poison");
    let marker = s.path("swapped-binary-ran");
    std::fs::remove_file(&bin).expect("rm");
    std::fs::write(&bin, format!("#!/bin/sh\ntouch {}\nexit 1\n", q(&marker))).expect("swap");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o700)).expect("chmod");

    let out = up(&s);
    let text = ok("remote up after the swap", out);
    assert!(!marker.exists(), "the swapped binary ran:\n{text}");
    assert!(
        text.contains("installed again"),
        "up says it installed the binary again:\n{text}"
    );
    assert!(
        std::fs::read(&bin).expect("binary") == std::fs::read(toolsrv_bin()).expect("ours"),
        "the installed binary is ours again"
    );
    assert!(
        text.contains("config      1 of "),
        "the altered object is sent again:\n{text}"
    );
    assert_eq!(
        std::fs::read_to_string(&policy).expect("policy"),
        policy_text
    );
    let out = s.ok(&[
        "--socket",
        "ssh://localhost",
        "call",
        "shell",
        "command=echo fine",
    ]);
    assert_eq!(out.trim(), "fine");
    s.ok(&["remote", "down", "localhost"]);
    assert!(!marker.exists(), "the swapped binary ran");
}

#[test]
fn down_with_a_rewritten_pid_file_signals_nothing_foreign_and_says_so() {
    let Some(s) = Sshd::start() else { return };
    s.ok(&["remote", "up", "localhost"]);
    let pid_file = s.remote_state().join("pid");
    let server_pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    // A process of ours that `down` must not touch, named in the pid file
    // (as a tool could where the file was in its reach).
    let mut decoy = Command::new("sleep").arg("300").spawn().expect("sleep");
    std::fs::write(&pid_file, format!("{}\n", decoy.id())).expect("rewrite");

    let out = s.run(&["remote", "down", "localhost"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let alive = decoy.try_wait().expect("try_wait").is_none();
    let _ = decoy.kill();
    let _ = decoy.wait();
    assert!(alive, "down signalled the process the pid file named");
    assert!(out.status.success(), "down: {}: {err}", out.status);
    assert!(
        err.contains("rewritten") && err.contains(&pid_file.display().to_string()),
        "down names the rewritten pid file: {err}"
    );
    // The server `up` started is stopped all the same (it was recorded).
    assert!(
        wait_until(Duration::from_secs(5), || !Path::new(&format!(
            "/proc/{server_pid}"
        ))
        .exists()),
        "the remote server (pid {server_pid}) still runs"
    );
    assert!(
        wait_until(Duration::from_secs(5), || s.processes().is_empty()),
        "left running: {:#?}",
        s.processes()
    );
}
