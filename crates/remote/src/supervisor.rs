//! The supervisor: one detached local process per remote address (`toolsrv
//! remote supervise`), which owns the SSH master connection and keeps the
//! forward and the remote server alive (docs/remote.md, "Recovery"):
//!
//! - the master exits (connection dropped, ssh killed) → reconnect with
//!   backoff (0.2 s doubling to 10 s), then check the server and restore the
//!   forward;
//! - the server died (killed, crashed) → restart it with the same secret and
//!   configuration;
//! - the server ended by itself with status 0 (idle timeout) → remove what
//!   `up` made on both sides and exit;
//! - SIGTERM/SIGINT (`down`) → stop the server, remove what `up` made, exit.
//!
//! Every step is one line in `supervisor.log`, and the last one is what
//! `status` shows.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::RemoteError;
use crate::local::{write_private, LocalDir};
use crate::probe::prelude;
use crate::server::{self, Health};
use crate::ssh::Ssh;
use crate::state::{self, event, State};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// How often the remote server's health is checked.
const HEALTH_EVERY: Duration = Duration::from_secs(1);
/// The first pause before reconnecting; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long a master may take to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Sleep up to `d`, waking early for a stop request.
fn nap(d: Duration) {
    let end = Instant::now() + d;
    while !stopping() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
    }
}

/// Start the supervisor for `dir` unless it runs, and wait until its master
/// connection answers (or it gives up: its log says why).
pub fn ensure_running(dir: &LocalDir, ssh: &Ssh, binary: &Path) -> Result<(), RemoteError> {
    let mut child = None;
    if dir.supervisor().is_none() {
        use std::os::unix::fs::OpenOptionsExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.log())
            .map_err(|e| RemoteError::io(format!("cannot open {}", dir.log().display()), e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| RemoteError::io("cannot duplicate the log descriptor", e))?;
        let mut c = Command::new(binary);
        c.args(["remote", "supervise", "--dir"])
            .arg(dir.path())
            .arg(ssh.address().to_string())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        use std::os::unix::process::CommandExt;
        // The supervisor outlives us, in a session of its own (no terminal
        // signals).
        // Safety: the hook only calls setsid, which is async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                let _ = crate::sys::setsid();
                Ok(())
            });
        }
        child = Some(
            c.spawn()
                .map_err(|e| RemoteError::io(format!("cannot start {}", binary.display()), e))?,
        );
    }
    let start = Instant::now();
    while start.elapsed() < CONNECT_TIMEOUT + Duration::from_secs(5) {
        if ssh.check() {
            return Ok(());
        }
        if let Some(c) = child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(RemoteError::SshExited {
                    address: ssh.address().to_string(),
                    status,
                    log: log_tail(dir),
                });
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(RemoteError::SshTimeout {
        address: ssh.address().to_string(),
        secs: start.elapsed().as_secs(),
        log: log_tail(dir),
    })
}

/// The last lines of the supervisor's log, for error messages.
fn log_tail(dir: &LocalDir) -> String {
    let text = std::fs::read_to_string(dir.log()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(4)..].join(" | ")
}

/// Start the master and wait until its control socket answers.
fn connect(dir: &LocalDir, ssh: &Ssh) -> Result<Child, String> {
    // A master killed with SIGKILL leaves its control socket behind, and ssh
    // then refuses to multiplex: remove it (nobody answers on it).
    if !ssh.check() {
        let _ = std::fs::remove_file(dir.control());
    }
    let mut child = ssh
        .master()
        .map_err(|e| e.to_string())?
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run ssh: {e}"))?;
    let _ = write_private(&dir.ssh_pid_file(), child.id().to_string().as_bytes());
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("ssh exited ({status})"));
        }
        if ssh.check() {
            return Ok(child);
        }
        if stopping() || start.elapsed() > CONNECT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err("ssh did not connect in time".into());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// After a reconnect: the server running (restarted if it died) and the
/// forward restored.
fn restore(dir: &LocalDir, ssh: &Ssh) -> Result<Option<Ended>, RemoteError> {
    let _lock = dir.lock()?;
    let Some(st) = State::load(dir)? else {
        return Ok(None);
    };
    if let Some(ended) = check_server(dir, ssh, &st)? {
        return Ok(Some(ended));
    }
    ssh.forward(&st.local_socket, &st.remote.socket)?;
    event(
        dir,
        &format!(
            "forward restored: {} -> {}",
            st.local_socket.display(),
            st.remote.socket
        ),
    );
    Ok(None)
}

/// The remote server ended by itself.
struct Ended(i32);

/// Check the server; restart it if it died. `Some` when it ended cleanly.
fn check_server(dir: &LocalDir, ssh: &Ssh, st: &State) -> Result<Option<Ended>, RemoteError> {
    let pre = prelude(&st.remote.env)?;
    match server::health(ssh, &pre, &st.remote, st.process.as_ref())? {
        Health::Running(_) | Health::Stopping => Ok(None),
        Health::Exited(0) => Ok(Some(Ended(0))),
        h => {
            let why = match h {
                Health::Exited(c) => format!("exit status {c}"),
                _ => "no trace of it".into(),
            };
            event(dir, &format!("remote server died ({why}); restarting it"));
            let process = server::start(ssh, &pre, &st.remote)?;
            let mut st = st.clone();
            st.server_started = state::now();
            st.process = Some(process);
            st.save(dir)?;
            event(
                dir,
                "remote server restarted (same socket, secret and configuration)",
            );
            Ok(None)
        }
    }
}

