//! Integration tests: the real `toolsrv` binary on a temp socket, driven over
//! the wire. One test binary; each feature in its own module.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

mod audit;
mod auth;
mod bypass;
mod cli_interrupt;
mod containment;
mod daemon_cli;
mod docs_clients;
mod doctor;
mod doors;
mod escapes;
mod everyday;
mod help;
mod hostile;
mod identity;
mod interop;
mod large_args;
mod leftovers;
mod lifecycle;
mod lifecycle_idle;
mod lifecycle_ollie;
mod lifecycle_startup;
mod lifecycle_util;
mod malformed;
mod mcp;
mod mcp_hint;
mod mcp_limits;
mod messages;
mod namespace;
mod pipelining;
mod procs;
mod procs_builtin;
mod procs_cancel;
mod procs_ctl;
mod procs_output;
mod procs_util;
mod procs_wakeups;
mod protocol_python;
mod remote;
mod remote_holes;
mod remote_util;
mod requests;
mod sandbox;
mod sandbox_domains;
mod sandbox_fs;
mod sandbox_net;
mod sandbox_policy;
mod sandbox_scope;
mod sandbox_secrets;
mod sandbox_sockets;
mod sandbox_validate;
mod sandbox_view;
mod socket;
mod syscall_budget;
mod tools;
mod unprivileged;
mod watch;
