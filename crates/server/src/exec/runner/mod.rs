//! Step 5: a plan carried out. The runner starts the tool (`start.rs`),
//! supervises it to its end and pumps its output (`supervise.rs`,
//! `pump.rs`), then reaps it and records how it ended; the guard's and the
//! refusals' lines are added to its result.

mod pump;
mod start;
mod supervise;

use std::sync::Arc;

use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use toolsrv_protocol::ProcState;
use toolsrv_protocol::{limit_reached_line, LimitName, Limits};
use toolsrv_sandbox::Run;
use toolsrv_sandbox::{Child, ExitStatus, SpawnError};

use supervise::{supervise, End, PidfdWatch};

use super::{Executor, Refused, RunPlan, Runner};
use crate::procs::Proc;

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

impl Executor {
    /// Carry out `plan` as `proc` to its end. Records the final state.
    pub(crate) async fn run(&self, proc: &Arc<Proc>, plan: &Arc<RunPlan>) {
        let mut leftovers = Leftovers::default();
        let guarded = self
            .protection
            .guard()
            .filter(|_| plan.confined())
            .map(|g| (g, g.enter()));
        if let Some(net) = &plan.namespaces.net {
            proc.watch_network(net.denials());
        }
        let ran = self.runner.run_inner(proc, plan, &mut leftovers).await;
        let denied = proc.denials();
        if !denied.is_empty() {
            let lines = crate::procs::denials::result_lines(&denied, proc.pid);
            self.append_lines(proc, lines);
        }
        if let Some((g, entered)) = guarded {
            let denials = g.settle(entered);
            if !denials.is_empty() {
                self.append_lines(proc, denials);
            }
        }
        let (state, code) = match ran {
            Ok(r) => {
                if plan.confined() {
                    self.note_protected_refusals(proc, plan);
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

    /// The `[toolsrv: <path>: …]` lines for the protected paths the tool's
    /// output says were refused (`exec::refusals`): kept with the process
    /// like the limit lines, and appended to a background process's output.
    fn note_protected_refusals(&self, proc: &Proc, plan: &Arc<RunPlan>) {
        if proc.output.retained() > super::refusals::SEARCHED as u64 {
            return;
        }
        let output = proc.output.snapshot();
        let view = plan.namespaces.view.as_deref();
        let lines =
            super::refusals::notes(&output, &plan.cwd, |p| self.protection.covering(view, p));
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
}

impl Runner {
    /// The four phases of a run: start the tool, watch for its exit,
    /// supervise it to its end, then reap it and record how it ended. What
    /// is only to be closed once the run ended goes to `left`.
    async fn run_inner(
        &self,
        proc: &Arc<Proc>,
        plan: &Arc<RunPlan>,
        left: &mut Leftovers,
    ) -> Result<(ProcState, i32), RunError> {
        let (mut run, child, output) = self.start(proc, plan)?;
        let child = left.child.insert(child);
        // Safety: `Leftovers` drops its pidfd watch before its child, which
        // owns (and closes) the descriptor.
        let pidfd = left
            .pidfd
            .insert(unsafe { self.watch_exit(&mut run, child) }?);
        let end = supervise(proc, plan, &mut run, child, pidfd, output, &mut left.pipe).await;
        self.reap_and_record(proc, run, child, end)
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
    proc.set_limit_denials(
        hits.iter()
            .map(|h| crate::procs::denials::limit_record(limits, *h))
            .collect(),
    );
}