/// `toolsrv remote supervise --dir DIR ADDR`: run until `down` (SIGTERM) or
/// the remote server's idle exit.
pub fn run(dir: LocalDir, ssh: Ssh) -> Result<(), RemoteError> {
    // Safety: on_stop only stores to an atomic.
    unsafe {
        crate::sys::set_signal_handler(libc::SIGTERM, on_stop);
        crate::sys::set_signal_handler(libc::SIGINT, on_stop);
    }
    crate::sys::ignore_signal(libc::SIGHUP);
    write_private(
        &dir.supervisor_pid_file(),
        std::process::id().to_string().as_bytes(),
    )?;
    event(&dir, &format!("supervisor started for {}", ssh.address()));
    let mut master: Option<Child> = None;
    let mut failures = 0u32;
    let mut lost_at: Option<Instant> = None;
    let mut backoff = FIRST_BACKOFF;
    let mut ended = None;
    'outer: while !stopping() {
        let mut child = match connect(&dir, &ssh) {
            Ok(c) => c,
            Err(e) => {
                failures += 1;
                if stopping() {
                    break;
                }
                event(
                    &dir,
                    &format!(
                        "ssh connection failed (attempt {failures}: {e}); retrying in {:.1} s",
                        backoff.as_secs_f64()
                    ),
                );
                nap(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = FIRST_BACKOFF;
        match lost_at.take() {
            Some(t) => {
                event(
                    &dir,
                    &format!(
                        "ssh connection re-established after {} attempt(s) in {:.1} s",
                        failures + 1,
                        t.elapsed().as_secs_f64()
                    ),
                );
                match restore(&dir, &ssh) {
                    Ok(Some(e)) => {
                        ended = Some(e);
                        master = Some(child);
                        break 'outer;
                    }
                    Ok(None) => {}
                    Err(e) => event(&dir, &format!("recovery step failed: {e}")),
                }
            }
            None => event(&dir, "ssh connection established"),
        }
        failures = 0;
        let mut next_health = Instant::now() + HEALTH_EVERY;
        loop {
            if stopping() {
                master = Some(child);
                break 'outer;
            }
            if let Ok(Some(status)) = child.try_wait() {
                event(
                    &dir,
                    &format!("ssh connection lost (ssh exited: {status}); reconnecting"),
                );
                lost_at = Some(Instant::now());
                break;
            }
            if Instant::now() >= next_health {
                next_health = Instant::now() + HEALTH_EVERY;
                // `up` holds the lock while it deploys: skip this round then.
                if let Ok(Some(_lock)) = dir.try_lock() {
                    if let Ok(Some(st)) = State::load(&dir) {
                        match check_server(&dir, &ssh, &st) {
                            Ok(Some(e)) => {
                                ended = Some(e);
                                master = Some(child);
                                break 'outer;
                            }
                            Ok(None) => {}
                            // A dead connection shows as a dead master next round.
                            Err(e) => tracing_line(&dir, &format!("health check failed: {e}")),
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    match ended {
        Some(Ended(code)) => event(
            &dir,
            &format!("remote server ended by itself (status {code}: idle timeout or stopped); cleaning up"),
        ),
        None => event(&dir, "stop requested; stopping the remote server and cleaning up"),
    }
    teardown(&dir, &ssh, master);
    Ok(())
}

/// A diagnostic line in the log that is not a recovery step (not kept as
/// the last event).
fn tracing_line(dir: &LocalDir, what: &str) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(dir.log()) {
        let _ = writeln!(
            f,
            "{} {what}",
            toolsrv_protocol::format_rfc3339_millis(std::time::SystemTime::now())
        );
    }
}

/// Stop the remote server and remove what `up` made, on both sides.
fn teardown(dir: &LocalDir, ssh: &Ssh, master: Option<Child>) {
    // A fresh master when the old one is gone (one attempt).
    let mut master = master.filter(|_| ssh.check());
    if master.is_none() {
        STOP.store(false, Ordering::SeqCst);
        master = connect(dir, ssh).ok();
    }
    if let Ok(_lock) = dir.lock() {
        if let Ok(Some(st)) = State::load(dir) {
            let removed = prelude(&st.remote.env)
                .and_then(|pre| server::remove(ssh, &pre, &st.remote, st.process.as_ref()));
            match removed {
                Ok(refused) => {
                    for r in refused {
                        tracing_line(dir, &r);
                    }
                }
                Err(e) => tracing_line(
                    dir,
                    &format!("cannot remove the remote server's files: {e}"),
                ),
            }
        }
        ssh.exit();
        if let Some(c) = master.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(dir.path());
    }
}
