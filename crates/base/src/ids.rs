//! Who this process is: the one safe way every crate asks for its user id.
//!
//! The id asked for is the *effective* uid, the one the kernel checks and
//! records: it owns the files this process creates and it is what
//! `SO_PEERCRED` reports to the other end of a socket. Every use compares
//! with one of those (a file's owner, a peer's uid) or asks "am I root?".
//! toolsrv never runs set-uid, so the real uid is the same number.

/// This process's effective uid (`geteuid(2)`).
pub fn effective_uid() -> u32 {
    crate::sys::geteuid()
}
