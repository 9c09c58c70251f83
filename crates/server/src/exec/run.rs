//! Step 5: spawn the tool, capture its output, enforce timeout and cancellation,
//! reap it, and record how it ended.

use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use toolsrv_protocol::ProcState;
use toolsrv_protocol::{limit_reached_line, LimitName, Limits};
use toolsrv_sandbox::Run;
use toolsrv_sandbox::{Child, ExitStatus, SpawnError};

use super::spawner::Job;
use super::{Executor, Prepared, Refused};
use crate::procs::Proc;
use crate::sys;

/// Why a run failed before its tool ran; the text is the run's output.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The request holds a NUL byte.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// No pipe for the output.
    #[error("cannot create the output pipe: {0}")]
    Pipe(#[source] std::io::Error),
    /// The run's kernel group could not be made.
    #[error("cannot make the run's group: {0}")]
    Group(#[source] std::io::Error),
    /// The run's kernel group could not be opened for joining.
    #[error("cannot open the run's group: {0}")]
    Join(#[source] std::io::Error),
    /// The spawn failed, or the child could not run its program.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The child's pidfd could not be watched.
    #[error("cannot watch the process: {0}")]
    Watch(#[source] std::io::Error),
    /// The output pipe could not be watched.
    #[error("cannot watch the output pipe: {0}")]
    WatchPipe(#[source] std::io::Error),
    /// A `file: true` argument's file could not be made.
    #[error("cannot put argument {name} in a file: {source}")]
    ArgFile {
        /// The argument.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The child could not be reaped.
    #[error("cannot reap the process")]
    Reap,
}

/// How long a tool gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// After the tool exits, how long descendants holding its output pipe may keep it open.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// The output pipe's capacity, and the most the pump reads at once.
const PIPE_SIZE: i32 = 1 << 20;

/// The pump's first buffer (grown to [`PIPE_SIZE`] for chatty tools).
const PUMP_START: usize = 16 * 1024;

/// Whether this kernel reads pipes with `RWF_NOWAIT` ([`sys::read_nowait`]),
/// probed once on a pipe of its own before any output pipe is made (Linux
/// 5.9 and later do; then no output pipe needs an `fcntl` to be read without
/// waiting).
fn reads_nowait() -> bool {
    static NOWAIT: OnceLock<bool> = OnceLock::new();
    *NOWAIT.get_or_init(|| {
        let Ok((r, _w)) = sys::pipe() else {
            return false;
        };
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let probe = sys::read_nowait(r.as_fd(), &mut byte);
        let ok = matches!(&probe, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        if !ok {
            tracing::debug!(result = ?probe, "no RWF_NOWAIT reads of pipes: output pipes are made non-blocking");
        }
        ok
    })
}

/// A pipe with both ends close-on-exec whose read end [`read_pipe`] reads
/// without waiting: made non-blocking only where the kernel cannot read it
/// with `RWF_NOWAIT` (the `fcntl` was one system call per run).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let nowait = reads_nowait();
    let (r, w) = sys::pipe()?;
    if !nowait {
        // A new pipe's read end has no status flag set, and F_SETFL leaves
        // the access mode alone: no F_GETFL.
        sys::set_status_nonblocking(r.as_fd())?;
    }
    Ok((r, w))
}

/// One read of an output pipe made by [`pipe`]; never waits.
fn read_pipe(fd: BorrowedFd<'_>, buf: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<usize> {
    if reads_nowait() {
        sys::read_nowait(fd, buf)
    } else {
        sys::read(fd, buf)
    }
}

/// Grow the pipe behind `fd` to [`PIPE_SIZE`]: fewer wake-ups for a chatty
/// tool. Done once its output fills the pump's first buffer, not for every
/// tool (most print little, and the larger ring costs an allocation). The
/// kernel may refuse (pipe-max-size, per-user limits), which is fine.
fn grow_pipe(fd: BorrowedFd<'_>) {
    let _ = sys::set_pipe_size(fd, PIPE_SIZE);
}

/// The child's pidfd as the runtime watches it: borrowed from the [`Child`],
/// which owns (and finally closes) the descriptor. Watching a duplicate cost a
/// `fcntl` and a `close` per run.
struct PidfdWatch(RawFd);

impl AsRawFd for PidfdWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Wait until the child has exited (without reaping it: its pid, and so its
/// process group id, cannot be reused while we still signal the group).
async fn exited(pidfd: &AsyncFd<PidfdWatch>) {
    if let Ok(mut g) = pidfd.readable().await {
        // The pidfd stays readable once the process exited.
        g.retain_ready();
    }
}

/// Why the wait ended.
enum End {
    Exited,
    Stopped,
    TimedOut,
    /// The run used up its CPU time (`limits.cpu`).
    CpuSpent,
}

/// How often a run with a CPU limit has its CPU time read.
const CPU_POLL: Duration = Duration::from_millis(100);

/// Resolves once `run` has used `limit` of CPU time (never where the host
/// cannot tell, or without a limit).
async fn cpu_spent(run: &mut Run, limit: Duration) {
    if limit.is_zero() || run.cpu_used().is_none() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(CPU_POLL).await;
        if run.cpu_used().is_some_and(|used| used >= limit) {
            return;
        }
    }
}

impl Executor {
    /// Run a prepared request as `proc` to its end. Records the final state.
    pub(crate) async fn run(&self, proc: &Arc<Proc>, prep: &Prepared) {
        let mut leftovers = Leftovers::default();
        let guarded = self
            .guard
            .as_ref()
            .filter(|_| prep.confinement.is_some())
            .map(|g| (g, g.enter()));
        let ran = self.run_inner(proc, prep, &mut leftovers).await;
        if let Some((g, entered)) = guarded {
            let denials = g.settle(entered);
            if !denials.is_empty() {
                self.append_lines(proc, denials);
            }
        }
        let (state, code) = match ran {
            Ok(r) => {
                if prep.confinement.is_some() {
                    self.note_protected_refusals(proc, prep);
                }
                r
            }
            Err(e) => {
                proc.output.push(e.to_string().as_bytes());
                (ProcState::Failed, 127)
            }
        };
        proc.finish(state, code);
        // The log line is written and the run's descriptors are closed from a
        // task of its own, after a sync call's result went out: formatting
        // and writing the line took about 12 µs of each call's round trip,
        // deregistering and closing the pipe and the pidfd (and freeing the
        // pipe) about 10 µs. The task yields first: a task spawned here runs
        // before the reading task this one's end wakes (the single-thread
        // runtime's queue is first in, first out), while a yielded one runs
        // once the runtime has nothing else to do.
        let proc = proc.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            drop(leftovers);
            tracing::info!(
                pid = proc.pid,
                agent = %proc.spec.agent,
                tool = %proc.spec.tool,
                state = %state,
                exit_code = code,
                "process ended"
            );
        });
    }

    /// The four phases of a run: start the tool, watch for its exit,
    /// supervise it to its end, then reap it and record how it ended. What
    /// is only to be closed once the run ended goes to `left`.
    async fn run_inner(
        &self,
        proc: &Arc<Proc>,
        prep: &Prepared,
        left: &mut Leftovers,
    ) -> Result<(ProcState, i32), RunError> {
        let (mut run, child, output) = self.start_tool(proc, prep)?;
        let child = left.child.insert(child);
        // Safety: `Leftovers` drops its pidfd watch before its child, which
        // owns (and closes) the descriptor.
        let pidfd = left
            .pidfd
            .insert(unsafe { self.watch_exit(&mut run, child) }?);
        let end = supervise(proc, prep, &mut run, child, pidfd, output, &mut left.pipe).await;
        self.reap_and_record(proc, run, child, end)
    }

    /// Phase 1: the output pipe, the run's kernel group, the spawn; logs the
    /// start. The run's containment, its child, and both ends of the output
    /// pipe (see [`Output`]).
    fn start_tool(
        &self,
        proc: &Arc<Proc>,
        prep: &Prepared,
    ) -> Result<(Run, Child, Output), RunError> {
        let (program, argv, envp, cwd) = prep.c_strings()?;
        let files = prep.arg_files()?;
        let (rd, wr) = pipe().map_err(RunError::Pipe)?;
        // Registered before the spawn: the child starts (on this CPU, as a
        // rule) once this thread waits, and this is one thing less between.
        // Safety: the AsyncFd takes ownership of `rd`, so the descriptor
        // stays open and unchanged for the AsyncFd's lifetime.
        let rd = unsafe { AsyncFd::register_with_interest(rd, tokio::io::Interest::READABLE) }
            .map_err(|e| RunError::WatchPipe(e.into()))?;
        let wr = Arc::new(wr);
        let mut run = self.containment.run(prep.limits).map_err(RunError::Group)?;
        let join = run.join().map_err(RunError::Join)?;
        let job = Job {
            program,
            argv,
            envp,
            cwd,
            workdir: prep.workdir.clone(),
            output: wr.clone(),
            files,
            confinement: prep.confinement.clone(),
            join,
            view: prep.view.clone(),
        };
        let child = self.spawner.spawn(job)?;
        run.started(child.pid());
        if let Some(sig) = proc.started(child.pid()) {
            let _ = child.signal_group(sig);
        }
        // Background processes get a line when they start; a sync call is
        // short-lived and its "process ended" line says it all (one log write
        // per call instead of two; the start is at debug level).
        macro_rules! started {
            ($level:ident) => {
                tracing::$level!(pid = proc.pid, os_pid = child.pid(), agent = %proc.spec.agent, tool = %proc.spec.tool, sandboxed = prep.confinement.is_some(), "process started")
            };
        }
        if proc.spec.background {
            started!(info);
        } else {
            started!(debug);
        }
        Ok((
            run,
            child,
            Output {
                read: rd,
                write: wr,
            },
        ))
    }

    /// Phase 2: the child's pidfd, registered with the runtime to wake the
    /// run when the child exits. A child that cannot be watched is killed
    /// and reaped.
    ///
    /// # Safety
    /// The returned watch borrows `child`'s descriptor: it must be dropped
    /// before `child` is.
    unsafe fn watch_exit(
        &self,
        run: &mut Run,
        child: &mut Child,
    ) -> Result<AsyncFd<PidfdWatch>, RunError> {
        let watch = PidfdWatch(child.pidfd().as_raw_fd());
        // Safety: `child` owns the descriptor and outlives this AsyncFd (the
        // caller's contract), so it stays open and unchanged while it is
        // registered.
        unsafe { AsyncFd::register_with_interest(watch, tokio::io::Interest::READABLE) }.map_err(
            |e| {
                let e = std::io::Error::from(e);
                run.kill();
                self.abandon(child, RunError::Watch(e))
            },
        )
    }

    /// Phase 4: ends the run's containment, reaps the child, and records how
    /// the run ended and which limits it reached.
    fn reap_and_record(
        &self,
        proc: &Proc,
        run: Run,
        child: &mut Child,
        end: End,
    ) -> Result<(ProcState, i32), RunError> {
        let limits = *run.limits();
        let mut hits = run.finish().hits;
        let status = child
            .try_wait()
            .ok()
            .flatten()
            .or_else(|| child.wait().ok());
        self.forget(child.pid());
        let status = status.ok_or(RunError::Reap)?;
        // A child that could not run its program (exit status 127) says why.
        if let Some(e) = child.setup_error() {
            return Err(RunError::Spawn(e));
        }
        if matches!(end, End::CpuSpent) {
            hits.push(LimitName::Cpu);
        }
        match status {
            ExitStatus::Signal(libc::SIGXCPU) => hits.push(LimitName::Cpu),
            ExitStatus::Signal(libc::SIGXFSZ) => hits.push(LimitName::FileSize),
            _ => {}
        }
        hits.dedup();
        // A run whose process the memory limit's OOM killer took is `killed`,
        // whatever its first process made of it (docs/containment.md).
        let memory_kill = hits.contains(&LimitName::Memory);
        let outcome = match (end, status) {
            (End::TimedOut, s) => (ProcState::Timeout, s.code()),
            (End::Stopped, s) => (ProcState::Cancelled, s.code()),
            (End::CpuSpent, s) => (ProcState::Killed, s.code()),
            (End::Exited, ExitStatus::Code(c)) if memory_kill => (ProcState::Killed, c),
            (End::Exited, ExitStatus::Code(c)) => (ProcState::Exited, c),
            (End::Exited, s @ ExitStatus::Signal(_)) => (ProcState::Killed, s.code()),
        };
        if !hits.is_empty() {
            record_limits_reached(proc, &limits, &hits);
        }
        Ok(outcome)
    }

    /// The `[toolsrv: <path>: …]` lines for the protected paths the tool's
    /// output says were refused (`exec::refusals`): kept with the process
    /// like the limit lines, and appended to a background process's output.
    fn note_protected_refusals(&self, proc: &Proc, prep: &Prepared) {
        if proc.output.retained() > super::refusals::SEARCHED as u64 {
            return;
        }
        let output = proc.output.snapshot();
        let lines = super::refusals::notes(&output, &prep.cwd, |p| match &prep.view {
            Some(v) => v.protected().covering(p).map(|e| {
                let hidden = matches!(e.kind, toolsrv_sandbox::Kind::Hidden);
                (e.path.clone(), hidden)
            }),
            None => self
                .carved
                .iter()
                .find(|c| p.starts_with(c))
                .map(|c| (c.clone(), true)),
        });
        if lines.is_empty() {
            return;
        }
        self.append_lines(proc, lines);
    }

    /// Adds `[toolsrv: …]` lines at the end of a run's result (and of a
    /// background run's output).
    fn append_lines(&self, proc: &Proc, lines: Vec<String>) {
        if proc.spec.background {
            for l in &lines {
                proc.output.push(format!("\n{l}\n").as_bytes());
            }
        }
        proc.append_last_lines(lines);
    }

    /// Kill and reap a child we cannot watch; returns `msg`.
    fn abandon(&self, child: &mut Child, e: RunError) -> RunError {
        let _ = child.signal_group(libc::SIGKILL);
        let _ = child.wait();
        self.forget(child.pid());
        e
    }

    /// A tool was reaped and its group killed: stop tracking it.
    fn forget(&self, pid: i32) {
        self.tracked.remove(pid);
        if let Some(w) = &self.watchdog {
            w.untrack(pid);
        }
    }
}

/// Both ends of a run's output pipe, as the server holds them.
///
/// The server keeps the write end until the tool has exited: the tool's exit
/// closing its copy then never ends the pipe on its own, so the run wakes once
/// at the exit (its pidfd), not once for the pipe's end of file and again for
/// the exit a few microseconds later (the kernel closes a process's files
/// before it reports the exit). Dropping the write end afterwards makes the
/// end of file immediate unless a descendant still holds the pipe.
struct Output {
    read: AsyncFd<OwnedFd>,
    write: Arc<OwnedFd>,
}

/// What a run closes only after its result went out: the pidfd's watch, the
/// child (its pidfd, and the memory it read until it exec'd) and the output
/// pipe's read end. Fields drop in this order: the watch borrows the child's
/// descriptor.
#[derive(Default)]
struct Leftovers {
    pidfd: Option<AsyncFd<PidfdWatch>>,
    child: Option<Child>,
    pipe: Option<AsyncFd<OwnedFd>>,
}

/// Phase 3: pumps the output while waiting for the tool's exit, its
/// cancellation, its timeout or its CPU limit; escalates SIGTERM to SIGKILL
/// where it has to; gives descendants holding the output pipe a moment; then
/// kills whatever is left of the run (its whole group, however its processes
/// detached). Why the wait ended.
async fn supervise(
    proc: &Proc,
    prep: &Prepared,
    run: &mut Run,
    child: &Child,
    pidfd: &AsyncFd<PidfdWatch>,
    output: Output,
    pipe: &mut Option<AsyncFd<OwnedFd>>,
) -> End {
    let Output { read, write } = output;
    let read = &*pipe.insert(read);
    // The output is pumped by this task, alongside every wait below (no
    // task of its own: the tool's exit and its pipe's end of file then
    // wake one task, once).
    let writer_closed = AtomicBool::new(false);
    let mut pump = Pump::new(pump(read, proc, &writer_closed));
    let cpu_limit = prep.limits.cpu;
    let end = pump
        .alongside(async {
            tokio::select! {
                _ = exited(pidfd) => End::Exited,
                _ = proc.stop.cancelled() => End::Stopped,
                _ = tokio::time::sleep(prep.timeout) => End::TimedOut,
                _ = cpu_spent(run, cpu_limit) => End::CpuSpent,
            }
        })
        .await;
    if matches!(end, End::CpuSpent) {
        run.kill();
        let _ = child.signal_group(libc::SIGKILL);
        pump.alongside(exited(pidfd)).await;
    } else if !matches!(end, End::Exited) {
        let _ = child.signal_group(libc::SIGTERM);
        if pump
            .alongside(tokio::time::timeout(KILL_GRACE, exited(pidfd)))
            .await
            .is_err()
        {
            let _ = child.signal_group(libc::SIGKILL);
            pump.alongside(exited(pidfd)).await;
        }
    }
    // The tool has exited (not yet reaped): the pipe ends once no one else
    // holds it. Give descendants that still do a moment, then kill whatever
    // is left of the run: its whole group, however its processes detached.
    drop(write);
    writer_closed.store(true, Ordering::Relaxed);
    if !pump.finish_within(DRAIN_GRACE).await {
        run.kill();
        let _ = child.signal_group(libc::SIGKILL);
        // Whatever is still unread after that is dropped with the pump.
        pump.finish_within(Duration::from_secs(1)).await;
    } else {
        run.kill();
        // A confined run whose group the kernel reports empty has nothing
        // left to signal: its processes cannot move out of the group (that
        // takes a writable cgroup file, which no policy grants by default).
        // An unconfined one's can (a root `--yolo` tool): the process group
        // is signalled too. Two system calls per confined run saved.
        if !(run.known_empty() && prep.confinement.is_some()) {
            let _ = child.signal_group(libc::SIGKILL);
        }
    }
    end
}

/// The `limit reached` lines of a run that reached `hits`: logged, kept with
/// the process, and appended to a background process's output.
fn record_limits_reached(proc: &Proc, limits: &Limits, hits: &[LimitName]) {
    let lines: Vec<String> = hits
        .iter()
        .map(|h| limit_reached_line(limits, *h))
        .collect();
    tracing::info!(pid = proc.pid, limits = %lines.join(" "), "run reached a limit");
    if proc.spec.background {
        // `out` readers see it too (a sync call's result gets it appended).
        for l in &lines {
            proc.output.push(format!("\n{l}\n").as_bytes());
        }
    }
    proc.set_limits_reached(lines);
}

/// The output pump of one run, driven by the run's own task.
struct Pump<F> {
    fut: Pin<Box<F>>,
    done: bool,
}

impl<F: Future<Output = ()>> Pump<F> {
    fn new(fut: F) -> Pump<F> {
        Pump {
            fut: Box::pin(fut),
            done: false,
        }
    }

    /// Wait for `f` while the pump keeps copying output.
    async fn alongside<T>(&mut self, f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        loop {
            tokio::select! {
                biased;
                r = &mut f => return r,
                _ = self.fut.as_mut(), if !self.done => self.done = true,
            }
        }
    }

    /// Run the pump to the pipe's end of file for at most `limit`; whether it
    /// got there. The pump is polled once before a timer is armed: the end of
    /// file is usually there already.
    async fn finish_within(&mut self, limit: Duration) -> bool {
        if !self.done {
            let fut = &mut self.fut;
            self.done =
                std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_ready())).await;
        }
        if !self.done && tokio::time::timeout(limit, self.fut.as_mut()).await.is_ok() {
            self.done = true;
        }
        self.done
    }
}

/// Copy the pipe into the process's output until EOF.
///
/// The read end (read without waiting by [`read_pipe`]) is watched with `AsyncFd`
/// directly: `tokio::net::unix::pipe::Receiver` would first check it with an
/// `fstat` and an `F_GETFL`, two system calls per run.
async fn pump(rx: &AsyncFd<OwnedFd>, proc: &Proc, writer_closed: &AtomicBool) {
    // Start small (most tools print little) and grow up to the pipe's size
    // when reads fill the buffer; spare capacity is never zeroed.
    let mut buf = Vec::with_capacity(PUMP_START);
    let mut grown = false;
    loop {
        buf.clear();
        match read_some(rx, &mut buf, writer_closed).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                proc.output.push_paced(&buf).await;
                if n == buf.capacity() && n < PIPE_SIZE as usize {
                    if !grown {
                        grow_pipe(rx.get_ref().as_fd());
                        grown = true;
                    }
                    buf = Vec::with_capacity((n * 4).min(PIPE_SIZE as usize));
                }
            }
        }
    }
}

