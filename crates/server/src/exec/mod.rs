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

pub mod cache;
pub mod env;
pub mod prepare;
pub mod result;
pub mod run;
pub mod spawner;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use toolsrv_sandbox::confine::Confinement;
use toolsrv_sandbox::policy::{Policy, PolicyStore};
use toolsrv_sandbox::rules::ResolvedRules;
use toolsrv_sandbox::validate::{RateLimiter, Validator};
use toolsrv_sandbox::workdir::WorkDir;

pub use prepare::{Prepared, Refused};
use spawner::Spawner;

use crate::reaper::Tracked;
use crate::watchdog::Watchdog;

/// How many prepared confinements are kept for reuse.
const CONFINEMENT_CACHE: usize = 16;

/// The executor's long-lived state.
pub struct Executor {
    /// The sandbox policy (re-read when it changes) and its profiles.
    pub policy: PolicyStore,
    /// Per-agent rate limiting of validation refusals.
    pub rate: RateLimiter,
    /// toolsrv's own environment, read once at startup.
    pub own_env: HashMap<String, String>,
    /// Pretend the kernel supports at most this Landlock ABI (test hook).
    pub abi_limit: Option<i32>,
    spawner: Spawner,
    /// Tool pids the executor reaps itself (the orphan reaper leaves them alone).
    pub tracked: Arc<Tracked>,
    /// Kills tool process groups if toolsrv dies.
    watchdog: Option<Arc<Watchdog>>,
    validators: Mutex<Vec<(Arc<Policy>, Arc<Validator>)>>,
    /// Confinements by the rules they enforce (a re-resolved but equal set of
    /// rules reuses its ruleset). Rules compare by the files they were
    /// resolved to (`ResolvedRules::ids`, the working directory's identity),
    /// not only by their paths.
    confinements: Mutex<Vec<(Arc<ResolvedRules>, Arc<Confinement>)>>,
    /// Resolved rules by (policy, working directory opened, executables).
    rules: cache::TtlCache<
        (
            cache::Same<Policy>,
            toolsrv_sandbox::open::FileId,
            Vec<std::path::PathBuf>,
        ),
        Arc<ResolvedRules>,
    >,
    /// `--cwd`, opened at startup: every sandboxed request's working
    /// directory is looked up beneath this descriptor.
    base_cwd: Arc<WorkDir>,
    /// The private temporary directory (checked at most every [`cache::TTL`]).
    tmpdir: cache::TtlCache<(), Option<std::path::PathBuf>>,
}

impl Executor {
    /// An executor using `policy`, running tools beneath `cwd` (`--cwd`).
    pub fn new(
        policy: PolicyStore,
        cwd: &std::path::Path,
        abi_limit: Option<i32>,
        watchdog: Option<Arc<Watchdog>>,
    ) -> std::io::Result<Executor> {
        let base_cwd = Arc::new(WorkDir::open(cwd).map_err(std::io::Error::other)?);
        let tracked = Arc::new(Tracked::default());
        Ok(Executor {
            spawner: Spawner::new(tracked.clone(), watchdog.clone()),
            tracked,
            watchdog,
            policy,
            rate: RateLimiter::new(),
            own_env: std::env::vars().collect(),
            abi_limit,
            validators: Mutex::new(Vec::new()),
            confinements: Mutex::new(Vec::new()),
            rules: cache::TtlCache::default(),
            tmpdir: cache::TtlCache::default(),
            base_cwd,
        })
    }

    /// The validator for `policy` (built-in rules plus its `validation.deny`), cached.
    fn validator(&self, policy: &Arc<Policy>) -> Result<Arc<Validator>, Refused> {
        let mut cache = self.validators.lock().unwrap_or_else(|p| p.into_inner());
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
            let mut cache = self.confinements.lock().unwrap_or_else(|p| p.into_inner());
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
            Confinement::prepare_with_abi_limit(rules, self.abi_limit)
                .map_err(|e| Refused(format!("sandbox: {e}")))?,
        );
        for note in c.unenforced() {
            tracing::warn!(what = %note, "sandbox rule not enforced by this kernel (best effort)");
        }
        let mut cache = self.confinements.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CONFINEMENT_CACHE {
            cache.remove(0);
        }
        cache.push((rules.clone(), c.clone()));
        Ok(c)
    }
}
