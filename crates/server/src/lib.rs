//! The toolsrv daemon. Its face: [`Config`], every setting of `toolsrv serve`
//! with its default, and [`Daemon`], which [`Daemon::prepare`]s (every start-up
//! step that may fail, up to the bound socket) and [`Daemon::serve`]s (until
//! stopped). Everything else is private.
//!
//! - `daemon`: [`Daemon`]: the start-up steps in their order, the runtime,
//!   the signals.
//! - `config`: [`Config`], the `serve` settings and their defaults.
//! - `audit`: the audit log's records (`--audit`, docs/audit.md).
//! - `bypass`: the bypass broker (pending requests, approval, expiry).
//! - `completion`: background completion messages to the Ollie namespace.
//! - `auth`: the shared-secret / session-token authentication (docs/protocol.md, "Authentication").
//! - `socket`: binding the Unix socket (mode 0600, live/stale detection),
//!   socket activation, and the `SO_PEERCRED` check.
//! - `fdlimit`: the descriptor limit raised at startup, the reserve descriptor.
//! - `secret_file`: `--secret-file`, the pinned secret checked at startup.
//! - `files`: reusable synthetic file kinds (read-only snapshot, write-then-read).
//! - `filewatch`: change detection of the policy and tool files.
//! - `exec`: the tool executor (`exec.ExecuteTool`'s six steps).
//! - `procs`: the process table and bounded, followable output.
//! - `sys`: the server's system calls, one small typed wrapper each.
//! - `reaper`: child subreaper: orphans of tools are reaped, and killed at shutdown.
//! - `watch`: the tools PID namespace, the fanotify watcher, the quarantine.
//! - `watchdog`: a forked process that kills tool groups if toolsrv dies (even by SIGKILL).
//! - `leaders`: the record of PID-namespace runs' first processes beside the socket.
//! - `lifecycle`: serving until shutdown; idle monitor, orphan reaping, shutdown.
//! - `activity`: open connections and when the server was last busy.
//! - `namespace`: the tree, declared in one place (`namespace::spec`).
//! - `registry`: the per-agent registry of loaded tools.
//! - `server`: `Server`, the state behind the namespace.
//! - `accept`: the accept loop: connection cap, shedding at the descriptor limit.

mod accept;
mod activity;
mod audit;
mod auth;
mod bypass;
mod completion;
mod config;
mod daemon;
mod exec;
mod fdlimit;
mod files;
mod filewatch;
mod guard;
mod leaders;
mod lifecycle;
mod namespace;
mod presence;
mod procs;
mod reaper;
mod registry;
mod runs;
mod secret_file;
mod server;
mod socket;
mod sys;
mod watch;
mod watchdog;

#[cfg(test)]
mod tests;

pub use config::Config;
pub use daemon::{Daemon, DaemonError};
pub use procs::Retention;
pub use secret_file::SecretFileError;
