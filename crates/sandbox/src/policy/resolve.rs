//! `Policy::resolve`: a policy plus a request context to concrete [`ResolvedRules`].

use super::ldd::shared_libraries;
use super::protected::{carve, carved_paths};
use super::{PathContext, Policy};
use crate::open::{current_path, identify, open_beneath, open_no_symlinks, FileId};
use crate::rules::{NetworkRules, ResolvedRules};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

impl Policy {
    /// Expands every path, drops (with a debug log) the ones that cannot be
    /// expanded or do not exist, canonicalizes the rest (a symlink resolves to
    /// its target), and adds `exec_paths` as `rox` when `advanced.add_exec` and
    /// their shared-library dependencies as `rox` when `advanced.ldd`.
    /// Each list is deduplicated, keeping the first occurrence. A directory
    /// holding a protected credential file (`policy::PROTECTED`) or one of the
    /// user's credential stores (`policy::CREDENTIAL_STORES`) is carved around
    /// it: see `policy::protected`.
    ///
    /// With `ctx.workdir`, `{CWD}` is that opened directory and `{CWD}/x` is
    /// looked up beneath it; likewise `{WORKSPACE}` and `{WORKSPACE}/x` with
    /// `ctx.workspace` (or, without it, `ctx.workdir`); every other path is canonicalized, then opened
    /// without following any symbolic link, and what it is recorded in
    /// [`ResolvedRules::ids`]: a path that became a link in between (a
    /// racing tool) is dropped, and the confinement is built from these very
    /// files.
    pub fn resolve(&self, ctx: &PathContext, exec_paths: &[PathBuf]) -> ResolvedRules {
        self.resolve_carving(ctx, exec_paths, &[])
    }

    /// [`Policy::resolve`], carving `server_files` (absolute paths: the
    /// server's policy file, profiles and tools directories, socket, secret
    /// files) out of every rule as well, whether they exist or not.
    pub fn resolve_carving(
        &self,
        ctx: &PathContext,
        exec_paths: &[PathBuf],
        server_files: &[PathBuf],
    ) -> ResolvedRules {
        let mut carve = server_files.to_vec();
        carve.extend(self.denied_paths(ctx));
        self.resolve_with(ctx, exec_paths, Some(&carve))
    }

    /// [`Policy::resolve`] without any carving: each rule whole, for a run
    /// inside the filesystem view (`crate::view`), whose mounts protect what
    /// the carving would.
    pub fn resolve_whole(&self, ctx: &PathContext, exec_paths: &[PathBuf]) -> ResolvedRules {
        self.resolve_with(ctx, exec_paths, None)
    }

