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
//! [`unconfined`] thread instead, which never does.

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
    /// Write end of the output pipe. The run keeps its own reference until
    /// the tool has exited (see `exec::run`), so the spawner's is not the last.
    pub(crate) output: Arc<OwnedFd>,
    /// The files the tool gets as its descriptors 3, 4, … (its `file: true`
    /// arguments); closed here once the child has its copies.
    pub(crate) files: Vec<OwnedFd>,
    /// Landlock/seccomp to apply, or none (`--yolo`, approved bypass).
    pub(crate) confinement: Option<Arc<Confinement>>,
    /// How the child joins its run's group and takes its limits.
    pub(crate) join: toolsrv_sandbox::spawn::Join,
    /// The filesystem view the child enters before its working directory.
    pub(crate) view: Option<Arc<toolsrv_sandbox::view::View>>,
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
        // Before any thread carries the filter: a thread inherits its
        // creator's seccomp filter.
        unconfined::start();
        Spawner { tracked, watchdog }
    }

    /// Start `job` now, on this thread, without waiting for its `execve`. The
    /// job's reference to the pipe's write end is dropped on return.
    pub(crate) fn spawn(&self, job: Job) -> Result<Child, SpawnError> {
        use toolsrv_sandbox::confine::{confine_this_thread, thread_is_confined};
        if job.confinement.is_some() {
            if let Err(e) = confine_this_thread() {
                // The child attaches the filter itself then, as before.
                tracing::warn!(error = %e, "cannot attach the shared seccomp filter to this thread");
            }
        } else if thread_is_confined() {
            let this = Spawner {
                tracked: self.tracked.clone(),
                watchdog: self.watchdog.clone(),
            };
            return unconfined::spawn(move || this.spawn_here(job));
        }
        self.spawn_here(job)
    }

    /// Start `job` on this thread.
    fn spawn_here(&self, job: Job) -> Result<Child, SpawnError> {
        let files: Vec<std::os::fd::BorrowedFd<'_>> =
            job.files.iter().map(std::os::fd::AsFd::as_fd).collect();
        let spec = SpawnSpec {
            program: &job.program,
            argv: &job.argv,
            envp: &job.envp,
            cwd: &job.cwd,
            cwd_fd: Some(job.workdir.fd()),
            mount_ns: job.view.as_deref().map(toolsrv_sandbox::view::View::ns),
            output: std::os::fd::AsFd::as_fd(&*job.output),
            files: &files,
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

/// The thread that starts unconfined tools once worker threads carry the
/// confined runs' seccomp filter. It lives as long as the server (the
/// parent-death signal of what it starts is tied to it).
mod unconfined {
    use std::sync::mpsc;
    use std::sync::{Mutex, OnceLock};
    use toolsrv_base::LockUnpoisoned;

    use toolsrv_sandbox::spawn::{Child, SpawnError};

    type Work = Box<dyn FnOnce() -> Result<Child, SpawnError> + Send>;
    type Queue = Mutex<mpsc::Sender<(Work, mpsc::SyncSender<Result<Child, SpawnError>>)>>;

    static QUEUE: OnceLock<Queue> = OnceLock::new();

    /// Starts the thread (once). Call it before any thread of the server
    /// carries the filter: a new thread inherits its creator's.
    pub(super) fn start() {
        queue();
    }

    fn queue() -> &'static Queue {
        QUEUE.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<(Work, mpsc::SyncSender<Result<Child, SpawnError>>)>();
            let started = std::thread::Builder::new()
                .name("toolsrv-unconfined".into())
                .spawn(move || {
                    for (work, reply) in rx {
                        let _ = reply.send(work());
                    }
                });
            if let Err(e) = started {
                tracing::error!(error = %e, "cannot start the thread for unconfined tools");
            }
            Mutex::new(tx)
        })
    }

    /// Runs `work` on the unconfined thread and waits for its result.
    pub(super) fn spawn(
        work: impl FnOnce() -> Result<Child, SpawnError> + Send + 'static,
    ) -> Result<Child, SpawnError> {
        let queue = queue();
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
}
