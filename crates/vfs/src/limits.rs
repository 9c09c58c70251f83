//! What one connection may hold (docs/containment.md, "Hostile clients"): fids, unsent
//! replies, request data written but not yet answered, and how long it may stay
//! without attaching.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

/// The most fids one connection may hold.
pub const MAX_FIDS: usize = 4096;
/// The most reply bytes of one connection that may wait unsent: beyond it the
/// connection's requests are not read until the peer reads its replies.
pub const MAX_UNSENT: usize = 16 << 20;
/// The most request data (writes to write-then-read files such as `proc/new`
/// and `tools`) one connection may have written and not yet had answered.
pub const MAX_REQUEST_BYTES: usize = 32 << 20;

/// The bounds of one connection.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Close the connection if it has not attached within this long.
    pub auth_timeout: Option<Duration>,
    /// At most this many fids ([`MAX_FIDS`]).
    pub max_fids: usize,
    /// Stop reading requests while more reply bytes than this are unsent ([`MAX_UNSENT`]).
    pub max_unsent: usize,
    /// At most this much request data written and not yet answered ([`MAX_REQUEST_BYTES`]).
    pub max_request_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            auth_timeout: None,
            max_fids: MAX_FIDS,
            max_unsent: MAX_UNSENT,
            max_request_bytes: MAX_REQUEST_BYTES,
        }
    }
}

/// The request data of one connection that was written and not yet answered.
/// Handlers of write-then-read files take a [`Reservation`] for what they buffer.
#[derive(Debug, Clone)]
pub struct RequestBudget(Arc<BudgetInner>);

#[derive(Debug)]
struct BudgetInner {
    used: AtomicUsize,
    limit: usize,
}

impl Default for RequestBudget {
    fn default() -> RequestBudget {
        RequestBudget::new(MAX_REQUEST_BYTES)
    }
}

impl RequestBudget {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: usize) -> RequestBudget {
        RequestBudget(Arc::new(BudgetInner {
            used: AtomicUsize::new(0),
            limit,
        }))
    }

    /// The bytes held by reservations now.
    pub fn used(&self) -> usize {
        self.0.used.load(Ordering::Relaxed)
    }

    /// An empty reservation, grown as request data arrives.
    pub fn reservation(&self) -> Reservation {
        Reservation {
            budget: self.clone(),
            held: 0,
        }
    }
}

/// Bytes of a [`RequestBudget`] held until this is dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: RequestBudget,
    held: usize,
}

impl Reservation {
    /// Hold `n` more bytes, or fail with `request too large` when the
    /// connection's budget does not have them.
    pub fn grow(&mut self, n: usize) -> Result<(), Error> {
        let inner = &self.budget.0;
        let r = inner
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|t| *t <= inner.limit)
            });
        match r {
            Ok(_) => {
                self.held += n;
                Ok(())
            }
            Err(_) => Err(Error::new(format!(
                "request too large: this connection's unanswered requests would exceed {} bytes",
                inner.limit
            ))),
        }
    }

    /// The bytes held.
    pub fn held(&self) -> usize {
        self.held
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.0.used.fetch_sub(self.held, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_the_connection_budget_and_give_it_back() {
        let b = RequestBudget::new(100);
        let mut r1 = b.reservation();
        r1.grow(60).expect("fits");
        let mut r2 = b.reservation();
        let e = r2.grow(41).expect_err("over");
        assert!(e.0.starts_with("request too large"), "{e}");
        r2.grow(40).expect("fits");
        assert_eq!(b.used(), 100);
        drop(r1);
        assert_eq!(b.used(), 40);
        r2.grow(60).expect("fits again");
        drop(r2);
        assert_eq!(b.used(), 0);
    }
}
