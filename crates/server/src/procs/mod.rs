//! Process state (architecture, "Process lifecycle"): one table of `Proc`s,
//! synchronous and background alike, numbered 1, 2, 3, … per server run.
//!
//! - `output`: the bounded, followable output of a process.
//! - `retention`: the bounds on finished processes (count, retained output)
//!   and on running background processes per agent.
//!
//! A synchronous call's entry is dismissed once its result was read and its
//! `proc/new` fid clunked (`ProcTable::release`), or, when files of its
//! `proc/<pid>/` are open then, once the last of them is closed.

pub(crate) mod denials;
pub(crate) mod output;
mod retention;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolsrv_base::LockUnpoisoned;
use toolsrv_protocol::{format_rfc3339_millis, ProcStat, ProcState};

use output::Output;
pub use retention::Retention;
use retention::Table;

/// What is fixed when a process is created.
#[derive(Debug, Clone)]
pub(crate) struct ProcSpec {
    /// The tool name.
    pub(crate) tool: String,
    /// The requesting agent.
    pub(crate) agent: String,
    /// The session, if the request named one.
    pub(crate) session: Option<String>,
    /// Started through `proc/new.bg`.
    pub(crate) background: bool,
    /// The command line, for display.
    pub(crate) command: String,
    /// The working directory.
    pub(crate) cwd: PathBuf,
    /// Whether Landlock confines it.
    pub(crate) sandboxed: bool,
}

struct Mutable {
    state: ProcState,
    exit_code: Option<i32>,
    ended: Option<(SystemTime, Instant)>,
    /// The OS pid (= process group id) while the tool runs.
    os_pid: Option<i32>,
    /// A signal asked for before the tool was spawned: delivered once it is.
    pending_signal: Option<i32>,
    /// `[toolsrv: limit reached: ...]` lines, set when the run ended.
    limits_reached: Vec<String>,
}

/// One process: a tool run, from request to dismissal.
pub(crate) struct Proc {
    /// toolsrv's pid (never an OS pid).
    pub(crate) pid: u64,
    /// Fixed facts.
    pub(crate) spec: ProcSpec,
    started: SystemTime,
    started_at: Instant,
    m: Mutex<Mutable>,
    /// The tool's output.
    pub(crate) output: Output,
    /// Fires to stop the process (cancel, timeout, shutdown): the executor kills the group.
    pub(crate) stop: CancellationToken,
    /// Becomes true once the process has ended (state final).
    ended: watch::Sender<bool>,
    /// A signal sent through `ctl` before the tool started (awaiting approval).
    stop_signal: AtomicI32,
    /// The table it is in, told when it ends and when it may go.
    table: Weak<Mutex<Table>>,
    /// Counted among the finished processes of the table.
    counted: AtomicBool,
    /// Output bytes retained once it ended.
    retained: AtomicU64,
    /// Files of its `proc/<pid>/` open now.
    open_files: AtomicUsize,
    /// Its result was read and its `proc/new` fid clunked: dismiss it once no
    /// file of it is open.
    released: AtomicBool,
    /// What its network's proxy refused it (`network.domains`), set when it
    /// starts.
    network_denials: std::sync::OnceLock<toolsrv_netproxy::Denials>,
    /// The limits it reached, as denials (set as it ends).
    limit_denials: Mutex<Vec<denials::Record>>,
}

/// An open file of a process's `proc/<pid>/` directory (held by its handle).
pub(crate) struct OpenFile(Arc<Proc>);

impl Drop for OpenFile {
    fn drop(&mut self) {
        if self.0.open_files.fetch_sub(1, Ordering::AcqRel) == 1
            && self.0.released.load(Ordering::Acquire)
        {
            self.0.dismiss_released();
        }
    }
}

impl Proc {
    /// Set a non-final state (`running` after approval, for example).
    pub(crate) fn set_state(&self, state: ProcState) {
        self.m.lock_unpoisoned().state = state;
    }

    /// Record the OS pid of the tool just spawned; returns a signal that was
    /// asked for before it existed, to be delivered now.
    pub(crate) fn started(&self, pid: i32) -> Option<i32> {
        let mut m = self.m.lock_unpoisoned();
        m.os_pid = Some(pid);
        m.pending_signal.take()
    }

