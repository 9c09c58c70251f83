//! The tool executor (architecture, `exec.ExecuteTool`):
//!
//! 1. resolve the tool and its command ([`prepare`]),
//! 2. take the dispatch fields (`bypass`, `timeout`, `sandbox`) out of the arguments
//!    (the payload parser does that),
//! 3. resolve working directory and environment ([`env`]),
//! 4. validate and route: sandboxed (Landlock from the policy), `--yolo`, or bypass,
//! 5. spawn, capture output under the safety limit, enforce timeout and cancellation
//!    ([`run`], [`spawner`]),
//! 6. return a structured ToolResult ([`result`]).
//!
//! `impl Executor` is split by job, one block per file: here its state and
//! the per-generation policy, validator and confinement it hands out;
//! `prepare.rs` a request up to a [`Prepared`] run; `run.rs` running one.

mod cache;
mod env;
mod prepare;
mod refusals;
pub(crate) mod result;
mod run;
mod spawner;
mod views;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use toolsrv_base::LockUnpoisoned;
use toolsrv_sandbox::Confinement;
use toolsrv_sandbox::Containment;
use toolsrv_sandbox::ResolvedRules;
use toolsrv_sandbox::WorkDir;
use toolsrv_sandbox::{PathContext, Policy, PolicyStore};
use toolsrv_validate::{RateLimiter, Validator};

pub(crate) use prepare::{Prepared, Refused, Served};
use spawner::Spawner;

use crate::reaper::Tracked;
use crate::watchdog::Watchdog;

/// How many prepared confinements are kept for reuse.
const CONFINEMENT_CACHE: usize = 16;

/// What resolved rules are cached by: the policy, the working directory
/// opened, the tool as loaded (a tool file replaced by rename is reloaded
/// as a new value, and its rule must name the new file), the executables,
/// and the view they are for (its address: a view's copy-on-write caches
/// are its own files).
type RulesKey = (
    cache::Same<Policy>,
    toolsrv_sandbox::FileId,
    cache::Same<toolsrv_metadata::Tool>,
    Vec<std::path::PathBuf>,
    usize,
);

/// The executor's long-lived state.
pub(crate) struct Executor {
    /// The sandbox policy (re-read when it changes) and its profiles.
    pub(crate) policy: PolicyStore,
    /// Per-agent rate limiting of validation refusals.
    pub(crate) rate: RateLimiter,
    /// toolsrv's own environment, read once at startup.
    pub(crate) own_env: HashMap<String, String>,
    /// Pretend the kernel supports at most this Landlock ABI (test hook).
    pub(crate) abi_limit: Option<i32>,
    /// The server's own files, carved out of every sandbox rule where there
    /// is no filesystem view (see [`Executor::set_server_files`]).
    carve: Vec<std::path::PathBuf>,
    /// Where there is no view: every carved path (a request's `cwd` there is
    /// refused).
    carved: Vec<std::path::PathBuf>,
    /// The per-user registry of live servers and bridges: where there is no
    /// view, what they hide is carved too, read again at each resolution.
    pub(crate) registry: Option<std::path::PathBuf>,
    /// The filesystem views, where the host can make them.
    views: Option<Arc<views::Views>>,
    /// What acts on what confined runs leave behind (with the views).
    pub(crate) guard: Option<Arc<crate::guard::Guard>>,
    spawner: Spawner,
    /// Tool pids the executor reaps itself (the orphan reaper leaves them alone).
    pub(crate) tracked: Arc<Tracked>,
    /// Kills tool process groups if toolsrv dies.
    watchdog: Option<Arc<Watchdog>>,
    /// The tools PID namespace, the fanotify watcher and the quarantine.
    pub(crate) watch: Arc<crate::watch::Watch>,
    /// The kernel groups that hold each run, and their limits.
    pub(crate) containment: Arc<Containment>,
    validators: Mutex<Vec<(Arc<Policy>, Arc<Validator>)>>,
    /// Confinements by the rules they enforce (a re-resolved but equal set of
    /// rules reuses its ruleset). Rules compare by the files they were
    /// resolved to (`ResolvedRules::ids`, the working directory's identity),
    /// not only by their paths.
    confinements: Mutex<Vec<(Arc<ResolvedRules>, Arc<Confinement>)>>,
    /// Resolved rules by (policy, working directory opened, executables, the
    /// view they are for).
    rules: cache::TtlCache<RulesKey, Arc<ResolvedRules>>,
    /// `--cwd`, opened at startup: every sandboxed request's working
    /// directory is looked up beneath this descriptor.
    base_cwd: Arc<WorkDir>,
    /// The private temporary directory (checked at most every [`cache::TTL`]).
    tmpdir: cache::TtlCache<(), Option<std::path::PathBuf>>,
    /// The policy in effect and the file-watch generation it was checked at
    /// ([`Executor::current_policy`]).
    policy_checked: Mutex<Option<(u64, Arc<Policy>)>>,
}

