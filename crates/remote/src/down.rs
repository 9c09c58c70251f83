//! `toolsrv remote down`: the supervisor stops the remote server and removes
//! what `up` made on both sides; without a supervisor (it was killed), the
//! same is done from here over a fresh connection.

use std::time::{Duration, Instant};

use toolsrv_client::SshAddress;

use crate::error::RemoteError;
use crate::local::LocalDir;
use crate::probe::prelude;
use crate::server;
use crate::ssh::Ssh;
use crate::state::State;

/// Bring `addr` down; `ssh_config` is `-F` for a fresh connection.
pub fn down(addr: &SshAddress, ssh_config: Option<std::path::PathBuf>) -> Result<(), RemoteError> {
    let dir = LocalDir::for_address(addr);
    if !dir.exists() {
        return Err(RemoteError::NotUp(addr.to_string()));
    }
    if let Some(pid) = dir.supervisor() {
        // Safety: kill(2) of the supervisor whose command line names our dir.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let start = Instant::now();
        while dir.supervisor().is_some() || dir.exists() {
            if start.elapsed() > Duration::from_secs(30) {
                return Err(RemoteError::Remote(format!(
                    "the supervisor (pid {pid}) did not finish within 30 s; see {}",
                    dir.log().display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        return Ok(());
    }
    let _lock = dir.lock()?;
    if let Some(st) = State::load(&dir)? {
        let ssh = Ssh::new(
            addr.clone(),
            dir.control(),
            st.ssh_config.clone().or(ssh_config),
        );
        let mut master = None;
        if !ssh.check() {
            master = Some(
                ssh.master()
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| RemoteError::io("cannot run ssh", e))?,
            );
            let start = Instant::now();
            while !ssh.check() && start.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        let res = server::remove(&ssh, &prelude(&st.remote.env)?, &st.remote);
        ssh.exit();
        if let Some(mut m) = master {
            let _ = m.kill();
            let _ = m.wait();
        }
        res?;
    }
    let _ = std::fs::remove_dir_all(dir.path());
    Ok(())
}
