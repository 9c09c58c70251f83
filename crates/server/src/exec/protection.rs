//! How a confined run's filesystem is protected, chosen once at start-up
//! (docs/sandbox-policy.md, "The filesystem view"): a **view** (the run
//! enters a mount namespace prepared for its policy, where the server's own
//! files and the protected paths are hidden or read-only), or, on a host
//! that cannot make one, **carving** (those paths are cut out of every
//! Landlock rule). The planner asks this type, never which of the two it is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolsrv_sandbox::{Kind, PathContext, Policy, ResolvedRules, View, WorkDir};

use super::views::Views;
use super::Refused;
use crate::guard::Guard;

/// The filesystem protection of every confined run of this server.
pub(crate) enum Protection {
    /// Each policy has a view; the guard acts on what runs leave behind.
    View {
        /// The views, one per policy in use.
        views: Arc<Views>,
        /// What acts on what confined runs leave behind.
        guard: Option<Arc<Guard>>,
    },
    /// The server's files (and what the live registry entries hide) are
    /// carved out of every rule.
    Carving(Carving),
}

/// The Landlock-only fallback's state: what is cut out of every rule.
#[derive(Default)]
pub(crate) struct Carving {
    /// The server's own files (absolute).
    carve: Vec<PathBuf>,
    /// Every carved path, expanded (a request's `cwd` there is refused).
    carved: Vec<PathBuf>,
    /// The per-user registry of live servers and bridges: what its entries
    /// hide is carved too, read again at each resolution.
    registry: Option<PathBuf>,
}

impl Carving {
    /// Carving `carve` (absolute) and what the registry's live entries hide;
    /// `carved` is the expanded list (for refusing a `cwd` there).
    pub(crate) fn new(
        carve: Vec<PathBuf>,
        carved: Vec<PathBuf>,
        registry: Option<PathBuf>,
    ) -> Carving {
        Carving {
            carve,
            carved,
            registry,
        }
    }

    /// What is carved out of a resolution made now: the server's own files
    /// and what the live entries of the per-user registry hide (other
    /// servers' sockets and secrets, bridges' token files).
    fn carve_now(&self) -> Vec<PathBuf> {
        let mut carve = self.carve.clone();
        if let Some(dir) = &self.registry {
            for entry in toolsrv_base::registry::live_entries(dir) {
                carve.extend(entry.hidden_paths());
            }
        }
        carve
    }
}

impl Default for Protection {
    fn default() -> Self {
        Protection::Carving(Carving::default())
    }
}

impl Protection {
    /// The guard of what runs leave behind (views only).
    pub(crate) fn guard(&self) -> Option<&Arc<Guard>> {
        match self {
            Protection::View { guard, .. } => guard.as_ref(),
            Protection::Carving(_) => None,
        }
    }

    /// The view a confined run of `policy` enters (`None`: carving), built
    /// when there is none yet.
    pub(crate) async fn view_for(
        &self,
        policy: &Arc<Policy>,
    ) -> Result<Option<Arc<View>>, Refused> {
        match self {
            Protection::View { views, .. } => {
                Ok(Some(views.get(policy).await.map_err(Refused::View)?))
            }
            Protection::Carving(_) => Ok(None),
        }
    }

    /// The protected path that is `path` or holds it, and whether it is
    /// hidden (else read-only): the view's protected set, else the carved
    /// paths (all hidden).
    pub(crate) fn covering(&self, view: Option<&View>, path: &Path) -> Option<(PathBuf, bool)> {
        match (self, view) {
            (_, Some(v)) => v
                .protected()
                .covering(path)
                .map(|e| (e.path.clone(), matches!(e.kind, Kind::Hidden))),
            (Protection::Carving(c), None) => c
                .carved
                .iter()
                .find(|p| path.starts_with(p))
                .map(|p| (p.clone(), true)),
            (Protection::View { .. }, None) => None,
        }
    }

    /// Refuses a working directory that is a protected path or lies in one
    /// (docs/sandbox-policy.md, "Protected paths").
    pub(crate) fn check_cwd(&self, cwd: &Path, view: Option<&View>) -> Result<(), Refused> {
        match self.covering(view, cwd) {
            Some((path, hidden)) => Err(Refused::ProtectedCwd {
                cwd: cwd.display().to_string(),
                path: path.display().to_string(),
                what: if hidden { "hidden" } else { "read-only" },
            }),
            None => Ok(()),
        }
    }

