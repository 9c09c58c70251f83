//! The write side of a connection: replies leave in order, and the replies that
//! came before a request which waits can be held back to leave together with
//! that request's reply.
//!
//! A client that pipelines `Twalk`+`Topen`+`Twrite`+`Tread` (a tool call) has no
//! use for the first three replies until the read's: sending them at once costs a
//! write here and a wake-up of the client, sending them with the `Rread` costs
//! neither. Held replies go out, first and in order, with the next write of any
//! kind: a task's reply, a reply of the connection loop (so an `Rflush` can never
//! overtake them), or [`Writer::release`] when they have been held for
//! [`HOLD_LIMIT`].
//!
//! That limit is one timer per connection, driven by the connection's own
//! task ([`Writer::hold_deadline`], `conn::release_held`) and moved forward
//! rather than made anew for each call: a new timer due before the one the
//! runtime last promised to wake for makes tokio wake its own driver (a
//! write to its eventfd and one more `epoll_wait`), which a timer per
//! waiting request did in about half the calls.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use tokio::io::AsyncWrite;
use toolsrv_base::LockUnpoisoned;
use toolsrv_wire::Body;

use crate::inflight::Inflight;
use crate::outbox::Outbox;
use crate::replies::Permit;

/// The write side of the connection's byte stream.
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// The longest replies are held back for a waiting request's reply.
pub(crate) const HOLD_LIMIT: Duration = Duration::from_millis(20);

/// The stream's write half and the replies held back, behind one lock.
struct State {
    half: WriteHalf,
    held: Outbox,
}

/// The write side of a connection. Replies of task-run requests are sent under
/// this lock *after* checking (under the inflight lock) that their tag was not
/// flushed, so an `Rflush` can never overtake a reply it must follow.
pub(crate) struct Writer {
    state: tokio::sync::Mutex<State>,
    /// When the replies held now must go out at the latest; `None` while
    /// nothing is held.
    deadline: Mutex<Option<Instant>>,
}

impl Writer {
    /// A writer on `half`, holding nothing.
    pub(crate) fn new(half: WriteHalf) -> Writer {
        Writer {
            state: tokio::sync::Mutex::new(State {
                half,
                held: Outbox::default(),
            }),
            deadline: Mutex::new(None),
        }
    }

    /// When the replies held now must be released ([`Writer::release`]),
    /// or `None` when nothing is held.
    pub(crate) fn hold_deadline(&self) -> Option<Instant> {
        *self.deadline.lock_unpoisoned()
    }

    /// Nothing is held any more (called under the state lock, after a write
    /// of the held replies).
    fn held_sent(&self) {
        *self.deadline.lock_unpoisoned() = None;
    }

    /// Send the reply of a task-run request unless its tag was flushed; held
    /// replies go first, in the same write. `permit` covers its data.
    pub(crate) async fn send_task_reply(
        &self,
        inflight: &Inflight,
        tag: u16,
        body: Body,
        permit: Option<Permit>,
    ) {
        let mut st = self.state.lock().await;
        if inflight.finish(tag) {
            let State { half, held } = &mut *st;
            held.push_covered(tag, body, permit);
            // A write error means the peer is gone; the reader notices and cleans up.
            let _ = held.write_to(half).await;
            self.held_sent();
        }
    }

    /// Write held replies, then `out` (left empty), in one write.
    pub(crate) async fn send(&self, out: &mut Outbox) -> std::io::Result<()> {
        let mut st = self.state.lock().await;
        let State { half, held } = &mut *st;
        held.append(out);
        let r = held.write_to(half).await;
        self.held_sent();
        r
    }

    /// Hold `out` (left empty) back, behind whatever is held already, until
    /// the next write, if request `tag` is still waiting; else (its reply has
    /// gone out, or it was flushed) write now.
    pub(crate) async fn hold(
        &self,
        out: &mut Outbox,
        inflight: &Inflight,
        tag: u16,
    ) -> std::io::Result<()> {
        let mut st = self.state.lock().await;
        let State { half, held } = &mut *st;
        held.append(out);
        // `send_task_reply` takes the tag out under this lock: if it is still
        // there, that reply (or the timer of its task) will carry these.
        if inflight.contains(tag) {
            let mut deadline = self.deadline.lock_unpoisoned();
            if deadline.is_none() && !held.is_empty() {
                *deadline = Some(Instant::now() + HOLD_LIMIT);
            }
            Ok(())
        } else {
            let r = held.write_to(half).await;
            self.held_sent();
            r
        }
    }

    /// Write whatever is held now.
    pub(crate) async fn release(&self) {
        let mut st = self.state.lock().await;
        let State { half, held } = &mut *st;
        if !held.is_empty() {
            let _ = held.write_to(half).await;
        }
        self.held_sent();
    }
}
