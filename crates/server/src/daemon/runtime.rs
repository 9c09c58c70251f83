//! The daemon's async runtime and how many worker threads it runs.

use super::{DaemonError, LOG_TARGET};

/// The runtime: `current_thread` for one worker, else multi-thread.
pub(super) fn build() -> Result<tokio::runtime::Runtime, DaemonError> {
    let workers = worker_threads();
    tracing::debug!(target: LOG_TARGET, workers, "runtime worker threads");
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    // A new thread's children are born where its creator's are: a blocking
    // thread started by a worker that joined the tools PID namespace would
    // fork into it. Every runtime thread starts back in the server's own.
    builder
        .on_thread_start(toolsrv_watch::leave_for_children)
        .enable_all()
        .build()
        .map_err(DaemonError::Runtime)
}

/// How many runtime worker threads to run: `TOKIO_WORKER_THREADS` when set
/// to a positive number, else half the CPUs (at least one). One worker means
/// tokio's `current_thread` runtime, on the main thread: the same single
/// thread of work without the multi-thread scheduler's bookkeeping (about 5 %
/// less server CPU per call, docs/benchmarks.md). Tools are spawned from that
/// thread, which lives as long as the server (their parent-death signal is
/// tied to it).
///
/// The server's share of a call is small beside the tool's, and the tools
/// need the CPUs too: on 2 CPUs one worker made about 20 % less server CPU
/// per call than two (fewer cross-thread wake-ups) and more calls per second
/// (docs/benchmarks.md).
fn worker_threads() -> usize {
    if let Some(n) = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    std::thread::available_parallelism()
        .map(|n| (n.get() / 2).max(1))
        .unwrap_or(1)
}
