//! Issue 25: `toolsrv call` on a terminal when it is interrupted. SIGTERM and
//! SIGHUP cancel the call like Ctrl-C (every process of the run killed, a
//! pending bypass withdrawn), and while a bypass waits `call` says once on
//! stderr how to approve it.
//!
//! The CLI's stdout is a real pseudo-terminal (openpty), so `call` streams as
//! it does for a user; its stderr is a pipe the test reads.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolsrv_base::LockUnpoisoned;

use crate::util::{cli, toolsrv_bin, wait_until, Server, WAIT};

/// The approval hint, up to the id.
const HINT: &str = "waiting for approval: run `toolsrv approve ";

/// A pseudo-terminal: (master, slave).
fn pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // Safety: openpty writes two descriptors into the given ints; the name,
    // termios and winsize pointers may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // Safety: both descriptors were just opened and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// A `call` running with its stdout on a terminal.
struct TerminalCall {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// Kept open (and drained) so the CLI's writes never block or fail.
    _master: std::thread::JoinHandle<()>,
}

impl TerminalCall {
    fn start(srv: &Server, args: &[&str]) -> TerminalCall {
        let (master, slave) = pty();
        let mut child = Command::new(toolsrv_bin())
            .arg("--socket")
            .arg(&srv.socket)
            .args(["call", "--agent", "a1"])
            .args(args)
            .current_dir(srv.cwd())
            .env_remove("TOOLSRV_SECRET")
            .env_remove("TOOLSRV_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::from(slave))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolsrv call");
        let mut err = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                sink.lock_unpoisoned().push_str(&text);
            }
        });
        let mut master = File::from(master);
        let drain = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            // Ends with EIO once the last slave descriptor is closed.
            while matches!(master.read(&mut buf), Ok(n) if n > 0) {}
        });
        TerminalCall {
            child,
            stderr,
            _master: drain,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock_unpoisoned().clone()
    }

    fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // Safety: kill(2) of our own, not yet reaped, child.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {sig}");
    }

    /// The exit code, waiting at most [`WAIT`]; the child is killed on a hang.
    fn exit_code(&mut self) -> Option<i32> {
        let mut status = None;
        wait_until(WAIT, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        match status {
            Some(s) => s.code(),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("toolsrv call did not exit; stderr: {}", self.stderr());
            }
        }
    }
}

/// Host processes running exactly `sleep <token>`.
fn processes_with(token: &str) -> Vec<u32> {
    let cmdline = format!("sleep\0{token}\0");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline.as_bytes())
        })
        .collect()
}

/// What `toolsrv --json <args>` prints.
fn cli_json(srv: &Server, args: &[&str]) -> serde_json::Value {
    let out = cli(&srv.socket)
        .arg("--json")
        .args(args)
        .output()
        .expect("run toolsrv");
    assert!(out.status.success(), "{args:?}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return serde_json::Value::Array(Vec::new());
    }
    // `pending` prints one object per line.
    let items: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
        .collect();
    match items.as_slice() {
        [one @ serde_json::Value::Array(_)] => one.clone(),
        _ => serde_json::Value::Array(items),
    }
}

fn no_process_and_nothing_pending(srv: &Server) {
    assert!(
        wait_until(WAIT, || cli_json(srv, &["ps"])
            .as_array()
            .is_some_and(Vec::is_empty)),
        "a process of the run is still listed: {}",
        cli_json(srv, &["ps"])
    );
    assert_eq!(
        cli_json(srv, &["pending"]),
        serde_json::json!([]),
        "a request is still pending"
    );
}

#[test]
fn cli_sigterm_and_sighup_kill_every_process_of_a_streaming_call() {
    let srv = Server::start(&["--no-auth"]);
    for (sig, token) in [(libc::SIGTERM, "86399.25"), (libc::SIGHUP, "86399.26")] {
        let command = format!("command=sleep {token} & sleep {token} & echo started; wait");
        let mut call = TerminalCall::start(&srv, &["shell", &command]);
        assert!(
            wait_until(WAIT, || processes_with(token).len() == 2),
            "signal {sig}: the tool's two processes never ran; stderr: {}",
            call.stderr()
        );
        call.signal(sig);
        assert_eq!(call.exit_code(), Some(128 + sig), "{}", call.stderr());
        assert!(
            wait_until(WAIT, || processes_with(token).is_empty()),
            "signal {sig}: processes of the run survived: {:?}",
            processes_with(token)
        );
        assert!(
            call.stderr().contains("toolsrv: cancelled"),
            "{}",
            call.stderr()
        );
        no_process_and_nothing_pending(&srv);
    }
}

#[test]
fn cli_sigterm_and_sighup_withdraw_a_pending_bypass_and_the_hint_is_said_once() {
    let srv = Server::start(&["--no-auth"]);
    for sig in [libc::SIGHUP, libc::SIGTERM] {
        let mut call = TerminalCall::start(&srv, &["--bypass", "shell", "command=echo approved"]);
        assert!(
            wait_until(WAIT, || call.stderr().contains(HINT)),
            "signal {sig}: no approval hint; stderr: {}",
            call.stderr()
        );
        let pending = cli_json(&srv, &["pending"]);
        let id = pending[0]["id"].as_str().expect("a pending id").to_string();
        assert!(
            call.stderr()
                .contains(&format!("{HINT}{id}` (or reject it)\n")),
            "{}",
            call.stderr()
        );
        call.signal(sig);
        assert_eq!(call.exit_code(), Some(128 + sig), "{}", call.stderr());
        no_process_and_nothing_pending(&srv);
        assert_eq!(call.stderr().matches(HINT).count(), 1, "{}", call.stderr());
    }
}

/// Without a terminal (`call` waits for the whole result), the hint names the
/// request too, and approving that id runs the tool.
#[test]
fn cli_call_bypass_says_how_to_approve_and_runs_when_approved() {
    let srv = Server::start(&["--no-auth"]);
    let mut child = cli(&srv.socket)
        .args([
            "call",
            "--agent",
            "a1",
            "--bypass",
            "shell",
            "command=echo ran unsandboxed",
        ])
        .current_dir(srv.cwd())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolsrv call");
    let mut err = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(text.clone());
        }
    });
    let mut seen = String::new();
    while !seen.contains("(or reject it)\n") {
        seen = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no approval hint; stderr so far: {seen}"));
    }
    let id = seen
        .split(HINT)
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("an id in the hint")
        .to_string();
    let ok = cli(&srv.socket)
        .args(["approve", &id])
        .output()
        .expect("approve");
    assert!(ok.status.success(), "{ok:?}");
    let mut status = None;
    wait_until(Duration::from_secs(30), || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("call did not finish after approval");
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    assert!(status.success(), "{status:?}: {out}");
    assert_eq!(out, "ran unsandboxed\n");
    while let Ok(more) = rx.recv_timeout(Duration::from_millis(200)) {
        seen = more;
    }
    assert_eq!(seen.matches(HINT).count(), 1, "{seen}");
}