impl Executor {
    /// An executor using `policy`, running tools beneath `cwd` (`--cwd`).
    pub(crate) fn new(
        policy: PolicyStore,
        cwd: &std::path::Path,
        abi_limit: Option<i32>,
        watchdog: Option<Arc<Watchdog>>,
        containment: Arc<Containment>,
        watch: Arc<crate::watch::Watch>,
    ) -> std::io::Result<Executor> {
        let base_cwd = Arc::new(WorkDir::open(cwd).map_err(std::io::Error::other)?);
        let tracked = Arc::new(Tracked::default());
        tracked.set_watch(watch.clone());
        Ok(Executor {
            spawner: Spawner::new(tracked.clone(), watchdog.clone(), watch.tools_ns().cloned()),
            watch,
            tracked,
            watchdog,
            containment,
            policy,
            rate: RateLimiter::new(),
            own_env: std::env::vars().collect(),
            abi_limit,
            carve: Vec::new(),
            carved: Vec::new(),
            registry: None,
            views: None,
            guard: None,
            validators: Mutex::new(Vec::new()),
            confinements: Mutex::new(Vec::new()),
            rules: cache::TtlCache::default(),
            tmpdir: cache::TtlCache::default(),
            policy_checked: Mutex::new(None),
            base_cwd,
        })
    }

    /// Carve `files` (the policy file, its profiles directory, the tools
    /// directory, the socket and its secret file; relative paths are taken
    /// against the current directory) out of every sandbox rule, like the
    /// credential files and stores (docs/containment.md), and log what is carved.
    /// `cwd` is the server's `--cwd`: a carved path inside it is worth a
    /// warning, since tools then cannot create files in the directories that
    /// lead to it.
    pub(crate) fn set_server_files(
        &mut self,
        files: &toolsrv_sandbox::ServerFiles,
        cwd: &std::path::Path,
        mechanism: &toolsrv_sandbox::ViewMechanism,
    ) {
        if mechanism.is_view() {
            let absolute = |v: &[std::path::PathBuf]| {
                v.iter()
                    .filter_map(|p| std::path::absolute(p).ok())
                    .collect::<Vec<_>>()
            };
            let files = toolsrv_sandbox::ServerFiles {
                hidden: absolute(&files.hidden),
                read_only: absolute(&files.read_only),
                shown: absolute(&files.shown),
                registry: files.registry.clone(),
            };
            let workspace = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
            self.guard = crate::guard::Guard::start(self.watch.clone());
            self.views = Some(views::Views::start(
                &workspace,
                files,
                self.own_env.clone(),
                self.policy.current(),
                self.guard.clone(),
            ));
            return;
        }
        let mut carve: Vec<std::path::PathBuf> = Vec::new();
        for f in files.hidden.iter().chain(&files.read_only) {
            match std::path::absolute(f) {
                Ok(p) if !carve.contains(&p) => carve.push(p),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(path = %f.display(), error = %e, "cannot make the path absolute; not carved")
                }
            }
        }
        self.carve = carve;
        let ctx = PathContext {
            cwd: cwd.to_path_buf(),
            workdir: None,
            workspace: None,
            env: self.own_env.clone(),
        };
        let all = toolsrv_sandbox::carved_paths(&ctx, &self.carve);
        self.carved = all.clone();
        let list = |v: &[std::path::PathBuf]| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        tracing::info!(
            count = all.len(),
            paths = %list(&all),
            "sandbox: carved out of every rule (unreadable and unwritable unless a rule names them)"
        );
        let inside: Vec<std::path::PathBuf> = all
            .into_iter()
            .filter(|p| p != cwd && p.starts_with(cwd))
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

