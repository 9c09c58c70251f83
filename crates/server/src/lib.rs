//! The toolsrv daemon.
//!
//! - [`bypass`]: the bypass broker (pending requests, approval, expiry).
//! - [`completion`]: background completion messages to the Ollie namespace.
//! - [`config`]: [`ServeConfig`], the validated `serve` settings.
//! - [`auth`]: the shared-secret / session-token authentication (CONTRACT §3).
//! - [`socket`]: binding the Unix socket (mode 0600, live/stale detection) and the
//!   `SO_PEERCRED` check.
//! - [`fdlimit`]: the descriptor limit raised at startup, the reserve descriptor.
//! - [`secret_file`]: `--secret-file`, the pinned secret checked at startup.
//! - [`files`]: reusable synthetic file kinds (read-only snapshot, write-then-read).
//! - [`exec`]: the tool executor (`exec.ExecuteTool`'s six steps).
//! - [`procs`]: the process table and bounded, followable output.
//! - [`reaper`]: child subreaper: orphans of tools are reaped, and killed at shutdown.
//! - [`watchdog`]: a forked process that kills tool groups if toolsrv dies (even by SIGKILL).
//! - [`lifecycle`]: idle monitor, orphan reaping, shutdown.
//! - [`namespace`]: the tree, declared in one place ([`namespace::spec`]).
//! - [`registry`]: the per-agent registry of loaded tools.
//! - [`server`]: [`Server`], the state behind the namespace.
//! - [`accept`]: the accept loop: connection cap, shedding at the descriptor limit.

pub mod accept;
pub mod auth;
pub mod bypass;
pub mod completion;
pub mod config;
pub mod exec;
pub mod fdlimit;
pub mod files;
pub mod lifecycle;
pub mod namespace;
pub mod procs;
pub mod reaper;
pub mod registry;
pub mod secret_file;
pub mod server;
pub mod socket;
mod sys;
pub mod watchdog;

pub use config::ServeConfig;
pub use server::Server;
