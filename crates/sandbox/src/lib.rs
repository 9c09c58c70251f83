//! Sandboxing of tool processes.
//!
//! - [`policy`]: `sandbox.yaml` parsing (errors with file and line), path variables,
//!   named profiles, reload on change, the embedded default policy.
//! - [`rules`]: [`rules::ResolvedRules`], a policy resolved for one request (concrete paths).
//! - [`confine`]: turns resolved rules into a prepared Landlock ruleset + seccomp filter
//!   ([`confine::Confinement`]), built in the parent.
//! - [`contain`]: the kernel groups (cgroups, or PID namespaces) that hold every process
//!   of a run, its limits, and killing it whole.
//! - [`doctor`]: what this host or a running server enforces of a policy, and
//!   what is missing (`toolsrv doctor`).
//! - [`identity`]: the server's own user namespace (a non-root server's tools
//!   keep its uid and gid), or the per-run uid and gid maps where the host refuses.
//! - [`workdir`], [`open`]: a request's working directory opened once, beneath
//!   `--cwd`, and the race-free opens and file identities the rules are built from.
//! - [`view`]: the prepared filesystem view (a mount namespace the child enters
//!   with `setns`): protected paths masked or read-only, nothing changeable
//!   outside the writable rules.
//! - [`tmpdir`]: the server's own temporary directory (`{TOOLSRV_TMPDIR}`),
//!   one per server, removed when it stops or, once it is gone, by the next.
//! - [`spawn`]: the child spawn path: a vfork-style child that joins its own process
//!   group, applies the confinement and `exec`s the tool.

pub mod confine;
pub mod contain;
pub mod doctor;
pub mod identity;
pub mod open;
pub mod policy;
pub mod rules;
pub mod spawn;
pub mod tmpdir;
pub mod view;
pub mod workdir;
