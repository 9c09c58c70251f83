//! The test kit's own tests: its helpers and the skip rule. One test
//! binary, a module per subject.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kit;
mod skip;
