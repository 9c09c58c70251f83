//! The bypass broker (architecture, "Bypass namespace"; CONTRACT §8): requests for
//! unsandboxed runs wait here until a human observer approves or rejects them.
//!
//! Separate from sandbox execution: the executor resolves a request completely
//! (command, working directory, environment), submits exactly that here, and runs
//! exactly that on approval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::{oneshot, watch};
use toolsrv_protocol::BypassRequest;

/// What the observer decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it unsandboxed.
    Approve,
    /// Do not run it; the reason is shown to the agent.
    Reject(String),
}

struct Pending {
    seq: u64,
    request: BypassRequest,
    decide: oneshot::Sender<Decision>,
}

/// Pending bypass requests, oldest first.
pub struct Broker {
    next: AtomicU64,
    pending: Mutex<Vec<Pending>>,
    /// Bumped on every submission, so blocked readers look again.
    submitted: watch::Sender<u64>,
}

impl Default for Broker {
    fn default() -> Self {
        Broker {
            next: AtomicU64::new(1),
            pending: Mutex::new(Vec::new()),
            submitted: watch::channel(0).0,
        }
    }
}

/// Where one observer (one open `bypass/pending` fid) is: the last request it saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct ObserverCursor(u64);

impl Broker {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue a request (its `id` is assigned here); returns the id and where the
    /// decision will arrive.
    pub fn submit(&self, mut request: BypassRequest) -> (String, oneshot::Receiver<Decision>) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        request.id = format!("b{seq}");
        let id = request.id.clone();
        let (decide, rx) = oneshot::channel();
        self.lock().push(Pending {
            seq,
            request,
            decide,
        });
        self.submitted.send_replace(seq);
        (id, rx)
    }

    /// Resolve `id`. An unknown or already resolved id is an error.
    pub fn resolve(&self, id: &str, decision: Decision) -> Result<(), String> {
        let p = {
            let mut g = self.lock();
            let i = g
                .iter()
                .position(|p| p.request.id == id)
                .ok_or_else(|| format!("unknown bypass request {id:?}"))?;
            g.remove(i)
        };
        // The requester may have gone meanwhile; then the decision has no effect.
        let _ = p.decide.send(decision);
        Ok(())
    }

    /// Withdraw `id` (its request was cancelled, killed or timed out); returns
    /// whether it was still pending.
    pub fn withdraw(&self, id: &str) -> bool {
        let mut g = self.lock();
        let before = g.len();
        g.retain(|p| p.request.id != id);
        g.len() != before
    }

    /// The oldest pending request this observer has not seen, waiting while
    /// there is none.
    pub async fn next(&self, cursor: &mut ObserverCursor) -> BypassRequest {
        let mut rx = self.submitted.subscribe();
        loop {
            rx.borrow_and_update();
            if let Some(p) = self.lock().iter().find(|p| p.seq > cursor.0) {
                cursor.0 = p.seq;
                return p.request.clone();
            }
            if rx.changed().await.is_err() {
                // The broker is gone (server shutting down): wait forever; the
                // read is completed by clunk or connection close.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Number of pending requests.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
