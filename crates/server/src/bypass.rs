//! The bypass broker (architecture, "Bypass namespace"; docs/protocol.md, "Bypass requests"): requests for
//! unsandboxed runs wait here until a human observer approves or rejects them.
//!
//! Separate from sandbox execution: the executor resolves a request completely
//! (command, working directory, environment), submits exactly that here, and runs
//! exactly that on approval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{oneshot, watch};
use toolsrv_base::LockUnpoisoned;
use toolsrv_protocol::{format_rfc3339_millis, BypassRequest, ProcState};

use crate::exec::RunPlan;
use crate::procs::Proc;

/// What the observer decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
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

/// A resolution named no pending request.
#[derive(Debug, thiserror::Error)]
#[error("unknown bypass request {0:?}")]
pub(crate) struct UnknownRequest(String);

/// Pending bypass requests, oldest first.
pub(crate) struct Broker {
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
pub(crate) struct ObserverCursor(u64);

impl Broker {
    /// Queue a request (its `id` is assigned here); returns the id and where the
    /// decision will arrive.
    pub(crate) fn submit(
        &self,
        mut request: BypassRequest,
    ) -> (String, oneshot::Receiver<Decision>) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        request.id = format!("b{seq}");
        let id = request.id.clone();
        let (decide, rx) = oneshot::channel();
        self.pending.lock_unpoisoned().push(Pending {
            seq,
            request,
            decide,
        });
        self.submitted.send_replace(seq);
        (id, rx)
    }

    /// Resolve `id`. An unknown or already resolved id is an error.
    pub(crate) fn resolve(&self, id: &str, decision: Decision) -> Result<(), UnknownRequest> {
        let p = {
            let mut g = self.pending.lock_unpoisoned();
            let i = g
                .iter()
                .position(|p| p.request.id == id)
                .ok_or_else(|| UnknownRequest(id.to_string()))?;
            g.remove(i)
        };
        // The requester may have gone meanwhile; then the decision has no effect.
        let _ = p.decide.send(decision);
        Ok(())
    }

    /// Withdraw `id` (its request was cancelled, killed or timed out); returns
    /// whether it was still pending.
    pub(crate) fn withdraw(&self, id: &str) -> bool {
        let mut g = self.pending.lock_unpoisoned();
        let before = g.len();
        g.retain(|p| p.request.id != id);
        g.len() != before
    }

    /// The oldest pending request this observer has not seen, waiting while
    /// there is none.
    pub(crate) async fn next(&self, cursor: &mut ObserverCursor) -> BypassRequest {
        let mut rx = self.submitted.subscribe();
        loop {
            rx.borrow_and_update();
            if let Some(p) = self
                .pending
                .lock_unpoisoned()
                .iter()
                .find(|p| p.seq > cursor.0)
            {
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
    pub(crate) fn len(&self) -> usize {
        self.pending.lock_unpoisoned().len()
    }

    /// Whether nothing is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Queue `prep` as a bypass request and wait for the observer, at most `timeout`. Returns whether to run;
/// otherwise the process has been finished (rejected, cancelled, killed).
pub(crate) async fn await_approval(
    broker: &Broker,
    proc: &Arc<Proc>,
    plan: &RunPlan,
    timeout: Duration,
) -> bool {
    let (id, decision) = broker.submit(BypassRequest {
        id: String::new(),
        pid: proc.pid,
        agent: plan.request.agent.clone(),
        session: plan.request.session.clone(),
        tool: plan.tool.name.clone(),
        command: plan.display.clone(),
        cwd: plan.cwd.display().to_string(),
        env: plan.env.clone(),
        request_env: plan.request.env.iter().cloned().collect(),
        files: plan
            .files
            .iter()
            .map(|f| (f.name.clone(), f.value.clone()))
            .collect(),
        created: format_rfc3339_millis(SystemTime::now()),
    });
    tracing::info!(pid = proc.pid, id = %id, agent = %plan.request.agent, tool = %plan.tool.name, "bypass request pending");
    let mut decision = decision;
    let decided = tokio::select! {
        d = &mut decision => d.unwrap_or_else(|_| Decision::Reject("withdrawn".into())),
        _ = proc.stop.cancelled() => {
            broker.withdraw(&id);
            match proc.stop_signal() {
                Some(sig) => proc.finish(ProcState::Killed, 128 + sig),
                None => {
                    proc.output.push(b"cancelled");
                    proc.finish(ProcState::Cancelled, 128 + libc::SIGTERM);
                }
            }
            return false;
        }
        _ = tokio::time::sleep(timeout) => {
            if broker.withdraw(&id) {
                Decision::Reject("timed out".into())
            } else {
                // Resolved just as the timeout fired: the observer's decision stands.
                decision.await.unwrap_or_else(|_| Decision::Reject("timed out".into()))
            }
        }
    };
    match decided {
        Decision::Approve => {
            proc.set_state(ProcState::Running);
            true
        }
        Decision::Reject(reason) => {
            proc.output
                .push(format!("bypass rejected: {reason}").as_bytes());
            proc.finish(ProcState::Rejected, 126);
            false
        }
    }
}
