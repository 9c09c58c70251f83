//! Reusable kinds of synthetic files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::future::{BoxFuture, FutureExt, Shared};
use tokio_util::sync::CancellationToken;
use toolsrv_base::LockUnpoisoned;
use toolsrv_vfs::{ConnInfo, Error, File, Handle, OpenMode, Reservation};

/// The largest request one open write-then-read file accepts. The connection's
/// requests together are bounded too ([`toolsrv_vfs::limits::MAX_REQUEST_BYTES`]):
/// the bytes are held from the write until the evaluation ends.
pub(crate) const MAX_REQUEST: usize = 16 << 20;

/// `data[offset..offset+count]`, empty past the end: always as much as was asked
/// for while data remains, which the client relies on (a short read ends a
/// write-then-read response; docs/client.md).
pub(crate) fn slice_at(data: &[u8], offset: u64, count: u32) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let end = start.saturating_add(count as usize).min(data.len());
    data[start..end].to_vec()
}

/// A read-only file whose content is produced when it is opened.
pub(crate) struct Generated<F>(pub(crate) F);

impl<F> File for Generated<F>
where
    F: Fn() -> Result<Vec<u8>, Error> + Send + Sync + 'static,
{
    fn open(&self, _mode: OpenMode, _conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(Snapshot((self.0)()?)))
    }
}

/// Fixed bytes, read at any offset.
pub(crate) struct Snapshot(pub(crate) Vec<u8>);

#[async_trait]
impl Handle for Snapshot {
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        Ok(slice_at(&self.0, offset, count))
    }
}

/// What to do once a read returned a request's response and its fid was then
/// clunked (a synchronous call's process entry is dismissed then).
pub(crate) type AfterAnswer = Box<dyn FnOnce() + Send + Sync>;

/// What a write-then-read file does with its request.
#[async_trait]
pub(crate) trait Request: Send + Sync + 'static {
    /// [`Request::evaluate`], also returning what to do once a read returned
    /// the response and the fid was clunked after it (default: nothing).
    async fn evaluate_answer(
        self: Arc<Self>,
        request: Vec<u8>,
        conn: ConnInfo,
        cancel: CancellationToken,
    ) -> Result<(Vec<u8>, Option<AfterAnswer>), Error> {
        self.evaluate(request, conn, cancel)
            .await
            .map(|r| (r, None))
    }

    /// Evaluate `request` (everything written, concatenated). Runs in its own
    /// task, so a flushed read does not stop it; `cancel` fires when the fid is
    /// clunked.
    async fn evaluate(
        self: Arc<Self>,
        request: Vec<u8>,
        conn: ConnInfo,
        cancel: CancellationToken,
    ) -> Result<Vec<u8>, Error>;

    /// The response to a read without a prior write (default: an error).
    fn unwritten(&self) -> Result<(), Error> {
        Err(Error::new("write an agent ID first"))
    }

    /// Whether reading without a prior write evaluates an empty request.
    fn evaluate_unwritten(&self) -> bool {
        false
    }
}

/// A file whose writes form a request and whose first read evaluates it
/// (docs/protocol.md, "Namespace", "Write-then-read files").
pub(crate) struct WriteThenRead<R>(pub(crate) Arc<R>);

impl<R: Request> File for WriteThenRead<R> {
    fn open(&self, _mode: OpenMode, conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(RequestHandle {
            req: self.0.clone(),
            conn: conn.clone(),
            cancel: CancellationToken::new(),
            state: Mutex::new(State::Writing(Vec::new(), conn.requests.reservation())),
            after: Arc::new(Mutex::new(None)),
            answered: AtomicBool::new(false),
        }))
    }
}

type Response = Shared<BoxFuture<'static, Result<Arc<Vec<u8>>, Error>>>;

enum State {
    /// The request so far, and its share of the connection's request budget.
    Writing(Vec<u8>, Reservation),
    Evaluating(Response),
}

struct RequestHandle<R> {
    req: Arc<R>,
    conn: ConnInfo,
    cancel: CancellationToken,
    state: Mutex<State>,
    /// Set when the evaluation ends; run at clunk if a read returned the response.
    after: Arc<Mutex<Option<AfterAnswer>>>,
    /// A read returned (part of) the response.
    answered: AtomicBool,
}

impl<R: Request> RequestHandle<R> {
    fn response(&self) -> Result<Response, Error> {
        let mut st = self.state.lock_unpoisoned();
        if let State::Evaluating(r) = &*st {
            return Ok(r.clone());
        }
        if let State::Writing(buf, _) = &*st {
            if buf.is_empty() && !self.req.evaluate_unwritten() {
                self.req.unwritten()?;
            }
        }
        let empty = State::Writing(Vec::new(), self.conn.requests.reservation());
        let State::Writing(buf, held) = std::mem::replace(&mut *st, empty) else {
            unreachable!("checked above")
        };
        let eval = self
            .req
            .clone()
            .evaluate_answer(buf, self.conn.clone(), self.cancel.clone());
        // The request's bytes stay reserved until its evaluation ends.
        let slot = self.after.clone();
        let mut eval = async move {
            let r = eval.await;
            drop(held);
            r.map(|(bytes, after)| {
                if after.is_some() {
                    *slot.lock_unpoisoned() = after;
                }
                bytes
            })
        }
        .boxed();
        // Run the evaluation as far as it goes without waiting, right here (for
        // `proc/new`: prepare and spawn the tool), then let its own task carry
        // on: the tool starts without a task hand-off (often to the other
        // worker thread), and the rest of the evaluation does not depend on
        // the read (a flushed read does not stop it). The task's first poll
        // re-registers every waker the no-op one stood in for.
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        let fut: BoxFuture<'static, Result<Arc<Vec<u8>>, Error>> = match eval.as_mut().poll(&mut cx)
        {
            Poll::Ready(r) => futures::future::ready(r.map(Arc::new)).boxed(),
            Poll::Pending => {
                let task = tokio::spawn(eval);
                async move {
                    match task.await {
                        Ok(r) => r.map(Arc::new),
                        Err(e) => Err(Error::new(format!("internal error: {e}"))),
                    }
                }
                .boxed()
            }
        };
        let shared = fut.shared();
        *st = State::Evaluating(shared.clone());
        Ok(shared)
    }
}

#[async_trait]
impl<R: Request> Handle for RequestHandle<R> {
    async fn write(&self, _offset: u64, data: Vec<u8>) -> Result<u32, Error> {
        let mut st = self.state.lock_unpoisoned();
        match &mut *st {
            State::Writing(buf, held) => {
                if buf.len() + data.len() > MAX_REQUEST {
                    return Err(Error::new(format!(
                        "request too large: more than {MAX_REQUEST} bytes"
                    )));
                }
                held.grow(data.len())?;
                buf.extend_from_slice(&data);
                Ok(data.len() as u32)
            }
            State::Evaluating(_) => Err(Error::new(
                "request already evaluated: open the file again for a new request",
            )),
        }
    }

    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let resp = self.response()?.await?;
        self.answered.store(true, Ordering::Release);
        Ok(slice_at(&resp, offset, count))
    }

    fn clunk(&self) {
        self.cancel.cancel();
        if self.answered.load(Ordering::Acquire) {
            let after = self.after.lock_unpoisoned().take();
            if let Some(f) = after {
                f();
            }
        }
    }
}