    /// What the Landlock-only fallback carves out of every rule: the server's
    /// own files and what the live entries of the per-user registry hide
    /// (other servers' sockets and secrets, bridges' token files).
    fn carve_now(&self) -> Vec<std::path::PathBuf> {
        let mut carve = self.carve.clone();
        if let Some(dir) = &self.registry {
            for entry in toolsrv_base::registry::live_entries(dir) {
                carve.extend(entry.hidden_paths());
            }
        }
        carve
    }

    /// The policy in effect ([`PolicyStore::current`]), looked at again only
    /// when the file-watch `generation` moved since it last was (the policy
    /// file is watched from startup: see [`crate::filewatch`]).
    fn current_policy(&self, generation: u64) -> Arc<Policy> {
        if let Some((g, p)) = &*self.policy_checked.lock_unpoisoned() {
            if *g == generation {
                return p.clone();
            }
        }
        // A policy file a tool just planted goes to quarantine before it
        // can be read (`crate::guard`).
        if let Some(g) = &self.guard {
            g.catch_up();
        }
        let p = self.policy.current();
        *self.policy_checked.lock_unpoisoned() = Some((generation, p.clone()));
        p
    }

    /// Prepares at startup what the first call under the policy in effect
    /// would otherwise build: its validator, with the built-in rules'
    /// regular expressions (compiled on their first use: a check of a
    /// harmless command). Its filesystem view is built by the views' own
    /// thread.
    pub(crate) fn warm_up(&self) {
        match self.validator(&self.policy.current()) {
            Ok(v) => {
                let _ = v.check("true", &[]);
            }
            Err(e) => {
                tracing::debug!(error = %e, "the validator could not be built at startup; the first call reports it");
            }
        }
    }

    /// The validator for `policy` (built-in rules plus its `validation.deny`), cached.
    fn validator(&self, policy: &Arc<Policy>) -> Result<Arc<Validator>, Refused> {
        let mut cache = self.validators.lock_unpoisoned();
        if let Some((_, v)) = cache.iter().find(|(p, _)| Arc::ptr_eq(p, policy)) {
            return Ok(v.clone());
        }
        let v = Arc::new(Validator::new(&policy.validation.deny)?);
        if cache.len() >= 4 {
            cache.remove(0);
        }
        cache.push((policy.clone(), v.clone()));
        Ok(v)
    }

    /// The prepared Landlock/seccomp confinement for `rules`, cached.
    fn confinement(&self, rules: &Arc<ResolvedRules>) -> Result<Arc<Confinement>, Refused> {
        {
            let mut cache = self.confinements.lock_unpoisoned();
            // The same resolution (the common case) is found by identity,
            // without comparing every path.
            if let Some((_, c)) = cache.iter().find(|(r, _)| Arc::ptr_eq(r, rules)) {
                return Ok(c.clone());
            }
            // A re-resolution that came out equal: keep its ruleset, and key
            // it by the new resolution from now on.
            if let Some((r, c)) = cache.iter_mut().find(|(r, _)| **r == **rules) {
                *r = rules.clone();
                return Ok(c.clone());
            }
        }
        let c = Arc::new(
            Confinement::prepare_with_abi_limit(rules, self.abi_limit).map_err(Refused::Sandbox)?,
        );
        for note in c.unenforced() {
            tracing::warn!(what = %note, "sandbox rule not enforced by this kernel (best effort)");
        }
        if c.rules_skipped() || rules.degraded {
            // Used for this run only: a rule missing for now (out of
            // descriptors) must not stay missing for the next runs.
            return Ok(c);
        }
        let mut cache = self.confinements.lock_unpoisoned();
        if cache.len() >= CONFINEMENT_CACHE {
            cache.remove(0);
        }
        cache.push((rules.clone(), c.clone()));
        Ok(c)
    }
}
