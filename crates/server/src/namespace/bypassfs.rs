//! `bypass/`: `pending` (blocking, one request per read, a cursor per fid) and
//! `resolve` (write a JSON resolution).

use std::sync::Arc;

use async_trait::async_trait;
use toolsrv_protocol::Resolution;
use toolsrv_vfs::{ConnInfo, Error, File, Handle, OpenMode};

use crate::bypass::{Decision, ObserverCursor};
use crate::namespace::rerror;
use crate::server::Server;

/// `bypass/pending`.
pub(crate) struct PendingFile(pub(crate) Arc<Server>);

impl File for PendingFile {
    fn open(&self, _m: OpenMode, conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        self.0.check_observer(conn)?;
        Ok(Arc::new(PendingHandle {
            server: self.0.clone(),
            state: tokio::sync::Mutex::new((ObserverCursor::default(), Vec::new())),
        }))
    }
}

struct PendingHandle {
    server: Arc<Server>,
    /// The cursor and the unread rest of the last request returned.
    state: tokio::sync::Mutex<(ObserverCursor, Vec<u8>)>,
}

#[async_trait]
impl Handle for PendingHandle {
    async fn read(&self, _offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let mut st = self.state.lock().await;
        if st.1.is_empty() {
            let req = self.server.broker.next(&mut st.0).await;
            let mut line =
                serde_json::to_vec(&req).map_err(|e| Error::new(format!("internal error: {e}")))?;
            line.push(b'\n');
            st.1 = line;
        }
        let n = (count as usize).min(st.1.len());
        Ok(st.1.drain(..n).collect())
    }
}

/// `bypass/resolve`.
pub(crate) struct ResolveFile(pub(crate) Arc<Server>);

impl File for ResolveFile {
    fn open(&self, _m: OpenMode, conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        self.0.check_observer(conn)?;
        Ok(Arc::new(ResolveHandle {
            server: self.0.clone(),
            uid: conn.peer_uid,
            pid: conn.peer_pid,
        }))
    }
}

/// An open `bypass/resolve`, with who opened it (`SO_PEERCRED`) for the
/// audit log.
struct ResolveHandle {
    server: Arc<Server>,
    uid: Option<u32>,
    pid: Option<i32>,
}

#[async_trait]
impl Handle for ResolveHandle {
    async fn write(&self, _offset: u64, data: Vec<u8>) -> Result<u32, Error> {
        let r: Resolution = serde_json::from_slice(&data).map_err(rerror)?;
        let decision = if r.approve {
            Decision::Approve
        } else {
            Decision::Reject(r.reason.clone().unwrap_or_else(|| "rejected".into()))
        };
        self.server
            .broker
            .resolve(&r.id, decision)
            .map_err(rerror)?;
        self.server
            .audit
            .decision(&r.id, r.approve, r.reason.as_deref(), self.uid, self.pid);
        tracing::info!(id = %r.id, approve = r.approve, "bypass request resolved");
        Ok(data.len() as u32)
    }
}
