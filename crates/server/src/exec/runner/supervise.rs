//! Phase 3: the run supervised to its end: its exit, its cancellation, its
//! timeout or its CPU limit, the escalation from SIGTERM to SIGKILL, and
//! the drain of what descendants still write.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use toolsrv_sandbox::{Child, Run};

use super::pump::{pump, Pump};
use crate::exec::RunPlan;
use crate::procs::Proc;

/// How long a tool gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// After the tool exits, how long descendants holding its output pipe may keep it open.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// The child's pidfd as the runtime watches it: borrowed from the [`Child`],
/// which owns (and finally closes) the descriptor. Watching a duplicate cost a
/// `fcntl` and a `close` per run.
pub(super) struct PidfdWatch(pub(super) RawFd);

impl AsRawFd for PidfdWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Wait until the child has exited (without reaping it: its pid, and so its
/// process group id, cannot be reused while we still signal the group).
pub(super) async fn exited(pidfd: &AsyncFd<PidfdWatch>) {
    if let Ok(mut g) = pidfd.readable().await {
        // The pidfd stays readable once the process exited.
        g.retain_ready();
    }
}

/// Why the wait ended.
pub(super) enum End {
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

/// Both ends of a run's output pipe, as the server holds them.
///
/// The server keeps the write end until the tool has exited: the tool's exit
/// closing its copy then never ends the pipe on its own, so the run wakes once
/// at the exit (its pidfd), not once for the pipe's end of file and again for
/// the exit a few microseconds later (the kernel closes a process's files
/// before it reports the exit). Dropping the write end afterwards makes the
/// end of file immediate unless a descendant still holds the pipe.
pub(super) struct Output {
    pub(super) read: AsyncFd<OwnedFd>,
    pub(super) write: Arc<OwnedFd>,
}

/// Phase 3: pumps the output while waiting for the tool's exit, its
/// cancellation, its timeout or its CPU limit; escalates SIGTERM to SIGKILL
/// where it has to; gives descendants holding the output pipe a moment; then
/// kills whatever is left of the run (its whole group, however its processes
/// detached). Why the wait ended.
pub(super) async fn supervise(
    proc: &Proc,
    plan: &RunPlan,
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
    let cpu_limit = plan.limits.cpu;
    let end = pump
        .alongside(async {
            tokio::select! {
                _ = exited(pidfd) => End::Exited,
                _ = proc.stop.cancelled() => End::Stopped,
                _ = tokio::time::sleep(plan.timeout) => End::TimedOut,
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
        if !(run.known_empty() && plan.confinement.is_some()) {
            let _ = child.signal_group(libc::SIGKILL);
        }
    }
    end
}
