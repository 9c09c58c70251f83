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
//!
//! The seccomp filter every confined run shares is attached once to each
//! worker thread that starts a confined tool (`confine_this_thread`), and the
//! children inherit it. An unconfined tool (an approved bypass run) must not:
//! when the current thread carries the filter, it is started by the
//! [`unconfined`] thread instead, which never does. So is a confined tool
//! whose policy allows what the shared filter refuses (`advanced.keyrings`):
//! its child attaches a program of its own; it is started by a second such
//! thread, which carries no filter either but joins the tools PID namespace.
//!
//! Where the server has a tools PID namespace (`toolsrv_watch`, see
//! docs/watch.md), a thread that starts a confined tool joins it for its
//! children first (once per thread: `setns(CLONE_NEWPID)` changes only where
//! that thread's children are born), so every process of every sandboxed run
//! is in it; an unconfined tool is then started by the [`unconfined`]
//! thread too, which never joins. A confined tool is never started outside
//! the namespace: if it cannot be joined, the run fails. When the
//! namespace's init died (the kernel then answers a fork into it with
//! ENOMEM), the spawn waits up to [`REVIVE_WAIT`] for the new namespace the
//! watch makes and is tried once more.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use toolsrv_sandbox::Confinement;
use toolsrv_sandbox::{spawn_detached, Child, SpawnError, SpawnSpec};

use super::plan::{ExecStrings, RunPlan};
use toolsrv_watch::ToolsPidNs;

use crate::reaper::Tracked;
use crate::watchdog::Watchdog;

/// What the runner opened for one child: its standard descriptors, its
/// argument files, and how it joins its run's group. The rest of what a
/// spawn needs is the plan's.
pub(crate) struct ChildEnds {
    /// What the child reads on descriptor 0 (`None`: `/dev/null`).
    pub(crate) stdin: Option<OwnedFd>,
    /// Where descriptors 1 and 2 go. The run keeps its own reference until
    /// the tool has exited (see `exec::runner`), so the spawner's is not
    /// the last.
    pub(crate) output: Arc<OwnedFd>,
    /// The files the tool gets as its descriptors 3, 4, … (its `file: true`
    /// arguments); closed here once the child has its copies.
    pub(crate) files: Vec<OwnedFd>,
    /// How the child joins its run's group and takes its limits.
    pub(crate) join: toolsrv_sandbox::Join,
}

/// One spawn carried to the thread that makes it: the plan (shared, not
/// copied), its strings, and the child's descriptors.
struct Job {
    plan: Arc<RunPlan>,
    strings: ExecStrings,
    ends: ChildEnds,
}

/// How long a confined spawn waits for a new tools PID namespace after the
/// last one's init died.
const REVIVE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Starts tools and keeps the books on them.
pub(crate) struct Spawner {
    tracked: Arc<Tracked>,
    watchdog: Option<Arc<Watchdog>>,
    /// The PID namespace confined tools are born in, if the server has one.
    tools_ns: Option<ToolsPidNs>,
}

impl Spawner {
    /// A spawner recording into `tracked`, announcing to `watchdog` and
    /// starting confined tools in `tools_ns`.
    pub(crate) fn new(
        tracked: Arc<Tracked>,
        watchdog: Option<Arc<Watchdog>>,
        tools_ns: Option<ToolsPidNs>,
    ) -> Spawner {
        if let Err(e) = toolsrv_sandbox::preopen() {
            tracing::warn!(error = %e, "cannot open /dev/null now; each spawn will try again");
        }
        // Before any thread carries the filter: a thread inherits its
        // creator's seccomp filter.
        unconfined::start();
        toolsrv_sandbox::start_network_maker();
        Spawner {
            tracked,
            watchdog,
            tools_ns,
        }
    }

    /// Start `plan` now, on this thread (or the thread its confinement
    /// needs), without waiting for its `execve`. The reference in `ends` to
    /// the output's write end is dropped on return.
    pub(crate) fn spawn(
        &self,
        plan: &Arc<RunPlan>,
        strings: ExecStrings,
        ends: ChildEnds,
    ) -> Result<Child, SpawnError> {
        use toolsrv_sandbox::{confine_this_thread, thread_is_confined};
        let mut job = Job {
            plan: plan.clone(),
            strings,
            ends,
        };
        let unfiltered = job
            .plan
            .confinement
            .as_deref()
            .is_some_and(Confinement::needs_unfiltered_thread);
        if unfiltered {
            // A policy that allows what the shared filter refuses (the
            // keyrings): its child attaches its own program, on a thread
            // that carries none, and is still born in the tools namespace.
            let tools_ns = self.tools_ns.clone();
            if tools_ns.is_some() {
                job.ends.join.parent_outside_pid_ns = true;
            }
            let this = Spawner {
                tracked: self.tracked.clone(),
                watchdog: self.watchdog.clone(),
                tools_ns,
            };
            return unconfined::spawn_unfiltered(move || {
                if let Some(ns) = &this.tools_ns {
                    join_tools_ns(ns)?;
                }
                this.spawn_here(&job)
            });
        } else if job.plan.confined() {
            if let Some(ns) = &self.tools_ns {
                join_tools_ns(ns)?;
                job.ends.join.parent_outside_pid_ns = true;
            }
            if let Err(e) = confine_this_thread() {
                // The child attaches the filter itself then, as before.
                tracing::warn!(error = %e, "cannot attach the shared seccomp filter to this thread");
            }
        } else if thread_is_confined() || toolsrv_watch::joined_this_thread() {
            let this = Spawner {
                tracked: self.tracked.clone(),
                watchdog: self.watchdog.clone(),
                tools_ns: None,
            };
            return unconfined::spawn(move || this.spawn_here(&job));
        }
        match self.spawn_here(&job) {
            Err(SpawnError::Prepare {
                step: "clone",
                source,
            }) if source.raw_os_error() == Some(libc::ENOMEM)
                && job.ends.join.parent_outside_pid_ns =>
            {
                let revived = self.tools_ns.as_ref().map(|ns| ns.revive(REVIVE_WAIT));
                match revived {
                    Some(Ok(true)) => self.spawn_here(&job),
                    Some(Err(e)) => Err(SpawnError::Prepare {
                        step: "entering the tools PID namespace",
                        source: std::io::Error::other(e),
                    }),
                    _ => Err(SpawnError::Prepare {
                        step: "clone",
                        source,
                    }),
                }
            }
            r => r,
        }
    }

