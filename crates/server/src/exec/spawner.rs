//! Starting a tool: on the calling runtime worker thread, recorded as tracked (so
//! the orphan reaper leaves it alone) and announced to the watchdog.
//!
//! The parent-death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that
//! created the child exits. Tools are spawned from tokio's worker threads, which
//! live as long as the runtime, never from the blocking pool (whose threads exit
//! when idle). The spawn does not wait for the child's `execve`
//! (`spawn_detached`): the worker goes on serving while the child sets itself
//! up, and a setup failure is learnt when the child is reaped. A hop to a
//! dedicated spawner thread cost more (two cross-thread wake-ups per call,
//! measured in `toolsrv-bench call-rtt`).

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use toolsrv_sandbox::confine::Confinement;
use toolsrv_sandbox::spawn::{spawn_detached, Child, SpawnError, SpawnSpec};
use toolsrv_sandbox::workdir::WorkDir;

use crate::reaper::Tracked;
use crate::watchdog::Watchdog;

/// Everything a spawn needs, owned.
pub(crate) struct Job {
    /// Absolute program path.
    pub(crate) program: CString,
    /// argv, `argv[0]` first.
    pub(crate) argv: Vec<CString>,
    /// `NAME=value` strings.
    pub(crate) envp: Vec<CString>,
    /// Working directory (for messages).
    pub(crate) cwd: CString,
    /// The working directory, opened: the child `fchdir`s to it.
    pub(crate) workdir: Arc<WorkDir>,
    /// Write end of the output pipe; closed in the parent right after the spawn.
    pub(crate) output: OwnedFd,
    /// Landlock/seccomp to apply, or none (`--yolo`, approved bypass).
    pub(crate) confinement: Option<Arc<Confinement>>,
    /// How the child joins its run's group and takes its limits.
    pub(crate) join: toolsrv_sandbox::spawn::Join,
}

/// Starts tools and keeps the books on them.
pub(crate) struct Spawner {
    tracked: Arc<Tracked>,
    watchdog: Option<Arc<Watchdog>>,
}

impl Spawner {
    /// A spawner recording into `tracked` and announcing to `watchdog`.
    pub(crate) fn new(tracked: Arc<Tracked>, watchdog: Option<Arc<Watchdog>>) -> Spawner {
        if let Err(e) = toolsrv_sandbox::spawn::preopen() {
            tracing::warn!(error = %e, "cannot open /dev/null now; each spawn will try again");
        }
        Spawner { tracked, watchdog }
    }

    /// Start `job` now, on this thread, without waiting for its `execve`. The
    /// pipe's write end is closed on return.
    pub(crate) fn spawn(&self, job: Job) -> Result<Child, SpawnError> {
        let spec = SpawnSpec {
            program: &job.program,
            argv: &job.argv,
            envp: &job.envp,
            cwd: &job.cwd,
            cwd_fd: Some(job.workdir.fd()),
            output: std::os::fd::AsFd::as_fd(&job.output),
            confinement: job.confinement.as_deref(),
            join: job.join,
        };
        let child = self
            .tracked
            .spawning(|| spawn_detached(&spec), Child::pid)?;
        if let Some(w) = &self.watchdog {
            w.track(child.pid());
        }
        Ok(child)
    }
}
