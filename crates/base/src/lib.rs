//! The few helpers every toolsrv crate shares, below the 9P codec and the
//! protocol types: [`effective_uid`] (the one safe way to ask who this
//! process is), [`LockUnpoisoned`] (locking a mutex whose holder panicked),
//! [`FileStamp`] (one version of a file, to re-read it only when it
//! changed), [`pidfd_send_signal`] (a signal that cannot reach a reused
//! pid), [`ProcessId`] (a process named by pid and start time),
//! [`process::kill`] (the one wrapper of kill(2)), [`Sibling`] (the files
//! a server keeps beside its socket), [`userdir`] (toolsrv's private
//! per-user directory) and [`registry`] (the live servers and bridges of
//! this user, kept there).
//!
//! A crate of its own because the crates that use them have no other common
//! dependency: `toolsrv-vfs` builds on `toolsrv-wire` alone and
//! `toolsrv-metadata` on `toolsrv-protocol` alone. It depends on nothing but
//! `libc`.

mod ids;
pub mod process;
pub mod registry;
mod sibling;
mod stamp;
mod sync;
mod sys;
pub mod userdir;

pub use ids::effective_uid;
pub use process::ProcessId;
pub use sibling::Sibling;
pub use stamp::FileStamp;
pub use sync::LockUnpoisoned;
pub use sys::pidfd_send_signal;