/// Read what the pipe holds into `buf`'s spare capacity (at least one byte
/// of room); 0 at end of file.
///
/// Once `writer_closed` is set (the server dropped its write end after the
/// tool exited), the pipe is read at once, without waiting for the runtime's
/// poller to report it readable: the end of file is usually there already,
/// and that spares a turn of the poller (an `epoll_wait`) per run. The flag
/// is cleared when such a read would block (a descendant holds the pipe).
async fn read_some(
    rx: &AsyncFd<OwnedFd>,
    buf: &mut Vec<u8>,
    writer_closed: &AtomicBool,
) -> std::io::Result<usize> {
    std::future::poll_fn(|cx| loop {
        let spare = buf.spare_capacity_mut();
        let result = if writer_closed.load(Ordering::Relaxed) {
            match read_pipe(rx.get_ref().as_fd(), spare) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    writer_closed.store(false, Ordering::Relaxed);
                    continue;
                }
                r => r,
            }
        } else {
            let mut guard = match rx.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match guard.try_io(|fd| read_pipe(fd.get_ref().as_fd(), spare)) {
                Ok(r) => r,
                Err(_would_block) => continue,
            }
        };
        match result {
            Ok(n) => {
                // Safety: the kernel initialised the first `n` spare bytes.
                unsafe { buf.set_len(buf.len() + n) };
                return Poll::Ready(Ok(n));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
    })
    .await
}