    /// Record the end: final state and exit code. Only the first call counts.
    pub(crate) fn finish(&self, state: ProcState, exit_code: i32) {
        {
            let mut m = self.m.lock_unpoisoned();
            if m.ended.is_some() {
                return;
            }
            m.state = state;
            m.exit_code = Some(exit_code);
            m.ended = Some((SystemTime::now(), Instant::now()));
            m.os_pid = None;
        }
        self.output.finish();
        let entry = retention::ENTRY_OVERHEAD
            + (self.spec.command.len() + self.spec.cwd.as_os_str().len()) as u64;
        self.retained
            .store(self.output.retained() + entry, Ordering::Release);
        self.ended.send_replace(true);
        if let Some(t) = self.table.upgrade() {
            let n = t.lock_unpoisoned().ended(self.pid);
            if n > 0 {
                tracing::debug!(
                    dismissed = n,
                    "oldest finished processes dismissed (retention bounds)"
                );
            }
        }
    }

    /// Note a file of `proc/<pid>/` opened; it counts until the guard drops.
    pub(crate) fn open_file(self: &Arc<Self>) -> OpenFile {
        self.open_files.fetch_add(1, Ordering::AcqRel);
        OpenFile(self.clone())
    }

    /// Remove a released process from its table, unless a file of it is open.
    fn dismiss_released(&self) {
        if let Some(t) = self.table.upgrade() {
            let mut g = t.lock_unpoisoned();
            // Checked under the table lock: an open racing with this keeps it.
            if self.open_files.load(Ordering::Acquire) == 0 {
                g.remove(self.pid);
            }
        }
    }

    /// Record the limits the run reached (before [`Proc::finish`]).
    pub(crate) fn set_limits_reached(&self, lines: Vec<String>) {
        self.m.lock_unpoisoned().limits_reached = lines;
    }

    /// Follow the refusals of its network's proxy (once, as it starts).
    pub(crate) fn watch_network(&self, denials: toolsrv_netproxy::Denials) {
        let _ = self.network_denials.set(denials);
    }

    /// Its denials so far, merged (`proc/<pid>/denials`): the network's,
    /// then the limits reached.
    pub(crate) fn denials(&self) -> Vec<denials::Record> {
        let mut out = self
            .network_denials
            .get()
            .map_or_else(Vec::new, |d| denials::records(&d.list()));
        out.extend(self.limit_denials.lock_unpoisoned().iter().cloned());
        out
    }

    /// Record the limits it reached as denials.
    pub(crate) fn set_limit_denials(&self, records: Vec<denials::Record>) {
        *self.limit_denials.lock_unpoisoned() = records;
    }

    /// Add more closing lines (the protected paths its output names as
    /// refused, `exec::refusals`), after the limit lines.
    pub(crate) fn append_last_lines(&self, lines: Vec<String>) {
        self.m.lock_unpoisoned().limits_reached.extend(lines);
    }

    /// The `[toolsrv: limit reached: ...]` lines of the run, then its
    /// `[toolsrv: <path>: ...]` lines about protected paths (empty when none).
    pub(crate) fn limits_reached(&self) -> Vec<String> {
        self.m.lock_unpoisoned().limits_reached.clone()
    }

    /// Whether it has ended.
    pub(crate) fn is_finished(&self) -> bool {
        self.m.lock_unpoisoned().ended.is_some()
    }

    /// The state and exit code now (cheaper than [`Proc::stat`]).
    pub(crate) fn outcome(&self) -> (ProcState, Option<i32>) {
        let m = self.m.lock_unpoisoned();
        (m.state, m.exit_code)
    }

    /// When it ended, if it has.
    pub(crate) fn ended_at(&self) -> Option<Instant> {
        self.m.lock_unpoisoned().ended.map(|e| e.1)
    }

