//! Sandboxing of tool processes.
//!
//! The modules are private; the crate's face is what this file re-exports,
//! exactly what the server, the CLI and this crate's tests name
//! (docs/architecture.md, "The sandbox crate's face"):
//!
//! - policy (`policy/`): [`Policy`] (`sandbox.yaml` parsed, with file and
//!   line in its errors), [`PolicyStore`] (named profiles, reload on change),
//!   [`PathContext`] (path variables), [`DEFAULT_POLICY`];
//! - rules (`rules.rs`): [`ResolvedRules`], a policy resolved for one
//!   request (concrete paths);
//! - confinement (`confine/`): [`Confinement`], a prepared Landlock ruleset
//!   and seccomp filter, built in the parent;
//! - containment (`contain/`): [`Containment`] and its [`Run`]s, the kernel
//!   groups (cgroups, or PID namespaces) that hold every process of a run,
//!   its limits, and killing it whole;
//! - diagnosis (`doctor.rs`): [`Facts`] and [`Report`], what this host or a
//!   running server enforces of a policy, and what is missing;
//! - identity (`identity/`): [`Identity`], the server's own user namespace
//!   (a non-root server's tools keep its uid and gid), a root server's
//!   tools' [`ToolNamespace`] ([`tools`]), or per-run id maps where the host
//!   refuses;
//! - working directory and opens (`workdir.rs`, `open.rs`): [`WorkDir`], a
//!   request's working directory opened once beneath `--cwd`, and the
//!   race-free opens and [`FileId`]s the rules are built from;
//! - the filesystem view (`view/`): [`View`], a prepared mount namespace the
//!   child enters with `setns` (protected paths masked or read-only, nothing
//!   changeable outside the writable rules), [`caches`], [`rootonly`];
//! - the server's temporary directory (`tmpdir.rs`): [`ServerTmp`]
//!   (`{TOOLSRV_TMPDIR}`), one per server, removed when it stops or, once it
//!   is gone, by the next;
//! - a run's network (`netns.rs`): [`RunNetwork`], a network namespace
//!   holding only loopback and the server's listeners (`network.domains`);
//! - spawning (`spawn/`): [`spawn`] and [`spawn_detached`], a vfork-style
//!   child that joins its own process group and its run, applies the
//!   confinement and `exec`s the tool.
//!
//! Within the crate the modules stand on each other in this order, lowest
//! first: `open`, `tmpdir`, `workdir`, `rules`, `policy`, `identity`,
//! `confine`, `spawn`, `contain`, `view`, `doctor`.

#![warn(missing_docs, unreachable_pub)]

mod confine;
mod contain;
mod doctor;
mod forces;
mod identity;
mod netns;
mod open;
mod policy;
mod rules;
mod spawn;
mod tmpdir;
mod view;
mod workdir;

// The face: every item another crate (or this crate's tests) names. The
// modules are private; what is `pub` inside them and not here is reachable
// only as part of these (a field's type, a method's return).

// A run's own network namespace and the server's listeners in it.
pub use netns::DEPTH as NETWORK_POOL_DEPTH;
pub use netns::FORCE_ENV as NETWORK_FORCE_ENV;
pub use netns::{
    start_maker as start_network_maker, NetworkError, NetworkMechanism, NetworkPool, RunNetwork,
    PROXY_PORT,
};

// Policy: `sandbox.yaml`, its path variables, profiles and reload, the
// embedded default, and the paths the Landlock-only fallback carves.
pub use policy::{
    carved_paths, write_default, PathContext, Policy, PolicyError, PolicyStore, SecretSource,
    SecretSpec, DEFAULT_POLICY,
};

// A policy resolved for one request.
pub use rules::{NetworkRules, ResolvedRules};

// Confinement: the Landlock ruleset and seccomp filter, prepared in the parent.
pub use confine::{
    confine_this_thread, landlock_abi, thread_is_confined, ConfineError, Confinement,
};

// Containment: the kernel groups of the runs.
// How this server contains its runs (cgroups, a PID namespace per run, or
// the process group only).
pub use contain::Mechanism as ContainMechanism;
// The server environment variable that forces the containment mechanism
// (`TOOLSRV_CONTAINMENT`).
pub use contain::FORCE_ENV as CONTAIN_FORCE_ENV;
pub use contain::{teardown, Containment, Enforcement, Run};

// The variables that force a host mechanism, read in one place.
pub use forces::Forces;

// Diagnosis: what a host or a running server enforces (`toolsrv doctor`).
pub use doctor::{seccomp_available, Facts, Missing, Report, Source, ToolIds};

// The tools' identity: the server's own user namespace, or a root server's
// tools' user namespace.
// The server environment variable that chooses the identity mode
// (`TOOLSRV_USERNS`).
pub use identity::FORCE_ENV as IDENTITY_FORCE_ENV;
pub use identity::{Identity, IdentityError, Mode, ToolNamespace, NO_VIEW};

// Race-free opens and file identities.
pub use open::{open_no_symlinks, FileId};

// A request's working directory, opened once.
pub use workdir::{WorkDir, WorkDirError};

// The filesystem view: a prepared mount namespace per policy.
// How this host protects the filesystem: the view, or Landlock alone.
pub use view::Mechanism as ViewMechanism;
// The server environment variable that forces the Landlock-only fallback
// (`TOOLSRV_VIEW=off`).
pub use view::FORCE_ENV as VIEW_FORCE_ENV;
pub use view::{links_along, Entry, Kind, RulePaths, ServerFiles, Sources, View, ViewError};

// The server's own temporary directory.
pub use tmpdir::{remove_stale, ServerTmp, SERVER_TMPDIR_VAR};

// The child spawn path.
pub use spawn::{
    disable_clone3, preopen, spawn, spawn_detached, Child, ExitStatus, Join, SpawnError, SpawnSpec,
    MAX_FILES,
};

/// A root server's tools' user namespace in force for the process
/// (`identity/tools.rs`).
pub mod tools {
    pub use crate::identity::tools::{choose_base, in_force, put_in_force};
}

/// The caches a filesystem view gives copy-on-write layers
/// (`view/caches.rs`).
pub mod caches {
    pub use crate::view::caches::expanded;
}

/// The root-only files under read rules, hidden on a root server
/// (`view/rootonly.rs`).
pub mod rootonly {
    pub use crate::view::rootonly::{root_only, SCAN_BUDGET};
}
