//! The watch crate's integration tests: the tools PID namespace and the
//! fanotify watcher with real processes, and the quarantine on real
//! directories. One test binary, a module per subject.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quarantine;
mod watch;