    /// Wait until it has ended; returns the exit code.
    pub(crate) async fn wait(&self) -> i32 {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|e| *e).await;
        self.m.lock_unpoisoned().exit_code.unwrap_or(-1)
    }

    /// The signal sent through `ctl` while awaiting approval, if any.
    pub(crate) fn stop_signal(&self) -> Option<i32> {
        Some(self.stop_signal.load(Ordering::Relaxed)).filter(|s| *s != 0)
    }

    /// Send `sig` to the tool's process group, if it runs, and to the tool's
    /// first process itself when it has left that group (so `setpgid` does
    /// not make it deaf to `kill`; in PID-namespace containment its death
    /// ends the whole run). A process still awaiting approval is stopped
    /// before it starts (its request withdrawn).
    pub(crate) fn signal(&self, sig: i32) -> Result<(), ProcError> {
        let pgid = {
            let mut m = self.m.lock_unpoisoned();
            match (m.state, m.os_pid) {
                (ProcState::AwaitingApproval, _) => {
                    drop(m);
                    self.stop_signal.store(sig, Ordering::Relaxed);
                    self.stop.cancel();
                    return Ok(());
                }
                (_, Some(pgid)) => pgid,
                // Running, but the tool is not spawned yet: deliver on start.
                (ProcState::Running, None) => {
                    m.pending_signal = Some(sig);
                    return Ok(());
                }
                _ => return Err(ProcError::NotRunning(self.pid)),
            }
        };
        if let Err(e) = crate::sys::kill(-pgid, sig) {
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(ProcError::Signal(self.pid, e));
            }
        }
        // The first process is our child and not reaped while it runs: its
        // pid still names it.
        if crate::sys::getpgid(pgid).is_ok_and(|g| g != pgid) {
            if let Err(e) = crate::sys::kill(pgid, sig) {
                if e.raw_os_error() != Some(libc::ESRCH) {
                    return Err(ProcError::Signal(self.pid, e));
                }
            }
        }
        Ok(())
    }

    /// The ProcStat JSON object of docs/protocol.md, "Processes".
    pub(crate) fn stat(&self) -> ProcStat {
        let m = self.m.lock_unpoisoned();
        let runtime = match m.ended {
            Some((_, at)) => at.duration_since(self.started_at),
            None => self.started_at.elapsed(),
        };
        ProcStat {
            pid: self.pid,
            tool: self.spec.tool.clone(),
            agent: self.spec.agent.clone(),
            session: self.spec.session.clone(),
            background: self.spec.background,
            state: m.state,
            exit_code: m.exit_code,
            started: format_rfc3339_millis(self.started),
            ended: m.ended.map(|(t, _)| format_rfc3339_millis(t)),
            runtime_ms: runtime.as_millis() as u64,
            command: self.spec.command.clone(),
            cwd: self.spec.cwd.display().to_string(),
            sandboxed: self.spec.sandboxed,
        }
    }
}

/// Why a `ctl` command on a process failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcError {
    /// A signal for a process that has ended.
    #[error("process {0} is not running")]
    NotRunning(u64),
    /// kill(2) failed.
    #[error("cannot signal process {0}: {1}")]
    Signal(u64, #[source] std::io::Error),
    /// No such process.
    #[error("unknown process {0}")]
    Unknown(u64),
    /// `dismiss` of a process still running.
    #[error("process {0} is still running")]
    StillRunning(u64),
}

/// Why a process was not created.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum CreateError {
    /// The agent has as many background processes running as allowed.
    #[error("agent {agent:?} already has {limit} background processes running (the limit); wait for one to end or kill one")]
    TooManyBackground {
        /// The agent.
        agent: String,
        /// The limit.
        limit: usize,
    },
}

/// Every process of this server run.
pub(crate) struct ProcTable {
    next: AtomicU64,
    procs: Arc<Mutex<Table>>,
    max_output: u64,
}

impl ProcTable {
    /// An empty table; each process keeps at most `max_output` bytes of output,
    /// finished processes are bounded by `retention`.
    pub(crate) fn new(max_output: u64, retention: Retention) -> ProcTable {
        ProcTable {
            next: AtomicU64::new(1),
            procs: Arc::new(Mutex::new(Table::new(retention, max_output))),
            max_output,
        }
    }

