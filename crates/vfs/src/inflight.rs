//! Requests of one connection that are waiting in their own task, by tag.

use std::collections::HashMap;
use std::sync::Mutex;

use toolsrv_base::LockUnpoisoned;

use tokio::task::AbortHandle;

/// Outstanding (task-run) requests by tag.
#[derive(Default)]
pub(crate) struct Inflight {
    tasks: Mutex<HashMap<u16, Option<AbortHandle>>>,
}

impl Inflight {
    /// Whether `tag` is outstanding.
    pub(crate) fn contains(&self, tag: u16) -> bool {
        self.tasks.lock_unpoisoned().contains_key(&tag)
    }

    /// Register `tag` before its task starts, then attach the task's abort handle.
    pub(crate) fn reserve(&self, tag: u16) {
        self.tasks.lock_unpoisoned().insert(tag, None);
    }

    pub(crate) fn attach(&self, tag: u16, h: AbortHandle) {
        let mut g = self.tasks.lock_unpoisoned();
        // Absent when already finished (or flushed): nothing to attach.
        if let Some(slot) = g.get_mut(&tag) {
            *slot = Some(h);
        }
    }

    /// Take `tag` out: `true` if it was still outstanding (so its reply may be sent).
    pub(crate) fn finish(&self, tag: u16) -> bool {
        self.tasks.lock_unpoisoned().remove(&tag).is_some()
    }

    /// Abandon `tag`: no reply will be sent for it.
    pub(crate) fn flush(&self, tag: u16) {
        if let Some(Some(h)) = self.tasks.lock_unpoisoned().remove(&tag) {
            h.abort();
        }
    }

    /// Abandon everything (connection closing or `Tversion`).
    pub(crate) fn abort_all(&self) {
        for (_, h) in self.tasks.lock_unpoisoned().drain() {
            if let Some(h) = h {
                h.abort();
            }
        }
    }
}
