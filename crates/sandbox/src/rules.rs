//! A policy resolved for one request: the concrete rules the confinement enforces.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::open::FileId;
use crate::workdir::WorkDir;

/// Network rules of a resolved policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRules {
    /// `false`: no network at all (Landlock TCP deny + seccomp on `socket(2)` for IP and packet families).
    pub enabled: bool,
    /// Non-empty: only these TCP ports may be bound.
    pub bind_tcp: Vec<u16>,
    /// Non-empty: only these TCP ports may be connected to.
    pub connect_tcp: Vec<u16>,
    /// Only stream sockets of IP (plain TCP), no datagram: the fallback of
    /// `network.domains` where no network namespace can be had, with
    /// `connect_tcp` the proxy's port alone (docs/network.md).
    pub stream_only: bool,
}

/// The rules for one tool run, with every path variable expanded and every
/// path that does not exist already dropped (and logged) by the resolver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRules {
    /// Read files, list directories.
    pub ro: Vec<PathBuf>,
    /// `ro` + execute.
    pub rox: Vec<PathBuf>,
    /// `ro` + write, create, remove, rename, truncate.
    pub rw: Vec<PathBuf>,
    /// `rw` + execute.
    pub rwx: Vec<PathBuf>,
    /// List directories only: the directories a rule was carved out of to
    /// keep a protected file out of reach (their entries are in the lists
    /// above; see `policy::protected`).
    pub list: Vec<PathBuf>,
    /// Network policy.
    pub network: NetworkRules,
    /// Run with what the kernel supports (`true`) or refuse when a rule cannot be enforced.
    pub best_effort: bool,
    /// Whether tools may use the kernel's keyrings (`advanced.keyrings`):
    /// `keyctl`, `add_key` and `request_key` pass the seccomp filter.
    pub keyrings: bool,
    /// A rule path could not be looked at for another reason than its
    /// absence (out of descriptors, say), so the rules may lack it: a caller
    /// that caches resolutions must not keep this one.
    pub degraded: bool,
    /// The request's working directory, opened once: a rule on its path is
    /// made from this descriptor, never by looking the path up again.
    pub workdir: Option<Arc<WorkDir>>,
    /// What each rule path was when resolved (`Policy::resolve` fills it). A
    /// path listed here is opened without following any symbolic link and
    /// must still be that file, or its rule is dropped; equal rules are the
    /// same files. Paths not listed (rules built by hand) are opened as given.
    pub ids: BTreeMap<PathBuf, FileId>,
    /// Rule paths whose file in the filesystem view is not the host's (a
    /// copy-on-write cache is an overlay there): their rule is made from
    /// this descriptor, opened inside the view.
    pub view_roots: ViewRoots,
}

/// Descriptors opened inside a filesystem view, by the host path they stand
/// for. Two are equal when they are the same list (one view's).
#[derive(Debug, Clone, Default)]
pub struct ViewRoots(pub Arc<Vec<(PathBuf, OwnedFd)>>);

impl ViewRoots {
    /// The descriptor standing for `path`, if any.
    pub(crate) fn get(&self, path: &Path) -> Option<&OwnedFd> {
        self.0.iter().find(|(p, _)| p == path).map(|(_, fd)| fd)
    }
}

impl PartialEq for ViewRoots {
    fn eq(&self, other: &ViewRoots) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || (self.0.is_empty() && other.0.is_empty())
    }
}

impl Eq for ViewRoots {}