    /// Create and register a process in state `state`. Its stop token is a
    /// child of `parent` when given (a synchronous request's cancellation).
    /// A background process is refused when its agent has as many running
    /// as [`Retention::max_background_per_agent`].
    pub(crate) fn create(
        &self,
        spec: ProcSpec,
        state: ProcState,
        parent: Option<&CancellationToken>,
    ) -> Result<Arc<Proc>, CreateError> {
        let mut g = self.procs.lock_unpoisoned();
        if spec.background {
            let limit = g.retention().max_background_per_agent;
            let running = g
                .map
                .values()
                .filter(|p| p.spec.background && p.spec.agent == spec.agent && !p.is_finished())
                .take(limit)
                .count();
            if running >= limit {
                return Err(CreateError::TooManyBackground {
                    agent: spec.agent,
                    limit,
                });
            }
        }
        let pid = self.next.fetch_add(1, Ordering::Relaxed);
        let p = Arc::new(Proc {
            pid,
            spec,
            started: SystemTime::now(),
            started_at: Instant::now(),
            m: Mutex::new(Mutable {
                state,
                exit_code: None,
                ended: None,
                os_pid: None,
                pending_signal: None,
                limits_reached: Vec::new(),
            }),
            output: Output::new(self.max_output),
            stop: parent.map_or_else(CancellationToken::new, |p| p.child_token()),
            ended: watch::channel(false).0,
            stop_signal: AtomicI32::new(0),
            table: Arc::downgrade(&self.procs),
            counted: AtomicBool::new(false),
            retained: AtomicU64::new(0),
            open_files: AtomicUsize::new(0),
            released: AtomicBool::new(false),
            network_denials: std::sync::OnceLock::new(),
            limit_denials: Mutex::new(Vec::new()),
        });
        g.map.insert(pid, p.clone());
        Ok(p)
    }

    /// A synchronous call's result was read and its fid clunked: dismiss it
    /// now, or when the last open file of its `proc/<pid>/` closes.
    pub(crate) fn release(&self, pid: u64) {
        let Some(p) = self.get(pid) else {
            return;
        };
        if !p.is_finished() {
            return;
        }
        p.released.store(true, Ordering::Release);
        p.dismiss_released();
    }

    /// One process.
    pub(crate) fn get(&self, pid: u64) -> Option<Arc<Proc>> {
        self.procs.lock_unpoisoned().map.get(&pid).cloned()
    }

    /// All processes (or one agent's), by pid.
    pub(crate) fn list(&self, agent: Option<&str>) -> Vec<Arc<Proc>> {
        self.procs
            .lock_unpoisoned()
            .map
            .values()
            .filter(|p| agent.is_none_or(|a| p.spec.agent == a))
            .cloned()
            .collect()
    }

    /// Remove a finished process.
    pub(crate) fn dismiss(&self, pid: u64) -> Result<(), ProcError> {
        let mut g = self.procs.lock_unpoisoned();
        match g.map.get(&pid) {
            None => Err(ProcError::Unknown(pid)),
            Some(p) if !p.is_finished() => Err(ProcError::StillRunning(pid)),
            Some(_) => {
                g.remove(pid);
                Ok(())
            }
        }
    }

    /// Dismiss processes that ended more than `age` ago; returns how many.
    pub(crate) fn collect_garbage(&self, age: Duration) -> usize {
        let mut g = self.procs.lock_unpoisoned();
        let old: Vec<u64> = g
            .map
            .values()
            .filter(|p| p.ended_at().is_some_and(|t| t.elapsed() >= age))
            .map(|p| p.pid)
            .collect();
        for pid in &old {
            g.remove(*pid);
        }
        old.len()
    }

    /// Number of processes not yet finished.
    pub(crate) fn active(&self) -> usize {
        self.procs
            .lock_unpoisoned()
            .map
            .values()
            .filter(|p| !p.is_finished())
            .count()
    }

    /// Stop every process (shutdown).
    pub(crate) fn stop_all(&self) {
        for p in self.procs.lock_unpoisoned().map.values() {
            p.stop.cancel();
        }
    }
}
