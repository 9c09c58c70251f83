//! `toolsrv remote status`: what is up for an address, from the local state,
//! the master connection and the remote server's health. (The running
//! processes are read by the caller through the forwarded socket.)

use std::time::Duration;

use toolsrv_client::SshAddress;

use crate::error::RemoteError;
use crate::local::LocalDir;
use crate::probe::prelude;
use crate::server::{self, Health};
use crate::ssh::Ssh;
use crate::state::{last_event, State};

/// The status of one address.
#[derive(Debug, Clone)]
pub struct Status {
    /// What `up` recorded.
    pub state: State,
    /// The supervisor's pid, when it runs.
    pub supervisor: Option<i32>,
    /// The master ssh's pid, when it runs and answers.
    pub ssh: Option<i32>,
    /// The server's health (`None`: could not ask, the connection is down).
    pub health: Option<Health>,
    /// How long the server has run.
    pub uptime: Duration,
    /// The last recovery or lifecycle event, with its time.
    pub last_event: Option<String>,
}

/// The status of `addr`.
pub fn status(addr: &SshAddress) -> Result<Status, RemoteError> {
    let dir = LocalDir::for_address(addr)?;
    let Some(state) = State::load(&dir)? else {
        return Err(RemoteError::NotUp(addr.to_string()));
    };
    let ssh = Ssh::new(addr.clone(), dir.control(), state.ssh_config.clone());
    let connected = ssh.check();
    let health = if connected {
        server::health(
            &ssh,
            &prelude(&state.remote.env)?,
            &state.remote,
            state.process.as_ref(),
        )
        .ok()
    } else {
        None
    };
    Ok(Status {
        supervisor: dir.supervisor(),
        ssh: dir.ssh_master().filter(|_| connected),
        health,
        uptime: state.uptime(),
        last_event: last_event(&dir),
        state,
    })
}
