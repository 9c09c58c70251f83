//! [`Activity`]: open connections and when the server was last busy, for the
//! idle monitor.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

/// Open connections and the last moment the server was busy.
#[derive(Clone)]
pub(crate) struct Activity(Arc<ActivityInner>);

struct ActivityInner {
    open: AtomicUsize,
    /// Of those, connections of the server's own descendants (its tools).
    descendants: AtomicUsize,
    ever: AtomicBool,
    started: Instant,
    last_busy: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity(Arc::new(ActivityInner {
            open: AtomicUsize::new(0),
            descendants: AtomicUsize::new(0),
            ever: AtomicBool::new(false),
            started: Instant::now(),
            last_busy: Mutex::new(Instant::now()),
        }))
    }
}

/// Held while a connection is open.
pub(crate) struct ConnectionGuard {
    activity: Activity,
    descendant: bool,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let inner = &self.activity.0;
        // Descendants first: `open` never reads below `descendants`.
        if self.descendant {
            inner.descendants.fetch_sub(1, Ordering::Relaxed);
        }
        inner.open.fetch_sub(1, Ordering::Relaxed);
        self.activity.touch();
    }
}

impl Activity {
    /// A connection opened (`descendant`: from one of the server's own
    /// descendants); dropping the guard marks its close.
    pub(crate) fn connection(&self, descendant: bool) -> ConnectionGuard {
        self.0.open.fetch_add(1, Ordering::Relaxed);
        if descendant {
            self.0.descendants.fetch_add(1, Ordering::Relaxed);
        }
        self.0.ever.store(true, Ordering::Relaxed);
        self.touch();
        ConnectionGuard {
            activity: self.clone(),
            descendant,
        }
    }

    /// Number of open connections of the server's own descendants.
    pub(crate) fn descendant_connections(&self) -> usize {
        self.0.descendants.load(Ordering::Relaxed)
    }

    pub(crate) fn touch(&self) {
        *self.0.last_busy.lock_unpoisoned() = Instant::now();
    }

    /// Number of open connections.
    pub(crate) fn open_connections(&self) -> usize {
        self.0.open.load(Ordering::Relaxed)
    }

    pub(crate) fn ever_connected(&self) -> bool {
        self.0.ever.load(Ordering::Relaxed)
    }

    pub(crate) fn since_start(&self) -> Duration {
        self.0.started.elapsed()
    }

    pub(crate) fn since_busy(&self) -> Duration {
        self.0.last_busy.lock_unpoisoned().elapsed()
    }
}
