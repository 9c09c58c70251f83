//! The tool executor (architecture, `exec.ExecuteTool`):
//!
//! 1. resolve the tool and its command ([`planner`]),
//! 2. take the dispatch fields (`bypass`, `timeout`, `sandbox`) out of the arguments
//!    (the payload parser does that),
//! 3. resolve working directory and environment ([`env`]),
//! 4. validate and route: sandboxed (Landlock from the policy), `--yolo`, or bypass,
//! 5. spawn, capture output under the safety limit, enforce timeout and cancellation
//!    ([`runner`], [`spawner`]),
//! 6. return a structured ToolResult ([`result`]).
//!
//! A call goes request → [`RunPlan`] → run → result: the planner
//! (`planner.rs`) makes the plan from the request with the compiled policy
//! (`policies.rs`) and the filesystem protection (`protection.rs`); the
//! runner (`runner/`) starts, supervises and reaps it and pumps its output;
//! the plan builds the result (`plan.rs`, `result.rs`).

mod cache;
mod env;
mod network;
mod plan;
mod planner;
mod policies;
mod protection;
mod refusals;
mod result;
mod runner;
mod secrets;
mod spawner;
mod views;

use std::collections::HashMap;
use std::sync::Arc;

use toolsrv_sandbox::Containment;
use toolsrv_sandbox::PolicyStore;
use toolsrv_sandbox::WorkDir;
use toolsrv_validate::RateLimiter;

pub(crate) use plan::RunPlan;
pub(crate) use planner::{Refused, Served};
pub(crate) use policies::Policies;
use protection::{Protection, Start};

use spawner::Spawner;

use crate::reaper::Tracked;
use crate::watchdog::Watchdog;

/// The executor: the policies compiled as they are used, the filesystem
/// protection chosen at start-up, the host's facts, and the runner.
pub(crate) struct Executor {
    /// The policy file, its profiles, and what is derived from each.
    pub(crate) policies: Policies,
    /// How confined runs' filesystem is protected (view or carving).
    protection: Protection,
    /// Per-agent rate limiting of validation refusals.
    pub(crate) rate: RateLimiter,
    /// What of the host every plan starts from.
    pub(crate) host: Host,
    /// What carries plans out.
    pub(crate) runner: Runner,
}

/// What of the host every plan starts from.
pub(crate) struct Host {
    /// toolsrv's own environment, read once at startup.
    pub(crate) own_env: HashMap<String, String>,
    /// `--cwd`, opened at startup: every sandboxed request's working
    /// directory is looked up beneath this descriptor.
    base_cwd: Arc<WorkDir>,
    /// The private temporary directory (checked at most every [`cache::TTL`]).
    tmpdir: cache::TtlCache<(), Option<std::path::PathBuf>>,
}

/// What carries plans out: the spawner and the books it keeps, the kernel
/// groups, the tools PID namespace.
pub(crate) struct Runner {
    spawner: Spawner,
    /// Tool pids the executor reaps itself (the orphan reaper leaves them alone).
    pub(crate) tracked: Arc<Tracked>,
    /// Kills tool process groups if toolsrv dies.
    watchdog: Option<Arc<Watchdog>>,
    /// The tools PID namespace, the fanotify watcher and the quarantine.
    pub(crate) watch: Arc<crate::watch::Watch>,
    /// The kernel groups that hold each run, and their limits.
    pub(crate) containment: Arc<Containment>,
}

impl Executor {
    /// An executor using `policy`, running tools beneath `cwd` (`--cwd`).
    /// Confined runs' filesystem is unprotected until [`Executor::protect`].
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
            policies: Policies::new(policy, abi_limit),
            protection: Protection::default(),
            rate: RateLimiter::new(),
            host: Host {
                own_env: std::env::vars().collect(),
                base_cwd,
                tmpdir: cache::TtlCache::default(),
            },
            runner: Runner {
                spawner: Spawner::new(tracked.clone(), watchdog.clone(), watch.tools_ns().cloned()),
                watch,
                tracked,
                watchdog,
                containment,
            },
        })
    }

    /// Chooses, once, the filesystem protection of every confined run: a
    /// view per policy where `mechanism` can make one, else carving `files`
    /// out of every rule (docs/containment.md). `cwd` is `--cwd`.
    pub(crate) fn protect(
        &mut self,
        files: &toolsrv_sandbox::ServerFiles,
        cwd: &std::path::Path,
        mechanism: &toolsrv_sandbox::ViewMechanism,
    ) {
        self.protection = Protection::choose(Start {
            files,
            cwd,
            mechanism,
            env: &self.host.own_env,
            policy: self.policies.store.current(),
            watch: &self.runner.watch,
        });
    }

    /// Prepares at startup what the first call would otherwise build (see
    /// [`Policies::warm_up`]). The filesystem view is built by the views'
    /// own thread.
    pub(crate) fn warm_up(&self) {
        self.policies.warm_up();
    }
}
