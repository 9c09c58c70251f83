//! What `up` records locally (`state.json`, 0600), read by the supervisor to
//! restart the server and by `status` and `down`; and the recovery log.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::RemoteError;
use crate::local::{write_private, LocalDir};

/// The remote server as `up` started it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteServer {
    /// The toolsrv binary on the remote host.
    pub bin: String,
    /// Its `toolsrv --version`.
    pub version: String,
    /// The socket it listens on.
    pub socket: String,
    /// Its private state directory (`<remote state>/server-<hash of the
    /// socket path>`, 0700): secret, pid, log. Hidden from its tools.
    pub state_dir: String,
    /// Its configuration (policy, profiles, tools): `<remote data>/config/
    /// server-<hash of the socket path>`, beside the installed binaries and
    /// read-only to its tools like them (docs/policy-format.md, "Protected paths"). It cannot live in the
    /// hidden state directory: the tools' own scripts are run from it.
    #[serde(default)]
    pub config_dir: String,
    /// The remote state directory that holds `state_dir` (and the default
    /// socket), removed by `down` when empty.
    pub runtime_dir: Option<String>,
    /// Its `--cwd`.
    pub cwd: String,
    /// Its `--idle-timeout`, in seconds.
    pub idle_timeout_secs: u64,
    /// Variables set for every remote command (`--env`).
    pub env: Vec<(String, String)>,
    /// Which configuration parts were sent (policy, tools): a change needs a restart.
    pub layout: String,
}

/// The remote server's process as it was seen right after it started: what
/// the health checks and `down` compare with the live process before they
/// trust (or signal) a pid. The remote pid file is never trusted on its own.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServerProcess {
    /// Its pid.
    pub pid: u32,
    /// Its start time, in clock ticks after boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// Its executable (`/proc/<pid>/exe`).
    pub exe: String,
}

/// `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The address, as given to `up`.
    pub address: String,
    /// `-F` for ssh, if one was used.
    pub ssh_config: Option<PathBuf>,
    /// The local forwarded socket.
    pub local_socket: PathBuf,
    /// The remote server.
    pub remote: RemoteServer,
    /// When the remote server was last (re)started, Unix seconds.
    pub server_started: u64,
    /// The remote server's process, as recorded when it started (`None`:
    /// no server was started by this record).
    #[serde(default)]
    pub process: Option<ServerProcess>,
}

/// Seconds since the epoch now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl State {
    /// Read `state.json`; `None` when there is none.
    pub fn load(dir: &LocalDir) -> Result<Option<State>, RemoteError> {
        let p = dir.state();
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|source| RemoteError::BadState { path: p, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RemoteError::io(format!("cannot read {}", p.display()), e)),
        }
    }

    /// Write `state.json` atomically, 0600.
    pub fn save(&self, dir: &LocalDir) -> Result<(), RemoteError> {
        let b = serde_json::to_vec_pretty(self).map_err(RemoteError::EncodeState)?;
        write_private(&dir.state(), &b)
    }

    /// How long the remote server has been up.
    pub fn uptime(&self) -> Duration {
        Duration::from_secs(now().saturating_sub(self.server_started))
    }
}

/// Log a recovery (or lifecycle) step: appended to `supervisor.log` with a
/// timestamp, and kept as the last event for `status`.
pub fn event(dir: &LocalDir, what: &str) {
    use std::io::Write;
    let line = format!(
        "{} {what}\n",
        toolsrv_protocol::format_rfc3339_millis(SystemTime::now())
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log())
    {
        let _ = f.write_all(line.as_bytes());
    }
    let _ = write_private(&dir.last_event(), line.trim_end().as_bytes());
}

/// The last event, if any.
pub fn last_event(dir: &LocalDir) -> Option<String> {
    std::fs::read_to_string(dir.last_event())
        .ok()
        .map(|s| s.trim().to_string())
}
