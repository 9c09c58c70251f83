//! toolsrv on another host, over the system's OpenSSH (docs/remote.md).
//!
//! - `ssh`: the master connection and commands multiplexed over it.
//! - `quote`: quoting for the remote shell (every remote value goes through it).
//! - `local`: the local per-address directory (0700): forwarded socket,
//!   secret, control socket, state, lock, logs.
//! - `state`: `state.json` and the recovery log.
//! - `probe`: the remote OS/arch and directories; the `--env` prelude.
//! - `install`: this binary on the remote host.
//! - `config`: content-addressed configuration transfer.
//! - `server`: the remote `toolsrv serve`: start, health, stop, remove.
//! - `supervisor`: the local process that owns the connection and recovers.
//! - `up`, `down`, `status`: the commands.

mod config;
mod down;
mod error;
mod install;
mod local;
mod probe;
mod quote;
mod server;
mod ssh;
mod state;
mod status;
mod supervisor;
mod sys;
mod up;

pub use config::SyncReport;
pub use down::down;
pub use error::{PlatformMismatch, RemoteError};
pub use install::How;
pub use local::{LocalDir, Lock};
pub use server::Health;
pub use ssh::{Input, Ssh, SSH_CONFIG_ENV};
pub use state::{RemoteServer, ServerProcess, State};
pub use status::{status, Status};
pub use supervisor::run as supervise;
pub use up::{up, ServerOutcome, UpOptions, UpReport, DEFAULT_WORKSPACE};
