//! Connection slots of the HTTP transport: at most [`MAX_CONNECTIONS`] at
//! once, and a connection that has not yet sent a request with the bearer
//! token is the first to go when they are all taken.
//!
//! Anyone who can reach the port (every local process, every tool) can open
//! connections; only a client with the token gets anything from them. A
//! flood of connections that send nothing is closed by the header-read
//! timeout after a while, and before that, each new connection that finds
//! every slot taken closes the oldest connection that has not shown the token
//! yet. A connection that has shown it keeps its slot; when every slot is
//! held by such connections, a new one is closed at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use toolsrv_base::LockUnpoisoned;

use tokio_util::sync::CancellationToken;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;

/// The open connections.
#[derive(Debug)]
pub(crate) struct Slots {
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    open: usize,
    next: u64,
    /// Connections that have not shown the token, oldest first.
    unproven: VecDeque<Arc<State>>,
}

#[derive(Debug)]
struct State {
    id: u64,
    /// Cancelled when the connection is closed to make room.
    evicted: CancellationToken,
    /// Its slot was given back (evicted, or the connection ended).
    released: AtomicBool,
}

/// One connection's slot, given back on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    state: Arc<State>,
    proven: AtomicBool,
}

impl Slots {
    /// Room for `max` connections.
    pub(crate) fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// A slot for a new connection: a free one, or that of the oldest
    /// connection that has not shown the token (which is closed); `None`
    /// when every slot is held by connections that have.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut inner = self.inner.lock_unpoisoned();
        if inner.open >= self.max {
            let oldest = inner.unproven.pop_front()?;
            oldest.released.store(true, Ordering::Release);
            oldest.evicted.cancel();
            inner.open -= 1;
        }
        inner.open += 1;
        inner.next += 1;
        let state = Arc::new(State {
            id: inner.next,
            evicted: CancellationToken::new(),
            released: AtomicBool::new(false),
        });
        inner.unproven.push_back(state.clone());
        Some(Slot {
            slots: self.clone(),
            state,
            proven: AtomicBool::new(false),
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.inner.lock_unpoisoned().open
    }
}

impl Slot {
    /// The connection sent a request with the token: it keeps its slot.
    pub(crate) fn proven(&self) {
        if !self.proven.swap(true, Ordering::AcqRel) {
            let id = self.state.id;
            self.slots
                .inner
                .lock_unpoisoned()
                .unproven
                .retain(|s| s.id != id);
        }
    }

    /// Completes when the slot was given to a newer connection.
    pub(crate) async fn evicted(&self) {
        self.state.evicted.cancelled().await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.slots.inner.lock_unpoisoned();
        if !self.state.released.swap(true, Ordering::AcqRel) {
            inner.open -= 1;
            let id = self.state.id;
            inner.unproven.retain(|s| s.id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_unproven_connection_makes_room_and_proven_ones_keep_theirs() {
        let slots = Slots::new(2);
        let a = slots.admit().expect("a");
        let b = slots.admit().expect("b");
        a.proven();
        let c = slots.admit().expect("c takes b's slot");
        assert!(b.state.evicted.is_cancelled());
        assert!(!a.state.evicted.is_cancelled());
        assert_eq!(slots.open(), 2);
        drop(b);
        assert_eq!(slots.open(), 2, "an evicted slot is not given back twice");
        c.proven();
        assert!(
            slots.admit().is_none(),
            "every slot is held by a proven connection"
        );
        drop(a);
        assert_eq!(slots.open(), 1);
        let _d = slots.admit().expect("d");
        assert_eq!(slots.open(), 2);
    }
}
