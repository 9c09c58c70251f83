//! The toolsrv daemon. Its face: [`ServeConfig`], [`Server::new`] and [`run`];
//! the startup steps the binary takes while still single-threaded
//! ([`watchdog`], [`reaper`], [`fdlimit`], [`secret_file`]) and the socket
//! ([`socket::bind`], [`socket::inherited`]). Everything else is private.
//!
//! - `bypass`: the bypass broker (pending requests, approval, expiry).
//! - `completion`: background completion messages to the Ollie namespace.
//! - `config`: [`ServeConfig`], the validated `serve` settings.
//! - `auth`: the shared-secret / session-token authentication (CONTRACT §3).
//! - [`socket`]: binding the Unix socket (mode 0600, live/stale detection) and the
//!   `SO_PEERCRED` check.
//! - [`fdlimit`]: the descriptor limit raised at startup, the reserve descriptor.
//! - [`secret_file`]: `--secret-file`, the pinned secret checked at startup.
//! - `files`: reusable synthetic file kinds (read-only snapshot, write-then-read).
//! - `exec`: the tool executor (`exec.ExecuteTool`'s six steps).
//! - [`procs`]: the process table and bounded, followable output.
//! - `sys`: the server's system calls, one small typed wrapper each.
//! - [`reaper`]: child subreaper: orphans of tools are reaped, and killed at shutdown.
//! - [`watchdog`]: a forked process that kills tool groups if toolsrv dies (even by SIGKILL).
//! - `lifecycle`: [`run`]; idle monitor, orphan reaping, shutdown.
//! - `activity`: open connections and when the server was last busy.
//! - `namespace`: the tree, declared in one place (`namespace::spec`).
//! - `registry`: the per-agent registry of loaded tools.
//! - `server`: [`Server`], the state behind the namespace.
//! - `accept`: the accept loop: connection cap, shedding at the descriptor limit.

mod accept;
mod activity;
mod auth;
mod bypass;
mod completion;
mod config;
mod exec;
pub mod fdlimit;
mod files;
mod filewatch;
pub mod leaders;
mod lifecycle;
mod namespace;
pub mod procs;
pub mod reaper;
mod registry;
pub mod secret_file;
mod server;
pub mod socket;
mod sys;
pub mod watchdog;

#[cfg(test)]
mod tests;

pub use accept::DESCENDANT_CONNECTIONS;
pub use config::ServeConfig;
pub use lifecycle::run;
pub use server::Server;
