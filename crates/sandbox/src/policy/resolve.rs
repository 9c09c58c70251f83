//! `Policy::resolve`: a policy plus a request context to concrete [`ResolvedRules`].

use super::ldd::shared_libraries;
use super::protected::{carve, carved_paths};
use super::{PathContext, Policy};
use crate::rules::{NetworkRules, ResolvedRules};
use std::collections::HashMap;
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
        let fs = &self.filesystem;
        let mut rox = resolve_list(&fs.rox, ctx);
        if self.advanced.add_exec || self.advanced.ldd {
            let execs: Vec<PathBuf> = exec_paths.iter().filter_map(|p| existing(p)).collect();
            if self.advanced.add_exec {
                rox.extend(execs.iter().cloned());
            }
            if self.advanced.ldd {
                for exe in &execs {
                    rox.extend(shared_libraries(exe));
                }
            }
        }
        let protected = carved_paths(ctx, server_files);
        let mut list = Vec::new();
        let mut carved = |paths| dedup(carve(paths, &protected, &mut list));
        let (ro, rox) = (carved(resolve_list(&fs.ro, ctx)), carved(rox));
        let (rw, rwx) = (
            carved(resolve_list(&fs.rw, ctx)),
            carved(resolve_list(&fs.rwx, ctx)),
        );
        ResolvedRules {
            ro,
            rox,
            rw,
            rwx,
            list: dedup(list),
            network: NetworkRules {
                enabled: self.network.enabled,
                bind_tcp: self.network.bind_tcp.clone(),
                connect_tcp: self.network.connect_tcp.clone(),
            },
            best_effort: self.general.best_effort,
        }
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
/// with the carving).
fn resolve_list(paths: &[String], ctx: &PathContext) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|raw| match ctx.expand(raw) {
            Ok(p) => existing(&p),
            Err(why) => {
                tracing::debug!(path = %raw, reason = %why, "sandbox policy path skipped");
                None
            }
        })
        .collect()
}

/// The canonical form of `p`, or `None` (logged) when it does not exist.
fn existing(p: &Path) -> Option<PathBuf> {
    match std::fs::canonicalize(p) {
        Ok(c) => Some(c),
        Err(e) => {
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
