//! Integration tests of the client library against the real `toolsrv serve`
//! (found in the target directory by the test kit). One test binary; each
//! area in its own module.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod reconnect;
mod server;
