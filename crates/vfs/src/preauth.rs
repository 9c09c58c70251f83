//! What a connection may hold before it attaches (docs/containment.md, "Hostile
//! clients"): its read buffer is small, its frames are small, and the buffers
//! of every connection not yet attached come out of one process-wide budget.
//!
//! Anyone who can connect can open a connection; only a client holding the
//! secret attaches. Until it does, a connection reads through a
//! [`PRE_AUTH_BUFFER`]-byte buffer, a frame larger than [`PRE_AUTH_MSIZE`]
//! closes it (a legitimate client sends nothing but `Tversion`, `Tauth`, a
//! short write of the secret and `Tattach` first), and it is charged
//! [`PRE_AUTH_CHARGE`] bytes of [`PRE_AUTH_BUDGET`]: when the budget is spent, a
//! new connection is closed at once. The charge goes back when the
//! connection attaches or closes. The msize agreed in `Rversion` applies from
//! the attach on.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest frame a connection may send before it attaches.
pub const PRE_AUTH_MSIZE: u32 = 8 << 10;
/// The read buffer of a connection that has not attached.
pub const PRE_AUTH_BUFFER: usize = 8 << 10;
/// What one connection that has not attached may hold at most: its read
/// buffer and one frame.
pub const PRE_AUTH_CHARGE: usize = PRE_AUTH_BUFFER + PRE_AUTH_MSIZE as usize;
/// The buffers of all connections that have not attached, together.
pub const PRE_AUTH_BUDGET: usize = 64 << 20;

/// Bytes charged to connections that have not attached.
static CHARGED: AtomicUsize = AtomicUsize::new(0);

/// A connection's share of [`PRE_AUTH_BUDGET`], given back on drop.
#[derive(Debug)]
pub(crate) struct Charge {
    held: usize,
}

impl Charge {
    /// [`PRE_AUTH_CHARGE`] bytes of the budget, or `None` when it does not
    /// have them.
    pub(crate) fn take() -> Option<Charge> {
        take_from(&CHARGED, PRE_AUTH_CHARGE, PRE_AUTH_BUDGET).then_some(Charge {
            held: PRE_AUTH_CHARGE,
        })
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        CHARGED.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// Adds `n` to `used` if the sum stays within `limit`; whether it did.
fn take_from(used: &AtomicUsize, n: usize, limit: usize) -> bool {
    used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
        u.checked_add(n).filter(|t| *t <= limit)
    })
    .is_ok()
}

/// Bytes charged to connections that have not attached, now.
pub fn charged() -> usize {
    CHARGED.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_fits_the_limit_or_is_refused() {
        let used = AtomicUsize::new(0);
        assert!(take_from(&used, 60, 100));
        assert!(!take_from(&used, 41, 100));
        assert!(take_from(&used, 40, 100));
        assert_eq!(used.load(Ordering::Relaxed), 100);
    }
}