    /// `filesystem.deny_read` and `deny_write`, expanded (absolute; globs
    /// kept as written).
    pub fn deny_lists(&self, ctx: &PathContext) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let expand = |list: &[String]| -> Vec<PathBuf> {
            list.iter()
                .filter_map(|raw| match ctx.expand(raw) {
                    Ok(p) => Some(p),
                    Err(why) => {
                        tracing::debug!(path = %raw, reason = %why, "sandbox deny path skipped");
                        None
                    }
                })
                .collect()
        };
        (
            expand(&self.filesystem.deny_read),
            expand(&self.filesystem.deny_write),
        )
    }

    /// Every existing path `deny_read` and `deny_write` name (globs
    /// expanded): the Landlock-only fallback carves them all out.
    fn denied_paths(&self, ctx: &PathContext) -> Vec<PathBuf> {
        let (read, write) = self.deny_lists(ctx);
        let mut out = Vec::new();
        let mut truncated = false;
        for p in read.into_iter().chain(write) {
            match super::glob::Glob::parse(&p) {
                Some(g) => out.extend(g.expand(&mut truncated)),
                None => out.push(p),
            }
        }
        out
    }

    fn resolve_with(
        &self,
        ctx: &PathContext,
        exec_paths: &[PathBuf],
        carve_files: Option<&[PathBuf]>,
    ) -> ResolvedRules {
        let fs = &self.filesystem;
        let mut ids = BTreeMap::new();
        let mut degraded = false;
        let mut rox = resolve_list(&fs.rox, ctx, &mut ids, &mut degraded);
        if self.advanced.add_exec || self.advanced.ldd {
            let execs: Vec<PathBuf> = exec_paths
                .iter()
                .filter_map(|p| existing(p, &mut degraded))
                .collect();
            if self.advanced.add_exec {
                rox.extend(execs.iter().cloned());
            }
            if self.advanced.ldd {
                for exe in &execs {
                    rox.extend(shared_libraries(exe));
                }
            }
        }
        let protected = carve_files.map_or_else(Vec::new, |files| carved_paths(ctx, files));
        let mut ro = resolve_list(&fs.ro, ctx, &mut ids, &mut degraded);
        ro.extend(self.env_granted(ctx, &protected, &mut degraded));
        let mut list = Vec::new();
        let mut carved = |paths| dedup(carve(paths, &protected, &mut list));
        let ro = carved(ro);
        let rox = carved(rox);
        let rw = carved(resolve_list(&fs.rw, ctx, &mut ids, &mut degraded));
        let rwx = carved(resolve_list(&fs.rwx, ctx, &mut ids, &mut degraded));
        let mut lists = [ro, rox, rw, rwx, dedup(list)];
        for l in &mut lists {
            l.retain(|p| identified(p, &mut ids, &mut degraded));
        }
        let [ro, rox, rw, rwx, list] = lists;
        ids.retain(|p, _| [&ro, &rox, &rw, &rwx, &list].iter().any(|l| l.contains(p)));
        ResolvedRules {
            ro,
            rox,
            rw,
            rwx,
            list,
            network: NetworkRules {
                enabled: self.network.enabled,
                bind_tcp: self.network.bind_tcp.clone(),
                connect_tcp: {
                    // Under `domains` the explicit proxy is one of the ports
                    // a limited list must let the tool reach.
                    let mut ports = self.network.connect_tcp.clone();
                    if !ports.is_empty() && !self.network.domains.is_empty() {
                        ports.push(crate::netns::PROXY_PORT);
                    }
                    ports
                },
                stream_only: false,
            },
            best_effort: self.general.best_effort,
            keyrings: self.advanced.keyrings,
            degraded,
            workdir: ctx.workdir.clone(),
            ids,
            view_roots: Default::default(),
        }
    }

    /// What the passed-through variables name that exists, canonical, for
    /// the `ro` list (`policy::env_paths`); never a path that is or lies in
    /// one of `protected` (a rule naming a protected path grants it, and
    /// these are nobody's rules).
    fn env_granted(
        &self,
        ctx: &PathContext,
        protected: &[PathBuf],
        degraded: &mut bool,
    ) -> Vec<PathBuf> {
        self.env_named_paths(ctx)
            .into_iter()
            .filter_map(|(_, p)| existing(&p, degraded))
            .filter(|p| !protected.iter().any(|q| p.starts_with(q)))
            .collect()
    }

    /// The allowlisted variables that are set in `own_env`, in allowlist order.
    pub fn env_passthrough(&self, own_env: &HashMap<String, String>) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for name in &self.env {
            if out.iter().any(|(n, _)| n == name) {
                continue;
            }
            if let Some(value) = own_env.get(name) {
                out.push((name.clone(), value.clone()));
            }
        }
        out
    }
}

/// The expanded, existing, canonical paths of one list (deduplicated later,
/// with the carving). Paths under `{CWD}` (`{WORKSPACE}`) are found beneath
/// the opened working directory (workspace), and their identity recorded in
/// `ids`.
fn resolve_list(
    paths: &[String],
    ctx: &PathContext,
    ids: &mut BTreeMap<PathBuf, FileId>,
    degraded: &mut bool,
) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|raw| match ctx.expand(raw) {
            Ok(p) => match opened_base(raw, ctx) {
                Some(wd) => beneath_workdir(wd, &p, ids, degraded),
                None => existing(&p, degraded),
            },
            Err(why) => {
                tracing::debug!(path = %raw, reason = %why, "sandbox policy path skipped");
                None
            }
        })
        .collect()
}

