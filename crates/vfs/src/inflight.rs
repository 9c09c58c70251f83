//! Requests of one connection that are waiting in their own task, by tag, and the
//! shared writer that keeps replies and `Rflush` in the right order.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::net::unix::OwnedWriteHalf;
use tokio::task::AbortHandle;
use toolsrv_wire::Body;

use crate::outbox::Outbox;

/// Outstanding (task-run) requests by tag.
#[derive(Default)]
pub(crate) struct Inflight {
    tasks: Mutex<HashMap<u16, Option<AbortHandle>>>,
}

impl Inflight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u16, Option<AbortHandle>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `tag` is outstanding.
    pub(crate) fn contains(&self, tag: u16) -> bool {
        self.lock().contains_key(&tag)
    }

    /// Register `tag` before its task starts, then attach the task's abort handle.
    pub(crate) fn reserve(&self, tag: u16) {
        self.lock().insert(tag, None);
    }

    pub(crate) fn attach(&self, tag: u16, h: AbortHandle) {
        let mut g = self.lock();
        // Absent when already finished (or flushed): nothing to attach.
        if let Some(slot) = g.get_mut(&tag) {
            *slot = Some(h);
        }
    }

    /// Take `tag` out: `true` if it was still outstanding (so its reply may be sent).
    pub(crate) fn finish(&self, tag: u16) -> bool {
        self.lock().remove(&tag).is_some()
    }

    /// Abandon `tag`: no reply will be sent for it.
    pub(crate) fn flush(&self, tag: u16) {
        if let Some(Some(h)) = self.lock().remove(&tag) {
            h.abort();
        }
    }

    /// Abandon everything (connection closing or `Tversion`).
    pub(crate) fn abort_all(&self) {
        for (_, h) in self.lock().drain() {
            if let Some(h) = h {
                h.abort();
            }
        }
    }
}

/// The write side of a connection. Replies of task-run requests are sent under
/// this lock *after* checking (under the inflight lock) that their tag was not
/// flushed, so an `Rflush` can never overtake a reply it must follow.
pub(crate) struct Writer {
    pub(crate) half: tokio::sync::Mutex<OwnedWriteHalf>,
}

impl Writer {
    /// Send the reply of a task-run request unless its tag was flushed.
    pub(crate) async fn send_task_reply(&self, inflight: &Inflight, tag: u16, body: Body) {
        let mut out = Outbox::default();
        out.push(tag, body);
        let mut w = self.half.lock().await;
        if inflight.finish(tag) {
            // A write error means the peer is gone; the reader notices and cleans up.
            let _ = out.write_to(&mut w).await;
        }
    }

    /// Write queued replies (the outbox is left empty).
    pub(crate) async fn send(&self, out: &mut Outbox) -> std::io::Result<()> {
        let mut w = self.half.lock().await;
        out.write_to(&mut w).await
    }
}
