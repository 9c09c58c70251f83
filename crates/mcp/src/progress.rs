//! Progress of a running call: which toolsrv process it is, how long it has
//! run, how much it printed, and whether it awaits a bypass approval.
//!
//! `proc/new` does not name the pid of the run it starts, so the tracker
//! takes the newest process of this agent and tool, synchronous and still
//! running or awaiting approval, that no other call of this bridge has taken.
//! Two identical calls started at the same instant may swap their figures;
//! nothing else depends on the match (cancellation clunks the call's own fid).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use toolsrv_protocol::ProcState;

use crate::bridge::Bridge;

/// What the tracker learned, shared with the call.
#[derive(Clone, Default)]
pub(crate) struct TrackerState(Arc<Shared>);

#[derive(Default)]
struct Shared {
    pid: Mutex<Option<u64>>,
    bypass_id: Mutex<Option<String>>,
    awaiting: std::sync::atomic::AtomicBool,
    out_bytes: AtomicU64,
}

impl TrackerState {
    pub(crate) fn bypass_id(&self) -> Option<String> {
        self.0.bypass_id.lock().ok().and_then(|g| g.clone())
    }
    fn pid(&self) -> Option<u64> {
        self.0.pid.lock().ok().and_then(|g| *g)
    }
}

pub(crate) struct Tracker {
    pub(crate) bridge: Bridge,
    pub(crate) tool: String,
    pub(crate) token: Option<ProgressToken>,
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) started: Instant,
    pub(crate) state: TrackerState,
}

/// Releases a claimed pid when the call ends.
struct Claim<'a>(&'a Bridge, u64);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.0.inner.claimed.lock() {
            c.remove(&self.1);
        }
    }
}

impl Tracker {
    /// Runs until dropped (the call's end drops it).
    pub(crate) async fn run(self) {
        tokio::join!(self.follow(), self.notify());
        std::future::pending::<()>().await
    }

    /// Finds the run's pid, then follows its output and state.
    async fn follow(&self) {
        let Some(claim) = self.find_pid().await else {
            return;
        };
        tokio::join!(self.count_output(claim.1), self.watch_state(claim.1));
        drop(claim);
    }

    async fn find_pid(&self) -> Option<Claim<'_>> {
        let agent = &self.bridge.inner.cfg.agent;
        for _ in 0..200 {
            if let Ok(procs) = self.bridge.client().ps(Some(agent)).await {
                let pick = {
                    let Ok(mut claimed) = self.bridge.inner.claimed.lock() else {
                        return None;
                    };
                    let pid = procs
                        .iter()
                        .filter(|p| {
                            p.tool == self.tool
                                && !p.background
                                && matches!(
                                    p.state,
                                    ProcState::Running | ProcState::AwaitingApproval
                                )
                                && !claimed.contains(&p.pid)
                        })
                        .map(|p| p.pid)
                        .max();
                    if let Some(pid) = pid {
                        claimed.insert(pid);
                    }
                    pid
                };
                if let Some(pid) = pick {
                    if let Ok(mut g) = self.state.0.pid.lock() {
                        *g = Some(pid);
                    }
                    return Some(Claim(&self.bridge, pid));
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        None
    }

    /// Reads `proc/<pid>/out` to its end, counting bytes.
    async fn count_output(&self, pid: u64) {
        let Ok(file) = self
            .bridge
            .client()
            .open(&format!("proc/{pid}/out"), toolsrv_wire::OREAD)
            .await
        else {
            return;
        };
        let mut offset = 0u64;
        while let Ok(data) = file.read_at(offset, file.max_io()).await {
            if data.is_empty() {
                break;
            }
            offset += data.len() as u64;
            self.state.0.out_bytes.store(offset, Ordering::Relaxed);
        }
    }

    /// Notes whether the run awaits approval, and finds its bypass request id.
    async fn watch_state(&self, pid: u64) {
        let Ok(stat) = self.bridge.client().proc_stat(pid).await else {
            return;
        };
        if stat.state != ProcState::AwaitingApproval {
            return;
        }
        self.state.0.awaiting.store(true, Ordering::Relaxed);
        let id = async {
            let mut watch = self.bridge.client().pending().await.ok()?;
            loop {
                let req = watch.next().await.ok()?;
                if req.pid == pid {
                    return Some(req.id);
                }
            }
        };
        let poll = async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match self.bridge.client().proc_stat(pid).await {
                    Ok(s) if s.state == ProcState::AwaitingApproval => {}
                    _ => break,
                }
            }
        };
        tokio::pin!(poll);
        tokio::select! {
            id = id => {
                if let (Some(id), Ok(mut g)) = (id, self.state.0.bypass_id.lock()) {
                    *g = Some(id);
                }
                poll.await;
            }
            _ = &mut poll => {}
        }
        self.state.0.awaiting.store(false, Ordering::Relaxed);
    }

    /// Sends a progress notification every `progress_interval` (first after
    /// 200 ms) while the caller gave a progress token.
    async fn notify(&self) {
        let Some(token) = self.token.clone() else {
            return;
        };
        let every = self.bridge.inner.cfg.progress_interval;
        let first = tokio::time::Instant::now() + every.min(Duration::from_millis(200));
        let mut tick = tokio::time::interval_at(first, every);
        loop {
            tick.tick().await;
            let elapsed = self.started.elapsed().as_secs_f64();
            let message = self.message(elapsed);
            let mut param = ProgressNotificationParam::new(token.clone(), elapsed);
            param.message = Some(message);
            if self.peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    }

    fn message(&self, elapsed: f64) -> String {
        let s = &self.state.0;
        if s.awaiting.load(Ordering::Relaxed) {
            let id = self.state.bypass_id();
            return match id {
                Some(id) => format!(
                    "awaiting approval: bypass request {id} ({elapsed:.1}s); an observer runs `toolsrv approve {id}` or `toolsrv reject {id} <reason>`"
                ),
                None => format!("awaiting approval of the bypass request ({elapsed:.1}s)"),
            };
        }
        let bytes = s.out_bytes.load(Ordering::Relaxed);
        match self.state.pid() {
            Some(pid) => format!("running {elapsed:.1}s, {bytes} output bytes (toolsrv pid {pid})"),
            None => format!("running {elapsed:.1}s"),
        }
    }
}
