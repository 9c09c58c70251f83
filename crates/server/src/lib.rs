//! The toolsrv daemon.
//!
//! - [`bypass`]: the bypass broker (pending requests, approval, expiry).
//! - [`config`]: [`ServeConfig`], the validated `serve` settings.
//! - [`auth`]: the shared-secret / session-token authentication (CONTRACT §3).
//! - [`socket`]: binding the Unix socket (mode 0600, live/stale detection) and the
//!   `SO_PEERCRED` check.
//! - [`files`]: reusable synthetic file kinds (read-only snapshot, write-then-read).
//! - [`exec`]: the tool executor (`exec.ExecuteTool`'s six steps).
//! - [`procs`]: the process table and bounded, followable output.
//! - [`namespace`]: the tree, declared in one place ([`namespace::spec`]).
//! - [`registry`]: the per-agent registry of loaded tools.
//! - [`server`]: [`Server`], the state behind the namespace, and its accept loop.

pub mod auth;
pub mod bypass;
pub mod config;
pub mod exec;
pub mod files;
pub mod namespace;
pub mod procs;
pub mod registry;
pub mod server;
pub mod socket;

pub use config::ServeConfig;
pub use server::Server;
