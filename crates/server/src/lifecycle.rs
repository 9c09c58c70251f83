//! Lifecycle (architecture, "Startup and shutdown"; CONTRACT §11): the idle
//! monitor, orphan reaping, and the shutdown sequence.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::server::Server;

/// How often, at most, zombies re-parented to us are looked for.
const ORPHAN_SCAN_PERIOD: Duration = Duration::from_millis(100);

/// How long a pooled run group may go unused before it is removed.
const GROUP_IDLE: Duration = Duration::from_secs(5);

/// How long shutdown waits for killed tools to be reaped.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Open connections and the last moment the server was busy.
#[derive(Clone)]
pub struct Activity(Arc<ActivityInner>);

struct ActivityInner {
    open: AtomicUsize,
    ever: AtomicBool,
    started: Instant,
    last_busy: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity(Arc::new(ActivityInner {
            open: AtomicUsize::new(0),
            ever: AtomicBool::new(false),
            started: Instant::now(),
            last_busy: Mutex::new(Instant::now()),
        }))
    }
}

/// Held while a connection is open.
pub struct ConnectionGuard(Activity);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0 .0.open.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

impl Activity {
    /// A connection opened; dropping the guard marks its close.
    pub fn connection(&self) -> ConnectionGuard {
        self.0.open.fetch_add(1, Ordering::Relaxed);
        self.0.ever.store(true, Ordering::Relaxed);
        self.touch();
        ConnectionGuard(self.clone())
    }

    fn touch(&self) {
        *self.0.last_busy.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Number of open connections.
    pub fn open_connections(&self) -> usize {
        self.0.open.load(Ordering::Relaxed)
    }

    fn ever_connected(&self) -> bool {
        self.0.ever.load(Ordering::Relaxed)
    }

    fn since_start(&self) -> Duration {
        self.0.started.elapsed()
    }

    fn since_busy(&self) -> Duration {
        self.0
            .last_busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }
}

impl Server {
    /// `--idle-timeout`: shut down when nobody connected within `--idle-grace`
    /// of startup, or when `idle` has passed with no connection open, no process
    /// running and no bypass request pending. A running background process counts
    /// as activity.
    pub async fn idle_monitor(self: Arc<Self>, idle: Duration, shutdown: CancellationToken) {
        let tick = (idle / 10).clamp(Duration::from_millis(20), Duration::from_millis(250));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(tick) => {}
            }
            let a = &self.activity;
            if !a.ever_connected() {
                if a.since_start() >= self.config.idle_grace {
                    tracing::info!(grace = ?self.config.idle_grace, "no client connected within the grace period; shutting down");
                    shutdown.cancel();
                    return;
                }
                continue;
            }
            let busy =
                a.open_connections() > 0 || self.procs.active() > 0 || !self.broker.is_empty();
            if busy {
                a.touch();
                continue;
            }
            if a.since_busy() >= idle {
                tracing::info!(idle = ?idle, "idle timeout; shutting down");
                shutdown.cancel();
                return;
            }
        }
    }

    /// Reap orphaned descendants re-parented to us (we are a subreaper): after
    /// tool runs end, and every `ORPHAN_POLL` while orphans are alive (see
    /// [`crate::reaper`] for why not on SIGCHLD).
    pub async fn reap_orphans(self: Arc<Self>, shutdown: CancellationToken) {
        let tracked = &self.executor.tracked;
        let mut orphans_alive = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tracked.ended.notified() => {}
                _ = tokio::time::sleep(crate::reaper::ORPHAN_POLL), if orphans_alive => {}
            }
            // Tools end in bursts: look at most every ORPHAN_SCAN_PERIOD.
            tokio::time::sleep(ORPHAN_SCAN_PERIOD).await;
            let scan = crate::reaper::reap_orphans(tracked);
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
    pub async fn contain_upkeep(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            self.executor.containment.collect(GROUP_IDLE);
        }
    }

    /// Stop every process (tools get SIGTERM, then SIGKILL), wait for them to be
    /// reaped, kill orphans.
    pub async fn shut_down(&self) {
        self.procs.stop_all();
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        while self.procs.active() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.procs.active() > 0 {
            tracing::warn!(
                left = self.procs.active(),
                "processes still running at shutdown"
            );
        }
        // Whatever of any run is left (detached descendants included) dies
        // with its group, and the groups go.
        self.executor.containment.shutdown(SHUTDOWN_WAIT);
        crate::reaper::kill_orphans(&self.executor.tracked);
        crate::reaper::reap_orphans(&self.executor.tracked);
    }
}
