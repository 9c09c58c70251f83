//! The descriptor limit (CONTRACT §12): raised at startup so that
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
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // Safety: getrlimit writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_max != libc::RLIM_INFINITY && lim.rlim_max < want {
        let higher = libc::rlimit {
            rlim_cur: want,
            rlim_max: want,
        };
        // Safety: setrlimit reads the struct we own. Fails without privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &higher) } == 0 {
            return Ok(want);
        }
    }
    if lim.rlim_cur != lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // Safety: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
    }
    Ok(lim.rlim_cur)
}

/// A descriptor held in reserve: closed to make room for one `accept` when
/// the limit is reached, then reopened.
pub struct Reserve(Option<OwnedFd>);

impl Reserve {
    /// Open the reserve (`/dev/null`).
    pub fn new() -> Reserve {
        Reserve(open_null())
    }

    /// Give the descriptor back to the process.
    pub fn release(&mut self) {
        self.0 = None;
    }

    /// Take a descriptor again (if one is free).
    pub fn restore(&mut self) {
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
