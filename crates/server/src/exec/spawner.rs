//! The spawner thread: every tool is started from one long-lived thread, because
//! the parent-death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that
//! created the child exits; a runtime or blocking-pool thread may come and go.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use toolsrv_sandbox::confine::Confinement;
use toolsrv_sandbox::spawn::{spawn, Child, SpawnError, SpawnSpec};

use crate::reaper::Tracked;
use crate::watchdog::Watchdog;

/// Everything a spawn needs, owned.
pub struct Job {
    /// Absolute program path.
    pub program: CString,
    /// argv, `argv[0]` first.
    pub argv: Vec<CString>,
    /// `NAME=value` strings.
    pub envp: Vec<CString>,
    /// Working directory.
    pub cwd: CString,
    /// Write end of the output pipe; closed in the parent right after the spawn.
    pub output: OwnedFd,
    /// Landlock/seccomp to apply, or none (`--yolo`, approved bypass).
    pub confinement: Option<Arc<Confinement>>,
}

type Reply = oneshot::Sender<Result<Child, SpawnError>>;

/// Handle to the spawner thread.
pub struct Spawner {
    tx: Mutex<mpsc::Sender<(Job, Reply)>>,
}

impl Spawner {
    /// Start the spawner thread. Every child it starts is recorded in `tracked`
    /// (before anything could reap it) and announced to the watchdog.
    pub fn start(
        tracked: Arc<Tracked>,
        watchdog: Option<Arc<Watchdog>>,
    ) -> std::io::Result<Spawner> {
        let (tx, rx) = mpsc::channel::<(Job, Reply)>();
        std::thread::Builder::new()
            .name("toolsrv-spawner".into())
            .spawn(move || {
                for (job, reply) in rx {
                    let spec = SpawnSpec {
                        program: &job.program,
                        argv: &job.argv,
                        envp: &job.envp,
                        cwd: &job.cwd,
                        output: std::os::fd::AsFd::as_fd(&job.output),
                        confinement: job.confinement.as_deref(),
                    };
                    let r = tracked.spawning(|| spawn(&spec), Child::pid);
                    if let (Ok(child), Some(w)) = (&r, &watchdog) {
                        w.track(child.pid());
                    }
                    drop(job);
                    let _ = reply.send(r);
                }
            })?;
        Ok(Spawner { tx: Mutex::new(tx) })
    }

    /// Spawn on the spawner thread.
    pub async fn spawn(&self, job: Job) -> Result<Child, String> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((job, reply))
            .map_err(|_| "the spawner thread is gone".to_string())?;
        match rx.await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("the spawner thread is gone".into()),
        }
    }
}