    /// The directory a confined request's `cwd` is looked up beneath: the
    /// workspace inside the view, else `--cwd` itself.
    pub(crate) fn workspace<'a>(
        &self,
        view: Option<&'a Arc<View>>,
        base: &'a Arc<WorkDir>,
    ) -> &'a Arc<WorkDir> {
        view.map_or(base, |v| v.workspace())
    }

    /// `policy`'s rules for a run of `exec` in `ctx`: whole, with the view's
    /// roots, or with the server's files carved out.
    pub(crate) fn resolve(
        &self,
        policy: &Policy,
        ctx: &PathContext,
        exec: &[PathBuf],
        view: Option<&View>,
    ) -> ResolvedRules {
        match (self, view) {
            (_, Some(v)) => {
                let mut r = policy.resolve_whole(ctx, exec);
                r.view_roots = v.roots();
                r
            }
            (Protection::Carving(c), None) => policy.resolve_carving(ctx, exec, &c.carve_now()),
            (Protection::View { .. }, None) => policy.resolve_whole(ctx, exec),
        }
    }

    /// Makes the tool's own files visible in `view` where no bind shows them,
    /// when the policy grants them (`advanced.add_exec`): a tool whose
    /// program lies outside every rule (`/opt/x/bin/tool`) still starts.
    /// Done on a blocking thread (a few mounts), and only when something is
    /// missing. Nothing to do where there is no view.
    pub(crate) async fn expose(
        &self,
        view: Option<&Arc<View>>,
        policy: &Policy,
        exec: &[PathBuf],
    ) -> Result<(), Refused> {
        let Some(view) = view else {
            return Ok(());
        };
        if !policy.advanced.add_exec {
            return Ok(());
        }
        let files = view.unshown(exec);
        if files.is_empty() {
            return Ok(());
        }
        let v = view.clone();
        match tokio::task::spawn_blocking(move || v.expose(&files)).await {
            Ok(Ok(n)) => {
                tracing::debug!(added = n, "filesystem view: a tool's own files shown in it");
                Ok(())
            }
            Ok(Err(e)) => Err(Refused::View(e)),
            Err(e) => Err(Refused::View(toolsrv_sandbox::ViewError::Step {
                step: "show a tool's files",
                path: PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            })),
        }
    }
}

/// What [`Protection::choose`] needs of the server.
pub(crate) struct Start<'a> {
    /// The server's own files (the policy file, its profiles directory, the
    /// tools directory, the socket and its secret file; relative paths are
    /// taken against the current directory) and the per-user registry.
    pub(crate) files: &'a toolsrv_sandbox::ServerFiles,
    /// `--cwd`.
    pub(crate) cwd: &'a Path,
    /// How this host protects the filesystem (`--filesystem`, probed).
    pub(crate) mechanism: &'a toolsrv_sandbox::ViewMechanism,
    /// toolsrv's own environment.
    pub(crate) env: &'a std::collections::HashMap<String, String>,
    /// The policy in effect at start-up (its view is built first).
    pub(crate) policy: Arc<Policy>,
    /// The tools PID namespace, the fanotify watcher and the quarantine.
    pub(crate) watch: &'a Arc<crate::watch::Watch>,
}

impl Protection {
    /// The protection this host gives: views where it can make them (their
    /// first is built at once, by their own thread), else carving, logging
    /// what is carved. A carved path inside `--cwd` is worth a warning,
    /// since tools then cannot create files in the directories that lead
    /// to it.
    pub(crate) fn choose(s: Start<'_>) -> Protection {
        let absolute = |v: &[PathBuf]| -> Vec<PathBuf> {
            let mut out: Vec<PathBuf> = Vec::new();
            for f in v {
                match std::path::absolute(f) {
                    Ok(p) if !out.contains(&p) => out.push(p),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(path = %f.display(), error = %e, "cannot make the path absolute; not protected")
                    }
                }
            }
            out
        };
        if s.mechanism.is_view() {
            let files = toolsrv_sandbox::ServerFiles {
                hidden: absolute(&s.files.hidden),
                read_only: absolute(&s.files.read_only),
                shown: absolute(&s.files.shown),
                registry: s.files.registry.clone(),
            };
            let workspace = std::fs::canonicalize(s.cwd).unwrap_or_else(|_| s.cwd.to_path_buf());
            let guard = Guard::start(s.watch.clone());
            let views = Views::start(&workspace, files, s.env.clone(), s.policy, guard.clone());
            return Protection::View { views, guard };
        }
        let all_files: Vec<PathBuf> = s
            .files
            .hidden
            .iter()
            .chain(&s.files.read_only)
            .cloned()
            .collect();
        let carve = absolute(&all_files);
        let ctx = PathContext {
            cwd: s.cwd.to_path_buf(),
            workdir: None,
            workspace: None,
            env: s.env.clone(),
        };
        let all = toolsrv_sandbox::carved_paths(&ctx, &carve);
        log_carved(&all, s.cwd);
        Protection::Carving(Carving::new(carve, all, s.files.registry.clone()))
    }
}

/// Logs what carving cuts out, and warns of what of it lies inside `cwd`.
fn log_carved(all: &[PathBuf], cwd: &Path) {
    let list = |v: &[&PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    tracing::info!(
        count = all.len(),
        paths = %list(&all.iter().collect::<Vec<_>>()),
        "sandbox: carved out of every rule (unreadable and unwritable unless a rule names them)"
    );
    let inside: Vec<&PathBuf> = all
        .iter()
        .filter(|p| p.as_path() != cwd && p.starts_with(cwd))
        .collect();
    if !inside.is_empty() {
        tracing::warn!(
            cwd = %cwd.display(),
            paths = %list(&inside),
            "carved paths lie inside --cwd: tools can neither read nor write them, nor create or remove \
             entries in the directories that lead to them (--cwd included); keep the socket, policy and \
             tools outside the working directory"
        );
    }
}