    /// Start `job` on this thread.
    fn spawn_here(&self, job: &Job) -> Result<Child, SpawnError> {
        use std::os::fd::AsFd;
        let (plan, strings, ends) = (&job.plan, &job.strings, &job.ends);
        let files: Vec<std::os::fd::BorrowedFd<'_>> = ends.files.iter().map(AsFd::as_fd).collect();
        let view = plan.namespaces.view.as_deref();
        let spec = SpawnSpec {
            program: &strings.program,
            argv: &strings.argv,
            envp: &strings.envp,
            cwd: &strings.cwd,
            cwd_fd: Some(plan.workdir.fd()),
            mount_ns: view.map(toolsrv_sandbox::View::ns),
            net_ns: plan.namespaces.net.as_ref().and_then(|n| n.ns()),
            user_ns: view.and_then(toolsrv_sandbox::View::user_ns),
            stdin: ends.stdin.as_ref().map(AsFd::as_fd),
            output: ends.output.as_fd(),
            files: &files,
            confinement: plan.confinement.as_deref(),
            join: ends.join,
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

/// This thread's children are born in `ns` from now on; while a new
/// namespace replaces a dead one, waits for it (up to [`REVIVE_WAIT`]).
fn join_tools_ns(ns: &ToolsPidNs) -> Result<(), SpawnError> {
    let failed = |e: toolsrv_watch::PidNsError| SpawnError::Prepare {
        step: "entering the tools PID namespace",
        source: std::io::Error::other(e),
    };
    match ns.enter_for_children() {
        Ok(()) => Ok(()),
        Err(toolsrv_watch::PidNsError::Gone(_)) => match ns.revive(REVIVE_WAIT) {
            Ok(true) => Ok(()),
            Ok(false) => ns.enter_for_children().map_err(failed),
            Err(e) => Err(failed(e)),
        },
        Err(e) => Err(failed(e)),
    }
}

/// The thread that starts unconfined tools once worker threads carry the
/// confined runs' seccomp filter. It lives as long as the server (the
/// parent-death signal of what it starts is tied to it).
mod unconfined {
    use std::sync::mpsc;
    use std::sync::{Mutex, OnceLock};
    use toolsrv_base::LockUnpoisoned;

    use toolsrv_sandbox::{Child, SpawnError};

    type Work = Box<dyn FnOnce() -> Result<Child, SpawnError> + Send>;
    type Queue = Mutex<mpsc::Sender<(Work, mpsc::SyncSender<Result<Child, SpawnError>>)>>;

    /// The thread for unconfined tools (never in the tools namespace).
    static OUTSIDE: OnceLock<Queue> = OnceLock::new();
    /// The thread for confined tools whose policy needs no shared filter
    /// (it joins the tools namespace when its work asks).
    static UNFILTERED: OnceLock<Queue> = OnceLock::new();

    /// Starts both threads (once). Call it before any thread of the server
    /// carries the filter: a new thread inherits its creator's.
    pub(super) fn start() {
        queue(&OUTSIDE, "toolsrv-unconfined");
        queue(&UNFILTERED, "toolsrv-unfiltered");
    }

    fn queue(cell: &'static OnceLock<Queue>, name: &str) -> &'static Queue {
        cell.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<(Work, mpsc::SyncSender<Result<Child, SpawnError>>)>();
            let started = std::thread::Builder::new().name(name.into()).spawn(move || {
                for (work, reply) in rx {
                    let _ = reply.send(work());
                }
            });
            if let Err(e) = started {
                tracing::error!(error = %e, thread = name, "cannot start a thread for tools that need one without the shared filter");
            }
            Mutex::new(tx)
        })
    }

    fn run_on(
        cell: &'static OnceLock<Queue>,
        name: &str,
        work: impl FnOnce() -> Result<Child, SpawnError> + Send + 'static,
    ) -> Result<Child, SpawnError> {
        let queue = queue(cell, name);
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let gone = || SpawnError::Prepare {
            step: "unconfined spawner thread",
            source: std::io::Error::from_raw_os_error(libc::ECHILD),
        };
        queue
            .lock_unpoisoned()
            .send((Box::new(work), reply_tx))
            .map_err(|_| gone())?;
        reply_rx.recv().map_err(|_| gone())?
    }

    /// Runs `work` on the unconfined thread and waits for its result.
    pub(super) fn spawn(
        work: impl FnOnce() -> Result<Child, SpawnError> + Send + 'static,
    ) -> Result<Child, SpawnError> {
        run_on(&OUTSIDE, "toolsrv-unconfined", work)
    }

    /// Runs `work` on the thread without the shared filter that joins the
    /// tools namespace, and waits for its result.
    pub(super) fn spawn_unfiltered(
        work: impl FnOnce() -> Result<Child, SpawnError> + Send + 'static,
    ) -> Result<Child, SpawnError> {
        run_on(&UNFILTERED, "toolsrv-unfiltered", work)
    }
}
