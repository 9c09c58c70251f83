//! toolsrv on another host, over the system's OpenSSH (docs/remote.md).
//!
//! - [`ssh`]: the master connection and commands multiplexed over it.
//! - [`quote`]: quoting for the remote shell (every remote value goes through it).
//! - [`local`]: the local per-address directory (0700): forwarded socket,
//!   secret, control socket, state, lock, logs.
//! - [`state`]: `state.json` and the recovery log.
//! - [`probe`]: the remote OS/arch and directories; the `--env` prelude.
//! - [`install`]: this binary on the remote host.
//! - [`config`]: content-addressed configuration transfer.
//! - [`server`]: the remote `toolsrv serve`: start, health, stop, remove.
//! - [`supervisor`]: the local process that owns the connection and recovers.
//! - [`up`], [`down`], [`status`]: the commands.

pub mod config;
pub mod down;
pub mod error;
pub mod install;
pub mod local;
pub mod probe;
pub mod quote;
pub mod server;
pub mod ssh;
pub mod state;
pub mod status;
pub mod supervisor;
mod sys;
pub mod up;

pub use error::RemoteError;
