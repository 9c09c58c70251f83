//! The watch crate's integration tests: the tools PID namespace and the
//! fanotify watcher with real processes, and the quarantine on real
//! directories. One test binary, a module per subject.

mod quarantine;
mod watch;
