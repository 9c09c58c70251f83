//! Phases 1 and 2: the run's descriptors, its kernel group and the spawn,
//! then the child's exit watched. Each stdio kind of the plan is one arm of
//! [`child_ends`].

use std::os::fd::AsRawFd;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use toolsrv_sandbox::{Child, Run};

use super::pump::pipe;
use super::supervise::{Output, PidfdWatch};
use super::RunError;
use crate::exec::plan::{Output as OutputKind, Stdin};
use crate::exec::spawner::ChildEnds;
use crate::exec::{RunPlan, Runner};
use crate::procs::Proc;

impl Runner {
    /// Phase 1: the child's descriptors as the plan's stdio says, the run's
    /// kernel group, the spawn; logs the start. The run's containment, its
    /// child, and both ends of the output pipe (see [`Output`]).
    pub(super) fn start(
        &self,
        proc: &Arc<Proc>,
        plan: &Arc<RunPlan>,
    ) -> Result<(Run, Child, Output), RunError> {
        let strings = plan.exec_strings()?;
        let files = plan.arg_files()?;
        let output = output_for(plan.stdio.output)?;
        let mut run = self.containment.run(plan.limits).map_err(RunError::Group)?;
        let join = run.join().map_err(RunError::Join)?;
        let ends = ChildEnds {
            stdin: stdin_for(plan.stdio.stdin),
            output: output.write.clone(),
            files,
            join,
        };
        let child = self.spawner.spawn(plan, strings, ends)?;
        run.started(child.pid());
        if let Some(sig) = proc.started(child.pid()) {
            let _ = child.signal_group(sig);
        }
        // Background processes get a line when they start; a sync call is
        // short-lived and its "process ended" line says it all (one log write
        // per call instead of two; the start is at debug level).
        macro_rules! started {
            ($level:ident) => {
                tracing::$level!(pid = proc.pid, os_pid = child.pid(), agent = %proc.spec.agent, tool = %proc.spec.tool, sandboxed = plan.confined(), "process started")
            };
        }
        if proc.spec.background {
            started!(info);
        } else {
            started!(debug);
        }
        Ok((run, child, output))
    }

    /// Phase 2: the child's pidfd, registered with the runtime to wake the
    /// run when the child exits. A child that cannot be watched is killed
    /// and reaped.
    ///
    /// # Safety
    /// The returned watch borrows `child`'s descriptor: it must be dropped
    /// before `child` is.
    pub(super) unsafe fn watch_exit(
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
}

/// What the child reads on descriptor 0 (`None`: the shared `/dev/null`).
fn stdin_for(stdin: Stdin) -> Option<std::os::fd::OwnedFd> {
    match stdin {
        Stdin::Null => None,
    }
}

/// Where the child's descriptors 1 and 2 go, and the server's ends.
fn output_for(kind: OutputKind) -> Result<Output, RunError> {
    match kind {
        OutputKind::Merged => {
            let (rd, wr) = pipe().map_err(RunError::Pipe)?;
            // Registered before the spawn: the child starts (on this CPU, as
            // a rule) once this thread waits, and this is one thing less
            // between. Safety: the AsyncFd takes ownership of `rd`, so the
            // descriptor stays open and unchanged for the AsyncFd's lifetime.
            let rd = unsafe { AsyncFd::register_with_interest(rd, tokio::io::Interest::READABLE) }
                .map_err(|e| RunError::WatchPipe(e.into()))?;
            Ok(Output {
                read: rd,
                write: Arc::new(wr),
            })
        }
    }
}
