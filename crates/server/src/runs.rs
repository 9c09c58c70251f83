//! Whether a peer is a run of a toolsrv server: this server's or any other
//! live server's of this user. A run may use the socket for nothing but
//! requests: it is never an observer (no `bypass/pending`, no
//! `bypass/resolve`), and its connections share the tools' own budget.
//!
//! Two signs, either of which makes a run; neither can be taken off by the
//! tool it marks (docs/bypass-security.md):
//!
//! - **ancestry**: the peer's parent chain reaches this server, or a server
//!   of the per-user registry (`toolsrv_base::registry`) that is alive with
//!   the start time it registered. Every server is a child subreaper, so a
//!   tool that daemonizes stays below its server; the registry lies in the
//!   per-user directory, which every server hides from its tools, so no
//!   tool can unregister its server or add a decoy;
//! - **cgroup**: the peer lives in a run group of some server, a cgroup
//!   path with a `toolsrv.<pid>` component followed by a `run.<n>` one (the
//!   layout of `crates/sandbox/src/contain/`). A process leaves its cgroup only
//!   by writing a `cgroup.procs` above it, which no rule of the built-in
//!   policy grants; this also marks the survivors of a server killed before
//!   its successor cleaned up, whose ancestry no longer shows it.
//!
//! What cannot be told (the peer is gone, `/proc` unreadable) counts as a
//! run: the check fails closed.

use std::path::Path;

use toolsrv_base::{registry, ProcessId};

/// At most this many ancestors are looked at.
const MAX_DEPTH: usize = 4096;

/// Whether `pid` is a run of this server or of a live server in `registry`
/// (`None`: none read); `None` when that cannot be told.
pub(crate) fn is_run(pid: i32, registry: Option<&Path>) -> Option<bool> {
    if in_run_group(pid)? {
        return Some(true);
    }
    let servers = match registry {
        Some(dir) => registry::live_servers(dir).ok()?,
        None => Vec::new(),
    };
    let me = i32::try_from(std::process::id()).ok()?;
    let mut p = pid;
    for _ in 0..MAX_DEPTH {
        if p == me {
            return Some(true);
        }
        if p <= 1 {
            return Some(false);
        }
        let stat = toolsrv_base::process::stat(p).ok()?;
        if servers.contains(&ProcessId {
            pid: p,
            start: stat.start,
        }) {
            return Some(true);
        }
        p = stat.ppid;
    }
    None
}

/// Whether `pid` lives in a toolsrv run group; `None` when its cgroups
/// cannot be read.
fn in_run_group(pid: i32) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(text.lines().any(|line| {
        // `<id>:<controllers>:<path>`; the path may hold ':'.
        line.splitn(3, ':').nth(2).is_some_and(is_run_group_path)
    }))
}

/// Whether a cgroup path is (or lies in) a run group: a `toolsrv.<pid>`
/// component, then a `run.` one somewhere below it.
fn is_run_group_path(path: &str) -> bool {
    let mut components = path.split('/');
    let instance = |c: &str| {
        c.strip_prefix("toolsrv.")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if !components.any(instance) {
        return false;
    }
    components.any(|c| c.starts_with("run."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_group_paths_are_told_from_others() {
        for (path, run) in [
            ("/user.slice/toolsrv.42/run.3", true),
            ("/toolsrv.42/run.3.mem", true),
            ("/a/toolsrv.42/run.0/nested", true),
            ("/a/toolsrv.42", false),
            ("/a/toolsrv.x/run.1", false),
            ("/a/toolsrv./run.1", false),
            ("/a/run.1/toolsrv.42", false),
            ("/", false),
            ("/user.slice/user-1000.slice/session-2.scope", false),
        ] {
            assert_eq!(is_run_group_path(path), run, "{path}");
        }
    }

    #[test]
    fn a_registered_server_and_what_runs_below_it_are_runs_a_bridge_is_not() {
        // This test's parent stands for a server: the parent itself (its
        // chain holds no toolsrv) is no run until it is registered.
        let me = i32::try_from(std::process::id()).unwrap();
        let parent = toolsrv_base::process::stat(me).unwrap().ppid;
        if in_run_group(parent) == Some(true) {
            return; // run inside a toolsrv run: nothing to tell apart here
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(is_run(parent, Some(dir.path())), Some(false));
        let entry = |kind| registry::Entry {
            kind,
            id: ProcessId::of(parent).unwrap(),
            sockets: Vec::new(),
            hidden: Vec::new(),
        };
        let bridge = registry::register(dir.path(), &entry(registry::Kind::Bridge)).unwrap();
        assert_eq!(
            is_run(parent, Some(dir.path())),
            Some(false),
            "a bridge is no server"
        );
        bridge.remove();
        let _server = registry::register(dir.path(), &entry(registry::Kind::Server)).unwrap();
        assert_eq!(is_run(parent, Some(dir.path())), Some(true));
        // A pid whose start time differs from the registered one is not it.
        let other = tempfile::tempdir().unwrap();
        let mut stale = entry(registry::Kind::Server);
        stale.id.start += 1;
        let _stale = registry::register(other.path(), &stale).unwrap();
        assert_eq!(is_run(parent, Some(other.path())), Some(false));
        assert_eq!(is_run(parent, None), Some(false));
    }
}
