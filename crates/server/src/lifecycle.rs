//! Lifecycle (architecture, "Startup and shutdown"; docs/lifecycle.md): [`run`]
//! serves until shutdown; the idle monitor, orphan reaping, garbage collection
//! and containment upkeep run beside it; then the shutdown sequence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::activity::Activity;
use crate::bypass::Broker;
use crate::exec::Executor;
use crate::procs::ProcTable;
use crate::reaper::Tracked;
use crate::server::Server;
use crate::socket;

/// How often, at most, zombies re-parented to us are looked for.
const ORPHAN_SCAN_PERIOD: Duration = Duration::from_millis(100);

/// How long a pooled run group may go unused before it is removed.
const GROUP_IDLE: Duration = Duration::from_secs(5);

/// How long shutdown waits for killed tools to be reaped.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Accept connections until `shutdown` fires; each is served concurrently.
/// At shutdown the socket is closed and removed first (so a successor can
/// start at once), then every process is stopped.
pub async fn run(server: Arc<Server>, bound: socket::Bound, shutdown: CancellationToken) {
    let root = crate::namespace::spec(&server);
    let config = &server.config;
    tokio::spawn(collect_garbage(
        server.clone(),
        config.gc_age,
        shutdown.clone(),
    ));
    tokio::spawn(reap_orphans(
        server.executor.runner.tracked.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(contain_upkeep(server.clone(), shutdown.clone()));
    let warm = server.clone();
    tokio::task::spawn_blocking(move || warm.executor.warm_up());
    if let Some(idle) = config.idle_timeout {
        tokio::spawn(idle_monitor(server.clone(), idle, shutdown.clone()));
    }
    let auth = server.auth_policy();
    crate::accept::accept_loop(&server, &bound.listener, root, auth, &shutdown).await;
    bound.close();
    shut_down(&server.procs, &server.executor).await;
    // Every process is stopped: nothing uses the temporary directory now.
    server.presence.leave();
}

/// Dismiss finished processes older than `gc_age`, periodically.
async fn collect_garbage(server: Arc<Server>, gc_age: Duration, shutdown: CancellationToken) {
    let period = (gc_age / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let n = server.procs.collect_garbage(gc_age);
        if n > 0 {
            tracing::debug!(dismissed = n, "finished processes dismissed");
        }
    }
}

/// `--idle-timeout`: shut down when nobody connected within `--idle-grace`
/// of startup, or when `idle` has passed with no connection open, no process
/// running and no bypass request pending. A running background process counts
/// as activity.
async fn idle_monitor(server: Arc<Server>, idle: Duration, shutdown: CancellationToken) {
    let grace = server.config.idle_grace;
    let tick = (idle / 10).clamp(Duration::from_millis(20), Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        match idle_verdict(&server.activity, &server.procs, &server.broker, idle, grace) {
            Idle::Busy => {}
            Idle::NobodyCame => {
                tracing::info!(grace = ?grace, "no client connected within the grace period; shutting down");
                shutdown.cancel();
                return;
            }
            Idle::TimedOut => {
                tracing::info!(idle = ?idle, "idle timeout; shutting down");
                shutdown.cancel();
                return;
            }
        }
    }
}

/// What the idle monitor sees at one tick.
enum Idle {
    /// Keep serving.
    Busy,
    /// Nobody connected within the grace period.
    NobodyCame,
    /// Idle for the whole timeout.
    TimedOut,
}

fn idle_verdict(
    a: &Activity,
    procs: &ProcTable,
    broker: &Broker,
    idle: Duration,
    grace: Duration,
) -> Idle {
    if !a.ever_connected() {
        return if a.since_start() >= grace {
            Idle::NobodyCame
        } else {
            Idle::Busy
        };
    }
    if a.open_connections() > 0 || procs.active() > 0 || !broker.is_empty() {
        a.touch();
        return Idle::Busy;
    }
    if a.since_busy() >= idle {
        Idle::TimedOut
    } else {
        Idle::Busy
    }
}

/// Reap orphaned descendants re-parented to us (we are a subreaper): after
/// tool runs end, and every `ORPHAN_POLL` while orphans are alive (see
/// [`crate::reaper`] for why not on SIGCHLD).
async fn reap_orphans(tracked: Arc<Tracked>, shutdown: CancellationToken) {
    let mut orphans_alive = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tracked.ended.notified() => {}
            _ = tokio::time::sleep(crate::reaper::ORPHAN_POLL), if orphans_alive => {}
        }
        // Tools end in bursts: look at most every ORPHAN_SCAN_PERIOD.
        tokio::time::sleep(ORPHAN_SCAN_PERIOD).await;
        let scan = crate::reaper::reap_orphans(&tracked);
        if scan.reaped > 0 {
            tracing::debug!(
                reaped = scan.reaped,
                alive = scan.alive,
                "orphaned descendants reaped"
            );
        }
        orphans_alive = scan.alive > 0;
    }
}

/// Containment upkeep: every second, remove the groups of killed runs once
/// empty and the pooled groups idle for [`GROUP_IDLE`].
async fn contain_upkeep(server: Arc<Server>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        server.executor.runner.containment.collect(GROUP_IDLE);
    }
}

/// Stop every process (tools get SIGTERM, then SIGKILL), wait for them to be
/// reaped, kill orphans.
async fn shut_down(procs: &ProcTable, executor: &Executor) {
    procs.stop_all();
    let deadline = Instant::now() + SHUTDOWN_WAIT;
    while procs.active() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if procs.active() > 0 {
        tracing::warn!(left = procs.active(), "processes still running at shutdown");
    }
    // Whatever of any run is left (detached descendants included) dies
    // with its group, and the groups go.
    executor.runner.containment.shutdown(SHUTDOWN_WAIT);
    // The tools PID namespace's init goes, and with it whatever of a
    // confined run is still in the namespace.
    executor.runner.watch.stop(SHUTDOWN_WAIT);
    crate::reaper::kill_orphans(&executor.runner.tracked);
    crate::reaper::reap_orphans(&executor.runner.tracked);
}
