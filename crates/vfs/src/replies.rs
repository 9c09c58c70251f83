//! The reply budget of one connection: reply data exists only under a permit
//! for its bytes, so what a connection's replies hold while its peer does not
//! read them is bounded ([`crate::limits::MAX_UNSENT`]).
//!
//! - The connection loop takes permits for the replies it queued; when none
//!   are left it writes them at once, and so stops reading requests until the
//!   peer has read enough (back-pressure, not buffering).
//! - A request that waits in its own task polls its handler only while it holds
//!   a permit for the reply's largest size ([`Replies::gated`]), and gives the
//!   permit back whenever the handler is still waiting: a thousand blocked
//!   reads hold nothing, and those that complete at once share the budget.
//!
//! Permits travel with the queued reply and are dropped once it was written,
//! or with the request when it is flushed or its connection closes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Permits for queued reply bytes.
pub(crate) type Permit = OwnedSemaphorePermit;

type Acquire = Pin<Box<dyn Future<Output = Result<Permit, tokio::sync::AcquireError>> + Send>>;

/// The reply budget of one connection.
#[derive(Clone)]
pub(crate) struct Replies {
    sem: Arc<Semaphore>,
    limit: u32,
}

impl Replies {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Replies {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        Replies {
            sem: Arc::new(Semaphore::new(limit as usize)),
            limit,
        }
    }

    fn clamp(&self, n: usize) -> u32 {
        u32::try_from(n).unwrap_or(u32::MAX).min(self.limit)
    }

    /// Permits for `n` bytes, if the budget has them now.
    pub(crate) fn try_take(&self, n: usize) -> Option<Permit> {
        self.sem.clone().try_acquire_many_owned(self.clamp(n)).ok()
    }

    /// Drive `fut` to its end, polling it only while holding permits for
    /// `reserve` bytes; returns its output with those permits (to be dropped
    /// once its reply was written). Waiting for permits or for `fut` never
    /// holds any.
    pub(crate) async fn gated<F>(&self, reserve: usize, fut: &mut F) -> (F::Output, Option<Permit>)
    where
        F: Future + Unpin,
    {
        if reserve == 0 {
            return (fut.await, None);
        }
        let n = self.clamp(reserve);
        let mut acquiring: Option<Acquire> = None;
        std::future::poll_fn(|cx: &mut Context<'_>| {
            let permit = match self.sem.clone().try_acquire_many_owned(n) {
                Ok(p) => {
                    acquiring = None;
                    p
                }
                Err(_) => {
                    let acq = acquiring
                        .get_or_insert_with(|| Box::pin(self.sem.clone().acquire_many_owned(n)));
                    match acq.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => {
                            acquiring = None;
                            match r {
                                Ok(p) => p,
                                // Never closed; poll without a budget rather than hang.
                                Err(_) => return Pin::new(&mut *fut).poll(cx).map(|o| (o, None)),
                            }
                        }
                    }
                }
            };
            match Pin::new(&mut *fut).poll(cx) {
                Poll::Ready(out) => Poll::Ready((out, Some(permit))),
                // Its waker is registered; the permit goes back until it fires.
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waiting_handlers_hold_no_budget_and_ready_ones_share_it() {
        let r = Replies::new(100);
        let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let (r, mut ready, mut release) = (r.clone(), ready_rx.clone(), release_rx.clone());
            let done = done.clone();
            tasks.push(tokio::spawn(async move {
                let mut fut = Box::pin(async move {
                    let _ = ready.wait_for(|v| *v).await;
                    7
                });
                let (out, permit) = r.gated(60, &mut fut).await;
                assert!(permit.is_some());
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = release.wait_for(|v| *v).await;
                out
            }));
        }
        // Ten handlers that wait: none holds a permit meanwhile.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(r.sem.available_permits(), 100);
        // All become ready: only one can complete while its permit is held.
        ready_tx.send_replace(true);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 1);
        release_tx.send_replace(true);
        for t in tasks {
            assert_eq!(t.await.expect("task"), 7);
        }
        assert_eq!(r.sem.available_permits(), 100);
    }
}