/// The opened directory a raw policy path is resolved beneath: the working
/// directory for `{CWD}` and `{CWD}/...`, the workspace for `{WORKSPACE}` and
/// `{WORKSPACE}/...` (the working directory when the context has no
/// workspace); `None` for every other path, or when the context has not
/// opened that directory.
fn opened_base<'a>(raw: &str, ctx: &'a PathContext) -> Option<&'a crate::workdir::WorkDir> {
    let starts = |var: &str| {
        raw.strip_prefix(var)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if starts("{CWD}") {
        ctx.workdir.as_deref()
    } else if starts("{WORKSPACE}") {
        ctx.workspace.as_deref().or(ctx.workdir.as_deref())
    } else {
        None
    }
}

/// `expanded` (`{CWD}` or `{WORKSPACE}` expanded to the opened directory's
/// path), looked up beneath the opened directory, never leaving it: its path
/// as the kernel has it, with its identity recorded.
fn beneath_workdir(
    wd: &crate::workdir::WorkDir,
    expanded: &Path,
    ids: &mut BTreeMap<PathBuf, FileId>,
    degraded: &mut bool,
) -> Option<PathBuf> {
    let rel = expanded.strip_prefix(wd.path()).ok()?;
    if rel.as_os_str().is_empty() {
        // The kernel's path: a directory opened by a path through a
        // symbolic link (a workspace given as such) is recorded by where it
        // is, so that opening the rule without following links finds it.
        let path = current_path(wd.fd()).unwrap_or_else(|| wd.path().to_path_buf());
        ids.insert(path.clone(), wd.id());
        return Some(path);
    }
    let found = open_beneath(wd.fd(), rel).and_then(|fd| {
        let (id, _) = identify(fd.as_fd())?;
        let path = current_path(fd.as_fd())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
        Ok((path, id))
    });
    match found {
        Ok((path, id)) => {
            ids.insert(path.clone(), id);
            Some(path)
        }
        Err(e) => {
            *degraded |= !absent(&e);
            tracing::debug!(path = %expanded.display(), error = %e,
                "sandbox policy path skipped: not found beneath the working directory");
            None
        }
    }
}

/// Whether `e` says a path is not there (or not a directory on the way, or
/// a symbolic link where none may be): not a failure to look at it.
fn absent(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EACCES | libc::EXDEV)
    )
}

/// Whether `path` (canonical) can still be opened without following a
/// symbolic link; records what it is in `ids` (unless already known). A
/// failure for another reason than its absence sets `degraded`.
fn identified(path: &Path, ids: &mut BTreeMap<PathBuf, FileId>, degraded: &mut bool) -> bool {
    if ids.contains_key(path) {
        return true;
    }
    match open_no_symlinks(path).and_then(|fd| identify(fd.as_fd())) {
        Ok((id, _)) => {
            ids.insert(path.to_path_buf(), id);
            true
        }
        Err(e) => {
            *degraded |= !absent(&e);
            tracing::debug!(path = %path.display(), error = %e,
                "sandbox policy path skipped: changed since it was resolved");
            false
        }
    }
}

/// The canonical form of `p`, or `None` (logged) when it does not exist
/// (setting `degraded` when it could not be looked at for another reason).
fn existing(p: &Path, degraded: &mut bool) -> Option<PathBuf> {
    match std::fs::canonicalize(p) {
        Ok(c) => Some(c),
        Err(e) => {
            *degraded |= !absent(&e);
            tracing::debug!(path = %p.display(), error = %e, "sandbox policy path skipped: does not exist or is not accessible");
            None
        }
    }
}

fn dedup(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for p in paths {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}
