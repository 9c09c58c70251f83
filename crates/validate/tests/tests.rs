//! The validator's integration tests: its rules and the rate limiter. One
//! test binary, a module per subject.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod validate;
mod validate_rate;
