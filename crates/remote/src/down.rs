//! `toolsrv remote down`: stop the remote server and remove what `up` made
//! on both sides. With a supervisor running, `down` stops the server itself
//! over the supervisor's connection while holding the directory's lock (so
//! what it refuses reaches the user), then the supervisor (SIGTERM) ends the
//! connection and removes the local directory; without one (it was killed),
//! everything is done from here over a fresh connection.

use std::time::{Duration, Instant};

use toolsrv_client::SshAddress;

use crate::error::RemoteError;
use crate::local::LocalDir;
use crate::probe::prelude;
use crate::server;
use crate::ssh::Ssh;
use crate::state::State;

/// Bring `addr` down; `ssh_config` is `-F` for a fresh connection. What was
/// refused (a remote pid file that names a process `up` did not start), one
/// sentence each: everything else is done.
pub fn down(
    addr: &SshAddress,
    ssh_config: Option<std::path::PathBuf>,
) -> Result<Vec<String>, RemoteError> {
    let dir = LocalDir::for_address(addr)?;
    if !dir.exists() {
        return Err(RemoteError::NotUp(addr.to_string()));
    }
    if let Some(pid) = dir.supervisor() {
        let refused = {
            // The supervisor skips its health checks while we hold the lock.
            let _lock = dir.lock()?;
            let refused = stop_over_master(&dir, addr);
            // The supervisor's command line names our dir (`supervisor()`
            // checked it; never a pid <= 1).
            let _ = crate::sys::kill(pid, libc::SIGTERM);
            refused
        };
        let start = Instant::now();
        while dir.supervisor().is_some() || dir.exists() {
            if start.elapsed() > Duration::from_secs(30) {
                return Err(RemoteError::SupervisorStuck {
                    pid,
                    log: dir.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        return Ok(refused);
    }
    let _lock = dir.lock()?;
    let mut refused = Vec::new();
    if let Some(st) = State::load(&dir)? {
        let ssh = Ssh::new(
            addr.clone(),
            dir.control(),
            st.ssh_config.clone().or(ssh_config),
        );
        let mut master = None;
        if !ssh.check() {
            master = Some(
                ssh.master()?
                    .spawn()
                    .map_err(|e| RemoteError::io("cannot run ssh", e))?,
            );
            let start = Instant::now();
            while !ssh.check() && start.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        let res = server::remove(
            &ssh,
            &prelude(&st.remote.env)?,
            &st.remote,
            st.process.as_ref(),
        );
        ssh.exit();
        if let Some(mut m) = master {
            let _ = m.kill();
            let _ = m.wait();
        }
        refused = res?;
    }
    let _ = std::fs::remove_dir_all(dir.path());
    Ok(refused)
}

/// Under the lock, with the supervisor's master answering: stop the server
/// and remove its files, then drop `state.json` so that the supervisor only
/// ends the connection. When that fails (no connection), the state stays and
/// the supervisor does it all on SIGTERM.
fn stop_over_master(dir: &LocalDir, addr: &SshAddress) -> Vec<String> {
    let Ok(Some(st)) = State::load(dir) else {
        return Vec::new();
    };
    let ssh = Ssh::new(addr.clone(), dir.control(), st.ssh_config.clone());
    if !ssh.check() {
        return Vec::new();
    }
    let removed = prelude(&st.remote.env)
        .and_then(|pre| server::remove(&ssh, &pre, &st.remote, st.process.as_ref()));
    match removed {
        Ok(refused) => {
            let _ = std::fs::remove_file(dir.state());
            refused
        }
        Err(_) => Vec::new(),
    }
}
