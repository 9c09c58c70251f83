//! The descriptor limit (docs/containment.md): raised at startup so that
//! `--max-connections` fits, and a reserve descriptor that lets the accept
//! loop shed a connection when the limit is reached anyway.

use std::os::fd::OwnedFd;

/// Descriptors kept for everything but connections (tools' pipes and pidfds,
/// run groups, logs, the policy).
pub const HEADROOM: u64 = 512;

/// Raise the soft `RLIMIT_NOFILE` to the hard limit (and the hard limit to
/// `want` when it is lower and the server may raise it, as root); returns the
/// soft limit now in force.
pub fn raise_nofile(want: u64) -> std::io::Result<u64> {
    use crate::sys::{nofile_limit, set_nofile_limit};
    let (soft, hard) = nofile_limit()?;
    // Fails without privilege; then the hard limit stands.
    if hard != libc::RLIM_INFINITY && hard < want && set_nofile_limit(want, want).is_ok() {
        return Ok(want);
    }
    if soft != hard {
        set_nofile_limit(hard, hard)?;
    }
    Ok(hard)
}

/// A descriptor held in reserve: closed to make room for one `accept` when
/// the limit is reached, then reopened.
pub(crate) struct Reserve(Option<OwnedFd>);

impl Reserve {
    /// Open the reserve (`/dev/null`).
    pub(crate) fn new() -> Reserve {
        Reserve(open_null())
    }

    /// Give the descriptor back to the process.
    pub(crate) fn release(&mut self) {
        self.0 = None;
    }

    /// Take a descriptor again (if one is free).
    pub(crate) fn restore(&mut self) {
        if self.0.is_none() {
            self.0 = open_null();
        }
    }
}

impl Default for Reserve {
    fn default() -> Self {
        Reserve::new()
    }
}

fn open_null() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}
