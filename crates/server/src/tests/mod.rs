//! The server's middle tested in-process: a [`Server`](crate::server::Server)
//! built in the test (`support`), its namespace served over
//! `tokio::io::duplex` as the accept loop serves a socket, and raw 9P
//! requests. No daemon is spawned and no socket file is made; tools run as
//! real child processes.
//!
//! - `support`: the one construction of a server, and the 9P peer.
//! - `namespace`: walks of every root entry, `proc/<pid>` files, errors.
//! - `registry`: load, unload, revisions, reload of a changed tool file.
//! - `requests`: prepare/run error paths (payloads, tools, arguments,
//!   validation, rate limit, working directories).
//! - `bypass`: pending, approve, reject, timeout, withdraw.
//! - `procs`: the process table (ctl, dismiss, retention, garbage collection).

mod bypass;
mod namespace;
mod procs;
mod registry;
mod requests;
mod support;
